// LoRA adapters: loading and checking against the base model, and the offline merge.
#include "clone/engine/lora.h"

#include <cmath>
#include <filesystem>

#include "clone/core/error.h"

namespace cln {

std::shared_ptr<const LoraAdapter> LoraAdapter::load(const std::string& path, const Model& model) {
  auto ad = std::make_shared<LoraAdapter>();
  ad->file_ = GgufFile::open(path);
  const GgufFile& f = *ad->file_;
  if (f.get_string_or("general.type", "") != "adapter")
    fail(path, ": general.type is not 'adapter': not a LoRA adapter file");
  if (f.get_string_or("adapter.type", "") != "lora") fail(path, ": adapter.type is not 'lora'");
  const std::string arch = f.get_string_or("general.architecture", model.config().arch);
  if (arch != "llama" && arch != "deci")
    fail(path, ": adapter is for architecture '", arch, "', the model is ", model.config().arch);
  ad->alpha_ = static_cast<float>(f.get_float("adapter.lora.alpha"));
  if (!std::isfinite(ad->alpha_)) fail(path, ": adapter.lora.alpha is not finite");
  ad->name_ = f.get_string_or("general.name", std::filesystem::path(path).stem().string());

  for (const auto& t : f.tensors()) {
    const bool is_a = t.name.ends_with(".lora_a"), is_b = t.name.ends_with(".lora_b");
    if (!is_a && !is_b) fail(path, ": tensor '", t.name, "' is neither .lora_a nor .lora_b");
    const std::string base = t.name.substr(0, t.name.size() - 7);
    const kernels::Matrix* w = model.find_matrix(base);
    if (!w)
      fail(path, ": adapter tensor '", t.name, "' targets '", base,
           "', which the model does not have (or clone cannot adapt)");
    const std::string other = base + (is_a ? ".lora_b" : ".lora_a");
    const GgufTensorInfo* o = f.find_tensor(other);
    if (!o) fail(path, ": '", t.name, "' has no matching '", other, "'");
    if (!is_a) continue;  // handle each pair once, from its A
    const GgufTensorInfo& a = t;
    const GgufTensorInfo& b = *o;
    if (a.ne.size() != 2 || b.ne.size() != 2)
      fail(path, ": LoRA tensors of '", base, "' must be 2-D");
    const int64_t r = a.ne[1];
    if (a.ne[0] != w->cols || b.ne[1] != w->rows || b.ne[0] != r)
      fail(path, ": LoRA for '", base, "' has A [", a.ne[0], ", ", a.ne[1], "] and B [", b.ne[0],
           ", ", b.ne[1], "] but the weight is [", w->cols, ", ", w->rows,
           "] (A must be [in, r], B [r, out]): adapter does not match this model");
    if (ad->rank_ == 0) ad->rank_ = r;
    if (r != ad->rank_ || r <= 0)
      fail(path, ": LoRA ranks differ across tensors (", ad->rank_, " and ", r, ")");
    if ((a.type != DType::F32 && a.type != DType::F16) ||
        (b.type != DType::F32 && b.type != DType::F16))
      fail(path, ": LoRA tensors of '", base, "' must be f32 or f16");
    ad->pairs_[base] =
        LoraPair{{a.type, f.tensor_data(a), r, a.ne[0]}, {b.type, f.tensor_data(b), b.ne[1], r}};
  }
  if (ad->pairs_.empty()) fail(path, ": adapter has no tensors");
  return ad;
}

const LoraPair* LoraAdapter::find(const std::string& base_tensor) const {
  auto it = pairs_.find(base_tensor);
  return it == pairs_.end() ? nullptr : &it->second;
}

void write_lora_adapter(const std::string& path, const std::string& name, float alpha,
                        const std::vector<LoraTensorData>& tensors, const std::string& arch) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::str(arch));
  w.set("general.type", GgufValue::str("adapter"));
  w.set("general.name", GgufValue::str(name));
  w.set("adapter.type", GgufValue::str("lora"));
  w.set("adapter.lora.alpha", GgufValue::f32(alpha));
  for (const auto& t : tensors) {
    if (t.a.size() != static_cast<size_t>(t.rank * t.in) ||
        t.b.size() != static_cast<size_t>(t.out * t.rank))
      fail("write_lora_adapter: '", t.base, "' A/B sizes do not match rank ", t.rank, ", in ", t.in,
           ", out ", t.out);
    w.add_tensor(t.base + ".lora_a", DType::F32, {t.in, t.rank}, t.a.data(), t.a.size() * 4);
    w.add_tensor(t.base + ".lora_b", DType::F32, {t.rank, t.out}, t.b.data(), t.b.size() * 4);
  }
  w.write(path);
}

void merge_lora(const Model& model, const std::vector<ActiveLora>& loras,
                const std::string& out_path) {
  const GgufFile& f = model.gguf();
  GgufWriter w;
  for (const auto& [k, v] : f.metadata())
    if (k != "general.alignment") w.set(k, v);
  for (const auto& t : f.tensors()) {
    std::vector<const ActiveLora*> hits;
    for (const auto& a : loras)
      if (a.adapter->find(t.name)) hits.push_back(&a);
    if (hits.empty()) {
      w.add_tensor(t.name, t.type, t.ne, f.tensor_data(t), t.nbytes);
      continue;
    }
    const kernels::Matrix* base = model.find_matrix(t.name);
    const int64_t rows = base->rows, cols = base->cols;
    std::vector<float> merged(static_cast<size_t>(rows * cols));
    const size_t rb = dtype_row_bytes(base->type, cols);
    for (int64_t r = 0; r < rows; ++r)
      kernels::ref::dequantize_row(base->type, static_cast<const uint8_t*>(base->data) + r * rb,
                                   merged.data() + r * cols, cols);
    for (const ActiveLora* a : hits) {
      const LoraPair& p = *a->adapter->find(t.name);
      const int64_t rk = p.a.rows;
      std::vector<float> A(static_cast<size_t>(rk * cols)), B(static_cast<size_t>(rows * rk));
      for (int64_t i = 0; i < rk; ++i)
        kernels::ref::dequantize_row(
            p.a.type, static_cast<const uint8_t*>(p.a.data) + i * dtype_row_bytes(p.a.type, cols),
            A.data() + i * cols, cols);
      for (int64_t i = 0; i < rows; ++i)
        kernels::ref::dequantize_row(
            p.b.type, static_cast<const uint8_t*>(p.b.data) + i * dtype_row_bytes(p.b.type, rk),
            B.data() + i * rk, rk);
      // merged += s * B A   ([rows, r] x [r, cols])
      kernels::ref::gemm_f32(false, false, rows, cols, rk, a->weight * a->adapter->scale(),
                             B.data(), rk, A.data(), cols, 1.0f, merged.data(), cols);
    }
    w.add_tensor(t.name, DType::F32, t.ne, merged.data(), merged.size() * sizeof(float));
  }
  w.write(out_path);
}

}  // namespace cln
