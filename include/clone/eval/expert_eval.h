// Scores a bank of LoRA experts the way the server will run them: through the inference
// engine, each adapter applied on the fly to the base model. Two measures:
//   - perplexity of the base and of each expert on every domain's test split (the same
//     windows the trainer's perplexity table uses, next to a unigram baseline), and
//   - exact-match accuracy of greedy generation on every generated task's test split,
//     for the base, the task's own expert and a wrong expert.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/core/table.h"

namespace cln::eval {

struct ExpertSpec {
  std::string name;  // domain or task it was trained on (file stem by default)
  std::string path;  // adapter GGUF
};

struct ExpertEvalOptions {
  std::string base;                   // base model GGUF (its tokenizer is used)
  std::string data_dir = "out/data";  // tokens/<domain>.test.tok, tasks/<task>/test.jsonl
  std::vector<ExpertSpec> experts;
  std::vector<std::string> tasks;  // generated tasks to score; empty = all task_names()
  bool perplexity = true;          // false: tasks only (no per-domain perplexity table)
  int64_t seq_len = 256;           // perplexity window (tokens predicted per window)
  int64_t max_tokens = 32768;      // predicted tokens per domain, at most
  int64_t task_items = 500;        // test items per task, evenly spaced over the split
  int64_t max_new = 16;            // generation limit per task item
  int threads = 2;
  bool verbose = true;
};

struct ExpertEval {
  std::vector<std::string> domains;      // columns of ppl
  std::vector<int64_t> tokens;           // predicted tokens per domain
  std::vector<double> unigram;           // unigram perplexity per domain
  std::vector<std::string> models;       // "base", then the experts' names
  std::vector<std::vector<double>> ppl;  // [model][domain]
  struct TaskRow {
    std::string task;
    int64_t items = 0;
    // Trivial baselines on the same items: the most frequent training answer (-1: the task
    // has no training split), the task's surface rule, the input copied (data/tasks.h).
    double majority = -1, surface = 0, copy = 0;
    std::string right, wrong;                           // expert names ("" if none)
    double base = 0, with_right = -1, with_wrong = -1;  // accuracy in [0,1]; -1 = no expert
  };
  std::vector<TaskRow> tasks;
};

// Throws cln::Error naming the file if an adapter does not fit the base, or the data
// was encoded with another tokenizer.
ExpertEval evaluate_experts(const ExpertEvalOptions& o);

// Rows: base and each expert; columns: each domain's test perplexity, own-domain gain.
Table perplexity_table(const ExpertEval& e);
// Rows: each task; columns: items, the three baselines, base, right and wrong expert (%).
Table task_table(const ExpertEval& e);

}  // namespace cln::eval
