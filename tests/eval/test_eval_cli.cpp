// `vispco eval` as a process: a run killed with SIGKILL mid-way resumes from its store and ends with the same
// per-sample results and summary as an uninterrupted run; bad input gives one-line errors.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "eval/eval_fixture.h"
#include "test_paths.h"

namespace vispco::eval {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;
using testing::TempDir;

// Rows in the results table of a store, read with plain SQL; −1 while the file or table does not exist yet.
int64_t stored_rows(const std::string& path, const char* sql = "SELECT COUNT(*) FROM results") {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return -1;
  }
  sqlite3_busy_timeout(db, 1000);
  sqlite3_stmt* st = nullptr;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

// A 40-sample dataset (answers arbitrary: the test compares two runs, not against truth).
fs::path write_dataset40(const fs::path& dir) {
  const auto images = testing::write_noise_images(dir, 40);
  std::ofstream out(dir / "data.jsonl");
  for (int i = 0; i < 40; ++i)
    out << nlohmann::json{{"id", "s" + std::to_string(i)},
                          {"image", images[i]},
                          {"question", testing::test_question(i)},
                          {"answer", i % 3 == 0 ? "red" : "2"},
                          {"family", i % 2 ? "odd" : "even"}}
               .dump()
        << "\n";
  return dir;
}

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
  const fs::path data = write_dataset40(tmp.path() / "ds");

  // Reference: one uninterrupted run in its own store.
  const auto ref = run_cli(eval_args(data, tmp.path() / "ref") + " --json");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const auto ref_summary = nlohmann::json::parse(ref.out);
  EXPECT_EQ(ref_summary["counts"]["n_evaluated"], 40);

  // Interrupted: kill -9 once a few rows are committed.
  const fs::path out = tmp.path() / "killed";
  const std::string store = (out / "results.sqlite").string();
  const std::string cmd =
      std::string("exec ") + ::vispco::testing::cli_path() + " " + eval_args(data, out);  // before fork
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // only async-signal-safe calls until exec
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int64_t at_kill = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    at_kill = stored_rows(store);
    if (at_kill >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the run finished before it could be killed";
  const int64_t after_kill = stored_rows(store);
  std::printf("killed with %ld rows seen, %ld committed\n", (long)at_kill, (long)after_kill);
  ASSERT_GE(after_kill, 3);
  ASSERT_LT(after_kill, 40) << "nothing left to resume";

  // Resume: only the missing samples are generated; the outcome matches the reference.
  const auto res = run_cli(eval_args(data, out) + " --json");
  ASSERT_EQ(res.exit_code, 0) << res.err;
  const auto summary = nlohmann::json::parse(res.out);
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

// One line, prefixed "error:", containing `needle`, exit code 2.
void expect_one_line_error(const testing::CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << r.err;
}

TEST(EvalCli, BadInputGivesOneLineErrors) {
  TempDir tmp;
  const std::string base = "eval --model " + testing::tiny_model_dir() + " --out " + tmp.str("o");
  const std::string data = " --data " + known_dataset_dir().string();
  expect_one_line_error(run_cli(base + " --data " + tmp.str("absent.jsonl")), "absent.jsonl");
  expect_one_line_error(run_cli(base + data + " --shard 3/2"), "shard 3/2");
  expect_one_line_error(run_cli(base + data + " --shard two"), "--shard must be i/n");
  expect_one_line_error(run_cli(base + data + " --batch 0"), "batch size must be ≥ 1");
  expect_one_line_error(run_cli(base + data + " --limit -1"), "--limit must be ≥ 0");
  expect_one_line_error(run_cli(base + data + " --shuffle-images -3"),
                        "--shuffle-images takes a seed ≥ 0, got -3");
  expect_one_line_error(run_cli(base + data + " --plan fastv"), "needs keep=K");
  expect_one_line_error(run_cli(base + data + " --plan fastv:layer=2,keep=99"), "keep 99 is outside");
  expect_one_line_error(run_cli("eval --model " + tmp.str("nomodel") + data + " --out " + tmp.str("o")),
                        "nomodel");
  EXPECT_FALSE(fs::exists(tmp.path() / "o")) << "bad input must fail before writing anything";
}

}  // namespace
}  // namespace vispco::eval
