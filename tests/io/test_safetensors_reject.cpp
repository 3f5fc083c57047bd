// Tests that the safetensors reader rejects hand-corrupted files with a one-line FormatError naming the
// file, the tensor or field, and expected vs got.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "io/safetensors.h"
#include "io/safetensors_test_util.h"

namespace vispco::io {
namespace {

using st_test::le64;
using st_test::st_bytes;
using st_test::TempDir;

/// Writes `bytes` to a fresh file and expects opening it to throw FormatError containing every part.
void expect_rejected(const std::string& bytes, std::initializer_list<std::string> parts) {
  TempDir dir;
  const std::string path = dir / "bad.safetensors";
  st_test::write_bytes(path, bytes);
  st_test::expect_error<FormatError>([&] { SafetensorsFile::open(path); }, path, parts);
}

/// A file with one entry `a` whose JSON value is `entry`, and `n_data` zero bytes of data.
std::string one_entry(const std::string& entry, size_t n_data) {
  return st_bytes(R"({"a":)" + entry + "}", std::string(n_data, '\0'));
}

TEST(SafetensorsReject, FileShorterThanTheLengthPrefix) {
  expect_rejected(std::string("\x10\x00\x00", 3), {"3 bytes", "at least 8"});
}

TEST(SafetensorsReject, HeaderRunningPastTheEndOfTheFile) {
  expect_rejected(le64(100) + std::string(20, ' '), {"header length 100", "past the end", "28 bytes"});
}

TEST(SafetensorsReject, HeaderLengthAboveTheLimit) {
  expect_rejected(le64(200'000'000) + "{}", {"header length 200000000", "100 MB"});
}

TEST(SafetensorsReject, DataSectionTruncated) {
  expect_rejected(one_entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 4),
                  {"\"a\"", "data_offsets", "data size 4", "[0,8]"});
}

TEST(SafetensorsReject, HeaderIsNotJson) {
  expect_rejected(st_bytes(R"({"a": {"dtype": )", ""), {"not valid JSON"});
}

TEST(SafetensorsReject, HeaderIsNotAnObject) {
  expect_rejected(st_bytes("[1,2]", ""), {"expected a JSON object", "[1,2]"});
}

TEST(SafetensorsReject, EntryIsNotAnObject) {
  expect_rejected(one_entry("3", 0), {"\"a\"", "expected an object", "got 3"});
}

TEST(SafetensorsReject, MissingField) {
  expect_rejected(one_entry(R"({"dtype":"F32","data_offsets":[0,0]})", 0), {"\"a\"", "'shape'", "missing"});
}

TEST(SafetensorsReject, UnknownDtype) {
  expect_rejected(one_entry(R"({"dtype":"Q4","shape":[1],"data_offsets":[0,1]})", 1),
                  {"\"a\"", "'dtype'", "got \"Q4\"", "F32, F16"});
  expect_rejected(one_entry(R"({"dtype":32,"shape":[1],"data_offsets":[0,4]})", 4), {"'dtype'", "got 32"});
}

TEST(SafetensorsReject, NegativeOrFractionalShape) {
  expect_rejected(one_entry(R"({"dtype":"F32","shape":[-1,2],"data_offsets":[0,0]})", 0),
                  {"\"a\"", "'shape'", "non-negative", "[-1,2]"});
  expect_rejected(one_entry(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})", 8),
                  {"'shape'", "[2.5]"});
  expect_rejected(one_entry(R"({"dtype":"F32","shape":4,"data_offsets":[0,16]})", 16), {"'shape'", "got 4"});
}

TEST(SafetensorsReject, OffsetsOutOfRange) {
  expect_rejected(one_entry(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", 8),
                  {"\"a\"", "'data_offsets'", "data size 8", "got [0,16]"});
}

TEST(SafetensorsReject, OffsetsReversedNegativeOrNotAPair) {
  expect_rejected(one_entry(R"({"dtype":"U8","shape":[0],"data_offsets":[8,0]})", 8),
                  {"begin <= end", "[8,0]"});
  expect_rejected(one_entry(R"({"dtype":"U8","shape":[1],"data_offsets":[-1,0]})", 8),
                  {"two non-negative ints", "[-1,0]"});
  expect_rejected(one_entry(R"({"dtype":"U8","shape":[1],"data_offsets":[0]})", 8),
                  {"two non-negative ints"});
}

TEST(SafetensorsReject, SizeMismatch) {
  expect_rejected(one_entry(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", 8),
                  {"\"a\"", "expected 12 bytes", "got 8 bytes"});
  // numel x element size overflowing 64 bits must not wrap around to a small "matching" size
  expect_rejected(one_entry(R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]})", 0),
                  {"\"a\"", "representable size"});
}

TEST(SafetensorsReject, OverlappingEntries) {
  expect_rejected(st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                           std::string(12, '\0')),
                  {"\"a\" [0, 8)", "\"b\" [4, 12)", "overlap"});
  // the later entry starting inside an earlier, longer one (not only the adjacent one)
  expect_rejected(st_bytes(R"({"big":{"dtype":"U8","shape":[16],"data_offsets":[0,16]},)"
                           R"("in":{"dtype":"U8","shape":[2],"data_offsets":[8,10]},)"
                           R"("z":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})",
                           std::string(16, '\0')),
                  {"\"big\"", "\"in\"", "overlap"});
}

TEST(SafetensorsReject, DuplicateTensorName) {
  expect_rejected(st_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                           R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                           std::string(2, '\0')),
                  {"\"a\"", "twice"});
}

TEST(SafetensorsReject, MetadataNotStringToString) {
  expect_rejected(st_bytes(R"({"__metadata__":{"k":3}})", ""), {"'__metadata__'", "\"k\"", "got 3"});
  expect_rejected(st_bytes(R"({"__metadata__":["x"]})", ""), {"'__metadata__'", "[\"x\"]"});
}

}  // namespace
}  // namespace vispco::io
