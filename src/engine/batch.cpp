// Continuous batching: the batched executor of llama_forward. Rows are the work items'
// tokens in order; each item's rows carry their own positions (RoPE), their own experts
// (LoRA on their row range) and their own cache (attention per item).
#include "clone/engine/batch.h"

#include <algorithm>
#include <cstring>

#include "clone/core/error.h"
#include "clone/engine/forward.h"
#include "clone/kernels/ops.h"
#include "lora_table.h"

namespace cln {

struct Batch::Slot {
  bool open = false;
  int64_t n_past = 0;
  std::vector<std::vector<float>> k, v;  // per layer: [n_ctx, n_head_kv * dk / dv]
  LoraSchedule loras;                    // its experts, and changes scheduled at later positions
};

struct Batch::Scratch {
  std::vector<float> x, xn, q, k, v, attn, gate, up, lora_tmp;
  std::vector<int32_t> pos;
};

Batch::Batch(std::shared_ptr<const Model> model, const BatchParams& p)
    : model_(std::move(model)), s_(std::make_unique<Scratch>()) {
  const ModelConfig& c = model_->config();
  if (p.n_slots < 1) fail("batch: at least one slot");
  n_ctx_ = p.n_ctx > 0 ? p.n_ctx : std::min<int64_t>(c.n_ctx_train, 4096);
  max_rows_ = std::max<int64_t>(1, p.max_rows);
  pool_ = std::make_unique<kernels::ThreadPool>(p.n_threads);
  int64_t max_q = 0, max_a = 0, max_k = 0, max_v = 0, max_ff = 0;
  for (const auto& l : c.layers) {
    max_q = std::max(max_q, l.n_head * c.head_dim_k);
    max_a = std::max(max_a, l.n_head * c.head_dim_v);
    max_k = std::max(max_k, l.n_head_kv * c.head_dim_k);
    max_v = std::max(max_v, l.n_head_kv * c.head_dim_v);
    max_ff = std::max(max_ff, l.n_ff);
  }
  for (int i = 0; i < p.n_slots; ++i) {
    auto s = std::make_unique<Slot>();
    for (const auto& l : c.layers) {
      s->k.emplace_back(static_cast<size_t>(n_ctx_ * l.n_head_kv * c.head_dim_k));
      s->v.emplace_back(static_cast<size_t>(n_ctx_ * l.n_head_kv * c.head_dim_v));
    }
    slots_.push_back(std::move(s));
  }
  const auto r = static_cast<size_t>(max_rows_);
  s_->x.resize(r * static_cast<size_t>(c.n_embd));
  s_->xn.resize(r * static_cast<size_t>(c.n_embd));
  s_->q.resize(r * static_cast<size_t>(max_q));
  s_->k.resize(r * static_cast<size_t>(max_k));
  s_->v.resize(r * static_cast<size_t>(max_v));
  s_->attn.resize(r * static_cast<size_t>(max_a));
  s_->gate.resize(r * static_cast<size_t>(max_ff));
  s_->up.resize(r * static_cast<size_t>(max_ff));
  s_->pos.resize(r);
}

Batch::~Batch() = default;

int Batch::open(std::vector<ActiveLora> loras) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = *slots_[i];
    if (s.open) continue;
    s.open = true;
    s.n_past = 0;
    set_loras(static_cast<int>(i), std::move(loras));
    return static_cast<int>(i);
  }
  return -1;
}

void Batch::close(int slot) {
  if (!is_open(slot)) fail("batch: slot ", slot, " is not open");
  slots_[static_cast<size_t>(slot)]->open = false;
  slots_[static_cast<size_t>(slot)]->loras.clear();
}

std::unique_ptr<LoraTable> Batch::table(const std::vector<ActiveLora>& loras) {
  auto t = std::make_unique<LoraTable>(*model_, loras);
  const auto need = static_cast<size_t>(max_rows_ * t->max_rank());
  if (s_->lora_tmp.size() < need) s_->lora_tmp.resize(need);
  return t;
}

void Batch::set_loras(int slot, std::vector<ActiveLora> loras) {
  if (!is_open(slot)) fail("batch: slot ", slot, " is not open");
  slots_[static_cast<size_t>(slot)]->loras.set(table(loras));
}

void Batch::set_loras_from(int slot, int64_t pos, std::vector<ActiveLora> loras) {
  if (!is_open(slot)) fail("batch: slot ", slot, " is not open");
  if (pos >= n_ctx_)
    fail("batch: slot ", slot, ": experts changed at position ", pos, ", past the context of ",
         n_ctx_);
  Slot& s = *slots_[static_cast<size_t>(slot)];
  s.loras.set_from(pos, s.n_past, table(loras));
}

