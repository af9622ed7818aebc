// Training throughput: full steps on random tokens, FLOPs from the shared accounting.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

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

TorchBench bench_torch_step(const std::string& python, const std::string& script,
                            const ModelConfig& c, int64_t n_seq, int64_t seq_len, int steps,
                            int threads) {
  if (!c.uniform()) fail("the PyTorch benchmark runs uniform llama shapes");
  const LayerShape& l = c.layers.front();
  char cmd[1024];
  std::snprintf(cmd, sizeof cmd,
                "%s %s bench --threads %d --vocab %lld --n-embd %lld --n-layer %lld --n-head %lld "
                "--n-head-kv %lld --n-ff %lld --batch %lld --seq-len %lld --steps %d",
                python.c_str(), script.c_str(), threads, static_cast<long long>(c.n_vocab),
                static_cast<long long>(c.n_embd), static_cast<long long>(c.n_layer()),
                static_cast<long long>(l.n_head), static_cast<long long>(l.n_head_kv),
                static_cast<long long>(l.n_ff), static_cast<long long>(n_seq),
                static_cast<long long>(seq_len), steps);
  FILE* p = popen(cmd, "r");
  if (!p) fail("cannot run ", cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) fail("the PyTorch benchmark failed: ", cmd);
  const size_t brace = out.find('{');
  if (brace == std::string::npos) fail("the PyTorch benchmark printed no result: ", out);
  try {
    const auto j = nlohmann::json::parse(out.substr(brace));
    return {j.at("impl").get<std::string>(), j.at("params").get<int64_t>(),
            j.at("step_s").get<double>(), j.at("tokens_per_s").get<double>()};
  } catch (const nlohmann::json::exception& e) {
    fail("the PyTorch benchmark's result is malformed: ", e.what());
  }
}

}  // namespace cln::train
