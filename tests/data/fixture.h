// A tiny synthetic corpus in every domain, its tokenizer and token files, built once
// per test binary in a temporary folder.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "clone/core/rng.h"
#include "clone/data/corpus.h"
#include "clone/data/token_file.h"
#include "clone/data/tokenizer_train.h"

namespace cln::data::testing {

// A whole file's bytes ("" when it is missing).
inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline std::string temp_dir(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("clone-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

inline void write_docs(const std::string& path, const std::vector<std::string>& docs) {
  std::ofstream f(path);
  for (const auto& d : docs) f << nlohmann::json{{"text", d}}.dump() << "\n";
}

// Writes corpus/<domain>/{train,valid,test}.jsonl with simple sentences, trains a
// 300-token tokenizer and encodes the corpora.
inline std::string tiny_data(const std::string& name, int vocab = 300) {
  const std::string dir = temp_dir(name);
  static const char* words[] = {"the", "cat",  "sat",  "on",   "mat",   "and",  "dog",  "ran",
                                "far", "away", "from", "home", "light", "word", "code", "def"};
  Rng rng(42);
  for (const std::string& d : domain_names()) {
    std::filesystem::create_directories(std::filesystem::path(dir) / "corpus" / d);
    for (const char* split : {"train", "valid", "test"}) {
      std::vector<std::string> docs;
      const int n = std::string(split) == "train" ? 120 : 20;
      for (int i = 0; i < n; ++i) {
        std::string s = d + ":";
        const int len = 5 + static_cast<int>(rng.next() % 20);
        for (int k = 0; k < len; ++k) s += std::string(" ") + words[rng.next() % 16];
        s += " " + std::to_string(rng.next() % 100) + ".";
        docs.push_back(s);
      }
      write_docs(
          (std::filesystem::path(dir) / "corpus" / d / (std::string(split) + ".jsonl")).string(),
          docs);
    }
  }
  TokenizerTrainOptions t;
  t.data_dir = dir;
  t.vocab_size = vocab;
  t.verbose = false;
  t.threads = 1;
  const std::string model = train_tokenizer(t);
  encode_corpora(dir, model, false);
  return dir;
}

}  // namespace cln::data::testing
