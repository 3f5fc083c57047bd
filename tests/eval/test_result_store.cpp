// Tests of the SQLite result store: round trip, no duplicates, separate runs, resume, atomic batches, WAL,
// and a writer process killed with SIGKILL mid-run that resumes without lost or duplicated rows.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/errors.h"
#include "eval/result_store.h"
#include "eval/temp_dir.h"

namespace vispco::eval {
namespace {

const RunKey kKey{"sha256:model", "sha256:data", "fastv:k=2,K=144", "greedy,max_new=8"};

SampleResult result(int i) {
  SampleResult r;
  r.sample_id = "s" + std::to_string(i);
  r.prediction = "answer " + std::to_string(i);
  r.score = (i % 3) / 2.0;
  r.correct = i % 2 == 0;
  r.prefill_ms = 10.5 + i;
  r.decode_ms = 3.25;
  r.total_ms = 13.75 + i;
  r.extra = {{"kept_tokens", 144 + i}};
  return r;
}

// Direct SQL, independent of the store's own queries.
int64_t sql_int(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
  const int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

TEST(ResultStore, RoundTripsResultsInInsertionOrder) {
  test::TempDir tmp;
  ResultStore store(tmp / "r.db");
  for (int i : {3, 1, 2}) EXPECT_TRUE(store.put(kKey, result(i)));
  const auto got = store.results(kKey);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], result(3));
  EXPECT_EQ(got[1], result(1));
  EXPECT_EQ(got[2], result(2));
  EXPECT_EQ(store.done_ids(kKey), (std::set<std::string>{"s1", "s2", "s3"}));
  EXPECT_EQ(store.runs(), std::vector<RunKey>{kKey});
}

TEST(ResultStore, ReinsertKeepsTheFirstRowAndAddsNoDuplicate) {
  test::TempDir tmp;
  ResultStore store(tmp / "r.db");
  EXPECT_TRUE(store.put(kKey, result(1)));
  SampleResult changed = result(1);
  changed.prediction = "different";
  EXPECT_FALSE(store.put(kKey, changed));
  EXPECT_EQ(store.put_many(kKey, {result(1), result(2), result(2)}), 1u);
  EXPECT_EQ(store.count(kKey), 2u);
  EXPECT_EQ(store.results(kKey)[0].prediction, "answer 1");
  EXPECT_EQ(sql_int(tmp / "r.db", "SELECT COUNT(*) FROM results"), 2);
}

TEST(ResultStore, KeysSeparateRunsAndUnknownRunsAreEmpty) {
  test::TempDir tmp;
  ResultStore store(tmp / "r.db");
  RunKey other = kKey;
  other.plan = "none";
  EXPECT_TRUE(store.done_ids(other).empty());
  EXPECT_EQ(store.count(other), 0u);
  EXPECT_TRUE(store.runs().empty()) << "reading must not create runs";
  store.put(kKey, result(1));
  store.put(other, result(1));
  store.put(other, result(2));
  EXPECT_EQ(store.count(kKey), 1u);
  EXPECT_EQ(store.count(other), 2u);
  EXPECT_EQ(store.runs().size(), 2u);
}

TEST(ResultStore, PersistsAcrossReopenInWalModeAndResumes) {
  test::TempDir tmp;
  {
    ResultStore store(tmp / "r.db");
    for (int i = 0; i < 5; ++i) store.put(kKey, result(i));
  }
  EXPECT_EQ(sql_int(tmp / "r.db", "SELECT COUNT(*) FROM results"), 5);
  ResultStore store(tmp / "r.db");
  const auto done = store.done_ids(kKey);
  size_t n_run = 0;
  for (int i = 0; i < 10; ++i)
    if (!done.count("s" + std::to_string(i))) store.put(kKey, result(i)), ++n_run;
  EXPECT_EQ(n_run, 5u);
  EXPECT_EQ(store.count(kKey), 10u);
  sqlite3* db = nullptr;
  sqlite3_open((tmp / "r.db").c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(ResultStore, BatchIsAllOrNothingAndBadInputIsRejected) {
  test::TempDir tmp;
  ResultStore store(tmp / "r.db");
  SampleResult bad = result(9);
  bad.sample_id = "";
  EXPECT_THROW(store.put_many(kKey, {result(1), result(2), bad}), InvalidArgument);
  EXPECT_EQ(store.count(kKey), 0u);
  bad = result(9);
  bad.extra = nlohmann::json::array({1});
  EXPECT_THROW(store.put(kKey, bad), InvalidArgument);
  EXPECT_THROW(ResultStore(tmp / "no/such/folder/r.db"), IoError);
}

// A child process writes results 0..n−1 one by one; the parent kills it with SIGKILL mid-way, checks the
// rows are exactly a prefix (nothing partial, nothing duplicated), resumes the rest, and compares the final
// table with an uninterrupted run.
TEST(ResultStore, SurvivesSigkillMidRunAndResumesWithoutLossOrDuplicates) {
  test::TempDir tmp;
  const std::string path = tmp / "r.db";
  constexpr int kN = 400;
  { ResultStore init(path); }  // schema exists before the child starts

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      ResultStore store(path);
      for (int i = 0; i < kN; ++i) {
        store.put(kKey, result(i));
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  // Kill once a good part, but not all, is written.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (sql_int(path, "SELECT COUNT(*) FROM results") < kN / 4 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child finished before it was killed; raise kN";

  ResultStore store(path);
  const auto before = store.results(kKey);
  ASSERT_GE(before.size(), static_cast<size_t>(kN / 4));
  ASSERT_LT(before.size(), static_cast<size_t>(kN));
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(before[i], result(static_cast<int>(i))) << i;
  EXPECT_EQ(sql_int(path, "SELECT COUNT(DISTINCT sample_id) FROM results"),
            static_cast<int64_t>(before.size()));

  const auto done = store.done_ids(kKey);
  for (int i = 0; i < kN; ++i)
    if (!done.count(result(i).sample_id)) EXPECT_TRUE(store.put(kKey, result(i)));
  for (int i = 0; i < kN; ++i) EXPECT_FALSE(store.put(kKey, result(i)));  // a second resume adds nothing

  test::TempDir ref_dir;
  ResultStore ref(ref_dir / "r.db");
  for (int i = 0; i < kN; ++i) ref.put(kKey, result(i));
  EXPECT_EQ(store.results(kKey), ref.results(kKey));
  EXPECT_EQ(sql_int(path, "SELECT COUNT(*) FROM results"), kN);
}

}  // namespace
}  // namespace vispco::eval
