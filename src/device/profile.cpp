// Strict JSON reading for device profiles: every object lists the keys it accepts, so
// a typo is an error rather than a silently ignored field.
#include "clone/device/profile.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "clone/core/error.h"
#include "clone/core/resources.h"

namespace cln::device {

using nlohmann::json;

namespace {

// One JSON object being read: remembers its path for messages and which keys were used.
class Obj {
 public:
  Obj(const json& j, std::string origin, std::string path)
      : j_(j), origin_(std::move(origin)), path_(std::move(path)) {
    if (!j_.is_object()) fail(origin_, ": ", where(""), ": expected an object");
  }
  // Every key must be one of `allowed`.
  void allow(std::initializer_list<const char*> allowed) const {
    std::set<std::string> ok(allowed.begin(), allowed.end());
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!ok.count(it.key())) fail(origin_, ": ", where(it.key()), ": unknown field");
  }
  bool has(const char* k) const { return j_.contains(k); }
  const json& raw(const char* k) const {
    if (!j_.contains(k)) fail(origin_, ": ", where(k), ": missing field");
    return j_.at(k);
  }
  double num(const char* k, double lo, double hi) const {
    const json& v = raw(k);
    if (!v.is_number()) fail(origin_, ": ", where(k), ": expected a number");
    double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
      fail(origin_, ": ", where(k), ": ", x, " is out of range [", lo, ", ", hi, "]",
           x < 0 && lo >= 0 ? " (negative)" : "");
    return x;
  }
  double num_or(const char* k, double lo, double hi, double def) const {
    return has(k) ? num(k, lo, hi) : def;
  }
  std::string str(const char* k) const {
    const json& v = raw(k);
    if (!v.is_string()) fail(origin_, ": ", where(k), ": expected a string");
    return v.get<std::string>();
  }
  std::string str_or(const char* k, const std::string& def) const { return has(k) ? str(k) : def; }
  Obj obj(const char* k) const { return Obj(raw(k), origin_, where(k)); }
  std::vector<Obj> arr(const char* k) const {
    const json& v = raw(k);
    if (!v.is_array() || v.empty()) fail(origin_, ": ", where(k), ": expected a non-empty array");
    std::vector<Obj> out;
    for (size_t i = 0; i < v.size(); ++i)
      out.emplace_back(v[i], origin_, where(k) + "[" + std::to_string(i) + "]");
    return out;
  }
  std::vector<double> nums(const char* k, double lo, double hi) const {
    const json& v = raw(k);
    if (!v.is_array() || v.empty()) fail(origin_, ": ", where(k), ": expected a non-empty array");
    std::vector<double> out;
    for (size_t i = 0; i < v.size(); ++i) {
      std::string p = where(k) + "[" + std::to_string(i) + "]";
      if (!v[i].is_number()) fail(origin_, ": ", p, ": expected a number");
      double x = v[i].get<double>();
      if (!std::isfinite(x) || x < lo || x > hi)
        fail(origin_, ": ", p, ": ", x, " is out of range [", lo, ", ", hi, "]",
             x < 0 && lo >= 0 ? " (negative)" : "");
      out.push_back(x);
    }
    return out;
  }
  std::string where(const std::string& k) const {
    if (k.empty()) return path_.empty() ? "<root>" : path_;
    return path_.empty() ? k : path_ + "." + k;
  }
  const std::string& origin() const { return origin_; }

