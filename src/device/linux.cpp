#include "clone/device/linux.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <sstream>

#include "clone/core/error.h"

namespace cln::device {

namespace fs = std::filesystem;

namespace {

bool read_text(const fs::path& p, std::string& out) {
  std::ifstream in(p);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return true;
}

double read_number(const fs::path& p) {
  std::string s;
  if (!read_text(p, s)) fail("cannot read ", p.string());
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    return v;
  } catch (...) {
    fail(p.string(), ": expected a number, got \"", s, "\"");
  }
}

std::vector<double> read_numbers(const fs::path& p, double scale) {
  std::string s;
  std::vector<double> out;
  if (!read_text(p, s)) return out;
  std::istringstream is(s);
  double v;
  while (is >> v) out.push_back(v * scale);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool writable(const fs::path& p) {
  return fs::exists(p) && ::access(p.c_str(), W_OK) == 0;
}

std::string fmt_num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

void write_text(const fs::path& p, const std::string& v) {
  std::ofstream out(p);
  if (!out) fail("cannot open ", p.string(), " for writing: ", std::strerror(errno));
  out << v;
  out.flush();
  if (!out) fail("writing \"", v, "\" to ", p.string(), " failed: ", std::strerror(errno));
}

std::vector<fs::path> subdirs(const fs::path& d, const std::regex& re) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(d, ec)) return out;
  for (const auto& e : fs::directory_iterator(d, ec))
    if (std::regex_match(e.path().filename().string(), re)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

void probe_cpufreq(const fs::path& root, LinuxProbe& pr) {
  fs::path base = root / "sys/devices/system/cpu/cpufreq";
  auto policies = subdirs(base, std::regex("policy[0-9]+"));
  if (policies.empty()) {
    pr.missing.push_back("no cpufreq policies under " + base.string() +
                         " (the kernel exposes no CPU frequency scaling here)");
    return;
  }
  for (const auto& d : policies) {
    FreqKnob k;
    k.kind = "cpufreq";
    k.name = d.filename().string();
    k.dir = d.string();
    k.levels_mhz = read_numbers(d / "scaling_available_frequencies", 1e-3);
    if (k.levels_mhz.empty()) {
      auto lo = read_numbers(d / "cpuinfo_min_freq", 1e-3),
           hi = read_numbers(d / "cpuinfo_max_freq", 1e-3);
      if (!lo.empty() && !hi.empty()) k.levels_mhz = {lo[0], hi[0]};
    }
    auto cur = read_numbers(d / "scaling_cur_freq", 1e-3);
    k.cur_mhz = cur.empty() ? 0 : cur[0];
    read_text(d / "scaling_governor", k.governor);
    std::string govs;
    read_text(d / "scaling_available_governors", govs);
    bool can_userspace = k.governor == "userspace" || (writable(d / "scaling_governor") &&
                                                       govs.find("userspace") != std::string::npos);
    if (k.levels_mhz.empty())
      k.why_not = "no scaling_available_frequencies (nor cpuinfo_min/max_freq)";
    else if (!fs::exists(d / "scaling_setspeed"))
      k.why_not = "no scaling_setspeed file";
    else if (!writable(d / "scaling_setspeed"))
      k.why_not = "scaling_setspeed is not writable (run as root)";
    else if (!can_userspace)
      k.why_not = "governor is \"" + k.governor + "\" and the userspace governor is not available";
    k.writable = k.why_not.empty();
    if (!k.writable) pr.missing.push_back("cpufreq " + k.name + " cannot be set: " + k.why_not);
    pr.knobs.push_back(k);
  }
}

void probe_devfreq(const fs::path& root, LinuxProbe& pr) {
  fs::path base = root / "sys/class/devfreq";
  auto devs = subdirs(base, std::regex(".+"));
  if (devs.empty()) {
    pr.missing.push_back("no devfreq devices under " + base.string() +
                         " (no GPU or memory frequency control; on a Jetson the GPU is "
                         "17000000.gpu or 17000000.ga10b)");
    return;
  }
  for (const auto& d : devs) {
    FreqKnob k;
    k.kind = "devfreq";
    k.name = d.filename().string();
    k.dir = d.string();
    k.levels_mhz = read_numbers(d / "available_frequencies", 1e-6);
    auto cur = read_numbers(d / "cur_freq", 1e-6);
    k.cur_mhz = cur.empty() ? 0 : cur[0];
    read_text(d / "governor", k.governor);
    if (k.levels_mhz.empty())
      k.why_not = "no available_frequencies file";
    else if (!fs::exists(d / "min_freq") || !fs::exists(d / "max_freq"))
      k.why_not = "no min_freq/max_freq files";
    else if (!writable(d / "min_freq") || !writable(d / "max_freq"))
      k.why_not = "min_freq/max_freq are not writable (run as root)";
    k.writable = k.why_not.empty();
    if (!k.writable) pr.missing.push_back("devfreq " + k.name + " cannot be set: " + k.why_not);
    pr.knobs.push_back(k);
  }
}

std::string label_or(const fs::path& f, const std::string& def) {
  std::string s;
  return read_text(f, s) && !s.empty() ? s : def;
}

void probe_power(const fs::path& root, LinuxProbe& pr) {
  std::smatch m;
  for (const auto& d : subdirs(root / "sys/class/hwmon", std::regex("hwmon[0-9]+"))) {
    std::string chip = label_or(d / "name", d.filename().string());
    std::regex pw("power([0-9]+)_input"), cur("curr([0-9]+)_input");
    for (const auto& e : fs::directory_iterator(d)) {
      std::string f = e.path().filename().string();
      if (std::regex_match(f, m, pw)) {
        std::string n = m[1];
        PowerRail r;
        r.label = label_or(d / ("power" + n + "_label"),
                           label_or(d / ("in" + n + "_label"), chip + "/power" + n));
        r.power = e.path().string();
        r.power_scale = 1e-6;  // microwatts
        pr.rails.push_back(r);
      } else if (std::regex_match(f, m, cur)) {
        std::string n = m[1];
        if (fs::exists(d / ("power" + n + "_input"))) continue;
        if (!fs::exists(d / ("in" + n + "_input"))) continue;
        PowerRail r;
        r.label = label_or(d / ("in" + n + "_label"),
                           label_or(d / ("curr" + n + "_label"), chip + "/rail" + n));
        r.current = e.path().string();
        r.voltage = (d / ("in" + n + "_input")).string();
        pr.rails.push_back(r);
      }
    }
  }
  for (const auto& d : subdirs(root / "sys/bus/iio/devices", std::regex("iio:device[0-9]+"))) {
    std::regex pw("in_power([0-9]+)_input"), cur("in_current([0-9]+)_input");
    for (const auto& e : fs::directory_iterator(d)) {
      std::string f = e.path().filename().string();
      std::string n;
      bool is_power = std::regex_match(f, m, pw);
      if (is_power)
        n = m[1];
      else if (std::regex_match(f, m, cur))
        n = m[1];
      else
        continue;
      PowerRail r;
      r.label = label_or(d / ("rail_name_" + n), "iio/" + d.filename().string() + "/" + n);
      if (is_power) {
        r.power = e.path().string();
        r.power_scale = 1e-3;  // milliwatts
      } else {
        if (fs::exists(d / ("in_power" + n + "_input"))) continue;
        if (!fs::exists(d / ("in_voltage" + n + "_input"))) continue;
        r.current = e.path().string();
        r.voltage = (d / ("in_voltage" + n + "_input")).string();
      }
      pr.rails.push_back(r);
    }
  }
  std::sort(pr.rails.begin(), pr.rails.end(), [](auto& a, auto& b) { return a.label < b.label; });
  if (pr.rails.empty())
    pr.missing.push_back(
        "no power rails (no hwmon power/current files, no INA3221 IIO device): "
        "energy cannot be measured, only modelled");
}

// The rail(s) that measure the whole board: an input rail when there is one, else all.
std::vector<PowerRail> total_rails(const std::vector<PowerRail>& rails) {
  std::vector<PowerRail> in;
  for (const auto& r : rails)
    if (r.label.find("VDD_IN") != std::string::npos || r.label == "IN" ||
        r.label.find("VIN") != std::string::npos)
      in.push_back(r);
  return in.empty() ? rails : in;
}

}  // namespace

double PowerRail::read_w() const {
  if (!power.empty()) return read_number(power) * power_scale;
  return read_number(current) * 1e-3 * read_number(voltage) * 1e-3;
}

namespace {

void probe_emc(const fs::path& root, LinuxProbe& pr) {
  const fs::path d = root / "sys/kernel/debug/bpmp/debug/clk/emc";
  if (!fs::exists(d / "rate")) {
    pr.missing.push_back("no memory (EMC) clock at " + d.string() +
                         " (BPMP debugfs: mount debugfs and run as root on a Jetson)");
    return;
  }
  MemoryKnob& k = pr.emc;
  k.dir = d.string();
  k.cur_mhz = read_number(d / "rate") / 1e6;
  k.max_mhz = fs::exists(d / "max_rate") ? read_number(d / "max_rate") / 1e6 : k.cur_mhz;
  if (!writable(d / "rate"))
    k.why_not = "rate is not writable (root needed)";
  else if (!writable(d / "mrq_rate_locked"))
    k.why_not = "mrq_rate_locked is missing or not writable (the BPMP would override the rate)";
  k.writable = k.why_not.empty();
  if (!k.writable) pr.missing.push_back("memory clock (EMC) cannot be set: " + k.why_not);
}

void probe_cores(const fs::path& root, LinuxProbe& pr) {
  const fs::path base = root / "sys/devices/system/cpu";
  for (const auto& d : subdirs(base, std::regex("cpu[0-9]+"))) {
    CoreKnob c;
    c.cpu = std::stoi(d.filename().string().substr(3));
    const fs::path f = d / "online";
    if (fs::exists(f)) {
      c.online = read_number(f) != 0;
      c.writable = writable(f);
    }
    pr.cores.push_back(c);
  }
  std::sort(pr.cores.begin(), pr.cores.end(),
            [](const CoreKnob& a, const CoreKnob& b) { return a.cpu < b.cpu; });
  if (pr.cores.empty()) pr.missing.push_back("no CPU cores listed under " + base.string());
}

void probe_nvpmodel(const fs::path& root, LinuxProbe& pr) {
  const fs::path conf = root / "etc/nvpmodel.conf";
  std::string text;
  if (!read_text(conf, text)) {
    pr.missing.push_back("no nvpmodel power modes (" + conf.string() + "): not a Jetson");
    return;
  }
  pr.nvpmodel.conf = conf.string();
  const std::regex mode_re("<\\s*POWER_MODEL\\s+ID=(\\d+)\\s+NAME=([^\\s>]+)\\s*>");
  const std::regex file_re("<\\s*PARAM\\s+TYPE=FILE\\s+NAME=([^\\s>]+)\\s*>");
  // Line by line: a header opens a block (a FILE param's paths, or a mode's settings).
  std::map<std::string, std::map<std::string, std::string>> paths;  // param -> arg -> file
  std::string param, mode;
  std::vector<NvpFileWrite>* writes = nullptr;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (line.find('<') != std::string::npos) {
      param.clear(), mode.clear(), writes = nullptr;
      if (std::regex_search(line, m, mode_re)) {
        mode = m[2].str();
        pr.nvpmodel.modes.emplace_back(std::stoi(m[1].str()), mode);
        pr.nvpmodel.tpc_writes.emplace_back(mode, std::vector<NvpFileWrite>{});
        writes = &pr.nvpmodel.tpc_writes.back().second;
      } else if (std::regex_search(line, m, file_re)) {
        param = m[1].str();
      }
      continue;
    }
    std::istringstream words(line);
    std::string a, b, c;
    if (!(words >> a >> b)) continue;
    if (!param.empty()) {
      paths[param][a] = b;
    } else if (writes && (words >> c) &&
               (a == "TPC_POWER_GATING" || a.rfind("GPU_POWER_CONTROL", 0) == 0)) {
      const auto p = paths.find(a);
      if (p == paths.end() || !p->second.count(b)) continue;  // no file for it: not ours
      writes->push_back({a, b, (root / fs::path(p->second.at(b)).relative_path()).string(), c});
    }
  }
  std::string status;
  if (read_text(root / "var/lib/nvpmodel/status", status)) {
    std::smatch m;
    if (std::regex_search(status, m, std::regex("pmode:(\\d+)")))
      pr.nvpmodel.current = std::stoi(m[1].str());
  }
}

}  // namespace

