#include "clone/engine/speed.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <span>

#include "clone/core/rng.h"
#include "clone/core/stats.h"
#include "clone/engine/accounting.h"
#include "clone/engine/context.h"

namespace cln {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Resident set size of this process now (/proc/self/status VmRSS); 0 where unknown.
size_t rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

// The read bandwidth of this moment, with the same threads: the better of a plain and a
// software-prefetched pass (the kernels prefetch on some CPUs; the limit is the faster way).
double read_gbs_now(kernels::ThreadPool& pool, const std::vector<uint8_t>& buf) {
  double best = 0;
  for (bool prefetch : {false, true}) {
    const double t0 = now_s();
    volatile float sink = kernels::read_stream(buf.data(), buf.size(), &pool, prefetch);
    (void)sink;
    best = std::max(best, static_cast<double>(buf.size()) / (now_s() - t0) / 1e9);
  }
  return best;
}

// The arithmetic peak of this moment: FMA, or integer dot products for quantized weights.
// *on names what was measured: the SIMD target dispatched to and the instruction.
double peak_now(kernels::ThreadPool& pool, bool int8, std::string* on) {
  const char* kind = "fma";
  const double r = int8 ? kernels::int8_gops_now(&pool, &kind) : kernels::fma_gflops_now(&pool);
  *on = std::string(kernels::simd_target_name()) + " " + kind;
  return r;
}

struct Runs {
  double prefill_tps = 0, decode_tps = 0, read_gbs = 0;
  double peak_beside = 0, prefill_pct_peak = 0;  // see SpeedResult
  std::string peak_on;
  double pct = 0, pct_min = 0, pct_max = 0;
  double rss_mb = 0, state_mb = 0;
};

// probe: the bandwidth probe's buffer (null: no probes at all, neither bandwidth nor peak).
// flops_per_token: the prefill pass's, for its share of the peak; int8: which peak.
Runs run(const std::shared_ptr<const Model>& m, int threads, const SpeedOptions& o,
         const std::vector<uint8_t>* probe, double bytes_per_token, double flops_per_token,
         bool int8) {
  Context ctx(m, {std::max<int64_t>(o.n_prompt + o.n_gen + 1, 64), threads,
                  std::max<int64_t>(o.n_prompt, 1)});
  Rng rng(7);
  const auto tok = [&] {  // random ids past the special tokens
    return static_cast<int32_t>(3 + rng.below(static_cast<uint64_t>(m->config().n_vocab - 3)));
  };
  // At least 8 tokens: the warm-up pass below uses the first 8.
  std::vector<int32_t> prompt(static_cast<size_t>(std::max<int64_t>(o.n_prompt, 8)));
  for (auto& t : prompt) t = tok();
  Runs r;
  ctx.eval(std::span<const int32_t>(prompt.data(), 8));  // warm-up: page in the weights
  std::vector<double> peaks, shares;
  for (int k = 0; k < o.reps && o.n_prompt > 0; ++k) {
    ctx.reset();
    const double before = probe ? peak_now(ctx.pool(), int8, &r.peak_on) : 0.0;
    const double t0 = now_s();
    ctx.eval(std::span<const int32_t>(prompt.data(), static_cast<size_t>(o.n_prompt)));
    const double tps = static_cast<double>(o.n_prompt) / (now_s() - t0);
    r.prefill_tps = std::max(r.prefill_tps, tps);
    if (probe) {
      peaks.push_back(before);
      peaks.push_back(peak_now(ctx.pool(), int8, &r.peak_on));
      const double beside = 0.5 * (peaks[peaks.size() - 2] + peaks.back());
      shares.push_back(100.0 * tps * flops_per_token / 1e9 / beside);
    }
  }
  if (!shares.empty()) {
    r.peak_beside = median(peaks);
    r.prefill_pct_peak = median(shares);
  }
  if (o.n_prompt == 0) {
    ctx.reset();
    ctx.eval(std::span<const int32_t>(prompt.data(), 1));
  }
  const int64_t kept = ctx.n_past();
  std::vector<double> tps, bw, pct;
  for (int k = 0; k < o.decode_reps; ++k) {
    ctx.truncate(kept);
    const double before = probe ? read_gbs_now(ctx.pool(), *probe) : 0.0;
    const double t0 = now_s();
    for (int64_t i = 0; i < o.n_gen; ++i) {
      const int32_t one[1] = {tok()};
      ctx.eval(one);
    }
    tps.push_back(static_cast<double>(o.n_gen) / (now_s() - t0));
    if (probe) {
      bw.push_back(0.5 * (before + read_gbs_now(ctx.pool(), *probe)));
      pct.push_back(100.0 * tps.back() * bytes_per_token / 1e9 / bw.back());
    }
  }
  r.decode_tps = median(tps);
  if (!pct.empty()) {
    r.read_gbs = median(bw);
    r.pct = median(pct);
    r.pct_min = *std::min_element(pct.begin(), pct.end());
    r.pct_max = *std::max_element(pct.begin(), pct.end());
  }
  // The bandwidth probe's buffer is resident too; it is not the model's.
  r.rss_mb = static_cast<double>(rss_bytes() - (probe ? probe->size() : 0)) / 1e6;
  r.state_mb = static_cast<double>(ctx.state_bytes()) / 1e6;
  return r;
}

}  // namespace

