// Device profiles, cost model and calibration against the paper's measurements.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include "clone/core/error.h"
#include "clone/core/stats.h"
#include "clone/device/calibrate.h"
#include "clone/device/cost_model.h"
#include "clone/device/profile.h"
#include "clone/device/public_calibration.h"
#include "clone/device/sim.h"
#include "clone/engine/accounting.h"
#include "clone/engine/presets.h"

using namespace cln;
using namespace cln::device;
using nlohmann::json;

namespace {

std::string profile_path(const char* name) {
  return std::string(CLONE_SOURCE_DIR) + "/profiles/" + name + ".json";
}

json nx_json() {
  std::ifstream in(profile_path("orin-nx-16gb"));
  return json::parse(in);
}

// Expects from_json to throw a cln::Error whose message contains every fragment.
void expect_error(const json& j, std::initializer_list<const char*> fragments) {
  try {
    DeviceProfile::from_json(j, "test.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    for (const char* f : fragments) EXPECT_NE(m.find(f), std::string::npos) << m;
  }
}

}  // namespace

TEST(Profile, ShippedProfilesLoadAndRoundTrip) {
  for (const char* n : {"orin-nx-16gb", "orin-nano-8gb", "orin-nano-super-8gb", "host"}) {
    DeviceProfile p = DeviceProfile::load(profile_path(n));
    EXPECT_EQ(p.name, n);
    // Every field read is written back with its value: to_json gives the file itself.
    std::ifstream in(profile_path(n));
    EXPECT_EQ(p.to_json(), json::parse(in)) << n;
    DeviceProfile q = DeviceProfile::from_json(p.to_json(), "roundtrip");
    EXPECT_EQ(q.to_json(), p.to_json());
  }
  DeviceProfile nx = DeviceProfile::load(profile_path("orin-nx-16gb"));
  EXPECT_EQ(nx.compute().levels.size(), 7u);
  EXPECT_DOUBLE_EQ(nx.compute().fmax_mhz(), 918);
  EXPECT_NEAR(nx.memory.peak_bandwidth(), 102.4e9, 0.1e9);
}

TEST(Profile, BadProfilesNameTheField) {
  json j = nx_json();
  j["colour"] = "green";
  expect_error(j, {"colour", "unknown field"});
  j = nx_json();
  j["units"][0]["levels"][2]["mhz"] = -510;
  expect_error(j, {"units[0].levels[2].mhz", "negative"});
  j = nx_json();
  std::swap(j["units"][0]["levels"][1], j["units"][0]["levels"][2]);
  expect_error(j, {"units[0].levels", "sorted ascending"});
  j = nx_json();
  j["memory"].erase("size_gb");
  expect_error(j, {"memory.size_gb", "missing field"});
  j = nx_json();
  j["fit"]["compute_efficiency"] = "high";
  expect_error(j, {"fit.compute_efficiency", "expected a number"});
  j = nx_json();
  j["run_on"] = "npu";
  expect_error(j, {"run_on", "npu"});
  j = nx_json();
  j["memory"]["mhz"] = 1234;
  expect_error(j, {"memory.mhz", "not one of"});
  std::string bad = std::string(CLONE_BINARY_DIR) + "/bad_profile.json";
  std::ofstream(bad) << "{ \"schema\": \"clone.device/1\", ";
  try {
    DeviceProfile::load(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos);
  }
}

// Calibration, not validation: these are the points the shipped factors were fitted to.
// Orin NX: 4 free factors, 6 points (two of them the same TPOT): the in-sample residuals,
// each within 7% (the paper's own numbers disagree by about that: 128 in + 242 out at
// 255 + 241 x 198 ms is 48.0 s, but it reports 42.6 s end to end). Orin Nano: 2 free
// factors for its 2 points, so they fit exactly; that only says the fit converged and the
// shipped file is its output. Validation is in HeldOutPrefillPointsArePredicted.
TEST(Calibration, ShippedFactorsAreTheFitsOutput) {
  const auto nx = paper_points(DeviceProfile::load(profile_path("orin-nx-16gb")));
  ASSERT_EQ(nx.size(), 6u);
  for (const auto& p : nx) EXPECT_LT(p.rel_err(), 0.07) << p.what << " modelled " << p.modelled;
  const auto nano = paper_points(DeviceProfile::load(profile_path("orin-nano-8gb")));
  ASSERT_EQ(nano.size(), 2u);
  for (const auto& p : nano) EXPECT_LT(p.rel_err(), 1e-3) << p.what << " modelled " << p.modelled;
}

// The fit from a poor start finds the shipped factors (the start is far from them: a fit
// that stalls or drifts fails here).
TEST(Calibration, FitFromAPoorStartLandsOnTheShippedFactors) {
  const DeviceProfile shipped = DeviceProfile::load(profile_path("orin-nx-16gb"));
  DeviceProfile nx = shipped;
  nx.fit.compute_efficiency = 0.5, nx.fit.core_bytes_per_cycle = 500, nx.fit.contention = 0.2;
  const FitResult r = fit_to_paper(nx);
  EXPECT_NEAR(r.fit.compute_efficiency, shipped.fit.compute_efficiency,
              0.01 * shipped.fit.compute_efficiency);
  EXPECT_NEAR(r.fit.core_bytes_per_cycle, shipped.fit.core_bytes_per_cycle,
              0.01 * shipped.fit.core_bytes_per_cycle);
  EXPECT_NEAR(r.fit.contention, shipped.fit.contention, 0.01);
}

// Validation: refit the Orin NX factors without one of the two prefill points and predict
// it. The other points still pin every factor (TTFT 128 or 1024 the compute efficiency,
// TPOT the memory path, the co-runner run the contention), so the held-out TTFT is a real
// prediction of how prefill time grows from 128 to 1024 tokens (the paper: 7.6x).
// Measured: 7.0% (128 held out) and 7.5% (1024 held out).
TEST(Calibration, HeldOutPrefillPointsArePredicted) {
  const DeviceProfile nx = DeviceProfile::load(profile_path("orin-nx-16gb"));
  for (const char* held : {"TTFT, 128-token prompt", "TTFT, 1024-token prompt"}) {
    const FitResult r = fit_to_paper(nx, nullptr, {held});
    for (const auto& p : r.points)
      if (p.what == held) {
        EXPECT_LT(p.rel_err(), 0.10)
            << held << ": predicted " << p.modelled << " s, measured " << p.measured << " s";
      }
  }
  EXPECT_THROW(fit_to_paper(nx, nullptr, {"TTFT, 4096-token prompt"}), Error);
}

TEST(CostModel, RooflineBehaviour) {
  DeviceProfile nx = DeviceProfile::load(profile_path("orin-nx-16gb"));
  CostModel m(nx, model_preset("gemma-2b"));
  Work pre = m.work(3, Phase::Prefill, 0, 1024), dec = m.work(3, Phase::Decode, 1024, 1);
  // Gemma-2B layer: 2*(2048*2048*2 + 2048*256*2 + 3*2048*16384) FLOPs per token for the
  // matrices, plus attention over 1025 positions: 2 * 8 heads * (256 + 256) * 1025.
  double expect =
      2 * (2048.0 * 2048 * 2 + 2048.0 * 256 * 2 + 3 * 2048.0 * 16384) + 2 * 8 * 512.0 * 1025;
  EXPECT_NEAR(dec.flops, expect, 0.005 * expect);
  EXPECT_GT(pre.flops / pre.dram_bytes, 100);  // prefill: compute-bound
  EXPECT_LT(dec.flops / dec.dram_bytes, 2);    // decode: memory-bound
  // Slower clocks take longer; prefill scales nearly with 1/f, decode much less.
  double tp_hi = m.cost(pre, m.max_level(), 0).time_s, tp_lo = m.cost(pre, 0, 0).time_s;
  double td_hi = m.cost(dec, m.max_level(), 0).time_s, td_lo = m.cost(dec, 0, 0).time_s;
  EXPECT_NEAR(tp_lo / tp_hi, 918.0 / 306.0, 0.2);
  EXPECT_LT(td_lo / td_hi, 2.5);
  EXPECT_GT(td_lo / td_hi, 1.2);
  // A co-runner slows everything and costs energy.
  EXPECT_GT(m.cost(dec, m.max_level(), 0.8).time_s, 1.5 * td_hi);
  // Decode has an energy-optimal clock below the top one.
  double e_top = m.cost(dec, m.max_level(), 0).energy_j, e_best = e_top;
  for (int k = 0; k < m.max_level(); ++k) e_best = std::min(e_best, m.cost(dec, k, 0).energy_j);
  EXPECT_LT(e_best, 0.95 * e_top);
  // More KV to read, more time.
  EXPECT_GT(m.cost(m.work(3, Phase::Decode, 4000, 1), m.max_level(), 0).time_s, td_hi);
}

TEST(CostModel, OffloadWhenTheModelDoesNotFit) {
  DeviceProfile nano = DeviceProfile::load(profile_path("orin-nano-8gb"));
  CostModel fits(nano, model_preset("gemma-2b"));
  CostModel big(nano, model_preset("llama2-7b"));
  EXPECT_FALSE(fits.offloaded());
  ASSERT_TRUE(big.offloaded());
  Work w = big.work(0, Phase::Decode, 100, 1);
  // By hand: Llama-2-7B has 32 layers of 202375168 F16 weights and two F32 norms of 4096,
  // 404783104 bytes each, plus 2 x 4096 x 32000 F16 embedding and output and the F32
  // output norm: 13477363712 bytes. The Nano keeps 8 GB x 0.8 - 4096 tokens of KV (32 x
  // 8192 x 2 bytes each) - 0.25 GB of activations = 4002516352 bytes of it resident, a
  // share of 0.296981; the rest of layer 0 streams from storage every pass: 284570351 bytes.
  EXPECT_NEAR(w.stream_bytes, 284570351.17, 1.0);
  // At 1.5 GB/s that takes 190 ms, far longer than the resident part from DRAM, so the
  // layer's time is the storage time.
  EXPECT_NEAR(big.cost(w, big.max_level(), 0).time_s, 284570351.17 / 1.5e9, 1e-6);
}

TEST(CostModel, PerLayerShapesAndLora) {
  DeviceProfile nx = DeviceProfile::load(profile_path("orin-nx-16gb"));
  ModelConfig pruned = model_preset("gemma-2b");
  pruned.layers[5] = LayerShape{4, 1, 8192};
  pruned.layers[6] = LayerShape{0, 0, 0};  // removed
  CostModel m(nx, pruned);
  EXPECT_NEAR(m.work(5, Phase::Decode, 10, 1).flops, 0.5 * m.work(4, Phase::Decode, 10, 1).flops,
              0.1 * m.work(4, Phase::Decode, 10, 1).flops);
  EXPECT_LT(m.work(6, Phase::Decode, 10, 1).dram_bytes, 1e6);
  // The fixed per-layer cost goes with the halves a layer still has.
  pruned.layers[7] = LayerShape{0, 0, 16384};  // FFN only
  CostModel h(nx, pruned);
  const double oh = nx.fit.layer_overhead_us * 1e-6;
  ASSERT_GT(oh, 0);
  EXPECT_DOUBLE_EQ(h.work(4, Phase::Decode, 10, 1).fixed, 1.0);
  EXPECT_DOUBLE_EQ(h.work(7, Phase::Decode, 10, 1).fixed, 0.5);
  EXPECT_DOUBLE_EQ(h.work(6, Phase::Decode, 10, 1).fixed, 0.0);
  const int top = h.max_level();
  Work no_fixed = h.work(7, Phase::Decode, 10, 1);
  no_fixed.fixed = 0;
  EXPECT_NEAR(
      h.cost(h.work(7, Phase::Decode, 10, 1), top, 0).time_s - h.cost(no_fixed, top, 0).time_s,
      0.5 * oh, 1e-12);
  EXPECT_LT(h.cost(h.work(6, Phase::Decode, 10, 1), top, 0).time_s, 0.1 * oh);  // empty layer
  CostOptions lo;
  lo.n_experts = 4;
  CostModel with(nx, model_preset("gemma-2b"), lo);
  lo.lpu = true;
  CostModel lpu(nx, model_preset("gemma-2b"), lo);
  CostModel base(nx, model_preset("gemma-2b"));
  Work wb = base.work(2, Phase::Decode, 10, 1), wl = with.work(2, Phase::Decode, 10, 1),
       wp = lpu.work(2, Phase::Decode, 10, 1);
  EXPECT_GT(wl.flops, wb.flops);
  EXPECT_GT(wl.dram_bytes, wb.dram_bytes);
  EXPECT_DOUBLE_EQ(wp.dram_bytes, wb.dram_bytes);  // LPU: no adapter traffic in DRAM
  EXPECT_GT(wp.lpu_flops, 0);
  EXPECT_GT(with.expert_swap_s(), 100 * lpu.expert_swap_s());
}

TEST(CostModel, SfuGridAndSwitchCosts) {
  DeviceProfile nx = DeviceProfile::load(profile_path("orin-nx-16gb"));
  CostOptions o;
  o.sfu = true;
  CostModel sfu(nx, model_preset("gemma-2b"), o), jet(nx, model_preset("gemma-2b"));
  EXPECT_GT(sfu.levels().size(), 50u);
  EXPECT_DOUBLE_EQ(sfu.levels().front().mhz, 306);
  EXPECT_DOUBLE_EQ(sfu.levels().back().mhz, 918);
  for (size_t i = 1; i < sfu.levels().size(); ++i)
    EXPECT_GE(sfu.levels()[i].volt, sfu.levels()[i - 1].volt);
  // The profile's numbers: the GPU's DVFS switch takes 500 us and 50 uJ, the SFU's 1 us
  // and 0.1 uJ; while switching, the board draws its idle 4 W.
  EXPECT_DOUBLE_EQ(jet.switch_time_s(), 500e-6);
  EXPECT_DOUBLE_EQ(sfu.switch_time_s(), 1e-6);
  SimDevice d(std::make_shared<CostModel>(jet), CorunnerTrace::constant(0));
  double t0 = d.now_s(), e0 = d.energy_j();
  d.set_level(0);
  EXPECT_EQ(d.switches(), 1);
  EXPECT_NEAR(d.now_s() - t0, 500e-6, 1e-15);
  EXPECT_NEAR(d.energy_j() - e0, 50e-6 + 500e-6 * 4.0, 1e-15);
  SimDevice ds(std::make_shared<CostModel>(sfu), CorunnerTrace::constant(0));
  ds.set_level(0);
  EXPECT_NEAR(ds.now_s(), 1e-6, 1e-18);
  EXPECT_NEAR(ds.energy_j(), 0.1e-6 + 1e-6 * 4.0, 1e-18);
  d.set_level(0);
  EXPECT_EQ(d.switches(), 1);
  EXPECT_THROW(d.set_level(99), Error);
}

TEST(Corunner, SeededPatternsAndCsv) {
  for (const auto& p : CorunnerTrace::pattern_names()) {
    auto a = CorunnerTrace::make(p, 3), b = CorunnerTrace::make(p, 3);
    for (double t = 0; t < 100; t += 0.37) EXPECT_EQ(a.at(t), b.at(t));
  }
  auto web = CorunnerTrace::make("web-search", 1);
  double m = web.mean(0, 600);
  EXPECT_GT(m, 0.25);
  EXPECT_LT(m, 0.6);
  EXPECT_DOUBLE_EQ(CorunnerTrace::make("idle", 1).mean(0, 100), 0);
  std::string path = std::string(CLONE_BINARY_DIR) + "/corunner_test.csv";
  std::ofstream(path) << "t_s,intensity\n0,0.1\n2,0.9\n";
  auto c = CorunnerTrace::make(path, 0);
  EXPECT_DOUBLE_EQ(c.at(1), 0.1);
  EXPECT_DOUBLE_EQ(c.at(3), 0.9);
  // Periodic both ways (period 4 s here: the last sample holds as long as the one before):
  // before time 0 is the end of the period before, what a load monitor sees of the past.
  EXPECT_DOUBLE_EQ(c.at(-1), 0.9);
  EXPECT_DOUBLE_EQ(c.at(-3), 0.1);
  EXPECT_NEAR(c.mean(-2, 2), 0.5, 1e-12);
  auto bursty = CorunnerTrace::make("bursty", 5);
  for (double t = 0.05; t < 50; t += 0.5)
    EXPECT_EQ(bursty.at(-t), bursty.at(bursty.period_s() - t)) << t;
  std::ofstream(path) << "t_s,intensity\n0,0.1\n2,1.7\n";
  EXPECT_THROW(CorunnerTrace::make(path, 0), Error);
  EXPECT_THROW(CorunnerTrace::make("no-such-pattern", 0), Error);
}

// --- Power modes and the public Jetson measurements (data/jetson-public/) -----------------

namespace {
json nano_super_json() {
  std::ifstream in(profile_path("orin-nano-super-8gb"));
  return json::parse(in);
}
std::string public_dir() {
  return std::string(CLONE_SOURCE_DIR) + "/data/jetson-public";
}
}  // namespace

TEST(PowerMode, ModesReadBackAndBadModesNameTheField) {
  DeviceProfile p = DeviceProfile::from_json(nano_super_json(), "t");
  ASSERT_EQ(p.modes.size(), 4u);
  EXPECT_EQ(p.mode("15W").memory_mhz, 2133);
  EXPECT_EQ(p.mode("7W").cap("gpu")->cores, 512);
  EXPECT_EQ(DeviceProfile::from_json(p.to_json(), "rt").to_json(), p.to_json());
  try {
    (void)p.mode("30W");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no power mode \"30W\" (have: 7W 15W 25W MAXN_SUPER)"),
              std::string::npos)
        << e.what();
  }
  json j = nano_super_json();
  j["modes"][1]["memory_mhz"] = 2000;
  expect_error(j, {"modes[1].memory_mhz", "not one of memory.levels_mhz"});
  j = nano_super_json();
  j["modes"][0]["units"]["npu"] = {{"max_mhz", 100}};
  expect_error(j, {"modes[0].units.npu", "names no entry of units"});
  j = nano_super_json();
  j["modes"][2]["units"]["gpu"]["max_mhz"] = 5000;
  expect_error(j, {"modes[2].units.gpu.max_mhz", "out of range"});
  j = nano_super_json();
  j["modes"][3]["name"] = "7W";
  expect_error(j, {"modes[3].name", "appears twice"});
  j = nano_super_json();
  j["host"] = "gpu";
  expect_error(j, {"host", "must be a cpu unit"});
}

