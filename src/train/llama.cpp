// The trainable Llama: init and load through the schema, the forward pass through the
// engine's llama_forward with an autograd executor, LoRA adapters, and GGUF writing.
#include "clone/train/llama.h"

#include <cmath>

#include "clone/core/error.h"
#include "clone/core/hash.h"
#include "clone/core/rng.h"
#include "clone/engine/forward.h"
#include "clone/engine/lora.h"
#include "clone/engine/model_writer.h"
#include "clone/kernels/ops.h"

namespace cln::train {

ModelConfig llama_shape(int64_t n_vocab, int64_t n_embd, int64_t n_layer, int64_t n_head,
                        int64_t n_head_kv, int64_t n_ff, int64_t n_ctx) {
  if (n_head <= 0 || n_embd % n_head != 0)
    fail("model shape: width ", n_embd, " is not a multiple of ", n_head, " heads");
  ModelConfig c;
  c.arch = "llama";
  c.n_vocab = n_vocab;
  c.n_embd = n_embd;
  c.n_ctx_train = n_ctx;
  c.head_dim_k = c.head_dim_v = n_embd / n_head;
  c.layers.assign(static_cast<size_t>(n_layer), LayerShape{n_head, n_head_kv, n_ff});
  c.validate();
  return c;
}

std::vector<TensorP> Adapter::params() const {
  std::vector<TensorP> out;
  for (const auto& layer : pairs)
    for (const LoraTensors& p : layer)
      if (p.a) {
        out.push_back(p.a);
        out.push_back(p.b);
      }
  return out;
}

namespace {
void fill_normal(Tensor& t, float std, uint64_t seed) {
  Rng rng(name_seed(t.name, seed));  // per-tensor stream: shapes of others do not matter
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(rng.normal() * std);
}
void fill(Tensor& t, float v) {
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = v;
}
TensorP spec_param(const TensorSpec& s) {
  return s.is_vector() ? make_param(s.name, {s.cols}) : make_param(s.name, {s.rows, s.cols});
}
// F32 contents of a GGUF tensor into t (quantized types dequantized row by row).
void load_into(const GgufFile& f, const GgufTensorInfo& info, Tensor& t) {
  const int64_t cols = t.cols(), rows = t.rows();
  const size_t rb = dtype_row_bytes(info.type, cols);
  const uint8_t* src = f.tensor_data(info);
  for (int64_t r = 0; r < rows; ++r)
    kernels::dequantize_row(info.type, src + static_cast<size_t>(r) * rb, t.data() + r * cols,
                            cols);
}
}  // namespace

void LlamaModel::bind(const std::vector<TensorSpec>& specs) {
  layers_.assign(static_cast<size_t>(cfg_.n_layer()), Layer{});
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    const TensorP& t = params_[i];
    switch (s.role) {
      case TensorRole::TokenEmbd:
        tok_embd_ = t;
        break;
      case TensorRole::OutputNorm:
        output_norm_ = t;
        break;
      case TensorRole::Output:
        output_ = t;
        break;
      case TensorRole::Norm:
        (s.norm == LayerNorm::Attn ? layers_[static_cast<size_t>(s.layer)].attn_norm
                                   : layers_[static_cast<size_t>(s.layer)].ffn_norm) = t;
        break;
      case TensorRole::Matrix:
        layers_[static_cast<size_t>(s.layer)].mat[static_cast<size_t>(index(s.matrix))] = t;
        break;
    }
  }
  if (cfg_.tied_output) output_ = tok_embd_;  // one tensor, gradients from both uses
}