SpeedResult measure_speed(const std::shared_ptr<const Model>& model, const std::string& name,
                          const SpeedOptions& o, const kernels::MachineLimits& limits) {
  const ModelConfig& c = model->config();
  // Bytes streamed per decoded token (every layer, the head, one embedding row), and the
  // matmul and attention FLOPs of the prompt pass per token (logits for the last token only).
  const double bytes = decode_weight_bytes(c);
  const int64_t n = std::max<int64_t>(o.n_prompt, 1);
  const PassCount pass = forward_pass(c, 0, n, 1);
  const double flops = (pass.matmul_flops + pass.attn_flops) / static_cast<double>(n);
  // 512 MiB: far beyond any cache, so every probe read comes from DRAM.
  const std::vector<uint8_t> probe(size_t{512} << 20, 1);
  const int threads = limits.threads > 0 ? limits.threads : o.threads;
  // Quantized: the weight matrices run integer dot products (attention stays F32, a few %
  // of a 512-token prompt's FLOPs, counted in the same rate).
  const bool quantized = c.weight_type == DType::Q8_0 || c.weight_type == DType::Q4_0;
  const Runs r = run(model, threads, o, &probe, bytes, flops, quantized);
  SpeedResult s;
  s.model = name;
  s.type = std::string(dtype_name(c.weight_type));
  s.params_m = static_cast<double>(c.n_params()) / 1e6;
  s.weights_mb = model_weight_bytes(c) / 1e6;
  s.threads = threads;
  s.prefill_tps = r.prefill_tps;
  s.prefill_gflops = r.prefill_tps * flops / 1e9;
  s.prefill_pct_fma = limits.fma_gflops > 0 ? 100.0 * s.prefill_gflops / limits.fma_gflops : 0;
  s.prefill_peak = quantized ? "int8" : "fma";
  s.peak_beside = r.peak_beside;
  s.peak_on = r.peak_on;
  s.prefill_pct_peak = r.prefill_pct_peak;
  s.decode_tps = r.decode_tps;
  s.decode_gbs = r.decode_tps * bytes / 1e9;
  s.read_gbs = r.read_gbs;
  s.decode_pct_bw = r.pct, s.pct_bw_min = r.pct_min, s.pct_bw_max = r.pct_max;
  s.rss_mb = r.rss_mb;
  s.state_mb = r.state_mb;
  if (o.overhead && threads > 1) {
    SpeedOptions one = o;
    one.reps = 1;
    const Runs r1 = run(model, 1, one, nullptr, bytes, flops, quantized);
    s.overhead_pct = 100.0 * (1.0 - r.decode_tps / (r1.decode_tps * threads));
  }
  return s;
}

Table speed_table(const std::vector<SpeedResult>& rows) {
  Table t({"model",        "type",          "params_M",        "weights_MB",
           "threads",      "prefill_tok_s", "prefill_gflops",  "prefill_pct_fma",
           "prefill_peak", "peak_beside",   "peak_on",         "prefill_pct_peak",
           "decode_tok_s", "decode_gbs",    "read_gbs_beside", "decode_pct_bw",
           "pct_bw_min",   "pct_bw_max",    "rss_MB",          "kv_scratch_MB",
           "overhead_pct"});
  t.set_precision(1);
  for (const SpeedResult& s : rows)
    t.add({s.model,
           s.type,
           s.params_m,
           s.weights_mb,
           static_cast<long long>(s.threads),
           s.prefill_tps,
           s.prefill_gflops,
           s.prefill_pct_fma,
           s.prefill_peak,
           s.peak_beside,
           s.peak_on,
           s.prefill_pct_peak,
           s.decode_tps,
           s.decode_gbs,
           s.read_gbs,
           s.decode_pct_bw,
           s.pct_bw_min,
           s.pct_bw_max,
           s.rss_mb,
           s.state_mb,
           s.overhead_pct});
  return t;
}

}  // namespace cln
