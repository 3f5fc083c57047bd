// The GGUF reader against files written by the test writer (tests/io/gguf_writer.h, from the format spec):
// metadata values, shapes (ne reversed), zero-copy float tensors, Q8_0 dequantisation against a hand-built
// block, and one clear FormatError for each kind of corruption (never a crash: every truncation of a valid
// file is tried).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/errors.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "test_util.h"

namespace vispco::io {
namespace {

using vispco::testing::GgufWriter;
using vispco::testing::TempDir;

std::string write(const TempDir& dir, const std::string& bytes, const std::string& name = "f.gguf") {
  const std::string path = dir / name;
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

GgufWriter sample() {
  GgufWriter w;
  w.str("general.architecture", "llama");
  w.u32("llama.block_count", 7);
  w.f32("llama.rope.freq_base", 500000.f);
  w.boolean("clip.use_gelu", true);
  w.strings("tokenizer.ggml.tokens", {"<unk>", "\xe2\x96\x81hi", ""});
  w.floats("tokenizer.ggml.scores", {0.f, -1.5f, 2.f});
  w.ints("tokenizer.ggml.token_type", {2, 1, 3});
  w.tensor("a", at::arange(6, at::kFloat).reshape({2, 3}), 0);
  w.tensor("h", at::tensor({1.5f, -2.f, 0.25f, 8.f}), 1);
  w.tensor("b", at::tensor({0.5f, -3.f}).reshape({1, 2}), 30);
  return w;
}

void expect_format_error(const std::string& bytes, const std::string& part) {
  TempDir dir;
  const auto path = write(dir, bytes);
  try {
    GgufFile::open(path);
    FAIL() << "no error; expected one mentioning '" << part << "'";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

void put32(std::string& s, size_t at, uint32_t v) { std::memcpy(s.data() + at, &v, 4); }
void put64(std::string& s, size_t at, uint64_t v) { std::memcpy(s.data() + at, &v, 8); }

TEST(Gguf, ReadsMetadataShapesAndFloatTensors) {
  TempDir dir;
  auto w = sample();
  const auto f = GgufFile::open(write(dir, w.bytes()));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 7);
  EXPECT_EQ(f.get_float("llama.rope.freq_base"), 500000.0);
  EXPECT_EQ(f.get_float("llama.block_count"), 7.0);  // an integer reads as a number
  EXPECT_TRUE(f.get_bool("clip.use_gelu", false));
  EXPECT_EQ(f.get_int("absent", -4), -4);
  EXPECT_THROW(f.get_int("absent"), ConfigError);
  EXPECT_THROW(f.get_int("general.architecture"), ConfigError);
  const auto* toks = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(toks, nullptr);
  EXPECT_EQ(toks->strings, (std::vector<std::string>{"<unk>", "\xe2\x96\x81hi", ""}));
  EXPECT_EQ(f.find("tokenizer.ggml.scores")->floats, (std::vector<double>{0.0, -1.5, 2.0}));
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->ints, (std::vector<int64_t>{2, 1, 3}));

  const auto* a = f.tensor_info("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne, (std::vector<int64_t>{3, 2}));  // ggml order: innermost first
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->nbytes, 24u);
  EXPECT_TRUE(at::equal(f.tensor("a"), at::arange(6, at::kFloat).reshape({2, 3})));
  auto h = f.tensor("h");
  EXPECT_EQ(h.scalar_type(), at::kHalf);
  EXPECT_TRUE(at::equal(h.to(at::kFloat), at::tensor({1.5f, -2.f, 0.25f, 8.f})));
  auto b = f.tensor("b");
  EXPECT_EQ(b.scalar_type(), at::kBFloat16);
  EXPECT_EQ(b.sizes(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(at::equal(b.to(at::kFloat), at::tensor({0.5f, -3.f}).reshape({1, 2})));
  EXPECT_THROW(f.tensor("zzz"), ConfigError);
}

TEST(Gguf, DequantisesQ8_0BlockByBlock) {
  // Two blocks of 32: d = 0.5 with q = k − 16, and d = 0.125 with q = 3·(k mod 5) − 6. Expected values
  // computed here from the block layout {f16 d, int8 q[32]}, independently of the reader.
  std::string data;
  std::vector<float> expected;
  for (const float d : {0.5f, 0.125f}) {
    const at::Half dh(d);
    uint16_t bits;
    std::memcpy(&bits, &dh, 2);
    data.append(reinterpret_cast<const char*>(&bits), 2);
    for (int k = 0; k < 32; ++k) {
      const int q = d == 0.5f ? k - 16 : 3 * (k % 5) - 6;
      data += static_cast<char>(static_cast<int8_t>(q));
      expected.push_back(d * static_cast<float>(q));
    }
  }
  GgufWriter w;
  w.tensor("q", at::zeros({2, 32}), 0);  // placeholder of the right element count, bytes replaced below
  auto bytes = w.bytes();
  // Rewrite as Q8_0: header (24) + name ("q": 8 + 1) + n_dims (4) + ne (16) → the type field.
  const size_t type_at = 24 + 9 + 4 + 16;
  put32(bytes, type_at, 8);
  bytes = bytes.substr(0, bytes.size() - 256) + data;
  TempDir dir;
  const auto f = GgufFile::open(write(dir, bytes));
  EXPECT_EQ(f.tensor_info("q")->nbytes, 68u);
  auto t = f.tensor("q");
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 32}));
  EXPECT_TRUE(at::equal(t, at::tensor(expected).reshape({2, 32})));
}

TEST(Gguf, WriterQ8_0RoundTripsWithinHalfAStepAndTheScaleRounding) {
  auto x = at::randn({4, 64});
  GgufWriter w;
  w.tensor("x", x, 8);
  TempDir dir;
  const auto f = GgufFile::open(write(dir, w.bytes()));
  auto y = f.tensor("x");
  // Per block: half a step from rounding q, plus |q| ≤ 127 times the f16 rounding of d (relative 2^-11).
  const auto step = x.reshape({-1, 32}).abs().amax(1, true) / 127;
  EXPECT_TRUE(((y - x).reshape({-1, 32}).abs() <= step * (0.5 + 127.0 / 2048) + 1e-7).all().item<bool>());
  EXPECT_FALSE(at::equal(y, x));  // it did quantise
}

TEST(Gguf, UnsupportedTypeIsReadableMetadataButNotATensor) {
  GgufWriter w;
  w.tensor("k", at::zeros({256}), 0);
  auto bytes = w.bytes();
  put32(bytes, 24 + 9 + 4 + 8, 12);  // Q4_K: 144 bytes per 256 values
  TempDir dir;
  const auto f = GgufFile::open(write(dir, bytes));
  EXPECT_EQ(f.tensor_info("k")->nbytes, 144u);
  try {
    f.tensor("k");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_K"), std::string::npos) << e.what();
  }
}

TEST(Gguf, EveryTruncationIsAFormatError) {
  const auto bytes = sample().bytes();
  TempDir dir;
  // The last tensor ("b", 4 bytes) is followed by 28 bytes of alignment padding; a cut there is a valid file.
  for (size_t n = 0; n < bytes.size() - 28; n += (n < 400 ? 1 : 7)) {
    const auto path = write(dir, bytes.substr(0, n), "cut.gguf");
    try {
      GgufFile::open(path);
      ADD_FAILURE() << "a file cut to " << n << " of " << bytes.size() << " bytes was accepted";
    } catch (const FormatError&) {
    }
  }
}

TEST(GgufReject, BadMagicAndVersions) {
  auto bytes = sample().bytes();
  auto bad = bytes;
  bad[0] = 'X';
  expect_format_error(bad, "magic");
  bad = bytes;
  put32(bad, 4, 1);
  expect_format_error(bad, "version 1");
  put32(bad, 4, 4);
  expect_format_error(bad, "unsupported GGUF version 4");
}

TEST(GgufReject, CountsLargerThanTheFile) {
  auto bytes = sample().bytes();
  auto bad = bytes;
  put64(bad, 16, uint64_t{1} << 40);
  expect_format_error(bad, "metadata count");
  bad = bytes;
  put64(bad, 8, uint64_t{1} << 40);
  expect_format_error(bad, "tensor count");
  bad = bytes;
  put64(bad, 24, uint64_t{1} << 60);  // the first key's length
  expect_format_error(bad, "runs past the end");
}

TEST(GgufReject, BadValuesAndDuplicates) {
  {
    GgufWriter w;
    w.u32("a", 1);
    w.u32("a", 2);
    expect_format_error(w.bytes(), "'a' appears twice");
  }
  {
    GgufWriter w;
    w.tensor("t", at::zeros({4}), 0);
    w.tensor("t", at::zeros({4}), 0);
    expect_format_error(w.bytes(), "'t' appears twice");
  }
  {
    GgufWriter w;
    w.boolean("b", true);
    auto bytes = w.bytes();
    bytes[24 + 9 + 4] = 2;
    expect_format_error(bytes, "bool of value 2");
  }
  {
    GgufWriter w;
    w.u32("x", 1);
    auto bytes = w.bytes();
    put32(bytes, 24 + 9, 13);
    expect_format_error(bytes, "unknown value type 13");
  }
  {
    GgufWriter w;
    w.alignment = 24;
    w.tensor("t", at::zeros({4}), 0);
    expect_format_error(w.bytes(), "power of two");
  }
}

TEST(GgufReject, BadTensorInfos) {
  GgufWriter w;
  w.tensor("t", at::zeros({2, 4}), 0);
  w.tensor("u", at::zeros({8}), 0);
  const auto bytes = w.bytes();
  const size_t t_info = 24 + 9;  // after the header and the name "t"
  auto bad = bytes;
  put32(bad, t_info, 5);
  expect_format_error(bad, "5 dimensions");
  bad = bytes;
  put64(bad, t_info + 4, 0);
  expect_format_error(bad, "dimension 0 of 0");
  bad = bytes;
  put64(bad, t_info + 4 + 16 + 4, 4);  // offset 4: not aligned
  expect_format_error(bad, "not a multiple of the alignment");
  bad = bytes;
  put64(bad, t_info + 4 + 16 + 4, 1 << 20);
  expect_format_error(bad, "run past the data section");
  // u's offset (32 + …) moved onto t's bytes.
  const size_t u_info = t_info + 4 + 16 + 4 + 8 + 9;
  bad = bytes;
  put64(bad, u_info + 4 + 8 + 4, 0);
  expect_format_error(bad, "overlap");
  bad = bytes;
  put32(bad, u_info + 4 + 8, 8);  // Q8_0 with 8 values per row
  expect_format_error(bad, "block of 32");
}

TEST(GgufReject, MissingFileIsAnIoError) { EXPECT_THROW(GgufFile::open("/nonexistent/x.gguf"), IoError); }

}  // namespace
}  // namespace vispco::io
