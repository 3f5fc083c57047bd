// JSON readers with a nesting limit (core/json_file.h, issue 45 item 9a): a 100,000-deep "[[[[…" document
// given to parse_json() and to every file reader built on it (safetensors header, checkpoint index, model
// hash, config.json, tokenizer files, dataset lines) ends in one clear FormatError line naming the file, not
// a stack overflow; documents at the limit still parse.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "core/errors.h"
#include "core/json_file.h"
#include "eval/dataset.h"
#include "eval/run_key.h"
#include "io/added_tokens.h"
#include "io/safetensors.h"
#include "io/safetensors_test_util.h"
#include "model/llava/config.h"
#include "model/tiny_model.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;
using io::st_test::expect_error;

constexpr size_t kDeep = 100000;

// `n` nested arrays around 0: "[[…[0]…]]".
std::string nested_arrays(size_t n) { return std::string(n, '[') + "0" + std::string(n, ']'); }
// `n` nested objects {"a":{"a":…1…}}.
std::string nested_objects(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += "{\"a\":";
  return s + "1" + std::string(n, '}');
}

TEST(JsonFile, ParseAcceptsTheLimitAndRefusesOneLevelMore) {
  EXPECT_EQ(parse_json(nested_arrays(kMaxJsonDepth), "t").dump(), nested_arrays(kMaxJsonDepth));
  EXPECT_EQ(parse_json(nested_objects(kMaxJsonDepth), "t").dump(), nested_objects(kMaxJsonDepth));
  for (const std::string& doc : {nested_arrays(kMaxJsonDepth + 1), nested_objects(kMaxJsonDepth + 1)})
    expect_error<FormatError>([&] { parse_json(doc, "doc.json"); }, "doc.json",
                              {"nested deeper than 64 levels"});
}

TEST(JsonFile, AHundredThousandDeepDocumentIsOneLineErrorNotACrash) {
  for (const std::string& doc : {nested_arrays(kDeep), nested_objects(kDeep)}) {
    expect_error<FormatError>([&] { parse_json(doc, "doc.json"); }, "doc.json", {"nested deeper than 64"});
    std::istringstream in(doc);
    expect_error<FormatError>([&] { parse_json(in, "stream"); }, "stream", {"nested deeper than 64"});
  }
  // A parser callback still runs, after the depth check: here it drops a key.
  const auto j = parse_json(R"({"keep": 1, "drop": [2]})", "t",
                            [](int, nlohmann::json::parse_event_t e, nlohmann::json& v) {
                              return !(e == nlohmann::json::parse_event_t::key && v == "drop");
                            });
  EXPECT_EQ(j.dump(), R"({"keep":1})");
  expect_error<FormatError>([] { parse_json("{\"a\": ", "cut.json"); }, "cut.json", {"not valid JSON"});
}

TEST(JsonFile, EveryFileReaderRefusesADeepDocumentWithOneLine) {
  testing::TempDir tmp;
  const std::string deep = nested_arrays(kDeep);
  // read_json_file (recipes, checkpoints' position.json, tokenizer files).
  testing::write_file(tmp.path() / "deep.json", deep);
  expect_error<FormatError>([&] { read_json_file(tmp / "deep.json", "recipe"); }, tmp / "deep.json",
                            {"nested deeper than 64"});
  // A safetensors header.
  const std::string st = tmp / "deep.safetensors";
  io::st_test::write_bytes(st, io::st_test::st_bytes(deep, ""));
  expect_error<FormatError>([&] { io::SafetensorsFile::open(st); }, st, {"header", "nested deeper than 64"});
  // A sharded checkpoint's index.
  fs::create_directories(tmp.path() / "sharded");
  testing::write_file(tmp.path() / "sharded/model.safetensors.index.json", deep);
  expect_error<FormatError>([&] { io::CheckpointTensors::open_dir(tmp / "sharded"); },
                            tmp / "sharded/model.safetensors.index.json", {"nested deeper than 64"});
  // The model hash reads safetensors headers itself.
  const fs::path m = tmp.path() / "m";
  fs::copy(testing::tiny_model_dir(), m);
  io::st_test::write_bytes((m / "model.safetensors").string(), io::st_test::st_bytes(deep, ""));
  expect_error<FormatError>([&] { eval::model_folder_hash(m.string()); }, (m / "model.safetensors").string(),
                            {"nested deeper than 64"});
  // config.json and the tokenizer files of a model folder.
  testing::write_file(m / "config.json", deep);
  expect_error<FormatError>([&] { load_llava_config(m.string()); }, (m / "config.json").string(),
                            {"nested deeper than 64"});
  testing::write_file(m / "tokenizer.json", deep);
  expect_error<FormatError>([&] { io::load_added_tokens(m.string()); }, (m / "tokenizer.json").string(),
                            {"nested deeper than 64"});
  // A dataset line: the error names the file and line.
  testing::write_file(tmp.path() / "data.jsonl", deep + "\n");
  expect_error<FormatError>([&] { eval::load_dataset(tmp / "data.jsonl"); },
                            tmp / "data.jsonl" + ":1:", {"nested deeper than 64"});
}

}  // namespace
}  // namespace vispco
