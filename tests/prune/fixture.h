// What the pruning tests share: a tiny random Llama written as GGUF beside tiny corpora
// with its tokenizer (so calibration, validation and tailoring run for real, in seconds),
// and unit scores built from per-unit rules.
#pragma once

#include <functional>
#include <string>

#include "clone/data/tokenizer_train.h"
#include "clone/prune/importance.h"
#include "clone/train/llama.h"
#include "data/fixture.h"

namespace cln::prune::testing {

struct TinyModel {
  std::string data;  // corpora (clone data build's layout)
  std::string path;  // the model GGUF
  Vocab vocab;
  ModelConfig config;
  train::LlamaModel model;
};

// n_layer layers of 32 wide, 4 heads in 2 KV groups, FFN 48, context 64, seed 9.
inline TinyModel tiny_model(const std::string& name, int64_t n_layer) {
  TinyModel t{data::testing::tiny_data(name), "", {}, {}, {}};
  t.vocab = data::vocab_from_sentencepiece(t.data + "/tokenizer.model");
  t.config =
      train::llama_shape(static_cast<int64_t>(t.vocab.tokens.size()), 32, n_layer, 4, 2, 48, 64);
  t.model = train::LlamaModel::init(t.config, 9);
  t.path = data::testing::temp_dir(name + "-model") + "/dense.gguf";
  t.model.write_gguf(t.path, t.vocab);
  return t;
}

// Magnitude-method scores from rules: head(layer, h), kv(layer, g), ff(layer, f).
inline Scores rule_scores(const ModelConfig& c, const std::function<double(size_t, int64_t)>& head,
                          const std::function<double(size_t, int64_t)>& kv,
                          const std::function<double(size_t, int64_t)>& ff) {
  Scores s;
  s.method = Method::Magnitude;
  const auto n = static_cast<size_t>(c.n_layer());
  s.attn.assign(n, 1), s.ffn.assign(n, 1);
  for (size_t il = 0; il < n; ++il) {
    const LayerShape& sh = c.layers[il];
    s.head.emplace_back(), s.kv.emplace_back(), s.ff.emplace_back();
    for (int64_t h = 0; h < sh.n_head; ++h) s.head.back().push_back(head(il, h));
    for (int64_t g = 0; g < sh.n_head_kv; ++g) s.kv.back().push_back(kv(il, g));
    for (int64_t f = 0; f < sh.n_ff; ++f) s.ff.back().push_back(ff(il, f));
  }
  return s;
}

}  // namespace cln::prune::testing
