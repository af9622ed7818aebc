// Requests to serve: replayed from the Azure LLM inference traces of 2023 (Patel et al.,
// "Splitwise: Efficient generative LLM inference using phase splitting", ISCA 2024;
// CC-BY 4.0), loaded from a CSV, or generated with long-tailed lengths fitted to those
// traces. Each request carries an SLO class (TTFT and TPOT targets of an edge app).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cln::workload {

// TTFT target = ttft_base_s + ttft_per_token_s * prompt tokens (reading a long prompt
// may take longer); TPOT target is per output token after the first.
struct SloClass {
  std::string name;
  double ttft_base_s = 0;
  double ttft_per_token_s = 0;
  double tpot_s = 0;
};
const std::vector<SloClass>& slo_classes();  // chatbot, smart-reply, code-completion
const SloClass& slo_class(const std::string& name);

struct Request {
  int64_t id = 0;
  double arrival_s = 0;  // open-loop arrival (trace time)
  double think_s = 0;    // closed-loop: pause after the previous request before this one
  int64_t prompt = 0;    // prompt tokens
  int64_t output = 0;    // output tokens (the true length)
  std::string slo;       // class name
  double ttft_target_s = 0;
  double tpot_target_s = 0;
  int32_t expert_set = -1;  // LoRA expert set the request is served with (-1: base model);
                            // a set other than the loaded one is swapped in before it runs
};

// Sets the targets from the class (scaled: >1 loosens, <1 tightens).
void apply_slo(Request& r, const SloClass& c, double scale = 1);

// Azure trace CSV: TIMESTAMP,ContextTokens,GeneratedTokens. Arrivals relative to the
// first row. limit = 0 reads all. Throws cln::Error naming the line on a bad row.
std::vector<Request> load_azure(const std::string& path, size_t limit = 0);
// clone's CSV: arrival_s,prompt,output[,slo[,ttft_target_s,tpot_target_s]] with a header.
std::vector<Request> load_csv(const std::string& path);
void save_csv(const std::vector<Request>& reqs, const std::string& path);

// Lognormal lengths: log(tokens) ~ N(mu, sigma), clipped to [lo, hi].
struct LengthDist {
  double mu = 0, sigma = 1;
  int64_t lo = 1, hi = 4096;
};
struct LengthFit {
  LengthDist prompt, output;
};
LengthFit fit_lengths(const std::vector<Request>& reqs);  // moments of log lengths
// Fits of the two Azure traces (computed by fit_lengths; tests check they still match).
LengthFit azure_conv_fit();
LengthFit azure_code_fit();

struct GeneratorSpec {
  std::string kind = "chat";  // "chat" (conversation lengths; chatbot / smart-reply mix) or "code"
  size_t n = 200;
  uint64_t seed = 1;
  double mean_think_s = 10;         // closed-loop think time (exponential)
  double mean_interarrival_s = 90;  // open-loop Poisson arrivals
  double slo_scale = 1;
  int64_t max_context = 4096;  // prompt + output never exceed the runtime's context
};
std::vector<Request> generate(const GeneratorSpec& spec);

// Path of the shipped Azure trace ("conv" or "code") under the shared data folder.
std::string azure_trace_path(const std::string& which);

}  // namespace cln::workload
