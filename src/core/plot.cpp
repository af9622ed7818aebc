#include "clone/core/plot.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"

namespace cln::plot {

namespace fs = std::filesystem;

namespace {

// A word the shell reads back unchanged.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

bool gnuplot_available() {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string exe = dir + "/gnuplot";
    if (::access(exe.c_str(), X_OK) == 0) return true;
  }
  return false;
}

void run_gnuplot(const std::string& script) {
  if (!gnuplot_available())
    fail(
        "gnuplot not found on $PATH: cannot draw PNG plots (install the Debian package "
        "gnuplot-nox, scripts/setup.sh does)");
  static std::atomic<int> counter{0};
  const fs::path base = fs::temp_directory_path() / ("clone-plot-" + std::to_string(::getpid()) +
                                                     "-" + std::to_string(counter++));
  const std::string gp = base.string() + ".gp", err = base.string() + ".err";
  {
    std::ofstream f(gp);
    if (!f) fail("cannot write the gnuplot script ", gp);
    f << script;
    if (!f) fail("error writing the gnuplot script ", gp);
  }
  const std::string cmd = "gnuplot " + shell_quote(gp) + " 2> " + shell_quote(err);
  const int rc = std::system(cmd.c_str());
  std::string msg = read_all(err);
  std::error_code ec;
  fs::remove(gp, ec);
  fs::remove(err, ec);
  if (rc != 0) {
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    fail("gnuplot failed (exit status ", rc, "): ", msg.empty() ? "no message" : msg);
  }
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string figure(const Figure& f) {
  std::ostringstream g;
  g << "set terminal pngcairo size " << f.width << "," << f.height << " font 'sans,11'\n"
    << "set output " << quote(f.png) << "\n";
  return g.str();
}

std::string line_plot_script(const LinePlot& p) {
  std::ostringstream g;
  g << figure(p.figure) << "set datafile separator ','\nset grid\nset key top right\n";
  if (!p.title.empty()) g << "set title " << quote(p.title) << "\n";
  g << "set xlabel " << quote(p.xlabel) << "\nset ylabel " << quote(p.ylabel) << "\nplot ";
  int n = 0;
  for (const auto& s : p.series) {
    if (!fs::exists(s.csv)) continue;
    g << (n++ ? ", " : "") << quote(s.csv) << " every ::1 using " << s.x << ":" << s.y << " with "
      << s.style << " title " << quote(s.title);
  }
  if (n == 0) fail("line plot ", p.figure.png, ": none of its CSV files exists");
  g << "\n";
  return g.str();
}

void line_plot(const LinePlot& p) {
  run_gnuplot(line_plot_script(p));
}

std::string bar_style() {
  return "set style data histograms\nset style histogram cluster gap 1\n"
         "set style fill solid 0.85 border -1\nset datafile separator ','\n"
         "set yrange [0:*]\nset grid ytics\n";
}

std::string bar_plot(const Bars& b) {
  if (b.series.empty()) fail("bar chart ", b.title, ": no series");
  std::ostringstream g;
  g << (b.key ? "set key outside right top\n" : "unset key\n") << "set title " << quote(b.title)
    << "\nset xlabel " << quote(b.xlabel) << "\nset ylabel " << quote(b.ylabel) << "\nplot ";
  for (size_t c = 0; c < b.series.size(); ++c)
    g << (c ? ", " : "") << quote(b.csv) << " every ::1 using ($" << c + 2 << "*" << b.scale << ")"
      << (c == 0 ? ":xtic(1)" : "") << " title " << quote(b.series[c]);
  g << "\n";
  return g.str();
}

std::string bar_chart_script(const Figure& f, const std::vector<Bars>& panels) {
  if (panels.empty()) fail("bar chart ", f.png, ": no panels");
  std::ostringstream g;
  g << figure(f) << bar_style();
  if (panels.size() > 1) g << "set multiplot layout 1," << panels.size() << "\n";
  for (size_t i = 0; i < panels.size(); ++i) {
    Bars b = panels[i];
    if (panels.size() > 1 && i + 1 < panels.size()) b.key = false;
    g << bar_plot(b);
  }
  if (panels.size() > 1) g << "unset multiplot\n";
  return g.str();
}

std::string heat_map_script(const HeatMap& h) {
  std::ostringstream g;
  const std::string csv = quote(h.csv);
  g << figure(h.figure) << "set datafile separator ','\n"
    << "stats " << csv << " every ::1 using " << h.x << " nooutput\n"
    << "set xrange [-0.5:STATS_max + 0.5]\n";
  const bool strip = h.strip_y > 0;
  if (strip)
    g << "set multiplot\nset lmargin at screen 0.08\nset rmargin at screen 0.86\n"
      << "set tmargin at screen 0.92\nset bmargin at screen 0.40\nset format x ''\n";
  else
    g << "set xlabel " << quote(h.strip_xlabel) << "\n";
  g << "set title " << quote(h.title) << "\nset ylabel " << quote(h.ylabel) << "\nset cblabel "
    << quote(h.cblabel) << "\nset view map\nset palette rgbformulae 33,13,10\n"
    << "set autoscale yfix\n"
    << "plot " << csv << " every ::1 using " << h.x << ":" << h.y << ":" << h.value
    << " with image notitle\n";
  if (strip)
    g << "unset title\nset tmargin at screen 0.36\nset bmargin at screen 0.10\n"
      << "set format x '%g'\nset xlabel " << quote(h.strip_xlabel) << "\nset ylabel "
      << quote(h.strip_ylabel) << "\nset yrange [0:" << h.strip_max << "]\n"
      << "set ytics 0,0.5,1\nset grid ytics\n"
      << "plot " << csv << " every ::1 using " << h.x << ":" << h.strip_y
      << " with lines lw 2 lc rgb '#444444' notitle\nunset multiplot\n";
  return g.str();
}

}  // namespace cln::plot
