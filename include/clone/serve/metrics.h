// Metrics in the Prometheus text exposition format (version 0.0.4): counters, gauges and
// histograms with labels, thread-safe, rendered for /metrics.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cln::serve {

class Metrics {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  void describe(const std::string& name, const std::string& type, const std::string& help);
  // Every name is described first; using one that was not, or as another type, throws.
  void add(const std::string& name, double v, const Labels& labels = {});  // counter, gauge
  void set(const std::string& name, double v, const Labels& labels = {});  // gauge
  // histogram with the buckets given at describe_histogram
  void describe_histogram(const std::string& name, const std::string& help,
                          std::vector<double> buckets);
  void observe(const std::string& name, double v, const Labels& labels = {});
  std::string render() const;

 private:
  struct Hist {
    std::vector<double> counts;  // per bucket (cumulative at render)
    double sum = 0;
    double count = 0;
  };
  struct Family {
    std::string type, help;
    std::vector<double> buckets;
    std::map<std::string, double> values;  // by rendered label set
    std::map<std::string, Hist> hists;
  };
  static std::string label_text(const Labels& l);
  Family& family(const std::string& name, const char* want);  // throws if not described
  mutable std::mutex mu_;
  std::map<std::string, Family> fam_;
};

}  // namespace cln::serve
