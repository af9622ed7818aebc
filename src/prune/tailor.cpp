#include "clone/prune/tailor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "clone/core/duration.h"
#include "clone/core/error.h"
#include "clone/core/hash.h"
#include "clone/core/plot.h"
#include "clone/core/rng.h"
#include "clone/prune/puzzle.h"
#include "clone/prune/ranks.h"
#include "clone/prune/surgery.h"

namespace cln::prune {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string shape_key(const ModelConfig& c) {
  std::string k;
  for (const LayerShape& l : c.layers)
    k += (k.empty() ? "" : ",") + std::to_string(l.n_head) + "/" + std::to_string(l.n_head_kv) +
         "/" + std::to_string(l.n_ff);
  return k;
}

Seq to_seq(const Ratios& r, int levels) {
  Seq s;
  for (size_t il = 0; il < r.attn.size(); ++il)
    for (double x : {r.attn[il], r.ffn[il]})
      s.push_back(std::clamp(static_cast<int>(std::lround(x * (levels - 1))), 0, levels - 1));
  return s;
}

Ratios from_seq(const Seq& s, int levels) {
  Ratios r;
  for (size_t i = 0; i + 1 < s.size(); i += 2) {
    r.attn.push_back(static_cast<double>(s[i]) / (levels - 1));
    r.ffn.push_back(static_cast<double>(s[i + 1]) / (levels - 1));
  }
  return r;
}

// Evaluations, cached by pruned shape in <out>/candidates.jsonl.
class Evaluator {
 public:
  Evaluator(const TailorOptions& o, const GgufFile& dense, const ModelConfig& c, const Scores& s,
            const device::DeviceProfile& p, json run)
      : o_(o), dense_(dense), c_(c), s_(s), p_(p) {
    path_ = (fs::path(o.out_dir) / "candidates.jsonl").string();
    if (fs::exists(path_)) {
      std::ifstream in(path_);
      std::string line;
      bool first = true;
      while (std::getline(in, line)) {
        if (line.empty()) continue;
        json j;
        try {
          j = json::parse(line);
        } catch (const json::exception&) {
          break;  // a line cut by an interruption: evaluated again
        }
        if (first) {
          if (j != run)
            fail(path_, " holds another run's evaluations (", j.dump(), "); this run is ",
                 run.dump(), ": use another --out");
          first = false;
          continue;
        }
        cache_[j.at("key").get<std::string>()] = {j.at("ppl").get<double>(),
                                                  j.at("tpot_s").get<double>(),
                                                  j.at("energy_j").get<double>()};
      }
      if (!first) {
        if (Ranks::world().rank() == 0) out_.open(path_, std::ios::app);
        return;
      }
    }
    if (Ranks::world().rank() != 0) return;
    out_.open(path_, std::ios::trunc);
    out_ << run.dump() << "\n";
    out_.flush();
  }

  struct Raw {
    double ppl = 0, tpot_s = 0, energy_j = 0;
  };
  // Every plan's numbers; those not cached are spread over the ranks (ranks.h) and
  // gathered, so every rank ends with all of them; rank 0 appends them to the file.
  std::vector<Raw> get_many(const std::vector<PrunePlan>& plans) {
    const Ranks& R = Ranks::world();
    std::vector<std::string> keys;
    std::vector<size_t> todo;
    std::set<std::string> queued;
    for (size_t i = 0; i < plans.size(); ++i) {
      keys.push_back(shape_key(plans[i].shape(c_)));
      if (!cache_.count(keys[i]) && queued.insert(keys[i]).second) todo.push_back(i);
    }
    std::vector<double> v(3 * todo.size(), 0.0);
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t j = 0; j < todo.size(); ++j) {
      if (static_cast<int>(j % static_cast<size_t>(R.size())) != R.rank()) continue;
      const PrunePlan& plan = plans[todo[j]];
      v[3 * j] = validation_ppl(dense_, plan, o_.val, o_.out_dir);
      const DeviceCost d = device_cost(plan.shape(c_), p_, o_.workload);
      v[3 * j + 1] = d.tpot_s, v[3 * j + 2] = d.energy_j;
      if (R.rank() == 0 && o_.log && todo.size() > 4 && (j / R.size() + 1) % 8 == 0) {
        const double el =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double rate = static_cast<double>(j + 1) / std::max(el, 1e-9);
        char b[160];
        std::snprintf(b, sizeof b, "tailor: evaluated %zu/%zu of this batch | %.2f eval/s | ETA %s",
                      j + 1, todo.size(), rate,
                      hms(static_cast<double>(todo.size() - j - 1) / rate).c_str());
        o_.log(b);
      }
    }
    R.sum(v);
    for (size_t j = 0; j < todo.size(); ++j) {
      const Raw r{v[3 * j], v[3 * j + 1], v[3 * j + 2]};
      cache_[keys[todo[j]]] = r;
      if (R.rank() == 0) {
        out_ << json{{"key", keys[todo[j]]},
                     {"ppl", r.ppl},
                     {"tpot_s", r.tpot_s},
                     {"energy_j", r.energy_j}}
                    .dump()
             << "\n";
        out_.flush();
      }
      ++fresh_;
    }
    std::vector<Raw> out;
    for (const std::string& k : keys) out.push_back(cache_.at(k));
    return out;
  }
  Raw get(const PrunePlan& plan) { return get_many({plan}).front(); }

