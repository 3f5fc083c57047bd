// Tests of the safetensors reader and writer: round trips in every dtype, files built and checked byte by
// byte by hand, and the zero-copy / copy-on-write properties of the mapping. Rejections are in
// test_safetensors_reject.cpp, checkpoint folders in test_checkpoint_tensors.cpp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "io/safetensors.h"
#include "io/safetensors_test_util.h"

namespace vispco::io {
namespace {

using st_test::lookup_maps;
using st_test::pad8;
using st_test::read_bytes;
using st_test::st_bytes;
using st_test::TempDir;
using st_test::write_bytes;

/// The format's dtype names, written out independently of the library's table.
struct DtypeCase {
  const char* name;
  c10::ScalarType type;
};
const DtypeCase kCases[] = {{"F32", at::kFloat},  {"F16", at::kHalf}, {"BF16", at::kBFloat16},
                            {"F64", at::kDouble}, {"I64", at::kLong}, {"I32", at::kInt},
                            {"I16", at::kShort},  {"I8", at::kChar},  {"U8", at::kByte},
                            {"BOOL", at::kBool}};

/// Distinct, exactly representable values of `type` in a [4, 6] tensor (negatives and large magnitudes
/// where the dtype has them).
at::Tensor sample(c10::ScalarType type) {
  const at::Tensor i = at::arange(24, at::kLong).reshape({4, 6});
  switch (type) {
    case at::kBool:
      return (i % 3 == 0);
    case at::kByte:
      return (i + 230).to(type);
    case at::kChar:
      return (i - 12).to(type);
    case at::kLong:
      return (i - 12) * (int64_t(1) << 40);
    default:
      return ((i - 12).to(at::kDouble) * 0.375).to(type);
  }
}

TEST(SafetensorsRoundTrip, EveryDtypeKeepsValuesDtypeAndShape) {
  TempDir dir;
  std::map<std::string, at::Tensor> saved;
  for (const auto& c : kCases) {
    EXPECT_EQ(safetensors_dtype(c.type), c.name);
    EXPECT_EQ(torch_dtype(c.name), c.type);
    saved[std::string("t_") + c.name] = sample(c.type);
  }
  save_safetensors(dir / "all.safetensors", saved);
  const SafetensorsFile f = SafetensorsFile::open(dir / "all.safetensors");
  ASSERT_EQ(f.entries().size(), std::size(kCases));
  for (const auto& c : kCases) {
    const std::string name = std::string("t_") + c.name;
    SCOPED_TRACE(name);
    EXPECT_EQ(f.entries().at(name).dtype, c.name);
    EXPECT_EQ(f.entries().at(name).shape, (std::vector<int64_t>{4, 6}));
    const at::Tensor t = f.tensor(name);
    EXPECT_EQ(t.scalar_type(), c.type);
    EXPECT_EQ(t.sizes(), saved[name].sizes());
    EXPECT_TRUE(at::equal(t, saved[name])) << t << saved[name];
  }
}

TEST(SafetensorsRoundTrip, ScalarEmptyStridedAndMetadata) {
  TempDir dir;
  const at::Tensor base = at::arange(12, at::kFloat).reshape({3, 4});
  const std::map<std::string, at::Tensor> saved = {
      {"scalar", at::scalar_tensor(2.5, at::kDouble)},        {"empty_rows", at::zeros({0, 3}, at::kFloat)},
      {"empty_cols", at::zeros({5, 0}, at::kLong)},           {"transposed", base.t()},  // non-contiguous
      {"sliced", base.index({at::indexing::Slice(1, 3), 1})},  // storage offset and stride
  };
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "µ and \"quotes\""}};
  save_safetensors(dir / "m.safetensors", saved, meta);
  const SafetensorsFile f = SafetensorsFile::open(dir / "m.safetensors");
  EXPECT_EQ(f.metadata(), meta);
  EXPECT_EQ(f.tensor("scalar").dim(), 0);
  EXPECT_EQ(f.tensor("scalar").item<double>(), 2.5);
  EXPECT_EQ(f.tensor("empty_rows").sizes(), at::IntArrayRef({0, 3}));
  EXPECT_EQ(f.tensor("empty_cols").sizes(), at::IntArrayRef({5, 0}));
  EXPECT_TRUE(at::equal(f.tensor("transposed"), base.t().contiguous()));
  EXPECT_TRUE(at::equal(f.tensor("sliced"), at::tensor({5.0f, 9.0f})));
}

