#include "clone/device/perturb.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "clone/core/error.h"

namespace cln::device {

namespace {
// The factor's storage in a profile (the run_on unit's power coefficients for the power ones).
double* factor(DeviceProfile& p, const std::string& name) {
  Fit& f = p.fit;
  UnitPower& pw = p.compute().power;
  if (name == "compute_efficiency") return &f.compute_efficiency;
  if (name == "dram_efficiency") return &f.dram_efficiency;
  if (name == "core_bytes_per_cycle") return &f.core_bytes_per_cycle;
  if (name == "layer_overhead_us") return &f.layer_overhead_us;
  if (name == "overhead_kcycles") return &f.overhead_kcycles;
  if (name == "host_overhead_kcycles") return &f.host_overhead_kcycles;
  if (name == "contention") return &f.contention;
  if (name == "board_idle_w") return &p.board_idle_w;
  if (name == "static_w_per_v") return &pw.static_w_per_v;
  if (name == "dynamic_w_per_ghz_v2") return &pw.dynamic_w_per_ghz_v2;
  if (name == "memory_static_w") return &p.memory.static_w;
  if (name == "memory_pj_per_byte") return &p.memory.pj_per_byte;
  return nullptr;
}
}  // namespace

const std::vector<std::string>& perturbable_factors() {
  static const std::vector<std::string> n = {
      "compute_efficiency", "dram_efficiency",       "core_bytes_per_cycle", "layer_overhead_us",
      "overhead_kcycles",   "host_overhead_kcycles", "contention",           "board_idle_w",
      "static_w_per_v",     "dynamic_w_per_ghz_v2",  "memory_static_w",      "memory_pj_per_byte"};
  return n;
}

DeviceProfile perturbed(const DeviceProfile& p, const std::string& spec) {
  DeviceProfile q = p;
  std::vector<std::string> seen;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) fail("--perturb ", spec, ": \"", item, "\" is not factor=scale");
    const std::string name = item.substr(0, eq), v = item.substr(eq + 1);
    double* x = factor(q, name);
    if (!x) {
      std::string names;
      for (const auto& n : perturbable_factors()) names += " " + n;
      fail("--perturb: unknown factor \"", name, "\" (have:", names, ")");
    }
    if (std::find(seen.begin(), seen.end(), name) != seen.end())
      fail("--perturb: factor \"", name, "\" is named twice");
    seen.push_back(name);
    errno = 0;
    char* end = nullptr;
    const double scale = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || errno == ERANGE || !(scale > 0) || !std::isfinite(scale))
      fail("--perturb: the scale of ", name, " must be a positive number, not \"", v, "\"");
    *x *= scale;
  }
  if (seen.empty()) fail("--perturb: no factor=scale given");
  q.fit.contention = std::min(q.fit.contention, 0.95);
  return q;
}

}  // namespace cln::device
