#include "clone/core/csv.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"

namespace cln {

CsvTable CsvTable::parse(std::string_view text, const std::string& origin) {
  CsvTable t;
  t.origin_ = origin;
  std::vector<std::vector<std::string>> records;
  std::vector<int> starts;
  std::vector<std::string> rec;
  std::string field;
  bool quoted = false, field_started = false;
  int line = 1, rec_line = 1;
  auto end_field = [&] {
    rec.push_back(std::move(field));
    field.clear();
    field_started = false;
  };
  auto end_record = [&] {
    end_field();
    // A blank line is no record.
    if (!(rec.size() == 1 && rec[0].empty())) {
      records.push_back(std::move(rec));
      starts.push_back(rec_line);
    }
    rec.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      if (field_started)
        fail(origin, ":", line, ": a quote inside an unquoted field (quote the whole field)");
      quoted = true;
      field_started = true;
    } else if (c == ',') {
      end_field();
    } else if (c == '\r') {
      // \r\n line ends
    } else if (c == '\n') {
      end_record();
      ++line;
      rec_line = line;
    } else {
      field += c;
      field_started = true;
    }
  }
  if (quoted) fail(origin, ":", rec_line, ": a quoted field is never closed");
  if (field_started || !rec.empty()) end_record();
  if (records.empty()) fail(origin, ": no header row");
  t.header_ = std::move(records[0]);
  for (size_t c = 0; c < t.header_.size(); ++c) {
    if (t.header_[c].empty()) fail(origin, ":", starts[0], ": column ", c + 1, " has no name");
    if (!t.index_.emplace(t.header_[c], c).second)
      fail(origin, ":", starts[0], ": column \"", t.header_[c], "\" appears twice");
  }
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != t.header_.size())
      fail(origin, ":", starts[r], ": ", records[r].size(), " fields, the header has ",
           t.header_.size());
    t.rows_.push_back(std::move(records[r]));
    t.lines_.push_back(starts[r]);
  }
  return t;
}

CsvTable CsvTable::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

const std::string& CsvTable::at(size_t r, const std::string& column) const {
  auto it = index_.find(column);
  if (it == index_.end()) fail(origin_, ": no column \"", column, "\"");
  if (r >= rows_.size()) fail(origin_, ": row ", r, " of ", rows_.size());
  return rows_[r][it->second];
}

double CsvTable::number(size_t r, const std::string& column) const {
  const std::string& s = at(r, column);
  if (s.empty()) fail(where(r), ": column \"", column, "\" is empty");
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || errno == ERANGE)
    fail(where(r), ": column \"", column, "\": \"", s, "\" is not a number");
  return v;
}

std::string CsvTable::where(size_t r) const {
  return origin_ + ":" + std::to_string(r < lines_.size() ? lines_[r] : 0);
}

}  // namespace cln
