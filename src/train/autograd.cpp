// Tensors, the buffer free list and the tape. The ops live in ops_grad.cpp.
#include <cstring>
#include <map>
#include <mutex>

#include "clone/core/error.h"
#include "clone/train/autograd.h"

namespace cln::train {

namespace {
// Freed buffers by size. The same shapes recur every training step, so the list
// converges after one step. Capped so an unusual run cannot hoard memory.
struct FreeList {
  std::mutex mu;
  std::multimap<size_t, float*> free;
  size_t cached = 0;
  static constexpr size_t kMaxCachedFloats = size_t{3} << 30 >> 2;  // 3 GiB

  float* take(size_t n) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = free.find(n);
      if (it != free.end()) {
        float* p = it->second;
        free.erase(it);
        cached -= n;
        return p;
      }
    }
    return new float[n];
  }
  void give(float* p, size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    if (cached + n > kMaxCachedFloats) {
      delete[] p;
      return;
    }
    free.emplace(n, p);
    cached += n;
  }
  ~FreeList() {
    for (auto& [n, p] : free) delete[] p;
  }
};
FreeList& free_list() {
  static FreeList f;
  return f;
}
}  // namespace

Buffer::Buffer(size_t n) : p_(n ? free_list().take(n) : nullptr), n_(n) {}
Buffer::~Buffer() {
  if (p_) free_list().give(p_, n_);
}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (p_) free_list().give(p_, n_);
    p_ = o.p_;
    n_ = o.n_;
    o.p_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}

Tensor::Tensor(std::vector<int64_t> s, bool rg) : shape(std::move(s)), requires_grad(rg) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("tensor: negative dimension ", d);
    n *= d;
  }
  n_ = n;
  value_ = Buffer(static_cast<size_t>(n));
}

float* Tensor::grad() {
  if (grad_.empty() && n_ > 0) {
    grad_ = Buffer(static_cast<size_t>(n_));
    std::memset(grad_.data(), 0, static_cast<size_t>(n_) * sizeof(float));
  }
  return grad_.data();
}

void Tensor::zero_grad() {
  if (!grad_.empty()) std::memset(grad_.data(), 0, grad_.size() * sizeof(float));
}

void Tensor::free_grad() {
  grad_ = Buffer();
}

TensorP make_tensor(std::vector<int64_t> shape, bool requires_grad) {
  return std::make_shared<Tensor>(std::move(shape), requires_grad);
}

TensorP make_param(const std::string& name, std::vector<int64_t> shape) {
  auto t = std::make_shared<Tensor>(std::move(shape), true);
  t->name = name;
  if (t->numel()) std::memset(t->data(), 0, static_cast<size_t>(t->numel()) * sizeof(float));
  return t;
}

void Graph::backward(const TensorP& loss) {
  if (loss->numel() != 1) fail("backward: the loss must hold one value, it has ", loss->numel());
  if (!loss->requires_grad) fail("backward: the loss does not depend on any parameter");
  loss->grad()[0] += 1.0f;
  for (size_t i = tape_.size(); i-- > 0;) {
    tape_[i]();
    tape_[i] = nullptr;  // release what the closure holds as soon as it has run
  }
  tape_.clear();
}

}  // namespace cln::train
