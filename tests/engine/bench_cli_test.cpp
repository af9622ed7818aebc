// `clone bench` end to end on a tiny model: the decode share of the bandwidth is the median
// of runs that each lie between their own min and max, and the FLOP and byte rates are
// the measured token rates times counts made here from the file's tensors (prefill: logits
// for the last prompt token only).
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "clone/gguf/gguf.h"

namespace {
namespace fs = std::filesystem;

TEST(BenchCli, ReportsMediansAgainstTheBandwidthMeasuredBeside) {
  const fs::path dir =
      fs::temp_directory_path() / ("clone_bench_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string model = (dir / "tiny.gguf").string(), out = (dir / "bench.json").string();
  std::string cmd = std::string(CLONE_CLI) + " init-model -o " + model +
                    " --layers 2 --embd 64 --heads 4 --kv-heads 2 --ff 128 --vocab 300 --ctx 128"
                    " --seed 3 > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  cmd = std::string(CLONE_CLI) + " bench -m " + model +
        " -t 1 -p 16 -n 8 -r 1 --decode-reps 5 --no-overhead -o json --out " + out +
        " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out);
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j.at("models").size(), 1u);
  const auto& r = j.at("models")[0];
  EXPECT_EQ(r["model"], "tiny.gguf");
  EXPECT_EQ(r["threads"], 1);
  EXPECT_EQ(r["overhead_pct"].get<double>(), -1.0);  // --no-overhead
  // The KV cache alone: 2 layers x 64 positions (the context bench sizes for 16 + 8 tokens,
  // at least 64) x (2 KV heads x (16 + 16)) x 4 bytes; scratch comes on top.
  EXPECT_GE(r["kv_scratch_MB"].get<double>(), 2 * 64 * 64 * 4 / 1e6);

  // Counts from the file: 2 FLOPs per layer-matrix weight per prompt token, causal attention
  // over 16 tokens (2 layers x 4 heads x 2 x (16 + 16) per pair, 16*17/2 pairs), the head
  // once; decode reads every tensor but all embedding rows except one.
  const auto gguf = cln::GgufFile::open(model);
  double layer_params = 0, head = 0, bytes = 0;
  for (const auto& t : gguf->tensors()) {
    bytes += static_cast<double>(t.nbytes);
    if (t.name.rfind("blk.", 0) == 0 && t.ne.size() == 2)
      layer_params += static_cast<double>(t.n_elements());
    if (t.name == "output.weight") head = static_cast<double>(t.n_elements());
    if (t.name == "token_embd.weight") bytes -= static_cast<double>(t.nbytes) * (299.0 / 300.0);
  }
  const double flops_per_token =
      2 * layer_params + (2 * 4 * 2 * 32.0 * (16 * 17 / 2.0)) / 16 + 2 * head / 16;
  EXPECT_NEAR(r["prefill_gflops"].get<double>(),
              r["prefill_tok_s"].get<double>() * flops_per_token / 1e9,
              1e-6 * r["prefill_gflops"].get<double>());
  EXPECT_NEAR(r["decode_gbs"].get<double>(), r["decode_tok_s"].get<double>() * bytes / 1e9,
              1e-6 * r["decode_gbs"].get<double>());
  fs::remove_all(dir);
}

}  // namespace
