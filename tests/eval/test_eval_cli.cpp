// `vispco eval` as a process: a run killed with SIGKILL mid-way resumes from its store and ends with the same
// per-sample results and summary as an uninterrupted run; bad input gives one-line errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "eval/eval_fixture.h"
#include "eval/killed_run.h"

namespace vispco::eval {
namespace {

namespace fs = std::filesystem;
using testing::expect_bad_input;
using testing::run_cli;
using testing::stored_rows;
using testing::TempDir;

fs::path known_dataset_dir() { return testing::known_dataset().dir; }

std::string eval_args(const fs::path& data, const fs::path& out) {
  return "eval --model " + testing::tiny_model_dir() + " --data " + data.string() + " --out " + out.string() +
         " --batch 1 --threads 1 --progress lines";
}

// predictions.jsonl rows without the fields that legitimately differ between runs (timings, provenance).
std::vector<nlohmann::json> stable_rows(const fs::path& out) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(out / "predictions.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    for (const char* k : {"prefill_ms", "decode_ms", "total_ms", "ttft_ms", "from_store"}) j.erase(k);
    rows.push_back(j);
  }
  return rows;
}

TEST(EvalCli, SigkilledRunResumesToTheSameResultsAsAnUninterruptedRun) {
  TempDir tmp;
  const fs::path data = testing::write_arbitrary_dataset(tmp.path() / "ds", 40);

  // Reference: one uninterrupted run in its own store.
  const auto ref_summary = testing::run_cli_json(eval_args(data, tmp.path() / "ref"));
  EXPECT_EQ(ref_summary["counts"]["n_evaluated"], 40);

  // Interrupted: kill -9 once a few rows are committed.
  const fs::path out = tmp.path() / "killed";
  const std::string store = (out / "results.sqlite").string();
  int64_t after_kill = 0;
  ASSERT_NO_FATAL_FAILURE(testing::kill_after_rows_checked(eval_args(data, out), store, 3,
                                                           std::chrono::seconds(60), &after_kill));
  ASSERT_LT(after_kill, 40) << "nothing left to resume";

  // Resume: only the missing samples are generated; the outcome matches the reference.
  const auto summary = testing::run_cli_json(eval_args(data, out));
  EXPECT_EQ(summary["counts"]["n_from_store"], after_kill);
  EXPECT_EQ(summary["counts"]["n_evaluated"], 40 - after_kill);
  EXPECT_EQ(summary["metrics"], ref_summary["metrics"]);
  for (const char* k : {"model_hash", "dataset_hash", "plan", "decoding"})
    EXPECT_EQ(summary["run"][k], ref_summary["run"][k]) << k;
  EXPECT_EQ(stable_rows(out), stable_rows(tmp.path() / "ref"));
  EXPECT_EQ(stored_rows(store), 40);
  EXPECT_EQ(stored_rows(store, "SELECT COUNT(DISTINCT sample_id) FROM results"), 40) << "no duplicates";
  const auto file_summary = nlohmann::json::parse(testing::read_file(out / "summary.json"));
  EXPECT_EQ(file_summary["metrics"], ref_summary["metrics"]);
}

TEST(EvalCli, PrintsTheSummaryTableAndProgressLines) {
  TempDir tmp;
  const auto r = run_cli(eval_args(known_dataset_dir(), tmp.path() / "o") + " --limit 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| family | n | accuracy |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| all | 4 |"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("eval 4/4 100%"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(tmp.path() / "o/results.sqlite"));
  EXPECT_TRUE(fs::exists(tmp.path() / "o/summary.md"));
}

TEST(EvalCli, BadInputGivesOneLineErrors) {
  TempDir tmp;
  const std::string base = "eval --model " + testing::tiny_model_dir() + " --out " + tmp.str("o");
  const std::string data = " --data " + known_dataset_dir().string();
  expect_bad_input(run_cli(base + " --data " + tmp.str("absent.jsonl")), "absent.jsonl");
  expect_bad_input(run_cli(base + data + " --shard 3/2"), "shard 3/2");
  expect_bad_input(run_cli(base + data + " --shard two"), "--shard must be i/n");
  expect_bad_input(run_cli(base + data + " --batch 0"), "batch size must be ≥ 1");
  expect_bad_input(run_cli(base + data + " --limit -1"), "--limit must be ≥ 0");
  expect_bad_input(run_cli(base + data + " --shuffle-images -3"),
                   "--shuffle-images takes a seed ≥ 0, got -3");
  expect_bad_input(run_cli(base + data + " --plan fastv"), "needs keep=K");
  expect_bad_input(run_cli(base + data + " --plan fastv:layer=2,keep=99"), "keep 99 is outside");
  expect_bad_input(run_cli("eval --model " + tmp.str("nomodel") + data + " --out " + tmp.str("o")),
                   "nomodel");
  EXPECT_FALSE(fs::exists(tmp.path() / "o")) << "bad input must fail before writing anything";
}

}  // namespace
}  // namespace vispco::eval
