// Server metrics in the Prometheus text exposition format
// (prometheus.io/docs/instrumenting/exposition_formats, version 0.0.4): counters, gauges and cumulative
// histograms with `le` buckets, `_sum` and `_count`, so P50 / P99 can be read with histogram_quantile().
// Thread-safe.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace vispco::serve {

/// A histogram: cumulative bucket counts at fixed upper bounds (+Inf implied).
struct Histogram {
  std::vector<double> bounds;    ///< ascending upper bounds, in the metric's unit
  std::vector<uint64_t> counts;  ///< per bound, observations ≤ it (cumulative when rendered)
  uint64_t count = 0;
  double sum = 0;
  /// The q-quantile (0 < q ≤ 1) by linear interpolation inside the bucket, as histogram_quantile() does;
  /// NaN without observations.
  double quantile(double q) const;
};

/// A set of named metrics. Names follow Prometheus conventions (base units, `_total` for counters).
class Metrics {
 public:
  /// Declares a metric with its HELP text. @param type "counter" | "gauge" | "histogram"
  /// @param bounds histogram bucket bounds (ascending). @throws InvalidArgument for a bad type or unsorted
  /// bounds.
  void declare(const std::string& name, const std::string& type, const std::string& help,
               std::vector<double> bounds = {});
  /// Adds to a counter (or gauge). @param labels e.g. {{"code", "200"}}.
  void add(const std::string& name, double v, const std::map<std::string, std::string>& labels = {});
  /// Sets a gauge.
  void set(const std::string& name, double v, const std::map<std::string, std::string>& labels = {});
  /// Records one observation of a histogram.
  void observe(const std::string& name, double v);
  /// A counter's or gauge's value (0 when never touched). @throws InvalidArgument for an undeclared name.
  double value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const;
  /// A copy of a histogram. @throws InvalidArgument for an undeclared name or another type.
  Histogram histogram(const std::string& name) const;
  /// Every metric in the text exposition format (# HELP, # TYPE, samples), declaration order.
  std::string render() const;

 private:
  struct Family {
    std::string type, help;
    std::map<std::string, double> samples;  // rendered label set → value
    Histogram hist;
  };
  const Family& family(const std::string& name) const;
  Family& family(const std::string& name);
  mutable std::mutex mu_;
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
};

/// Labels rendered in Prometheus syntax: {a="1",b="x"} (values escaped), "" when empty.
std::string render_labels(const std::map<std::string, std::string>& labels);

}  // namespace vispco::serve
