// Bad input to `vispco generate` / `init-random`: one clear line on stderr naming the file or tensor, a
// non-zero exit code, never a LibTorch backtrace.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/scratch_model.h"
#include "io/safetensors.h"
#include "test_paths.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;
using testing::expect_one_line_error;
using testing::run_cli;
using testing::TempDir;

// A copy of the tiny model that a test may damage, and a valid image beside it.
struct Scratch : testing::ScratchModel {
  Scratch() : ScratchModel(cv::Scalar(10, 200, 30)) {}
  testing::CommandResult generate(const std::string& extra = "") const {
    return run_cli("generate --model " + model.string() + " --image " + image.string() +
                   " --prompt 'What colour?' --max-new-tokens 2 " + extra);
  }
};

TEST(CliErrors, ValidRunPrintsAnswerAndTimingLine) {
  Scratch s;
  auto r = s.generate("--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stats"]["n_visual"], 16);
  EXPECT_GT(j["stats"]["peak_rss_mb"].get<double>(), 0);
  auto t = s.generate();
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("TTFT"), std::string::npos) << t.out;
}

TEST(CliErrors, MissingModelFolder) {
  Scratch s;
  fs::remove_all(s.model);
  expect_one_line_error(s.generate(), "does not exist");
}

TEST(CliErrors, MissingImage) {
  Scratch s;
  fs::remove(s.image);
  expect_one_line_error(s.generate(), s.image.string());
}

TEST(CliErrors, NonImageFile) {
  Scratch s;
  testing::write_file(s.image, "this is not a picture at all");
  expect_one_line_error(s.generate(), s.image.string());
}

TEST(CliErrors, CorruptSafetensors) {
  Scratch s;
  auto bytes = testing::read_file(s.model / "model.safetensors");
  testing::write_file(s.model / "model.safetensors", bytes.substr(0, bytes.size() / 2));
  expect_one_line_error(s.generate(), "model.safetensors");
}

TEST(CliErrors, UnknownArchitecture) {
  Scratch s;
  auto j = nlohmann::json::parse(testing::read_file(s.model / "config.json"));
  j["model_type"] = "mistral";
  testing::write_file(s.model / "config.json", j.dump());
  expect_one_line_error(s.generate(), "unsupported model_type 'mistral'");
}

TEST(CliErrors, ConfigWeightShapeMismatch) {
  Scratch s;
  auto j = nlohmann::json::parse(testing::read_file(s.model / "config.json"));
  j["text_config"]["intermediate_size"] = 96;
  testing::write_file(s.model / "config.json", j.dump());
  expect_one_line_error(s.generate(), "mlp.gate_proj.weight");
}

TEST(CliErrors, MissingTensor) {
  Scratch s;
  auto f = io::SafetensorsFile::open((s.model / "model.safetensors").string());
  std::map<std::string, at::Tensor> kept;
  for (const auto& [name, info] : f.entries())
    if (name != "multi_modal_projector.linear_2.bias") kept[name] = f.tensor(name).clone();
  io::save_safetensors((s.model / "model.safetensors").string(), kept);
  expect_one_line_error(s.generate(), "missing tensor 'multi_modal_projector.linear_2.bias'");
}

TEST(CliErrors, BadOptionValues) {
  Scratch s;
  expect_one_line_error(s.generate("--dtype int3"), "unknown dtype 'int3'");
  expect_one_line_error(s.generate("--top-p 1.5"), "top_p");
  EXPECT_NE(run_cli("generate --nonsense").exit_code, 0);
  EXPECT_NE(run_cli("frobnicate").exit_code, 0);
  expect_one_line_error(run_cli("init-random --preset huge --out /tmp/x"), "unknown preset 'huge'");
}

TEST(CliErrors, TrainRejectsAnUnknownDeviceBeforeTouchingTheRunFolder) {
  TempDir tmp;
  const auto run = tmp.path() / "run";
  expect_one_line_error(run_cli("train --recipe " + std::string(::vispco::testing::source_dir()) +
                                "/configs/synthvqa-small.json --out " + run.string() + " --device tpu"),
                        "unknown device 'tpu'");
  EXPECT_FALSE(fs::exists(run));
}

TEST(CliErrors, TrainHrNamesAMissingRecipeOrBaseModelInOneLine) {
  TempDir tmp;
  const auto run = tmp.path() / "run";
  expect_one_line_error(run_cli("train-hr --recipe /nonexistent/hr.json --out " + run.string()),
                        "cannot read HR recipe '/nonexistent/hr.json'");
  expect_one_line_error(
      run_cli("train-hr --recipe " + std::string(::vispco::testing::source_dir()) +
              "/configs/hr/synthvqa-hr.json --base /nonexistent/base --out " + run.string()),
      "model folder '/nonexistent/base' does not exist");
}

}  // namespace
}  // namespace vispco
