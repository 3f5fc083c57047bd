// Prometheus text format: counters with labels, cumulative histogram buckets, quantiles by interpolation.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "serve/metrics.h"

namespace vispco::serve {
namespace {

TEST(Metrics, RendersCountersGaugesAndCumulativeHistograms) {
  Metrics m;
  m.declare("req_total", "counter", "requests");
  m.declare("depth", "gauge", "queue depth");
  m.declare("lat_seconds", "histogram", "latency", {0.1, 1});
  m.add("req_total", 1, {{"code", "200"}});
  m.add("req_total", 2, {{"code", "200"}});
  m.add("req_total", 1, {{"code", "400"}});
  m.set("depth", 3);
  m.observe("lat_seconds", 0.05);
  m.observe("lat_seconds", 0.5);
  m.observe("lat_seconds", 0.7);
  m.observe("lat_seconds", 5);
  const std::string expected =
      "# HELP req_total requests\n# TYPE req_total counter\n"
      "req_total{code=\"200\"} 3\nreq_total{code=\"400\"} 1\n"
      "# HELP depth queue depth\n# TYPE depth gauge\ndepth 3\n"
      "# HELP lat_seconds latency\n# TYPE lat_seconds histogram\n"
      "lat_seconds_bucket{le=\"0.1\"} 1\nlat_seconds_bucket{le=\"1\"} 3\n"
      "lat_seconds_bucket{le=\"+Inf\"} 4\nlat_seconds_sum 6.25\nlat_seconds_count 4\n";
  EXPECT_EQ(m.render(), expected);
  EXPECT_EQ(m.value("req_total", {{"code", "200"}}), 3);
  EXPECT_EQ(m.value("req_total", {{"code", "500"}}), 0);
}

TEST(Metrics, QuantileInterpolatesInsideTheBucket) {
  Histogram h;
  h.bounds = {1, 2, 4};
  h.counts = {2, 2, 0};
  h.count = 4;
  // rank 0.5·4 = 2 → the end of bucket (0, 1]; rank 0.75·4 = 3 → halfway through (1, 2].
  EXPECT_DOUBLE_EQ(h.quantile(0.5), 1.0);
  EXPECT_DOUBLE_EQ(h.quantile(0.75), 1.5);
  EXPECT_DOUBLE_EQ(h.quantile(0.25), 0.5);
  EXPECT_TRUE(std::isnan(Histogram{}.quantile(0.5)));
}

TEST(Metrics, LabelValuesAreEscapedAndMistakesRefused) {
  EXPECT_EQ(render_labels({{"a", "x\"y\\z\n"}}), "{a=\"x\\\"y\\\\z\\n\"}");
  Metrics m;
  EXPECT_THROW(m.declare("x", "summary", "h"), InvalidArgument);
  EXPECT_THROW(m.declare("x", "histogram", "h", {2, 1}), InvalidArgument);
  EXPECT_THROW(m.add("undeclared", 1), InvalidArgument);
}

}  // namespace
}  // namespace vispco::serve