void set_memory_mhz(const MemoryKnob& emc, double mhz) {
  if (emc.dir.empty()) fail("memory clock: no EMC knob on this board");
  if (!emc.writable) fail("memory clock (EMC) cannot be set: ", emc.why_not);
  if (!(mhz > 0)) fail("memory clock: ", mhz, " MHz is not a clock");
  const double hz = std::min(mhz, emc.max_mhz) * 1e6;
  write_text(fs::path(emc.dir) / "mrq_rate_locked", "1");
  write_text(fs::path(emc.dir) / "rate", std::to_string(static_cast<long long>(std::llround(hz))));
}

void set_cores_online(const std::vector<CoreKnob>& cores, int n, const std::string& root) {
  const int total = static_cast<int>(cores.size());
  if (n < 1 || n > total) fail("cores online: ", n, " is outside 1..", total);
  for (int i = 0; i < total; ++i) {
    const CoreKnob& c = cores[static_cast<size_t>(i)];
    const bool want = i < n;
    if (want == c.online) continue;
    if (!c.writable)
      fail("cores online: cpu", c.cpu, " cannot be turned ", want ? "on" : "off",
           " (no writable online file)");
    write_text(
        fs::path(root) / "sys/devices/system/cpu" / ("cpu" + std::to_string(c.cpu)) / "online",
        want ? "1" : "0");
  }
}

