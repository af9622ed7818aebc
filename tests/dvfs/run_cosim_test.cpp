// `clone run --device`: the real CLI generates text with a small model made by
// `clone init-model` while the co-simulation hangs on the engine's layer hook. The
// per-layer trace it writes must add up to what the analytic backend computes for the
// same request (same shapes, prompt length, output length, SLO, co-runner, controller),
// and its clocks must be the analytic run's, layer by layer.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "clone/dvfs/runner.h"
#include "clone/engine/model_config.h"
#include "clone/gguf/gguf.h"

using namespace cln;
namespace fs = std::filesystem;

namespace {

struct Row {
  int64_t pass = 0;
  std::string phase;
  int layer = 0;
  int64_t token = 0, n_tokens = 0;
  double mhz = 0, t_start = 0, time = 0, energy = 0;
};

std::vector<Row> read_trace(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::vector<Row> rows;
  EXPECT_TRUE(std::getline(f, line)) << path;
  EXPECT_EQ(line, "pass,phase,layer,token,n_tokens,mhz,t_start_s,time_s,energy_j,corunner");
  while (std::getline(f, line)) {
    std::stringstream ss(line);
    std::string c[10];
    for (auto& x : c) std::getline(ss, x, ',');
    Row r;
    r.pass = std::stoll(c[0]), r.phase = c[1], r.layer = std::stoi(c[2]);
    r.token = std::stoll(c[3]), r.n_tokens = std::stoll(c[4]);
    r.mhz = std::stod(c[5]), r.t_start = std::stod(c[6]), r.time = std::stod(c[7]);
    r.energy = std::stod(c[8]);
    rows.push_back(r);
  }
  return rows;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class RunCoSim : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("clone_run_cosim_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    model_ = (dir_ / "tiny.gguf").string();
    std::string cmd = std::string(CLONE_CLI) + " init-model -o " + model_ +
                      " --layers 3 --embd 64 --heads 4,4,2 --kv-heads 2,2,1 --ff 128,96,128"
                      " --vocab 300 --ctx 256 --seed 5 --name cosim-tiny > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Runs `clone run` with extra arguments; returns the exit status, stderr in *err.
  static int run(const std::string& args, std::string* err) {
    std::string e = (dir_ / "stderr.txt").string();
    std::string cmd = std::string(CLONE_CLI) + " run -m " + model_ +
                      " -p 'the quick brown fox jumps over the lazy dog' -t 1 --temp 0 " + args +
                      " > " + (dir_ / "stdout.txt").string() + " 2> " + e;
    int rc = std::system(cmd.c_str());
    *err = slurp(e);
    return rc;
  }

  static inline fs::path dir_;
  static inline std::string model_;
};

TEST_F(RunCoSim, TraceTotalsEqualTheAnalyticBackend) {
  const int n_out = 7;
  auto cfg = ModelConfig::from_gguf(*GgufFile::open(model_));
  auto prof =
      device::DeviceProfile::find(std::string(CLONE_SOURCE_DIR) + "/profiles/orin-nx-16gb.json");
  auto cm = std::make_shared<const device::CostModel>(prof, cfg);
  for (const char* ctl : {"performance", "learned", "oracle", "schedutil"}) {
    SCOPED_TRACE(ctl);
    std::string trace = (dir_ / (std::string(ctl) + ".csv")).string(), err;
    // A TPOT target tight enough that the clock must move (the tiny model's decode is
    // dominated by the per-layer overhead), a bursty co-runner so the clock has reason to.
    ASSERT_EQ(
        run("-n " + std::to_string(n_out) + " --ignore-eos --device orin-nx-16gb --dvfs " + ctl +
                " --ttft-ms 3 --tpot-ms 0.5 --corunner bursty --corunner-seed 3 --trace " + trace,
            &err),
        0)
        << err;
    EXPECT_NE(err.find("[clone sim] cosim"), std::string::npos) << err;
    auto rows = read_trace(trace);
    ASSERT_FALSE(rows.empty());

    // The request as the trace saw it: prompt tokens from the prefill passes.
    int64_t prompt = 0;
    for (const auto& r : rows)
      if (r.phase == "prefill" && r.layer == 0) prompt += r.n_tokens;
    ASSERT_GT(prompt, 3);
    workload::Request req;
    req.prompt = prompt, req.output = n_out, req.ttft_target_s = 3e-3, req.tpot_target_s = 0.5e-3;
    device::SimDevice dev(cm, device::CorunnerTrace::make("bursty", 3));
    auto pol = dvfs::make_policy(ctl, cm);
    std::vector<dvfs::TimelinePoint> tl;
    dvfs::RunOptions ro;
    ro.timeline_request = 0, ro.timeline = &tl;
    auto res = dvfs::run_workload(dev, *pol, {req}, {}, ro);
    ASSERT_EQ(res.size(), 1u);

    // Every layer boundary of the engine, at the analytic run's clock.
    ASSERT_EQ(rows.size(), tl.size());
    ASSERT_EQ(rows.size(), static_cast<size_t>((cm->n_layer() + 1) * n_out));
    double energy = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i].layer, tl[i].layer) << i;
      EXPECT_EQ(rows[i].pass, tl[i].pass) << i;
      EXPECT_EQ(rows[i].mhz, tl[i].mhz) << "layer boundary " << i;
      energy += rows[i].energy;
    }
    const Row& last = rows.back();
    EXPECT_NEAR(energy, res[0].energy_j, 1e-9 * res[0].energy_j);
    EXPECT_NEAR(last.t_start + last.time, res[0].e2e_s, 1e-12);
    double first_decode = -1;
    for (const auto& r : rows)
      if (r.phase == "decode" && first_decode < 0) first_decode = r.t_start;
    EXPECT_NEAR(first_decode, res[0].ttft_s, 1e-12);

