// Forward (through cln::kernels) and backward of every op in autograd.h.
// Matmul gradients go through kernels::gemm_f32; the rest are plain loops split
// across the pool by rows. Every reduction runs in a fixed order for a given thread
// count, so a run repeats bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "clone/core/error.h"
#include "clone/kernels/thread_pool.h"
#include "clone/train/autograd.h"

namespace cln::train::op {
namespace k = cln::kernels;

namespace {

template <typename F>
void parallel_rows(k::ThreadPool* pool, int64_t n, F&& f) {
  if (!pool || pool->size() <= 1 || n < 2) {
    f(int64_t{0}, n);
    return;
  }
  pool->run([&](int tid, int nth) {
    long b, e;
    k::split_range(static_cast<long>(n), tid, nth, 1, &b, &e);
    if (b < e) f(static_cast<int64_t>(b), static_cast<int64_t>(e));
  });
}

// Like parallel_rows, and tells f which thread it runs on (for per-thread scratch).
template <typename F>
void parallel_rows_tid(k::ThreadPool* pool, int64_t n, F&& f) {
  if (!pool || pool->size() <= 1 || n < 2) {
    f(int64_t{0}, n, 0);
    return;
  }
  pool->run([&](int tid, int nth) {
    long b, e;
    k::split_range(static_cast<long>(n), tid, nth, 1, &b, &e);
    if (b < e) f(static_cast<int64_t>(b), static_cast<int64_t>(e), tid);
  });
}

bool needs_grad(const Graph& g, const TensorP& a) {
  return g.grad_enabled && a->requires_grad;
}
bool needs_grad(const Graph& g, const TensorP& a, const TensorP& b) {
  return g.grad_enabled && (a->requires_grad || b->requires_grad);
}

void check_same(const char* what, const TensorP& a, const TensorP& b) {
  if (a->numel() != b->numel())
    fail(what, ": sizes differ (", a->numel(), " and ", b->numel(), ")");
}

void add_into(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace

TensorP embedding(Graph& g, const TensorP& table, const std::vector<int32_t>& ids) {
  const int64_t V = table->rows(), d = table->cols(), n = static_cast<int64_t>(ids.size());
  for (int32_t id : ids)
    if (id < 0 || id >= V) fail("embedding: token id ", id, " is outside the vocabulary of ", V);
  TensorP y = make_tensor({n, d}, needs_grad(g, table));
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(y->data() + i * d, table->data() + int64_t{ids[i]} * d, sizeof(float) * d);
  if (y->requires_grad)
    g.record([table, y, ids, d, n] {
      float* gt = table->grad();
      const float* gy = y->grad();
      for (int64_t i = 0; i < n; ++i) add_into(gt + int64_t{ids[i]} * d, gy + i * d, d);
    });
  return y;
}

TensorP linear(Graph& g, const TensorP& x, const TensorP& w) {
  const int64_t n = x->rows(), in = x->cols(), out = w->rows();
  if (w->cols() != in) fail("linear: input width ", in, " does not match weight width ", w->cols());
  TensorP y = make_tensor({n, out}, needs_grad(g, x, w));
  const k::Matrix m{DType::F32, w->data(), out, in};
  k::matmul(m, x->data(), n, y->data(), g.pool());
  if (y->requires_grad) {
    k::ThreadPool* pool = g.pool();
    g.record([x, w, y, n, in, out, pool] {
      const float* gy = y->grad();
      if (x->requires_grad)  // dx [n, in] += dy [n, out] W [out, in]
        k::gemm_f32(false, false, n, in, out, 1.0f, gy, out, w->data(), in, 1.0f, x->grad(), in,
                    pool);
      if (w->requires_grad)  // dW [out, in] += dy^T [out, n] x [n, in]
        k::gemm_f32(true, false, out, in, n, 1.0f, gy, out, x->data(), in, 1.0f, w->grad(), in,
                    pool);
    });
  }
  return y;
}

TensorP rmsnorm(Graph& g, const TensorP& x, const TensorP& w, float eps) {
  const int64_t n = x->rows(), d = x->cols();
  if (w->numel() != d) fail("rmsnorm: weight has ", w->numel(), " values for rows of ", d);
  TensorP y = make_tensor(x->shape, needs_grad(g, x, w));
  k::rmsnorm(x->data(), w->data(), y->data(), n, d, eps);
  if (y->requires_grad) {
    k::ThreadPool* pool = g.pool();
    g.record([x, w, y, n, d, eps, pool] {
      const float* gy = y->grad();
      const float* xd = x->data();
      const float* wd = w->data();
      std::vector<float> r(static_cast<size_t>(n));
      parallel_rows(pool, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const float* xr = xd + i * d;
          double ss = 0;
          for (int64_t j = 0; j < d; ++j) ss += double{xr[j]} * xr[j];
          r[i] = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
        }
      });
      if (x->requires_grad) {
        float* gx = x->grad();
        parallel_rows(pool, n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const float* xr = xd + i * d;
            const float* gr = gy + i * d;
            float dot = 0;  // sum_j dy_j w_j x_j
            for (int64_t j = 0; j < d; ++j) dot += gr[j] * wd[j] * xr[j];
            const float ri = r[i];
            const float c = ri * ri * ri * dot / static_cast<float>(d);
            float* gxr = gx + i * d;
            for (int64_t j = 0; j < d; ++j) gxr[j] += ri * gr[j] * wd[j] - c * xr[j];
          }
        });
      }
      if (w->requires_grad) {
        float* gw = w->grad();
        for (int64_t i = 0; i < n; ++i) {
          const float* xr = xd + i * d;
          const float* gr = gy + i * d;
          const float ri = r[i];
          for (int64_t j = 0; j < d; ++j) gw[j] += gr[j] * xr[j] * ri;
        }
      }
    });
  }
  return y;
}

