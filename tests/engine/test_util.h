// Helpers shared by the engine tests: temporary paths and small random models.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "clone/engine/lora.h"
#include "clone/engine/model_writer.h"

namespace cln::test {

inline std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("clone_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

// A deci model with GQA, a zero-head layer and a zero-FFN layer.
inline ModelConfig per_layer_config() {
  ModelConfig c;
  c.n_vocab = 300;
  c.n_embd = 64;
  c.n_ctx_train = 64;
  c.head_dim_k = c.head_dim_v = 16;
  c.rope_base = 10000.0f;
  c.rms_eps = 1e-5f;
  c.layers = {{4, 2, 96}, {2, 1, 64}, {0, 0, 32}, {3, 1, 0}, {4, 4, 64}};
  return c;
}

// A random LoRA adapter of rank r on the given targets of every layer that has them.
inline std::string random_adapter(const ModelConfig& c, const std::vector<std::string>& targets, int64_t r,
                                  float alpha, uint32_t seed, const std::string& name) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  std::vector<LoraTensorData> ts;
  for (int64_t il = 0; il < c.n_layer(); ++il) {
    const LayerShape& l = c.layers[static_cast<size_t>(il)];
    for (const auto& t : targets) {
      int64_t out = 0, in = c.n_embd;
      if (t == "attn_q" && l.n_head) out = l.n_head * c.head_dim_k;
      if (t == "attn_k" && l.n_head) out = l.n_head_kv * c.head_dim_k;
      if (t == "attn_v" && l.n_head) out = l.n_head_kv * c.head_dim_v;
      if (t == "attn_output" && l.n_head) out = c.n_embd, in = l.n_head * c.head_dim_v;
      if ((t == "ffn_gate" || t == "ffn_up") && l.n_ff) out = l.n_ff;
      if (t == "ffn_down" && l.n_ff) out = c.n_embd, in = l.n_ff;
      if (!out) continue;
      LoraTensorData d{"blk." + std::to_string(il) + "." + t + ".weight", out, in, r, {}, {}};
      d.a.resize(static_cast<size_t>(r * in));
      d.b.resize(static_cast<size_t>(out * r));
      for (auto& v : d.a) v = nd(rng);
      for (auto& v : d.b) v = nd(rng);
      ts.push_back(std::move(d));
    }
  }
  const std::string p = tmp_path(name);
  write_lora_adapter(p, name, alpha, ts, "deci");
  return p;
}

}  // namespace cln::test
