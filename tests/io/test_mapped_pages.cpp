// Tests of releasing a mapped checkpoint's resident pages (MappedFile::release_pages through
// SafetensorsFile::release and CheckpointTensors::release): the process's resident bytes of the mapping,
// read from /proc/self/smaps, fall by the tensor's size, and the tensor still reads its original values.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "io/safetensors.h"
#include "io/safetensors_test_util.h"

namespace vispco::io {
namespace {

using st_test::mapped_rss_kb;
using st_test::TempDir;

// 8 MiB of fp32 values that differ from page to page (a zero page could be shared and not count).
at::Tensor big_values() { return at::arange(2 * 1024 * 1024, at::kFloat).remainder(977.0); }
at::Tensor small_values() { return at::tensor({1.5F, -2.0F, 3.25F}); }

TEST(MappedPages, ReleaseDropsResidentPagesAndKeepsTheValues) {
  TempDir dir;
  const auto path = dir / "model.safetensors";
  save_safetensors(path, {{"big", big_values()}, {"small", small_values()}});
  const SafetensorsFile f = SafetensorsFile::open(path);
  const at::Tensor big = f.tensor("big"), small = f.tensor("small");
  ASSERT_TRUE(at::equal(big, big_values()));  // reads (faults in) every page
  const int64_t before = mapped_rss_kb(path);
  ASSERT_GE(before, 8 * 1024 - 8) << "the 8 MiB tensor's pages should be resident after reading it";

  f.release("big");
  const int64_t after = mapped_rss_kb(path);
  EXPECT_LE(after, before - (8 * 1024 - 8)) << "before " << before << " kB, after " << after << " kB";
  EXPECT_TRUE(at::equal(big, big_values()));  // read again from the file
  EXPECT_TRUE(at::equal(small, small_values()));
  EXPECT_GE(mapped_rss_kb(path), 8 * 1024 - 8);  // and resident again
}

TEST(MappedPages, CheckpointReleaseFindsTheShardAndRejectsUnknownNames) {
  TempDir dir;
  save_safetensors(dir / "model.safetensors", {{"big", big_values()}});
  const CheckpointTensors ckpt = CheckpointTensors::open_dir(dir.str());
  const at::Tensor big = ckpt.tensor("big");
  ASSERT_TRUE(at::equal(big, big_values()));
  const int64_t before = mapped_rss_kb(dir / "model.safetensors");
  ckpt.release("big");
  EXPECT_LE(mapped_rss_kb(dir / "model.safetensors"), before - (8 * 1024 - 8));
  EXPECT_TRUE(at::equal(big, big_values()));
  EXPECT_THROW(ckpt.release("nope"), ConfigError);
}

}  // namespace
}  // namespace vispco::io