TensorP rope(Graph& g, const TensorP& x, int64_t n_heads, int64_t head_dim,
             const std::vector<int32_t>& pos, float base) {
  const int64_t n = x->rows();
  if (x->cols() != n_heads * head_dim)
    fail("rope: rows of ", x->cols(), " are not ", n_heads, " heads of ", head_dim);
  if (static_cast<int64_t>(pos.size()) != n)
    fail("rope: ", pos.size(), " positions for ", n, " rows");
  TensorP y = make_tensor(x->shape, needs_grad(g, x));
  std::memcpy(y->data(), x->data(), sizeof(float) * static_cast<size_t>(x->numel()));
  k::rope(y->data(), n, n_heads, head_dim, pos.data(), base);
  if (y->requires_grad)
    g.record([x, y, n, n_heads, head_dim, pos, base] {
      // The rotation is orthogonal: its transpose rotates by the negated angle.
      std::vector<int32_t> neg(pos.size());
      for (size_t i = 0; i < pos.size(); ++i) neg[i] = -pos[i];
      Buffer t(static_cast<size_t>(y->numel()));  // pooled: no page faults per step
      std::memcpy(t.data(), y->grad(), sizeof(float) * t.size());
      k::rope(t.data(), n, n_heads, head_dim, neg.data(), base);
      add_into(x->grad(), t.data(), x->numel());
    });
  return y;
}

