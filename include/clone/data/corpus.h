// Training corpora from Debian packages, one domain per source, and generated task
// datasets whose answers can be scored exactly. Every document lands in train, valid or
// test by a hash of its own text, so adding data never moves a document between splits.
//
// Layout written by build_corpora() under `out`:
//   corpus/<domain>/{train,valid,test}.jsonl   one {"text": ...} per line
//   tasks/<task>/{train,valid,test}.jsonl      {"prompt": ..., "answer": ..., "text": ...}
//   manifest.json                              documents and bytes per domain and split
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cln::data {

enum class Split { Train = 0, Valid = 1, Test = 2 };
std::string_view split_name(Split s);

// 90% train, 5% valid, 5% test, by fnv1a64(text) % 1000 (core/hash.h).
Split split_of(std::string_view text);

// The sources: where each is read from on Debian 12. Tests point these at small fixtures.
struct SourcePaths {
  std::string gcide_dict = "/usr/share/dictd/gcide.dict.dz";
  std::string gcide_index = "/usr/share/dictd/gcide.index";
  std::string foldoc_dict = "/usr/share/dictd/foldoc.dict.dz";
  std::string foldoc_index = "/usr/share/dictd/foldoc.index";
  std::string jargon_txt = "/usr/share/doc/jargon-text/jargon.txt.gz";
  std::string bible_cmd = "bible";  // from bible-kjv; reads bible-kjv-text's data
  std::string fortunes_dir = "/usr/share/games/fortunes";
  std::string wordnet_dir = "/usr/share/wordnet";
  std::string python_dir = "/usr/lib/python3.11";
};

// The Debian packages the sources come from (installed by `clone data build --install`).
const std::vector<std::string>& source_packages();

// Domain names, in a fixed order: dictionary, computing, scripture, quotes, wordnet, code.
const std::vector<std::string>& domain_names();
// Generated task names: arithmetic, wordnet_pos.
const std::vector<std::string>& task_names();

// Documents of one domain, cleaned and deduplicated, in source order.
// Throws cln::Error naming the file if a source cannot be read.
std::vector<std::string> read_domain(const std::string& domain, const SourcePaths& p);

// One item of a generated task: the model reads `prompt` and must produce `answer`
// (exact match after trimming spaces); `text` = prompt + answer is what a LoRA trains on.
struct TaskItem {
  std::string prompt;
  std::string answer;
};
std::vector<TaskItem> make_task(const std::string& task, const SourcePaths& p);

// Cleaning helpers (exposed for tests).
// Reads a whole file; .gz/.dz files are inflated.
std::string read_file_maybe_gz(const std::string& path);
// Decodes a dictd index number (base64 digits, most significant first).
uint64_t dictd_b64(std::string_view s);
// Trims lines, drops blank runs, joins the lines of each paragraph with single spaces,
// paragraphs separated by one newline.
std::string reflow(std::string_view text);
// True if s is well-formed UTF-8.
bool valid_utf8(std::string_view s);

struct BuildOptions {
  std::string out = "out/data";
  SourcePaths paths;
  bool verbose = true;
};
// Writes the layout above. Throws if any domain ends up with no documents.
void build_corpora(const BuildOptions& o);

// Reads back one jsonl split: the "text" of every line. Throws if the file is missing or
// a line is malformed.
std::vector<std::string> read_jsonl_texts(const std::string& path);
std::vector<TaskItem> read_jsonl_tasks(const std::string& path);

}  // namespace cln::data