void cap_cpu_mhz(const std::vector<FreqKnob>& knobs, double mhz) {
  if (!(mhz > 0)) fail("cpu clock cap: ", mhz, " MHz is not a clock");
  bool any = false;
  for (const FreqKnob& k : knobs) {
    if (k.kind != "cpufreq") continue;
    any = true;
    if (k.levels_mhz.empty()) fail("cpu clock cap: cpufreq ", k.name, " lists no frequencies");
    double pick = k.levels_mhz.front();
    for (double f : k.levels_mhz)
      if (f <= mhz + 1e-6) pick = f;
    const fs::path f = fs::path(k.dir) / "scaling_max_freq";
    if (!writable(f))
      fail("cpu clock cap: cpufreq ", k.name, " cannot be capped at ", mhz, " MHz: ", f.string(),
           fs::exists(f) ? " is not writable (run as root)" : " does not exist");
    write_text(f, std::to_string(std::llround(pick * 1e3)));
  }
  if (!any) fail("cpu clock cap: no cpufreq policies on this board");
}

std::vector<std::string> power_mode_blockers(const LinuxProbe& pr, const DeviceProfile& p,
                                             const PowerMode& m) {
  std::vector<std::string> why;
  if (m.memory_mhz > 0) {
    if (pr.emc.dir.empty())
      why.push_back("no memory (EMC) clock to pin at " + fmt_num(m.memory_mhz) + " MHz");
    else if (!pr.emc.writable)
      why.push_back("memory clock (EMC) cannot be set: " + pr.emc.why_not);
  }
  const ComputeUnit* host = p.host_unit();
  const UnitCap* c = host ? m.cap(host->name) : nullptr;
  if (c && c->cores > 0) {
    const int total = static_cast<int>(pr.cores.size());
    if (c->cores > total)
      why.push_back(host->name + ": the mode has " + std::to_string(c->cores) +
                    " cores online, this board " + std::to_string(total));
    for (int i = 0; i < total && c->cores <= total; ++i) {
      const CoreKnob& k = pr.cores[static_cast<size_t>(i)];
      if ((i < c->cores) != k.online && !k.writable)
        why.push_back("cpu" + std::to_string(k.cpu) + " cannot be turned " +
                      (i < c->cores ? "on" : "off") + " (no writable online file)");
    }
  }
  if (c && c->max_mhz > 0) {
    bool any = false;
    for (const FreqKnob& k : pr.knobs) {
      if (k.kind != "cpufreq") continue;
      any = true;
      if (!writable(fs::path(k.dir) / "scaling_max_freq"))
        why.push_back("cpufreq " + k.name +
                      " cannot be capped: scaling_max_freq is missing or not writable");
    }
    if (!any) why.push_back("no cpufreq policies to cap at " + fmt_num(c->max_mhz) + " MHz");
  }
  if (const auto* tpc = pr.nvpmodel.tpc_writes_of(m.name))
    for (const NvpFileWrite& w : *tpc)
      if (!writable(w.path))
        why.push_back(w.param + " " + w.arg + ": " + w.path +
                      (fs::exists(w.path) ? " is not writable (run as root)" : " does not exist"));
  return why;
}