TensorP attention(Graph& g, const TensorP& q, const TensorP& kk, const TensorP& v, int64_t n_seq,
                  int64_t T, const k::AttentionShape& s) {
  const int64_t n = n_seq * T, H = s.n_head, Hkv = s.n_head_kv, dk = s.dk, dv = s.dv;
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0) fail("attention: ", H, " heads and ", Hkv, " KV heads");
  if (q->rows() != n || kk->rows() != n || v->rows() != n)
    fail("attention: ", n_seq, " sequences of ", T, " need ", n, " rows of q, k and v");
  if (q->cols() != H * dk || kk->cols() != Hkv * dk || v->cols() != Hkv * dv)
    fail("attention: q, k, v widths do not match the head shape");
  TensorP y = make_tensor(
      {n, H * dv}, g.grad_enabled && (q->requires_grad || kk->requires_grad || v->requires_grad));
  for (int64_t b = 0; b < n_seq; ++b)
    k::attention(q->data() + b * T * H * dk, kk->data() + b * T * Hkv * dk,
                 v->data() + b * T * Hkv * dv, y->data() + b * T * H * dv, T, 0, s, g.pool());
  if (!y->requires_grad) return y;
  k::ThreadPool* pool = g.pool();
  g.record([q, kk, v, y, n_seq, T, H, Hkv, dk, dv, pool] {
    const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
    const int64_t group = H / Hkv;
    constexpr int64_t kRows = 48;  // rows per GEMM block: whole tiles (4 or 6 rows high)
    float* gq = q->requires_grad ? q->grad() : nullptr;
    float* gk = kk->requires_grad ? kk->grad() : nullptr;
    float* gv = v->requires_grad ? v->grad() : nullptr;
    const float* gy = y->grad();
    // One task per (sequence, KV head): the query heads of a group add into the same
    // dK and dV rows, so they run in order inside the task and no two tasks collide.
    const int64_t tasks = n_seq * Hkv;
    const int n_threads = pool ? pool->size() : 1;
    Buffer scratch(static_cast<size_t>(2 * n_threads * T * T));  // P and dP per thread, pooled
    parallel_rows_tid(pool, tasks, [&](int64_t tb, int64_t te, int tid) {
      float* Pm = scratch.data() + static_cast<size_t>(2 * tid) * static_cast<size_t>(T * T);
      float* dPm = Pm + T * T;
      for (int64_t task = tb; task < te; ++task) {
        const int64_t b = task / Hkv, kvh = task % Hkv;
        const float* K = kk->data() + b * T * Hkv * dk + kvh * dk;
        const float* V = v->data() + b * T * Hkv * dv + kvh * dv;
        float* dK = gk ? gk + b * T * Hkv * dk + kvh * dk : nullptr;
        float* dV = gv ? gv + b * T * Hkv * dv + kvh * dv : nullptr;
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
          const float* Q = q->data() + b * T * H * dk + h * dk;
          const float* dO = gy + b * T * H * dv + h * dv;
          float* dQ = gq ? gq + b * T * H * dk + h * dk : nullptr;
          // S = scale Q K^T, then the causal softmax row by row. Each GEMM here is cut into
          // blocks of kRows rows that skip what the causal mask zeroes: the rows of queries
          // [i0, i1) read keys [0, i1) only, and dK, dV rows of keys [j0, j1) sum over
          // queries [j0, T) only (about 0.6 of the square's work; the same sums in the same
          // order, less the zero terms, while T fits one K block of the GEMM).
          for (int64_t i0 = 0; i0 < T; i0 += kRows) {
            const int64_t i1 = std::min(T, i0 + kRows);
            k::gemm_f32(false, true, i1 - i0, i1, dk, scale, Q + i0 * H * dk, H * dk, K, Hkv * dk,
                        0.0f, Pm + i0 * T, T, nullptr);
          }
          for (int64_t i = 0; i < T; ++i) {
            float* p = Pm + i * T;
            float m = p[0];
            for (int64_t j = 1; j <= i; ++j) m = std::max(m, p[j]);
            float sum = 0;
            for (int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - m));
            const float inv = 1.0f / sum;
            for (int64_t j = 0; j <= i; ++j) p[j] *= inv;
            for (int64_t j = i + 1; j < T; ++j) p[j] = 0.0f;
          }
          // dP = dO V^T;  dS = P * (dP - rowsum(P * dP))  (written over dP)
          for (int64_t i0 = 0; i0 < T; i0 += kRows) {
            const int64_t i1 = std::min(T, i0 + kRows);
            k::gemm_f32(false, true, i1 - i0, i1, dv, 1.0f, dO + i0 * H * dv, H * dv, V, Hkv * dv,
                        0.0f, dPm + i0 * T, T, nullptr);
          }
          for (int64_t i = 0; i < T; ++i) {
            const float* p = Pm + i * T;
            float* dp = dPm + i * T;
            float dot = 0;
            for (int64_t j = 0; j <= i; ++j) dot += p[j] * dp[j];
            for (int64_t j = 0; j <= i; ++j) dp[j] = p[j] * (dp[j] - dot);
            for (int64_t j = i + 1; j < T; ++j) dp[j] = 0.0f;
          }
          for (int64_t r0 = 0; r0 < T; r0 += kRows) {
            const int64_t r1 = std::min(T, r0 + kRows), m = r1 - r0;
            if (q->requires_grad)  // dQ += scale dS K, queries [r0, r1) over keys [0, r1)
              k::gemm_f32(false, false, m, dk, r1, scale, dPm + r0 * T, T, K, Hkv * dk, 1.0f,
                          dQ + r0 * H * dk, H * dk, nullptr);
            // Keys [r0, r1) over queries [r0, T): dS^T and P^T from row r0, column r0 on.
            if (kk->requires_grad)  // dK += scale dS^T Q
              k::gemm_f32(true, false, m, dk, T - r0, scale, dPm + r0 * T + r0, T, Q + r0 * H * dk,
                          H * dk, 1.0f, dK + r0 * Hkv * dk, Hkv * dk, nullptr);
            if (v->requires_grad)  // dV += P^T dO
              k::gemm_f32(true, false, m, dv, T - r0, 1.0f, Pm + r0 * T + r0, T, dO + r0 * H * dv,
                          H * dv, 1.0f, dV + r0 * Hkv * dv, Hkv * dv, nullptr);
          }
        }
      }
    });
  });
  return y;
}

