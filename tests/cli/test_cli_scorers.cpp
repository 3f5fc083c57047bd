// The scorers of issue 6 through the command line on a copy of the tiny model: `vispco train-gate`, each
// scorer through `vispco generate --plan` and `vispco eval --plan`, one-line errors for bad options, and
// `vispco scorer-table` writing its Markdown and JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/scratch_model.h"
#include "eval/eval_fixture.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;
using testing::expect_one_line_error;
using testing::run_cli;

// A copy of the tiny model (train-gate writes into it) and an image.
struct Scratch : testing::ScratchModel {
  Scratch() : ScratchModel(cv::Scalar(200, 30, 90)) {}
  testing::CommandResult generate(const std::string& plan, const std::string& extra = "--json") const {
    return run_cli("generate --model " + model.string() + " --image " + image.string() +
                   " --prompt 'What colour is the square?' --max-new-tokens 2 --threads 1 --plan '" + plan +
                   "' " + extra);
  }
  testing::CommandResult train_gate(const std::string& extra = "") const {
    return run_cli("train-gate --model " + model.string() + " --steps 2 --batch 1 --hidden 8 --threads 1 " +
                   extra);
  }
};

TEST(CliScorers, EveryNewScorerRunsThroughGenerateAndEval) {
  Scratch s;
  auto tg = s.train_gate();
  ASSERT_EQ(tg.exit_code, 0) << tg.err;
  ASSERT_TRUE(fs::exists(s.model / "gate.safetensors"));
  EXPECT_NE(tg.err.find("[gate 2/2]"), std::string::npos) << tg.err;
  const auto data = testing::known_dataset().dir.string();
  int i = 0;
  for (const std::string plan :
       {"sparsevlm:layer=2,keep=6", "sparsevlm:layer=1,keep=10+sparsevlm:layer=3,keep=4",
        "dart:layer=2,keep=6", "cdpruner:layer=0,keep=6,theta=0.5", "grad:layer=0,keep=6",
        "gate:layer=0,keep=6"}) {
    const int64_t k = plan.back() == '4' ? 4 : 6;
    auto g = s.generate(plan);
    ASSERT_EQ(g.exit_code, 0) << plan << ": " << g.err;
    auto j = nlohmann::json::parse(g.out);
    EXPECT_EQ(j["stats"]["n_visual_kept"], k) << plan;
    auto e =
        run_cli("eval --model " + s.model.string() + " --data " + data + " --plan '" + plan +
                "' --limit 2 --batch 2 --threads 1 --json --out " + s.tmp.str("eval" + std::to_string(i++)));
    ASSERT_EQ(e.exit_code, 0) << plan << ": " << e.err;
    auto ej = nlohmann::json::parse(e.out);
    EXPECT_EQ(ej["counts"]["n_scored"], 2) << plan;
    EXPECT_EQ(ej["timing"]["mean_n_visual_kept"], k) << plan;
    if (plan.rfind("gate", 0) == 0) {
      EXPECT_NE(ej["run"]["plan"].get<std::string>().find("@gate=sha256:"), std::string::npos) << ej["run"];
    }
  }
  auto text = s.generate("grad:layer=0,keep=6", "");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("gradient pre-pass"), std::string::npos) << text.out;
}

TEST(CliScorers, NoneInAnyCaseRunsUnprunedInGenerateAndEval) {
  Scratch s;
  const auto none = s.generate("none");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  const auto want = nlohmann::json::parse(none.out);
  const auto data = testing::known_dataset().dir.string();
  for (const std::string plan : {"NONE", "None", ""}) {
    const auto g = s.generate(plan);
    ASSERT_EQ(g.exit_code, 0) << "'" << plan << "': " << g.err;
    const auto j = nlohmann::json::parse(g.out);
    EXPECT_EQ(j["plan"], "none") << plan;
    EXPECT_EQ(j["tokens"], want["tokens"]) << plan;
    EXPECT_EQ(j["stats"]["n_visual_kept"], want["stats"]["n_visual"]) << plan;
  }
  const auto e = run_cli("eval --model " + s.model.string() + " --data " + data +
                         " --plan NONE --limit 1 --threads 1 --json --out " + s.tmp.str("eval_none"));
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_EQ(nlohmann::json::parse(e.out)["run"]["plan"], "none");
}