std::vector<std::string> apply_power_mode(const LinuxProbe& pr, const DeviceProfile& p,
                                          const PowerMode& m) {
  const std::vector<std::string> why = power_mode_blockers(pr, p, m);
  if (!why.empty()) {
    std::string all;
    for (const auto& w : why) all += (all.empty() ? "" : "; ") + w;
    fail("power mode ", m.name, " cannot be put on this board (nothing was changed): ", all);
  }
  std::vector<std::string> done;
  if (m.memory_mhz > 0) {
    set_memory_mhz(pr.emc, m.memory_mhz);
    done.push_back("memory clock pinned at " + fmt_num(m.memory_mhz) + " MHz");
  }
  if (const ComputeUnit* host = p.host_unit()) {
    if (const UnitCap* c = m.cap(host->name)) {
      if (c->cores > 0) {
        set_cores_online(pr.cores, c->cores, pr.root);
        done.push_back(host->name + ": " + std::to_string(c->cores) + " cores online");
      }
      if (c->max_mhz > 0) {
        cap_cpu_mhz(pr.knobs, c->max_mhz);
        done.push_back(host->name + ": clock capped at " + fmt_num(c->max_mhz) + " MHz");
      }
    }
  }
  const ComputeUnit& run = p.compute();
  if (const UnitCap* c = m.cap(run.name)) {
    if (c->max_mhz > 0)
      done.push_back(run.name + ": clock capped at " + fmt_num(c->max_mhz) +
                     " MHz (each layer's clock is pinned among the mode's levels)");
  }
  // The GPU's TPC power gating, as the board's own nvpmodel.conf has it for this mode (its
  // mask is written in every mode that lists it, so a faster mode ungates them again).
  const auto* tpc = pr.nvpmodel.tpc_writes_of(m.name);
  if (tpc && !tpc->empty()) {
    for (const NvpFileWrite& w : *tpc) {
      write_text(w.path, w.value);
      done.push_back(run.name + ": " + w.param + " " + w.arg + " " + w.value + " written to " +
                     w.path + " (nvpmodel.conf's " + m.name + ")");
    }
  } else if (const UnitCap* c = m.cap(run.name); c && c->cores > 0 && c->cores < run.cores) {
    done.push_back(run.name + ": " + std::to_string(c->cores) + " of " + std::to_string(run.cores) +
                   " cores in this mode NOT set (" +
                   (pr.nvpmodel.conf.empty() ? "no nvpmodel.conf"
                                             : "nvpmodel.conf has no TPC gating for " + m.name) +
                   "; the board runs with the cores it has, the model plans with the mode's)");
  }
  for (auto& d : done) d = "power mode " + m.name + ": " + d;
  return done;
}