TensorP silu_mul(Graph& g, const TensorP& gate, const TensorP& up) {
  check_same("silu_mul", gate, up);
  TensorP y = make_tensor(gate->shape, needs_grad(g, gate, up));
  k::silu_mul(gate->data(), up->data(), y->data(), gate->numel());
  if (y->requires_grad) {
    k::ThreadPool* pool = g.pool();
    g.record([gate, up, y, pool] {
      const float* gy = y->grad();
      const float* a = gate->data();
      const float* u = up->data();
      float* ga = gate->requires_grad ? gate->grad() : nullptr;
      float* gu = up->requires_grad ? up->grad() : nullptr;
      parallel_rows(pool, gate->numel(), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const float s = 1.0f / (1.0f + std::exp(-a[i]));
          const float silu = a[i] * s;
          if (gu) gu[i] += gy[i] * silu;
          if (ga) ga[i] += gy[i] * u[i] * s * (1.0f + a[i] * (1.0f - s));
        }
      });
    });
  }
  return y;
}

TensorP add(Graph& g, const TensorP& a, const TensorP& b) {
  check_same("add", a, b);
  TensorP y = make_tensor(a->shape, needs_grad(g, a, b));
  std::memcpy(y->data(), a->data(), sizeof(float) * static_cast<size_t>(a->numel()));
  k::add(y->data(), b->data(), a->numel());
  if (y->requires_grad)
    g.record([a, b, y] {
      if (a->requires_grad) k::add(a->grad(), y->grad(), y->numel());
      if (b->requires_grad) k::add(b->grad(), y->grad(), y->numel());
    });
  return y;
}

TensorP scale(Graph& g, const TensorP& x, float s) {
  TensorP y = make_tensor(x->shape, needs_grad(g, x));
  for (int64_t i = 0; i < x->numel(); ++i) y->data()[i] = s * x->data()[i];
  if (y->requires_grad)
    g.record([x, y, s] {
      float* gx = x->grad();
      const float* gy = y->grad();
      for (int64_t i = 0; i < x->numel(); ++i) gx[i] += s * gy[i];
    });
  return y;
}

