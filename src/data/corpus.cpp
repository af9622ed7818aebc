// The corpora build: splits, task files, the overlap report; reading jsonl back.
#include "clone/data/corpus.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_set>

#include "clone/core/error.h"
#include "clone/data/dedup.h"
#include "clone/core/hash.h"

namespace cln::data {
namespace fs = std::filesystem;

std::string_view split_name(Split s) {
  switch (s) {
    case Split::Train:
      return "train";
    case Split::Valid:
      return "valid";
    case Split::Test:
      return "test";
  }
  return "?";
}

Split split_of(std::string_view text) {
  const uint64_t b = fnv1a64(text) % 1000;
  return b < 900 ? Split::Train : b < 950 ? Split::Valid : Split::Test;
}

const std::vector<std::string>& source_packages() {
  static const std::vector<std::string> p = {"dict-gcide",     "dict-foldoc",  "jargon-text",
                                             "bible-kjv-text", "bible-kjv",    "fortune-mod",
                                             "fortunes",       "fortunes-min", "wordnet-base"};
  return p;
}

const std::vector<std::string>& domain_names() {
  static const std::vector<std::string> d = {"dictionary", "computing", "scripture",
                                             "quotes",     "wordnet",   "code"};
  return d;
}

static void write_atomic(const fs::path& path, const std::string& content) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) fail("cannot write ", tmp.string());
    f.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!f) fail("cannot write ", tmp.string());
  }
  fs::rename(tmp, path);
}

namespace {

// Held-out documents of each domain and their shingle overlap with train (all domains).
void count_overlap(const std::vector<std::string_view>& docs, const std::vector<size_t>& domain,
                   const std::vector<Split>& split, bool before, std::vector<OverlapRow>& rows) {
  const std::vector<double> ov = train_overlap(docs, split);
  std::vector<double> sum(rows.size(), 0.0);
  for (size_t i = 0; i < docs.size(); ++i) {
    if (split[i] != Split::Test) continue;
    OverlapRow& r = rows[domain[i]];
    (before ? r.test_before : r.test_after) += 1;
    (before ? r.ge90_before : r.ge90_after) += ov[i] >= 0.9;
    (before ? r.gt50_before : r.gt50_after) += ov[i] > 0.5;
    sum[domain[i]] += ov[i];
  }
  for (size_t d = 0; d < rows.size(); ++d) {
    const int64_t n = before ? rows[d].test_before : rows[d].test_after;
    (before ? rows[d].mean_before : rows[d].mean_after) =
        n ? 100.0 * sum[d] / static_cast<double>(n) : 0.0;
  }
}

}  // namespace

std::string overlap_markdown(const std::vector<OverlapRow>& rows) {
  std::string md =
      "| domain | test docs, before | >= 90% in train | > 50% in train | mean % in train | test "
      "docs, after | >= 90% in train | > 50% in train | mean % in train |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const OverlapRow& r : rows) {
    char b[256];
    std::snprintf(b, sizeof b, "| %s | %lld | %lld | %lld | %.1f | %lld | %lld | %lld | %.1f |\n",
                  r.domain.c_str(), static_cast<long long>(r.test_before),
                  static_cast<long long>(r.ge90_before), static_cast<long long>(r.gt50_before),
                  r.mean_before, static_cast<long long>(r.test_after),
                  static_cast<long long>(r.ge90_after), static_cast<long long>(r.gt50_after),
                  r.mean_after);
    md += b;
  }
  return md;
}

