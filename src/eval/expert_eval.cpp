#include "clone/eval/expert_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>

#include "clone/core/error.h"
#include "clone/data/corpus.h"
#include "clone/data/tasks.h"
#include "clone/data/token_file.h"
#include "clone/engine/context.h"
#include "clone/engine/generate.h"
#include "clone/engine/lora.h"
#include "clone/engine/model.h"
#include "clone/eval/nll.h"
#include "clone/tokenizer/tokenizer.h"

namespace cln::eval {
using data::TaskItem;
namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
  const auto sp = [](unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && sp(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && sp(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// Greedy continuation of prompt until EOS or max_new tokens.
std::string greedy(Context& ctx, const Tokenizer& tok, const std::string& prompt, int64_t max_new) {
  const std::vector<int32_t> ids = tok.encode(prompt, true);
  if (static_cast<int64_t>(ids.size()) + max_new > ctx.n_ctx())
    fail("task prompt of ", ids.size(), " tokens does not fit a context of ", ctx.n_ctx());
  ctx.reset();
  GenerateParams p;
  p.max_new = max_new;
  p.sampling.temperature = 0;
  p.eos = tok.eos();
  return tok.decode(generate(ctx, ids, p).tokens);
}

double rule_accuracy(const std::vector<TaskItem>& items,
                     const std::function<std::string(const TaskItem&)>& rule) {
  int64_t hits = 0;
  for (const TaskItem& it : items) hits += trim(rule(it)) == trim(it.answer);
  return static_cast<double>(hits) / static_cast<double>(items.size());
}

// The most frequent answer (the first in file order among ties).
std::string majority_answer(const std::vector<TaskItem>& items) {
  std::map<std::string, int64_t> count;
  std::string best;
  int64_t most = 0;
  for (const TaskItem& it : items)
    if (++count[trim(it.answer)] > most) most = count[trim(it.answer)], best = trim(it.answer);
  return best;
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

  for (const std::string& d : o.perplexity ? data::domain_names() : std::vector<std::string>{}) {
    const data::TokenFile train =
        data::read_token_file(data::token_file_path(o.data_dir, d, "train"), tok.vocab(), o.base);
    const data::TokenFile test =
        data::read_token_file(data::token_file_path(o.data_dir, d, "test"), tok.vocab(), o.base);
    const Windows w = even_windows(static_cast<int64_t>(test.tokens.size()), o.seq_len,
                                   std::max<int64_t>(1, o.max_tokens / o.seq_len));
    const int64_t n = w.scored();
    r.domains.push_back(d);
    r.tokens.push_back(n);
    r.unigram.push_back(std::exp(unigram_nll(train.tokens, tok.n_vocab(), test.tokens, w)));
    for (size_t m = 0; m < r.models.size(); ++m) {
      use(m);
      r.ppl[m].push_back(windowed_nll(ctx, std::span<const uint16_t>(test.tokens), w).ppl());
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

  for (const std::string& task : o.tasks.empty() ? data::task_names() : o.tasks) {
    const std::string path = (fs::path(o.data_dir) / "tasks" / task / "test.jsonl").string();
    const std::vector<TaskItem> all = data::read_jsonl_tasks(path);
    if (all.empty()) fail(path, ": no task items");
    // Evenly spaced items: the split is sorted, so a prefix would be one corner of it.
    std::vector<TaskItem> items;
    const auto n = std::min<int64_t>(o.task_items, static_cast<int64_t>(all.size()));
    for (int64_t k = 0; k < n; ++k)
      items.push_back(all[static_cast<size_t>(k * static_cast<int64_t>(all.size()) / n)]);
    ExpertEval::TaskRow row;
    row.task = task;
    row.items = n;
    row.surface = rule_accuracy(
        items, [&](const TaskItem& it) { return data::surface_rule(task, it.prompt); });
    row.copy =
        rule_accuracy(items, [&](const TaskItem& it) { return data::copy_input(task, it.prompt); });
    const fs::path train = fs::path(o.data_dir) / "tasks" / task / "train.jsonl";
    if (fs::exists(train) && fs::file_size(train) > 0) {
      const std::string answer = majority_answer(data::read_jsonl_tasks(train.string()));
      row.majority = rule_accuracy(items, [&](const TaskItem&) { return answer; });
    }
    use(0);
    row.base = task_accuracy(ctx, tok, items, o.max_new);
    // The right expert has the task's name; the wrong one is the first other task
    // expert (else the first domain expert).
    size_t right = 0, wrong = 0;
    for (size_t m = 1; m < r.models.size(); ++m) {
      if (r.models[m] == task) right = m;
      const bool is_task = std::find(data::task_names().begin(), data::task_names().end(),
                                     r.models[m]) != data::task_names().end();
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
    if (o.verbose) {
      // An expert that was not run prints "-", not a sentinel value.
      const auto side = [](const std::string& name, double acc) {
        char b[96];
        std::snprintf(b, sizeof b, "%s %.1f%%", name.c_str(), 100 * acc);
        return name.empty() ? std::string("(no expert) -") : std::string(b);
      };
      std::fprintf(stderr, "expert eval: task %-12s %lld items | base %.1f%% | %s | %s\n",
                   task.c_str(), static_cast<long long>(n), 100 * row.base,
                   side(row.right, row.with_right).c_str(),
                   side(row.wrong, row.with_wrong).c_str());
    }
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
  Table t({"task", "items", "majority (%)", "surface rule (%)", "copy input (%)", "base (%)",
           "right expert", "right (%)", "wrong expert", "wrong (%)"});
  t.set_precision(1);
  const auto pct = [](double a) -> Table::Cell {
    if (a < 0) return std::string("-");
    return 100.0 * a;
  };
  for (const auto& r : e.tasks)
    t.add({r.task, static_cast<long long>(r.items), pct(r.majority), pct(r.surface), pct(r.copy),
           100.0 * r.base, r.right.empty() ? "-" : r.right, pct(r.with_right),
           r.wrong.empty() ? "-" : r.wrong, pct(r.with_wrong)});
  return t;
}

}  // namespace cln::eval