namespace {

// The rows of a per-token loss that count (target >= 0); fails on a target outside [-1, V)
// or when none counts.
int64_t counted_rows(const char* op, const std::vector<int32_t>& targets, int64_t n, int64_t V) {
  if (static_cast<int64_t>(targets.size()) != n)
    fail(op, ": ", targets.size(), " targets for ", n, " rows");
  int64_t count = 0;
  for (int32_t t : targets) {
    if (t >= V) fail(op, ": target ", t, " is outside the vocabulary of ", V);
    count += t >= 0;
  }
  if (count == 0) fail(op, ": no row has a target");
  return count;
}

// The mean of row_loss over the `count` rows with a target as [1]. Its backward adds, to each
// such row of d logits, the incoming gradient / count times (d_row - target_share *
// onehot(target)): d_row is the row of `soft` (the rest of d row_loss / d logits).
TensorP mean_of_rows(Graph& g, const TensorP& logits, const std::vector<int32_t>& targets,
                     const std::vector<double>& row_loss, int64_t count,
                     std::shared_ptr<Buffer> soft, float target_share) {
  double total = 0;
  for (double l : row_loss) total += l;
  TensorP y = make_tensor({1}, needs_grad(g, logits));
  y->data()[0] = static_cast<float>(total / static_cast<double>(count));
  if (y->requires_grad) {
    k::ThreadPool* pool = g.pool();
    const int64_t n = logits->rows(), V = logits->cols();
    g.record([logits, y, soft = std::move(soft), targets, target_share, n, V, count, pool] {
      const float gl = y->grad()[0] / static_cast<float>(count);
      float* gx = logits->grad();
      parallel_rows(pool, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const int32_t t = targets[i];
          if (t < 0) continue;
          const float* d = soft->data() + i * V;
          float* gr = gx + i * V;
          for (int64_t j = 0; j < V; ++j) gr[j] += gl * d[j];
          gr[t] -= gl * target_share;
        }
      });
    });
  }
  return y;
}

}  // namespace

TensorP cross_entropy(Graph& g, const TensorP& logits, const std::vector<int32_t>& targets) {
  const int64_t n = logits->rows(), V = logits->cols();
  const int64_t count = counted_rows("cross_entropy", targets, n, V);
  // Softmax probabilities, kept for the backward pass (d row_loss / d logits = p - onehot).
  auto probs = std::make_shared<Buffer>(static_cast<size_t>(n * V));
  std::vector<double> row_loss(static_cast<size_t>(n), 0.0);
  const float* x = logits->data();
  parallel_rows(g.pool(), n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* xr = x + i * V;
      float* p = probs->data() + i * V;
      std::memcpy(p, xr, sizeof(float) * V);
      k::softmax(p, V);
      const int32_t t = targets[i];
      if (t < 0) continue;
      if (p[t] > 1e-30f) {
        row_loss[i] = -std::log(double{p[t]});
      } else {  // the probability underflowed: log-sum-exp directly
        float m = xr[0];
        for (int64_t j = 1; j < V; ++j) m = std::max(m, xr[j]);
        double s = 0;
        for (int64_t j = 0; j < V; ++j) s += std::exp(double{xr[j]} - m);
        row_loss[i] = std::log(s) + m - xr[t];
      }
    }
  });
  return mean_of_rows(g, logits, targets, row_loss, count, std::move(probs), 1.0f);
}