LlamaModel LlamaModel::init(const ModelConfig& c, uint64_t seed) {
  c.validate();
  LlamaModel m;
  m.cfg_ = c;
  m.cfg_.weight_type = DType::F32;
  m.cfg_.embd_type = m.cfg_.output_type = DType::F32;
  m.cfg_.type_overrides.clear();
  const float std = 0.02f;
  const float out_std = std / std::sqrt(2.0f * static_cast<float>(c.n_layer()));
  const std::vector<TensorSpec> specs = model_tensors(m.cfg_);
  for (const TensorSpec& s : specs) {
    TensorP t = spec_param(s);
    if (s.is_vector())
      fill(*t, 1.0f);
    else
      fill_normal(*t,
                  s.role == TensorRole::Matrix &&
                          (s.matrix == LayerMatrix::O || s.matrix == LayerMatrix::Down)
                      ? out_std
                      : std,
                  seed);
    m.params_.push_back(std::move(t));
  }
  m.bind(specs);
  return m;
}

LlamaModel LlamaModel::from_gguf(const GgufFile& f) {
  LlamaModel m;
  m.cfg_ = ModelConfig::from_gguf(f);
  m.cfg_.weight_type = DType::F32;  // trained and written as F32
  m.cfg_.embd_type = m.cfg_.output_type = DType::F32;
  m.cfg_.type_overrides.clear();
  const std::vector<TensorSpec> specs = model_tensors(m.cfg_);
  for (const TensorSpec& s : specs) {
    const GgufTensorInfo* info = f.find_tensor(s.name);
    if (!info) fail(f.path(), ": missing tensor '", s.name, "'");
    if (info->ne != s.ne())
      fail(f.path(), ": tensor '", s.name, "' does not have the shape its layer's config implies");
    TensorP t = spec_param(s);
    load_into(f, *info, *t);
    m.params_.push_back(std::move(t));
  }
  m.bind(specs);
  return m;
}

TensorP LlamaModel::find(const std::string& name) const {
  for (const TensorP& t : params_)
    if (t->name == name) return t;
  return nullptr;
}

void LlamaModel::set_trainable(bool on) {
  for (const TensorP& t : params_) {
    t->requires_grad = on;
    if (!on) t->free_grad();
  }
}

Adapter& LlamaModel::new_adapter(const std::string& name, int64_t rank, float alpha, float weight) {
  if (rank <= 0) fail("LoRA rank must be positive, got ", rank);
  if (!std::isfinite(alpha) || !std::isfinite(weight)) fail("LoRA alpha and weight must be finite");
  Adapter& a = adapters_.emplace_back();
  a.name = name;
  a.rank = rank;
  a.alpha = alpha;
  a.weight = weight;
  a.pairs.resize(static_cast<size_t>(cfg_.n_layer()));
  return a;
}

Adapter& LlamaModel::add_lora(const std::string& name, int64_t rank, float alpha,
                              const std::vector<LayerMatrix>& targets, uint64_t seed,
                              float weight) {
  if (targets.empty()) fail("LoRA needs at least one target matrix");
  Adapter& a = new_adapter(name, rank, alpha, weight);
  for (int64_t il = 0; il < cfg_.n_layer(); ++il)
    for (LayerMatrix w : targets) {
      const MatrixShape ms = matrix_shape(cfg_, il, w);
      if (ms.rows == 0) continue;  // the layer has no such half
      const std::string base = layer_tensor_name(il, w);
      LoraTensors lt;
      lt.a = make_param(base + ".lora_a", {rank, ms.cols});
      lt.b = make_param(base + ".lora_b", {ms.rows, rank});
      Rng rng(name_seed(lt.a->name, seed));
      const double bound = 1.0 / std::sqrt(static_cast<double>(ms.cols));
      for (int64_t j = 0; j < lt.a->numel(); ++j)
        lt.a->data()[j] = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
      a.pairs[static_cast<size_t>(il)][static_cast<size_t>(index(w))] = lt;
    }
  if (a.params().empty()) fail("LoRA: no layer of the model has any of the target matrices");
  return a;
}