  Candidate candidate(const std::string& source, const Ratios& r, const Budget& b) {
    const PrunePlan plan = plan_from_ratios(c_, s_, r);
    const Raw raw = get(plan);
    Candidate k;
    k.source = source, k.ratios = r, k.key = shape_key(plan.shape(c_));
    k.ppl = raw.ppl, k.tpot_s = raw.tpot_s, k.energy_j = raw.energy_j;
    k.score = search_score(raw.ppl, {0, raw.tpot_s, 0, raw.energy_j}, b);
    k.within = raw.tpot_s <= b.latency_s && raw.energy_j <= b.energy_j;
    return k;
  }
  int fresh() const { return fresh_; }

 private:
  const TailorOptions& o_;
  const GgufFile& dense_;
  const ModelConfig& c_;
  const Scores& s_;
  const device::DeviceProfile& p_;
  std::string path_;
  std::ofstream out_;
  std::map<std::string, Raw> cache_;
  int fresh_ = 0;
};

}  // namespace

TailorResult tailor(const TailorOptions& o) {
  const auto say = [&](const std::string& s) {
    if (o.log && Ranks::world().rank() == 0) o.log(s);
  };
  if (!(o.latency_budget > 0) || !(o.energy_budget > 0))
    fail("tailor: budgets must be positive fractions of the dense model's cost");
  if (!o.workload.dvfs_policy.empty() && o.workload.dvfs != "learned")
    fail("tailor: --dvfs-policy gives the learned controller's weights, but the controller is ",
         o.workload.dvfs, " (add --dvfs learned)");
  fs::create_directories(o.out_dir);
  const auto f = GgufFile::open(o.model);
  const ModelConfig c = ModelConfig::from_gguf(*f);
  const device::DeviceProfile profile = device::DeviceProfile::find(o.profile);
  for (const auto& [what, len] :
       {std::pair{"calibration (--calib-len)", o.calib_len},
        std::pair{"validation (--val-len)", o.val.seq_len},
        std::pair{"recovery", o.recovery.sched.steps > 0 ? o.recovery.seq_len : int64_t{0}}})
    if (len > c.n_ctx_train)
      fail("tailor: ", what, " windows of ", len, " tokens exceed the model's context of ",
           c.n_ctx_train);
  TailorOptions opt = o;
  opt.val.data_dir = o.data_dir;
  opt.val.threads = o.threads;

  // 1. Unit importance, and Block Influence for the ShortGPT samples.
  train::LlamaModel model = train::LlamaModel::from_gguf(*f);
  Calibration cal;
  if (o.units != Method::Magnitude && o.units != Method::Random) {
    cal = calibration_from_data(o.data_dir, Tokenizer::from_gguf(*f).vocab(), o.calib_seqs,
                                o.calib_len, o.seed);
    cal.threads = o.threads;
  }
  say("tailor: unit importance by " + method_name(o.units));
  const Scores units = score(o.units, model, cal, o.seed);
  Calibration bcal =
      calibration_from_data(o.data_dir, Tokenizer::from_gguf(*f).vocab(),
                            std::min<int64_t>(o.calib_seqs, 16), o.calib_len, o.seed);
  bcal.threads = o.threads;
  const Scores block = score(Method::Block, model, bcal, o.seed);

  // The dense model at the top clock sets the budgets. Under another DVFS controller every
  // candidate's request is served to the SLO the budgets make (TPOT at the latency budget,
  // TTFT at the dense model's own), the clock changing at each layer boundary.
  Workload top = o.workload;
  top.dvfs = "performance";
  const DeviceCost dense_top = device_cost(c, profile, top);
  opt.workload = with_budget_targets(o.workload, dense_top, o.latency_budget);

  json run = {{"model", fs::absolute(o.model).string()},
              {"model_bytes", fs::file_size(o.model)},
              {"units", method_name(o.units)},
              {"profile", profile.name},
              {"workload", {o.workload.name, o.workload.prompt, o.workload.output}},
              {"validation", {o.val.seq_len, o.val.windows}},
              {"calibration", {o.calib_seqs, o.calib_len, o.seed}}};
  if (opt.workload.dvfs != "performance") run["dvfs"] = opt.workload.dvfs;
  if (!o.workload.dvfs_policy.empty()) {
    // The weights by their bytes: retraining them into the same file is another run.
    std::ifstream in(o.workload.dvfs_policy, std::ios::binary);
    if (!in) fail("tailor: cannot read the DVFS policy ", o.workload.dvfs_policy);
    const std::string bytes{std::istreambuf_iterator<char>(in), {}};
    char h[17];
    std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(fnv1a64(bytes)));
    run["dvfs_policy"] = {fs::absolute(o.workload.dvfs_policy).string(), h};
  }
  Evaluator ev(opt, *f, c, units, profile, run);

  TailorResult res;
  const Evaluator::Raw dense = ev.get(PrunePlan::dense(c));
  res.dense_ppl = dense.ppl;
  res.dense = dense_top;
  res.latency_budget_s = o.latency_budget * res.dense.tpot_s;
  res.energy_budget_j = o.energy_budget * res.dense.energy_j;
  const Budget budget{res.latency_budget_s, res.energy_budget_j, o.alpha, o.beta};
  char b[512];
  std::snprintf(b, sizeof b,
                "tailor: dense model on %s: validation ppl %.3f, TPOT %.3f ms, request energy "
                "%.4f J; budgets TPOT %.3f ms, energy %.4f J",
                profile.name.c_str(), res.dense_ppl, 1e3 * res.dense.tpot_s, res.dense.energy_j,
                1e3 * res.latency_budget_s, res.energy_budget_j);
  say(b);

  const int levels = o.nao.levels;
  std::set<Seq> seen;
  const auto t0 = std::chrono::steady_clock::now();
  const int planned = (o.baselines ? 6 + 4 + 3 : 0) +
                      (o.puzzle ? (opt.workload.dvfs != "performance" ? 21 : 1) : 0) +
                      o.random_samples + o.rounds * o.per_round;
  const auto add = [&](const std::string& source, const Ratios& r) {
    const Candidate k = ev.candidate(source, r, budget);
    res.candidates.push_back(k);
    seen.insert(to_seq(r, levels));
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::snprintf(b, sizeof b,
                  "tailor: %3zu/%d %-14s ppl %8.3f  TPOT %7.3f ms  energy %7.4f J  score %.5f%s | "
                  "elapsed %s",
                  res.candidates.size(), planned, source.c_str(), k.ppl, 1e3 * k.tpot_s, k.energy_j,
                  k.score, k.within ? "  (within budget)" : "", hms(el).c_str());
    say(b);
    return k;
  };

  // Evaluates a batch (spread over the ranks), then lists each candidate in order.
  const auto add_all = [&](const std::vector<std::pair<std::string, Ratios>>& items) {
    std::vector<PrunePlan> plans;
    for (const auto& [src, r] : items) plans.push_back(plan_from_ratios(c, units, r));
    ev.get_many(plans);
    std::vector<Candidate> out;
    for (const auto& [src, r] : items) out.push_back(add(src, r));
    return out;
  };

  // 2. The samples: every baseline at several settings, then random vectors.
  std::vector<std::pair<std::string, Ratios>> samples;
  if (o.baselines) {
    for (double r : {0.1, 0.2, 0.3, 0.4, 0.5, 0.6})
      samples.emplace_back("uniform " + std::to_string(r).substr(0, 3),
                           Ratios::uniform(c.n_layer(), r));
    const int halves = static_cast<int>(2 * c.n_layer());
    for (int n : {halves / 8, halves / 4, 3 * halves / 8, halves / 2})
      samples.emplace_back("shortgpt " + std::to_string(n), remove_halves(c, block, n));
    for (double fr : {0.2, 0.35, 0.5})
      samples.emplace_back("flap " + std::to_string(fr).substr(0, 4), global_ratios(c, units, fr));
  }
  if (o.puzzle) {
    LibraryOptions lo;
    lo.tmp_dir = o.out_dir;
    lo.ppl = [&](const std::vector<PrunePlan>& plans) {
      say("tailor: puzzle library: " + std::to_string(plans.size()) + " variants");
      std::vector<double> p;
      for (const Evaluator::Raw& r : ev.get_many(plans)) p.push_back(r.ppl);
      return p;
    };
    // Its knapsack adds per-block savings: top-clock costs (what a controller then runs
    // within the budgets can only be cheaper).
    const auto lib = build_library(*f, units, opt.val, profile, top, lo);
    const Choice ch = choose(lib, c.n_layer(), res.latency_budget_s - res.dense.tpot_s,
                             res.energy_budget_j - res.dense.energy_j);
    samples.emplace_back(ch.feasible ? "puzzle" : "puzzle (over)", ch.ratios);
    // Under a controller a candidate with TPOT in hand runs slower and cheaper, a saving
    // that does not add up block by block (it hangs on the whole model's slack). So that
    // the baseline gets what the controller gives, as the search does, the knapsack also
    // runs with the energy budget raised in 2% steps up to 40%; each new choice is served
    // by the controller like every sample, and only those within the real budgets count.
    if (opt.workload.dvfs != "performance")
      for (int pct = 2, last = 0; pct <= 40; pct += 2) {
        const Choice cr = choose(lib, c.n_layer(), res.latency_budget_s - res.dense.tpot_s,
                                 (1 + pct / 100.0) * res.energy_budget_j - res.dense.energy_j);
        if (!cr.feasible || cr.ratios == (last ? samples.back().second : ch.ratios)) continue;
        samples.emplace_back("puzzle e+" + std::to_string(pct) + "%", cr.ratios);
        last = pct;
      }
  }
  Rng rng(o.seed);
  for (int i = 0; i < o.random_samples; ++i) {
    Seq s;
    for (int64_t k = 0; k < 2 * c.n_layer(); ++k)
      s.push_back(static_cast<int>(rng.uniform() * (levels / 2 + 1)));
    samples.emplace_back("random", from_seq(s, levels));
  }
  add_all(samples);

  // 3. The search rounds.
  Nao nao(2 * c.n_layer(), o.nao);
  for (int round = 1; round <= o.rounds; ++round) {
    std::vector<Seq> xs;
    std::vector<double> ys;
    std::set<Seq> uniq;
    for (const Candidate& k : res.candidates) {
      const Seq s = to_seq(k.ratios, levels);
      if (uniq.insert(s).second) xs.push_back(s), ys.push_back(std::log(k.score));
    }
    const auto [mse, ce] = nao.train(xs, ys);
    std::vector<size_t> order(res.candidates.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b2) {
      return res.candidates[a].score > res.candidates[b2].score;
    });
    std::vector<Seq> props;
    for (size_t i = 0; i < order.size() && static_cast<int>(props.size()) < o.per_round; ++i) {
      const Seq p = nao.improve(to_seq(res.candidates[order[i]].ratios, levels), seen);
      if (p.empty()) continue;
      seen.insert(p);
      props.push_back(p);
    }
    RoundStats rs;
    rs.round = round;
    rs.proposed = static_cast<int>(props.size());
    std::vector<double> predicted, real;
    std::vector<std::pair<std::string, Ratios>> items;
    for (const Seq& p : props) {
      predicted.push_back(nao.predict(p));
      items.emplace_back("search " + std::to_string(round), from_seq(p, levels));
    }
    for (const Candidate& k : add_all(items)) real.push_back(std::log(k.score));
    rs.spearman = props.size() >= 3 ? spearman(predicted, real) : 0.0;
    for (const Candidate& k : res.candidates) rs.best_score = std::max(rs.best_score, k.score);
    res.rounds.push_back(rs);
    std::snprintf(b, sizeof b,
                  "tailor: round %d: %d proposals, search model fit MSE %.4f, reconstruction "
                  "%.3f, rank correlation on its proposals %.3f, best score %.5f",
                  round, rs.proposed, mse, ce, rs.spearman, rs.best_score);
    say(b);
  }

  // 4. The best: the highest score, preferring candidates within both budgets.
  for (const Candidate& k : res.candidates) {
    const bool better =
        (k.within && !res.feasible) || (k.within == res.feasible && k.score > res.best.score);
    if (res.best.key.empty() || better) res.best = k, res.feasible = k.within;
  }
  if (Ranks::world().rank() == 0)
    write_pruned(*f, plan_from_ratios(c, units, res.best.ratios),
                 (fs::path(o.out_dir) / "pruned.gguf").string(),
                 {{"clone.pruning.method", "clone tailor (" + res.best.source + ")"},
                  {"clone.tailor.profile", profile.name},
                  {"clone.tailor.run", run.dump()}});
  // Each method family's best within the budgets, cut the same way, for the judged table
  // (recovery and test perplexity: scripts/tailor.sh).
  if (o.family_models && Ranks::world().rank() == 0) {
    std::map<std::string, const Candidate*> fam;
    for (const Candidate& k : res.candidates) {
      const std::string name = k.source.substr(0, k.source.find(' '));
      if (k.within && (!fam[name] || k.ppl < fam[name]->ppl)) fam[name] = &k;
    }
    for (const auto& [name, k] : fam)
      if (k)
        write_pruned(*f, plan_from_ratios(c, units, k->ratios),
                     (fs::path(o.out_dir) / ("best-" + name + ".gguf")).string(),
                     {{"clone.pruning.method", "clone tailor sample (" + k->source + ")"},
                      {"clone.tailor.profile", profile.name}});
  }
  std::snprintf(b, sizeof b,
                "tailor: best %s (%s): ppl %.3f, TPOT %.3f ms, energy %.4f J; %d evaluations "
                "run, %zu candidates; wrote %s",
                res.best.source.c_str(),
                res.feasible ? "within both budgets" : "OVER BUDGET: closest", res.best.ppl,
                1e3 * res.best.tpot_s, res.best.energy_j, ev.fresh(), res.candidates.size(),
                (fs::path(o.out_dir) / "pruned.gguf").string().c_str());
  say(b);
  // 5. Recovery (one process: the other ranks are done).
  if (Ranks::world().rank() == 0) {
    res.recovered_ppl = recover_best(o);
    if (res.recovered_ppl > 0) {
      std::snprintf(
          b, sizeof b, "tailor: recovered: validation perplexity %.3f (cut: %.3f); wrote %s",
          res.recovered_ppl, res.best.ppl, (fs::path(o.out_dir) / "model.gguf").string().c_str());
      say(b);
    }
  }
  return res;
}