 private:
  const json& j_;
  std::string origin_, path_;
};

void check_ascending(const std::vector<double>& v, const Obj& o, const std::string& what) {
  for (size_t i = 1; i < v.size(); ++i)
    if (!(v[i] > v[i - 1]))
      fail(o.origin(), ": ", o.where(what), "[", i,
           "]: levels must be sorted ascending and distinct (", v[i - 1], " then ", v[i], ")");
}

ComputeUnit read_unit(const Obj& o) {
  o.allow({"name", "kind", "cores", "work_per_cycle", "levels", "power", "dvfs", "sysfs"});
  ComputeUnit u;
  u.name = o.str("name");
  u.kind = o.str("kind");
  if (u.kind != "gpu" && u.kind != "cpu")
    fail(o.origin(), ": ", o.where("kind"), ": must be \"gpu\" or \"cpu\", not \"", u.kind, "\"");
  u.cores = static_cast<int>(o.num("cores", 1, 1e6));
  u.work_per_cycle = o.num("work_per_cycle", 1e-3, 1e9);
  std::vector<double> mhz;
  for (const Obj& l : o.arr("levels")) {
    l.allow({"mhz", "volt"});
    OperatingPoint p{l.num("mhz", 1, 1e5), l.num("volt", 0.1, 5)};
    u.levels.push_back(p);
    mhz.push_back(p.mhz);
  }
  check_ascending(mhz, o, "levels");
  for (size_t i = 1; i < u.levels.size(); ++i)
    if (u.levels[i].volt < u.levels[i - 1].volt)
      fail(o.origin(), ": ", o.where("levels"), "[", i,
           "].volt: voltage must not fall as frequency rises");
  Obj p = o.obj("power");
  p.allow({"static_w_per_v", "dynamic_w_per_ghz_v2", "idle_activity", "pj_per_byte"});
  u.power.static_w_per_v = p.num("static_w_per_v", 0, 1e4);
  u.power.dynamic_w_per_ghz_v2 = p.num("dynamic_w_per_ghz_v2", 0, 1e4);
  u.power.idle_activity = p.num("idle_activity", 0, 1);
  u.power.pj_per_byte = p.num_or("pj_per_byte", 0, 1e4, 0);
  Obj d = o.obj("dvfs");
  d.allow({"switch_latency_us", "switch_energy_uj"});
  u.dvfs.switch_latency_us = d.num("switch_latency_us", 0, 1e7);
  u.dvfs.switch_energy_uj = d.num("switch_energy_uj", 0, 1e9);
  u.sysfs = o.str_or("sysfs", "");
  return u;
}

PowerMode read_mode(const Obj& o, const DeviceProfile& p) {
  o.allow({"name", "budget_w", "memory_mhz", "units"});
  PowerMode m;
  m.name = o.str("name");
  m.budget_w = o.num_or("budget_w", 0, 1e5, 0);
  m.memory_mhz = o.num("memory_mhz", 1, 1e5);
  bool listed = false;
  for (double f : p.memory.levels_mhz) listed = listed || f == m.memory_mhz;
  if (!listed)
    fail(o.origin(), ": ", o.where("memory_mhz"), ": ", m.memory_mhz,
         " is not one of memory.levels_mhz");
  const json& units = o.raw("units");
  if (!units.is_object() || units.empty())
    fail(o.origin(), ": ", o.where("units"), ": expected an object of unit name -> caps");
  for (auto it = units.begin(); it != units.end(); ++it) {
    const ComputeUnit* u = nullptr;
    for (const auto& x : p.units)
      if (x.name == it.key()) u = &x;
    if (!u) fail(o.origin(), ": ", o.where("units." + it.key()), ": names no entry of units");
    Obj c(it.value(), o.origin(), o.where("units." + it.key()));
    c.allow({"max_mhz", "cores"});
    UnitCap cap;
    cap.max_mhz = c.num("max_mhz", u->fmin_mhz(), u->fmax_mhz());
    cap.cores = static_cast<int>(c.num_or("cores", 1, u->cores, u->cores));
    m.units.emplace_back(it.key(), cap);
  }
  return m;
}

}  // namespace

const ComputeUnit* DeviceProfile::host_unit() const {
  for (const auto& u : units)
    if (host.empty() ? (u.kind == "cpu" && u.name != run_on) : u.name == host) return &u;
  return nullptr;
}

const PowerMode& DeviceProfile::mode(const std::string& m) const {
  for (const auto& x : modes)
    if (x.name == m) return x;
  std::ostringstream have;
  for (const auto& x : modes) have << " " << x.name;
  fail("profile ", name, ": no power mode \"", m, "\"",
       modes.empty() ? std::string(" (it defines none)") : " (have:" + have.str() + ")");
}

const ComputeUnit& DeviceProfile::compute() const {
  for (const auto& u : units)
    if (u.name == run_on) return u;
  fail("profile ", name, ": run_on names no unit: \"", run_on, "\"");
}
ComputeUnit& DeviceProfile::compute() {
  return const_cast<ComputeUnit&>(static_cast<const DeviceProfile*>(this)->compute());
}

