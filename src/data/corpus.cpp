// Readers that turn each Debian source into clean documents, and the generated tasks.
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

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> t = {"arithmetic", "wordnet_pos"};
  return t;
}

std::string read_file_maybe_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files unchanged
  if (!f) fail("cannot open ", path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      gzclose(f);
      fail("cannot read ", path, " (corrupt compressed data?)");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  gzclose(f);
  return out;
}

uint64_t dictd_b64(std::string_view s) {
  static const std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint64_t v = 0;
  for (char c : s) {
    const size_t d = alphabet.find(c);
    if (d == std::string_view::npos) fail("bad dictd index number '", s, "'");
    v = v * 64 + d;
  }
  return v;
}

static std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

static std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  size_t p = 0;
  while (p <= text.size()) {
    size_t e = text.find('\n', p);
    if (e == std::string_view::npos) e = text.size();
    out.push_back(text.substr(p, e - p));
    p = e + 1;
  }
  return out;
}

std::string reflow(std::string_view text) {
  std::string out, para;
  auto flush = [&] {
    if (para.empty()) return;
    if (!out.empty()) out += '\n';
    out += para;
    para.clear();
  };
  for (std::string_view line : lines_of(text)) {
    line = trim(line);
    if (line.empty()) {
      flush();
      continue;
    }
    if (!para.empty()) para += ' ';
    para += line;
  }
  flush();
  return out;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len;
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if ((c >> 4) == 0xE) {
      len = 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += len;
  }
  return true;
}

// Removes {braces} that mark cross references, keeping the words.
static std::string strip_braces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s)
    if (c != '{' && c != '}') out += c;
  return out;
}

// Removes bracketed source tags such as "[1913 Webster]" or "[WordNet 1.5 +PJC]".
static std::string strip_source_tags(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '[') {
      const size_t e = s.find(']', i);
      if (e != std::string_view::npos && e - i < 40) {
        std::string_view tag = s.substr(i, e - i + 1);
        if (tag.find("Webster") != std::string_view::npos ||
            tag.find("WordNet") != std::string_view::npos ||
            tag.find("PJC") != std::string_view::npos || tag.find("Century") != tag.npos) {
          i = e + 1;
          continue;
        }
      }
    }
    out += s[i++];
  }
  return out;
}

// Entries of a dictd database, deduplicated by position, in file order; the
// 00-database-* header entries are skipped.
static std::vector<std::string> dictd_entries(const std::string& dict_path,
                                              const std::string& index_path) {
  const std::string dict = read_file_maybe_gz(dict_path);
  const std::string index = read_file_maybe_gz(index_path);
  std::map<uint64_t, uint64_t> spans;  // offset -> length
  for (std::string_view line : lines_of(index)) {
    if (line.empty()) continue;
    const size_t t1 = line.find('\t');
    const size_t t2 = t1 == line.npos ? line.npos : line.find('\t', t1 + 1);
    if (t2 == line.npos) fail(index_path, ": malformed index line '", line, "'");
    const std::string_view word = line.substr(0, t1);
    if (word.starts_with("00-database") || word.starts_with("00database")) continue;
    const uint64_t off = dictd_b64(line.substr(t1 + 1, t2 - t1 - 1));
    const uint64_t len = dictd_b64(line.substr(t2 + 1));
    if (off + len > dict.size())
      fail(index_path, ": entry '", word, "' points past the end of ", dict_path);
    spans.emplace(off, len);
  }
  std::vector<std::string> out;
  out.reserve(spans.size());
  for (auto [off, len] : spans) out.emplace_back(dict.substr(off, len));
  return out;
}

static std::vector<std::string> read_gcide(const SourcePaths& p) {
  std::vector<std::string> docs;
  for (const std::string& e : dictd_entries(p.gcide_dict, p.gcide_index)) {
    std::string d = reflow(strip_source_tags(e));
    if (d.size() >= 16) docs.push_back(std::move(d));
  }
  return docs;
}

