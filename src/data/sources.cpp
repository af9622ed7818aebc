// Readers that turn each Debian source into clean documents.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_set>

#include "clone/core/error.h"
#include "clone/core/hash.h"
#include "clone/data/corpus.h"

namespace cln::data {
namespace fs = std::filesystem;

bool is_data_line(std::string_view line) {
  size_t i = 0;
  bool any = false;
  while (i < line.size()) {
    const char c = line[i];
    if (c == ' ' || c == '\t' || c == ',' || c == ':' || c == '(' || c == ')' || c == '[' ||
        c == ']' || c == '{' || c == '}') {
      ++i;
    } else if (c == '#') {
      break;  // a trailing comment
    } else if (c == '\'' || c == '"' ||
               ((c == 'u' || c == 'b' || c == 'r' || c == 'U' || c == 'B' || c == 'R') &&
                i + 1 < line.size() && (line[i + 1] == '\'' || line[i + 1] == '"'))) {
      if (c != '\'' && c != '"') ++i;
      const char q = line[i++];
      while (i < line.size() && line[i] != q) i += line[i] == '\\' ? 2 : 1;
      if (i >= line.size()) return false;  // not a one-line literal
      ++i;
      any = true;
    } else if ((c >= '0' && c <= '9') || c == '-' || c == '.') {
      while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) ||
                                 line[i] == '.' || line[i] == '-' || line[i] == '_'))
        ++i;
      any = true;
    } else {
      return false;
    }
  }
  return any;
}

bool is_generated_data(std::string_view source) {
  if (source.size() < 1024) return false;
  int64_t code = 0, data = 0;
  size_t start = 0;
  while (start < source.size()) {
    size_t end = source.find('\n', start);
    if (end == std::string_view::npos) end = source.size();
    std::string_view line = source.substr(start, end - start);
    start = end + 1;
    const size_t f = line.find_first_not_of(" \t");
    if (f == std::string_view::npos || line[f] == '#') continue;  // blank or comment
    ++code;
    data += is_data_line(line);
  }
  return code > 0 && static_cast<double>(data) >= 0.6 * static_cast<double>(code);
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

std::vector<std::string> read_domain(const std::string& domain, const SourcePaths& p,
                                     bool keep_generated) {
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
    if (!keep_generated)  // codec tables, entity lists, sysconfig dumps: data, not code
      std::erase_if(raw, [](const std::string& d) { return is_generated_data(d); });
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

}  // namespace cln::data
