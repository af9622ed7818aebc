// The `clone` command itself: help and unknown subcommands, a short `clone run --device
// --trace` smoke test (the co-simulation's numbers are checked in tests/dvfs/cosim_test),
// and a binary that finds no profiles saying everywhere it looked.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "device/fake_sysfs.h"

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("clone_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Runs `<exe> args` with a clean environment for clone's variables; returns the exit
  // status (not the raw wait status), stdout and stderr in out_ / err_.
  int run(const std::string& args, const std::string& exe = CLONE_CLI) {
    const fs::path o = dir_ / "stdout.txt", e = dir_ / "stderr.txt";
    const std::string cmd = "env -u CLONE_PROFILES -u CLONE_MODELS -u CLONE_SHARED " + exe + " " +
                            args + " > " + o.string() + " 2> " + e.string();
    const int rc = std::system(cmd.c_str());
    out_ = slurp(o), err_ = slurp(e);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  static inline fs::path dir_;
  std::string out_, err_;
};

TEST_F(Cli, HelpWorksAndUnknownSubcommandsAreErrors) {
  ASSERT_EQ(run("--help"), 0) << err_;
  EXPECT_NE(out_.find("sim"), std::string::npos) << out_;
  ASSERT_EQ(run("run --help"), 0) << err_;
  EXPECT_NE(out_.find("--device"), std::string::npos) << out_;
  ASSERT_EQ(run("sim --help"), 0) << err_;
  EXPECT_NE(out_.find("--profiles-dir"), std::string::npos) << out_;
  ASSERT_EQ(run("device show --help"), 0) << err_;

  EXPECT_NE(run("frobnicate --help"), 0) << out_;
  EXPECT_NE(err_.find("unknown subcommand \"frobnicate\""), std::string::npos) << err_;
  EXPECT_EQ(out_.find("Usage"), std::string::npos) << out_;  // not the main help
  EXPECT_NE(run("frobnicate"), 0);
  EXPECT_NE(err_.find("unknown subcommand \"frobnicate\""), std::string::npos) << err_;
  EXPECT_NE(run("device frobnicate --help"), 0);
  EXPECT_NE(err_.find("unknown subcommand \"frobnicate\" of `clone device`"), std::string::npos)
      << err_;
  EXPECT_NE(run(""), 0);  // a subcommand is required
}

TEST_F(Cli, BenchWritesOneJsonDocumentToDiffBetweenCommits) {
  const fs::path m = dir_ / "bench.gguf";
  ASSERT_EQ(run("init-model --layers 2 --embd 64 --heads 2 --ff 128 --vocab 300 -o " + m.string()),
            0)
      << err_;
  const fs::path file = dir_ / "bench.json";
  ASSERT_EQ(run("bench -m " + m.string() + " -m " + m.string() +
                " -p 16 -n 4 -r 1 --decode-reps 1 --no-overhead -o json --out " + file.string()),
            0)
      << err_;
  // stdout is the document and nothing else; the file holds the same document.
  const auto doc = nlohmann::json::parse(out_);
  EXPECT_EQ(doc, nlohmann::json::parse(slurp(file)));
  EXPECT_EQ(doc.at("schema"), "clone-bench/1");
  EXPECT_GT(doc.at("machine").at("read_gbs").get<double>(), 0.0);
  EXPECT_EQ(doc.at("options").at("n_gen"), 4);
  ASSERT_EQ(doc.at("models").size(), 2u);
  for (const auto& row : doc.at("models")) {
    EXPECT_EQ(row.at("model"), "bench.gguf");
    EXPECT_GT(row.at("decode_tok_s").get<double>(), 0.0);
  }
  EXPECT_NE(run("bench -m " + m.string() + " -o yaml"), 0);
  EXPECT_NE(err_.find("yaml"), std::string::npos) << err_;
}

TEST_F(Cli, BenchRunsOnAForcedTargetAndJudgesQuantizedPrefillByTheInt8Peak) {
  const fs::path q = dir_ / "bench-q8.gguf";
  ASSERT_EQ(run("init-model --layers 2 --embd 64 --heads 2 --ff 128 --vocab 300 --type q8_0 -o " +
                q.string()),
            0)
      << err_;
  // An unknown target is refused with the list this CPU and build have, weakest last.
  ASSERT_NE(run("bench -m " + q.string() + " --simd NOPE"), 0);
  const auto at = err_.find("available: ");
  ASSERT_NE(at, std::string::npos) << err_;
  std::string list = err_.substr(at + 11);
  list = list.substr(0, list.find(')'));
  const std::string weakest = list.substr(list.rfind(' ') + 1);
  ASSERT_EQ(run("bench -m " + q.string() + " --simd " + weakest +
                " -p 16 -n 4 -r 1 --decode-reps 1 --no-overhead -o json"),
            0)
      << err_;
  const auto doc = nlohmann::json::parse(out_);
  EXPECT_EQ(doc.at("machine").at("simd_target"), weakest);
  EXPECT_GT(doc.at("machine").at("int8_gops").get<double>(), 0.0);
  const auto& row = doc.at("models").at(0);
  EXPECT_EQ(row.at("prefill_peak"), "int8");
  // One pass between two int8 probes: its share is its rate over their mean, the median of
  // two. The probes beside it ran on the forced target, the same instruction the start-up
  // probe measured (what they measured, not how fast: with tests running side by side the
  // two rates differ by more than 2x).
  const double beside = row.at("peak_beside").get<double>();
  EXPECT_GT(beside, 0.0);
  EXPECT_NEAR(row.at("prefill_pct_peak").get<double>(),
              100 * row.at("prefill_gflops").get<double>() / beside,
              1e-6 * row.at("prefill_pct_peak").get<double>() + 1e-9);
  EXPECT_EQ(row.at("peak_on").get<std::string>(),
            weakest + " " + doc.at("machine").at("int8_kind").get<std::string>());
}

TEST_F(Cli, RunOnADeviceWritesItsTrace) {
  const std::string model = (dir_ / "tiny.gguf").string();
  ASSERT_EQ(run("init-model -o " + model +
                " --layers 3 --embd 64 --heads 4,4,2 --kv-heads 2,2,1 --ff 128,96,128"
                " --vocab 300 --ctx 256 --seed 5 --name cosim-tiny"),
            0)
      << err_;
  const std::string base = "run -m " + model + " -p 'the quick brown fox' -t 1 --temp 0 -n 3 ";
  const std::string trace = (dir_ / "trace.csv").string();
  ASSERT_EQ(run(base + "--ignore-eos --device orin-nx-16gb --dvfs learned --slo chatbot --trace " +
                trace),
            0)
      << err_;
  EXPECT_NE(err_.find("[clone sim] cosim-tiny on orin-nx-16gb, controller learned"),
            std::string::npos)
      << err_;
  EXPECT_NE(err_.find("SLO met"), std::string::npos) << err_;
  std::ifstream f(trace);
  std::string line;
  size_t rows = 0;
  ASSERT_TRUE(std::getline(f, line));
  EXPECT_EQ(line, "pass,phase,layer,token,n_tokens,mhz,t_start_s,time_s,energy_j,corunner");
  while (std::getline(f, line)) ++rows;
  EXPECT_EQ(rows, 4u * 3u);  // (3 layers + head) x (1 prompt pass + 2 decode passes)

  ASSERT_EQ(run(base), 0) << err_;
  EXPECT_EQ(err_.find("[clone sim]"), std::string::npos) << err_;
  EXPECT_NE(run(base + "--device orin-nx-16gb"), 0);
  EXPECT_NE(err_.find("SLO targets"), std::string::npos) << err_;
  EXPECT_NE(run(base + "--trace x.csv"), 0);
  EXPECT_NE(err_.find("--trace needs --device"), std::string::npos) << err_;

  // On a board (here a Jetson-shaped sysfs tree): the clock is set there too, and measured.
  const fs::path root = cln::testing::make_tree("cli-run-linux");
  const std::string on_board = base + "--ignore-eos --device orin-nx-16gb --dvfs powersave " +
                               "--slo chatbot --backend linux --sysfs-root " + root.string();
  ASSERT_EQ(run(on_board), 0) << err_;
  EXPECT_NE(err_.find("| measured on linux:17000000.gpu: "), std::string::npos) << err_;
  EXPECT_EQ(cln::testing::get(root / "sys/class/devfreq/17000000.gpu/max_freq"), "306000000");
  EXPECT_NE(run(on_board + " --knob policy9"), 0);
  EXPECT_NE(err_.find("no frequency knob named \"policy9\""), std::string::npos) << err_;
  EXPECT_NE(run(base + "--backend linux"), 0);
  EXPECT_NE(err_.find("--backend linux needs --device"), std::string::npos) << err_;

  // The power mode per request: chosen, named, and put on the board (its memory clock).
  const std::string modes = base + "--ignore-eos --device orin-nano-super-8gb --dvfs performance " +
                            "--slo chatbot --modes all --backend linux --sysfs-root " +
                            root.string();
  cln::testing::put(root / "sys/kernel/debug/bpmp/debug/clk/emc/rate", "2133000000");
  ASSERT_EQ(run(modes), 0) << err_;
  EXPECT_NE(err_.find("| power mode MAXN_SUPER"), std::string::npos) << err_;
  EXPECT_NE(err_.find("power mode MAXN_SUPER: memory clock pinned at 3199 MHz"), std::string::npos)
      << err_;
  EXPECT_EQ(cln::testing::get(root / "sys/kernel/debug/bpmp/debug/clk/emc/rate"), "3199000000");
  ASSERT_EQ(run("device probe --root " + root.string() + " --profile orin-nano-super-8gb"), 0);
  EXPECT_NE(out_.find("power mode 7W of orin-nano-super-8gb: can be put on this board"),
            std::string::npos)
      << out_;
  fs::remove(root / "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked");
  ASSERT_EQ(run("device probe --root " + root.string() + " --profile orin-nano-super-8gb"), 0);
  EXPECT_NE(out_.find("power mode 7W of orin-nano-super-8gb: cannot: memory clock (EMC)"),
            std::string::npos)
      << out_;
  EXPECT_NE(run(modes), 0);
  EXPECT_NE(err_.find("cannot be put on this board (nothing was changed)"), std::string::npos)
      << err_;
  EXPECT_NE(run(base + "--device orin-nano-super-8gb --slo chatbot --modes 40W"), 0);
  EXPECT_NE(err_.find("40W"), std::string::npos) << err_;
}

// The weights `clone run` prints for a routed prompt or part: "name w, name w, ...".
std::vector<std::pair<std::string, double>> route_weights(const std::string& list) {
  std::vector<std::pair<std::string, double>> w;
  std::istringstream all(list);
  std::string item;
  while (std::getline(all, item, ',')) {
    std::istringstream is(item);
    std::string name;
    double x = 0;
    is >> name >> x;
    w.emplace_back(name, x);
  }
  return w;
}
std::string top_expert(const std::vector<std::pair<std::string, double>>& w) {
  std::string top;
  double top_w = 0;
  for (const auto& [name, x] : w)
    if (x > top_w) top_w = x, top = name;
  return top;
}

// The README's main job: the shipped base, the router over the shipped task experts, the
// length predictor, on a modelled board. The router puts a sum on the addition expert and the
// answer is right; the embedding's layers are charged on the board (its TTFT is above the same
// run with the same experts at fixed weights).
TEST_F(Cli, RunRoutesOverTheShippedExpertsAndPredictsTheLength) {
  const std::string src = CLONE_SOURCE_DIR;
  std::string experts;
  for (const char* t : {"addition", "subtraction", "number_words", "digit_reverse"})
    experts += " --expert " + src + "/models/experts/" + t + ".gguf";
  const std::string base = "run -m " + src + "/models/base/model.gguf -t 1 --temp 0 -n 8 ";
  // The top clock throughout, so that the TTFTs compared below differ by the embedding
  // alone, not by what a controller made of each request's slack.
  const std::string board = " --device orin-nx-16gb --slo chatbot --dvfs performance";
  ASSERT_EQ(run(base + "-p '27+45='" + experts + " --length-model " + src +
                "/models/length/predictor.json" + board),
            0)
      << err_;
  EXPECT_NE(out_.find("27+45=72"), std::string::npos) << out_;
  EXPECT_NE(err_.find("[clone route] soft mixing over 4 experts (hidden:4 embedding"),
            std::string::npos)
      << err_;
  // "...: addition 0.885, subtraction 0.115": the weights the router gave, addition's largest.
  const size_t w = err_.find("): ", err_.find("[clone route]"));
  ASSERT_NE(w, std::string::npos) << err_;
  const auto weights = route_weights(err_.substr(w + 3, err_.find('\n', w) - w - 3));
  std::string fixed;
  for (const auto& [name, x] : weights)
    fixed += " --lora " + src + "/models/experts/" + name + ".gguf:" + std::to_string(x);
  EXPECT_EQ(top_expert(weights), "addition") << err_;
  EXPECT_NE(err_.find("[clone length] predicted "), std::string::npos) << err_;
  auto ttft_ms = [&] {
    const size_t p = err_.find("| TTFT ");
    return p == std::string::npos ? -1.0 : std::stod(err_.substr(p + 7));
  };
  const double routed = ttft_ms();
  // The same experts at the same weights, fixed: no embedding to charge.
  ASSERT_EQ(run(base + "-p '27+45='" + fixed + board), 0) << err_;
  EXPECT_GT(routed, ttft_ms()) << err_;
  EXPECT_NE(run(base + "-p x" + experts + fixed), 0);
  EXPECT_NE(err_.find("do not mix"), std::string::npos) << err_;
}

// A routed prompt longer than a part runs in parts, each under the unigram weights of its own
// tokens (a prompt that turns from scripture to quotes: its first part under scripture, its
// last under quotes), with no embedding charged on the board; --prompt-part 0 routes it whole
// by the hidden router, and the embedding's layers make its TTFT longer.
TEST_F(Cli, RunRoutesALongPromptInPartsByTheUnigramKeys) {
  const std::string src = CLONE_SOURCE_DIR;
  std::string experts;
  for (const char* t : {"scripture", "quotes", "code"})
    experts += " --expert " + src + "/models/experts/" + t + ".gguf";
  const std::string cmd =
      "run -m " + src + "/models/base/model.gguf -t 1 --temp 0 -n 4 " + experts +
      " --device orin-nx-16gb --slo chatbot --dvfs performance -p 'And the LORD spake unto "
      "Moses, saying, Speak unto the children of Israel, and say unto them, When any man of you "
      "bring an offering unto the LORD, ye shall bring your offering of the cattle. Imagination "
      "is more important than knowledge. Knowledge is limited, imagination encircles the world. "
      "Be yourself; everyone else is already taken.'";
  auto ttft_ms = [&] {
    const size_t p = err_.find("| TTFT ");
    return p == std::string::npos ? -1.0 : std::stod(err_.substr(p + 7));
  };
  // The expert with the largest weight on a part's line.
  auto top_of_part = [&](const std::string& from) {
    const std::string key = "[clone route] part from token " + from + " (unigram): ";
    const size_t p = err_.find(key);
    if (p == std::string::npos) return std::string("(no such part)");
    return top_expert(
        route_weights(err_.substr(p + key.size(), err_.find('\n', p) - p - key.size())));
  };
  ASSERT_EQ(run(cmd), 0) << err_;
  EXPECT_EQ(top_of_part("0"), "scripture") << err_;
  EXPECT_EQ(top_of_part("64"), "quotes") << err_;
  EXPECT_EQ(err_.find("embedding"), std::string::npos) << err_;
  const double parts = ttft_ms();
  ASSERT_EQ(run(cmd + " --prompt-part 0"), 0) << err_;
  EXPECT_NE(err_.find("[clone route] soft mixing over 3 experts (hidden:4 embedding"),
            std::string::npos)
      << err_;
  EXPECT_GT(ttft_ms(), parts) << err_;
}

TEST_F(Cli, PruneWritesAModelThatRunsAndRefusesBadRequests) {
  const std::string model = (dir_ / "prune-dense.gguf").string();
  ASSERT_EQ(run("init-model -o " + model +
                " --layers 3 --embd 64 --heads 4 --kv-heads 2 --ff 128 --vocab 300 --ctx 256"
                " --seed 5 --name prune-tiny"),
            0)
      << err_;
  const std::string pruned = (dir_ / "pruned.gguf").string(), plan = (dir_ / "plan.json").string();
  ASSERT_EQ(run("prune -m " + model + " -o " + pruned + " --method random --ratio 0.5 --plan-out " +
                plan),
            0)
      << err_;
  EXPECT_NE(out_.find("layer 2: 2/4 heads (2/2 KV), 64/128 FFN"), std::string::npos) << out_;
  ASSERT_EQ(run("run -m " + pruned + " -p 'the quick brown fox' -t 1 --temp 0 -n 3"), 0) << err_;
  // The plan written reproduces the cut.
  ASSERT_EQ(run("prune -m " + model + " -o " + pruned + " --plan " + plan), 0) << err_;
  EXPECT_NE(out_.find("by plan"), std::string::npos) << out_;

  // FLAP-style global ranking: per-layer ratios from one share of the weights.
  ASSERT_EQ(run("prune -m " + model + " -o " + pruned + " --method magnitude --global 0.3"), 0)
      << err_;
  EXPECT_NE(out_.find("by magnitude, global ranking, 0.3"), std::string::npos) << out_;
  ASSERT_EQ(run("run -m " + pruned + " -p 'the quick brown fox' -t 1 --temp 0 -n 3"), 0) << err_;
  EXPECT_NE(run("prune -m " + model + " -o " + pruned + " --global 0.3 --ratio 0.2"), 0);
  EXPECT_NE(err_.find("give one of --ratio"), std::string::npos) << err_;
  EXPECT_NE(run("prune -m " + model + " -o " + pruned + " --method block --global 0.3"), 0);
  EXPECT_NE(err_.find("--global ranks heads"), std::string::npos) << err_;

  EXPECT_NE(run("prune -m " + model + " -o " + pruned), 0);
  EXPECT_NE(err_.find("give one of --ratio"), std::string::npos) << err_;
  EXPECT_NE(run("prune -m " + model + " -o " + pruned + " --method block --ratio 0.5"), 0);
  EXPECT_NE(err_.find("give --remove-halves N"), std::string::npos) << err_;
  const std::string ratios = (dir_ / "ratios.json").string();
  std::ofstream(ratios) << R"({"attn": [0, 0.5], "ffn": [0, 0, 0]})";
  EXPECT_NE(run("prune -m " + model + " -o " + pruned + " --ratios " + ratios), 0);
  EXPECT_NE(err_.find("2 attention and 3 FFN ratios for a model of 3 layers"), std::string::npos)
      << err_;
  std::ofstream(ratios) << R"({"attn": [0, 0.5, 0], "ffn": [0, 2, 0]})";
  EXPECT_NE(run("prune -m " + model + " -o " + pruned + " --ratios " + ratios), 0);
  EXPECT_NE(err_.find("layer 1: the FFN ratio 2 is outside [0, 1]"), std::string::npos) << err_;

  // What the cut saves on each board, as the tailoring search costs it. The dense model
  // against budgets of half its own cost is twice over both: its score is (1 / ppl) x
  // 0.5^2 x 0.5^2 (alpha = beta = 2), and exactly 1 / ppl at its own cost.
  const auto count = [this](const std::string& s) {
    size_t n = 0;
    for (size_t i = out_.find(s); i != std::string::npos; i = out_.find(s, i + 1)) ++n;
    return n;
  };
  const std::string boards = " --profile orin-nx-16gb orin-nano-8gb --dense " + model;
  ASSERT_EQ(
      run("device cost -m " + model + boards + " --latency-budget 1 --energy-budget 1 --ppl 20"), 0)
      << err_;
  EXPECT_EQ(count("| yes "), 2u) << out_;
  EXPECT_EQ(count(" 0.05 "), 2u) << out_;
  ASSERT_EQ(run("device cost -m " + model + boards +
                " --latency-budget 0.5 --energy-budget 0.5 --ppl 20"),
            0)
      << err_;
  EXPECT_EQ(count("| no "), 2u) << out_;
  EXPECT_EQ(count(" 0.003125 "), 2u) << out_;
  // Half the heads and channels cut: within the dense model's cost on both boards, and not
  // within a tenth of it.
  ASSERT_EQ(run("device cost -m " + pruned + boards + " --latency-budget 1 --energy-budget 1"), 0)
      << err_;
  EXPECT_EQ(count("| yes "), 2u) << out_;
  ASSERT_EQ(run("device cost -m " + pruned + boards + " --latency-budget 0.1 --energy-budget 1"), 0)
      << err_;
  EXPECT_EQ(count("| no "), 2u) << out_;
  EXPECT_NE(run("device cost -m " + pruned + " --latency-budget 0.5"), 0);
  EXPECT_NE(err_.find("give --dense"), std::string::npos) << err_;
  // A learned controller trained for this model's own shape (the file, not a preset) serves
  // the cut model's request; its weights given to another controller are an error.
  const std::string policy = (dir_ / "policy.json").string();
  ASSERT_EQ(run("dvfs train --profile orin-nx-16gb --model " + model +
                " --requests 1 --rounds 1 --epochs 2 --relative-slo 0.5 --relative-range 1.1,1.5 "
                "--out " +
                policy),
            0)
      << err_;
  EXPECT_NE(out_.find("training DVFS MLP for orin-nx-16gb / "), std::string::npos) << out_;
  // The log's command reproduces the run, relative SLOs included, and the meta says so.
  EXPECT_NE(out_.find("--relative-slo 0.5 --relative-range 1.1,1.5"), std::string::npos) << out_;
  EXPECT_NE(out_.find("0.5 of the requests with SLOs 1.1-1.5x the top clock's own times"),
            std::string::npos)
      << out_;
  {
    std::ifstream in(policy);
    const auto meta = nlohmann::json::parse(in).at("meta");
    EXPECT_GT(meta.at("model_params").get<int64_t>(), 0);
    EXPECT_EQ(meta.at("relative_slo").get<double>(), 0.5);
  }
  EXPECT_NE(run("dvfs train --profile orin-nx-16gb --model " + model +
                " --relative-slo 0.5 --relative-range 2,1 --out " + policy),
            0);
  EXPECT_NE(err_.find("--relative-range: expected LO,HI with 1 <= LO < HI"), std::string::npos)
      << err_;
  const std::string learned = "device cost -m " + pruned + " --profile orin-nx-16gb --dense " +
                              model + " --latency-budget 1 --energy-budget 1 --dvfs-policy " +
                              policy;
  ASSERT_EQ(run(learned + " --dvfs learned"), 0) << err_;
  EXPECT_EQ(count("| yes "), 1u) << out_;
  EXPECT_NE(run(learned + " --dvfs static"), 0);
  EXPECT_NE(err_.find("but the controller is static (add --dvfs learned)"), std::string::npos)
      << err_;
}

TEST_F(Cli, SimChoosesThePowerModePerRequestAndNamesBadModes) {
  const std::string sim =
      "sim --profile orin-nano-super-8gb --model tinyllama-1.1b -n 3 "
      "--corunner idle --controllers performance,static,oracle --no-plots "
      "--out " +
      (dir_ / "sim-modes").string();
  ASSERT_EQ(run(sim + " --modes 15W,25W,MAXN_SUPER"), 0) << err_;
  EXPECT_NE(out_.find("the mode chosen per request among 15W,25W,MAXN_SUPER"), std::string::npos)
      << out_;
  EXPECT_NE(run(sim + " --modes 15W,40W"), 0);
  EXPECT_NE(err_.find("no power mode \"40W\" (have: 7W 15W 25W MAXN_SUPER)"), std::string::npos)
      << err_;
  EXPECT_NE(run(sim + " --modes all --mode 25W"), 0);
  EXPECT_NE(err_.find("excludes"), std::string::npos) << err_;
}

TEST_F(Cli, ABinaryWithoutItsDataSaysWhereItLooked) {
  const fs::path bin = dir_ / "alone" / "bin";
  fs::create_directories(bin);
  fs::copy_file(CLONE_CLI, bin / "clone", fs::copy_options::overwrite_existing);
  const std::string exe = (bin / "clone").string();
  EXPECT_NE(run("device show orin-nx-16gb", exe), 0);
  EXPECT_NE(err_.find("cannot find the profiles folder"), std::string::npos) << err_;
  EXPECT_NE(err_.find("--profiles-dir: not set"), std::string::npos) << err_;
  EXPECT_NE(err_.find("$CLONE_PROFILES: not set"), std::string::npos) << err_;
  EXPECT_NE(err_.find((dir_ / "alone" / "share" / "clone" / "profiles").string()),
            std::string::npos)
      << err_;
  // A flag, or the variable, points it at them.
  const std::string profiles = std::string(CLONE_SOURCE_DIR) + "/profiles";
  ASSERT_EQ(run("device show orin-nx-16gb --profiles-dir " + profiles, exe), 0) << err_;
  EXPECT_NE(out_.find("\"orin-nx-16gb\""), std::string::npos) << out_;
  ASSERT_EQ(run("device show orin-nano-8gb", "CLONE_PROFILES=" + profiles + " " + exe), 0) << err_;
  EXPECT_NE(run("device show orin-nx-16gb --profiles-dir " + (dir_ / "nowhere").string(), exe), 0);
}

}  // namespace