std::vector<OverlapRow> build_corpora(const BuildOptions& o) {
  nlohmann::json manifest;
  // Every domain's documents, generated code files included for the "before" table.
  std::vector<std::string> all, kept;
  std::vector<size_t> all_domain, kept_domain;
  int64_t generated = 0;
  for (size_t d = 0; d < domain_names().size(); ++d) {
    for (std::string& doc : read_domain(domain_names()[d], o.paths, true)) {
      if (domain_names()[d] == "code" && is_generated_data(doc)) {
        ++generated;
      } else {
        kept.push_back(doc);
        kept_domain.push_back(d);
      }
      all.push_back(std::move(doc));
      all_domain.push_back(d);
    }
  }
  std::vector<std::string_view> all_v(all.begin(), all.end()), kept_v(kept.begin(), kept.end());
  std::vector<OverlapRow> rows(domain_names().size());
  for (size_t d = 0; d < rows.size(); ++d) rows[d].domain = domain_names()[d];
  std::vector<Split> old_split;
  for (const std::string& doc : all) old_split.push_back(split_of(doc));
  count_overlap(all_v, all_domain, old_split, true, rows);
  const SplitResult sr = split_by_cluster(kept_v, o.dedup);
  count_overlap(kept_v, kept_domain, sr.split, false, rows);
  if (o.verbose)
    std::fprintf(stderr,
                 "data: %zu documents; %lld near-duplicate clusters hold %lld of them; %lld "
                 "held-out documents moved to train; %lld generated code files left out\n",
                 kept.size(), static_cast<long long>(sr.clusters),
                 static_cast<long long>(sr.clustered_docs),
                 static_cast<long long>(sr.moved_to_train), static_cast<long long>(generated));

  for (size_t d = 0; d < domain_names().size(); ++d) {
    const std::string& domain = domain_names()[d];
    std::string out[3];
    size_t count[3] = {0, 0, 0}, bytes[3] = {0, 0, 0};
    for (size_t i = 0; i < kept.size(); ++i) {
      if (kept_domain[i] != d) continue;
      const int s = static_cast<int>(sr.split[i]);
      out[s] += nlohmann::json{{"text", kept[i]}}.dump() + "\n";
      ++count[s];
      bytes[s] += kept[i].size();
    }
    if (count[0] + count[1] + count[2] == 0)
      fail("domain '", domain, "' has no documents (are its packages installed?)");
    const fs::path dir = fs::path(o.out) / "corpus" / domain;
    fs::create_directories(dir);
    for (int s = 0; s < 3; ++s) {
      const std::string name{split_name(static_cast<Split>(s))};
      write_atomic(dir / (name + ".jsonl"), out[s]);
      manifest["corpus"][domain][name] = {{"documents", count[s]}, {"bytes", bytes[s]}};
    }
    if (o.verbose)
      std::fprintf(stderr,
                   "data: %-10s %7zu documents, %6.1f MB (train %zu, valid %zu, test %zu)\n",
                   domain.c_str(), count[0] + count[1] + count[2],
                   static_cast<double>(bytes[0] + bytes[1] + bytes[2]) / 1e6, count[0], count[1],
                   count[2]);
  }
  manifest["split"] = {{"clusters", sr.clusters},
                       {"clustered_documents", sr.clustered_docs},
                       {"moved_to_train", sr.moved_to_train},
                       {"generated_code_files_left_out", generated}};

  std::vector<std::string> tasks = task_names();
  tasks.insert(tasks.end(), mixed_task_names().begin(), mixed_task_names().end());
  for (const std::string& task : tasks) {
    const std::vector<TaskSplitItem> items = make_task(task);
    std::string out[3];
    size_t count[3] = {0, 0, 0};
    for (const TaskSplitItem& it : items) {
      const int s = static_cast<int>(it.split);
      out[s] += nlohmann::json{{"prompt", it.item.prompt},
                               {"answer", it.item.answer},
                               {"text", it.item.prompt + it.item.answer}}
                    .dump() +
                "\n";
      ++count[s];
    }
    const fs::path dir = fs::path(o.out) / "tasks" / task;
    fs::create_directories(dir);
    for (int s = 0; s < 3; ++s) {
      const std::string name{split_name(static_cast<Split>(s))};
      write_atomic(dir / (name + ".jsonl"), out[s]);
      manifest["tasks"][task][name] = {{"items", count[s]}};
    }
    if (o.verbose)
      std::fprintf(stderr, "data: task %-13s %6zu items (train %zu, valid %zu, test %zu)\n",
                   task.c_str(), items.size(), count[0], count[1], count[2]);
  }
  write_atomic(fs::path(o.out) / "manifest.json", manifest.dump(2) + "\n");
  const std::string md =
      "Held-out (test) documents whose word 8-grams appear in any training document, before "
      "(split by the hash of the exact text; generated code files included) and after (split "
      "by near-duplicate cluster, generated code files left out); `clone data build`.\n\n" +
      overlap_markdown(rows);
  write_atomic(fs::path(o.out) / "overlap.md", md);
  if (o.verbose) std::fputs(md.c_str(), stderr);
  return rows;
}

static std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("cannot open ", path, " (run `clone data build` first)");
  std::vector<nlohmann::json> out;
  std::string line;
  size_t n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const std::exception& e) {
      fail(path, ":", n, ": malformed JSON line: ", e.what());
    }
  }
  return out;
}

std::vector<std::string> read_jsonl_texts(const std::string& path) {
  std::vector<std::string> out;
  size_t n = 0;
  for (const auto& j : read_jsonl(path)) {
    ++n;
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
      fail(path, ": record ", n, " has no \"text\" string");
    out.push_back(j["text"].get<std::string>());
  }
  return out;
}

std::vector<TaskItem> read_jsonl_tasks(const std::string& path) {
  std::vector<TaskItem> out;
  size_t n = 0;
  for (const auto& j : read_jsonl(path)) {
    ++n;
    if (!j.is_object() || !j.contains("prompt") || !j.contains("answer"))
      fail(path, ": record ", n, " needs \"prompt\" and \"answer\"");
    out.push_back({j["prompt"].get<std::string>(), j["answer"].get<std::string>()});
  }
  return out;
}

}  // namespace cln::data