bool Batch::is_open(int slot) const {
  return slot >= 0 && slot < n_slots() && slots_[static_cast<size_t>(slot)]->open;
}

int64_t Batch::n_past(int slot) const {
  if (!is_open(slot)) fail("batch: slot ", slot, " is not open");
  return slots_[static_cast<size_t>(slot)]->n_past;
}

int Batch::open_slots() const {
  int n = 0;
  for (const auto& s : slots_) n += s->open;
  return n;
}

size_t Batch::state_bytes() const {
  size_t n = 0;
  for (const auto& s : slots_)
    for (size_t l = 0; l < s->k.size(); ++l) n += (s->k[l].size() + s->v[l].size()) * 4;
  const Scratch& s = *s_;
  for (const std::vector<float>* v :
       {&s.x, &s.xn, &s.q, &s.k, &s.v, &s.attn, &s.gate, &s.up, &s.lora_tmp, &logits_})
    n += v->size() * 4;
  return n;
}

struct Batch::Pass {
  Batch& b;
  const Model& m;
  const ModelConfig& c;
  const std::vector<Work>& work;
  std::vector<int64_t> row0;  // first row of each work item
  int64_t n = 0;              // rows
  Phase phase = Phase::Prefill;
  int64_t min_pos = 0;
  const LayerShape* shape = nullptr;

  using Value = float*;

  Slot& slot(size_t i) { return *b.slots_[static_cast<size_t>(work[i].slot)]; }
  int64_t rows(size_t i) const { return static_cast<int64_t>(work[i].tokens.size()); }

  float* embed() {
    const int64_t d = c.n_embd;
    const size_t emb_row = dtype_row_bytes(m.token_embd.type, d);
    for (size_t i = 0; i < work.size(); ++i)
      for (int64_t t = 0; t < rows(i); ++t) {
        const int64_t r = row0[i] + t;
        const auto* src = static_cast<const uint8_t*>(m.token_embd.data) +
                          static_cast<size_t>(work[i].tokens[static_cast<size_t>(t)]) * emb_row;
        kernels::dequantize_row(m.token_embd.type, src, b.s_->x.data() + r * d, d);
        b.s_->pos[static_cast<size_t>(r)] = static_cast<int32_t>(slot(i).n_past + t);
      }
    return b.s_->x.data();
  }
  void boundary(int32_t il) {
    const auto nl = static_cast<int32_t>(c.n_layer());
    if (il < nl) shape = &c.layers[static_cast<size_t>(il)];
    if (b.hook_) b.hook_(LayerEvent{phase, il, nl, min_pos, n});
  }
  float* rmsnorm(float* x, int32_t il, LayerNorm which) {
    kernels::rmsnorm(x, m.layers[static_cast<size_t>(il)].norm(which), b.s_->xn.data(), n, c.n_embd,
                     c.rms_eps);
    return b.s_->xn.data();
  }
  // W x over all rows once, then each item's experts on its own rows (a slot's rows from a
  // scheduled change on under that change's experts).
  void apply(int32_t il, LayerMatrix w, const float* in, float* out, bool accumulate) {
    const kernels::Matrix& mat = m.layers[static_cast<size_t>(il)][w];
    kernels::matmul(mat, in, n, out, b.pool_.get(), accumulate);
    for (size_t i = 0; i < work.size(); ++i)
      slot(i).loras.apply(il, w, in + row0[i] * mat.cols, rows(i), slot(i).n_past, mat.cols,
                          mat.rows, out + row0[i] * mat.rows, b.s_->lora_tmp.data(), b.pool_.get());
  }
  float* linear(float* in, int32_t il, LayerMatrix w) {
    float* out = nullptr;
    switch (w) {
      case LayerMatrix::Q:
        out = b.s_->q.data();
        break;
      case LayerMatrix::K:
        out = b.s_->k.data();
        break;
      case LayerMatrix::V:
        out = b.s_->v.data();
        break;
      case LayerMatrix::Gate:
        out = b.s_->gate.data();
        break;
      case LayerMatrix::Up:
        out = b.s_->up.data();
        break;
      case LayerMatrix::O:
      case LayerMatrix::Down:
        fail("batch: ", short_name(w), " is applied as a residual");
    }
    apply(il, w, in, out, false);
    return out;
  }
  float* rope(float* x, int64_t n_heads) {
    kernels::rope(x, n, n_heads, c.head_dim_k, b.s_->pos.data(), c.rope_base);
    return x;
  }
  float* attention(int32_t il, float* q, float* k, float* v, const LayerShape& sh) {
    const int64_t kd = sh.n_head_kv * c.head_dim_k, vd = sh.n_head_kv * c.head_dim_v;
    const int64_t qd = sh.n_head * c.head_dim_k, ad = sh.n_head * c.head_dim_v;
    float* out = b.s_->attn.data();
    for (size_t i = 0; i < work.size(); ++i) {
      Slot& s = slot(i);
      float* kc = s.k[static_cast<size_t>(il)].data();
      float* vc = s.v[static_cast<size_t>(il)].data();
      std::memcpy(kc + s.n_past * kd, k + row0[i] * kd, static_cast<size_t>(rows(i) * kd) * 4);
      std::memcpy(vc + s.n_past * vd, v + row0[i] * vd, static_cast<size_t>(rows(i) * vd) * 4);
      kernels::attention(q + row0[i] * qd, kc, vc, out + row0[i] * ad, rows(i), s.n_past,
                         {sh.n_head, sh.n_head_kv, c.head_dim_k, c.head_dim_v}, b.pool_.get());
    }
    return out;
  }
  float* silu_mul(float* gate, float* up) {
    kernels::silu_mul(gate, up, gate, n * shape->n_ff);
    return gate;
  }
  float* residual(float* x, float* in, int32_t il, LayerMatrix w) {
    apply(il, w, in, x, true);
    return x;
  }
  bool head(float* x) {
    const int64_t d = c.n_embd;
    float* xn = b.s_->xn.data();
    for (size_t i = 0; i < work.size(); ++i) {  // each item's last row, then one matmul
      kernels::rmsnorm(x + (row0[i] + rows(i) - 1) * d, m.output_norm,
                       xn + static_cast<int64_t>(i) * d, 1, d, c.rms_eps);
      slot(i).n_past += rows(i);
    }
    b.logits_.resize(work.size() * static_cast<size_t>(c.n_vocab));
    kernels::matmul(m.output, xn, static_cast<int64_t>(work.size()), b.logits_.data(),
                    b.pool_.get());
    return true;
  }
};

