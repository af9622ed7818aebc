// A fixed pool of worker threads for the per-token hot path. run() hands one task to
// every thread (the caller is thread 0) and returns when all are done; workers spin
// briefly before sleeping so back-to-back calls within a token cost about a microsecond.
// parallel_for() hands out chunks of a range to whichever threads are running, so a
// worker that the OS has descheduled (a co-running app, a busy core) delays nothing: the
// caller takes its chunks. The kernels use parallel_for.
#pragma once

#include <atomic>
#include <cstdint>
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

  // Calls f(begin, end) over chunks that tile [0, n) exactly once, on the caller and on
  // workers that are awake to claim them; returns when every chunk is done. Chunks are
  // multiples of `grain` (but the last) and shrink as the range runs out (guided
  // scheduling: large chunks while much is left, grain-sized ones at the end), so threads
  // finish together. f must not throw.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& f) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (n <= grain || size() == 1) {
      f(int64_t{0}, n);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    struct Chunks {
      Fn* f;
      int64_t n, grain, parts;
      std::atomic<int64_t> next{0};
    } chunks{&f, n, grain, 2 * static_cast<int64_t>(size())};
    run_claimed(
        [](void* p, int, int) {
          auto* c = static_cast<Chunks*>(p);
          int64_t b = c->next.load(std::memory_order_relaxed), len;
          for (;;) {
            if (b >= c->n) return;
            len = (c->n - b) / c->parts;
            len = len <= c->grain ? c->grain : (len + c->grain - 1) / c->grain * c->grain;
            if (len > c->n - b) len = c->n - b;
            if (c->next.compare_exchange_weak(b, b + len, std::memory_order_relaxed)) {
              (*c->f)(b, b + len);
              b = c->next.load(std::memory_order_relaxed);
            }
          }
        },
        &chunks);
  }

  // Runs fn on the caller and on every worker that starts it before the caller has
  // finished its own call; returns when all that started have finished. (parallel_for's
  // engine: fn must share out its work so that any subset of threads completes it.)
  void run_claimed(TaskFn fn, void* ctx);

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
