// Publishing a checkpoint folder (core/atomic_dir.h, issue 45 item 7): a child process writes and publishes a
// new version and is killed (SIGKILL) before each of its filesystem steps in turn; after every kill the
// parent recovers the folder as a resuming run does and finds a complete version at its path, the old or the
// new one, never none and never a mix.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/atomic_dir.h"
#include "core/errors.h"
#include "core/json_file.h"
#include "core/text_file.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kFiles = {"net.pt", "optimizer.pt", "position.json"};

// The bytes of `file` in version `tag`: distinct per file and per version, and long enough (64 KiB) that a
// write is not one page.
std::string content(const std::string& tag, const std::string& file) {
  if (file == "position.json") return "{\"version\": \"" + tag + "\"}";
  std::string s;
  while (s.size() < 65536) s += tag + "/" + file + ";";
  return s;
}

// Writes version `tag` of the checkpoint into `dir`, calling `before` ahead of each file.
void write_version(const fs::path& dir, const std::string& tag,
                   const std::function<void(std::string_view)>& before) {
  for (const auto& f : kFiles) {
    if (before) before("write " + f);
    std::ofstream out(dir / f, std::ios::binary);
    out << content(tag, f);
  }
}

// The version held at `dir` when it is complete (exactly kFiles, each with that version's bytes, and
// position.json parses); "" when `dir` is absent; "incomplete: …" otherwise.
std::string version_at(const fs::path& dir) {
  if (!fs::exists(dir)) return "";
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  if (names != std::set<std::string>(kFiles.begin(), kFiles.end()))
    return "incomplete: " + std::to_string(names.size()) + " files";
  std::string tag;
  try {
    tag = read_json_file((dir / "position.json").string(), "checkpoint").at("version").get<std::string>();
  } catch (const std::exception& e) {
    return std::string("incomplete: ") + e.what();
  }
  for (const auto& f : kFiles)
    if (testing::read_file(dir / f) != content(tag, f)) return "incomplete: " + f + " is not version " + tag;
  return tag;
}

enum class Outcome { kKilled, kFinished, kFailed };

