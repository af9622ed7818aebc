#include "clone/device/public_calibration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "clone/core/csv.h"
#include "clone/core/error.h"
#include "clone/core/stats.h"
#include "clone/device/cost_model.h"
#include "clone/engine/accounting.h"
#include "nelder_mead.h"

namespace cln::device {

namespace {

constexpr int64_t kMicroBatch = 512;  // llama.cpp's default n_ubatch: prefill passes
constexpr int kDecodeSamples = 16;    // decode positions sampled per cell (time is ~linear in it)

ModelConfig config_of(const std::string& name, const nlohmann::json& j, const std::string& where) {
  auto get = [&](const char* k) -> int64_t {
    if (!j.contains(k) || !j.at(k).is_number_integer() || j.at(k).get<int64_t>() <= 0)
      fail(where, ": models.", name, ".", k, ": expected a positive integer");
    return j.at(k).get<int64_t>();
  };
  ModelConfig c;
  c.name = name;
  c.n_embd = get("n_embd");
  c.n_vocab = get("n_vocab");
  c.head_dim_k = c.head_dim_v = get("head_dim");
  c.tied_output = j.value("tied", false);
  const int64_t n_layer = get("n_layer");
  LayerShape full{get("n_head"), get("n_head_kv"), get("n_ff")};
  c.layers.assign(static_cast<size_t>(n_layer), full);
  if (j.contains("attention_layers")) {  // hybrids: the other layers have no attention
    c.arch = "deci";
    for (auto& l : c.layers) l.n_head = l.n_head_kv = 0;
    for (const auto& a : j.at("attention_layers")) {
      if (!a.is_number_integer() || a.get<int64_t>() < 0 || a.get<int64_t>() >= n_layer)
        fail(where, ": models.", name, ".attention_layers: ", a.dump(), " is not a layer index");
      c.layers[a.get<size_t>()] = full;
    }
  }
  c.validate();
  return c;
}

struct CellWork {
  const PublicModel* model = nullptr;
  CostOptions opt;
  std::vector<Work> prefill;              // every layer of every micro-batch
  std::vector<std::vector<Work>> decode;  // sampled positions, every layer
};

CostOptions options_for(const PublicModel& m, const std::string& mode) {
  CostOptions o;
  o.kv_bytes_per_value = 2;  // llama.cpp's default F16 KV cache
  o.n_logits_prefill = 1;
  o.max_context = 2560;  // the source's -c 2560
  o.mode = mode;
  o.weight_bytes_scale = m.file_mb * 1e6 / model_weight_bytes(m.config);
  return o;
}

std::vector<CellWork> prepare(const DeviceProfile& p, const PublicData& d) {
  std::vector<CellWork> out;
  out.reserve(d.cells.size());
  for (const auto& c : d.cells) {
    CellWork w;
    w.model = &d.model(c.model);
    w.opt = options_for(*w.model, c.mode);
    CostModel cm(p, w.model->config, w.opt);
    const int n = cm.n_layer();
    for (int64_t pos = 0; pos < c.prompt; pos += kMicroBatch)
      for (int l = 0; l <= n; ++l)
        w.prefill.push_back(cm.work(l, Phase::Prefill, pos, std::min(kMicroBatch, c.prompt - pos)));
    for (int k = 0; k < kDecodeSamples; ++k) {
      // Output token k_i (1-based among the gen-1 decode passes), evenly spread.
      const int64_t ki =
          1 + static_cast<int64_t>((k + 0.5) * static_cast<double>(c.gen - 1) / kDecodeSamples);
      std::vector<Work> pass;
      for (int l = 0; l <= n; ++l) pass.push_back(cm.work(l, Phase::Decode, c.prompt + ki - 1, 1));
      w.decode.push_back(std::move(pass));
    }
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<PublicPoint> evaluate(const DeviceProfile& p, const PublicData& d,
                                  const std::vector<CellWork>& works) {
  std::vector<PublicPoint> pts;
  pts.reserve(d.cells.size());
  const auto& held = public_held_out_models();
  for (size_t i = 0; i < d.cells.size(); ++i) {
    const PublicCell& c = d.cells[i];
    const CellWork& w = works[i];
    CostModel cm(p, w.model->config, w.opt);
    const int top = cm.max_level();
    double ttft = 0, rail_pre = 0;
    for (const Work& x : w.prefill) {
      Cost k = cm.cost(x, top, 0);
      ttft += k.time_s, rail_pre += k.rail_j;
    }
    double tpot = 0, rail_dec = 0;
    for (const auto& pass : w.decode)
      for (const Work& x : pass) {
        Cost k = cm.cost(x, top, 0);
        tpot += k.time_s, rail_dec += k.rail_j;
      }
    tpot /= kDecodeSamples;
    rail_dec /= kDecodeSamples;
    const double decode_passes = static_cast<double>(c.gen - 1);
    PublicPoint pt;
    pt.cell = &c;
    pt.held_out = std::find(held.begin(), held.end(), c.model) != held.end();
    pt.decode_tok_s = 1 / tpot;
    pt.ttft_s = ttft;
    pt.power_w = (rail_pre + decode_passes * rail_dec) / (ttft + decode_passes * tpot);
    pts.push_back(pt);
  }
  return pts;
}

double sq_log(double model, double meas) {
  const double e = std::log(model / meas);
  return e * e;
}

// Mean squared log error on the fit models' cells: decode and TTFT (time) or power.
double time_loss(const std::vector<PublicPoint>& pts) {
  double dec = 0, ttft = 0;
  int nd = 0, nt = 0;
  for (const auto& p : pts) {
    if (p.held_out) continue;
    if (p.cell->decode_tok_s > 0) dec += sq_log(p.decode_tok_s, p.cell->decode_tok_s), ++nd;
    if (p.cell->ttft_s > 0) ttft += sq_log(p.ttft_s, p.cell->ttft_s), ++nt;
  }
  return (nd ? dec / nd : 0) + (nt ? ttft / nt : 0);
}
double power_loss(const std::vector<PublicPoint>& pts) {
  double s = 0;
  int n = 0;
  for (const auto& p : pts)
    if (!p.held_out && p.cell->power_w > 0) s += sq_log(p.power_w, p.cell->power_w), ++n;
  return n ? s / n : 0;
}

double sig(double x) {
  return 1 / (1 + std::exp(-x));
}
double logit(double y) {
  y = std::clamp(y, 1e-4, 1 - 1e-4);
  return std::log(y / (1 - y));
}
double safe_log(double x, double floor) {
  return std::log(std::max(x, floor));
}

template <size_t N, typename F>
std::array<double, N> minimise(std::array<double, N> x, F f, int& evals) {
  double prev = f(x);
  for (int restart = 0; restart < 12; ++restart) {
    x = nelder_mead<N>(x, f, 800, evals);
    const double now = f(x);
    if (prev - now < 1e-10) break;
    prev = now;
  }
  return x;
}

}  // namespace

const PublicModel& PublicData::model(const std::string& name) const {
  for (const auto& m : models)
    if (m.name == name) return m;
  fail("jetson-public: no model \"", name, "\" in models.json");
}

const std::vector<std::string>& public_held_out_models() {
  static const std::vector<std::string> held = {"SmolLM2-360M-Instruct", "LFM2.5-350M",
                                                "LFM2.5-1.2B-Instruct", "Gemma3-1B-IT"};
  return held;
}

namespace {

nlohmann::json load_models_json(const std::string& mpath) {
  std::ifstream in(mpath);
  if (!in) fail(mpath, ": cannot open (the public measurements are in data/jetson-public/)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    fail(mpath, ": malformed JSON: ", e.what());
  }
}

}  // namespace

PublicData load_jetson_public(const std::string& dir) {
  PublicData d;
  const std::string mpath = dir + "/models.json";
  const nlohmann::json j = load_models_json(mpath);
  if (!j.contains("models") || !j.at("models").is_object())
    fail(mpath, ": models: expected an object of name -> shape");
  for (auto it = j.at("models").begin(); it != j.at("models").end(); ++it) {
    PublicModel m;
    m.name = it.key();
    m.config = config_of(m.name, it.value(), mpath);
    d.models.push_back(std::move(m));
  }
  // Weight type and file size from the canonical table (every model is there).
  const CsvTable canon = CsvTable::load(dir + "/smolhub_nano_super_nonreasoning_v1_canonical.csv");
  const CsvTable grid = CsvTable::load(dir + "/smolhub_nano_super_nonreasoning_v1_toks_grid.csv");
  auto model_of = [&](const CsvTable& t, size_t r) -> PublicModel& {
    const std::string& name = t.at(r, "model");
    for (auto& m : d.models)
      if (m.name == name) return m;
    fail(t.where(r), ": model \"", name, "\" has no shape in models.json");
  };
  for (size_t r = 0; r < canon.size(); ++r) {
    PublicModel& m = model_of(canon, r);
    const std::string q = canon.at(r, "quant");
    if (q == "Q4_K_M")
      m.config.weight_type = DType::Q4_0;  // the nearest layout the accounting knows; scaled
    else if (q == "Q8_0")
      m.config.weight_type = DType::Q8_0;
    else
      fail(canon.where(r), ": quant \"", q, "\" (expected Q4_K_M or Q8_0)");
    m.file_mb = canon.number(r, "gguf_size_mb");
    PublicCell c;
    c.model = m.name;
    c.mode = canon.at(r, "power_mode");
    c.prompt = static_cast<int64_t>(canon.number(r, "prompt_tokens"));
    c.gen = static_cast<int64_t>(canon.number(r, "gen_tokens"));
    c.ttft_s = canon.number(r, "ttft_ms_p50") * 1e-3;
    c.power_w = canon.number(r, "power_w");
    c.where = canon.where(r);
    d.cells.push_back(c);  // decode rate: from the grid (the same cell is there)
  }
  for (const auto& m : d.models)
    if (m.file_mb <= 0) fail(mpath, ": model \"", m.name, "\" is in no row of the canonical table");
  for (size_t r = 0; r < grid.size(); ++r) {
    PublicCell c;
    c.model = model_of(grid, r).name;
    c.mode = grid.at(r, "power_mode");
    c.prompt = static_cast<int64_t>(grid.number(r, "prompt_tokens"));
    c.gen = static_cast<int64_t>(grid.number(r, "gen_tokens"));
    c.decode_tok_s = grid.number(r, "decode_tok_s");
    c.where = grid.where(r);
    if (c.prompt <= 0 || c.gen <= 1 || c.decode_tok_s <= 0)
      fail(c.where, ": prompt, generation and decode rate must be positive");
    d.cells.push_back(c);
  }
  return d;
}

std::vector<PublicPoint> evaluate_public(const DeviceProfile& p, const PublicData& d) {
  return evaluate(p, d, prepare(p, d));
}

PublicFit fit_public(const DeviceProfile& p, const PublicData& d) {
  PublicFit r;
  const auto works = prepare(p, d);
  DeviceProfile w = p;
  // Time: compute and DRAM efficiency, core bytes per cycle, and the per-layer costs.
  {
    std::array<double, 6> x{logit(p.fit.compute_efficiency),
                            logit(p.fit.dram_efficiency),
                            safe_log(p.fit.core_bytes_per_cycle, 1),
                            safe_log(p.fit.overhead_kcycles, 0.1),
                            safe_log(p.fit.host_overhead_kcycles, 0.1),
                            safe_log(p.fit.layer_overhead_us, 0.1)};
    auto apply = [&](const std::array<double, 6>& v) {
      w.fit.compute_efficiency = sig(v[0]);
      w.fit.dram_efficiency = sig(v[1]);
      w.fit.core_bytes_per_cycle = std::exp(v[2]);
      w.fit.overhead_kcycles = std::exp(v[3]);
      w.fit.host_overhead_kcycles = std::exp(v[4]);
      w.fit.layer_overhead_us = std::exp(v[5]);
    };
    x = minimise<6>(
        x,
        [&](const std::array<double, 6>& v) {
          apply(v);
          return time_loss(evaluate(w, d, works));
        },
        r.evaluations);
    apply(x);
  }
  // Rail power: the run_on unit's coefficients and the host CPU's activity.
  {
    UnitPower& pw = w.compute().power;
    std::array<double, 5> x{safe_log(pw.static_w_per_v, 0.01),
                            safe_log(pw.dynamic_w_per_ghz_v2, 0.01), logit(pw.idle_activity),
                            safe_log(pw.pj_per_byte, 0.1),
                            logit(std::max(w.fit.host_activity, 0.05))};
    auto apply = [&](const std::array<double, 5>& v) {
      pw.static_w_per_v = std::exp(v[0]);
      pw.dynamic_w_per_ghz_v2 = std::exp(v[1]);
      pw.idle_activity = sig(v[2]);
      pw.pj_per_byte = std::exp(v[3]);
      w.fit.host_activity = w.host_unit() ? sig(v[4]) : 0;
    };
    x = minimise<5>(
        x,
        [&](const std::array<double, 5>& v) {
          apply(v);
          return power_loss(evaluate(w, d, works));
        },
        r.evaluations);
    apply(x);
    r.power = pw;
  }
  r.fit = w.fit;
  r.fitted = {"compute_efficiency",    "dram_efficiency",
              "core_bytes_per_cycle",  "overhead_kcycles",
              "host_overhead_kcycles", "layer_overhead_us",
              "power.static_w_per_v",  "power.dynamic_w_per_ghz_v2",
              "power.idle_activity",   "power.pj_per_byte",
              "host_activity"};
  r.points = evaluate(w, d, works);
  r.time_loss = time_loss(r.points);
  r.power_loss = power_loss(r.points);
  return r;
}

PublicLoss public_fit_loss(const std::vector<PublicPoint>& pts) {
  return {time_loss(pts), power_loss(pts)};
}

Table public_error_table(const std::vector<PublicPoint>& pts) {
  Table t({"split", "mode", "metric", "cells", "median |err| %", "max |err| %", "mean err %"});
  t.set_precision(1);
  std::vector<std::string> modes;
  for (const auto& p : pts)
    if (std::find(modes.begin(), modes.end(), p.cell->mode) == modes.end())
      modes.push_back(p.cell->mode);
  for (bool held : {false, true})
    for (const char* metric : {"decode tok/s", "TTFT", "rail power"})
      for (const auto& m : modes) {
        std::vector<double> abs_err, err;
        for (const auto& p : pts) {
          if (p.held_out != held || p.cell->mode != m) continue;
          const std::string k = metric;
          double meas = k == "TTFT"         ? p.cell->ttft_s
                        : k == "rail power" ? p.cell->power_w
                                            : p.cell->decode_tok_s;
          double mod = k == "TTFT" ? p.ttft_s : k == "rail power" ? p.power_w : p.decode_tok_s;
          if (meas <= 0) continue;
          err.push_back(100 * (mod / meas - 1));
          abs_err.push_back(std::abs(err.back()));
        }
        if (err.empty()) continue;
        double mean = 0;
        for (double e : err) mean += e / static_cast<double>(err.size());
        t.add({std::string(held ? "held out" : "fit"), m, std::string(metric),
               static_cast<long long>(err.size()), median(abs_err),
               *std::max_element(abs_err.begin(), abs_err.end()), mean});
      }
  return t;
}

Table public_cells_table(const std::vector<PublicPoint>& pts) {
  Table t({"split", "model", "mode", "prompt", "gen", "decode tok/s", "model tok/s", "TTFT ms",
           "model TTFT ms", "rail W", "model rail W", "source"});
  t.set_precision(2);
  for (const auto& p : pts) {
    const PublicCell& c = *p.cell;
    t.add({std::string(p.held_out ? "held out" : "fit"), c.model, c.mode,
           static_cast<long long>(c.prompt), static_cast<long long>(c.gen), c.decode_tok_s,
           c.decode_tok_s > 0 ? p.decode_tok_s : 0.0, c.ttft_s * 1e3,
           c.ttft_s > 0 ? p.ttft_s * 1e3 : 0.0, c.power_w, c.power_w > 0 ? p.power_w : 0.0,
           c.where});
  }
  return t;
}

namespace {

// Decode tokens/s at the top clock, idle, over kDecodeSamples positions of a generation.
double decode_rate(const DeviceProfile& p, const ModelConfig& m, const CostOptions& o,
                   int64_t prompt, int64_t gen) {
  const CostModel cm(p, m, o);
  double t = 0;
  for (int k = 0; k < kDecodeSamples; ++k) {
    const int64_t ki =
        1 + static_cast<int64_t>((k + 0.5) * static_cast<double>(gen - 1) / kDecodeSamples);
    for (int l = 0; l <= cm.n_layer(); ++l)
      t += cm.cost(cm.work(l, Phase::Decode, prompt + ki - 1, 1), cm.max_level(), 0).time_s;
  }
  return kDecodeSamples / t;
}

}  // namespace

MlcCheck mlc_check(const DeviceProfile& super_profile, const std::string& dir) {
  const std::string mpath = dir + "/models.json";
  const nlohmann::json j = load_models_json(mpath);
  if (!j.contains("mlc_models") || !j.at("mlc_models").is_object())
    fail(mpath, ": mlc_models: expected an object of model shapes");
  // The original module: the Super's silicon at its pre-Super caps (a 625 MHz GPU level
  // added: the Super's grid steps from 612 to 714).
  DeviceProfile orig = super_profile;
  auto& levels = orig.compute().levels;
  if (std::none_of(levels.begin(), levels.end(),
                   [](const OperatingPoint& l) { return l.mhz == 625; })) {
    const auto up = std::find_if(levels.begin(), levels.end(),
                                 [](const OperatingPoint& l) { return l.mhz > 625; });
    if (up == levels.end()) fail(super_profile.name, ": no GPU level above 625 MHz to place it");
    levels.insert(up, OperatingPoint{625, up->volt});
  }
  PowerMode pre;
  pre.name = "original-15W";
  pre.memory_mhz = 2133;
  pre.units.push_back({orig.compute().name, UnitCap{625, orig.compute().cores}});
  if (const ComputeUnit* h = orig.host_unit())
    pre.units.push_back({h->name, UnitCap{1510.4, h->cores}});
  orig.modes = {pre};
  const std::string super_mode = "MAXN_SUPER";
  (void)super_profile.mode(super_mode);  // an error naming the profile's modes if it has none

  const std::string cpath = dir + "/nvidia_jetson_ai_lab_mlc.csv";
  const CsvTable t = CsvTable::load(cpath);
  MlcCheck out;
  std::map<std::string, MlcRow> by_model;
  for (size_t r = 0; r < t.size(); ++r) {
    // The Super announcement's table (original and Super on the same models), LLMs only.
    if (t.at(r, "source_id") != "nvidia_jetson_ai_lab_super" || t.at(r, "category") != "LLM/SLM")
      continue;
    const std::string& label = t.at(r, "config_label");
    const std::string& name = t.at(r, "model");
    if (!j.at("mlc_models").contains(name)) {
      if (std::find(out.skipped.begin(), out.skipped.end(), name) == out.skipped.end())
        out.skipped.push_back(name);
      continue;
    }
    MlcRow& row = by_model[name];
    row.model = name;
    if (label == "Jetson Orin Nano (original)")
      row.original_tok_s = t.number(r, "value");
    else if (label == "Jetson Orin Nano Super")
      row.super_tok_s = t.number(r, "value");
    else
      fail(t.where(r), ": config_label \"", label, "\" (expected the original or the Super)");
    row.where += (row.where.empty() ? "" : ", ") + t.where(r);
  }
  for (auto& [name, row] : by_model) {
    if (row.original_tok_s <= 0 || row.super_tok_s <= 0)
      fail(cpath, ": model \"", name, "\" needs a rate on both the original and the Super");
    ModelConfig m = config_of(name, j.at("mlc_models").at(name), mpath);
    m.weight_type = DType::Q4_0;  // q4f16_1: 4 bits and an f16 scale per 32, as Q4_0
    CostOptions o;
    o.kv_bytes_per_value = 2;
    o.max_context = 1024;  // the benchmark's ~16 + 128 tokens, with room; all fit in memory
    o.mode = super_mode;
    row.modelled_super = decode_rate(super_profile, m, o, 16, 128);
    o.mode = pre.name;
    row.modelled_original = decode_rate(orig, m, o, 16, 128);
    out.rows.push_back(row);
  }
  return out;
}

Table mlc_table(const MlcCheck& c) {
  Table t({"model", "original tok/s", "Super tok/s", "measured ratio", "modelled ratio",
           "ratio error %", "modelled original tok/s", "modelled Super tok/s"});
  for (const MlcRow& r : c.rows)
    t.add({r.model, r.original_tok_s, r.super_tok_s, r.measured_ratio(), r.modelled_ratio(),
           100 * (r.modelled_ratio() / r.measured_ratio() - 1), r.modelled_original,
           r.modelled_super});
  return t;
}

}  // namespace cln::device
