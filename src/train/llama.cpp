// The trainable Llama: init, load from GGUF, forward through the autograd ops, and
// writing the model and its LoRA adapters as GGUF.
#include "clone/train/llama.h"

#include <cmath>
#include <cstring>

#include "clone/core/error.h"
#include "clone/engine/model.h"
#include "clone/engine/model_writer.h"
#include "clone/kernels/ops.h"

namespace cln::train {

uint64_t Rng::next() {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
double Rng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}
double Rng::normal() {
  const double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

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

std::string lora_module_tensor(const std::string& m) {
  if (m == "q") return "attn_q";
  if (m == "k") return "attn_k";
  if (m == "v") return "attn_v";
  if (m == "o") return "attn_output";
  if (m == "gate") return "ffn_gate";
  if (m == "up") return "ffn_up";
  if (m == "down") return "ffn_down";
  fail("unknown LoRA target module '", m, "' (use q, k, v, o, gate, up, down)");
}

namespace {
uint64_t name_seed(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (char ch : s) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}
void fill_normal(Tensor& t, float std, uint64_t seed) {
  Rng rng(name_seed(t.name, seed));  // per-tensor stream: shapes of others do not matter
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(rng.normal() * std);
}
void fill(Tensor& t, float v) {
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = v;
}
}  // namespace

void LlamaModel::index_params() {
  params_.clear();
  params_.push_back(tok_embd_);
  for (auto& l : layers_)
    for (const TensorP& t : {l.attn_norm, l.wq, l.wk, l.wv, l.wo, l.ffn_norm, l.gate, l.up, l.down})
      params_.push_back(t);
  params_.push_back(output_norm_);
  params_.push_back(output_);
}

LlamaModel LlamaModel::init(const ModelConfig& c, uint64_t seed) {
  c.validate();
  if (!c.uniform()) fail("training supports uniform llama shapes only");
  LlamaModel m;
  m.cfg_ = c;
  const int64_t d = c.n_embd, dk = c.head_dim_k, dv = c.head_dim_v;
  const float std = 0.02f;
  const float out_std = std / std::sqrt(2.0f * static_cast<float>(c.n_layer()));
  m.tok_embd_ = make_param("token_embd.weight", {c.n_vocab, d});
  fill_normal(*m.tok_embd_, std, seed);
  for (int64_t i = 0; i < c.n_layer(); ++i) {
    const LayerShape& s = c.layers[static_cast<size_t>(i)];
    LlamaLayer l;
    l.attn_norm = make_param(layer_tensor_name(i, "attn_norm"), {d});
    l.wq = make_param(layer_tensor_name(i, "attn_q"), {s.n_head * dk, d});
    l.wk = make_param(layer_tensor_name(i, "attn_k"), {s.n_head_kv * dk, d});
    l.wv = make_param(layer_tensor_name(i, "attn_v"), {s.n_head_kv * dv, d});
    l.wo = make_param(layer_tensor_name(i, "attn_output"), {d, s.n_head * dv});
    l.ffn_norm = make_param(layer_tensor_name(i, "ffn_norm"), {d});
    l.gate = make_param(layer_tensor_name(i, "ffn_gate"), {s.n_ff, d});
    l.up = make_param(layer_tensor_name(i, "ffn_up"), {s.n_ff, d});
    l.down = make_param(layer_tensor_name(i, "ffn_down"), {d, s.n_ff});
    fill(*l.attn_norm, 1.0f);
    fill(*l.ffn_norm, 1.0f);
    for (const TensorP& t : {l.wq, l.wk, l.wv, l.gate, l.up}) fill_normal(*t, std, seed);
    for (const TensorP& t : {l.wo, l.down}) fill_normal(*t, out_std, seed);
    m.layers_.push_back(l);
  }
  m.output_norm_ = make_param("output_norm.weight", {d});
  fill(*m.output_norm_, 1.0f);
  m.output_ = make_param("output.weight", {c.n_vocab, d});
  fill_normal(*m.output_, std, seed);
  m.index_params();
  return m;
}

LlamaModel LlamaModel::from_gguf(const GgufFile& f) {
  LlamaModel m;
  m.cfg_ = ModelConfig::from_gguf(f);
  const ModelConfig& c = m.cfg_;
  if (!c.uniform()) fail(f.path(), ": training supports uniform llama shapes only");
  auto load = [&](const std::string& name, std::vector<int64_t> shape) {
    TensorP t = make_param(name, shape);
    const GgufTensorInfo* info = f.find_tensor(name);
    if (!info) fail(f.path(), ": missing tensor '", name, "'");
    if (info->n_elements() != t->numel())
      fail(f.path(), ": tensor '", name, "' has ", info->n_elements(), " values, expected ",
           t->numel());
    const int64_t cols = shape.back(), rows = t->numel() / cols;
    const size_t rb = dtype_row_bytes(info->type, cols);
    const uint8_t* src = f.tensor_data(*info);
    for (int64_t r = 0; r < rows; ++r)
      kernels::dequantize_row(info->type, src + static_cast<size_t>(r) * rb, t->data() + r * cols,
                              cols);
    return t;
  };
  const int64_t d = c.n_embd, dk = c.head_dim_k, dv = c.head_dim_v;
  m.tok_embd_ = load("token_embd.weight", {c.n_vocab, d});
  for (int64_t i = 0; i < c.n_layer(); ++i) {
    const LayerShape& s = c.layers[static_cast<size_t>(i)];
    LlamaLayer l;
    l.attn_norm = load(layer_tensor_name(i, "attn_norm"), {d});
    l.wq = load(layer_tensor_name(i, "attn_q"), {s.n_head * dk, d});
    l.wk = load(layer_tensor_name(i, "attn_k"), {s.n_head_kv * dk, d});
    l.wv = load(layer_tensor_name(i, "attn_v"), {s.n_head_kv * dv, d});
    l.wo = load(layer_tensor_name(i, "attn_output"), {d, s.n_head * dv});
    l.ffn_norm = load(layer_tensor_name(i, "ffn_norm"), {d});
    l.gate = load(layer_tensor_name(i, "ffn_gate"), {s.n_ff, d});
    l.up = load(layer_tensor_name(i, "ffn_up"), {s.n_ff, d});
    l.down = load(layer_tensor_name(i, "ffn_down"), {d, s.n_ff});
    m.layers_.push_back(l);
  }
  m.output_norm_ = load("output_norm.weight", {d});
  m.output_ = f.find_tensor("output.weight") ? load("output.weight", {c.n_vocab, d})
                                             : load("token_embd.weight", {c.n_vocab, d});
  m.output_->name = "output.weight";
  m.cfg_.tied_output = false;
  m.index_params();
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

void LlamaModel::add_lora(int64_t rank, float alpha, const std::vector<std::string>& modules,
                          uint64_t seed) {
  if (rank <= 0) fail("LoRA rank must be positive, got ", rank);
  if (modules.empty()) fail("LoRA needs at least one target module");
  lora_rank_ = rank;
  lora_alpha_ = alpha;
  for (int64_t i = 0; i < cfg_.n_layer(); ++i)
    for (const std::string& mod : modules) {
      const std::string base = layer_tensor_name(i, lora_module_tensor(mod).c_str());
      const TensorP w = find(base);
      const int64_t out = w->rows(), in = w->cols();
      LoraTensors lt;
      lt.a = make_param(base.substr(0, base.size() - 7) + ".weight.lora_a", {rank, in});
      lt.b = make_param(base.substr(0, base.size() - 7) + ".weight.lora_b", {out, rank});
      Rng rng(name_seed(lt.a->name, seed));
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));
      for (int64_t j = 0; j < lt.a->numel(); ++j)
        lt.a->data()[j] = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
      lora_[base] = lt;
    }
}

std::vector<TensorP> LlamaModel::lora_params() const {
  std::vector<TensorP> out;
  for (const TensorP& p : params_) {
    auto it = lora_.find(p->name);
    if (it == lora_.end()) continue;
    out.push_back(it->second.a);
    out.push_back(it->second.b);
  }
  return out;
}

TensorP LlamaModel::proj(Graph& g, const TensorP& x, const TensorP& w) const {
  TensorP y = op::linear(g, x, w);
  auto it = lora_.find(w->name);
  if (it == lora_.end()) return y;
  const float s = lora_alpha_ / static_cast<float>(lora_rank_);
  TensorP ax = op::linear(g, x, it->second.a);
  return op::add(g, y, op::scale(g, op::linear(g, ax, it->second.b), s));
}

TensorP LlamaModel::forward(Graph& g, const std::vector<int32_t>& tokens, int64_t n_seq,
                            int64_t seq_len) const {
  const int64_t n = n_seq * seq_len;
  if (static_cast<int64_t>(tokens.size()) != n)
    fail("forward: ", tokens.size(), " tokens for ", n_seq, " sequences of ", seq_len);
  if (seq_len > cfg_.n_ctx_train)
    fail("forward: sequence length ", seq_len, " exceeds the context of ", cfg_.n_ctx_train);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i % seq_len);
  const float eps = cfg_.rms_eps, base = cfg_.rope_base;
  TensorP x = op::embedding(g, tok_embd_, tokens);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LlamaLayer& l = layers_[i];
    const LayerShape& s = cfg_.layers[i];
    const kernels::AttentionShape as{s.n_head, s.n_head_kv, cfg_.head_dim_k, cfg_.head_dim_v};
    TensorP h = op::rmsnorm(g, x, l.attn_norm, eps);
    TensorP q = op::rope(g, proj(g, h, l.wq), s.n_head, cfg_.head_dim_k, pos, base);
    TensorP k = op::rope(g, proj(g, h, l.wk), s.n_head_kv, cfg_.head_dim_k, pos, base);
    TensorP v = proj(g, h, l.wv);
    TensorP a = op::attention(g, q, k, v, n_seq, seq_len, as);
    x = op::add(g, x, proj(g, a, l.wo));
    h = op::rmsnorm(g, x, l.ffn_norm, eps);
    TensorP f = op::silu_mul(g, proj(g, h, l.gate), proj(g, h, l.up));
    x = op::add(g, x, proj(g, f, l.down));
  }
  x = op::rmsnorm(g, x, output_norm_, eps);
  return op::linear(g, x, output_);
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
  for (const auto& [k, v] : extra) w.set(k, GgufValue::str(v));
  Tokenizer(vocab).to_gguf(w);
  for (const TensorP& t : params_) add_f32(w, *t);
  w.write(path);
}

void LlamaModel::write_lora_gguf(const std::string& path, const std::string& name) const {
  if (lora_.empty()) fail("the model has no LoRA adapters to write");
  GgufWriter w;
  w.set("general.architecture", GgufValue::str("llama"));
  w.set("general.type", GgufValue::str("adapter"));
  w.set("general.name", GgufValue::str(name));
  w.set("adapter.type", GgufValue::str("lora"));
  w.set("adapter.lora.alpha", GgufValue::f32(lora_alpha_));
  for (const TensorP& t : lora_params()) add_f32(w, *t);
  w.write(path);
}

}  // namespace cln::train
