// The forward pass. Per layer: RMSNorm -> Q,K,V (written straight into the KV cache)
// -> RoPE -> causal GQA attention -> output projection added to the residual; RMSNorm
// -> SwiGLU FFN added to the residual. Layers with zero heads or zero FFN width skip
// that half. LoRA experts add their low-rank products after each base matmul.
#include "clone/engine/context.h"

#include <algorithm>
#include <cmath>

#include "clone/core/error.h"
#include "clone/engine/forward.h"
#include "clone/kernels/ops.h"
#include "lora_table.h"

namespace cln {

struct Context::Scratch {
  std::vector<float> x;      // F32 [n_batch, n_embd]  residual stream
  std::vector<float> xn;     // F32 [n_batch, n_embd]  normalized input of a half-layer
  std::vector<float> q;      // F32 [n_batch, max n_head * dk]
  std::vector<float> attn;   // F32 [n_batch, max n_head * dv]
  std::vector<float> gate;   // F32 [n_batch, max n_ff]
  std::vector<float> up;     // F32 [n_batch, max n_ff]
  std::vector<int32_t> pos;  // [n_batch]
};

Context::Context(std::shared_ptr<const Model> model, const ContextParams& p)
    : model_(std::move(model)),
      s_(std::make_unique<Scratch>()),
      loras_(std::make_unique<LoraSchedule>()) {
  const ModelConfig& c = model_->config();
  n_ctx_ = p.n_ctx > 0 ? p.n_ctx : std::min<int64_t>(c.n_ctx_train, 4096);
  n_batch_ = std::max<int64_t>(1, std::min(p.n_batch, n_ctx_));
  pool_ = std::make_unique<kernels::ThreadPool>(p.n_threads);
  int64_t max_q = 0, max_a = 0, max_ff = 0;
  for (const auto& l : c.layers) {
    max_q = std::max(max_q, l.n_head * c.head_dim_k);
    max_a = std::max(max_a, l.n_head * c.head_dim_v);
    max_ff = std::max(max_ff, l.n_ff);
    k_cache_.emplace_back(static_cast<size_t>(n_ctx_ * l.n_head_kv * c.head_dim_k));
    v_cache_.emplace_back(static_cast<size_t>(n_ctx_ * l.n_head_kv * c.head_dim_v));
  }
  const auto nb = static_cast<size_t>(n_batch_);
  s_->x.resize(nb * static_cast<size_t>(c.n_embd));
  s_->xn.resize(nb * static_cast<size_t>(c.n_embd));
  s_->q.resize(nb * static_cast<size_t>(max_q));
  s_->attn.resize(nb * static_cast<size_t>(max_a));
  s_->gate.resize(nb * static_cast<size_t>(max_ff));
  s_->up.resize(nb * static_cast<size_t>(max_ff));
  s_->pos.resize(nb);
}

Context::~Context() = default;

size_t Context::state_bytes() const {
  size_t n = 0;
  for (size_t i = 0; i < k_cache_.size(); ++i) n += (k_cache_[i].size() + v_cache_[i].size()) * 4;
  n += (s_->x.size() + s_->xn.size() + s_->q.size() + s_->attn.size() + s_->gate.size() +
        s_->up.size() + logits_.size() + lora_tmp_.size()) *
       4;
  return n;
}

void Context::truncate(int64_t n) {
  if (n < 0 || n > n_past_) fail("truncate: ", n, " is outside the cached 0..", n_past_);
  n_past_ = n;
}

void Context::reset() {
  n_past_ = 0;
  loras_->drop_scheduled();
}

void Context::set_loras(std::vector<ActiveLora> loras) {
  loras_->set(std::make_unique<LoraTable>(*model_, loras));
  lora_tmp_.resize(static_cast<size_t>(n_batch_ * loras_->max_rank()), 0.0f);
}

void Context::set_loras_from(int64_t pos, std::vector<ActiveLora> loras) {
  if (pos >= n_ctx_) fail("set_loras_from: position ", pos, " past the context of ", n_ctx_);
  loras_->set_from(pos, n_past_, std::make_unique<LoraTable>(*model_, loras));
  lora_tmp_.resize(static_cast<size_t>(n_batch_ * loras_->max_rank()), 0.0f);
}

// y (+)= W x, then each active expert: y += w * (alpha / r) * B (A x).
void Context::linear(int64_t layer, LayerMatrix which, const float* x, int64_t n, float* y,
                     bool accumulate, bool adapters) {
  kernels::matmul(model_->layers[static_cast<size_t>(layer)][which], x, n, y, pool_.get(),
                  accumulate);
  if (adapters) {
    const kernels::Matrix& mat = model_->layers[static_cast<size_t>(layer)][which];
    loras_->apply(layer, which, x, n, n_past_, mat.cols, mat.rows, y, lora_tmp_.data(),
                  pool_.get());
  }
}

void Context::check_tokens(std::span<const int32_t> tokens) const {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) fail("eval: no tokens to evaluate");
  if (n_past_ + n > n_ctx_)
    fail("eval: ", n, " tokens after ", n_past_, " cached ones exceed the context of ", n_ctx_,
         " tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= model_->config().n_vocab)
      fail("eval: token id ", t, " is outside the vocabulary of ", model_->config().n_vocab);
}

std::span<const float> Context::eval(std::span<const int32_t> tokens, bool all_logits) {
  const ModelConfig& c = model_->config();
  const auto n = static_cast<int64_t>(tokens.size());
  check_tokens(tokens);
  const auto nv = static_cast<size_t>(c.n_vocab);
  logits_.resize(all_logits ? static_cast<size_t>(n) * nv : nv);
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(n_batch_, n - done);
    const bool last = done + m == n;
    float* out = all_logits ? logits_.data() + static_cast<size_t>(done) * nv : logits_.data();
    eval_pass(tokens.data() + done, m, all_logits, (all_logits || last) ? out : nullptr);
    done += m;
  }
  return {logits_.data(), logits_.size()};
}