TEST(SafetensorsRoundTrip, RejectsUnsupportedInputWithoutWritingAFile) {
  TempDir dir;
  const std::string path = dir / "bad.safetensors";
  st_test::expect_error<InvalidArgument>(
      [&] {
        save_safetensors(path, {{"z", at::zeros({2}, at::kComplexFloat)}});
      },
      path, {"\"z\"", "F32"});
  st_test::expect_error<InvalidArgument>(
      [&] {
        save_safetensors(path, {{"__metadata__", at::zeros({2})}});
      },
      path, {"reserved"});
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(SafetensorsBytes, ReadsHandBuiltFile) {
  TempDir dir;
  const std::string path = dir / "hand.safetensors";
  const std::string header = pad8(R"({"__metadata__":{"format":"pt"},)"
                                  R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                  R"("b":{"dtype":"I16","shape":[3],"data_offsets":[8,14]},)"
                                  R"("c":{"dtype":"BOOL","shape":[2],"data_offsets":[14,16]},)"
                                  R"("d":{"dtype":"BF16","shape":[],"data_offsets":[16,18]},)"
                                  R"("e":{"dtype":"F16","shape":[1,1],"data_offsets":[18,20]}})");
  const std::string data = std::string("\x00\x00\xC0\x3F", 4) +          // 1.5f  = 0x3FC00000
                           std::string("\x00\x00\x00\xC0", 4) +          // -2.0f = 0xC0000000
                           std::string("\x01\x00\xFE\xFF\x2C\x01", 6) +  // 1, -2, 300
                           std::string("\x01\x00", 2) +                  // true, false
                           std::string("\x80\x3F", 2) +                  // bf16 1.0 = 0x3F80
                           std::string("\x00\xC0", 2);                   // f16 -2.0 = 0xC000
  write_bytes(path, st_bytes(header, data));

  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(f.entries().at("b").begin, 8u);
  EXPECT_EQ(f.entries().at("b").end, 14u);
  EXPECT_TRUE(at::equal(f.tensor("a"), at::tensor({1.5f, -2.0f})));
  EXPECT_TRUE(at::equal(f.tensor("b"), at::tensor({1, -2, 300}, at::kShort)));
  EXPECT_TRUE(at::equal(f.tensor("c"), at::tensor({1, 0}).to(at::kBool)));
  EXPECT_EQ(f.tensor("d").scalar_type(), at::kBFloat16);
  EXPECT_EQ(f.tensor("d").dim(), 0);
  EXPECT_EQ(f.tensor("d").item<float>(), 1.0f);
  EXPECT_EQ(f.tensor("e").scalar_type(), at::kHalf);
  EXPECT_EQ(f.tensor("e").sizes(), at::IntArrayRef({1, 1}));
  EXPECT_EQ(f.tensor("e").item<float>(), -2.0f);
}

TEST(SafetensorsBytes, WriterProducesExpectedBytes) {
  TempDir dir;
  const std::string path = dir / "x.safetensors";
  save_safetensors(path, {{"x", at::tensor({1, 258, -1}, at::kInt)}}, {{"k", "v"}});
  const std::string bytes = read_bytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + n + 12);
  const std::string header = bytes.substr(8, n);
  const size_t close = header.rfind('}');
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos)
      << "padding is not spaces: " << header;
  EXPECT_EQ(nlohmann::json::parse(header), nlohmann::json::parse(R"({"__metadata__":{"k":"v"},
      "x":{"dtype":"I32","shape":[3],"data_offsets":[0,12]}})"));
  EXPECT_EQ(bytes.substr(8 + n), std::string("\x01\x00\x00\x00\x02\x01\x00\x00\xFF\xFF\xFF\xFF", 12));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(SafetensorsBytes, WriterPutsWiderDtypesFirstSoEveryTensorIsAligned) {
  TempDir dir;
  const std::string path = dir / "mix.safetensors";
  save_safetensors(path, {{"a", at::tensor({1, 2, 3}, at::kChar)},
                          {"b", at::tensor({1.f, 2.f})},
                          {"c", at::tensor({3.0}, at::kDouble)},
                          {"d", at::ones({1}, at::kBool)}});
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[i]);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["c"]["data_offsets"], nlohmann::json({0, 8}));
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json({8, 16}));
  EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json({16, 19}));
  EXPECT_EQ(header["d"]["data_offsets"], nlohmann::json({19, 20}));
  const SafetensorsFile f = SafetensorsFile::open(path);
  for (const char* name : {"a", "b", "c", "d"}) {
    const at::Tensor t = f.tensor(name);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % t.element_size(), 0u) << name;
    EXPECT_TRUE(lookup_maps(path, t.data_ptr()).contains_ptr) << name << " was copied";
  }
  EXPECT_TRUE(at::equal(f.tensor("c"), at::tensor({3.0}, at::kDouble)));
}

/// Two F32 tensors of 4 values each, "a" at [0, 16) and "b" at [16, 32), data 8-byte aligned.
std::string two_tensor_file() {
  std::string data;
  for (float v : {1.f, 2.f, 3.f, 4.f, 10.f, 20.f, 30.f, 40.f})
    data.append(reinterpret_cast<const char*>(&v), 4);
  return st_bytes(pad8(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                       R"("b":{"dtype":"F32","shape":[2,2],"data_offsets":[16,32]}})"),
                  data);
}

