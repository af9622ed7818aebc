// Training corpora from Debian packages, one domain per source, and the generated task
// datasets (tasks.h). Documents are split by near-duplicate cluster (dedup.h), so the same
// text with other wrapping, or an entry two sources carry, lands on one side.
//
// Layout written by build_corpora() under `out`:
//   corpus/<domain>/{train,valid,test}.jsonl   one {"text": ...} per line
//   tasks/<task>/{train,valid,test}.jsonl      {"prompt": ..., "answer": ..., "text": ...}
//   overlap.md                                 held-out documents' 8-gram overlap with train,
//                                              under the old (exact-text hash) split and this one
//   manifest.json                              documents and bytes per domain and split
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "clone/data/dedup.h"
#include "clone/data/tasks.h"

namespace cln::data {

std::string_view split_name(Split s);

// The split of a document by the hash of its exact text alone (90/5/5 by fnv1a64 % 1000):
// the rule before near-duplicate clustering, kept to report what it leaked.
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
// Documents of one domain, cleaned and exact duplicates dropped, in source order. Generated
// data files (see is_generated_data) are left out of the code domain unless keep_generated.
// Throws cln::Error naming the file if a source cannot be read.
std::vector<std::string> read_domain(const std::string& domain, const SourcePaths& p,
                                     bool keep_generated = false);

// A Python file that is mostly data, not code: at least 1 KB, and at least 60% of its code
// lines are literals only (strings, numbers, brackets and commas), e.g. the codec tables
// of encodings/, html/entities.py, the sysconfig dumps.
bool is_generated_data(std::string_view python_source);
bool is_data_line(std::string_view line);

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
  DedupOptions dedup;
  bool verbose = true;
};

// Reads back one jsonl split: the "text" of every line. Throws if the file is missing or
// a line is malformed.
std::vector<std::string> read_jsonl_texts(const std::string& path);
std::vector<TaskItem> read_jsonl_tasks(const std::string& path);

// The overlap table of a build: per domain, held-out documents and how many have >= 90% and
// > 50% of their 8-gram shingles in train, before (exact-text hash split, generated code
// files included) and after (cluster split). What build_corpora writes to overlap.md.
struct OverlapRow {
  std::string domain;
  int64_t test_before = 0, ge90_before = 0, gt50_before = 0;
  double mean_before = 0;
  int64_t test_after = 0, ge90_after = 0, gt50_after = 0;
  double mean_after = 0;
};
std::string overlap_markdown(const std::vector<OverlapRow>& rows);

// Writes the layout above and returns the overlap table. Throws if any domain ends up
// with no documents.
std::vector<OverlapRow> build_corpora(const BuildOptions& o);

}  // namespace cln::data