LinuxProbe probe_linux(const std::string& root) {
  LinuxProbe pr;
  pr.root = root;
  fs::path r(root);
  probe_cpufreq(r, pr);
  probe_devfreq(r, pr);
  probe_emc(r, pr);
  probe_cores(r, pr);
  probe_nvpmodel(r, pr);
  probe_power(r, pr);
  bool any = false;
  for (const auto& k : pr.knobs) any = any || k.writable;
  if (!any)
    pr.missing.push_back(
        "no frequency can be set here: DVFS controllers can only run on the sim backend");
  return pr;
}

std::string LinuxProbe::report() const {
  std::ostringstream os;
  os << "sysfs root: " << root << "\n";
  for (const auto& k : knobs) {
    os << k.kind << " " << k.name << ": " << k.levels_mhz.size() << " levels";
    if (!k.levels_mhz.empty())
      os << " (" << k.levels_mhz.front() << "-" << k.levels_mhz.back() << " MHz)";
    os << ", now " << k.cur_mhz << " MHz, governor " << (k.governor.empty() ? "?" : k.governor)
       << ", " << (k.writable ? "settable" : "NOT settable: " + k.why_not) << "\n";
  }
  if (!emc.dir.empty())
    os << "memory clock (EMC) " << emc.dir << ": now " << emc.cur_mhz << " MHz, max " << emc.max_mhz
       << " MHz, " << (emc.writable ? "settable" : "NOT settable: " + emc.why_not) << "\n";
  if (!cores.empty()) {
    int online = 0, settable = 0;
    for (const auto& c : cores) online += c.online, settable += c.writable;
    os << "cpu cores: " << cores.size() << ", " << online << " online, " << settable
       << " can be taken offline or back\n";
  }
  if (!nvpmodel.conf.empty()) {
    os << "nvpmodel power modes (" << nvpmodel.conf << "):";
    for (const auto& [id, name] : nvpmodel.modes)
      os << " " << id << "=" << name << (id == nvpmodel.current ? " (current)" : "");
    os << "; switched with `nvpmodel -m <id>`, not by clone\n";
  }
  for (const auto& r : rails) {
    os << "power rail " << r.label << ": ";
    try {
      os << r.read_w() << " W\n";
    } catch (const Error& e) {
      os << "unreadable (" << e.what() << ")\n";
    }
  }
  for (const auto& m : missing) os << "missing: " << m << "\n";
  return os.str();
}

