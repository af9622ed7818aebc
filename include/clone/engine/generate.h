// Text generation: the one loop that turns a prompt into new tokens, used by `clone run`,
// the samples report, the expert tables and the server.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "clone/engine/context.h"
#include "clone/engine/sampler.h"

namespace cln {

struct GenerateParams {
  int64_t max_new = 128;   // tokens to generate at most
  SamplerParams sampling;  // temperature 0 = greedy
  int32_t eos = -1;        // stops generation when sampled (not returned); -1 = none
};

enum class StopReason : uint8_t { Eos, Limit, ContextFull, Caller };
const char* stop_name(StopReason r);  // "eos", "limit", "context full", "caller"

struct Generation {
  std::vector<int32_t> tokens;  // generated, the EOS that ended it excluded
  StopReason stop = StopReason::Limit;
  int64_t prompt_tokens = 0;
  double prefill_s = 0;  // wall time of the prompt pass (time to first token)
  double decode_s = 0;   // wall time of the passes after it
};

// Runs the prompt after what ctx already holds (reset ctx first for a new request), then
// samples one token at a time until EOS, max_new tokens, a full context, or on_token
// returning false (it sees each token as soon as it is chosen). The last token is not run
// through the model (nothing follows it). Throws cln::Error if the prompt does not leave
// room for one more token in the context.
Generation generate(Context& ctx, std::span<const int32_t> prompt, const GenerateParams& p,
                    const std::function<bool(int32_t)>& on_token = {});

}  // namespace cln
