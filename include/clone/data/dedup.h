// Near-duplicate detection and the split that keeps near-duplicates on one side.
//
// A document's shingles are the FNV-1a hashes of its word 8-grams after normalisation
// (words = runs of letters and digits, lower-cased; punctuation and white space only
// separate them, so re-wrapped, re-cased or re-punctuated copies give the same shingles). A document of fewer than 8 words has one shingle: all its words.
// Exact shingle sets are compared, no MinHash: two documents are near-duplicates when they
// share at least half the shingles of the smaller one (containment >= 0.5, which also
// catches a short entry carried inside a longer one). Shingles found in more than
// `max_df` documents (licence headers, boilerplate) do not link documents. Near-duplicates
// are joined into clusters (union-find, across domains) and each cluster goes to one split
// by a hash of its smallest member's normalised text. A last pass moves to train every
// valid or test document that still has more than half its shingles in train (covered by
// several train documents together), so no held-out document is more than half train.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cln::data {

enum class Split { Train = 0, Valid = 1, Test = 2 };

// Sorted, unique shingle hashes of a text.
std::vector<uint64_t> shingles(std::string_view text);

struct DedupOptions {
  double link_containment = 0.5;  // near-duplicates: shared >= this share of the smaller set
  int64_t max_df = 64;            // shingles in more documents than this do not link
  double max_train_overlap = 0.5; // a held-out document may have at most this share in train
};

struct SplitResult {
  std::vector<Split> split;        // per document
  std::vector<int64_t> cluster;    // per document: its cluster (the smallest member's index)
  int64_t clusters = 0;            // clusters with more than one document
  int64_t clustered_docs = 0;      // documents in those clusters
  int64_t moved_to_train = 0;      // held-out documents the last pass moved to train
};

// Splits documents (90% train, 5% valid, 5% test by cluster) as described above.
SplitResult split_by_cluster(const std::vector<std::string_view>& docs, const DedupOptions& o = {});

// The share of each document's shingles that some train document also has (0 for train
// documents themselves). `split` gives each document's split.
std::vector<double> train_overlap(const std::vector<std::string_view>& docs,
                                  const std::vector<Split>& split);

}  // namespace cln::data
