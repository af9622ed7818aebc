// ThreadPool: persistent workers woken by a generation counter.
//
// run() publishes (fn, ctx), bumps `gen_` and does its own share as thread 0. Workers
// spin on `gen_` for a short while after each task (so the ~100 back-to-back runs of a
// token cost a cache-line round trip, not a syscall) and then sleep on a futex, so an
// idle pool costs no CPU. The caller spins until `pending_` reaches zero.
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

struct ThreadPool::Impl {
  int n_threads = 1;
  std::vector<std::thread> workers;

  // Each hot field on its own cache line: the caller writes gen_/task, workers write pending_.
  alignas(64) std::atomic<uint32_t> gen{0};
  alignas(64) std::atomic<int> sleepers{0};
  alignas(64) std::atomic<int> pending{0};
  alignas(64) TaskFn fn = nullptr;
  void* ctx = nullptr;
  bool stop = false;  // written before the last generation bump, read after it

  void worker(int tid) {
    uint32_t seen = 0;
    for (;;) {
      uint32_t g = gen.load(std::memory_order_acquire);
      if (g == seen) {
        const auto t0 = std::chrono::steady_clock::now();
        int spins = 0;
        // Pause-spin first (the next task usually comes within microseconds), then keep
        // polling with yields so that on an oversubscribed machine the threads still
        // working get the core.
        while ((g = gen.load(std::memory_order_acquire)) == seen) {
          if (++spins < kPauseSpins) {
            cpu_relax();
          } else {
            std::this_thread::yield();
            if (std::chrono::steady_clock::now() - t0 > kSpinFor) break;
          }
        }
        while (g == seen) {
          // Announce the sleep before re-checking, so a caller that bumps gen after our
          // check sees sleepers > 0 and wakes us (both sides use seq_cst).
          sleepers.fetch_add(1, std::memory_order_seq_cst);
          if (gen.load(std::memory_order_seq_cst) == seen) wait_while_equal(gen, seen);
          sleepers.fetch_sub(1, std::memory_order_seq_cst);
          g = gen.load(std::memory_order_acquire);
        }
      }
      seen = g;
      if (stop) return;
      fn(ctx, tid, n_threads);
      pending.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  void publish() {
    gen.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) wake_all(gen);
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
  impl_->publish();
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
  p.fn = fn;
  p.ctx = ctx;
  p.pending.store(p.n_threads - 1, std::memory_order_relaxed);
  p.publish();
  fn(ctx, 0, p.n_threads);
  // Workers normally finish within microseconds of us; on an oversubscribed machine one
  // may have been descheduled, so after a while give the core away instead of burning it.
  for (int spins = 0; p.pending.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kPauseSpins) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace cln::kernels
