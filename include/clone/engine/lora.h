// LoRA adapters in GGUF as llama.cpp writes them (general.type = "adapter",
// adapter.type = "lora", adapter.lora.alpha, tensors "<base>.lora_a" [in, r] and
// "<base>.lora_b" [r, out] in ggml order). Applied on the fly with per-request weights:
//   y = W x + sum_i w_i * (alpha_i / r_i) * B_i (A_i x)
// never merged into W, so switching experts between requests costs nothing.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "clone/engine/model.h"

namespace cln {

struct LoraPair {
  kernels::Matrix a;  // [r, in]   (GGUF ne = [in, r])
  kernels::Matrix b;  // [out, r]  (GGUF ne = [r, out])
};

class LoraAdapter {
 public:
  // Checks the adapter against the model: every target names a real weight, shapes match,
  // ranks agree. Throws cln::Error naming the mismatch.
  static std::shared_ptr<const LoraAdapter> load(const std::string& path, const Model& model);

  const std::string& name() const { return name_; }
  float alpha() const { return alpha_; }
  int64_t rank() const { return rank_; }
  float scale() const { return alpha_ / static_cast<float>(rank_); }
  // Adapter matrices by base tensor name ("blk.3.attn_q.weight"); nullptr if not adapted.
  const LoraPair* find(const std::string& base_tensor) const;
  const std::map<std::string, LoraPair>& pairs() const { return pairs_; }

 private:
  std::shared_ptr<const GgufFile> file_;
  std::string name_;
  float alpha_ = 0;
  int64_t rank_ = 0;
  std::map<std::string, LoraPair> pairs_;
};

// One adapter and its weight for the current request.
struct ActiveLora {
  std::shared_ptr<const LoraAdapter> adapter;
  float weight = 1.0f;
};

// The F32 contents of one adapted weight, for writing adapters (training, tests).
struct LoraTensorData {
  std::string base;        // "blk.3.attn_q.weight"
  int64_t out = 0, in = 0, rank = 0;
  std::vector<float> a;    // [rank, in]
  std::vector<float> b;    // [out, rank]
};

// Writes an adapter in llama.cpp's layout (general.type = adapter, adapter.type = lora,
// adapter.lora.alpha, "<base>.lora_a" ne [in, r], "<base>.lora_b" ne [r, out]).
void write_lora_adapter(const std::string& path, const std::string& name, float alpha,
                        const std::vector<LoraTensorData>& tensors,
                        const std::string& arch = "llama");

// Writes base + sum_i w_i * scale_i * B_i A_i into a new GGUF (weights of the adapted
// tensors become F32; other tensors are copied as they are).
void merge_lora(const Model& model, const std::vector<ActiveLora>& loras, const std::string& out_path);

}  // namespace cln
