// A fixed pool of worker threads for the per-token hot path. run() hands one task to
// every thread (the caller is thread 0) and returns when all are done; workers spin
// briefly before sleeping so back-to-back calls within a token cost about a microsecond.
// parallel_for() gives each thread its own share of a range and lets threads that are done
// take over the chunks of those that have not come, so a worker that the OS has
// descheduled (a co-running app, a busy core) delays little: the caller takes its chunks.
// The kernels use parallel_for.
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
  // multiples of `grain` (but the last at n). Each thread first works through its own
  // share of the range (the same share every call, so data a thread touched last time is
  // still in its cache), then helps with the others' shares; a thread that never shows up
  // (descheduled by the OS) has its share done by the others. f must not throw.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& f) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int nth = size();
    if (n <= grain || nth == 1) {
      f(int64_t{0}, n);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    constexpr int kMaxShares = 64;
    struct alignas(64) Share {
      std::atomic<int64_t> next;
      int64_t end, chunk;
    };
    struct Shares {
      Fn* f;
      int count;
      Share share[kMaxShares];
    } sh;
    sh.f = &f;
    sh.count = nth < kMaxShares ? nth : kMaxShares;
    const int64_t units = (n + grain - 1) / grain;
    for (int i = 0; i < sh.count; ++i) {
      const int64_t b = units * i / sh.count * grain, e = units * (i + 1) / sh.count * grain;
      sh.share[i].next.store(b < n ? b : n, std::memory_order_relaxed);
      sh.share[i].end = e < n ? e : n;
      // A few chunks per share, so thieves can even out the end without much contention.
      const int64_t len = (units * (i + 1) / sh.count - units * i / sh.count) * grain;
      sh.share[i].chunk = len / 4 > grain ? (len / 4 + grain - 1) / grain * grain : grain;
    }
    run_claimed(
        [](void* p, int tid, int) {
          auto* s = static_cast<Shares*>(p);
          for (int k = 0; k < s->count; ++k) {
            Share& x = s->share[(tid + k) % s->count];
            for (;;) {
              const int64_t b = x.next.fetch_add(x.chunk, std::memory_order_relaxed);
              if (b >= x.end) break;
              (*s->f)(b, b + x.chunk < x.end ? b + x.chunk : x.end);
            }
          }
        },
        &sh);
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
