// The device model against public measurements of real boards (data/jetson-public/,
// README there): llama.cpp CUDA on a Jetson Orin Nano Super, 8 models x 4 nvpmodel power
// modes x 12 prompt/generation cells (decode rate), and TTFT and the CPU+GPU rail's power
// at prompt 2048 / generation 256. fit_public() fits the profile's time factors (compute
// and DRAM efficiency, core bytes per cycle, the fixed and clock-dependent per-layer costs)
// and its rail power factors to the cells of the fit models only; the report gives the
// error on those and on the held-out models, per power mode and metric.
#pragma once

#include <string>
#include <vector>

#include "clone/core/table.h"
#include "clone/device/profile.h"
#include "clone/engine/model_config.h"

namespace cln::device {

struct PublicModel {
  std::string name;    // as in the CSVs ("Llama-3.2-1B-Instruct")
  ModelConfig config;  // shapes from its config.json (models.json); weight type Q4_0/Q8_0
  double file_mb = 0;  // the GGUF's size: weights are scaled to it (Q4_K_M is not Q4_0)
};

struct PublicCell {
  std::string model, mode;  // mode: the CSV's power_mode, a mode of the profile
  int64_t prompt = 0, gen = 0;
  double decode_tok_s = 0;  // measured
  double ttft_s = 0;        // measured; 0 where not published (the grid)
  double power_w = 0;       // CPU+GPU rail, mean over the run; 0 where not published
  std::string where;        // file:line
};

struct PublicData {
  std::vector<PublicModel> models;
  std::vector<PublicCell> cells;  // the grid (decode) and the canonical cells (TTFT, power)
  const PublicModel& model(const std::string& name) const;
};

// Reads models.json, smolhub_nano_super_nonreasoning_v1_toks_grid.csv (decode rate, every
// cell) and ..._v1_canonical.csv (TTFT and power at 2048/256) from dir. Errors name the
// file and line.
PublicData load_jetson_public(const std::string& dir);

// The split chosen before fitting: these models' cells are held out of every fit (one of
// each size class and family the fit models do not cover: SmolLM2-360M in Q8_0, both LFM2
// hybrids, Gemma 3 with its 262k vocabulary).
const std::vector<std::string>& public_held_out_models();

struct PublicPoint {
  const PublicCell* cell = nullptr;  // into the PublicData evaluated: keep it alive
  bool held_out = false;
  double decode_tok_s = 0, ttft_s = 0, power_w = 0;  // modelled
};

// Models every cell on profile p (the points point into d.cells), in the cell's power mode at that
// mode's top clocks (jetson_clocks pins them), prefill in llama.cpp's 512-token micro-batches.
std::vector<PublicPoint> evaluate_public(const DeviceProfile& p, const PublicData& d);

struct PublicFit {
  Fit fit;
  UnitPower power;  // of the run_on unit
  std::vector<std::string> fitted;
  std::vector<PublicPoint> points;
  int evaluations = 0;
  double time_loss = 0, power_loss = 0;  // mean squared log error on the fit models
};
// What the fit minimises, on the fit models' cells only (held-out cells never enter):
// mean squared log error of decode rate plus that of TTFT (time), and of rail power.
struct PublicLoss {
  double time = 0, power = 0;
};
PublicLoss public_fit_loss(const std::vector<PublicPoint>& pts);

// Time factors first (decode on every grid cell, TTFT on the canonical ones), then the
// rail power factors (static and dynamic coefficients, idle activity, pJ per byte, host
// activity) on the canonical cells. Nelder-Mead in log / logit space with restarts.
PublicFit fit_public(const DeviceProfile& p, const PublicData& d);

// Per split x power mode x metric: cells, median and largest |relative error|, mean signed.
Table public_error_table(const std::vector<PublicPoint>& pts);
// Every cell: measured and modelled side by side.
Table public_cells_table(const std::vector<PublicPoint>& pts);

// A second check, on other measurements (nvidia_jetson_ai_lab_mlc.csv): MLC's INT4 decode
// rate on the Orin Nano original against the Super, for the LLMs models.json has shapes for.
// The original is the same module at its pre-Super clocks (GPU 625 MHz, memory 2133 MHz, CPU
// 1510 MHz, all cores: nvpmodel.csv), the Super runs MAXN_SUPER. Another runtime than the
// fit's, so absolute rates need not match; the ratio Super / original is what the model's
// clock scaling predicts, and none of these cells enters any fit.
struct MlcRow {
  std::string model;
  double original_tok_s = 0, super_tok_s = 0;        // measured
  double modelled_original = 0, modelled_super = 0;  // tokens/s, decode at prompt 16, gen 128
  std::string where;
  double measured_ratio() const { return super_tok_s / original_tok_s; }
  double modelled_ratio() const { return modelled_super / modelled_original; }
};
struct MlcCheck {
  std::vector<MlcRow> rows;
  std::vector<std::string> skipped;  // LLM rows without a shape (SmolLM2: size not stated)
};
MlcCheck mlc_check(const DeviceProfile& super_profile, const std::string& dir);
Table mlc_table(const MlcCheck& c);

}  // namespace cln::device