LinuxDevice::LinuxDevice(const std::string& root, const std::string& knob) {
  LinuxProbe pr = probe_linux(root);
  const FreqKnob* pick = nullptr;
  for (const auto& k : pr.knobs) {
    if (!knob.empty() ? k.name == knob : (k.writable && k.kind == "devfreq" && !pick)) pick = &k;
  }
  if (!pick && knob.empty())
    for (const auto& k : pr.knobs)
      if (k.writable && !pick) pick = &k;
  if (!pick) {
    std::ostringstream os;
    os << "linux backend: ";
    if (!knob.empty())
      os << "no frequency knob named \"" << knob << "\"";
    else
      os << "no settable frequency knob";
    for (const auto& m : pr.missing) os << "; " << m;
    fail(os.str());
  }
  if (!pick->writable)
    fail("linux backend: ", pick->kind, " ", pick->name, " cannot be set: ", pick->why_not);
  knob_ = *pick;
  rails_ = total_rails(pr.rails);
  for (double f : knob_.levels_mhz) levels_.push_back({f, 0});
  level_ = static_cast<int>(levels_.size()) - 1;
  double best = std::numeric_limits<double>::max();
  for (size_t i = 0; i < levels_.size(); ++i)  // start at whatever level it runs at
    if (std::abs(levels_[i].mhz - knob_.cur_mhz) < best)
      best = std::abs(levels_[i].mhz - knob_.cur_mhz), level_ = static_cast<int>(i);
  t0_ = std::chrono::steady_clock::now();
  last_p_ = rails_.empty() ? 0 : read_power_w();
}

double LinuxDevice::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

double LinuxDevice::read_cur_mhz() const {
  fs::path d(knob_.dir);
  if (knob_.kind == "cpufreq") return read_number(d / "scaling_cur_freq") * 1e-3;
  return read_number(d / "cur_freq") * 1e-6;
}

double LinuxDevice::read_power_w() const {
  if (rails_.empty()) return std::numeric_limits<double>::quiet_NaN();
  double w = 0;
  for (const auto& r : rails_) w += r.read_w();
  return w;
}

void LinuxDevice::set_level(int i) {
  if (i < 0 || i >= static_cast<int>(levels_.size()))
    fail("linux backend: level ", i, " out of range [0, ", levels_.size() - 1, "]");
  if (i == level_) return;
  fs::path d(knob_.dir);
  double mhz = levels_[static_cast<size_t>(i)].mhz;
  if (knob_.kind == "cpufreq") {
    std::string gov;
    read_text(d / "scaling_governor", gov);
    if (gov != "userspace") write_text(d / "scaling_governor", "userspace");
    write_text(d / "scaling_setspeed", std::to_string(std::llround(mhz * 1e3)));
  } else {
    std::string hz = std::to_string(std::llround(mhz * 1e6));
    // Keep min <= max at every step: raise max first when going up, lower min first going down.
    if (i > level_) {
      write_text(d / "max_freq", hz);
      write_text(d / "min_freq", hz);
    } else {
      write_text(d / "min_freq", hz);
      write_text(d / "max_freq", hz);
    }
  }
  level_ = i;
  ++switches_;
}

void LinuxDevice::on_layer(const LayerEvent&) {
  if (rails_.empty()) return;
  double t = now_s(), p = read_power_w();
  energy_ += 0.5 * (p + last_p_) * (t - last_t_);
  last_t_ = t, last_p_ = p;
}

double LinuxDevice::energy_j() const {
  if (rails_.empty()) return std::numeric_limits<double>::quiet_NaN();
  return energy_;
}

}  // namespace cln::device
