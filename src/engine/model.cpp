// Model loading: binds every weight to its place in the mapped GGUF after checking
// its shape against the config, so the forward pass can trust the shapes.
#include "clone/engine/model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <set>

#include "clone/core/error.h"

namespace cln {

std::string layer_tensor_name(int64_t layer, const char* what) {
  return "blk." + std::to_string(layer) + "." + what + ".weight";
}

namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

struct Binder {
  const GgufFile& f;
  std::set<std::string> used;

  const GgufTensorInfo& need(const std::string& name, std::vector<int64_t> ne) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) fail(f.path(), ": missing tensor '", name, "' (expected shape ", shape_str(ne), ")");
    if (t->ne != ne)
      fail(f.path(), ": tensor '", name, "' has shape ", shape_str(t->ne), ", expected ",
           shape_str(ne));
    used.insert(name);
    return *t;
  }

  kernels::Matrix matrix(const std::string& name, int64_t rows, int64_t cols) {
    const GgufTensorInfo& t = need(name, {cols, rows});
    return {t.type, f.tensor_data(t), rows, cols};
  }

  std::vector<float> vec(const std::string& name, int64_t n) {
    const GgufTensorInfo& t = need(name, {n});
    std::vector<float> v(static_cast<size_t>(n));
    if (t.type != DType::F32 && t.type != DType::F16)
      fail(f.path(), ": norm tensor '", name, "' must be f32 or f16, not ", dtype_name(t.type));
    kernels::ref::dequantize_row(t.type, f.tensor_data(t), v.data(), n);
    return v;
  }
};

}  // namespace

std::shared_ptr<const Model> Model::load(const std::string& path, bool pack) {
  return from_gguf(GgufFile::open(path), pack);
}

void Model::pack_matrices() {
  const long page = sysconf(_SC_PAGESIZE);
  auto pack = [&](kernels::Matrix& w, bool release) {
    if (!w.data) return;
    auto p = kernels::pack_weights(w);
    if (!p) return;
    w.packed = p.get();
    packed_.push_back(std::move(p));
    if (!release) return;
    // The packed copy serves every matmul; drop the mapped pages (they fault back in
    // from the file if anything reads them again, e.g. a LoRA merge).
    const auto begin = reinterpret_cast<uintptr_t>(w.data);
    const uintptr_t end = begin + dtype_row_bytes(w.type, w.cols) * static_cast<size_t>(w.rows);
    const uintptr_t a = (begin + static_cast<uintptr_t>(page) - 1) & ~static_cast<uintptr_t>(page - 1);
    const uintptr_t b = end & ~static_cast<uintptr_t>(page - 1);
    if (b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
  };
  for (auto& l : layers)
    for (kernels::Matrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) pack(*w, true);
  // A tied head shares token_embd, whose rows the embedding lookup still reads.
  pack(output, !cfg_.tied_output);
}

std::shared_ptr<const Model> Model::from_gguf(std::shared_ptr<const GgufFile> file, bool pack) {
  std::shared_ptr<Model> m(new Model());
  m->file_ = file;
  const GgufFile& f = *file;
  const std::string type = f.get_string_or("general.type", "model");
  if (type != "model")
    fail(f.path(), ": general.type is '", type, "': this is not a model (an adapter? use --lora)");
  m->cfg_ = ModelConfig::from_gguf(f);
  const ModelConfig& c = m->cfg_;
  Binder b{f, {}};
  m->token_embd = b.matrix("token_embd.weight", c.n_vocab, c.n_embd);
  m->output_norm = b.vec("output_norm.weight", c.n_embd);
  m->output = c.tied_output ? m->token_embd : b.matrix("output.weight", c.n_vocab, c.n_embd);
  const int64_t dk = c.head_dim_k, dv = c.head_dim_v;
  for (int64_t i = 0; i < c.n_layer(); ++i) {
    const LayerShape& s = c.layers[static_cast<size_t>(i)];
    LayerWeights w;
    if (s.has_attention()) {
      w.attn_norm = b.vec(layer_tensor_name(i, "attn_norm"), c.n_embd);
      w.wq = b.matrix(layer_tensor_name(i, "attn_q"), s.n_head * dk, c.n_embd);
      w.wk = b.matrix(layer_tensor_name(i, "attn_k"), s.n_head_kv * dk, c.n_embd);
      w.wv = b.matrix(layer_tensor_name(i, "attn_v"), s.n_head_kv * dv, c.n_embd);
      w.wo = b.matrix(layer_tensor_name(i, "attn_output"), c.n_embd, s.n_head * dv);
    }
    if (s.has_ffn()) {
      w.ffn_norm = b.vec(layer_tensor_name(i, "ffn_norm"), c.n_embd);
      w.gate = b.matrix(layer_tensor_name(i, "ffn_gate"), s.n_ff, c.n_embd);
      w.up = b.matrix(layer_tensor_name(i, "ffn_up"), s.n_ff, c.n_embd);
      w.down = b.matrix(layer_tensor_name(i, "ffn_down"), c.n_embd, s.n_ff);
    }
    m->layers.push_back(std::move(w));
  }
  // A layer tensor the config does not explain means the metadata and tensors disagree
  // (e.g. attention weights in a layer whose head count is 0): refuse rather than ignore.
  for (const auto& t : f.tensors())
    if (!b.used.count(t.name) && t.name.rfind("blk.", 0) == 0 &&
        t.name.find("rope_freqs") == std::string::npos)
      fail(f.path(), ": tensor '", t.name, "' is not used by the model's configuration (",
           c.arch, " with per-layer heads/FFN widths from metadata)");
  if (pack) m->pack_matrices();
  return m;
}

size_t Model::weight_bytes() const {
  auto mb = [](const kernels::Matrix& w) {
    return w.data ? dtype_row_bytes(w.type, w.cols) * static_cast<size_t>(w.rows) : 0;
  };
  size_t n = mb(token_embd) + (cfg_.tied_output ? 0 : mb(output));
  for (const auto& l : layers)
    n += mb(l.wq) + mb(l.wk) + mb(l.wv) + mb(l.wo) + mb(l.gate) + mb(l.up) + mb(l.down);
  return n;
}

}  // namespace cln