static bool is_date_line(std::string_view s) {  // FOLDOC's "(1994-11-08)"
  s = trim(s);
  return s.size() == 12 && s.front() == '(' && s.back() == ')' && s[5] == '-' && s[8] == '-';
}

static std::vector<std::string> read_foldoc(const SourcePaths& p) {
  std::vector<std::string> docs;
  for (const std::string& e : dictd_entries(p.foldoc_dict, p.foldoc_index)) {
    std::string kept;
    for (std::string_view line : lines_of(e)) {
      if (is_date_line(line)) continue;
      kept.append(line);
      kept += '\n';
    }
    std::string d = reflow(strip_braces(kept));
    if (d.size() >= 16) docs.push_back(std::move(d));
  }
  return docs;
}

// The Jargon File's glossary: an entry starts at a line "   :headword: ..." and runs to
// the next one; the glossary ends where the appendices begin.
static std::vector<std::string> read_jargon(const SourcePaths& p) {
  const std::string text = read_file_maybe_gz(p.jargon_txt);
  std::vector<std::string> docs;
  std::string cur;
  bool in_entry = false;
  auto flush = [&] {
    if (in_entry) {
      std::string d = reflow(strip_braces(cur));
      if (d.size() >= 16) docs.push_back(std::move(d));
    }
    cur.clear();
  };
  for (std::string_view line : lines_of(text)) {
    const std::string_view t = trim(line);
    const bool head = line.starts_with("   :") && t.size() > 2 && t.find(':', 1) != t.npos;
    if (head) {
      flush();
      in_entry = true;
      const size_t c = t.find(':', 1);
      cur = std::string(t.substr(1, c - 1));  // "headword: /pron/, n." reads better
      cur += ':';
      cur += t.substr(c + 1);
      cur += "\n\n";
      continue;
    }
    if (in_entry && (t.starts_with("Appendix A") || t == "Appendix A. Hacker Folklore")) {
      flush();
      in_entry = false;
      continue;
    }
    if (in_entry) {
      cur.append(line);
      cur += '\n';
    }
  }
  flush();
  return docs;
}

// KJV through the `bible` tool: one document per chapter, one verse per line.
static std::vector<std::string> read_kjv(const SourcePaths& p) {
  const std::string cmd = p.bible_cmd + " -l 100000 Gen1:1-Rev22:21 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) fail("cannot run '", cmd, "' (install bible-kjv)");
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const int rc = pclose(f);
  if (rc != 0 || text.size() < 1000)
    fail("'", cmd, "' failed (install bible-kjv and bible-kjv-text): ", text.substr(0, 200));
  std::vector<std::string> docs;
  std::string cur;
  for (std::string_view line : lines_of(text)) {
    const std::string_view t = trim(line);
    if (t.empty()) continue;
    if (!line.starts_with(" ")) {  // "Genesis 1": a new chapter
      if (!cur.empty()) docs.push_back(std::move(cur));
      cur = std::string(t);
      continue;
    }
    size_t i = 0;  // drop the verse number
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    cur += '\n';
    cur += trim(t.substr(i));
  }
  if (!cur.empty()) docs.push_back(std::move(cur));
  return docs;
}

