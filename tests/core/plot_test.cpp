// The gnuplot helper: scripts for each kind of figure, a PNG drawn when gnuplot is there,
// and clear errors when it is not or when a script is wrong.
#include "clone/core/plot.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "clone/core/error.h"

namespace cln {
namespace {

namespace fs = std::filesystem;

fs::path work_dir() {
  fs::path d = fs::path(CLONE_BINARY_DIR) / "plot_test";
  fs::create_directories(d);
  return d;
}

bool is_png(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in && std::string(magic + 1, 3) == "PNG";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A loss curve as the trainer draws it: train loss (column 3) and validation (column 2 of
// another file) against the step.
plot::LinePlot loss_plot(const fs::path& d) {
  std::ofstream(d / "loss.csv") << "step,lr,loss\n1,0.001,5.5\n2,0.001,4.2\n3,0.001,3.9\n";
  std::ofstream(d / "valid.csv") << "step,loss\n2,4.4\n3,4.0\n";
  plot::LinePlot p;
  p.figure = {(d / "loss.png").string(), 900, 500};
  p.xlabel = "step", p.ylabel = "loss (nats/token)", p.title = "it's a loss curve";
  p.series = {{(d / "loss.csv").string(), 1, 3, "train", "lines lw 1"},
              {(d / "valid.csv").string(), 1, 2, "valid", "linespoints lw 2"},
              {(d / "absent.csv").string(), 1, 2, "absent", "lines"}};
  return p;
}

TEST(Plot, LineScriptPlotsEachExistingSeries) {
  const auto d = work_dir();
  const std::string s = plot::line_plot_script(loss_plot(d));
  EXPECT_NE(s.find("using 1:3 with lines lw 1 title 'train'"), std::string::npos) << s;
  EXPECT_NE(s.find("using 1:2 with linespoints lw 2 title 'valid'"), std::string::npos) << s;
  EXPECT_EQ(s.find("absent"), std::string::npos) << s;
  EXPECT_NE(s.find("set title 'it''s a loss curve'"), std::string::npos) << s;
  EXPECT_NE(s.find("set xlabel 'step'"), std::string::npos) << s;
  EXPECT_EQ(s.find("logscale"), std::string::npos) << s;
  EXPECT_NE(s.find("size 900,500"), std::string::npos) << s;
  plot::LinePlot none;
  none.figure.png = (d / "none.png").string();
  none.series = {{(d / "absent.csv").string(), 1, 2, "x", "lines"}};
  EXPECT_NE(error_of([&] { plot::line_plot_script(none); }).find("none of its CSV"),
            std::string::npos);
}

TEST(Plot, BarPanelsShareOneKey) {
  plot::Bars a{"p.csv", {"performance", "learned"}, 1000, "TPOT P50", "co-runner", "ms", true};
  plot::Bars b = a;
  b.title = "TPOT P99";
  const std::string s = plot::bar_chart_script({"x.png", 1300, 460}, {a, b});
  EXPECT_NE(s.find("set multiplot layout 1,2"), std::string::npos) << s;
  EXPECT_LT(s.find("unset key"), s.find("set key outside right top")) << s;
  EXPECT_NE(s.find("using ($2*1000):xtic(1) title 'performance'"), std::string::npos) << s;
  EXPECT_NE(s.find("using ($3*1000) title 'learned'"), std::string::npos) << s;
  const std::string one = plot::bar_chart_script({"y.png", 900, 460}, {a});
  EXPECT_EQ(one.find("multiplot"), std::string::npos) << one;
  EXPECT_EQ(one.find("unset key"), std::string::npos) << one;
}

TEST(Plot, HeatMapWithStrip) {
  plot::HeatMap h;
  h.figure = {"t.png", 1000, 620};
  h.csv = "t.csv", h.x = 1, h.y = 3, h.value = 5, h.strip_y = 6;
  const std::string s = plot::heat_map_script(h);
  EXPECT_NE(s.find("using 1:3:5 with image"), std::string::npos) << s;
  EXPECT_NE(s.find("using 1:6 with lines"), std::string::npos) << s;
  EXPECT_NE(s.find("stats 't.csv' every ::1 using 1 nooutput"), std::string::npos) << s;
  h.strip_y = 0;
  EXPECT_EQ(plot::heat_map_script(h).find("multiplot"), std::string::npos);
}

TEST(Plot, DrawsAPngWhenGnuplotIsThere) {
  if (!plot::gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
  const auto d = work_dir();
  fs::remove(d / "loss.png");
  plot::line_plot(loss_plot(d));
  EXPECT_TRUE(is_png(d / "loss.png"));
  // A broken script is an error carrying gnuplot's own complaint.
  const std::string e = error_of([] { plot::run_gnuplot("plot 'no-such-file.csv' using 1:2\n"); });
  EXPECT_NE(e.find("gnuplot failed"), std::string::npos) << e;
  EXPECT_NE(e.find("no-such-file.csv"), std::string::npos) << e;
}

TEST(Plot, SaysSoWhenGnuplotIsMissing) {
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  const fs::path empty = work_dir() / "empty-path";
  fs::create_directories(empty);
  setenv("PATH", empty.c_str(), 1);
  const bool available = plot::gnuplot_available();
  const std::string e = error_of([] { plot::run_gnuplot("set terminal dumb\n"); });
  setenv("PATH", saved.c_str(), 1);
  EXPECT_FALSE(available);
  EXPECT_NE(e.find("gnuplot not found"), std::string::npos) << e;
  EXPECT_NE(e.find("gnuplot-nox"), std::string::npos) << e;
}

}  // namespace
}  // namespace cln
