// Every PNG clone draws goes through gnuplot (Debian's gnuplot-nox): run_gnuplot() runs a
// script and reports what went wrong, and the building blocks below write the scripts for
// the kinds of figure clone draws: line plots of CSV columns (loss curves), clustered bars
// of a pivot CSV (one cluster per row, one bar per column), and a heat map of a CSV's
// (x, y, value) columns. Scripts are returned as text so they can be combined (panels) and
// checked; draw them with run_gnuplot().
#pragma once

#include <string>
#include <vector>

namespace cln::plot {

// True when a `gnuplot` executable is on $PATH.
bool gnuplot_available();

// Runs gnuplot on `script`. Throws cln::Error when gnuplot is not installed (saying so and
// naming the package) or when it fails (with gnuplot's own message).
void run_gnuplot(const std::string& script);

// The PNG a script draws into: terminal, size and font, output file.
struct Figure {
  std::string png;
  int width = 900, height = 500;
};
std::string figure(const Figure& f);

// gnuplot's single-quoted string literal ('' escapes a quote).
std::string quote(const std::string& s);

// One curve: column y against column x (1-based) of a CSV with a header row.
struct Series {
  std::string csv;
  int x = 1, y = 2;
  std::string title;
  std::string style = "lines lw 1";  // e.g. "linespoints lw 2"
};
struct LinePlot {
  Figure figure;
  std::string title, xlabel, ylabel;
  std::vector<Series> series;  // files that do not exist are left out
};
std::string line_plot_script(const LinePlot& p);
void line_plot(const LinePlot& p);  // run_gnuplot(line_plot_script(p))

// Clustered bars of a pivot CSV: header row, then one row per cluster, the first column its
// label, columns 2.. the bars (titled `series`, in order); values multiplied by `scale`.
struct Bars {
  std::string csv;
  std::vector<std::string> series;
  double scale = 1;
  std::string title, xlabel, ylabel;
  bool key = true;
};
// The style block every bar chart shares (histogram style, CSV separator, grid).
std::string bar_style();
// The key, title, axis labels and plot command of one chart (after bar_style()).
std::string bar_plot(const Bars& b);
// Charts side by side in one PNG, one panel per Bars (the key on the last only when several).
std::string bar_chart_script(const Figure& f, const std::vector<Bars>& panels);

// A heat map of a CSV with a header row: x, y and value columns (1-based), drawn as an
// image, with an optional strip below sharing the x axis (a line of column `strip_y`).
struct HeatMap {
  Figure figure;
  std::string csv;
  int x = 1, y = 2, value = 3;
  std::string title, ylabel, cblabel;
  int strip_y = 0;  // 0: no strip
  std::string strip_xlabel, strip_ylabel;
  double strip_max = 1.05;
};
std::string heat_map_script(const HeatMap& h);

}  // namespace cln::plot