TEST(CliScorers, InvalidOptionsGiveOneLineErrors) {
  Scratch s;
  expect_one_line_error(s.generate("dart:layer=2,keep=6,pivots=x"), "option pivots must be");
  expect_one_line_error(s.generate("dart:layer=2,keep=6,pivot=value"), "pivot must be key or hidden");
  expect_one_line_error(s.generate("dart:layer=0,keep=6"), "layer must be ≥ 1");
  expect_one_line_error(s.generate("sparsevlm:layer=2,keep=6,recycle=6"),
                        "option recycle must be an integer in [0, 5]");
  expect_one_line_error(s.generate("cdpruner:layer=0,keep=6,theta=1.5"), "theta must be in [0, 1)");
  expect_one_line_error(s.generate("grad:layer=0,keep=6,foo=1"), "unknown option 'foo'");
  expect_one_line_error(s.generate("gate:layer=0,keep=6"), "train-gate");
  expect_one_line_error(s.generate("gate:layer=2,keep=6"), "acts before the LLM only");
  expect_one_line_error(s.generate("gate:layer=0,keep=6,file=" + s.tmp.str("nope.safetensors")),
                        "nope.safetensors");
  expect_one_line_error(s.train_gate("--data-seed 20250502"), "test split's seed");
  expect_one_line_error(s.train_gate("--l1 -1"), "l1 must be ≥ 0");
  expect_one_line_error(s.train_gate("--temperature 0"), "temperature must be > 0");
  expect_one_line_error(s.train_gate("--data " + s.tmp.str("nodata")), "nodata");
}

TEST(CliScorers, ScorerTableWritesMarkdownAndJsonAndResumes) {
  Scratch s;
  const auto data = testing::known_dataset().dir.string();
  const std::string args =
      "scorer-table --model " + s.model.string() + " --data " + data + " --out " + s.tmp.str("t.md") +
      " --store " + s.tmp.str("s.sqlite") +
      " --keeps 8,4,32 --limit 2 --batch 2 --scorers fastv,pdrop,pool,grad,gate --threads 1"
      " --progress off --banner 'tiny random model'";
  auto r = run_cli(args);
  expect_one_line_error(r, "no learned gate");  // gate asked for but not trained
  ASSERT_EQ(s.train_gate().exit_code, 0);
  r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(s.tmp.str("t.md"));
  std::stringstream md;
  md << in.rdbuf();
  for (const char* needle :
       {"**tiny random model**", "| fastv |", "| pdrop |", "| grad |", "| gate |", "Per family at K = 4",
        "K = 32 is not below N_v", "pool at K = 8 keeps the largest square", "pool:layer=0,keep=4",
        "by `vispco scorer-table --model"})
    EXPECT_NE(md.str().find(needle), std::string::npos) << needle << "\n" << md.str();
  auto j = nlohmann::json::parse(std::ifstream(s.tmp.str("t.json")));
  EXPECT_EQ(j["cells"].size(), 10u);  // 5 scorers × K ∈ {8, 4}
  EXPECT_EQ(j["n_samples"], 2);
  // Each cell's accuracy carries its 95 % Wilson interval over the 2 samples (hand-computed for 0, 1, 2
  // right).
  const std::map<int, std::string> wilson_of_2 = {{0, "[0.0–65.8]"}, {1, "[9.5–90.5]"}, {2, "[34.2–100.0]"}};
  for (const auto& c : j["cells"]) {
    const int right = static_cast<int>(std::lround(c["metrics"]["overall"]["accuracy"].get<double>() * 2));
    EXPECT_NE(md.str().find(wilson_of_2.at(right)), std::string::npos) << right;
  }
  // A second run reads every cell from the store and reports the same figures.
  auto again = run_cli(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto j2 = nlohmann::json::parse(std::ifstream(s.tmp.str("t.json")));
  for (size_t c = 0; c < j["cells"].size(); ++c)
    EXPECT_EQ(j2["cells"][c]["metrics"], j["cells"][c]["metrics"]) << c;
}

}  // namespace
}  // namespace vispco