TEST(SafetensorsZeroCopy, ViewsPointIntoTheMappingAtTheirOffsets) {
  TempDir dir;
  const std::string path = dir / "z.safetensors";
  write_bytes(path, two_tensor_file());
  const SafetensorsFile f = SafetensorsFile::open(path);
  const at::Tensor a = f.tensor("a"), b = f.tensor("b");
  EXPECT_EQ(static_cast<char*>(b.data_ptr()) - static_cast<char*>(a.data_ptr()), 16);
  const auto maps = lookup_maps(path, a.data_ptr());
  EXPECT_EQ(maps.n_mappings, 1);
  EXPECT_TRUE(maps.contains_ptr);
  EXPECT_TRUE(lookup_maps(path, b.data_ptr()).contains_ptr);
  EXPECT_TRUE(at::equal(b, at::tensor({10.f, 20.f, 30.f, 40.f}).reshape({2, 2})));
}

TEST(SafetensorsZeroCopy, TensorKeepsTheMappingAliveAfterTheFileObjectGoes) {
  TempDir dir;
  const std::string path = dir / "z.safetensors";
  write_bytes(path, two_tensor_file());
  at::Tensor a;
  {
    const SafetensorsFile f = SafetensorsFile::open(path);
    a = f.tensor("a");
  }
  EXPECT_EQ(lookup_maps(path).n_mappings, 1);
  EXPECT_TRUE(at::equal(a, at::tensor({1.f, 2.f, 3.f, 4.f})));
  a.reset();
  EXPECT_EQ(lookup_maps(path).n_mappings, 0) << "the last tensor should unmap the file";
}

TEST(SafetensorsZeroCopy, WritesAreSharedByViewsButNeverReachTheFile) {
  TempDir dir;
  const std::string path = dir / "z.safetensors";
  const std::string original = two_tensor_file();
  write_bytes(path, original);
  const SafetensorsFile f = SafetensorsFile::open(path);
  f.tensor("a").fill_(7.f);
  EXPECT_TRUE(at::equal(f.tensor("a"), at::full({4}, 7.f))) << "views of one mapping share memory";
  EXPECT_EQ(read_bytes(path), original) << "copy-on-write mapping leaked a write to disk";
  EXPECT_TRUE(at::equal(SafetensorsFile::open(path).tensor("a"), at::tensor({1.f, 2.f, 3.f, 4.f})));
}

TEST(SafetensorsZeroCopy, EmptyTensorsAnywhereIncludingAnEmptyDataSection) {
  TempDir dir;
  const std::string path = dir / "e.safetensors";
  write_bytes(path, st_bytes(pad8(R"({"e0":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},)"
                                  R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                  R"("e1":{"dtype":"I64","shape":[0],"data_offsets":[4,4]}})"),
                             std::string("\x00\x00\x80\x3F", 4)));
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.tensor("e0").sizes(), at::IntArrayRef({0, 3}));
  EXPECT_EQ(f.tensor("e1").numel(), 0);
  EXPECT_EQ(f.tensor("e1").scalar_type(), at::kLong);
  EXPECT_EQ(f.tensor("x").item<float>(), 1.f);

  const std::string only_empty = dir / "only_empty.safetensors";
  write_bytes(only_empty, st_bytes(R"({"e":{"dtype":"BF16","shape":[2,0],"data_offsets":[0,0]}})", ""));
  EXPECT_EQ(SafetensorsFile::open(only_empty).tensor("e").sizes(), at::IntArrayRef({2, 0}));
}

TEST(SafetensorsZeroCopy, MisalignedDataIsCopiedWithTheRightValues) {
  TempDir dir;
  const std::string path = dir / "odd.safetensors";
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  if ((8 + header.size()) % 4 == 0) header += ' ';  // data section starts misaligned for F32
  write_bytes(path, st_bytes(header, std::string("\x00\x00\xC0\x3F\x00\x00\x00\xC0", 8)));
  const at::Tensor a = SafetensorsFile::open(path).tensor("a");
  EXPECT_TRUE(at::equal(a, at::tensor({1.5f, -2.f})));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data_ptr()) % 4, 0u);
}

TEST(SafetensorsZeroCopy, MissingTensorAndMissingFileNameWhatIsMissing) {
  TempDir dir;
  const std::string path = dir / "z.safetensors";
  write_bytes(path, two_tensor_file());
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_TRUE(f.contains("a"));
  EXPECT_FALSE(f.contains("nope"));
  st_test::expect_error<ConfigError>([&] { f.tensor("nope"); }, path, {"\"nope\""});
  const std::string absent = dir / "absent.safetensors";
  st_test::expect_error<IoError>([&] { SafetensorsFile::open(absent); }, absent, {"No such file"});
}

}  // namespace
}  // namespace vispco::io
