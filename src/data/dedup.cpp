#include "clone/data/dedup.h"

#include <algorithm>
#include <numeric>

#include "clone/core/hash.h"
#include "clone/data/corpus.h"

namespace cln::data {

namespace {

// Words of a text: runs of letters and digits (ASCII lower-cased; bytes of non-ASCII
// characters count as letters); punctuation and white space separate words.
std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string> w;
  std::string cur;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const bool word = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c >= 0x80 ||
                      (c >= 'A' && c <= 'Z');
    if (!word) {
      if (!cur.empty()) w.push_back(std::move(cur)), cur.clear();
      continue;
    }
    cur += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : ch;
  }
  if (!cur.empty()) w.push_back(std::move(cur));
  return w;
}

uint64_t hash_words(const std::vector<std::string>& w, size_t begin, size_t end) {
  uint64_t h = kFnvOffset;
  for (size_t i = begin; i < end; ++i) {
    h = fnv1a64(w[i], h);
    h = fnv1a64(" ", h);
  }
  return h;
}

struct UnionFind {
  std::vector<int64_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int64_t find(int64_t x) {
    while (parent[static_cast<size_t>(x)] != x)
      x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  }
  void join(int64_t a, int64_t b) {
    a = find(a), b = find(b);
    if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
};

// Every document's shingles as ids of distinct shingles, and each shingle's documents.
struct Index {
  std::vector<std::vector<uint32_t>> doc_shingles;  // per document: shingle ids
  std::vector<std::vector<uint32_t>> postings;      // per shingle id: documents
};

Index build_index(const std::vector<std::string_view>& docs) {
  std::vector<std::pair<uint64_t, uint32_t>> pairs;
  for (size_t i = 0; i < docs.size(); ++i)
    for (uint64_t h : shingles(docs[i])) pairs.emplace_back(h, static_cast<uint32_t>(i));
  std::sort(pairs.begin(), pairs.end());
  Index ix;
  ix.doc_shingles.resize(docs.size());
  for (size_t k = 0; k < pairs.size(); ++k) {
    if (k == 0 || pairs[k].first != pairs[k - 1].first) ix.postings.emplace_back();
    const auto id = static_cast<uint32_t>(ix.postings.size() - 1);
    ix.postings.back().push_back(pairs[k].second);
    ix.doc_shingles[pairs[k].second].push_back(id);
  }
  return ix;
}

// Share of each held-out document's shingles found in some train document.
std::vector<double> overlap_of(const Index& ix, const std::vector<Split>& split) {
  std::vector<char> in_train(ix.postings.size(), 0);
  for (size_t g = 0; g < ix.postings.size(); ++g)
    for (uint32_t d : ix.postings[g])
      if (split[d] == Split::Train) {
        in_train[g] = 1;
        break;
      }
  std::vector<double> out(split.size(), 0.0);
  for (size_t d = 0; d < split.size(); ++d) {
    if (split[d] == Split::Train || ix.doc_shingles[d].empty()) continue;
    size_t hit = 0;
    for (uint32_t g : ix.doc_shingles[d]) hit += in_train[g];
    out[d] = static_cast<double>(hit) / static_cast<double>(ix.doc_shingles[d].size());
  }
  return out;
}

}  // namespace

std::vector<uint64_t> shingles(std::string_view text) {
  const std::vector<std::string> w = words_of(text);
  std::vector<uint64_t> s;
  if (w.empty()) return s;
  if (w.size() < 8) {
    s.push_back(hash_words(w, 0, w.size()));
    return s;
  }
  for (size_t i = 0; i + 8 <= w.size(); ++i) s.push_back(hash_words(w, i, i + 8));
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

SplitResult split_by_cluster(const std::vector<std::string_view>& docs, const DedupOptions& o) {
  const Index ix = build_index(docs);
  const size_t n = docs.size();
  UnionFind uf(n);
  std::vector<uint32_t> shared(n, 0);
  std::vector<uint32_t> touched;
  for (size_t i = 0; i < n; ++i) {
    touched.clear();
    for (uint32_t g : ix.doc_shingles[i]) {
      const auto& p = ix.postings[g];
      if (p.size() < 2 || static_cast<int64_t>(p.size()) > o.max_df) continue;
      for (uint32_t j : p) {
        if (j <= i) continue;
        if (shared[j]++ == 0) touched.push_back(j);
      }
    }
    for (uint32_t j : touched) {
      const double smaller = static_cast<double>(
          std::min(ix.doc_shingles[i].size(), ix.doc_shingles[j].size()));
      if (static_cast<double>(shared[j]) >= o.link_containment * smaller)
        uf.join(static_cast<int64_t>(i), j);
      shared[j] = 0;
    }
  }
  SplitResult r;
  r.cluster.resize(n);
  std::vector<uint64_t> key(n, ~uint64_t{0});
  std::vector<int64_t> size(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t root = uf.find(static_cast<int64_t>(i));
    r.cluster[i] = root;
    ++size[static_cast<size_t>(root)];
    // Key: the smallest hash of the members' normalised texts, independent of order.
    const std::vector<std::string> w = words_of(docs[i]);
    key[static_cast<size_t>(root)] =
        std::min(key[static_cast<size_t>(root)], hash_words(w, 0, w.size()));
  }
  r.split.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto root = static_cast<size_t>(r.cluster[i]);
    const uint64_t b = key[root] % 1000;
    r.split[i] = b < 900 ? Split::Train : b < 950 ? Split::Valid : Split::Test;
    if (root == i && size[root] > 1) ++r.clusters, r.clustered_docs += size[root];
  }
  // Held-out documents covered by several train documents together go to train, until
  // none is left (moving one adds its shingles to train).
  for (;;) {
    const std::vector<double> ov = overlap_of(ix, r.split);
    int64_t moved = 0;
    for (size_t i = 0; i < n; ++i)
      if (r.split[i] != Split::Train && ov[i] > o.max_train_overlap) {
        r.split[i] = Split::Train;
        ++moved;
      }
    if (moved == 0) break;
    r.moved_to_train += moved;
  }
  return r;
}

std::vector<double> train_overlap(const std::vector<std::string_view>& docs,
                                  const std::vector<Split>& split) {
  return overlap_of(build_index(docs), split);
}

}  // namespace cln::data
