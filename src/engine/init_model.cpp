// Models with seeded random weights, for tests and benchmarks of any shape.
#include <cmath>
#include <cstdio>

#include "clone/core/error.h"
#include "clone/core/hash.h"
#include "clone/core/rng.h"
#include "clone/engine/model.h"
#include "clone/engine/model_writer.h"
#include "clone/engine/schema.h"
#include "clone/kernels/ops.h"

namespace cln {

namespace {

// ggml's general.file_type: 0 all F32, 1 mostly F16, 2 mostly Q4_0, 7 mostly Q8_0.
uint32_t ggml_file_type(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q8_0:
      return 7;
  }
  return 0;
}

void add_random(GgufWriter& w, const std::string& name, int64_t rows, int64_t cols, DType type,
                float std, uint64_t seed) {
  Rng rng(name_seed(name, seed));  // per-tensor stream: adding a tensor never shifts others
  const float a = std * std::sqrt(3.0f);
  const size_t rb = dtype_row_bytes(type, cols);
  std::vector<uint8_t> data(rb * static_cast<size_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = (2.0f * static_cast<float>(rng.uniform()) - 1.0f) * a;
    kernels::quantize_row(type, row.data(), data.data() + static_cast<size_t>(r) * rb, cols);
  }
  w.add_tensor(name, type, {cols, rows}, data.data(), data.size());
}

void add_norm(GgufWriter& w, const std::string& name, int64_t n, uint64_t seed) {
  Rng rng(name_seed(name, seed));
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = 0.8f +
        0.4f * static_cast<float>(rng.uniform());  // near 1, not exactly: scaling is exercised
  w.add_tensor(name, DType::F32, {n}, v.data(), v.size() * 4);
}

void synth_vocab(int64_t n, GgufWriter& w) {
  if (n < 259 + 1) fail("init-model: a generated vocabulary needs at least 260 tokens, got ", n);
  std::vector<std::string> toks{"<unk>", "<s>", "</s>"};
  std::vector<double> scores{0, 0, 0};
  std::vector<int64_t> types{2, 3, 3};
  char buf[16];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    toks.emplace_back(buf);
    scores.push_back(0);
    types.push_back(6);
  }
  for (int64_t i = 259; i < n; ++i) {
    toks.push_back("\xe2\x96\x81w" + std::to_string(i));
    scores.push_back(-static_cast<double>(i));
    types.push_back(1);
  }
  w.set("tokenizer.ggml.model", GgufValue::str("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::arr_str(std::move(toks)));
  w.set("tokenizer.ggml.scores", GgufValue::arr_f32(std::move(scores)));
  w.set("tokenizer.ggml.token_type", GgufValue::arr_i32(std::move(types)));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
  w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(0));
}

}  // namespace