    // The printed summary reports the same numbers.
    char buf[64];
    std::snprintf(buf, sizeof buf, "energy %.4f J", res[0].energy_j);
    EXPECT_NE(err.find(buf), std::string::npos) << err;
    std::snprintf(buf, sizeof buf, "TTFT %.1f ms", res[0].ttft_s * 1e3);
    EXPECT_NE(err.find(buf), std::string::npos) << err;
    std::snprintf(buf, sizeof buf, "%lld frequency switches",
                  static_cast<long long>(res[0].switches));
    EXPECT_NE(err.find(buf), std::string::npos) << err;
    EXPECT_NE(err.find(res[0].met ? "SLO met" : "SLO missed"), std::string::npos) << err;
    if (std::string(ctl) == "performance") {
      EXPECT_EQ(res[0].switches, 0);
    }
  }
}

TEST_F(RunCoSim, PlainRunIsUnchangedAndBadOptionsFail) {
  std::string err;
  ASSERT_EQ(run("-n 3", &err), 0) << err;
  EXPECT_EQ(err.find("[clone sim]"), std::string::npos) << err;
  // A device without SLO targets, and a trace without a device, are errors that say so.
  EXPECT_NE(run("-n 3 --device orin-nx-16gb", &err), 0);
  EXPECT_NE(err.find("SLO targets"), std::string::npos) << err;
  EXPECT_NE(run("-n 3 --trace x.csv", &err), 0);
  EXPECT_NE(err.find("--trace needs --device"), std::string::npos) << err;
  // An SLO class works on its own; a target no clock can meet is reported as infeasible.
  ASSERT_EQ(run("-n 3 --device orin-nano-8gb --dvfs performance --slo chatbot", &err), 0) << err;
  EXPECT_NE(err.find("SLO met"), std::string::npos) << err;
  ASSERT_EQ(
      run("-n 3 --device orin-nx-16gb --dvfs performance --ttft-ms 0.001 --tpot-ms 0.001", &err), 0)
      << err;
  EXPECT_NE(err.find("SLO missed (infeasible"), std::string::npos) << err;
}

}  // namespace