// Every fortune file except pictures; fortunes are separated by lines holding "%".
static std::vector<std::string> read_fortunes(const SourcePaths& p) {
  std::vector<fs::path> files;
  if (!fs::is_directory(p.fortunes_dir)) fail("no fortunes in ", p.fortunes_dir);
  for (const auto& e : fs::directory_iterator(p.fortunes_dir)) {
    const fs::path& f = e.path();
    if (!e.is_regular_file() || e.is_symlink() || f.has_extension()) continue;
    const std::string name = f.filename().string();
    if (name == "art" || name == "ascii-art") continue;
    files.push_back(f);
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> docs;
  for (const fs::path& f : files) {
    const std::string text = read_file_maybe_gz(f.string());
    std::string cur;
    auto flush = [&] {
      // keep the layout (quotes and attributions), drop trailing blanks
      while (!cur.empty() && (cur.back() == '\n' || cur.back() == ' ')) cur.pop_back();
      size_t b = 0;
      while (b < cur.size() && cur[b] == '\n') ++b;
      std::string d = cur.substr(b);
      std::replace(d.begin(), d.end(), '\t', ' ');
      if (d.size() >= 8 && valid_utf8(d)) docs.push_back(std::move(d));
      cur.clear();
    };
    for (std::string_view line : lines_of(text)) {
      if (trim(line) == "%") {
        flush();
        continue;
      }
      std::string_view l = line;
      while (!l.empty() && (l.back() == ' ' || l.back() == '\r')) l.remove_suffix(1);
      cur.append(l);
      cur += '\n';
    }
    flush();
  }
  return docs;
}

static std::string underscores_to_spaces(std::string_view s) {
  std::string o(s);
  std::replace(o.begin(), o.end(), '_', ' ');
  return o;
}

// One document per synset: "word, other word (noun): gloss".
static std::vector<std::string> read_wordnet(const SourcePaths& p) {
  std::vector<std::string> docs;
  const std::pair<const char*, const char*> files[] = {{"data.noun", "noun"},
                                                       {"data.verb", "verb"},
                                                       {"data.adj", "adjective"},
                                                       {"data.adv", "adverb"}};
  for (auto [file, pos] : files) {
    const std::string text = read_file_maybe_gz(p.wordnet_dir + "/" + file);
    for (std::string_view line : lines_of(text)) {
      if (line.empty() || line.starts_with("  ")) continue;  // license header
      const size_t bar = line.find(" | ");
      if (bar == line.npos) continue;
      std::istringstream is{std::string(line.substr(0, bar))};
      std::string offset, lex, type, cnt_hex;
      is >> offset >> lex >> type >> cnt_hex;
      const long cnt = std::strtol(cnt_hex.c_str(), nullptr, 16);
      std::string words;
      for (long k = 0; k < cnt; ++k) {
        std::string w, lex_id;
        is >> w >> lex_id;
        const size_t paren = w.find('(');  // adjective markers like "(p)"
        if (paren != w.npos) w.resize(paren);
        if (!words.empty()) words += ", ";
        words += underscores_to_spaces(w);
      }
      std::string d = words + " (" + pos + "): " + std::string(trim(line.substr(bar + 3)));
      docs.push_back(std::move(d));
    }
  }
  return docs;
}

static std::vector<std::string> read_python(const SourcePaths& p) {
  std::vector<fs::path> files;
  if (!fs::is_directory(p.python_dir)) fail("no Python library at ", p.python_dir);
  for (auto it = fs::recursive_directory_iterator(p.python_dir); it != fs::end(it); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (name == "__pycache__" || name == "site-packages" ||
                               name == "dist-packages" || name == "test" || name == "tests")) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && !it->is_symlink() && it->path().extension() == ".py")
      files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> docs;
  for (const fs::path& f : files) {
    std::string d = read_file_maybe_gz(f.string());
    while (!d.empty() && (d.back() == '\n' || d.back() == ' ')) d.pop_back();
    if (d.size() < 64 || d.size() > 256 * 1024 || !valid_utf8(d)) continue;
    docs.push_back(std::move(d));
  }
  return docs;
}

std::vector<std::string> read_domain(const std::string& domain, const SourcePaths& p) {
  std::vector<std::string> raw;
  if (domain == "dictionary") {
    raw = read_gcide(p);
  } else if (domain == "computing") {
    raw = read_foldoc(p);
    for (auto& d : read_jargon(p)) raw.push_back(std::move(d));
  } else if (domain == "scripture") {
    raw = read_kjv(p);
  } else if (domain == "quotes") {
    raw = read_fortunes(p);
  } else if (domain == "wordnet") {
    raw = read_wordnet(p);
  } else if (domain == "code") {
    raw = read_python(p);
  } else {
    fail("unknown domain '", domain, "'");
  }
  std::vector<std::string> docs;
  std::unordered_set<uint64_t> seen;
  for (auto& d : raw) {
    if (!valid_utf8(d)) continue;
    if (seen.insert(fnv1a64(d)).second) docs.push_back(std::move(d));
  }
  return docs;
}

