// clone bench: prefill and decode speed of models, each as a fraction of this machine's
// limit, which it measures first: read bandwidth for decode (every weight byte is read
// once per token) and F32 FMA throughput for prefill (2 flops per weight per token).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "clone/core/error.h"
#include "clone/core/rng.h"
#include "clone/core/stats.h"
#include "clone/core/table.h"
#include "clone/engine/accounting.h"
#include "clone/engine/context.h"
#include "clone/kernels/machine.h"
#include "common.h"
#include "subcommand.h"

namespace {

struct Opts {
  std::vector<std::string> models;
  int threads = 0;
  int64_t n_prompt = 512;
  int64_t n_gen = 64;
  int reps = 3;
  int decode_reps = 9;
  std::string format = "md";
  std::string out;
  bool overhead = true;
};

struct Speed {
  double prefill_tps = 0, decode_tps = 0;
  double read_gbs = 0;  // median read bandwidth measured around the decode runs
  double decode_pct_bw = 0, decode_pct_bw_min = 0, decode_pct_bw_max = 0;  // per run
  double rss_mb = 0;    // resident memory with the context alive (weights paged in + KV + scratch)
  double state_mb = 0;  // KV cache + scratch buffers
};

// The read bandwidth of this moment: streams a buffer far larger than the caches with
// the same threads. Other tenants of a shared machine swing it by tens of percent, so
// decode is compared with a reading taken beside it rather than once at start-up.
double read_gbs_now(cln::kernels::ThreadPool& pool, const std::vector<uint8_t>& buf) {
  const double t0 = cln::cli::now_s();
  volatile float sink = cln::kernels::read_stream(buf.data(), buf.size(), &pool);
  (void)sink;
  return static_cast<double>(buf.size()) / (cln::cli::now_s() - t0) / 1e9;
}

// Prefill: best of `reps` passes of n_prompt tokens from an empty cache. Decode:
// `decode_reps` runs of n_gen tokens after that prompt, each bracketed by two bandwidth
// probes; the reported decode speed and its share of the bandwidth are the medians over
// the runs (each run against the mean of its own two probes), so one lucky or unlucky
// moment of a shared machine moves neither.
Speed measure(const std::shared_ptr<const cln::Model>& m, int threads, const Opts& o,
              const std::vector<uint8_t>* probe_buf = nullptr, double bytes_per_token = 0) {
  using namespace cln;
  Context ctx(m, {std::max<int64_t>(o.n_prompt + o.n_gen + 1, 64), threads, o.n_prompt});
  Rng rng(7);
  const auto tok = [&] {  // random ids past the special tokens
    return static_cast<int32_t>(3 + rng.below(static_cast<uint64_t>(m->config().n_vocab - 3)));
  };
  // At least 8 tokens: the warm-up pass below uses the first 8.
  std::vector<int32_t> prompt(static_cast<size_t>(std::max<int64_t>(o.n_prompt, 8)));
  for (auto& t : prompt) t = tok();
  Speed best;
  ctx.eval(std::span<const int32_t>(prompt.data(), 8));  // warm-up: page in the weights
  for (int r = 0; r < o.reps; ++r) {
    ctx.reset();
    const double t0 = cli::now_s();
    if (o.n_prompt > 0)
      ctx.eval(std::span<const int32_t>(prompt.data(), static_cast<size_t>(o.n_prompt)));
    const double t1 = cli::now_s();
    if (o.n_prompt > 0)
      best.prefill_tps = std::max(best.prefill_tps, static_cast<double>(o.n_prompt) / (t1 - t0));
  }
  if (o.n_prompt == 0) ctx.eval(std::span<const int32_t>(prompt.data(), 1));
  const int64_t kept = ctx.n_past();
  std::vector<double> tps, bw, pct;
  for (int r = 0; r < o.decode_reps; ++r) {
    ctx.truncate(kept);
    const double bw_before = probe_buf ? read_gbs_now(ctx.pool(), *probe_buf) : 0.0;
    const double t0 = cli::now_s();
    for (int64_t i = 0; i < o.n_gen; ++i) {
      const int32_t one[1] = {tok()};
      ctx.eval(one);
    }
    const double t1 = cli::now_s();
    tps.push_back(static_cast<double>(o.n_gen) / (t1 - t0));
    if (probe_buf) {
      bw.push_back(0.5 * (bw_before + read_gbs_now(ctx.pool(), *probe_buf)));
      pct.push_back(100.0 * tps.back() * bytes_per_token / 1e9 / bw.back());
    }
  }
  best.decode_tps = cln::median(tps);
  best.read_gbs = cln::median(bw);
  best.decode_pct_bw = cln::median(pct);
  if (!pct.empty()) {
    best.decode_pct_bw_min = *std::min_element(pct.begin(), pct.end());
    best.decode_pct_bw_max = *std::max_element(pct.begin(), pct.end());
  }
  // The bandwidth probe's buffer is resident too; it is not the model's.
  best.rss_mb = static_cast<double>(cli::rss_bytes() - (probe_buf ? probe_buf->size() : 0)) / 1e6;
  best.state_mb = static_cast<double>(ctx.state_bytes()) / 1e6;
  return best;
}

int run(const Opts& o) {
  using namespace cln;
  kernels::ThreadPool pool(o.threads);
  std::fprintf(stderr, "[bench] measuring this machine's limits with %d threads...\n", pool.size());
  const kernels::MachineLimits lim = kernels::measure_machine(&pool);
  std::fprintf(stderr, "[bench] read bandwidth %.1f GB/s, F32 FMA %.1f GFLOP/s, SIMD %s\n",
               lim.read_bandwidth_gbs, lim.fma_gflops, lim.simd_target);
  // 512 MiB: far beyond any cache, so every read comes from DRAM.
  const std::vector<uint8_t> probe_buf(size_t{512} << 20, 1);
  Table t({"model", "type", "params_M", "weights_MB", "threads", "prefill_tok_s", "prefill_gflops",
           "prefill_pct_fma", "decode_tok_s", "decode_gbs", "read_gbs_beside", "decode_pct_bw",
           "pct_bw_min", "pct_bw_max", "rss_MB", "kv_scratch_MB", "overhead_pct"});
  t.set_precision(1);
  for (const auto& path : o.models) {
    auto m = Model::load(path);
    const ModelConfig& c = m->config();
    std::fprintf(stderr, "[bench] %s ...\n", path.c_str());
    // Bytes streamed per decoded token (every layer, the head, one embedding row) and the
    // FLOPs of the prompt pass (matmuls and attention; logits for the last token only), both
    // from the shared accounting.
    const double bytes = decode_weight_bytes(c);
    const PassCount pass = forward_pass(c, 0, std::max<int64_t>(o.n_prompt, 1), 1);
    const double flops = (pass.matmul_flops + pass.attn_flops) /
                         static_cast<double>(std::max<int64_t>(o.n_prompt, 1));
    const Speed s = measure(m, pool.size(), o, &probe_buf, bytes);
    // Parallel overhead: with n threads, time beyond a perfect split of the 1-thread time.
    double overhead = -1;
    if (o.overhead && pool.size() > 1) {
      const Speed one = measure(m, 1, o);
      overhead = 100.0 * (1.0 - s.decode_tps / (one.decode_tps * pool.size()));
    }
    t.add({path.substr(path.find_last_of('/') + 1), std::string(dtype_name(c.weight_type)),
           static_cast<double>(c.n_params()) / 1e6, static_cast<double>(m->weight_bytes()) / 1e6,
           static_cast<long long>(pool.size()), s.prefill_tps, s.prefill_tps * flops / 1e9,
           100.0 * s.prefill_tps * flops / 1e9 / lim.fma_gflops, s.decode_tps,
           s.decode_tps * bytes / 1e9, s.read_gbs, s.decode_pct_bw, s.decode_pct_bw_min,
           s.decode_pct_bw_max, s.rss_mb, s.state_mb, overhead});
  }
  std::printf("machine: read %.1f GB/s, FMA %.1f GFLOP/s, %d threads, %s\n\n%s",
              lim.read_bandwidth_gbs, lim.fma_gflops, lim.threads, lim.simd_target,
              t.format(o.format).c_str());
  if (!o.out.empty()) t.write(o.out);
  return 0;
}

const cln::cli::Register reg{
    "bench", "Prefill and decode speed as a fraction of this machine's limits", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("-m,--model", o->models, "model GGUF files (repeatable)")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("-t,--threads", o->threads, "threads (0 = all cores)")->capture_default_str();
      app.add_option("-p,--n-prompt", o->n_prompt, "prompt tokens for the prefill test")
          ->capture_default_str()
          ->check(CLI::Range(0, 1 << 16));
      app.add_option("-n,--n-gen", o->n_gen, "tokens for the decode test")
          ->capture_default_str()
          ->check(CLI::Range(1, 1 << 16));
      app.add_option("-r,--reps", o->reps, "prefill repetitions (best is reported)")
          ->capture_default_str()
          ->check(CLI::Range(1, 100));
      app.add_option("--decode-reps", o->decode_reps,
                     "decode runs, each between two bandwidth probes (medians are reported)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000));
      app.add_option("-o,--output", o->format, "md, csv or json")->capture_default_str();
      app.add_option("--out", o->out, "also write the table to this file (.md/.csv/.json)");
      app.add_flag("!--no-overhead", o->overhead,
                   "skip the 1-thread run that measures parallel overhead");
      return [o] { return run(*o); };
    }};

}  // namespace
