// clone bench: prefill and decode speed of models, each as a fraction of this machine's
// limits, which it measures first: read bandwidth for decode (every weight byte is read
// once per token) and F32 FMA throughput for prefill (engine/speed.h says how).
#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "clone/engine/speed.h"
#include "clone/kernels/machine.h"
#include "subcommand.h"

namespace cmd_bench {

// The CPU's name as the kernel reports it ("model name" in /proc/cpuinfo), or "unknown".
std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  return "unknown";
}

struct Opts {
  std::vector<std::string> models;
  cln::SpeedOptions s;
  std::string format = "md";
  std::string out;
  std::string simd;
  bool pack = true;
};

int run(const Opts& o) {
  using namespace cln;
  kernels::force_simd_target(o.simd);
  kernels::ThreadPool pool(o.s.threads);
  std::fprintf(stderr, "[bench] measuring this machine's limits with %d threads...\n", pool.size());
  const kernels::MachineLimits lim = kernels::measure_machine(&pool);
  std::fprintf(stderr,
               "[bench] read bandwidth %.1f GB/s, F32 FMA %.1f GFLOP/s, int8 dot products %.1f "
               "GOP/s (%s), SIMD %s\n",
               lim.read_bandwidth_gbs, lim.fma_gflops, lim.int8_gops, lim.int8_kind,
               lim.simd_target);
  std::vector<SpeedResult> rows;
  for (const auto& path : o.models) {
    std::fprintf(stderr, "[bench] %s ...\n", path.c_str());
    rows.push_back(measure_speed(Model::load(path, o.pack), path.substr(path.find_last_of('/') + 1),
                                 o.s, lim));
  }
  const Table t = speed_table(rows);
  const auto ends_with = [](const std::string& a, const std::string& b) {
    return a.size() >= b.size() && a.compare(a.size() - b.size(), b.size(), b) == 0;
  };
  if (o.format == "json" || ends_with(o.out, ".json")) {
    // One document, keys sorted, so two commits' outputs diff line by line.
    nlohmann::json doc;
    doc["schema"] = "clone-bench/1";
    doc["machine"] = {{"cpu", cpu_model_name()},       {"read_gbs", lim.read_bandwidth_gbs},
                      {"fma_gflops", lim.fma_gflops},  {"int8_gops", lim.int8_gops},
                      {"int8_kind", lim.int8_kind},    {"threads", lim.threads},
                      {"simd_target", lim.simd_target}};
    doc["options"] = {{"n_prompt", o.s.n_prompt}, {"n_gen", o.s.n_gen},
                      {"reps", o.s.reps},         {"decode_reps", o.s.decode_reps},
                      {"overhead", o.s.overhead}, {"pack", o.pack}};
    doc["models"] = nlohmann::json::parse(t.format("json"));
    const std::string text = doc.dump(1) + "\n";
    if (o.format == "json") std::fputs(text.c_str(), stdout);
    if (ends_with(o.out, ".json")) {
      std::ofstream f(o.out);
      if (!(f << text)) throw std::runtime_error("cannot write " + o.out);
    }
  }
  if (o.format != "json")
    std::printf(
        "machine: read %.1f GB/s, FMA %.1f GFLOP/s, int8 %.1f GOP/s (%s), %d threads, %s, %s\n\n%s",
        lim.read_bandwidth_gbs, lim.fma_gflops, lim.int8_gops, lim.int8_kind, lim.threads,
        lim.simd_target, cpu_model_name().c_str(), t.format(o.format).c_str());
  if (!o.out.empty() && !ends_with(o.out, ".json")) t.write(o.out);
  return 0;
}

const cln::cli::Register reg{
    "bench", "Prefill and decode speed as a fraction of this machine's limits", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("-m,--model", o->models, "model GGUF files (repeatable)")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("-t,--threads", o->s.threads, "threads (0 = all cores)")
          ->capture_default_str();
      app.add_option("-p,--n-prompt", o->s.n_prompt, "prompt tokens for the prefill test")
          ->capture_default_str()
          ->check(CLI::Range(0, 1 << 16));
      app.add_option("-n,--n-gen", o->s.n_gen, "tokens for the decode test")
          ->capture_default_str()
          ->check(CLI::Range(1, 1 << 16));
      app.add_option("-r,--reps", o->s.reps, "prefill repetitions (best is reported)")
          ->capture_default_str()
          ->check(CLI::Range(1, 100));
      app.add_option("--decode-reps", o->s.decode_reps,
                     "decode runs, each between two bandwidth probes (medians are reported)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000));
      app.add_option("-o,--output", o->format,
                     "md, csv or json (one document: machine, options, models)")
          ->capture_default_str()
          ->check(CLI::IsMember({"md", "csv", "json"}));
      app.add_option("--out", o->out, "also write the table to this file (.md/.csv/.json)");
      app.add_option("--simd", o->simd,
                     "run every kernel on this SIMD target (e.g. AVX2 on an AVX-512 machine)");
      app.add_flag("!--no-pack", o->pack,
                   "keep every matrix as the GGUF stores it (no load-time packing for this CPU)");
      app.add_flag("!--no-overhead", o->s.overhead,
                   "skip the 1-thread run that measures parallel overhead");
      return [o] { return run(*o); };
    }};

}  // namespace cmd_bench
