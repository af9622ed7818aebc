#include "clone/serve/metrics.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "clone/core/error.h"

namespace cln::serve {

std::string Metrics::label_text(const Labels& l) {
  std::string s;
  for (const auto& [k, v] : l) {
    std::string e;
    for (char c : v) {
      if (c == '\\' || c == '"') e += '\\';
      if (c == '\n') {
        e += "\\n";
        continue;
      }
      e += c;
    }
    s += (s.empty() ? "" : ",") + k + "=\"" + e + "\"";
  }
  return s;
}

void Metrics::describe(const std::string& name, const std::string& type, const std::string& help) {
  std::lock_guard<std::mutex> lock(mu_);
  fam_[name].type = type;
  fam_[name].help = help;
}

void Metrics::describe_histogram(const std::string& name, const std::string& help,
                                 std::vector<double> buckets) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = fam_[name];
  f.type = "histogram";
  f.help = help;
  f.buckets = std::move(buckets);
}

Metrics::Family& Metrics::family(const std::string& name, const char* want) {
  const auto it = fam_.find(name);
  if (it == fam_.end()) fail("metrics: '", name, "' was not described");
  if (want && it->second.type != want)
    fail("metrics: '", name, "' is a ", it->second.type, ", not a ", want);
  return it->second;
}

void Metrics::add(const std::string& name, double v, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name, nullptr);
  if (f.type == "histogram") fail("metrics: '", name, "' is a histogram: observe() it");
  if (f.type == "counter" && !(v >= 0)) fail("metrics: counter '", name, "' cannot go down");
  f.values[label_text(labels)] += v;
}

void Metrics::set(const std::string& name, double v, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  family(name, "gauge").values[label_text(labels)] = v;
}

void Metrics::observe(const std::string& name, double v, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name, "histogram");
  Hist& h = f.hists[label_text(labels)];
  h.counts.resize(f.buckets.size(), 0);
  for (size_t i = 0; i < f.buckets.size(); ++i)
    if (v <= f.buckets[i]) {
      ++h.counts[i];
      break;
    }
  h.sum += v;
  h.count += 1;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream o;
  o.precision(10);
  for (const auto& [name, f] : fam_) {
    o << "# HELP " << name << " " << f.help << "\n# TYPE " << name << " " << f.type << "\n";
    for (const auto& [l, v] : f.values)
      o << name << (l.empty() ? "" : "{" + l + "}") << " " << v << "\n";
    for (const auto& [l, h] : f.hists) {
      double cum = 0;
      const std::string sep = l.empty() ? "" : l + ",";
      for (size_t i = 0; i < f.buckets.size(); ++i) {
        cum += h.counts[i];
        char le[64];
        std::snprintf(le, sizeof le, "%g", f.buckets[i]);
        o << name << "_bucket{" << sep << "le=\"" << le << "\"} " << cum << "\n";
      }
      o << name << "_bucket{" << sep << "le=\"+Inf\"} " << h.count << "\n";
      o << name << "_sum" << (l.empty() ? "" : "{" + l + "}") << " " << h.sum << "\n";
      o << name << "_count" << (l.empty() ? "" : "{" + l + "}") << " " << h.count << "\n";
    }
  }
  return o.str();
}

}  // namespace cln::serve
