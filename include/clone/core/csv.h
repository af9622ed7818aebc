// Reading CSV as RFC 4180 writes it: a header row, then records; fields may be quoted
// ("..."), a quoted field may hold commas, line breaks and doubled quotes (""). Used for
// measurement tables from elsewhere (data/jetson-public/). Every error names the file and
// the line: "nvpmodel.csv:7: 12 fields, the header has 13".
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cln {

class CsvTable {
 public:
  // origin names the text in errors (a file name).
  static CsvTable parse(std::string_view text, const std::string& origin);
  static CsvTable load(const std::string& path);

  const std::vector<std::string>& header() const { return header_; }
  size_t size() const { return rows_.size(); }
  bool has(const std::string& column) const { return index_.count(column) != 0; }
  // The cell of row r in the named column; an unknown column is an error naming it.
  const std::string& at(size_t r, const std::string& column) const;
  // The cell as a number; empty or not a number is an error naming file, line and column.
  double number(size_t r, const std::string& column) const;
  bool empty(size_t r, const std::string& column) const { return at(r, column).empty(); }
  // "file:line" of row r, for the caller's own errors.
  std::string where(size_t r) const;

 private:
  std::string origin_;
  std::vector<std::string> header_;
  std::map<std::string, size_t> index_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<int> lines_;  // line where each row starts
};

}  // namespace cln