void write_report(const TailorOptions& o, const TailorResult& r) {
  const fs::path dir(o.out_dir);
  {
    std::ofstream csv(dir / "candidates.csv");
    csv << "index,source,ppl,tpot_ms,energy_j,score,within_budget,shape\n";
    for (size_t i = 0; i < r.candidates.size(); ++i) {
      const Candidate& k = r.candidates[i];
      csv << i << "," << k.source << "," << k.ppl << "," << 1e3 * k.tpot_s << "," << k.energy_j
          << "," << k.score << "," << (k.within ? 1 : 0) << ",\"" << k.key << "\"\n";
    }
    std::ofstream rc(dir / "rounds.csv");
    rc << "round,proposed,spearman,best_score\n";
    for (const RoundStats& s : r.rounds)
      rc << s.round << "," << s.proposed << "," << s.spearman << "," << s.best_score << "\n";
    std::ofstream lr(dir / "ratios.csv");
    lr << "layer,attention,ffn\n";
    for (size_t il = 0; il < r.best.ratios.attn.size(); ++il)
      lr << il << "," << r.best.ratios.attn[il] << "," << r.best.ratios.ffn[il] << "\n";
    // One CSV per method family for the Pareto plot.
    std::map<std::string, std::ofstream> fam;
    for (const Candidate& k : r.candidates) {
      const std::string name = k.source.substr(0, k.source.find(' '));
      auto& out = fam[name];
      if (!out.is_open()) {
        out.open(dir / ("pareto-" + name + ".csv"));
        out << "tpot_ms,energy_j,ppl\n";
      }
      out << 1e3 * k.tpot_s << "," << k.energy_j << "," << k.ppl << "\n";
    }
  }
  std::ofstream md(dir / "summary.md");
  char b[512];
  md << "# clone tailor: " << o.profile << ", workload " << o.workload.name << " ("
     << o.workload.prompt << " in, " << o.workload.output << " out)\n\n";
  std::snprintf(b, sizeof b,
                "Dense model: validation perplexity %.3f, TPOT %.3f ms, request energy %.4f J "
                "(performance governor, idle board). Budgets: TPOT %.3f ms (%.0f%%), energy "
                "%.4f J (%.0f%%). Units chosen by %s importance; validation: %lld windows of %lld "
                "tokens per domain (valid split), no recovery.",
                r.dense_ppl, 1e3 * r.dense.tpot_s, r.dense.energy_j, 1e3 * r.latency_budget_s,
                100 * o.latency_budget, r.energy_budget_j, 100 * o.energy_budget,
                method_name(o.units).c_str(), static_cast<long long>(o.val.windows),
                static_cast<long long>(o.val.seq_len));
  md << b;
  if (o.workload.dvfs == "performance")
    md << " Candidates: the request at the top clock (performance governor).\n\n";
  else
    md << " Candidates: the request served by the " << o.workload.dvfs << " DVFS controller"
       << (o.workload.dvfs_policy.empty() ? "" : " (weights " + o.workload.dvfs_policy + ")")
       << " to a TPOT target at the budget and a TTFT target at the dense "
          "model's own (the clock set at every layer boundary).\n\n";
  std::snprintf(b, sizeof b, "**Best: %s** (%s): perplexity %.3f, TPOT %.3f ms, energy %.4f J.\n\n",
                r.best.source.c_str(),
                r.feasible ? "within both budgets" : "over budget: the closest", r.best.ppl,
                1e3 * r.best.tpot_s, r.best.energy_j);
  md << b;
  // Per method family: its best candidate within the budgets.
  md << "| method | candidates | best within budget | ppl | TPOT ms | energy J "
        "|\n|---|---|---|---|---|---|\n";
  std::map<std::string, std::vector<const Candidate*>> fam;
  for (const Candidate& k : r.candidates) fam[k.source.substr(0, k.source.find(' '))].push_back(&k);
  for (const auto& [name, ks] : fam) {
    const Candidate* best = nullptr;
    for (const Candidate* k : ks)
      if (k->within && (!best || k->ppl < best->ppl)) best = k;
    if (best)
      std::snprintf(b, sizeof b, "| %s | %zu | %s | %.3f | %.3f | %.4f |\n", name.c_str(),
                    ks.size(), best->source.c_str(), best->ppl, 1e3 * best->tpot_s, best->energy_j);
    else
      std::snprintf(b, sizeof b, "| %s | %zu | none | | | |\n", name.c_str(), ks.size());
    md << b;
  }
  if (!r.rounds.empty()) {
    md << "\nSearch rounds (rank correlation of the search model's predicted score with the "
          "real one, on its own proposals before they were evaluated):\n\n| round | proposals | "
          "Spearman | best score so far |\n|---|---|---|---|\n";
  }
  for (const RoundStats& s : r.rounds) {
    std::snprintf(b, sizeof b, "| %d | %d | %.3f | %.5f |\n", s.round, s.proposed, s.spearman,
                  s.best_score);
    md << b;
  }
  const train::FinetuneOptions& rec = o.recovery;
  if (r.recovered_ppl > 0) {
    std::snprintf(b, sizeof b,
                  "\n**Recovered** (model.gguf, from the cut pruned.gguf): validation perplexity "
                  "%.3f (cut: %.3f); %lld steps of %lld x %lld tokens, lr %.1e, seed %llu, ",
                  r.recovered_ppl, r.best.ppl, static_cast<long long>(rec.sched.steps),
                  static_cast<long long>(rec.batch), static_cast<long long>(rec.seq_len),
                  rec.sched.lr, static_cast<unsigned long long>(rec.seed));
    md << b;
    if (rec.kd_weight > 0)
      md << "distilled from the dense model (KD weight " << rec.kd_weight << ")";
    else
      md << "fine-tuned on the corpora";
    md << "; curves and the test split's perplexity in recover/.\n";
  } else {
    md << "\nNo recovery: model.gguf is the cut model (`--recover-steps`).\n";
  }
  if (!plot::gnuplot_available()) return;
  plot::LinePlot lp;
  lp.figure = {(dir / "ratios.png").string(), 900, 450};
  lp.title = "clone tailor: per-layer pruning ratios of the best candidate (" + r.best.source + ")";
  lp.xlabel = "layer";
  lp.ylabel = "share removed";
  lp.series = {{(dir / "ratios.csv").string(), 1, 2, "attention heads", "linespoints lw 2"},
               {(dir / "ratios.csv").string(), 1, 3, "FFN channels", "linespoints lw 2"}};
  plot::line_plot(lp);
  if (!r.rounds.empty()) {  // no search rounds (--puzzle-only): nothing to plot
    plot::LinePlot sp;
    sp.figure = {(dir / "search.png").string(), 700, 400};
    sp.title = "clone tailor: best score after each search round";
    sp.xlabel = "round";
    sp.ylabel = "score";
    sp.series = {{(dir / "rounds.csv").string(), 1, 4, "best score", "linespoints lw 2"}};
    plot::line_plot(sp);
  }
  for (const auto& [axis, col, budget, label] :
       {std::tuple{"tpot", 1, 1e3 * r.latency_budget_s, "simulated TPOT (ms)"},
        std::tuple{"energy", 2, r.energy_budget_j, "simulated request energy (J)"}}) {
    std::string s =
        plot::figure({(dir / (std::string("pareto-") + axis + ".png")).string(), 900, 500});
    s += "set datafile separator ','\nset key outside right\nset grid\n";
    s += "set title " +
         plot::quote(std::string("clone tailor on ") + o.profile +
                     ": validation perplexity against " + label) +
         "\nset xlabel " + plot::quote(label) + "\nset ylabel 'validation perplexity'\n";
    // The budget line inside the picture, whatever the candidates' range.
    double lo = budget, hi = budget;
    for (const Candidate& k : r.candidates) {
      const double x = col == 1 ? 1e3 * k.tpot_s : k.energy_j;
      lo = std::min(lo, x), hi = std::max(hi, x);
    }
    std::snprintf(b, sizeof b,
                  "set xrange [%.6g:%.6g]\nset arrow from %.6g, graph 0 to %.6g, graph 1 nohead "
                  "dt 2 lw 2\nset label 'budget' at %.6g, graph 0.97 right offset -0.5,0\n",
                  lo - 0.04 * (hi - lo), hi + 0.04 * (hi - lo), budget, budget, budget);
    s += b;
    s += "plot ";
    bool first = true;
    for (const auto& [name, ks] : fam) {
      (void)ks;
      s += (first ? "" : ", ") + plot::quote((dir / ("pareto-" + name + ".csv")).string()) +
           " using " + std::to_string(col) + ":3 skip 1 with points pt 7 ps 1 title " +
           plot::quote(name);
      first = false;
    }
    plot::run_gnuplot(s + "\n");
  }
}

}  // namespace cln::prune
