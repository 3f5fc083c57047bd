// Tests of CheckpointTensors: single-file and sharded (model.safetensors.index.json) Hugging Face folders,
// and the errors for missing files and tensors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "io/safetensors.h"
#include "io/safetensors_test_util.h"

namespace vispco::io {
namespace {

using st_test::lookup_maps;
using st_test::TempDir;
using st_test::write_bytes;

at::Tensor values_a() { return at::arange(6, at::kFloat).reshape({2, 3}); }
at::Tensor values_b() { return at::tensor({7, 8, 9}, at::kLong); }
at::Tensor values_c() { return at::tensor({0.5, -0.25}, at::kDouble).to(at::kBFloat16); }

/// Two shards ({a, b} and {c}) and an index listing all three, in `dir`.
void write_sharded(const TempDir& dir) {
  save_safetensors(dir / "model-00001-of-00002.safetensors", {{"a", values_a()}, {"b", values_b()}});
  save_safetensors(dir / "model-00002-of-00002.safetensors", {{"c", values_c()}});
  write_bytes(dir / "model.safetensors.index.json", R"({"metadata": {"total_size": 64},
    "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                   "c": "model-00002-of-00002.safetensors"}})");
}

TEST(CheckpointTensors, OpensASingleFile) {
  TempDir dir;
  save_safetensors(dir / "model.safetensors", {{"b", values_b()}, {"a", values_a()}});
  const CheckpointTensors ckpt = CheckpointTensors::open_dir(dir.str());
  EXPECT_EQ(ckpt.dir(), dir.str());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(ckpt.contains("a"));
  EXPECT_TRUE(at::equal(ckpt.tensor("a"), values_a()));
  EXPECT_TRUE(at::equal(ckpt.tensor("b"), values_b()));
}

TEST(CheckpointTensors, OpensAShardedIndexMappingEachShardOnce) {
  TempDir dir;
  write_sharded(dir);
  const CheckpointTensors ckpt = CheckpointTensors::open_dir(dir.str());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(at::equal(ckpt.tensor("a"), values_a()));
  EXPECT_TRUE(at::equal(ckpt.tensor("b"), values_b()));
  EXPECT_TRUE(at::equal(ckpt.tensor("c"), values_c()));
  EXPECT_EQ(ckpt.tensor("c").scalar_type(), at::kBFloat16);
  const at::Tensor a = ckpt.tensor("a"), b = ckpt.tensor("b");
  const auto shard1 = lookup_maps(dir / "model-00001-of-00002.safetensors", a.data_ptr());
  EXPECT_EQ(shard1.n_mappings, 1);
  EXPECT_TRUE(shard1.contains_ptr);
  EXPECT_TRUE(lookup_maps(dir / "model-00001-of-00002.safetensors", b.data_ptr()).contains_ptr);
  EXPECT_EQ(lookup_maps(dir / "model-00002-of-00002.safetensors").n_mappings, 1);
}

TEST(CheckpointTensors, SingleFileWinsOverAnIndexLikeTransformers) {
  TempDir dir;
  save_safetensors(dir / "model.safetensors", {{"a", values_a()}});
  write_bytes(dir / "model.safetensors.index.json", R"({"weight_map": {"z": "absent.safetensors"}})");
  EXPECT_EQ(CheckpointTensors::open_dir(dir.str()).names(), (std::vector<std::string>{"a"}));
}

TEST(CheckpointTensors, UnknownTensorIsAConfigErrorNamingTensorAndFolder) {
  TempDir dir;
  write_sharded(dir);
  const CheckpointTensors ckpt = CheckpointTensors::open_dir(dir.str());
  EXPECT_FALSE(ckpt.contains("lm_head.weight"));
  st_test::expect_error<ConfigError>([&] { ckpt.tensor("lm_head.weight"); }, dir.str(),
                                     {"\"lm_head.weight\""});
}

TEST(CheckpointTensors, IndexedTensorMissingFromItsShardIsAFormatError) {
  TempDir dir;
  write_sharded(dir);
  write_bytes(dir / "model.safetensors.index.json",
              R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                 "c": "model-00001-of-00002.safetensors"}})");
  st_test::expect_error<FormatError>([&] { CheckpointTensors::open_dir(dir.str()); },
                                     dir / "model.safetensors.index.json",
                                     {"\"c\"", "model-00001-of-00002.safetensors", "no such tensor"});
}

TEST(CheckpointTensors, MissingFilesAreIoErrors) {
  TempDir dir;
  st_test::expect_error<IoError>([&] { CheckpointTensors::open_dir(dir.str()); }, dir.str(),
                                 {"model.safetensors", "model.safetensors.index.json"});
  write_bytes(dir / "model.safetensors.index.json", R"({"weight_map": {"a": "gone.safetensors"}})");
  st_test::expect_error<IoError>([&] { CheckpointTensors::open_dir(dir.str()); }, dir / "gone.safetensors",
                                 {});
}

TEST(CheckpointTensors, MalformedIndexIsAFormatError) {
  TempDir dir;
  const std::string index = dir / "model.safetensors.index.json";
  write_bytes(index, R"({"metadata": {}})");
  st_test::expect_error<FormatError>([&] { CheckpointTensors::open_dir(dir.str()); }, index,
                                     {"'weight_map'"});
  write_bytes(index, R"({"weight_map": {"a": 3}})");
  st_test::expect_error<FormatError>([&] { CheckpointTensors::open_dir(dir.str()); }, index,
                                     {"\"a\"", "got 3"});
  write_bytes(index, R"({"weight_map": {"a": "../outside.safetensors"}})");
  st_test::expect_error<FormatError>([&] { CheckpointTensors::open_dir(dir.str()); }, index,
                                     {"\"a\"", "../outside.safetensors"});
  write_bytes(index, R"({"weight_map": )");
  st_test::expect_error<FormatError>([&] { CheckpointTensors::open_dir(dir.str()); }, index,
                                     {"not valid JSON"});
}

}  // namespace
}  // namespace vispco::io
