#include "clone/workload/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "clone/core/error.h"
#include "clone/core/resources.h"
#include "clone/core/rng.h"

namespace cln::workload {

const std::vector<SloClass>& slo_classes() {
  // Targets for a 2B-class model on an Orin-class board (Gemma-2B FP16 decodes at about
  // 190 ms/token there): a chatbot streams at a comfortable reading pace (~3.3 tokens/s)
  // and may take longer to answer a long prompt; a smart reply is short and must appear
  // quickly; code completion must start fast but may stream more slowly.
  static const std::vector<SloClass> c = {
      {"chatbot", 1.0, 0.0020, 0.300},
      {"smart-reply", 0.5, 0.0015, 0.250},
      {"code-completion", 0.5, 0.0010, 0.350},
  };
  return c;
}

const SloClass& slo_class(const std::string& name) {
  for (const auto& c : slo_classes())
    if (c.name == name) return c;
  fail("unknown SLO class \"", name, "\" (have: chatbot, smart-reply, code-completion)");
}

void apply_slo(Request& r, const SloClass& c, double scale) {
  r.slo = c.name;
  r.ttft_target_s = scale * (c.ttft_base_s + c.ttft_per_token_s * static_cast<double>(r.prompt));
  r.tpot_target_s = scale * c.tpot_s;
}

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

int64_t parse_tokens(const std::string& s, const std::string& where, const char* field) {
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used != s.size()) throw std::invalid_argument("");
    if (v <= 0) fail(where, ": ", field, " must be positive, got ", v);
    return v;
  } catch (const Error&) {
    throw;
  } catch (...) {
    fail(where, ": ", field, ": expected a whole number, got \"", s, "\"");
  }
}

double parse_double(const std::string& s, const std::string& where, const char* field) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size() || !std::isfinite(v)) throw std::invalid_argument("");
    return v;
  } catch (...) {
    fail(where, ": ", field, ": expected a number, got \"", s, "\"");
  }
}

// "2023-11-16 18:15:46.6805900" -> seconds since the epoch (UTC), fraction kept.
double parse_timestamp(const std::string& s, const std::string& where) {
  std::tm tm{};
  int frac_digits = 0;
  double frac = 0;
  std::istringstream is(s);
  is >> std::get_time(&tm, "%Y-%m-%d %H:%M:%S");
  if (is.fail())
    fail(where, ": TIMESTAMP: expected \"YYYY-MM-DD HH:MM:SS[.frac]\", got \"", s, "\"");
  if (is.peek() == '.') {
    is.get();
    char c;
    double scale = 0.1;
    while (is.get(c) && std::isdigit(static_cast<unsigned char>(c)) && frac_digits < 12)
      frac += scale * (c - '0'), scale /= 10, ++frac_digits;
  }
  return static_cast<double>(timegm(&tm)) + frac;
}

}  // namespace

std::vector<Request> load_azure(const std::string& path, size_t limit) {
  std::ifstream in(path);
  if (!in) fail("cannot open trace ", path);
  std::string line;
  if (!std::getline(in, line)) fail(path, ": empty trace");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != "TIMESTAMP,ContextTokens,GeneratedTokens")
    fail(path, ":1: expected the header TIMESTAMP,ContextTokens,GeneratedTokens, got \"", line,
         "\"");
  std::vector<Request> out;
  double t0 = 0;
  for (int lineno = 2; std::getline(in, line) && (limit == 0 || out.size() < limit); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::string where = path + ":" + std::to_string(lineno);
    auto f = split(line, ',');
    if (f.size() != 3) fail(where, ": expected 3 fields, got ", f.size());
    Request r;
    r.id = static_cast<int64_t>(out.size());
    double t = parse_timestamp(f[0], where);
    if (out.empty()) t0 = t;
    r.arrival_s = t - t0;
    if (r.arrival_s < 0) fail(where, ": TIMESTAMP goes backwards");
    r.prompt = parse_tokens(f[1], where, "ContextTokens");
    r.output = parse_tokens(f[2], where, "GeneratedTokens");
    out.push_back(r);
  }
  if (out.empty()) fail(path, ": no requests");
  return out;
}

