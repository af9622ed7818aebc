#include "clone/train/expert_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "clone/core/error.h"
#include "clone/engine/context.h"
#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/tokenizer/tokenizer.h"
#include "clone/train/corpus.h"
#include "clone/train/tokenizer_train.h"

namespace cln::train {
namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
  const auto sp = [](unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && sp(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && sp(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// Offsets of the evaluation windows: the trainer's (stream_loss) evenly spaced ones.
std::vector<int64_t> window_offsets(size_t n_tokens, int64_t seq_len, int64_t max_tokens) {
  const int64_t avail = static_cast<int64_t>(n_tokens) - seq_len - 1;
  if (avail < 0) fail("a test stream of ", n_tokens, " tokens is shorter than one window");
  const int64_t windows =
      std::min<int64_t>(std::max<int64_t>(1, max_tokens / seq_len), avail / seq_len + 1);
  std::vector<int64_t> off;
  for (int64_t k = 0; k < windows; ++k)
    off.push_back(windows > 1 ? k * (avail / std::max<int64_t>(1, windows - 1)) : 0);
  return off;
}

// Mean negative log-likelihood of t[off+1 .. off+seq_len] given the tokens before it in
// the window, over all windows, through the engine.
double engine_nll(Context& ctx, const std::vector<uint16_t>& t, const std::vector<int64_t>& offs,
                  int64_t seq_len) {
  const int64_t V = ctx.model().config().n_vocab;
  std::vector<int32_t> win(static_cast<size_t>(seq_len));
  double nll = 0;
  for (int64_t off : offs) {
    for (int64_t i = 0; i < seq_len; ++i)
      win[static_cast<size_t>(i)] = t[static_cast<size_t>(off + i)];
    ctx.reset();
    const std::span<const float> logits = ctx.eval(win, true);
    for (int64_t i = 0; i < seq_len; ++i) {
      const float* l = logits.data() + i * V;
      const float mx = *std::max_element(l, l + V);
      double s = 0;
      for (int64_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(l[v] - mx));
      const int32_t target = t[static_cast<size_t>(off + i + 1)];
      nll += std::log(s) - static_cast<double>(l[target] - mx);
    }
  }
  return nll / static_cast<double>(offs.size() * static_cast<size_t>(seq_len));
}

// Greedy continuation of prompt until EOS or max_new tokens.
std::string greedy(Context& ctx, const Tokenizer& tok, const std::string& prompt, int64_t max_new) {
  std::vector<int32_t> ids = tok.encode(prompt, true);
  if (static_cast<int64_t>(ids.size()) + max_new > ctx.n_ctx())
    fail("task prompt of ", ids.size(), " tokens does not fit a context of ", ctx.n_ctx());
  ctx.reset();
  std::span<const float> logits = ctx.eval(ids);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < max_new; ++i) {
    const auto next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (next == tok.eos()) break;
    out.push_back(next);
    const int32_t one[1] = {next};
    logits = ctx.eval(one);
  }
  return tok.decode(out);
}

double task_accuracy(Context& ctx, const Tokenizer& tok, const std::vector<TaskItem>& items,
                     int64_t max_new) {
  int64_t hits = 0;
  for (const TaskItem& it : items)
    if (trim(greedy(ctx, tok, it.prompt, max_new)) == trim(it.answer)) ++hits;
  return static_cast<double>(hits) / static_cast<double>(items.size());
}

}  // namespace

ExpertEval evaluate_experts(const ExpertEvalOptions& o) {
  if (o.seq_len < 2) fail("expert eval: the window must be at least 2 tokens");
  const auto t_start = std::chrono::steady_clock::now();
  const auto model = Model::load(o.base);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  if (tok.n_vocab() != model->config().n_vocab)
    fail(o.base, ": the tokenizer has ", tok.n_vocab(), " tokens, the model ",
         model->config().n_vocab);
  const uint64_t fp = vocab_fingerprint(tok.vocab());
  std::vector<std::shared_ptr<const LoraAdapter>> adapters;
  for (const ExpertSpec& e : o.experts) adapters.push_back(LoraAdapter::load(e.path, *model));

  const int64_t gen_ctx = 256;
  Context ctx(model, {std::max(o.seq_len, gen_ctx), o.threads, std::max<int64_t>(o.seq_len, 64)});
  ExpertEval r;
  r.models.push_back("base");
  for (const ExpertSpec& e : o.experts) r.models.push_back(e.name);
  r.ppl.assign(r.models.size(), {});
  const auto use = [&](size_t m) {  // model row m: 0 = base, else expert m - 1
    if (m == 0)
      ctx.set_loras({});
    else
      ctx.set_loras({{adapters[m - 1], 1.0f}});
  };

  for (const std::string& d : domain_names()) {
    const std::string train_path = token_file_path(o.data_dir, d, "train");
    const std::string test_path = token_file_path(o.data_dir, d, "test");
    const TokenFile train = read_token_file(train_path, tok.bos());
    const TokenFile test = read_token_file(test_path, tok.bos());
    for (const TokenFile* f : {&train, &test})
      if (f->fingerprint != fp || static_cast<int64_t>(f->n_vocab) != tok.n_vocab())
        fail(f == &train ? train_path : test_path,
             " was encoded with another tokenizer than "
             "the one inside ",
             o.base);
    const std::vector<int64_t> offs = window_offsets(test.tokens.size(), o.seq_len, o.max_tokens);
    // Unigram baseline (add-one smoothing, fitted on train) over the same predictions.
    std::vector<double> counts(train.n_vocab, 1.0);
    for (uint16_t t : train.tokens) counts[t] += 1.0;
    double total = 0;
    for (double c : counts) total += c;
    double uni = 0;
    for (int64_t off : offs)
      for (int64_t i = 1; i <= o.seq_len; ++i)
        uni -= std::log(counts[test.tokens[static_cast<size_t>(off + i)]] / total);
    const auto n = static_cast<int64_t>(offs.size()) * o.seq_len;
    r.domains.push_back(d);
    r.tokens.push_back(n);
    r.unigram.push_back(std::exp(uni / static_cast<double>(n)));
    for (size_t m = 0; m < r.models.size(); ++m) {
      use(m);
      r.ppl[m].push_back(std::exp(engine_nll(ctx, test.tokens, offs, o.seq_len)));
    }
    if (o.verbose) {
      std::fprintf(stderr, "expert eval: %-10s %lld tokens | unigram %.1f | base %.2f", d.c_str(),
                   static_cast<long long>(n), r.unigram.back(), r.ppl[0].back());
      for (size_t m = 1; m < r.models.size(); ++m)
        std::fprintf(stderr, " | %s %.2f", r.models[m].c_str(), r.ppl[m].back());
      std::fprintf(
          stderr, " | %.0f s\n",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
    }
  }

  for (const std::string& task : o.tasks.empty() ? task_names() : o.tasks) {
    const std::string path = (fs::path(o.data_dir) / "tasks" / task / "test.jsonl").string();
    const std::vector<TaskItem> all = read_jsonl_tasks(path);
    if (all.empty()) fail(path, ": no task items");
    // Evenly spaced items: the split is sorted, so a prefix would be one corner of it.
    std::vector<TaskItem> items;
    const auto n = std::min<int64_t>(o.task_items, static_cast<int64_t>(all.size()));
    for (int64_t k = 0; k < n; ++k)
      items.push_back(all[static_cast<size_t>(k * static_cast<int64_t>(all.size()) / n)]);
    ExpertEval::TaskRow row;
    row.task = task;
    row.items = n;
    use(0);
    row.base = task_accuracy(ctx, tok, items, o.max_new);
    // The right expert has the task's name; the wrong one is the first other task
    // expert (else the first domain expert).
    size_t right = 0, wrong = 0;
    for (size_t m = 1; m < r.models.size(); ++m) {
      if (r.models[m] == task) right = m;
      const bool is_task =
          std::find(task_names().begin(), task_names().end(), r.models[m]) != task_names().end();
      if (r.models[m] != task && is_task && wrong == 0) wrong = m;
    }
    if (wrong == 0)
      for (size_t m = 1; m < r.models.size() && wrong == 0; ++m)
        if (r.models[m] != task) wrong = m;
    if (right) {
      row.right = r.models[right];
      use(right);
      row.with_right = task_accuracy(ctx, tok, items, o.max_new);
    }
    if (wrong) {
      row.wrong = r.models[wrong];
      use(wrong);
      row.with_wrong = task_accuracy(ctx, tok, items, o.max_new);
    }
    if (o.verbose)
      std::fprintf(stderr,
                   "expert eval: task %-12s %lld items | base %.1f%% | %s %.1f%% | %s %.1f%%\n",
                   task.c_str(), static_cast<long long>(n), 100 * row.base,
                   row.right.empty() ? "(no expert)" : row.right.c_str(), 100 * row.with_right,
                   row.wrong.empty() ? "(no expert)" : row.wrong.c_str(), 100 * row.with_wrong);
    r.tasks.push_back(row);
  }
  return r;
}

Table perplexity_table(const ExpertEval& e) {
  std::vector<std::string> cols = {"model"};
  for (const auto& d : e.domains) cols.push_back(d);
  cols.push_back("own domain vs base (%)");
  Table t(cols);
  std::vector<Table::Cell> uni = {std::string("unigram")};
  for (double u : e.unigram) uni.emplace_back(u);
  uni.emplace_back(std::string(""));
  t.add(uni);
  for (size_t m = 0; m < e.models.size(); ++m) {
    std::vector<Table::Cell> row = {e.models[m]};
    for (double p : e.ppl[m]) row.emplace_back(p);
    const auto it = std::find(e.domains.begin(), e.domains.end(), e.models[m]);
    if (m > 0 && it != e.domains.end()) {
      const auto d = static_cast<size_t>(it - e.domains.begin());
      row.emplace_back(100.0 * (e.ppl[m][d] / e.ppl[0][d] - 1.0));
    } else {
      row.emplace_back(std::string(""));
    }
    t.add(row);
  }
  return t;
}

Table task_table(const ExpertEval& e) {
  Table t({"task", "items", "base (%)", "right expert", "right (%)", "wrong expert", "wrong (%)"});
  t.set_precision(1);
  for (const auto& r : e.tasks) {
    const auto pct = [](double a) -> Table::Cell {
      if (a < 0) return std::string("-");
      return 100.0 * a;
    };
    t.add({r.task, static_cast<long long>(r.items), 100.0 * r.base, r.right.empty() ? "-" : r.right,
           pct(r.with_right), r.wrong.empty() ? "-" : r.wrong, pct(r.with_wrong)});
  }
  return t;
}

}  // namespace cln::train
