#include "clone/device/corunner.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"
#include "clone/core/rng.h"

namespace cln::device {

namespace {
constexpr double kHorizon = 3 * 3600.0;  // generated patterns repeat after three hours
}

CorunnerTrace CorunnerTrace::constant(double s) {
  if (!(s >= 0 && s <= 1)) fail("co-runner intensity ", s, " is outside [0, 1]");
  CorunnerTrace c;
  c.name_ = s == 0 ? "idle" : "const:" + std::to_string(s);
  c.seg_ = {{0.0, s}};
  c.period_ = kHorizon;
  return c;
}

CorunnerTrace CorunnerTrace::make(const std::string& spec, uint64_t seed) {
  if (spec == "idle") return constant(0);
  if (spec.rfind("const:", 0) == 0) {
    double s = 0;
    try {
      s = std::stod(spec.substr(6));
    } catch (...) {
      fail("co-runner \"", spec, "\": expected const:<intensity in [0,1]>");
    }
    return constant(s);
  }
  CorunnerTrace c;
  c.name_ = spec;
  c.period_ = kHorizon;
  Rng rng(seed ^ 0x9e3779b97f4a7c15ull);
  auto uni = [&](double a, double b) { return rng.uniform(a, b); };
  auto expo = [&](double mean) { return rng.exponential(mean); };
  double t = 0;
  if (spec == "web-search") {
    // Page loads (parse, layout, scripts, images) between reading pauses.
    while (t < kHorizon) {
      c.seg_.push_back({t, uni(0.6, 0.95)});
      t += uni(0.5, 2.5);
      c.seg_.push_back({t, uni(0.05, 0.2)});
      t += uni(1.0, 4.0);
    }
  } else if (spec == "video") {
    // Steady decode and composition at 30 fps, averaged over half-second windows.
    while (t < kHorizon) {
      c.seg_.push_back({t, uni(0.25, 0.4)});
      t += 0.5;
    }
  } else if (spec == "bursty") {
    // Long quiet stretches broken by heavy bursts (a game level load, a photo filter).
    while (t < kHorizon) {
      c.seg_.push_back({t, 0.0});
      t += expo(4.0);
      c.seg_.push_back({t, uni(0.7, 1.0)});
      t += expo(1.5);
    }
  } else {
    std::ifstream in(spec);
    if (!in)
      fail("co-runner \"", spec, "\": not a pattern (idle, web-search, video, bursty, const:<s>) ",
           "nor a readable CSV file");
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.empty() || line[0] == '#') continue;
      if (lineno == 1 && !std::isdigit(static_cast<unsigned char>(line[0]))) continue;  // header
      std::istringstream ls(line);
      std::string a, b;
      double ts = 0, s = 0;
      try {
        if (!std::getline(ls, a, ',') || !std::getline(ls, b)) throw std::invalid_argument("");
        ts = std::stod(a);
        s = std::stod(b);
      } catch (...) {
        fail(spec, ":", lineno, ": expected \"t_s,intensity\", got \"", line, "\"");
      }
      if (!(s >= 0 && s <= 1)) fail(spec, ":", lineno, ": intensity ", s, " is outside [0, 1]");
      if (!c.seg_.empty() && ts <= c.seg_.back().first)
        fail(spec, ":", lineno, ": times must ascend (", ts, " after ", c.seg_.back().first, ")");
      if (c.seg_.empty() && ts != 0) c.seg_.push_back({0.0, 0.0});
      c.seg_.push_back({ts, s});
    }
    if (c.seg_.empty()) fail(spec, ": no co-runner samples");
    // The last sample holds for as long as the one before it did, then the trace repeats.
    double last_len = c.seg_.size() > 1 ? c.seg_.back().first - c.seg_[c.seg_.size() - 2].first : 1;
    c.period_ = c.seg_.back().first + last_len;
    return c;
  }
  c.period_ = t;
  return c;
}

// Time in the pattern's period. The pattern repeats both ways, so before device time 0 is
// the end of the period before: a load monitor asked for the past at the start of a run
// sees a past like any other, not the first segment held forever.
double CorunnerTrace::phase(double t_s) const {
  const double t = std::fmod(t_s, period_);
  return t < 0 ? t + period_ : t;
}

double CorunnerTrace::at(double t_s) const {
  double t = phase(t_s);
  auto it =
      std::upper_bound(seg_.begin(), seg_.end(), t,
                       [](double v, const std::pair<double, double>& s) { return v < s.first; });
  return it == seg_.begin() ? seg_.front().second : std::prev(it)->second;
}

double CorunnerTrace::mean(double t0_s, double t1_s) const {
  if (t1_s <= t0_s) return at(t0_s);
  // Integrate piecewise; long spans are sampled finely enough for the patterns here.
  double sum = 0, t = t0_s;
  while (t < t1_s) {
    double tp = phase(t);
    auto it =
        std::upper_bound(seg_.begin(), seg_.end(), tp,
                         [](double v, const std::pair<double, double>& s) { return v < s.first; });
    double s = it == seg_.begin() ? seg_.front().second : std::prev(it)->second;
    double next = it == seg_.end() ? period_ : it->first;
    double step = std::min(next - tp, t1_s - t);
    if (step <= 0) step = 1e-9;
    sum += s * step;
    t += step;
  }
  return sum / (t1_s - t0_s);
}

}  // namespace cln::device
