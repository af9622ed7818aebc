#include "clone/dvfs/load_forecast.h"

#include <algorithm>
#include <cmath>

#include "clone/core/error.h"

namespace cln::dvfs {

LoadForecast::LoadForecast(const std::function<double(double)>& load_at, double now_s,
                           const Options& opt)
    : made_at_s_(now_s), min_h_(opt.min_horizon_s) {
  if (!(opt.quantile >= 0 && opt.quantile <= 1))
    fail("load forecast: quantile ", opt.quantile, " is outside [0, 1]");
  if (!(opt.step_s > 0 && opt.history_s >= opt.step_s && opt.min_horizon_s > 0 &&
        opt.horizons >= 1))
    fail("load forecast: history ", opt.history_s, " s, step ", opt.step_s, " s, horizon ",
         opt.min_horizon_s, " s x ", opt.horizons, " do not make a grid");
  // Samples at the middle of each step of the history, oldest first; prefix sums.
  const auto n = static_cast<size_t>(std::llround(opt.history_s / opt.step_s));
  std::vector<double> sum(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i)
    sum[i + 1] =
        sum[i] + load_at(now_s - opt.history_s + (static_cast<double>(i) + 0.5) * opt.step_s);
  std::vector<double> means;
  for (int h = 0; h < opt.horizons; ++h) {
    const double horizon = opt.min_horizon_s * std::ldexp(1.0, h);
    const auto w = std::max<size_t>(1, static_cast<size_t>(std::llround(horizon / opt.step_s)));
    if (w >= n) {
      load_.push_back(sum[n] / static_cast<double>(n));
      continue;
    }
    means.clear();
    for (size_t i = 0; i + w <= n; ++i)
      means.push_back((sum[i + w] - sum[i]) / static_cast<double>(w));
    const auto k =
        static_cast<size_t>(std::llround(opt.quantile * static_cast<double>(means.size() - 1)));
    std::nth_element(means.begin(), means.begin() + static_cast<std::ptrdiff_t>(k), means.end());
    load_.push_back(means[k]);
  }
}

double LoadForecast::mean_load(double horizon_s) const {
  if (load_.empty()) return 0;
  const double x = std::log2(std::max(horizon_s, 1e-9) / min_h_);
  if (x <= 0) return load_.front();
  const auto last = static_cast<double>(load_.size() - 1);
  if (x >= last) return load_.back();
  const auto i = static_cast<size_t>(x);
  const double f = x - static_cast<double>(i);
  return load_[i] + f * (load_[i + 1] - load_[i]);
}

double LoadForecast::burst_reserve_s(double horizon_s, double contention) const {
  const double planned = mean_load(horizon_s);
  double reserve = 0;
  for (size_t i = 0; i < load_.size(); ++i) {
    const double tail = min_h_ * std::ldexp(1.0, static_cast<int>(i));
    if (tail > horizon_s) break;
    const double worse = load_[i] - planned;
    if (worse > 0)
      reserve =
          std::max(reserve, tail * contention * worse / std::max(1e-3, 1 - contention * load_[i]));
  }
  return reserve;
}

}  // namespace cln::dvfs