// Each knob a mode sets acts on its own term of the cost model, by the formula's ratios.
TEST(PowerMode, EachCapActsOnItsOwnTerm) {
  DeviceProfile p = DeviceProfile::from_json(nano_super_json(), "t");
  const ModelConfig m = model_preset("tinyllama-1.1b");
  auto time_in = [&](const DeviceProfile& q, const std::string& mode, const Work& w) {
    CostOptions o;
    o.mode = mode;
    CostModel cm(q, m, o);
    return cm.cost(w, cm.max_level(), 0).time_s;
  };
  const Work dec = CostModel(p, m).work(5, Phase::Decode, 100, 1);
  // Memory clock only: DRAM term alone, 3199 -> 2133 MHz.
  DeviceProfile mem = p;
  mem.fit.core_bytes_per_cycle = 0;
  mem.fit.overhead_kcycles = mem.fit.host_overhead_kcycles = mem.fit.layer_overhead_us = 0;
  mem.fit.dram_efficiency = 0.5;
  EXPECT_NEAR(time_in(mem, "15W", dec) / time_in(mem, "MAXN_SUPER", dec), 3199.0 / 2133.0, 1e-9);
  // Core bytes per cycle alone: the GPU clock and its enabled cores (7W: 408 MHz, half).
  DeviceProfile core = mem;
  core.fit.dram_efficiency = 1;
  core.memory.bus_bytes_per_cycle = 1e12;  // DRAM term negligible
  core.compute().work_per_cycle = 1e12;    // and so is compute
  core.fit.core_bytes_per_cycle = 80;
  EXPECT_NEAR(time_in(core, "7W", dec) / time_in(core, "MAXN_SUPER", dec), (1020.0 / 408.0) * 2,
              1e-6);
  // Host overhead alone: the CPU clock of the mode (25W caps it at 1344 MHz).
  DeviceProfile host = core;
  host.fit.core_bytes_per_cycle = 0;
  host.fit.host_overhead_kcycles = 30;
  EXPECT_NEAR(time_in(host, "25W", dec) / time_in(host, "MAXN_SUPER", dec), 1728.0 / 1344.0, 1e-6);
  // Without a mode the profile's top clocks apply: the same as MAXN_SUPER here.
  EXPECT_DOUBLE_EQ(time_in(p, "", dec), time_in(p, "MAXN_SUPER", dec));
  CostOptions o;
  o.mode = "10W";
  EXPECT_THROW(CostModel(p, m, o), Error);
}

