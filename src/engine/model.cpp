// Model loading: binds every tensor of the schema to its place in the mapped GGUF after
// checking its shape, so the forward pass can trust the shapes.
#include "clone/engine/model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <set>

#include "clone/core/error.h"
#include "clone/engine/accounting.h"

namespace cln {

namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

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
    const uintptr_t a =
        (begin + static_cast<uintptr_t>(page) - 1) & ~static_cast<uintptr_t>(page - 1);
    const uintptr_t b = end & ~static_cast<uintptr_t>(page - 1);
    if (b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
  };
  for (auto& l : layers)
    for (kernels::Matrix& w : l.mat) pack(w, true);
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
  m->layers.resize(static_cast<size_t>(c.n_layer()));
  std::set<std::string> used;
  for (const TensorSpec& spec : model_tensors(c)) {
    const GgufTensorInfo* t = f.find_tensor(spec.name);
    if (!t)
      fail(f.path(), ": missing tensor '", spec.name, "' (expected shape ", shape_str(spec.ne()),
           ")");
    if (t->ne != spec.ne())
      fail(f.path(), ": tensor '", spec.name, "' has shape ", shape_str(t->ne), ", expected ",
           shape_str(spec.ne()));
    used.insert(spec.name);
    if (spec.is_vector()) {
      if (t->type != DType::F32 && t->type != DType::F16)
        fail(f.path(), ": norm tensor '", spec.name, "' must be f32 or f16, not ",
             dtype_name(t->type));
      std::vector<float>& v = m->norms_.emplace_back(static_cast<size_t>(spec.cols));
      kernels::ref::dequantize_row(t->type, f.tensor_data(*t), v.data(), spec.cols);
      if (spec.role == TensorRole::OutputNorm)
        m->output_norm = v.data();
      else
        (spec.norm == LayerNorm::Attn ? m->layers[static_cast<size_t>(spec.layer)].attn_norm
                                      : m->layers[static_cast<size_t>(spec.layer)].ffn_norm) =
            v.data();
      continue;
    }
    const kernels::Matrix w{t->type, f.tensor_data(*t), spec.rows, spec.cols};
    if (spec.role == TensorRole::TokenEmbd)
      m->token_embd = w;
    else if (spec.role == TensorRole::Output)
      m->output = w;
    else
      m->layers[static_cast<size_t>(spec.layer)][spec.matrix] = w;
  }
  if (c.tied_output) m->output = m->token_embd;
  // A layer tensor the config does not explain means the metadata and tensors disagree
  // (e.g. attention weights in a layer whose head count is 0): refuse rather than ignore.
  for (const auto& t : f.tensors())
    if (!used.count(t.name) && t.name.rfind("blk.", 0) == 0 &&
        t.name.find("rope_freqs") == std::string::npos)
      fail(f.path(), ": tensor '", t.name, "' is not used by the model's configuration (", c.arch,
           " with per-layer heads/FFN widths from metadata)");
  if (pack) m->pack_matrices();
  return m;
}

std::shared_ptr<const Model> Model::view_f32(
    ModelConfig cfg, const std::function<const float*(const TensorSpec&)>& source) {
  cfg.validate();
  cfg.weight_type = DType::F32;
  cfg.embd_type = cfg.output_type = DType::F32;
  cfg.type_overrides.clear();
  std::shared_ptr<Model> m(new Model());
  m->cfg_ = std::move(cfg);
  const ModelConfig& c = m->cfg_;
  m->layers.resize(static_cast<size_t>(c.n_layer()));
  for (const TensorSpec& spec : model_tensors(c)) {
    const float* p = source(spec);
    if (!p) fail("model view: no data for tensor '", spec.name, "'");
    const kernels::Matrix w{DType::F32, p, spec.rows, spec.cols};
    switch (spec.role) {
      case TensorRole::TokenEmbd:
        m->token_embd = w;
        break;
      case TensorRole::Output:
        m->output = w;
        break;
      case TensorRole::OutputNorm:
        m->output_norm = p;
        break;
      case TensorRole::Norm:
        (spec.norm == LayerNorm::Attn ? m->layers[static_cast<size_t>(spec.layer)].attn_norm
                                      : m->layers[static_cast<size_t>(spec.layer)].ffn_norm) = p;
        break;
      case TensorRole::Matrix:
        m->layers[static_cast<size_t>(spec.layer)][spec.matrix] = w;
        break;
    }
  }
  if (c.tied_output) m->output = m->token_embd;
  return m;
}

const kernels::Matrix* Model::find_matrix(std::string_view name) const {
  const auto lm = parse_layer_tensor_name(name);
  if (!lm || lm->first >= static_cast<int64_t>(layers.size())) return nullptr;
  const kernels::Matrix& w = layers[static_cast<size_t>(lm->first)][lm->second];
  return w.data ? &w : nullptr;
}

const GgufFile& Model::gguf() const {
  if (!file_) fail("model '", cfg_.name, "' is a view of weights in memory and has no file");
  return *file_;
}

size_t Model::weight_bytes() const {
  return static_cast<size_t>(model_weight_bytes(cfg_));
}

}  // namespace cln