std::vector<Request> load_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open trace ", path);
  std::string line;
  if (!std::getline(in, line)) fail(path, ": empty trace");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  auto head = split(line, ',');
  if (head.size() < 3 || head[0] != "arrival_s" || head[1] != "prompt" || head[2] != "output")
    fail(path,
         ":1: expected the header arrival_s,prompt,output[,slo[,ttft_target_s,tpot_target_s]], got "
         "\"",
         line, "\"");
  std::vector<Request> out;
  for (int lineno = 2; std::getline(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    std::string where = path + ":" + std::to_string(lineno);
    auto f = split(line, ',');
    if (f.size() != head.size()) fail(where, ": expected ", head.size(), " fields, got ", f.size());
    Request r;
    r.id = static_cast<int64_t>(out.size());
    r.arrival_s = parse_double(f[0], where, "arrival_s");
    if (r.arrival_s < 0) fail(where, ": arrival_s must not be negative, got ", r.arrival_s);
    if (!out.empty() && r.arrival_s < out.back().arrival_s)
      fail(where, ": arrival_s must not decrease");
    r.prompt = parse_tokens(f[1], where, "prompt");
    r.output = parse_tokens(f[2], where, "output");
    if (f.size() >= 4 && !f[3].empty()) apply_slo(r, slo_class(f[3]));
    if (f.size() >= 6) {
      r.ttft_target_s = parse_double(f[4], where, "ttft_target_s");
      r.tpot_target_s = parse_double(f[5], where, "tpot_target_s");
      if (r.ttft_target_s <= 0) fail(where, ": ttft_target_s must be positive");
      if (r.tpot_target_s <= 0) fail(where, ": tpot_target_s must be positive");
    }
    out.push_back(r);
  }
  if (out.empty()) fail(path, ": no requests");
  return out;
}

void save_csv(const std::vector<Request>& reqs, const std::string& path) {
  std::ofstream out(path);
  if (!out) fail("cannot write ", path);
  out << "arrival_s,prompt,output,slo,ttft_target_s,tpot_target_s\n";
  out.precision(10);
  for (const auto& r : reqs)
    out << r.arrival_s << "," << r.prompt << "," << r.output << "," << r.slo << ","
        << r.ttft_target_s << "," << r.tpot_target_s << "\n";
}

LengthFit fit_lengths(const std::vector<Request>& reqs) {
  if (reqs.empty()) fail("fit_lengths: no requests");
  auto fit = [&](auto get) {
    double s = 0, s2 = 0;
    int64_t lo = INT64_MAX, hi = 0;
    for (const auto& r : reqs) {
      double l = std::log(static_cast<double>(get(r)));
      s += l, s2 += l * l;
      lo = std::min(lo, get(r)), hi = std::max(hi, get(r));
    }
    double n = static_cast<double>(reqs.size()), mu = s / n;
    return LengthDist{mu, std::sqrt(std::max(0.0, s2 / n - mu * mu)), lo, hi};
  };
  return {fit([](const Request& r) { return r.prompt; }),
          fit([](const Request& r) { return r.output; })};
}

LengthFit azure_conv_fit() {
  return {{6.633, 0.985, 2, 14050}, {5.019, 0.859, 7, 1000}};
}
LengthFit azure_code_fit() {
  return {{6.999, 1.360, 3, 7437}, {2.788, 0.847, 6, 1899}};
}

std::vector<Request> generate(const GeneratorSpec& spec) {
  if (spec.kind != "chat" && spec.kind != "code")
    fail("workload kind \"", spec.kind, "\": expected chat or code");
  if (spec.n == 0) fail("workload: n must be positive");
  if (spec.max_context < 16) fail("workload: max_context must be at least 16");
  LengthFit lf = spec.kind == "chat" ? azure_conv_fit() : azure_code_fit();
  Rng rng(spec.seed);
  auto draw = [&](const LengthDist& d, int64_t cap) {
    double v = std::exp(d.mu + d.sigma * rng.normal());
    return std::clamp<int64_t>(std::llround(v), std::max<int64_t>(1, d.lo), std::min(d.hi, cap));
  };
  std::vector<Request> out;
  double t = 0;
  for (size_t i = 0; i < spec.n; ++i) {
    Request r;
    r.id = static_cast<int64_t>(i);
    r.output = draw(lf.output, spec.max_context / 2);
    r.prompt = draw(lf.prompt, spec.max_context - r.output);
    t += rng.exponential(std::max(spec.mean_interarrival_s, 1e-9));
    r.arrival_s = t;
    r.think_s = rng.exponential(std::max(spec.mean_think_s, 1e-9));
    const char* cls =
        spec.kind == "code" ? "code-completion" : (rng.uniform() < 0.7 ? "chatbot" : "smart-reply");
    apply_slo(r, slo_class(cls), spec.slo_scale);
    out.push_back(r);
  }
  return out;
}

std::string azure_trace_path(const std::string& which) {
  if (which != "conv" && which != "code")
    fail("Azure trace \"", which, "\": expected conv or code");
  return resource_path(Resource::Shared,
                       "data/azure-llm-inference-2023/AzureLLMInferenceTrace_" + which + ".csv");
}

}  // namespace cln::workload
