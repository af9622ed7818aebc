// A fixed pool of worker threads for the per-token hot path. run() hands one task to
// every thread (the caller is thread 0) and returns when all are done; workers spin
// briefly before sleeping so back-to-back calls within a token cost about a microsecond.
#pragma once

#include <memory>
#include <type_traits>

namespace cln::kernels {

class ThreadPool {
 public:
  // n_threads counts the caller; 0 means every available core.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;

  using TaskFn = void (*)(void* ctx, int tid, int n_threads);
  void run(TaskFn fn, void* ctx);

  // Calls f(tid, n_threads) on every thread; f is not copied and must not throw.
  template <typename F>
  void run(F&& f) {
    using Fn = std::remove_reference_t<F>;  // F may be deduced as an lvalue (const) reference
    run([](void* c, int tid, int nth) { (*static_cast<Fn*>(c))(tid, nth); },
        const_cast<void*>(static_cast<const void*>(&f)));
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits [0, n) into n_threads nearly equal contiguous ranges, rounded to `align`.
inline void split_range(long n, int tid, int n_threads, long align, long* begin, long* end) {
  const long units = (n + align - 1) / align;
  const long per = units / n_threads, extra = units % n_threads;
  long b = tid * per + (tid < extra ? tid : extra);
  long e = b + per + (tid < extra ? 1 : 0);
  b *= align;
  e *= align;
  *begin = b < n ? b : n;
  *end = e < n ? e : n;
}

}  // namespace cln::kernels
