#include <gtest/gtest.h>

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
  LengthFit f = fit_lengths(conv), s = azure_conv_fit();
  EXPECT_NEAR(f.prompt.mu, s.prompt.mu, 0.01);
  EXPECT_NEAR(f.prompt.sigma, s.prompt.sigma, 0.01);
  EXPECT_NEAR(f.output.mu, s.output.mu, 0.01);
  EXPECT_NEAR(f.output.sigma, s.output.sigma, 0.01);
  auto code = load_azure(azure("code"), 3000);
  EXPECT_EQ(code.size(), 3000u);
  LengthFit fc = fit_lengths(load_azure(azure("code"))), sc = azure_code_fit();
  EXPECT_NEAR(fc.prompt.mu, sc.prompt.mu, 0.01);
  EXPECT_NEAR(fc.output.mu, sc.output.mu, 0.01);
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
  for (const auto& r : a) {
    ps.push_back(r.prompt);
    EXPECT_LE(r.prompt + r.output, g.max_context);
    EXPECT_GT(r.ttft_target_s, 0);
    EXPECT_TRUE(r.slo == "chatbot" || r.slo == "smart-reply");
  }
  std::sort(ps.begin(), ps.end());
  p50 = ps[ps.size() / 2], pmax = ps.back();
  EXPECT_GT(pmax, 3 * p50);  // long tail
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
  EXPECT_EQ(b[3].prompt, a[3].prompt);
  EXPECT_EQ(b[3].slo, a[3].slo);
  EXPECT_NEAR(b[3].tpot_target_s, a[3].tpot_target_s, 1e-9);
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