TEST(PublicCalibration, LoadsEveryCellAndNamesBadInput) {
  const PublicData d = load_jetson_public(public_dir());
  EXPECT_EQ(d.models.size(), 8u);
  size_t grid = 0, canon = 0;
  for (const auto& c : d.cells) (c.decode_tok_s > 0 ? grid : canon) += 1;
  EXPECT_EQ(grid, 8u * 4 * 12);
  EXPECT_EQ(canon, 8u * 4);
  // Weights are scaled to the file's size: Q4_K_M files are larger than Q4_0 of the same
  // shapes (Qwen2.5-0.5B's most, 469 MB for 494 M weights: its large tied embedding is kept
  // at higher precision), LFM2's because its convolution weights are not in the shapes.
  for (const auto& m : d.models) {
    const double scale = m.file_mb * 1e6 / model_weight_bytes(m.config);
    EXPECT_GT(scale, 0.85) << m.name;
    EXPECT_LT(scale, 1.75) << m.name;
  }
  try {
    (void)load_jetson_public(std::string(CLONE_BINARY_DIR) + "/no-such-dir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("models.json: cannot open"), std::string::npos);
  }
}

// The fit sees only the fit models: changing what a held-out model measured leaves the loss
// it minimises unchanged, changing a fit model's measurement moves it.
TEST(PublicCalibration, HeldOutCellsNeverEnterTheFit) {
  const DeviceProfile p = DeviceProfile::load(profile_path("orin-nano-super-8gb"));
  PublicData d = load_jetson_public(public_dir());
  const PublicLoss base = public_fit_loss(evaluate_public(p, d));
  const auto& held = public_held_out_models();
  PublicData h = d;
  for (auto& c : h.cells)
    if (std::find(held.begin(), held.end(), c.model) != held.end())
      c.decode_tok_s *= 2, c.ttft_s *= 3, c.power_w *= 0.5;
  const PublicLoss lh = public_fit_loss(evaluate_public(p, h));
  EXPECT_EQ(lh.time, base.time);
  EXPECT_EQ(lh.power, base.power);
  PublicData f = d;
  for (auto& c : f.cells)
    if (c.model == "Qwen3-0.6B") c.decode_tok_s *= 2, c.power_w *= 0.5;
  const PublicLoss lf = public_fit_loss(evaluate_public(p, f));
  EXPECT_GT(lf.time, base.time + 0.01);
  EXPECT_GT(lf.power, base.power + 0.01);
}

// Validation of the shipped fit on the models it never saw (docs/device.md has the table):
// bounds a little above what it reaches, so a change that makes the device model predict
// real boards worse fails here.
TEST(PublicCalibration, ShippedFitPredictsTheHeldOutModels) {
  const DeviceProfile p = DeviceProfile::load(profile_path("orin-nano-super-8gb"));
  const PublicData d = load_jetson_public(public_dir());  // the points refer to its cells
  const auto pts = evaluate_public(p, d);
  auto median_err = [&](bool held_out, const std::string& mode, int metric) {
    std::vector<double> e;  // |relative error|
    for (const auto& x : pts) {
      if (x.held_out != held_out || x.cell->mode != mode) continue;
      const double meas = metric == 0   ? x.cell->decode_tok_s
                          : metric == 1 ? x.cell->ttft_s
                                        : x.cell->power_w;
      const double mod = metric == 0 ? x.decode_tok_s : metric == 1 ? x.ttft_s : x.power_w;
      if (meas > 0) e.push_back(std::abs(mod / meas - 1));
    }
    return median(e);
  };
  for (const char* mode : {"15W", "25W", "MAXN_SUPER"}) {
    EXPECT_LT(median_err(true, mode, 0), 0.26) << mode << " decode";
    EXPECT_LT(median_err(true, mode, 1), 0.15) << mode << " TTFT";
    EXPECT_LT(median_err(true, mode, 2), 0.12) << mode << " rail power";
  }
  // 7W (memory clock and enabled TPCs not published, assumed): worse, and said so.
  EXPECT_LT(median_err(true, "7W", 0), 0.45);
}

// The second check (docs/device.md): MLC's decode rates on the Orin Nano original and Super,
// never fitted. The modelled speed-up of the Super over the original is within 5% of the
// measured one for 4 of the 6 LLMs (median 2.9%); the two largest (Llama 3.1 8B, Gemma 2 9B)
// gain less on the real boards than any clock ratio says, and the model misses them.
TEST(PublicCalibration, MlcSpeedUpOfTheSuperOverTheOriginal) {
  const DeviceProfile p = DeviceProfile::load(profile_path("orin-nano-super-8gb"));
  const MlcCheck c = mlc_check(p, public_dir());
  ASSERT_EQ(c.rows.size(), 6u);
  EXPECT_EQ(c.skipped, std::vector<std::string>{"SmolLM2"});
  std::vector<double> err;
  for (const MlcRow& r : c.rows) {
    err.push_back(std::abs(r.modelled_ratio() / r.measured_ratio() - 1));
    // Every time term scales by at most its clock's ratio: GPU 1020 / 625, memory 3199 / 2133.
    EXPECT_GT(r.modelled_ratio(), 1.0) << r.model;
    EXPECT_LE(r.modelled_ratio(), 1020.0 / 625.0 + 1e-9) << r.model;
  }
  EXPECT_LT(median(err), 0.05);
  EXPECT_LT(*std::max_element(err.begin(), err.end()), 0.25);
}
