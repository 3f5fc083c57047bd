// The search registry (optimize/search_method.h): every row declares flags and runs through one front door,
// plan searches answer every report hook, unknown names list the rows, SearchFlags shares a flag between
// methods without sharing their defaults, and OptimizeOptions still reads the key layout earlier runs wrote.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <set>

#include "core/errors.h"
#include "model/tiny_model.h"
#include "optimize/optimize.h"
#include "optimize/search_flags.h"
#include "optimize/search_method.h"
#include "test_util.h"

namespace vispco::optimize {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(SearchRegistry, EveryMethodIsOneRowWithFlagsThatDeclareTheModel) {
  const std::vector<std::string> expected = {"min-k", "budget", "grid", "dynamic-k", "coverage", "vispco"};
  std::vector<std::string> names;
  for (const auto& e : search_registry()) {
    names.push_back(e.name);
    EXPECT_FALSE(e.description.empty()) << e.name;
    CLI::App cmd;
    SearchFlags flags(cmd);
    flags.begin(e.name);
    auto m = e.make();
    ASSERT_NE(m, nullptr) << e.name;
    m->add_flags(flags);
    flags.seal();
    EXPECT_NE(cmd.get_option_no_throw("--model"), nullptr) << e.name << " runs a model";
    EXPECT_TRUE(cmd.get_option("--model")->get_required()) << e.name;
    EXPECT_GT(cmd.get_options().size(), 5u) << e.name;
  }
  EXPECT_EQ(names, expected);
}

TEST(SearchRegistry, AllRowsShareOneCommand) {
  CLI::App cmd;
  SearchFlags flags(cmd);
  std::vector<std::unique_ptr<SearchMethod>> methods;
  for (const auto& e : search_registry()) {  // a flag name two rows spell differently would throw here
    flags.begin(e.name);
    methods.push_back(e.make());
    methods.back()->add_flags(flags);
  }
  flags.seal();
  EXPECT_TRUE(cmd.get_option("--model")->get_required()) << "every row requires it";
  EXPECT_FALSE(cmd.get_option("--calib")->get_required()) << "vispco has no calibration split";
  EXPECT_EQ(cmd.get_option("--epochs")->get_group(), "vispco")
      << "a flag of one row is listed under its name";
}

TEST(SearchRegistry, PlanSearchesAnswerEveryReportHook) {
  std::set<std::string> plans;
  for (const auto& e : search_registry()) {
    if (!e.plan) continue;
    plans.insert(e.name);
    EXPECT_EQ(&find_plan_search(e.name), e.plan);
    OptimizeOptions o;
    o.method = e.name;
    o.templates = {"fastv:layer=2"};
    EXPECT_FALSE(e.plan->constraint_text(o).empty()) << e.name;
    EXPECT_NO_THROW(e.plan->rules_text(o)) << e.name;
    EXPECT_NO_THROW(e.plan->summary_templates(o)) << e.name;
    CLI::App cmd;
    SearchFlags flags(cmd);
    flags.begin(e.name);
    e.plan->add_flags(flags, o);
    EXPECT_FALSE(cmd.get_options().empty()) << e.name << " has flags of its own";
  }
  EXPECT_EQ(plans, (std::set<std::string>{"min-k", "budget", "grid"}));
}

TEST(SearchRegistry, UnknownNamesListTheRows) {
  EXPECT_NE(error_of([] {
              find_search("anneal");
            }).find("unknown method 'anneal' (valid: min-k, budget, grid, dynamic-k, coverage, vispco)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              find_plan_search("anneal");
            }).find("unknown method 'anneal' (valid: min-k, budget, grid)"),
            std::string::npos);
  EXPECT_NE(error_of([] { find_plan_search("dynamic-k"); }).find("runs its own job"), std::string::npos);
}

TEST(SearchFlags, ASharedFlagReachesTheRunningMethodOnly) {
  CLI::App cmd;
  SearchFlags flags(cmd);
  std::string out_a = "a_out", out_b = "b_out";
  int64_t batch_a = 8, batch_b = 4;
  bool plots_a = false, plots_b = false;
  flags.begin("a");
  flags.option("--out", &out_a, "A's folder");
  flags.option("--batch", &batch_a, "A's batch");
  flags.flag("--no-plots", &plots_a, "no plots");
  flags.require("--out");
  flags.begin("b");
  flags.option("--out", &out_b, "B's folder");
  flags.option("--batch", &batch_b, "B's batch");
  flags.flag("--no-plots", &plots_b, "no plots");
  EXPECT_THROW(flags.option("--no-plots,--no-plot", &plots_b, "x"), std::logic_error) << "names must agree";
  flags.seal();
  EXPECT_EQ(cmd.get_option("--batch")->get_description(), "A's batch; b: B's batch");
  EXPECT_FALSE(cmd.get_option("--out")->get_required()) << "b does not require it";

  cmd.parse(std::vector<std::string>{"3", "--batch", "--no-plots"});  // CLI11 parses in reverse
  EXPECT_THROW(flags.finish("a"), CLI::RequiredError);
  flags.finish("b");
  EXPECT_EQ(batch_b, 3);
  EXPECT_TRUE(plots_b);
  EXPECT_EQ(out_b, "b_out") << "not given: b keeps its own default";
  EXPECT_TRUE(flags.given("--batch"));
  EXPECT_FALSE(flags.given("--out"));
}

TEST(OptimizeOptionsJson, TheLayoutEarlierRunsWroteStillReads) {
  // The "options" object of an optimize.json written before the searches owned their settings.
  const auto old = nlohmann::json::parse(
      R"({"confidence": 0.9, "epsilon": 0.05, "epsilon_absolute": false, "epsilon_per_family": 0.5,
          "evaluate_test": true, "flops_budget": 0.0, "k_max": 0, "k_min": 16, "k_step": 16, "keeps": [],
          "method": "min-k", "min_family_n": 5, "min_speedup": 1.0, "templates": ["divprune:layer=0"],
          "timing_factor": 2.0})");
  const OptimizeOptions o = optimize_options_from_json(old);
  EXPECT_EQ(o.k_min, 16);
  EXPECT_EQ(o.k_step, 16);
  EXPECT_EQ(o.min_family_n, 5);
  EXPECT_EQ(o.keep_as, "auto");
  nlohmann::json now = old;  // issue 47's keys join at their defaults
  now["keep_as"] = "auto";
  now["keep_ratios"] = nlohmann::json::array();
  EXPECT_EQ(to_json(o).dump(), now.dump()) << "the same keys, written back unchanged, plus the new ones";
  OptimizeOptions g;
  g.method = "grid";
  g.templates = {"divprune:layer=0"};
  g.keeps = {16, 4};
  g.flops_budget = 0.25;
  EXPECT_EQ(optimize_options_from_json(to_json(g)), g);
}

TEST(OptimizeCliRegistry, VispcoRunsThroughTheFrontDoorWithItsOwnChecks) {
  const std::string base = " --model " + testing::tiny_model_dir() + " --skip-eval --epochs 2 --min-epochs 3";
  const auto front = testing::run_cli("optimize --method vispco" + base);
  const auto alias = testing::run_cli("vispco-search" + base);
  EXPECT_NE(front.exit_code, 0);
  EXPECT_NE(front.err.find("min_epochs must be in [1, max_epochs = 2], got 3"), std::string::npos)
      << front.err;
  EXPECT_EQ(front.err, alias.err);
  const auto help = testing::run_cli("optimize --help");
  for (const auto& e : search_registry())
    EXPECT_NE(help.out.find("  " + e.name + ": "), std::string::npos) << e.name;
}

}  // namespace
}  // namespace vispco::optimize
