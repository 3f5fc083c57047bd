// `vispco optimize` as a process: a grid search killed with SIGKILL mid-way resumes from its result store to
// the same report as an uninterrupted run, a third run generates nothing; bad input gives one-line errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "eval/eval_fixture.h"
#include "eval/killed_run.h"

namespace vispco::optimize {
namespace {

namespace fs = std::filesystem;
using testing::expect_bad_input;
using testing::run_cli;
using testing::TempDir;

// 1 reference + 2 templates × 4 K = 9 calibration evaluations of 30 samples, then 2 on the 8-sample test set.
std::string grid_args(const fs::path& calib, const fs::path& out) {
  return "optimize --method grid --model " + testing::tiny_model_dir() + " --calib " + calib.string() +
         " --test " + testing::known_dataset().dir.string() +
         " --template 'fastv:layer=2;random:layer=0' --keep 16,8,4,2 --epsilon 0.5 --min-speedup 0 --batch 1 "
         "--threads 1 --no-plots --progress off --out " +
         out.string();
}

// The report without what legitimately differs between runs (timings, store provenance, paths).
nlohmann::json stable(nlohmann::json j) {
  j.erase("wall_s");
  j.erase("counts");
  j.erase("inputs");
  const auto drop_timing = [](nlohmann::json& point) {
    for (const char* k :
         {"mean_prefill_ms", "mean_vision_ms", "n_evaluated", "n_from_store", "wall_s", "per_family"})
      point.erase(k);
  };
  for (auto& p : j["calibration"]["points"]) drop_timing(p);
  for (const char* side : {"reference", "chosen"}) drop_timing(j["test"][side]);
  j["test"].erase("prefill_speedup");
  j["test"].erase("per_family");
  for (auto& [i, c] : j["calibration"]["checks"].items())
    for (const char* k : {"measured_speedup", "timing_disagrees"}) c.erase(k);
  nlohmann::json notes = nlohmann::json::array();  // timing notes depend on the machine's load
  for (const auto& n : j["notes"])
    if (n.get<std::string>().rfind("timing vs FLOPs model", 0) != 0) notes.push_back(n);
  j["notes"] = notes;
  return j;
}

TEST(OptimizeCli, SigkilledGridResumesToTheSameReportAndARerunIsInstant) {
  TempDir tmp;
  const fs::path calib = testing::write_arbitrary_dataset(tmp.path() / "calib", 30);
  const auto ref_j = testing::run_cli_json(grid_args(calib, tmp.path() / "ref"));
  const int64_t total =
      ref_j["counts"]["n_evaluated"].get<int64_t>() + ref_j["counts"]["n_from_store"].get<int64_t>();
  EXPECT_EQ(ref_j["calibration"]["points"].size(), 9u);

  const fs::path out = tmp.path() / "killed";
  const std::string store = (out / "results.sqlite").string();
  // Past the reference and into the third plan.
  int64_t after_kill = 0;
  ASSERT_NO_FATAL_FAILURE(testing::kill_after_rows_checked(grid_args(calib, out), store, 75,
                                                           std::chrono::seconds(120), &after_kill));
  ASSERT_FALSE(fs::exists(out / "optimize.json")) << "killed before the report";

  const auto res_j = testing::run_cli_json(grid_args(calib, out));
  EXPECT_EQ(res_j["counts"]["n_from_store"].get<int64_t>(), after_kill);
  EXPECT_EQ(res_j["counts"]["n_evaluated"].get<int64_t>() + res_j["counts"]["n_from_store"].get<int64_t>(),
            total);
  EXPECT_EQ(stable(res_j), stable(ref_j));
  EXPECT_TRUE(fs::exists(out / "optimize.json"));
  EXPECT_TRUE(fs::exists(out / "optimize.md"));

  const auto again_j = testing::run_cli_json(grid_args(calib, out));
  EXPECT_EQ(again_j["counts"]["n_evaluated"], 0) << "a rerun reads everything from the store";
  EXPECT_EQ(stable(again_j), stable(ref_j));
}

TEST(OptimizeCli, MinKPrintsTheChosenPlanWithTestFigures) {
  TempDir tmp;
  // --min-speedup 0: the speed rule reads measured times, which a unit test must not depend on.
  const auto r = run_cli("optimize --method min-k --scorer fastv --epsilon 0.5 --min-speedup 0 --model " +
                         testing::tiny_model_dir() + " --calib " + testing::known_dataset().dir.string() +
                         " --test " + testing::known_dataset().dir.string() +
                         " --limit-test 4 --no-plots --threads 1 --out " + tmp.str("o"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("optimize min-k (fastv:layer=2)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chosen fastv:layer=2,keep="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test (4 samples)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measured prefill speedup"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("min-k fastv:layer=2: probe K=16"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(testing::read_file(tmp.path() / "o/optimize.json"));
  EXPECT_EQ(j["options"]["templates"][0], "fastv:layer=2");
  EXPECT_EQ(j["test"]["chosen"]["n"], 4);
}

// A gate template finds the learned gate in the model folder, as `vispco eval` does, and its results are
// keyed with the gate file's hash: a retrained gate is evaluated afresh, an unchanged one comes from the
// store.
TEST(OptimizeCli, GateTemplateUsesTheModelsGateAndARetrainedGateIsNotServedStaleResults) {
  TempDir tmp;
  const fs::path model = tmp.path() / "model";
  fs::copy(testing::tiny_model_dir(), model);
  const auto train_gate = [&](const std::string& seed) {
    return run_cli("train-gate --model " + model.string() +
                   " --steps 2 --batch 1 --hidden 8 --threads 1 --seed " + seed);
  };
  ASSERT_EQ(train_gate("1").exit_code, 0);
  const std::string args =
      "optimize --method grid --model " + model.string() + " --calib " +
      testing::known_dataset().dir.string() +
      " --no-test --template 'gate:layer=0' --keep 8,4 --epsilon 0.5 --batch 2 --threads 1 "
      "--no-plots --progress off --store " +
      tmp.str("s.sqlite") + " --out " + tmp.str("o");
  // Calibration samples generated by each run's gate points (the unpruned reference is stored after run 1).
  const auto gate_generated = [&]() {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(testing::read_file(tmp.path() / "o/optimize.json"));
    int64_t n = 0;
    for (const auto& p : j["calibration"]["points"])
      if (p["plan"].get<std::string>() != "none") n += p["n_evaluated"].get<int64_t>();
    return n;
  };
  const int64_t n_calib = 2 * testing::KnownDataset::kN;
  EXPECT_EQ(gate_generated(), n_calib);  // K = 8 and 4, every sample
  EXPECT_EQ(gate_generated(), 0);        // the same gate: all from the store
  ASSERT_EQ(train_gate("2").exit_code, 0);
  EXPECT_EQ(gate_generated(), n_calib);  // another gate file: evaluated again
}

TEST(OptimizeCli, BadInputGivesOneLineErrorsBeforeAnythingIsWritten) {
  TempDir tmp;
  const std::string data = testing::known_dataset().dir.string();
  const std::string base = "optimize --model " + testing::tiny_model_dir() + " --calib " + data + " --test " +
                           data + " --out " + tmp.str("o");
  expect_bad_input(run_cli(base + " --method anneal --scorer fastv"),
                   "unknown method 'anneal' (valid: min-k, budget, grid, dynamic-k, coverage, vispco)");
  expect_bad_input(run_cli(base + " --method min-k --scorer fastv --epsilon 1.5"),
                   "epsilon must be in [0, 1)");
  expect_bad_input(run_cli(base + " --method min-k --scorer fastv --epsilon-abs 2"),
                   "epsilon must be in [0, 1]");
  expect_bad_input(run_cli(base + " --method min-k --scorer fastv --epsilon 0.1 --epsilon-abs 0.1"),
                   "not both");
  expect_bad_input(run_cli(base + " --method min-k"), "name the scorer");
  expect_bad_input(run_cli(base + " --method min-k --scorer nosuch"), "unknown scorer 'nosuch'");
  expect_bad_input(run_cli(base + " --method min-k --scorer pool"), "rejects K=2");
  expect_bad_input(run_cli(base + " --method min-k --scorer fastv --layer 0"), "layer must be ≥ 1");
  expect_bad_input(run_cli(base + " --method budget --scorer fastv"), "--flops-ratio must be in (0, 1]");
  expect_bad_input(run_cli(base + " --method grid --scorers fastv"), "needs K values");
  expect_bad_input(run_cli(base + " --method grid --scorers fastv --keep 16,x"), "--keep must be");
  expect_bad_input(run_cli(base + " --method grid --scorers fastv --keep 16,99"), "K 99 is outside");
  expect_bad_input(run_cli(base + " --method min-k --scorer fastv --epsilon-per-family 1.5"),
                   "--epsilon-per-family must be 0 (off) or in (0, 1)");
  expect_bad_input(run_cli(base + " --method min-k --scorer fastv --min-speedup 0.5"),
                   "--min-speedup must be 0 (off) or ≥ 1");
  expect_bad_input(run_cli(base + " --method min-k --scorer fastv --min-family-n 0"),
                   "--min-family-n must be ≥ 1");
  expect_bad_input(run_cli(base + " --method coverage --scorer divprune"), "--train DIR is required");
  expect_bad_input(run_cli(base + " --method coverage --scorer divprune --ladder 64,32 --train " + data),
                   "--ladder must be ascending");
  expect_bad_input(run_cli("optimize --method min-k --scorer fastv --model " + testing::tiny_model_dir() +
                           " --calib " + tmp.str("nocalib") + " --test " + data + " --out " + tmp.str("o")),
                   "--calib '" + tmp.str("nocalib") + "' does not exist");
  expect_bad_input(run_cli("optimize --method min-k --scorer fastv --model " + tmp.str("nomodel") +
                           " --calib " + data + " --test " + data + " --out " + tmp.str("o")),
                   "nomodel");
  expect_bad_input(run_cli(base + " --method min-k --scorer fastv --gnuplot " + tmp.str("nognuplot")),
                   "gnuplot not found");
  EXPECT_FALSE(fs::exists(tmp.path() / "o")) << "bad input must fail before writing anything";
}

}  // namespace
}  // namespace vispco::optimize
