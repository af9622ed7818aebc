// One output schema for every benchmark and experiment (engine bench, training bench,
// device simulator, experiments): named columns, rows of values, printed as markdown
// for people or written as CSV / JSON for plots and scripts.
#pragma once

#include <cstdio>
#include <string>
#include <variant>
#include <vector>

namespace cln {

class Table {
 public:
  using Cell = std::variant<std::string, double, long long>;

  explicit Table(std::vector<std::string> columns) : cols_(std::move(columns)) {}
  // Adds a row; throws cln::Error if the number of cells differs from the columns.
  void add(std::vector<Cell> row);
  // Digits after the point for doubles in markdown (CSV/JSON keep full precision).
  void set_precision(int digits) { precision_ = digits; }

  std::string markdown() const;
  std::string csv() const;
  std::string json() const;  // array of objects, one per row
  // "md", "csv" or "json"
  std::string format(const std::string& fmt) const;
  void write(const std::string& path) const;  // format chosen by extension (.csv, .json, else md)

  const std::vector<std::string>& columns() const { return cols_; }
  const std::vector<std::vector<Cell>>& rows() const { return rows_; }

 private:
  std::vector<std::string> cols_;
  std::vector<std::vector<Cell>> rows_;
  int precision_ = 2;
};

}  // namespace cln
