#include "clone/engine/presets.h"

#include "clone/core/error.h"

namespace cln {

ModelConfig model_preset(const std::string& name) {
  ModelConfig m;
  m.name = name;
  auto uniform = [&](int n_layer, int64_t heads, int64_t kv, int64_t ff) {
    m.layers.assign(static_cast<size_t>(n_layer), LayerShape{heads, kv, ff});
  };
  if (name == "gemma-2b") {
    m.n_vocab = 256000, m.n_embd = 2048, m.head_dim_k = m.head_dim_v = 256;
    m.n_ctx_train = 8192, m.tied_output = true, m.weight_type = DType::F16;
    uniform(18, 8, 1, 16384);
  } else if (name == "llama2-7b") {
    m.n_vocab = 32000, m.n_embd = 4096, m.head_dim_k = m.head_dim_v = 128;
    m.n_ctx_train = 4096, m.weight_type = DType::F16;
    uniform(32, 32, 32, 11008);
  } else if (name == "tinyllama-1.1b" || name == "tinyllama") {
    m.name = "tinyllama-1.1b";
    m.n_vocab = 32000, m.n_embd = 2048, m.head_dim_k = m.head_dim_v = 64;
    m.n_ctx_train = 2048, m.weight_type = DType::F16;
    uniform(22, 32, 4, 5632);
  } else if (name == "base") {
    m.n_vocab = 4096, m.n_embd = 256, m.head_dim_k = m.head_dim_v = 32;
    m.n_ctx_train = 2048, m.weight_type = DType::F32;
    uniform(12, 8, 4, 640);
  } else {
    fail("unknown model preset '", name, "' (gemma-2b, llama2-7b, tinyllama-1.1b, base)");
  }
  return m;
}

std::vector<std::string> model_preset_names() {
  return {"gemma-2b", "llama2-7b", "tinyllama-1.1b", "base"};
}

}  // namespace cln