TensorP distill_cross_entropy(Graph& g, const TensorP& logits, const TensorP& teacher,
                              const std::vector<int32_t>& targets, float kd_weight) {
  const int64_t n = logits->rows(), V = logits->cols();
  if (teacher->rows() != n || teacher->cols() != V)
    fail("distill_cross_entropy: teacher logits [", teacher->rows(), ", ", teacher->cols(),
         "] for student logits [", n, ", ", V, "]");
  const int64_t count = counted_rows("distill_cross_entropy", targets, n, V);
  if (!(kd_weight >= 0.0f && kd_weight <= 1.0f))
    fail("distill_cross_entropy: the distillation weight ", kd_weight, " is outside [0, 1]");
  const double w = kd_weight;
  // q - w p, kept for the backward pass (d row_loss / d logits = q - w p - (1 - w) onehot).
  auto soft = std::make_shared<Buffer>(static_cast<size_t>(n * V));
  std::vector<double> row_loss(static_cast<size_t>(n), 0.0);
  const float* x = logits->data();
  const float* tx = teacher->data();
  parallel_rows(g.pool(), n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int32_t t = targets[i];
      if (t < 0) continue;
      float* d = soft->data() + i * V;
      const float* xr = x + i * V;
      const float* tr = tx + i * V;
      // log q = x - lse(x), log p = t - lse(t), in double: KL is a small difference of
      // large sums when the student is close to the teacher.
      float mx = xr[0], mt = tr[0];
      for (int64_t j = 1; j < V; ++j) {
        mx = std::max(mx, xr[j]);
        mt = std::max(mt, tr[j]);
      }
      double zx = 0, zt = 0;
      for (int64_t j = 0; j < V; ++j) {
        zx += std::exp(double{xr[j]} - mx);
        zt += std::exp(double{tr[j]} - mt);
      }
      const double lse_x = mx + std::log(zx), lse_t = mt + std::log(zt);
      double kl = 0;
      for (int64_t j = 0; j < V; ++j) {
        const double lp = tr[j] - lse_t, lq = xr[j] - lse_x;
        const double pj = std::exp(lp);
        if (pj > 0) kl += pj * (lp - lq);
        d[j] = static_cast<float>(std::exp(lq) - w * pj);
      }
      row_loss[static_cast<size_t>(i)] = (1 - w) * (lse_x - xr[t]) + w * kl;
    }
  });
  return mean_of_rows(g, logits, targets, row_loss, count, std::move(soft),
                      static_cast<float>(1 - w));
}

TensorP add_bias(Graph& g, const TensorP& x, const TensorP& b) {
  const int64_t n = x->rows(), d = x->cols();
  if (b->numel() != d) fail("add_bias: bias has ", b->numel(), " values for rows of ", d);
  TensorP y = make_tensor(x->shape, needs_grad(g, x, b));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) y->data()[i * d + j] = x->data()[i * d + j] + b->data()[j];
  if (y->requires_grad)
    g.record([x, b, y, n, d] {
      const float* gy = y->grad();
      if (x->requires_grad) add_into(x->grad(), gy, n * d);
      if (b->requires_grad)
        for (int64_t i = 0; i < n; ++i) add_into(b->grad(), gy + i * d, d);
    });
  return y;
}

TensorP mul(Graph& g, const TensorP& a, const TensorP& b) {
  check_same("mul", a, b);
  TensorP y = make_tensor(a->shape, needs_grad(g, a, b));
  for (int64_t i = 0; i < a->numel(); ++i) y->data()[i] = a->data()[i] * b->data()[i];
  if (y->requires_grad)
    g.record([a, b, y] {
      const float* gy = y->grad();
      // read both inputs before writing, in case a and b are the same tensor
      std::vector<float> ga(gy, gy + y->numel()), gb(gy, gy + y->numel());
      for (int64_t i = 0; i < y->numel(); ++i) {
        ga[i] *= b->data()[i];
        gb[i] *= a->data()[i];
      }
      if (a->requires_grad) add_into(a->grad(), ga.data(), y->numel());
      if (b->requires_grad) add_into(b->grad(), gb.data(), y->numel());
    });
  return y;
}

namespace {
// Elementwise op whose derivative is a function of its output y.
template <typename Fwd, typename DyDx>
TensorP unary(Graph& g, const TensorP& x, Fwd fwd, DyDx dydx) {
  TensorP y = make_tensor(x->shape, needs_grad(g, x));
  for (int64_t i = 0; i < x->numel(); ++i) y->data()[i] = fwd(x->data()[i]);
  if (y->requires_grad)
    g.record([x, y, dydx] {
      float* gx = x->grad();
      const float* gy = y->grad();
      for (int64_t i = 0; i < x->numel(); ++i) gx[i] += gy[i] * dydx(y->data()[i]);
    });
  return y;
}
}  // namespace

