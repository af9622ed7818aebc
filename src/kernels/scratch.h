// Grow-only, 64-byte aligned scratch buffers kept per thread, so that after the first
// token the hot paths never allocate. Each user takes its own slot.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace cln::kernels::detail {

enum class ScratchSlot { kActivations, kPackedA, kPackedB, kRowTemp, kAttention, kCount };

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::free(p_); }

  // At least `bytes` bytes; the contents are not kept when the buffer grows.
  void* get(size_t bytes) {
    if (bytes > cap_) {
      std::free(p_);
      cap_ = (bytes + bytes / 4 + 63) / 64 * 64;
      p_ = std::aligned_alloc(64, cap_);
      if (p_ == nullptr) throw std::bad_alloc();
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t cap_ = 0;
};

inline Scratch& scratch(ScratchSlot slot) {
  thread_local Scratch s[static_cast<int>(ScratchSlot::kCount)];
  return s[static_cast<int>(slot)];
}

template <typename T>
T* scratch_as(ScratchSlot slot, size_t count) {
  return static_cast<T*>(scratch(slot).get(count * sizeof(T)));
}

}  // namespace cln::kernels::detail
