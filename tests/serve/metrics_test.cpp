// The Prometheus text format, checked against the exposition written out by hand.
#include <gtest/gtest.h>

#include "clone/serve/metrics.h"

using cln::serve::Metrics;

TEST(Metrics, RendersCountersGaugesAndCumulativeHistograms) {
  Metrics m;
  m.describe("x_total", "counter", "Things.");
  m.describe("q", "gauge", "Queue.");
  m.describe_histogram("lat_seconds", "Latency.", {0.1, 1});
  m.add("x_total", 2, {{"outcome", "ok"}});
  m.add("x_total", 1.5, {{"outcome", "ok"}});
  m.add("x_total", 1, {{"outcome", "bad \"x\"\n"}});
  m.set("q", 4);
  m.set("q", 3);
  for (double v : {0.05, 0.1, 0.5, 7.0}) m.observe("lat_seconds", v);
  EXPECT_EQ(m.render(),
            "# HELP lat_seconds Latency.\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{le=\"0.1\"} 2\n"
            "lat_seconds_bucket{le=\"1\"} 3\n"
            "lat_seconds_bucket{le=\"+Inf\"} 4\n"
            "lat_seconds_sum 7.65\n"
            "lat_seconds_count 4\n"
            "# HELP q Queue.\n"
            "# TYPE q gauge\n"
            "q 3\n"
            "# HELP x_total Things.\n"
            "# TYPE x_total counter\n"
            "x_total{outcome=\"bad \\\"x\\\"\\n\"} 1\n"
            "x_total{outcome=\"ok\"} 3.5\n");
}

TEST(Metrics, AnUndescribedNameIsAnError) {
  Metrics m;
  EXPECT_THROW(m.add("nope", 1), std::exception);
  m.describe("c", "counter", "C.");
  EXPECT_THROW(m.add("c", -1), std::exception);  // counters only go up
}