Adapter& LlamaModel::load_lora(const GgufFile& f, float weight) {
  // The engine's loader checks the file against the model (types, shapes, ranks).
  const auto view = engine_view();
  const auto ad = LoraAdapter::load(f.path(), *view);
  Adapter& a = new_adapter(ad->name(), ad->rank(), ad->alpha(), weight);
  for (const auto& [base, pair] : ad->pairs()) {
    const auto lm = parse_layer_tensor_name(base);
    LoraTensors lt;
    lt.a = make_param(base + ".lora_a", {pair.a.rows, pair.a.cols});
    lt.b = make_param(base + ".lora_b", {pair.b.rows, pair.b.cols});
    for (const auto& [t, m] : {std::pair{lt.a, &pair.a}, std::pair{lt.b, &pair.b}}) {
      const size_t rb = dtype_row_bytes(m->type, m->cols);
      for (int64_t r = 0; r < m->rows; ++r)
        kernels::dequantize_row(m->type, static_cast<const uint8_t*>(m->data) + r * rb,
                                t->data() + r * m->cols, m->cols);
    }
    a.pairs[static_cast<size_t>(lm->first)][static_cast<size_t>(index(lm->second))] = lt;
  }
  return a;
}

// The autograd executor of llama_forward (engine/forward.h).
struct LlamaModel::Exec {
  const LlamaModel& m;
  Graph& g;
  const std::vector<int32_t>& tokens;
  std::vector<int32_t> pos;
  int64_t n_seq, seq_len;
  const ForwardProbe* probe = nullptr;

  using Value = TensorP;

  TensorP embed() { return op::embedding(g, m.tok_embd_, tokens); }
  void boundary(int32_t) {}
  TensorP rmsnorm(const TensorP& x, int32_t il, LayerNorm n) {
    const Layer& l = m.layers_[static_cast<size_t>(il)];
    return op::rmsnorm(g, x, n == LayerNorm::Attn ? l.attn_norm : l.ffn_norm, m.cfg_.rms_eps);
  }
  TensorP linear(const TensorP& x, int32_t il, LayerMatrix w) {
    const auto k = static_cast<size_t>(index(w));
    if (probe && probe->matrix_input) probe->matrix_input(il, w, x);
    TensorP y = op::linear(g, x, m.layers_[static_cast<size_t>(il)].mat[k]);
    for (const Adapter& a : m.adapters_) {
      const LoraTensors& p = a.pairs[static_cast<size_t>(il)][k];
      if (!p.a || a.weight == 0.0f) continue;
      y = op::add(g, y,
                  op::scale(g, op::linear(g, op::linear(g, x, p.a), p.b), a.weight * a.scale()));
    }
    return y;
  }
  TensorP rope(const TensorP& x, int64_t n_heads) {
    return op::rope(g, x, n_heads, m.cfg_.head_dim_k, pos, m.cfg_.rope_base);
  }
  TensorP attention(int32_t, const TensorP& q, const TensorP& k, const TensorP& v,
                    const LayerShape& s) {
    return op::attention(g, q, k, v, n_seq, seq_len,
                         {s.n_head, s.n_head_kv, m.cfg_.head_dim_k, m.cfg_.head_dim_v});
  }
  TensorP silu_mul(const TensorP& gate, const TensorP& up) { return op::silu_mul(g, gate, up); }
  TensorP residual(const TensorP& x, const TensorP& in, int32_t il, LayerMatrix w) {
    TensorP out = op::add(g, x, linear(in, il, w));
    if (probe && probe->half) probe->half(il, w == LayerMatrix::O, x, out);
    return out;
  }
  TensorP head(const TensorP& x) {
    return op::linear(g, op::rmsnorm(g, x, m.output_norm_, m.cfg_.rms_eps), m.output_);
  }
};

TensorP LlamaModel::forward(Graph& g, const std::vector<int32_t>& tokens, int64_t n_seq,
                            int64_t seq_len, const ForwardProbe* probe) const {
  const int64_t n = n_seq * seq_len;
  if (static_cast<int64_t>(tokens.size()) != n)
    fail("forward: ", tokens.size(), " tokens for ", n_seq, " sequences of ", seq_len);
  if (seq_len > cfg_.n_ctx_train)
    fail("forward: sequence length ", seq_len, " exceeds the context of ", cfg_.n_ctx_train);
  Exec e{*this, g, tokens, std::vector<int32_t>(static_cast<size_t>(n)), n_seq, seq_len, probe};
  for (int64_t i = 0; i < n; ++i) e.pos[static_cast<size_t>(i)] = static_cast<int32_t>(i % seq_len);
  return llama_forward(e, cfg_);
}