// The inference executor of llama_forward (forward.h): values live in the scratch
// buffers, K and V are written straight into the KV cache, the hook fires at each
// boundary, and only the logits asked for are computed.
struct Context::Pass {
  Context& ctx;
  const Model& m;
  const ModelConfig& c;
  const int32_t* tokens;
  int64_t n;
  bool all_logits;
  float* logits_out;
  Phase phase;
  bool adapters = true;               // apply the active LoRA experts
  double* hidden_sum = nullptr;       // partial passes: sum of the hidden states per dimension
  const LayerShape* shape = nullptr;  // of the layer being run

  using Value = float*;

  float* embed() {
    const int64_t d = c.n_embd;
    Scratch& s = *ctx.s_;
    const size_t emb_row = dtype_row_bytes(m.token_embd.type, d);
    for (int64_t t = 0; t < n; ++t) {
      const auto* row =
          static_cast<const uint8_t*>(m.token_embd.data) + static_cast<size_t>(tokens[t]) * emb_row;
      kernels::dequantize_row(m.token_embd.type, row, s.x.data() + t * d, d);
      s.pos[static_cast<size_t>(t)] = static_cast<int32_t>(ctx.n_past_ + t);
    }
    return s.x.data();
  }
  void boundary(int32_t il) {
    const auto nl = static_cast<int32_t>(c.n_layer());
    if (il < nl) shape = &c.layers[static_cast<size_t>(il)];
    if (ctx.hook_ && !hidden_sum) ctx.hook_(LayerEvent{phase, il, nl, ctx.n_past_, n});
  }
  float* rmsnorm(float* x, int32_t il, LayerNorm which) {
    float* xn = ctx.s_->xn.data();
    kernels::rmsnorm(x, m.layers[static_cast<size_t>(il)].norm(which), xn, n, c.n_embd, c.rms_eps);
    return xn;
  }
  // Where each matrix's output goes: K and V into this layer's cache rows.
  float* linear_out(int32_t il, LayerMatrix w) {
    Scratch& s = *ctx.s_;
    switch (w) {
      case LayerMatrix::Q:
        return s.q.data();
      case LayerMatrix::K:
        return ctx.k_cache_[static_cast<size_t>(il)].data() +
               ctx.n_past_ * shape->n_head_kv * c.head_dim_k;
      case LayerMatrix::V:
        return ctx.v_cache_[static_cast<size_t>(il)].data() +
               ctx.n_past_ * shape->n_head_kv * c.head_dim_v;
      case LayerMatrix::Gate:
        return s.gate.data();
      case LayerMatrix::Up:
        return s.up.data();
      case LayerMatrix::O:
      case LayerMatrix::Down:
        break;
    }
    fail("engine: ", short_name(w), " is applied as a residual, not into a buffer");
  }
  float* linear(float* in, int32_t il, LayerMatrix w) {
    float* out = linear_out(il, w);
    ctx.linear(il, w, in, n, out, false, adapters);
    return out;
  }
  float* rope(float* x, int64_t n_heads) {
    kernels::rope(x, n, n_heads, c.head_dim_k, ctx.s_->pos.data(), c.rope_base);
    return x;
  }
  float* attention(int32_t il, float* q, float* /*k*/, float* /*v*/, const LayerShape& sh) {
    float* out = ctx.s_->attn.data();
    kernels::attention(q, ctx.k_cache_[static_cast<size_t>(il)].data(),
                       ctx.v_cache_[static_cast<size_t>(il)].data(), out, n, ctx.n_past_,
                       {sh.n_head, sh.n_head_kv, c.head_dim_k, c.head_dim_v}, ctx.pool_.get());
    return out;
  }
  float* silu_mul(float* gate, float* up) {
    kernels::silu_mul(gate, up, gate, n * shape->n_ff);
    return gate;
  }
  float* residual(float* x, float* in, int32_t il, LayerMatrix w) {
    ctx.linear(il, w, in, n, x, true, adapters);
    return x;
  }
  bool head(float* x) {
    ctx.n_past_ += n;
    if (hidden_sum) {  // a partial pass: add up the hidden states instead
      for (int64_t t = 0; t < n; ++t)
        for (int64_t j = 0; j < c.n_embd; ++j) hidden_sum[j] += x[t * c.n_embd + j];
      return false;
    }
    if (!logits_out) return false;
    const int64_t d = c.n_embd;
    float* xn = ctx.s_->xn.data();
    const int64_t rows = all_logits ? n : 1;
    kernels::rmsnorm(x + (n - rows) * d, m.output_norm, xn, rows, d, c.rms_eps);
    kernels::matmul(m.output, xn, rows, logits_out, ctx.pool_.get());
    return true;
  }
};