DeviceProfile DeviceProfile::from_json(const json& j, const std::string& origin) {
  Obj o(j, origin, "");
  o.allow({"schema", "name", "description", "units", "run_on", "memory", "storage_gbps",
           "board_idle_w", "fit", "accelerator", "host", "modes"});
  std::string schema = o.str("schema");
  if (schema != "clone.device/1")
    fail(origin, ": schema: expected \"clone.device/1\", got \"", schema, "\"");
  DeviceProfile p;
  p.name = o.str("name");
  p.description = o.str_or("description", "");
  for (const Obj& u : o.arr("units")) p.units.push_back(read_unit(u));
  p.run_on = o.str("run_on");
  bool found = false;
  for (const auto& u : p.units) found = found || u.name == p.run_on;
  if (!found) fail(origin, ": run_on: \"", p.run_on, "\" names no entry of units");
  p.host = o.str_or("host", "");
  if (!p.host.empty()) {
    const ComputeUnit* h = p.host_unit();
    if (!h) fail(origin, ": host: \"", p.host, "\" names no entry of units");
    if (h->kind != "cpu" || h->name == p.run_on)
      fail(origin, ": host: \"", p.host, "\" must be a cpu unit other than run_on");
  }

  Obj m = o.obj("memory");
  m.allow({"size_gb", "usable_fraction", "bus_bytes_per_cycle", "levels_mhz", "mhz", "pj_per_byte",
           "static_w"});
  p.memory.size_gb = m.num("size_gb", 0.001, 1e5);
  p.memory.usable_fraction = m.num("usable_fraction", 0.01, 1);
  p.memory.bus_bytes_per_cycle = m.num("bus_bytes_per_cycle", 1e-3, 1e6);
  p.memory.levels_mhz = m.nums("levels_mhz", 1, 1e5);
  check_ascending(p.memory.levels_mhz, m, "levels_mhz");
  p.memory.mhz = m.num("mhz", 1, 1e5);
  bool listed = false;
  for (double f : p.memory.levels_mhz) listed = listed || f == p.memory.mhz;
  if (!listed) fail(origin, ": memory.mhz: ", p.memory.mhz, " is not one of memory.levels_mhz");
  p.memory.pj_per_byte = m.num("pj_per_byte", 0, 1e4);
  p.memory.static_w = m.num("static_w", 0, 1e4);
  p.storage_gbps = o.num("storage_gbps", 1e-3, 1e4);
  p.board_idle_w = o.num("board_idle_w", 0, 1e5);

  Obj f = o.obj("fit");
  f.allow({"compute_efficiency", "dram_efficiency", "core_bytes_per_cycle", "overlap",
           "layer_overhead_us", "contention", "overhead_kcycles", "host_overhead_kcycles",
           "host_activity"});
  p.fit.compute_efficiency = f.num("compute_efficiency", 1e-3, 1);
  p.fit.dram_efficiency = f.num("dram_efficiency", 1e-3, 1);
  p.fit.core_bytes_per_cycle = f.num("core_bytes_per_cycle", 0, 1e9);
  p.fit.overlap = f.num("overlap", 0, 1);
  p.fit.layer_overhead_us = f.num("layer_overhead_us", 0, 1e6);
  p.fit.contention = f.num("contention", 0, 0.95);
  p.fit.overhead_kcycles = f.num_or("overhead_kcycles", 0, 1e6, 0);
  p.fit.host_overhead_kcycles = f.num_or("host_overhead_kcycles", 0, 1e6, 0);
  p.fit.host_activity = f.num_or("host_activity", 0, 1, 0);
  if ((p.fit.host_overhead_kcycles > 0 || p.fit.host_activity > 0) && !p.host_unit())
    fail(origin, ": fit: host_overhead_kcycles / host_activity need a host cpu unit");

  if (o.has("modes")) {
    for (const Obj& jm : o.arr("modes")) {
      p.modes.push_back(read_mode(jm, p));
      for (size_t i = 0; i + 1 < p.modes.size(); ++i)
        if (p.modes[i].name == p.modes.back().name)
          fail(origin, ": ", jm.where("name"), ": mode \"", p.modes.back().name,
               "\" appears twice");
    }
  }

  if (o.has("accelerator")) {
    Obj a = o.obj("accelerator");
    a.allow({"sfu", "lpu"});
    if (a.has("sfu")) {
      Obj s = a.obj("sfu");
      s.allow({"switch_latency_us", "switch_energy_uj", "step_mhz"});
      p.sfu.switch_latency_us = s.num("switch_latency_us", 0, 1e6);
      p.sfu.switch_energy_uj = s.num("switch_energy_uj", 0, 1e6);
      p.sfu.step_mhz = s.num("step_mhz", 0.1, 1e4);
    }
    if (a.has("lpu")) {
      Obj l = a.obj("lpu");
      l.allow({"swap_us", "pj_per_flop"});
      p.lpu.swap_us = l.num("swap_us", 0, 1e9);
      p.lpu.pj_per_flop = l.num("pj_per_flop", 0, 1e6);
    }
  }
  return p;
}

