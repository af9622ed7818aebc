#include "clone/dvfs/settings.h"

#include <limits>

#include "clone/core/error.h"

namespace cln::dvfs {

Settings make_settings(const device::CostModel& base, const std::vector<std::string>& modes) {
  const device::DeviceProfile& p = base.profile();
  if (p.modes.empty())
    fail("profile ", p.name, " has no power modes to choose between (modes[] in its JSON)");
  std::vector<std::string> names = modes;
  if (names.size() == 1 && names[0] == "all") {
    names.clear();
    for (const auto& m : p.modes) names.push_back(m.name);
  }
  if (names.empty()) fail("settings: no power modes given");
  Settings st;
  for (const auto& n : names) {
    device::CostOptions co = base.options();
    co.mode = n;  // p.mode(n) names the profile's modes when n is not one of them
    st.names.push_back(n);
    st.models.push_back(std::make_shared<const device::CostModel>(p, base.model(), co));
  }
  return st;
}

int fastest_setting(const Settings& st, const RequestInfo& r, int64_t n_batch) {
  int best = 0;
  double best_t = std::numeric_limits<double>::infinity();
  const double n_out = static_cast<double>(std::max<int64_t>(r.predicted_output, 1));
  for (size_t i = 0; i < st.models.size(); ++i) {
    const device::CostModel& m = *st.models[i];
    const SingleClock p = predict_single_clock(m, m.max_level(), r, 0, n_batch);
    const double t = p.ttft_s + (n_out - 1) * p.tpot_s;
    if (t < best_t) best_t = t, best = static_cast<int>(i);
  }
  return best;
}

int cheapest_setting(const Settings& st, const RequestInfo& r, double corunner, int64_t n_batch,
                     const LoadForecast* forecast) {
  const int64_t n_out = std::max<int64_t>(r.predicted_output, 1);
  const double prefill_h = std::max(0.0, r.ttft_target_s - (r.start_s - r.arrival_s));
  const double decode_h = r.tpot_target_s * static_cast<double>(n_out - 1);
  const double load =
      forecast ? std::max(corunner, forecast->mean_load(prefill_h + decode_h)) : corunner;
  int best = -1;
  double best_e = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < st.models.size(); ++i) {
    const device::CostModel& m = *st.models[i];
    double ttft_reserve = 0, tpot_reserve = 0;
    if (forecast) {
      const double c = m.profile().fit.contention;
      ttft_reserve = forecast->burst_reserve_s(prefill_h, c);
      if (n_out > 1)
        tpot_reserve = forecast->burst_reserve_s(decode_h, c) / static_cast<double>(n_out - 1);
    }
    for (int k = 0; k <= m.max_level(); ++k) {
      SingleClock p = predict_single_clock(m, k, r, load, n_batch);
      p.ttft_s += ttft_reserve, p.tpot_s += tpot_reserve;
      if (p.meets(r) && p.energy_j < best_e) best_e = p.energy_j, best = static_cast<int>(i);
    }
  }
  return best >= 0 ? best : fastest_setting(st, r, n_batch);
}

}  // namespace cln::dvfs
