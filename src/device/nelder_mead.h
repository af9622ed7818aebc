// Nelder-Mead simplex minimisation over N unbounded variables (the calibrations map bounded
// factors through log / logit first). Deterministic: same start, same result.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

namespace cln::device {

template <size_t N, typename F>
std::array<double, N> nelder_mead(std::array<double, N> x0, F f, int iters, int& evals) {
  using V = std::array<double, N>;
  std::array<V, N + 1> s;
  std::array<double, N + 1> fv;
  s[0] = x0;
  for (size_t i = 0; i < N; ++i) {
    s[i + 1] = x0;
    s[i + 1][i] += 0.2;
  }
  for (size_t i = 0; i <= N; ++i) fv[i] = f(s[i]), ++evals;
  for (int it = 0; it < iters; ++it) {
    std::array<size_t, N + 1> idx;
    for (size_t i = 0; i <= N; ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return fv[a] < fv[b]; });
    auto s2 = s;
    auto f2 = fv;
    for (size_t i = 0; i <= N; ++i) s[i] = s2[idx[i]], fv[i] = f2[idx[i]];
    if (fv[N] - fv[0] < 1e-12) break;
    V c{};
    for (size_t i = 0; i < N; ++i)
      for (size_t k = 0; k < N; ++k) c[k] += s[i][k] / N;
    auto lerp = [&](double a) {
      V r;
      for (size_t k = 0; k < N; ++k) r[k] = c[k] + a * (s[N][k] - c[k]);
      return r;
    };
    V xr = lerp(-1);
    double fr = f(xr);
    ++evals;
    if (fr < fv[0]) {
      V xe = lerp(-2);
      double fe = f(xe);
      ++evals;
      if (fe < fr)
        s[N] = xe, fv[N] = fe;
      else
        s[N] = xr, fv[N] = fr;
    } else if (fr < fv[N - 1]) {
      s[N] = xr, fv[N] = fr;
    } else {
      V xc = lerp(fr < fv[N] ? -0.5 : 0.5);
      double fc = f(xc);
      ++evals;
      if (fc < std::min(fr, fv[N])) {
        s[N] = xc, fv[N] = fc;
      } else {
        for (size_t i = 1; i <= N; ++i) {
          for (size_t k = 0; k < N; ++k) s[i][k] = s[0][k] + 0.5 * (s[i][k] - s[0][k]);
          fv[i] = f(s[i]);
          ++evals;
        }
      }
    }
  }
  size_t best = 0;
  for (size_t i = 1; i <= N; ++i)
    if (fv[i] < fv[best]) best = i;
  return s[best];
}

}  // namespace cln::device
