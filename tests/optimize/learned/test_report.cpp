// The grid frontier a VisPCO curve is compared with (src/optimize/learned/report.h): read back from the
// optimize.json that `vispco optimize` itself writes (optimize::write_report, not a hand-made copy), or from
// a CSV; drawn into the gnuplot script and its wall time set next to VisPCO's in the summary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "optimize/learned/report.h"
#include "optimize/optimize.h"
#include "optimize/searches.h"
#include "test_util.h"

namespace vispco::optimize::learned {
namespace {

using testing::TempDir;

optimize::EvalPoint point(const std::string& plan, double ratio, double acc) {
  optimize::EvalPoint p;
  p.plan = plan;
  p.split = "calib";
  p.n = 10;
  p.accuracy = acc;
  p.flops.llm = ratio;
  return p;
}

TEST(VisPcoReport, GridFrontierFromOptimizeJsonAndCsv) {
  TempDir tmp;
  optimize::OptimizeReport rep;
  rep.options.method = "grid";
  rep.search.points = {point("none", 1.0, 0.8), point("fastv:layer=2,keep=8", 0.55, 0.7),
                       point("fastv:layer=1,keep=8", 0.5, 0.6), point("fastv:layer=1,keep=4", 0.4, 0.65)};
  optimize::set_frontier(rep.search);  // (1.0, 0.8), (0.55, 0.7), (0.4, 0.65); (0.5, 0.6) is dominated
  rep.search.details = {
      {"n_plans", 3}, {"skipped", nlohmann::json::array()}, {"pre_llm", {{"best", nullptr}}}};
  rep.wall_s = 123.5;
  optimize::write_report(rep, tmp.str("grid"));
  auto g = read_grid_frontier(tmp.str("grid") + "/optimize.json");
  std::sort(g.points.begin(), g.points.end());
  EXPECT_EQ(g.points, (std::vector<std::pair<double, double>>{{0.4, 0.65}, {0.55, 0.7}, {1.0, 0.8}}));
  EXPECT_DOUBLE_EQ(g.wall_s, 123.5);
  EXPECT_EQ(g.split, "calibration");

  testing::write_file(tmp.str("f.csv"), "flops_ratio,accuracy\n0.3,0.5,extra\n\n0.6,0.75\n");
  auto c = read_grid_frontier(tmp.str("f.csv"));
  EXPECT_EQ(c.points, (std::vector<std::pair<double, double>>{{0.3, 0.5}, {0.6, 0.75}}));
  EXPECT_TRUE(std::isnan(c.wall_s));

  // Overlay and wall-time line.
  SearchReport r;
  r.training.epochs.resize(1);
  r.training.teacher_seconds = 2.0;
  r.training.train_seconds = 10.0;
  r.eval_seconds = 0.5;
  BudgetPoint b;
  b.budget = 0.3;
  b.flops_ratio = 0.45;
  b.accuracy = 0.6;
  r.points = {b};
  r.grid = g;
  const auto gp = curve_gnuplot(r, "curve.png");
  EXPECT_NE(gp.find("0.400000 65.0000"), std::string::npos) << gp;
  EXPECT_NE(gp.find("title 'grid frontier'"), std::string::npos) << gp;
  const auto md = r.to_markdown();
  EXPECT_NE(md.find("VisPCO 12.5 s"), std::string::npos) << md;
  EXPECT_NE(md.find("grid 123.5 s: the grid took 9.88× VisPCO's"), std::string::npos) << md;

  // Bad files: one message naming the file.
  testing::write_file(tmp.str("bad.json"), R"({"calibration": {"points": [], "frontier": [3]}})");
  try {
    read_grid_frontier(tmp.str("bad.json"));
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: calibration.frontier holds 3"), std::string::npos)
        << e.what();
  }
  testing::write_file(tmp.str("bad.csv"), "flops_ratio,accuracy\n0.3;0.5\n");
  EXPECT_THROW(read_grid_frontier(tmp.str("bad.csv")), FormatError);
  EXPECT_THROW(read_grid_frontier(tmp.str("missing.csv")), IoError);
}

}  // namespace
}  // namespace vispco::optimize::learned