std::vector<std::span<const float>> Batch::step(const std::vector<Work>& work) {
  const ModelConfig& c = model_->config();
  if (work.empty()) fail("batch: a pass needs work");
  Pass p{*this, *model_, c, work, {}};
  p.phase = Phase::Decode;
  p.min_pos = n_ctx_;
  std::vector<bool> seen(slots_.size(), false);
  for (const Work& w : work) {
    if (!is_open(w.slot)) fail("batch: slot ", w.slot, " is not open");
    if (seen[static_cast<size_t>(w.slot)]) fail("batch: slot ", w.slot, " appears twice in a pass");
    seen[static_cast<size_t>(w.slot)] = true;
    const Slot& s = *slots_[static_cast<size_t>(w.slot)];
    const auto t = static_cast<int64_t>(w.tokens.size());
    if (t == 0) fail("batch: slot ", w.slot, " has no tokens in this pass");
    if (s.n_past + t > n_ctx_)
      fail("batch: slot ", w.slot, ": ", t, " tokens after ", s.n_past,
           " cached ones exceed the context of ", n_ctx_, " tokens");
    for (int32_t id : w.tokens)
      if (id < 0 || id >= c.n_vocab)
        fail("batch: token id ", id, " is outside the vocabulary of ", c.n_vocab);
    if (t > 1 || s.n_past == 0) p.phase = Phase::Prefill;
    p.min_pos = std::min(p.min_pos, s.n_past);
    p.row0.push_back(p.n);
    p.n += t;
  }
  if (p.n > max_rows_) fail("batch: ", p.n, " rows exceed the pass limit of ", max_rows_);
  llama_forward(p, c);
  // Changes now reached become each slot's experts (the next row is at n_past).
  for (const Work& w : work) {
    Slot& s = *slots_[static_cast<size_t>(w.slot)];
    s.loras.advance(s.n_past);
  }
  std::vector<std::span<const float>> out;
  for (size_t i = 0; i < work.size(); ++i)
    out.emplace_back(logits_.data() + i * static_cast<size_t>(c.n_vocab),
                     static_cast<size_t>(c.n_vocab));
  return out;
}

}  // namespace cln