TensorP tanh(Graph& g, const TensorP& x) {
  return unary(
      g, x, [](float v) { return std::tanh(v); }, [](float y) { return 1.0f - y * y; });
}

TensorP sigmoid(Graph& g, const TensorP& x) {
  return unary(
      g, x, [](float v) { return 1.0f / (1.0f + std::exp(-v)); },
      [](float y) { return y * (1.0f - y); });
}

TensorP relu(Graph& g, const TensorP& x) {
  return unary(
      g, x, [](float v) { return v > 0.0f ? v : 0.0f; },
      [](float y) { return y > 0.0f ? 1.0f : 0.0f; });
}

TensorP slice_cols(Graph& g, const TensorP& x, int64_t begin, int64_t end) {
  const int64_t n = x->rows(), d = x->cols(), w = end - begin;
  if (begin < 0 || end > d || w <= 0)
    fail("slice_cols: [", begin, ", ", end, ") of ", d, " columns");
  TensorP y = make_tensor({n, w}, needs_grad(g, x));
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(y->data() + i * w, x->data() + i * d + begin, sizeof(float) * w);
  if (y->requires_grad)
    g.record([x, y, n, d, w, begin] {
      for (int64_t i = 0; i < n; ++i) add_into(x->grad() + i * d + begin, y->grad() + i * w, w);
    });
  return y;
}

TensorP concat_cols(Graph& g, const TensorP& a, const TensorP& b) {
  const int64_t n = a->rows(), da = a->cols(), db = b->cols();
  if (b->rows() != n) fail("concat_cols: ", n, " rows and ", b->rows(), " rows");
  TensorP y = make_tensor({n, da + db}, needs_grad(g, a, b));
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(y->data() + i * (da + db), a->data() + i * da, sizeof(float) * da);
    std::memcpy(y->data() + i * (da + db) + da, b->data() + i * db, sizeof(float) * db);
  }
  if (y->requires_grad)
    g.record([a, b, y, n, da, db] {
      for (int64_t i = 0; i < n; ++i) {
        if (a->requires_grad) add_into(a->grad() + i * da, y->grad() + i * (da + db), da);
        if (b->requires_grad) add_into(b->grad() + i * db, y->grad() + i * (da + db) + da, db);
      }
    });
  return y;
}

TensorP sum(Graph& g, const TensorP& x) {
  double s = 0;
  for (int64_t i = 0; i < x->numel(); ++i) s += x->data()[i];
  TensorP y = make_tensor({1}, needs_grad(g, x));
  y->data()[0] = static_cast<float>(s);
  if (y->requires_grad)
    g.record([x, y] {
      float* gx = x->grad();
      const float gy = y->grad()[0];
      for (int64_t i = 0; i < x->numel(); ++i) gx[i] += gy;
    });
  return y;
}

TensorP mse(Graph& g, const TensorP& x, const std::vector<float>& target) {
  if (static_cast<int64_t>(target.size()) != x->numel())
    fail("mse: ", target.size(), " targets for ", x->numel(), " values");
  double s = 0;
  for (int64_t i = 0; i < x->numel(); ++i) {
    const double e = double{x->data()[i]} - target[static_cast<size_t>(i)];
    s += e * e;
  }
  TensorP y = make_tensor({1}, needs_grad(g, x));
  y->data()[0] = static_cast<float>(s / static_cast<double>(x->numel()));
  if (y->requires_grad)
    g.record([x, y, target] {
      const float c = 2.0f * y->grad()[0] / static_cast<float>(x->numel());
      float* gx = x->grad();
      for (int64_t i = 0; i < x->numel(); ++i)
        gx[i] += c * (x->data()[i] - target[static_cast<size_t>(i)]);
    });
  return y;
}

}  // namespace cln::train::op
