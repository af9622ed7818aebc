// Minimal reverse-mode automatic differentiation in F32 over the engine's own ops.
//
// A Tensor is a row-major block of floats with a shape and, when it needs one, a
// gradient of the same size. Ops run their forward pass at once (through
// cln::kernels) and, when any input needs a gradient, record a closure on the Graph
// that adds their contribution to the inputs' gradients. Graph::backward() seeds the
// loss with 1 and runs the closures in reverse order. Leaves that need gradients are
// parameters (weights, LoRA adapters, the small nets of the search and DVFS policy);
// the gradient left in a frozen weight marked requires_grad is what Taylor importance
// reads.
//
// Every backward op is checked against finite differences in tests/train.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "clone/kernels/ops.h"

namespace cln::train {

// A float buffer from a size-keyed free list: the same shapes recur every step, so
// after the first step nothing is allocated and no page is faulted in again.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n);  // uninitialized
  ~Buffer();
  Buffer(Buffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* data() { return p_; }
  const float* data() const { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return p_ == nullptr; }

 private:
  float* p_ = nullptr;
  size_t n_ = 0;
};

struct Tensor {
  std::vector<int64_t> shape;  // row-major; the last dimension is contiguous
  bool requires_grad = false;
  std::string name;  // parameters: the GGUF tensor name

  Tensor(std::vector<int64_t> shape, bool requires_grad);
  int64_t numel() const { return n_; }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return cols() ? n_ / cols() : 0; }

  float* data() { return value_.data(); }
  const float* data() const { return value_.data(); }
  // The gradient, allocated and zeroed on first use.
  float* grad();
  const float* grad_or_null() const { return grad_.empty() ? nullptr : grad_.data(); }
  bool has_grad() const { return !grad_.empty(); }
  void zero_grad();  // keeps the buffer, sets it to zero
  void free_grad();

 private:
  int64_t n_ = 0;
  Buffer value_;
  Buffer grad_;
};
using TensorP = std::shared_ptr<Tensor>;

// A new tensor (uninitialized values).
TensorP make_tensor(std::vector<int64_t> shape, bool requires_grad = false);
// A leaf that needs gradients, named, zero-filled.
TensorP make_param(const std::string& name, std::vector<int64_t> shape);

// The tape of one forward pass.
class Graph {
 public:
  explicit Graph(kernels::ThreadPool* pool) : pool_(pool) {}
  kernels::ThreadPool* pool() const { return pool_; }
  // False: ops record nothing (evaluation, generation).
  bool grad_enabled = true;

  void record(std::function<void()> backward) { tape_.push_back(std::move(backward)); }
  // loss must hold one value. Seeds d loss = 1, runs the tape in reverse, then clears it
  // (intermediate tensors are released; parameters keep their gradients).
  void backward(const TensorP& loss);
  void clear() { tape_.clear(); }
  size_t size() const { return tape_.size(); }

 private:
  kernels::ThreadPool* pool_;
  std::vector<std::function<void()>> tape_;
};

// Ops. Shapes in comments; n = rows (tokens). Inputs are never modified.
namespace op {

// y [n, d] = table[ids[i]]            table [V, d]
TensorP embedding(Graph& g, const TensorP& table, const std::vector<int32_t>& ids);
// y [n, out] = x W^T                   x [n, in], w [out, in]
TensorP linear(Graph& g, const TensorP& x, const TensorP& w);
// y = x / rms(x) * w                   x [n, d], w [d]
TensorP rmsnorm(Graph& g, const TensorP& x, const TensorP& w, float eps);
// Rotary embedding with the engine's adjacent-pair convention.
//   x [n, n_heads * head_dim], pos [n]
TensorP rope(Graph& g, const TensorP& x, int64_t n_heads, int64_t head_dim,
             const std::vector<int32_t>& pos, float base);
// Causal grouped-query attention within each of n_seq sequences of seq_len tokens
// (rows are sequence-major: row = s * seq_len + t).
//   q [n, n_head * dk], k [n, n_head_kv * dk], v [n, n_head_kv * dv] -> [n, n_head * dv]
TensorP attention(Graph& g, const TensorP& q, const TensorP& k, const TensorP& v, int64_t n_seq,
                  int64_t seq_len, const kernels::AttentionShape& s);
// silu(gate) * up, elementwise
TensorP silu_mul(Graph& g, const TensorP& gate, const TensorP& up);
// a + b, same shape
TensorP add(Graph& g, const TensorP& a, const TensorP& b);
// s * x
TensorP scale(Graph& g, const TensorP& x, float s);
// Mean over the rows whose target is >= 0 of -log softmax(logits)[target].
// logits [n, V]; targets [n], -1 = ignored. Returns [1]. Throws if no row counts.
TensorP cross_entropy(Graph& g, const TensorP& logits, const std::vector<int32_t>& targets);

// Knowledge distillation from a teacher's logits (no gradient to them): the mean over the
// rows whose target is >= 0 of (1 - w) * -log q[target] + w * KL(p || q), q = softmax(logits),
// p = softmax(teacher). logits, teacher [n, V]; w = kd_weight in [0, 1]. Returns [1].
TensorP distill_cross_entropy(Graph& g, const TensorP& logits, const TensorP& teacher,
                              const std::vector<int32_t>& targets, float kd_weight);

// Small networks (MLP, LSTM) for the tailoring search, the DVFS policy, the length predictor.
TensorP add_bias(Graph& g, const TensorP& x, const TensorP& b);  // x [n, d] + b [d]
TensorP mul(Graph& g, const TensorP& a, const TensorP& b);       // elementwise, same shape
TensorP tanh(Graph& g, const TensorP& x);
TensorP sigmoid(Graph& g, const TensorP& x);
TensorP relu(Graph& g, const TensorP& x);
// Columns [begin, end) of x [n, d] -> [n, end - begin]
TensorP slice_cols(Graph& g, const TensorP& x, int64_t begin, int64_t end);
// [a | b] along columns: a [n, da], b [n, db] -> [n, da + db]
TensorP concat_cols(Graph& g, const TensorP& a, const TensorP& b);
// sum of all values -> [1]
TensorP sum(Graph& g, const TensorP& x);
// mean((x - target)^2) over all values -> [1]
TensorP mse(Graph& g, const TensorP& x, const std::vector<float>& target);

}  // namespace op

}  // namespace cln::train
