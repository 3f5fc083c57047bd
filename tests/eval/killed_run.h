// Killing a `vispco` run mid-way for the resume tests of `vispco eval` and `vispco optimize`: the run is
// started as a child process, its result store is polled with plain SQL (independent of ResultStore), and it
// is killed with SIGKILL once enough rows are committed; the uninterrupted and resumed runs report as JSON.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>

#include "test_paths.h"
#include "test_util.h"

namespace vispco::testing {

/// The integer a one-value query `sql` gives on the SQLite file `path` (by default the rows of its results
/// table); −1 while the file or table does not exist yet.
inline int64_t stored_rows(const std::string& path, const char* sql = "SELECT COUNT(*) FROM results") {
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

/// What became of a run started and killed by kill_after_rows().
struct KilledRun {
  bool started = false;     ///< fork() succeeded
  bool killed = false;      ///< the run died of the SIGKILL (it had not finished before it)
  int64_t rows_seen = -1;   ///< stored_rows() when the kill was sent
  int64_t rows_after = -1;  ///< stored_rows() once the run is reaped
};

/// Runs `vispco <args>` (stdout and stderr to /dev/null) and kills it with SIGKILL as soon as the result
/// store `store` holds `min_rows` rows, or after `timeout`; prints the rows seen and committed.
inline KilledRun kill_after_rows(const std::string& args, const std::string& store, int64_t min_rows,
                                 std::chrono::seconds timeout) {
  KilledRun k;
  const std::string cmd = std::string("exec ") + cli_path() + " " + args;  // built before fork
  const pid_t pid = fork();
  if (pid < 0) return k;
  if (pid == 0) {  // only async-signal-safe calls until exec
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  k.started = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    k.rows_seen = stored_rows(store);
    if (k.rows_seen >= min_rows) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  k.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  k.rows_after = stored_rows(store);
  std::printf("killed with %ld rows seen, %ld committed\n", (long)k.rows_seen, (long)k.rows_after);
  return k;
}

/// kill_after_rows() with the checks of every resume test: the run started, died of the SIGKILL (it had not
/// finished) and committed at least `min_rows` rows, which it stores in `rows_after`. Call it inside
/// ASSERT_NO_FATAL_FAILURE.
inline void kill_after_rows_checked(const std::string& args, const std::string& store, int64_t min_rows,
                                    std::chrono::seconds timeout, int64_t* rows_after) {
  const auto killed = kill_after_rows(args, store, min_rows, timeout);
  ASSERT_TRUE(killed.started);
  ASSERT_TRUE(killed.killed) << "the run finished before it could be killed";
  *rows_after = killed.rows_after;
  ASSERT_GE(*rows_after, min_rows);
}

/// The report of `vispco <args> --json` (run_cli), parsed. @throws std::runtime_error (a failed test) naming
/// the exit code and stderr when the run fails.
inline nlohmann::json run_cli_json(const std::string& args) {
  const auto r = run_cli(args + " --json");
  if (r.exit_code != 0)
    throw std::runtime_error("vispco " + args + " --json: exit code " + std::to_string(r.exit_code) + "\n" +
                             r.err);
  return nlohmann::json::parse(r.out);
}

}  // namespace vispco::testing
