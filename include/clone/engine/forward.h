// The Llama forward pass, written once. The engine runs it for inference (values in
// scratch buffers, K and V written into the KV cache, the layer hook fired at every
// boundary) and the trainer runs it for training (values are autograd tensors); each
// supplies an executor, and this template is the only place the block's math is spelled
// out:
//
//   x = embed(tokens)
//   per layer:  h = rmsnorm(x) ; q = rope(Wq h) ; k = rope(Wk h) ; v = Wv h
//               x = x + Wo attention(q, k, v)              (layers with heads)
//               h = rmsnorm(x) ; x = x + Wdown (silu(Wgate h) * Wup h)   (layers with an FFN)
//   logits = head(rmsnorm(x))
//
// Every W y above is the executor's linear(), which adds the active LoRA experts:
//   W y + sum_i w_i (alpha_i / r_i) B_i (A_i y).
//
// An executor E provides:
//   using Value = ...;                               activations of the pass's tokens
//   Value embed();
//   void boundary(int32_t layer);                    before each layer, and with n_layer
//                                                    before the head (the layer hook)
//   Value rmsnorm(const Value& x, const float-or-tensor weight of (layer, LayerNorm));
//   Value linear(const Value& x, int32_t layer, LayerMatrix m);
//   Value rope(Value x, int64_t n_heads);
//   Value attention(int32_t layer, Value q, Value k, Value v, const LayerShape& s);
//   Value silu_mul(Value gate, Value up);
//   Value residual(Value x, const Value& in, int32_t layer, LayerMatrix m);   x + W in
//   auto head(const Value& x);                       final norm and output head
#pragma once

#include <cstdint>

#include "clone/engine/model_config.h"
#include "clone/engine/schema.h"

namespace cln {

// n_run < n_layer stops after that many layers (the router's prompt embedding): the
// executor's head() then receives the hidden states instead of running the head, and no
// boundary is announced for the layers not run.
template <class E>
auto llama_forward(E& e, const ModelConfig& c, int32_t n_run = -1) {
  const auto nl = static_cast<int32_t>(c.n_layer());
  if (n_run < 0 || n_run > nl) n_run = nl;
  typename E::Value x = e.embed();
  for (int32_t il = 0; il < n_run; ++il) {
    e.boundary(il);
    const LayerShape& s = c.layers[static_cast<size_t>(il)];
    if (s.has_attention()) {
      const typename E::Value h = e.rmsnorm(x, il, LayerNorm::Attn);
      typename E::Value q = e.rope(e.linear(h, il, LayerMatrix::Q), s.n_head);
      typename E::Value k = e.rope(e.linear(h, il, LayerMatrix::K), s.n_head_kv);
      typename E::Value v = e.linear(h, il, LayerMatrix::V);
      x = e.residual(x, e.attention(il, q, k, v, s), il, LayerMatrix::O);
    }
    if (s.has_ffn()) {
      const typename E::Value h = e.rmsnorm(x, il, LayerNorm::Ffn);
      x = e.residual(
          x, e.silu_mul(e.linear(h, il, LayerMatrix::Gate), e.linear(h, il, LayerMatrix::Up)), il,
          LayerMatrix::Down);
    }
  }
  if (n_run == nl) e.boundary(nl);
  return e.head(x);
}

}  // namespace cln
