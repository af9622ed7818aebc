#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "clone/core/error.h"
#include "clone/workload/workload.h"

using namespace cln;
using namespace cln::workload;

namespace {
std::string azure(const char* which) {
  return std::string(CLONE_SHARED_DIR) + "/data/azure-llm-inference-2023/AzureLLMInferenceTrace_" +
         which + ".csv";
}
std::string tmp(const char* name, const std::string& text) {
  std::string p = std::string(CLONE_BINARY_DIR) + "/" + name;
  std::ofstream(p) << text;
  return p;
}
int64_t r_min(const std::vector<Request>& rs, int64_t Request::*len) {
  int64_t m = rs.at(0).*len;
  for (const auto& r : rs) m = std::min(m, r.*len);
  return m;
}
int64_t r_max(const std::vector<Request>& rs, int64_t Request::*len) {
  int64_t m = rs.at(0).*len;
  for (const auto& r : rs) m = std::max(m, r.*len);
  return m;
}
void expect_error(const std::string& path, const char* fragment) {
  try {
    load_csv(path);
    FAIL() << "no error for " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(Azure, ReplaysAndMatchesTheShippedFit) {
  auto conv = load_azure(azure("conv"));
  ASSERT_EQ(conv.size(), 19366u);
  EXPECT_EQ(conv[0].prompt, 374);
  EXPECT_EQ(conv[0].output, 44);
  EXPECT_DOUBLE_EQ(conv[0].arrival_s, 0);
  EXPECT_NEAR(conv[1].arrival_s, 50.9951690 - 46.6805900, 1e-4);
  // fit_lengths against the moments computed here another way (two passes: the mean,
  // then the mean squared deviation), and the shipped constants (rounded to 3 places)
  // against both.
  auto moments = [](const std::vector<Request>& rs, int64_t Request::*len) {
    double mean = 0;
    for (const auto& r : rs) mean += std::log(static_cast<double>(r.*len));
    mean /= static_cast<double>(rs.size());
    double var = 0;
    for (const auto& r : rs) var += std::pow(std::log(static_cast<double>(r.*len)) - mean, 2);
    int64_t lo = r_min(rs, len), hi = r_max(rs, len);
    return LengthDist{mean, std::sqrt(var / static_cast<double>(rs.size())), lo, hi};
  };
  auto expect_fit = [](const LengthDist& got, const LengthDist& want, double tol) {
    EXPECT_NEAR(got.mu, want.mu, tol);
    EXPECT_NEAR(got.sigma, want.sigma, tol);
    EXPECT_EQ(got.lo, want.lo);
    EXPECT_EQ(got.hi, want.hi);
  };
  const LengthFit f = fit_lengths(conv);
  const LengthDist conv_prompt = moments(conv, &Request::prompt),
                   conv_output = moments(conv, &Request::output);
  expect_fit(f.prompt, conv_prompt, 1e-9);
  expect_fit(f.output, conv_output, 1e-9);
  expect_fit(azure_conv_fit().prompt, conv_prompt, 5e-4);
  expect_fit(azure_conv_fit().output, conv_output, 5e-4);
  auto code = load_azure(azure("code"), 3000);
  EXPECT_EQ(code.size(), 3000u);
  const auto all_code = load_azure(azure("code"));
  expect_fit(azure_code_fit().prompt, moments(all_code, &Request::prompt), 5e-4);
  expect_fit(azure_code_fit().output, moments(all_code, &Request::output), 5e-4);
}

TEST(Generator, SeededLongTailedAndFitted) {
  GeneratorSpec g;
  g.n = 4000;
  g.seed = 5;
  auto a = generate(g), b = generate(g);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].prompt, b[i].prompt);
  g.seed = 6;
  EXPECT_NE(generate(g)[0].prompt + generate(g)[1].output, a[0].prompt + a[1].output);
  LengthFit f = fit_lengths(a);
  EXPECT_NEAR(f.output.mu, azure_conv_fit().output.mu, 0.1);
  int64_t p50 = 0, pmax = 0;
  std::vector<int64_t> ps;
  size_t chatbot = 0;
  for (const auto& r : a) {
    ps.push_back(r.prompt);
    // Targets by the class's formula: a base plus a per-prompt-token allowance.
    const SloClass& c = slo_class(r.slo);
    EXPECT_NEAR(r.ttft_target_s, c.ttft_base_s + c.ttft_per_token_s * static_cast<double>(r.prompt),
                1e-12);
    EXPECT_DOUBLE_EQ(r.tpot_target_s, c.tpot_s);
    chatbot += r.slo == "chatbot";
  }
  // 70% chatbot, 30% smart-reply: 4000 draws put the share within 0.02 (3 sd of 0.0072).
  EXPECT_NEAR(static_cast<double>(chatbot) / static_cast<double>(a.size()), 0.7, 0.022);
  EXPECT_EQ(
      chatbot + static_cast<size_t>(std::count_if(
                    a.begin(), a.end(), [](const Request& r) { return r.slo == "smart-reply"; })),
      a.size());
  std::sort(ps.begin(), ps.end());
  p50 = ps[ps.size() / 2], pmax = ps.back();
  EXPECT_GT(pmax, 3 * p50);  // long tail
  // A short context: the long-tailed draws must be cut to fit it (outputs to half of it,
  // prompts to the rest), and many are.
  g.max_context = 512;
  int out_cut = 0, prompt_cut = 0;
  for (const auto& r : generate(g)) {
    EXPECT_LE(r.output, 256);
    EXPECT_LE(r.prompt + r.output, 512);
    out_cut += r.output == 256;
    prompt_cut += r.prompt + r.output == 512;
  }
  EXPECT_GT(out_cut, 400);      // 1078 of 4000 with this seed
  EXPECT_GT(prompt_cut, 2000);  // 3145
  GeneratorSpec c;
  c.kind = "code";
  EXPECT_EQ(generate(c)[0].slo, "code-completion");
  c.kind = "poetry";
  EXPECT_THROW(generate(c), Error);
}

TEST(Csv, RoundTripAndBadTraces) {
  GeneratorSpec g;
  g.n = 20;
  auto a = generate(g);
  std::string p = std::string(CLONE_BINARY_DIR) + "/trace_rt.csv";
  save_csv(a, p);
  auto b = load_csv(p);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {  // every field the CSV holds, 10 digits
    SCOPED_TRACE(i);
    EXPECT_NEAR(b[i].arrival_s, a[i].arrival_s, 1e-9 * a[i].arrival_s);
    EXPECT_EQ(b[i].prompt, a[i].prompt);
    EXPECT_EQ(b[i].output, a[i].output);
    EXPECT_EQ(b[i].slo, a[i].slo);
    EXPECT_NEAR(b[i].ttft_target_s, a[i].ttft_target_s, 1e-9 * a[i].ttft_target_s);
    EXPECT_NEAR(b[i].tpot_target_s, a[i].tpot_target_s, 1e-9 * a[i].tpot_target_s);
  }
  expect_error(tmp("t1.csv", "when,prompt,output\n0,1,1\n"), "expected the header");
  expect_error(tmp("t2.csv", "arrival_s,prompt,output\n0,12,x\n"), "t2.csv:2: output");
  expect_error(tmp("t3.csv", "arrival_s,prompt,output\n0,-4,3\n"), "prompt must be positive");
  expect_error(tmp("t4.csv", "arrival_s,prompt,output\n5,4,3\n1,4,3\n"), "must not decrease");
  expect_error(tmp("t5.csv", "arrival_s,prompt,output\n0,4\n"), "expected 3 fields");
  expect_error(tmp("t6.csv", "arrival_s,prompt,output,slo\n0,4,3,karaoke\n"), "unknown SLO class");
  expect_error(
      tmp("t7.csv",
          "arrival_s,prompt,output,slo,ttft_target_s,tpot_target_s\n0,4,3,chatbot,-1,0.2\n"),
      "ttft_target_s must be positive");
  try {
    load_azure(tmp("t8.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,3,4\n"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TIMESTAMP"), std::string::npos);
  }
}