void Context::eval_pass(const int32_t* tokens, int64_t n, bool all_logits, float* logits_out) {
  const Phase phase = (n == 1 && n_past_ > 0) ? Phase::Decode : Phase::Prefill;
  Pass pass{*this, *model_, model_->config(), tokens, n, all_logits, logits_out, phase};
  llama_forward(pass, model_->config());
  loras_->advance(n_past_);  // changes now reached become the experts in use
}

std::vector<float> Context::mean_hidden(std::span<const int32_t> tokens, int64_t n_layers) {
  const ModelConfig& c = model_->config();
  if (n_layers < 0 || n_layers > c.n_layer())
    fail("mean_hidden: ", n_layers, " layers asked of a model with ", c.n_layer());
  reset();
  check_tokens(tokens);
  const auto n = static_cast<int64_t>(tokens.size());
  std::vector<double> sum(static_cast<size_t>(c.n_embd), 0.0);
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(n_batch_, n - done);
    Pass pass{*this, *model_, c, tokens.data() + done, m, false, nullptr, Phase::Prefill};
    pass.adapters = false;
    pass.hidden_sum = sum.data();
    llama_forward(pass, c, static_cast<int32_t>(n_layers));
    done += m;
  }
  reset();
  std::vector<float> mean(sum.size());
  for (size_t j = 0; j < sum.size(); ++j)
    mean[j] = static_cast<float>(sum[j] / static_cast<double>(n));
  return mean;
}

}  // namespace cln