void LlamaModel::fold_adapters_into(LlamaModel& out) const {
  if (out.params_.size() != params_.size())
    fail("folding adapters into a model of another shape (", out.params_.size(), " tensors, not ",
         params_.size(), ")");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& from = *params_[i];
    Tensor& to = *out.params_[i];
    if (from.shape != to.shape || from.name != to.name)
      fail("folding adapters: tensor '", to.name, "' is not '", from.name, "' of the same shape");
    std::copy(from.data(), from.data() + from.numel(), to.data());
  }
  for (const Adapter& a : adapters_) {
    const float s = a.weight * a.scale();
    for (size_t il = 0; il < a.pairs.size(); ++il)
      for (size_t k = 0; k < static_cast<size_t>(kLayerMatrices); ++k) {
        const LoraTensors& p = a.pairs[il][k];
        if (!p.a) continue;
        Tensor& w = *out.layers_[il].mat[k];  // [out, in] += s B [out, r] A [r, in]
        const int64_t rows = w.rows(), cols = w.cols(), r = a.rank;
        kernels::gemm_f32(false, false, rows, cols, r, s, p.b->data(), r, p.a->data(), cols, 1.0f,
                          w.data(), cols, nullptr);
      }
  }
}

std::shared_ptr<const Model> LlamaModel::engine_view() const {
  return Model::view_f32(cfg_, [this](const TensorSpec& s) -> const float* {
    const TensorP t = find(s.name);
    return t ? t->data() : nullptr;
  });
}

namespace {
void add_f32(GgufWriter& w, const Tensor& t) {
  std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());  // ggml order: contiguous first
  w.add_tensor(t.name, DType::F32, ne, t.data(), static_cast<size_t>(t.numel()) * sizeof(float));
}
}  // namespace

void LlamaModel::write_gguf(const std::string& path, const Vocab& vocab,
                            const std::vector<std::pair<std::string, std::string>>& extra) const {
  if (static_cast<int64_t>(vocab.tokens.size()) != cfg_.n_vocab)
    fail("the tokenizer has ", vocab.tokens.size(), " tokens but the model's vocabulary is ",
         cfg_.n_vocab);
  GgufWriter w;
  write_config_metadata(cfg_, w);
  w.set("general.file_type", GgufValue::u32(0));  // all F32
  for (const auto& [k, v] : extra) w.set(k, GgufValue::str(v));
  Tokenizer(vocab).to_gguf(w);
  for (const TensorP& t : params_) add_f32(w, *t);
  w.write(path);
}

void LlamaModel::write_lora_gguf(const std::string& path, const Adapter& a) const {
  std::vector<LoraTensorData> tensors;
  for (int64_t il = 0; il < cfg_.n_layer(); ++il)
    for (LayerMatrix w : kAllLayerMatrices) {
      const LoraTensors& p = a.pairs[static_cast<size_t>(il)][static_cast<size_t>(index(w))];
      if (!p.a) continue;
      LoraTensorData t;
      t.base = layer_tensor_name(il, w);
      t.rank = a.rank;
      t.out = p.b->rows();
      t.in = p.a->cols();
      t.a.assign(p.a->data(), p.a->data() + p.a->numel());
      t.b.assign(p.b->data(), p.b->data() + p.b->numel());
      tensors.push_back(std::move(t));
    }
  if (tensors.empty()) fail("adapter '", a.name, "' has no tensors to write");
  write_lora_adapter(path, a.name, a.alpha, tensors, cfg_.uniform() ? "llama" : "deci");
}

}  // namespace cln::train