DeviceProfile DeviceProfile::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open device profile ", path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    fail(path, ": malformed JSON: ", e.what());
  }
  return from_json(j, path);
}

std::string profile_dir() {
  return resource_dir(Resource::Profiles);
}

DeviceProfile DeviceProfile::find(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json"))
    return load(name_or_path);
  const std::string dir = profile_dir();
  fs::path p = fs::path(dir) / (name_or_path + ".json");
  if (!fs::exists(p)) {
    std::ostringstream names;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") names << " " << e.path().stem().string();
    fail("no device profile named \"", name_or_path, "\" in ", dir, " (have:", names.str(), ")");
  }
  return load(p.string());
}

json DeviceProfile::to_json() const {
  json j;
  j["schema"] = "clone.device/1";
  j["name"] = name;
  j["description"] = description;
  j["units"] = json::array();
  for (const auto& u : units) {
    json ju{{"name", u.name},
            {"kind", u.kind},
            {"cores", u.cores},
            {"work_per_cycle", u.work_per_cycle}};
    ju["levels"] = json::array();
    for (const auto& l : u.levels) ju["levels"].push_back({{"mhz", l.mhz}, {"volt", l.volt}});
    ju["power"] = {{"static_w_per_v", u.power.static_w_per_v},
                   {"dynamic_w_per_ghz_v2", u.power.dynamic_w_per_ghz_v2},
                   {"idle_activity", u.power.idle_activity}};
    if (u.power.pj_per_byte > 0) ju["power"]["pj_per_byte"] = u.power.pj_per_byte;
    ju["dvfs"] = {{"switch_latency_us", u.dvfs.switch_latency_us},
                  {"switch_energy_uj", u.dvfs.switch_energy_uj}};
    if (!u.sysfs.empty()) ju["sysfs"] = u.sysfs;
    j["units"].push_back(ju);
  }
  j["run_on"] = run_on;
  if (!host.empty()) j["host"] = host;
  j["memory"] = {{"size_gb", memory.size_gb},
                 {"usable_fraction", memory.usable_fraction},
                 {"bus_bytes_per_cycle", memory.bus_bytes_per_cycle},
                 {"levels_mhz", memory.levels_mhz},
                 {"mhz", memory.mhz},
                 {"pj_per_byte", memory.pj_per_byte},
                 {"static_w", memory.static_w}};
  j["storage_gbps"] = storage_gbps;
  j["board_idle_w"] = board_idle_w;
  j["fit"] = {
      {"compute_efficiency", fit.compute_efficiency},     {"dram_efficiency", fit.dram_efficiency},
      {"core_bytes_per_cycle", fit.core_bytes_per_cycle}, {"overlap", fit.overlap},
      {"layer_overhead_us", fit.layer_overhead_us},       {"contention", fit.contention}};
  if (fit.overhead_kcycles > 0) j["fit"]["overhead_kcycles"] = fit.overhead_kcycles;
  if (fit.host_overhead_kcycles > 0) j["fit"]["host_overhead_kcycles"] = fit.host_overhead_kcycles;
  if (fit.host_activity > 0) j["fit"]["host_activity"] = fit.host_activity;
  if (!modes.empty()) {
    j["modes"] = json::array();
    for (const auto& m : modes) {
      json jm{{"name", m.name}, {"memory_mhz", m.memory_mhz}};
      if (m.budget_w > 0) jm["budget_w"] = m.budget_w;
      for (const auto& [n, c] : m.units)
        jm["units"][n] = {{"max_mhz", c.max_mhz}, {"cores", c.cores}};
      j["modes"].push_back(jm);
    }
  }
  j["accelerator"] = {{"sfu",
                       {{"switch_latency_us", sfu.switch_latency_us},
                        {"switch_energy_uj", sfu.switch_energy_uj},
                        {"step_mhz", sfu.step_mhz}}},
                      {"lpu", {{"swap_us", lpu.swap_us}, {"pj_per_flop", lpu.pj_per_flop}}}};
  return j;
}

void DeviceProfile::save(const std::string& path) const {
  std::ofstream out(path);
  if (!out) fail("cannot write device profile ", path);
  out << to_json().dump(2) << "\n";
}

}  // namespace cln::device