// Forks a child that saves version `tag` at `dest` (begin_staging, write, publish_directory) and kills itself
// with SIGKILL just before step number `kill_at` (0-based, counting file writes and publish steps). `seen`
// receives the name of the step it was killed before.
Outcome save_in_child(const fs::path& dest, const std::string& tag, int kill_at, bool exchange,
                      std::string& seen) {
  const fs::path name_file = dest.parent_path() / "killed-before.txt";
  fs::remove(name_file);
  const pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    const auto before = [&](std::string_view step) {
      if (n++ == kill_at) {
        std::ofstream(name_file) << step;
        ::raise(SIGKILL);
      }
    };
    try {
      const fs::path staging = begin_staging(dest);
      write_version(staging, tag, before);
      PublishOptions o;
      o.before_step = before;
      o.exchange = exchange;
      publish_directory(dest, o);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  seen = fs::exists(name_file) ? testing::read_file(name_file) : "";
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return Outcome::kKilled;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Outcome::kFinished;
  return Outcome::kFailed;
}

// Kills a save before each of its steps in turn, with (`with_old`) or without a published version before it,
// and checks what recovery finds. @return the names of the steps a kill was placed before.
std::vector<std::string> kill_at_every_step(bool exchange, bool with_old) {
  std::vector<std::string> steps;
  for (int kill_at = 0; kill_at < 100; ++kill_at) {
    testing::TempDir tmp;
    const fs::path dest = tmp.path() / "checkpoint";
    if (with_old) {
      write_version(begin_staging(dest), "old", {});
      publish_directory(dest);
      EXPECT_EQ(version_at(dest), "old");
    }
    std::string step;
    const Outcome outcome = save_in_child(dest, "new", kill_at, exchange, step);
    EXPECT_NE(outcome, Outcome::kFailed) << "kill_at " << kill_at;
    // What a resuming run does first (Trainer, finetune): recover, then read.
    recover_directory(dest);
    const std::string got = version_at(dest);
    if (outcome == Outcome::kFinished) {
      EXPECT_EQ(got, "new");
    } else if (with_old) {
      EXPECT_TRUE(got == "old" || got == "new") << "killed before '" << step << "': found '" << got << "'";
    } else {
      EXPECT_TRUE(got == "" || got == "new") << "killed before '" << step << "': found '" << got << "'";
    }
    if (fs::exists(dest)) {  // recovery left no staging or aside folder behind
      EXPECT_FALSE(fs::exists(staging_path(dest))) << "after a kill before '" << step << "'";
      EXPECT_FALSE(fs::exists(dest.string() + ".old")) << "after a kill before '" << step << "'";
    }
    // The next save after the kill publishes its version.
    write_version(begin_staging(dest), "next", {});
    publish_directory(dest);
    EXPECT_EQ(version_at(dest), "next") << "after a kill before '" << step << "'";
    if (outcome != Outcome::kKilled) break;
    steps.push_back(step);
  }
  return steps;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(AtomicDir, AKillBeforeAnyStepOfASwapLeavesTheOldOrTheNewCheckpoint) {
  const auto steps = kill_at_every_step(/*exchange=*/true, /*with_old=*/true);
  // 3 file writes, sync, swap, sync, 3 removals, the folder's removal, sync.
  EXPECT_EQ(steps.size(), 11u);
  EXPECT_TRUE(has(steps, "swap"));
  EXPECT_TRUE(has(steps, "remove-old position.json"));
}

TEST(AtomicDir, AKillBeforeAnyStepOfTheRenameAsideFallbackLeavesTheOldOrTheNewCheckpoint) {
  const auto steps = kill_at_every_step(/*exchange=*/false, /*with_old=*/true);
  EXPECT_EQ(steps.size(), 13u);
  EXPECT_TRUE(has(steps, "rename-aside"));
  EXPECT_TRUE(has(steps, "rename"));  // the instant between the two renames: `dest` is absent, .old complete
}

TEST(AtomicDir, AKillDuringTheFirstSaveLeavesNoCheckpointOrTheNewOne) {
  const auto steps = kill_at_every_step(/*exchange=*/true, /*with_old=*/false);
  EXPECT_EQ(steps.size(), 6u);  // 3 file writes, sync, rename, sync
}

TEST(AtomicDir, RecoveryPutsAnAsideVersionBackAndDropsLeftovers) {
  testing::TempDir tmp;
  const fs::path dest = tmp.path() / "checkpoint";
  recover_directory(dest);  // nothing there: a no-op
  EXPECT_FALSE(fs::exists(dest));
  // Killed between the rename-aside renames, with a later save's partial staging folder beside it.
  fs::create_directories(dest.string() + ".old");
  write_version(dest.string() + ".old", "old", {});
  fs::create_directories(staging_path(dest));
  std::ofstream(staging_path(dest) / "net.pt") << "partial";
  recover_directory(dest);
  EXPECT_EQ(version_at(dest), "old");
  EXPECT_FALSE(fs::exists(staging_path(dest)));
  EXPECT_FALSE(fs::exists(dest.string() + ".old"));
  // A staging folder with no published version is left alone (nothing to recover) until the next save.
  fs::remove_all(dest);
  fs::create_directories(staging_path(dest));
  recover_directory(dest);
  EXPECT_TRUE(fs::exists(staging_path(dest)));
  EXPECT_THROW(publish_directory(tmp.path() / "never-staged"), IoError);
}

TEST(TextFile, AppendTextAppendsAndReportsAnUnwritablePath) {
  testing::TempDir tmp;
  append_text(tmp.str("log.jsonl"), "{\"a\": 1}\n");
  append_text(tmp.str("log.jsonl"), "{\"a\": 2}\n");
  EXPECT_EQ(testing::read_file(tmp.path() / "log.jsonl"), "{\"a\": 1}\n{\"a\": 2}\n");
  std::ofstream(tmp.str("plain")) << "a file, not a folder";
  EXPECT_THROW(append_text(tmp.str("plain/log.jsonl"), "x"), IoError);
}

}  // namespace
}  // namespace vispco
