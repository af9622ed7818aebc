// `clone bench` end to end on a tiny model: every column is filled, and the decode share
// of the bandwidth is the median of runs that each lie between their own min and max.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

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
  ASSERT_EQ(j.size(), 1u);
  const auto& r = j[0];
  EXPECT_EQ(r["model"], "tiny.gguf");
  EXPECT_EQ(r["threads"], 1);
  for (const char* k : {"prefill_tok_s", "decode_tok_s", "decode_gbs", "read_gbs_beside",
                        "decode_pct_bw", "rss_MB", "kv_scratch_MB"})
    EXPECT_GT(r[k].get<double>(), 0.0) << k;
  EXPECT_LE(r["pct_bw_min"].get<double>(), r["decode_pct_bw"].get<double>());
  EXPECT_GE(r["pct_bw_max"].get<double>(), r["decode_pct_bw"].get<double>());
  EXPECT_EQ(r["overhead_pct"].get<double>(), -1.0);  // --no-overhead
  fs::remove_all(dir);
}

}  // namespace
