// clone device probe | show | calibrate: what this machine offers for DVFS and power
// measurement; a profile's contents; the fit of a profile to the paper's measurements.
#include <cstdio>

#include <nlohmann/json.hpp>
#include "clone/core/error.h"
#include "clone/core/table.h"
#include "clone/device/calibrate.h"
#include "clone/device/host.h"
#include "clone/device/linux.h"
#include "clone/device/profile.h"
#include "common.h"
#include "subcommand.h"

namespace {

using namespace cln;

struct Opts {
  std::string root = "/", out, profile = "orin-nx-16gb";
  bool write = false, no_measure = false;
};

int probe(const Opts& o) {
  auto pr = device::probe_linux(o.root);
  std::printf("%s", pr.report().c_str());
  if (!o.out.empty()) {
    const auto facts = device::read_host_facts();
    const auto lim = o.no_measure ? device::HostLimits{} : device::measure_host_limits(facts.cores);
    auto p = device::host_profile(pr, facts, lim);
    p.save(o.out);
    const auto& u = p.compute();
    std::printf(
        "host profile written to %s: %d cores, %zu levels up to %.0f MHz, %.1f FLOP/cycle, %.1f "
        "GB/s\n",
        o.out.c_str(), u.cores, u.levels.size(), u.fmax_mhz(), u.work_per_cycle,
        p.memory.peak_bandwidth() / 1e9);
  }
  return 0;
}

int show(const Opts& o) {
  auto p = device::DeviceProfile::find(o.profile);
  std::printf("%s\n", p.to_json().dump(2).c_str());
  return 0;
}

int calibrate(const Opts& o) {
  auto p = device::DeviceProfile::find(o.profile);
  const device::Fit* shared = nullptr;
  device::Fit nx_fit;
  if (p.name.find("orin-nano") != std::string::npos) {
    nx_fit = device::DeviceProfile::find("orin-nx-16gb").fit;
    shared = &nx_fit;
  }
  auto before = device::paper_points(p);
  auto r = device::fit_to_paper(p, shared);
  Table t({"measurement", "paper", "shipped profile", "err %", "refit", "refit err %"});
  for (size_t i = 0; i < r.points.size(); ++i)
    t.add({r.points[i].what, r.points[i].measured, before[i].modelled, 100 * before[i].rel_err(),
           r.points[i].modelled, 100 * r.points[i].rel_err()});
  t.set_precision(3);
  std::printf("%s\n", t.markdown().c_str());
  std::printf("fitted (%d evaluations, loss %.3g):", r.evaluations, r.loss);
  std::printf(
      " compute_efficiency %.4f, core_bytes_per_cycle %.2f, overlap %.4f, contention %.4f\n",
      r.fit.compute_efficiency, r.fit.core_bytes_per_cycle, r.fit.overlap, r.fit.contention);
  if (o.write) {
    p.fit = r.fit;
    std::string path = o.profile.find('/') != std::string::npos
                           ? o.profile
                           : device::profile_dir() + "/" + p.name + ".json";
    p.save(path);
    std::printf("wrote %s\n", path.c_str());
  }
  return 0;
}

const cli::Register reg{
    "device", "device profiles: probe this machine, show a profile, calibrate", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      auto mode = std::make_shared<int>(0);
      app.require_subcommand(1);
      auto* p = app.add_subcommand("probe",
                                   "what frequency knobs and power rails this machine exposes; "
                                   "optionally write a host profile");
      p->add_option("--root", o->root, "sysfs root to inspect")->capture_default_str();
      p->add_option("--out", o->out,
                    "write the measured host profile here (e.g. profiles/host.json)");
      p->add_flag("--no-measure", o->no_measure, "skip the FLOP/bandwidth measurement");
      p->callback([mode] { *mode = 1; });
      auto* s = app.add_subcommand("show", "print a profile (name or path) after validation");
      s->add_option("profile", o->profile, "profile name or JSON path")->capture_default_str();
      s->callback([mode] { *mode = 2; });
      cli::add_resource_flags(*s, {Resource::Profiles});
      auto* c = app.add_subcommand(
          "calibrate", "fit a profile's efficiency factors to the paper's Gemma-2B measurements");
      c->add_option("--profile", o->profile, "orin-nx-16gb or orin-nano-8gb (or a path)")
          ->capture_default_str();
      c->add_flag("--write", o->write, "write the refitted factors back into the profile");
      c->callback([mode] { *mode = 3; });
      cli::add_resource_flags(*c, {Resource::Profiles});
      return [o, mode] { return *mode == 1 ? probe(*o) : *mode == 2 ? show(*o) : calibrate(*o); };
    }};

}  // namespace
