// Training throughput: full steps on random tokens, FLOPs from the shared accounting.
#include <chrono>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/engine/accounting.h"
#include "clone/train/trainer.h"

namespace cln::train {

StepBench bench_train_step(const ModelConfig& c, int64_t n_seq, int64_t seq_len, int steps,
                           int threads) {
  if (steps < 1) fail("bench: at least one step");
  LlamaModel m = LlamaModel::init(c, 1);
  AdamW opt(m.params(), AdamWConfig{});
  kernels::ThreadPool pool(threads);
  Rng rng(5);
  std::vector<int32_t> tok(static_cast<size_t>(n_seq * seq_len)), tgt(tok.size());
  double total = 0;
  for (int s = 0; s <= steps; ++s) {
    for (size_t i = 0; i < tok.size(); ++i) {
      tok[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.n_vocab)));
      tgt[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.n_vocab)));
    }
    const auto t0 = std::chrono::steady_clock::now();
    Graph g(&pool);
    TensorP loss = op::cross_entropy(g, m.forward(g, tok, n_seq, seq_len), tgt);
    g.backward(loss);
    opt.step(1e-4);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) total += dt;  // step 0 warms caches and the buffer free list
  }
  StepBench b;
  b.params = c.n_params();
  b.step_s = total / steps;
  b.tokens_per_s = static_cast<double>(n_seq * seq_len) / b.step_s;
  b.gflops = train_step_flops(c, n_seq, seq_len) / b.step_s / 1e9;
  return b;
}

}  // namespace cln::train
