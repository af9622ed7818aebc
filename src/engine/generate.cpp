#include "clone/engine/generate.h"

#include <chrono>

#include "clone/core/error.h"

namespace cln {

const char* stop_name(StopReason r) {
  switch (r) {
    case StopReason::Eos:
      return "eos";
    case StopReason::Limit:
      return "limit";
    case StopReason::ContextFull:
      return "context full";
    case StopReason::Caller:
      return "caller";
  }
  return "?";
}

Generation generate(Context& ctx, std::span<const int32_t> prompt, const GenerateParams& p,
                    const std::function<bool(int32_t)>& on_token) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) fail("generate: the prompt has no tokens");
  if (p.max_new < 0) fail("generate: max_new must be >= 0, got ", p.max_new);
  if (ctx.n_past() + static_cast<int64_t>(prompt.size()) >= ctx.n_ctx())
    fail("the prompt is ", prompt.size(), " tokens after ", ctx.n_past(),
         " cached; the context holds ", ctx.n_ctx(), " (raise the context or shorten the prompt)");
  Generation g;
  g.prompt_tokens = static_cast<int64_t>(prompt.size());
  Sampler sampler(p.sampling);
  const auto t0 = clock::now();
  std::span<const float> logits = ctx.eval(prompt);
  const auto t1 = clock::now();
  g.prefill_s = std::chrono::duration<double>(t1 - t0).count();
  while (static_cast<int64_t>(g.tokens.size()) < p.max_new) {
    const int32_t next = sampler.sample(logits);
    if (next == p.eos) {
      g.stop = StopReason::Eos;
      break;
    }
    g.tokens.push_back(next);
    if (on_token && !on_token(next)) {
      g.stop = StopReason::Caller;
      break;
    }
    if (static_cast<int64_t>(g.tokens.size()) == p.max_new) break;
    if (ctx.n_past() >= ctx.n_ctx()) {
      g.stop = StopReason::ContextFull;
      break;
    }
    const int32_t one[1] = {next};
    logits = ctx.eval(one);
  }
  g.decode_s = std::chrono::duration<double>(clock::now() - t1).count();
  return g;
}

}  // namespace cln
