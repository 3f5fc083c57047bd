// Tests of the shared helpers of core/: atomic whole-file writes and registry lookups by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/errors.h"
#include "core/named_table.h"
#include "core/text_file.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TextFile, WritesReplacesAndCreatesTheFolderWithoutLeavingTheTemporary) {
  testing::TempDir tmp;
  const std::string path = tmp.str("a/b/report.md");  // a/b does not exist yet
  write_text_atomically(path, std::string("first\r\nline\0x", 13));
  EXPECT_EQ(read_all(path), std::string("first\r\nline\0x", 13));  // bytes as given, NUL included
  write_text_atomically(path, "second");
  EXPECT_EQ(read_all(path), "second");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.str("a/b")), fs::directory_iterator{}), 1);
}

TEST(TextFile, AnUnwritablePathIsAnIoErrorAndTheOldFileStays) {
  testing::TempDir tmp;
  write_text_atomically(tmp.str("keep.txt"), "old");
  std::ofstream(tmp.str("plain")) << "a file, not a folder";
  EXPECT_THROW(write_text_atomically(tmp.str("plain/x.txt"), "new"), IoError);
  // The target is a folder: the rename fails, the temporary is written, the folder untouched.
  fs::create_directories(tmp.str("dir.md"));
  EXPECT_THROW(write_text_atomically(tmp.str("dir.md"), "new"), IoError);
  EXPECT_TRUE(fs::is_directory(tmp.str("dir.md")));
  EXPECT_EQ(read_all(tmp.str("keep.txt")), "old");
}

struct Row {
  const char* name;
  int value;
};

TEST(NamedTable, FindsTheRowByNameOrListsTheValidNames) {
  const std::vector<Row> table = {{"step", 1}, {"ramp", 2}, {"multistep", 3}};
  EXPECT_EQ(find_named(table, "ramp", "kernel").value, 2);
  EXPECT_EQ(&find_named(table, "multistep", "kernel"), &table[2]);
  try {
    find_named(table, "cosine", "kernel", ", or a file");
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "unknown kernel 'cosine' (valid: step, ramp, multistep, or a file)");
  }
  EXPECT_EQ(join_names({}), "");
  EXPECT_EQ(join_names({"a"}), "a");
}

}  // namespace
}  // namespace vispco
