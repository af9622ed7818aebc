// ThreadPool: persistent workers woken by a generation counter.
//
// run() publishes (fn, ctx), bumps `gen` and does its own share as thread 0. Workers spin
// on `gen` for a short while after each task (so the ~100 back-to-back runs of a token
// cost a cache-line round trip, not a syscall) and then sleep on a futex, so an idle pool
// costs no CPU. The caller waits until the count in `state` reaches zero: every worker for
// run(), only those that joined in time for run_claimed().
#include "clone/kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cln::kernels {
namespace {

// How long a worker keeps spinning for the next task before it goes to sleep. Long
// enough to bridge the serial gaps between the runs of one forward pass, short enough
// that a pool between requests sleeps almost at once.
constexpr auto kSpinFor = std::chrono::microseconds(200);
constexpr int kPauseSpins = 4096;  // roughly 10-40 us of pause instructions

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// The one place that knows how to sleep on and wake a 32-bit atomic: the Linux futex
// directly (no waiter bookkeeping in the library), C++20 atomic wait elsewhere.
inline void wait_while_equal(std::atomic<uint32_t>& a, uint32_t old) {
#if defined(__linux__)
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&a), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
#else
  a.wait(old, std::memory_order_acquire);
#endif
}

inline void wake_all(std::atomic<uint32_t>& a) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&a), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
#else
  a.notify_all();
#endif
}

}  // namespace

// The state of the current task in one word, so a worker can check and join it atomically:
//   bits 63..32  generation (the same value as `gen`, the futex word workers sleep on)
//   bit  31      closed: the caller has finished its share; no one may join any more
//   bit  30      claimed: a run_claimed task, which workers join only while it is open
//   bits 29..0   run: workers still to finish; run_claimed: workers that joined and run
constexpr uint64_t kClosed = uint64_t{1} << 31;
constexpr uint64_t kClaimed = uint64_t{1} << 30;
constexpr uint64_t kCountMask = kClaimed - 1;

struct ThreadPool::Impl {
  int n_threads = 1;
  std::vector<std::thread> workers;

  // Each hot field on its own cache line: the caller writes gen/state/task, workers
  // write state (counts) and sleepers.
  alignas(64) std::atomic<uint32_t> gen{0};
  alignas(64) std::atomic<uint64_t> state{0};
  alignas(64) std::atomic<int> sleepers{0};
  alignas(64) TaskFn fn = nullptr;
  void* ctx = nullptr;
  bool stop = false;  // written before the last generation is published, read after it

  // Waits until the caller publishes a generation other than `seen`: spins, then yields,
  // then sleeps on the futex.
  void wait_for_next(uint32_t seen) {
    if (gen.load(std::memory_order_acquire) != seen) return;
    const auto t0 = std::chrono::steady_clock::now();
    // Pause-spin first (the next task usually comes within microseconds), then keep
    // polling with yields so that on an oversubscribed machine the threads still
    // working get the core.
    for (int spins = 0; gen.load(std::memory_order_acquire) == seen;) {
      if (++spins < kPauseSpins) {
        cpu_relax();
      } else {
        std::this_thread::yield();
        if (std::chrono::steady_clock::now() - t0 > kSpinFor) break;
      }
    }
    while (gen.load(std::memory_order_acquire) == seen) {
      // Announce the sleep before re-checking, so a caller that bumps gen after our check
      // sees sleepers > 0 and wakes us (both sides use seq_cst).
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      if (gen.load(std::memory_order_seq_cst) == seen) wait_while_equal(gen, seen);
      sleepers.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  void worker(int tid) {
    uint32_t seen = 0;  // the last generation this worker has dealt with
    for (;;) {
      uint64_t s = state.load(std::memory_order_acquire);
      if (static_cast<uint32_t>(s >> 32) == seen) {
        wait_for_next(seen);
        continue;
      }
      seen = static_cast<uint32_t>(s >> 32);
      if ((s & kClaimed) == 0) {  // run(): every worker, exactly once
        if (stop) return;
        fn(ctx, tid, n_threads);
        state.fetch_sub(1, std::memory_order_acq_rel);
        continue;
      }
      // run_claimed(): join only while this generation is still open.
      bool joined = false;
      while (static_cast<uint32_t>(s >> 32) == seen && (s & kClosed) == 0) {
        if (state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
          joined = true;
          break;
        }
      }
      if (!joined) continue;  // missed it (or a newer generation is out: the loop looks again)
      fn(ctx, tid, n_threads);
      state.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  void publish(TaskFn f, void* c, uint64_t mode_and_count) {
    fn = f;
    ctx = c;
    const uint32_t g = gen.load(std::memory_order_relaxed) + 1;
    state.store((static_cast<uint64_t>(g) << 32) | mode_and_count, std::memory_order_release);
    gen.store(g, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) wake_all(gen);
  }

  // Waits until the count in `state` reaches zero. Workers normally finish within
  // microseconds of us; on an oversubscribed machine one may have been descheduled, so
  // after a while give the core away instead of burning it.
  void wait_count_zero() {
    for (int spins = 0; (state.load(std::memory_order_acquire) & kCountMask) != 0; ++spins) {
      if (spins < kPauseSpins) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(std::make_unique<Impl>()) {
  if (n_threads <= 0)
    n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  impl_->n_threads = n_threads;
  impl_->workers.reserve(static_cast<size_t>(n_threads - 1));
  for (int t = 1; t < n_threads; ++t) impl_->workers.emplace_back([this, t] { impl_->worker(t); });
}

ThreadPool::~ThreadPool() {
  impl_->stop = true;
  impl_->publish(nullptr, nullptr, static_cast<uint64_t>(impl_->n_threads - 1));
  for (auto& w : impl_->workers) w.join();
}

int ThreadPool::size() const {
  return impl_->n_threads;
}

void ThreadPool::run(TaskFn fn, void* ctx) {
  Impl& p = *impl_;
  if (p.n_threads == 1) {
    fn(ctx, 0, 1);
    return;
  }
  p.publish(fn, ctx, static_cast<uint64_t>(p.n_threads - 1));
  fn(ctx, 0, p.n_threads);
  p.wait_count_zero();
}

void ThreadPool::run_claimed(TaskFn fn, void* ctx) {
  Impl& p = *impl_;
  if (p.n_threads == 1) {
    fn(ctx, 0, 1);
    return;
  }
  p.publish(fn, ctx, kClaimed);
  fn(ctx, 0, p.n_threads);
  p.state.fetch_or(kClosed, std::memory_order_acq_rel);  // late workers now skip this one
  p.wait_count_zero();
}

}  // namespace cln::kernels
