#include "clone/engine/model_config.h"

#include "clone/core/error.h"
#include "clone/engine/accounting.h"
#include "clone/engine/schema.h"
#include "clone/gguf/gguf.h"

namespace cln {

bool ModelConfig::uniform() const {
  for (const auto& l : layers)
    if (!(l == layers.front()) || !l.has_attention() || !l.has_ffn()) return false;
  return true;
}

int64_t ModelConfig::n_params() const {
  return model_params(*this);
}

DType ModelConfig::tensor_type(const TensorSpec& t) const {
  if (auto it = type_overrides.find(t.name); it != type_overrides.end()) return it->second;
  switch (t.role) {
    case TensorRole::TokenEmbd:
      return embd_type.value_or(weight_type);
    case TensorRole::Output:
      return output_type.value_or(weight_type);
    case TensorRole::Norm:
    case TensorRole::OutputNorm:
      return DType::F32;
    case TensorRole::Matrix:
      return weight_type;
  }
  return weight_type;
}

void ModelConfig::validate() const {
  if (n_vocab <= 0) fail("model config: vocabulary size must be positive, got ", n_vocab);
  if (n_embd <= 0) fail("model config: embedding width must be positive, got ", n_embd);
  if (layers.empty()) fail("model config: the model has no layers");
  if (head_dim_k <= 0 || head_dim_v <= 0)
    fail("model config: head sizes must be positive (key ", head_dim_k, ", value ", head_dim_v,
         ")");
  if (!(rms_eps > 0)) fail("model config: RMSNorm epsilon must be positive");
  if (!(rope_base > 0)) fail("model config: RoPE base must be positive");
  if (head_dim_k % 2 != 0)
    fail("model config: key head size ", head_dim_k, " must be even for RoPE");
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    if (l.n_head < 0 || l.n_head_kv < 0 || l.n_ff < 0)
      fail("model config: layer ", i, " has a negative head count or FFN width");
    if (l.n_head == 0 && l.n_head_kv != 0)
      fail("model config: layer ", i, " has no query heads but ", l.n_head_kv, " KV heads");
    if (l.n_head > 0 && l.n_head_kv == 0)
      fail("model config: layer ", i, " has ", l.n_head,
           " query heads and no KV heads (deci linear attention is not supported)");
    if (l.n_head > 0 && l.n_head % l.n_head_kv != 0)
      fail("model config: layer ", i, ": ", l.n_head, " query heads are not a multiple of ",
           l.n_head_kv, " KV heads");
  }
}

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture");
  if (c.arch != "llama" && c.arch != "deci")
    fail(f.path(), ": architecture '", c.arch, "' is not supported (llama and deci are)");
  const std::string p = c.arch + ".";
  c.name = f.get_string_or("general.name", "");
  c.n_embd = f.get_int(p + "embedding_length");
  const int64_t n_layer = f.get_int(p + "block_count");
  if (n_layer <= 0 || n_layer > 4096) fail(f.path(), ": block_count ", n_layer, " is out of range");
  c.n_ctx_train = f.get_int_or(p + "context_length", 2048);
  if (c.n_ctx_train <= 0) fail(f.path(), ": context_length must be positive");
  const auto heads = f.get_int_per_layer(p + "attention.head_count", static_cast<size_t>(n_layer));
  const auto kv =
      f.has(p + "attention.head_count_kv")
          ? f.get_int_per_layer(p + "attention.head_count_kv", static_cast<size_t>(n_layer))
          : heads;
  const auto ff = f.get_int_per_layer(p + "feed_forward_length", static_cast<size_t>(n_layer));
  for (int64_t i = 0; i < n_layer; ++i) c.layers.push_back({heads[i], kv[i], ff[i]});
  int64_t h0 = 0;
  for (int64_t h : heads) h0 = h0 ? h0 : h;
  const int64_t def_head = h0 > 0 && c.n_embd % h0 == 0 ? c.n_embd / h0 : 0;
  c.head_dim_k = f.get_int_or(p + "attention.key_length", def_head);
  c.head_dim_v = f.get_int_or(p + "attention.value_length", c.head_dim_k);
  if (c.head_dim_k <= 0)
    fail(f.path(), ": cannot tell the head size: no ", p,
         "attention.key_length and no layer with heads");
  c.rope_base = static_cast<float>(f.get_float_or(p + "rope.freq_base", 10000.0));
  c.rms_eps = static_cast<float>(f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
  const int64_t rope_dims = f.get_int_or(p + "rope.dimension_count", c.head_dim_k);
  if (rope_dims != c.head_dim_k)
    fail(f.path(), ": partial RoPE (", rope_dims, " of ", c.head_dim_k, " dims) is not supported");
  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb) fail(f.path(), ": missing tensor 'token_embd.weight'");
  if (emb->ne.size() != 2) fail(f.path(), ": token_embd.weight must be 2-D");
  c.n_vocab = emb->ne[1];
  if (f.has(p + "vocab_size") && f.get_int(p + "vocab_size") != c.n_vocab)
    fail(f.path(), ": ", p, "vocab_size ", f.get_int(p + "vocab_size"),
         " disagrees with token_embd.weight's ", c.n_vocab, " rows");
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.validate();
  // Types: the layer matrices' (the first one found), the embedding's and the head's;
  // any tensor stored otherwise is recorded by name.
  const std::vector<TensorSpec> specs = model_tensors(c);
  c.weight_type = emb->type;
  for (const TensorSpec& t : specs)
    if (t.role == TensorRole::Matrix)
      if (const GgufTensorInfo* info = f.find_tensor(t.name)) {
        c.weight_type = info->type;
        break;
      }
  c.embd_type = emb->type;
  const GgufTensorInfo* out = f.find_tensor("output.weight");
  c.output_type = out ? out->type : emb->type;
  for (const TensorSpec& t : specs)
    if (const GgufTensorInfo* info = f.find_tensor(t.name); info && info->type != c.tensor_type(t))
      c.type_overrides[t.name] = info->type;
  return c;
}

}  // namespace cln