void write_config_metadata(const ModelConfig& c, GgufWriter& w) {
  c.validate();
  const bool uni = c.uniform();
  const std::string a = uni ? "llama" : "deci";
  const std::string p = a + ".";
  w.set("general.architecture", GgufValue::str(a));
  w.set("general.type", GgufValue::str("model"));
  if (!c.name.empty()) w.set("general.name", GgufValue::str(c.name));
  w.set(p + "context_length", GgufValue::u32(static_cast<uint32_t>(c.n_ctx_train)));
  w.set(p + "embedding_length", GgufValue::u32(static_cast<uint32_t>(c.n_embd)));
  w.set(p + "block_count", GgufValue::u32(static_cast<uint32_t>(c.n_layer())));
  if (uni) {
    const LayerShape& l = c.layers.front();
    w.set(p + "feed_forward_length", GgufValue::u32(static_cast<uint32_t>(l.n_ff)));
    w.set(p + "attention.head_count", GgufValue::u32(static_cast<uint32_t>(l.n_head)));
    w.set(p + "attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(l.n_head_kv)));
  } else {
    std::vector<int64_t> h, kv, ff;
    for (const auto& l : c.layers) {
      h.push_back(l.n_head);
      kv.push_back(l.n_head_kv);
      ff.push_back(l.n_ff);
    }
    w.set(p + "feed_forward_length", GgufValue::arr_i32(ff));
    w.set(p + "attention.head_count", GgufValue::arr_i32(h));
    w.set(p + "attention.head_count_kv", GgufValue::arr_i32(kv));
  }
  w.set(p + "attention.key_length", GgufValue::u32(static_cast<uint32_t>(c.head_dim_k)));
  w.set(p + "attention.value_length", GgufValue::u32(static_cast<uint32_t>(c.head_dim_v)));
  w.set(p + "rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(c.head_dim_k)));
  w.set(p + "rope.freq_base", GgufValue::f32(c.rope_base));
  w.set(p + "attention.layer_norm_rms_epsilon", GgufValue::f32(c.rms_eps));
  w.set(p + "vocab_size", GgufValue::u32(static_cast<uint32_t>(c.n_vocab)));
}

void init_model(const ModelConfig& c, const RandomInit& init, const GgufFile* vocab_source,
                const std::string& path) {
  GgufWriter w;
  write_config_metadata(c, w);
  w.set("general.file_type", GgufValue::u32(ggml_file_type(init.type)));
  if (vocab_source) {
    int64_t n = 0;
    for (const auto& [k, v] : vocab_source->metadata())
      if (k.rfind("tokenizer.", 0) == 0) {
        w.set(k, v);
        if (k == "tokenizer.ggml.tokens") n = static_cast<int64_t>(v.array_size());
      }
    if (n != c.n_vocab)
      fail("init-model: the vocabulary from ", vocab_source->path(), " has ", n,
           " tokens but the model's vocabulary size is ", c.n_vocab);
  } else {
    synth_vocab(c.n_vocab, w);
  }
  for (const TensorSpec& t : model_tensors(c)) {
    if (t.is_vector())
      add_norm(w, t.name, t.cols, init.seed);
    else
      add_random(w, t.name, t.rows, t.cols, init.type, init.std, init.seed);
  }
  w.write(path);
}

int quantize_model(const GgufFile& in, DType type, const std::string& path) {
  int fallbacks = 0;
  GgufWriter w;
  for (const auto& [k, v] : in.metadata())
    if (k != "general.alignment") w.set(k, v);
  w.set("general.file_type", GgufValue::u32(ggml_file_type(type)));
  // The model's matrices (embedding, head and layer matrices; not the norms) as the schema
  // lists them for the file's config.
  const std::vector<TensorSpec> specs = model_tensors(ModelConfig::from_gguf(in));
  std::vector<float> row;
  for (const auto& t : in.tensors()) {
    const TensorSpec* spec = find_spec(specs, t.name);
    const bool matrix = spec && !spec->is_vector();
    if (!matrix || t.type == type) {
      w.add_tensor(t.name, t.type, t.ne, in.tensor_data(t), t.nbytes);
      continue;
    }
    if (t.type != DType::F32 && t.type != DType::F16 && type != DType::F32 && type != DType::F16)
      fail("quantize: tensor '", t.name, "' is already ", dtype_name(t.type),
           "; quantize from an f32 or f16 model (re-quantizing compounds the error)");
    const int64_t cols = t.ne[0], rows = t.ne[1];
    // Pruning leaves widths that are not whole blocks (e.g. 3 heads of 16); such a matrix
    // is stored as F16 instead, as llama.cpp's quantizer also falls back.
    const DType to = cols % dtype_block_size(type) == 0 ? type : DType::F16;
    if (to != type) ++fallbacks;
    row.resize(static_cast<size_t>(cols));
    const size_t ib = dtype_row_bytes(t.type, cols), ob = dtype_row_bytes(to, cols);
    std::vector<uint8_t> out(ob * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      kernels::dequantize_row(t.type, in.tensor_data(t) + static_cast<size_t>(r) * ib, row.data(),
                              cols);
      kernels::quantize_row(to, row.data(), out.data() + static_cast<size_t>(r) * ob, cols);
    }
    w.add_tensor(t.name, to, t.ne, out.data(), out.size());
  }
  w.write(path);
  return fallbacks;
}

}  // namespace cln
