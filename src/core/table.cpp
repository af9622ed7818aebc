#include "clone/core/table.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"

namespace cln {

namespace {
std::string cell_text(const Table::Cell& c, int precision, bool full) {
  if (auto* s = std::get_if<std::string>(&c)) return *s;
  if (auto* i = std::get_if<long long>(&c)) return std::to_string(*i);
  const double d = std::get<double>(c);
  if (!std::isfinite(d)) return std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");
  char buf[64];
  if (full)
    std::snprintf(buf, sizeof buf, "%.9g", d);
  else
    std::snprintf(buf, sizeof buf, "%.*f", precision, d);
  return buf;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

std::string json_escape(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}
}  // namespace

void Table::add(std::vector<Cell> row) {
  if (row.size() != cols_.size())
    fail("table: row has ", row.size(), " cells for ", cols_.size(), " columns");
  rows_.push_back(std::move(row));
}

std::string Table::markdown() const {
  std::vector<size_t> w(cols_.size());
  for (size_t j = 0; j < cols_.size(); ++j) w[j] = cols_[j].size();
  for (const auto& r : rows_)
    for (size_t j = 0; j < r.size(); ++j) w[j] = std::max(w[j], cell_text(r[j], precision_, false).size());
  std::ostringstream os;
  auto line = [&](auto get) {
    os << "|";
    for (size_t j = 0; j < cols_.size(); ++j) {
      std::string s = get(j);
      os << " " << s << std::string(w[j] - s.size(), ' ') << " |";
    }
    os << "\n";
  };
  line([&](size_t j) { return cols_[j]; });
  line([&](size_t j) { return std::string(w[j], '-'); });
  for (const auto& r : rows_) line([&](size_t j) { return cell_text(r[j], precision_, false); });
  return os.str();
}

std::string Table::csv() const {
  std::ostringstream os;
  for (size_t j = 0; j < cols_.size(); ++j) os << (j ? "," : "") << csv_escape(cols_[j]);
  os << "\n";
  for (const auto& r : rows_) {
    for (size_t j = 0; j < r.size(); ++j) os << (j ? "," : "") << csv_escape(cell_text(r[j], 0, true));
    os << "\n";
  }
  return os.str();
}

std::string Table::json() const {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < rows_.size(); ++i) {
    os << (i ? ",\n " : "\n ") << "{";
    for (size_t j = 0; j < cols_.size(); ++j) {
      os << (j ? ", " : "") << json_escape(cols_[j]) << ": ";
      const Cell& c = rows_[i][j];
      if (std::holds_alternative<std::string>(c)) {
        os << json_escape(std::get<std::string>(c));
      } else {
        const std::string t = cell_text(c, 0, true);
        os << (t == "nan" || t == "inf" || t == "-inf" ? "null" : t);
      }
    }
    os << "}";
  }
  os << "\n]\n";
  return os.str();
}

std::string Table::format(const std::string& fmt) const {
  if (fmt == "md" || fmt == "markdown") return markdown();
  if (fmt == "csv") return csv();
  if (fmt == "json") return json();
  fail("unknown output format '", fmt, "' (md, csv, json)");
}

void Table::write(const std::string& path) const {
  const std::string fmt = path.ends_with(".csv") ? "csv" : path.ends_with(".json") ? "json" : "md";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) fail(path, ": cannot write");
    out << format(fmt);
    if (!out) fail(path, ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, ": cannot rename into place");
}

}  // namespace cln