// Words listed under exactly one part of speech, single words of lower-case letters.
static std::vector<TaskItem> make_wordnet_pos(const SourcePaths& p) {
  std::map<std::string, std::set<std::string>> pos_of;
  const std::pair<const char*, const char*> files[] = {{"index.noun", "noun"},
                                                       {"index.verb", "verb"},
                                                       {"index.adj", "adjective"},
                                                       {"index.adv", "adverb"}};
  for (auto [file, pos] : files) {
    const std::string text = read_file_maybe_gz(p.wordnet_dir + "/" + file);
    for (std::string_view line : lines_of(text)) {
      if (line.empty() || line.starts_with("  ")) continue;
      const std::string_view w = line.substr(0, line.find(' '));
      pos_of[std::string(w)].insert(pos);
    }
  }
  std::vector<TaskItem> items;
  for (const auto& [w, set] : pos_of) {
    if (set.size() != 1 || w.size() < 3) continue;
    if (!std::all_of(w.begin(), w.end(), [](char c) { return c >= 'a' && c <= 'z'; })) continue;
    items.push_back({"Word: " + w + "\nPart of speech:", " " + *set.begin()});
  }
  return items;
}

std::vector<TaskItem> make_task(const std::string& task, const SourcePaths& p) {
  std::vector<TaskItem> items;
  if (task == "arithmetic") {
    for (int a = 0; a < 100; ++a)
      for (int b = 0; b < 100; ++b) {
        items.push_back({std::to_string(a) + "+" + std::to_string(b) + "=", std::to_string(a + b)});
        if (a >= b)
          items.push_back(
              {std::to_string(a) + "-" + std::to_string(b) + "=", std::to_string(a - b)});
      }
  } else if (task == "wordnet_pos") {
    items = make_wordnet_pos(p);
  } else {
    fail("unknown task '", task, "'");
  }
  return items;
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

void build_corpora(const BuildOptions& o) {
  nlohmann::json manifest;
  for (const std::string& domain : domain_names()) {
    const std::vector<std::string> docs = read_domain(domain, o.paths);
    if (docs.empty()) fail("domain '", domain, "' has no documents (are its packages installed?)");
    std::string out[3];
    size_t count[3] = {0, 0, 0}, bytes[3] = {0, 0, 0};
    for (const std::string& d : docs) {
      const int s = static_cast<int>(split_of(d));
      out[s] += nlohmann::json{{"text", d}}.dump() + "\n";
      ++count[s];
      bytes[s] += d.size();
    }
    const fs::path dir = fs::path(o.out) / "corpus" / domain;
    fs::create_directories(dir);
    for (int s = 0; s < 3; ++s) {
      const std::string name{split_name(static_cast<Split>(s))};
      write_atomic(dir / (name + ".jsonl"), out[s]);
      manifest["corpus"][domain][name] = {{"documents", count[s]}, {"bytes", bytes[s]}};
    }
    if (o.verbose)
      std::fprintf(
          stderr, "data: %-10s %7zu documents, %6.1f MB (train %zu, valid %zu, test %zu)\n",
          domain.c_str(), docs.size(), static_cast<double>(bytes[0] + bytes[1] + bytes[2]) / 1e6,
          count[0], count[1], count[2]);
  }
  for (const std::string& task : task_names()) {
    const std::vector<TaskItem> items = make_task(task, o.paths);
    if (items.empty()) fail("task '", task, "' has no items");
    std::string out[3];
    size_t count[3] = {0, 0, 0};
    for (const TaskItem& it : items) {
      const int s = static_cast<int>(split_of(it.prompt));
      out[s] +=
          nlohmann::json{
              {"prompt", it.prompt}, {"answer", it.answer}, {"text", it.prompt + it.answer}}
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
      std::fprintf(stderr, "data: task %-12s %6zu items (train %zu, valid %zu, test %zu)\n",
                   task.c_str(), items.size(), count[0], count[1], count[2]);
  }
  write_atomic(fs::path(o.out) / "manifest.json", manifest.dump(2) + "\n");
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
