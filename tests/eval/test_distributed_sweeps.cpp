// Sweeps under PyTorch's launcher (issue 50): three processes on loopback through
// `python3 -m torch.distributed.run` (Debian's python3-torch; skipped with a message without it), with the
// bundled model and a few SynthVQA samples, one thread each. Checked against single-process runs of the same
// commands: eval's predictions and metrics, a grid search's points and chosen plan, a scorer table, the
// ladder tables of dynamic-k and coverage (their reports); a worker that vanishes
// holding a lease (in eval and in dynamic-k's ladder), after which the sweep still completes with every
// sample stored exactly once; and a bad rendezvous address, which ends in one error line and a non-zero exit
// instead of a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "eval/result_store.h"
#include "launcher_util.h"
#include "test_util.h"

namespace vispco {
namespace {

using testing::CommandResult;
using testing::TempDir;

using testing::free_port;
using testing::launcher_missing;
using testing::run_shell;

std::string model_dir() { return std::string(testing::source_dir()) + "/models/synthvqa-small"; }

// 9 SynthVQA samples, generated once per test binary.
const std::string& dataset() {
  return testing::written_once([](const TempDir& dir) {
    const std::string out = dir.str("data");
    const CommandResult r =
        run_shell(std::string(testing::cli_path()) + " data synth --seed 11 --count 9 --out " + out +
                  " --threads 1 >/dev/null");
    if (r.exit_code != 0) throw std::runtime_error("data synth failed: " + r.err);
    return out;
  });
}

// `vispco ARGS` under the launcher, three processes on loopback; `env` is put before the launcher.
CommandResult launch3(const std::string& args, const std::string& env = "") {
  return testing::launch(3, args, env);
}

// predictions.jsonl's rows without their timings, in file order.
std::vector<nlohmann::json> predictions(const std::string& out_dir) {
  std::vector<nlohmann::json> rows;
  std::istringstream in(testing::read_file(out_dir + "/predictions.jsonl"));
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    for (auto it = j.begin(); it != j.end();)
      it = it.key().size() > 3 && it.key().substr(it.key().size() - 3) == "_ms" ? j.erase(it) : std::next(it);
    j.erase("from_store");
    rows.push_back(j);
  }
  return rows;
}

// A plan that prunes hard enough that some answers go wrong (so equal predictions mean something).
const std::string kPlan = "random:keep=4";

std::string eval_args(const std::string& out, const std::string& extra = "") {
  return "eval --model " + model_dir() + " --data " + dataset() + " --plan " + kPlan + " --threads 1 --out " +
         out + " --progress lines " + extra;
}

TEST(DistributedSweeps, EvalOnThreeRanksEqualsOneProcess) {
  if (!launcher_missing().empty()) GTEST_SKIP() << launcher_missing();
  TempDir tmp;
  const CommandResult one = testing::run_cli(eval_args(tmp / "one"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CommandResult three = launch3(eval_args(tmp / "three", "--chunk 2 --dist-timeout 120"));
  ASSERT_EQ(three.exit_code, 0) << three.out << three.err;
  const auto a = predictions(tmp / "one"), b = predictions(tmp / "three");
  ASSERT_EQ(a.size(), 9u);
  ASSERT_EQ(b.size(), a.size());
  size_t n_wrong = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i], b[i]) << "row " << i;
    n_wrong += !a[i].at("correct").get<bool>();
  }
  std::cout << "eval: " << n_wrong << " of " << a.size() << " answers wrong under " << kPlan
            << " in both runs\n";
  const auto s1 = nlohmann::json::parse(testing::read_file(tmp / "one/summary.json"));
  const auto s3 = nlohmann::json::parse(testing::read_file(tmp / "three/summary.json"));
  EXPECT_EQ(s1.at("metrics"), s3.at("metrics"));
  EXPECT_EQ(s1.at("counts"), s3.at("counts"));
  auto run1 = s1.at("run"), run3 = s3.at("run");
  run1.erase("store");  // each run's own file
  run3.erase("store");
  EXPECT_EQ(run1, run3);
  // Every rank names itself; the whole sweep's progress is rank 0's.
  for (const char* rank : {"[rank 0/3]", "[rank 1/3]", "[rank 2/3]"})
    EXPECT_NE((three.out + three.err).find(rank), std::string::npos) << rank << " in " << three.err;
  EXPECT_NE(three.err.find("[rank 0/3] eval (whole sweep) 9/9"), std::string::npos) << three.err;
}

TEST(DistributedSweeps, AVanishedWorkersItemIsRedoneAndStoredOnce) {
  if (!launcher_missing().empty()) GTEST_SKIP() << launcher_missing();
  TempDir tmp;
  // Rank 2 ends itself (exit 0, so the launcher keeps the others) holding the lease of the first item it
  // gets; after 3 s another rank takes that item over.
  const CommandResult r = launch3(eval_args(tmp / "out", "--chunk 1 --lease-timeout 3 --dist-timeout 120"),
                                  "VISPCO_TEST_EXIT_AFTER=2:0");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("[rank 2/3] test hook: ending the process while holding the lease"), std::string::npos)
      << r.err;
  const std::string all = r.out + r.err;
  EXPECT_NE(all.find("1 taken over from an expired lease"), std::string::npos) << all;
  // Every sample in the store exactly once.
  eval::ResultStore store(tmp / "out/results.sqlite");
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  const auto rows = store.results(runs[0]);
  std::multiset<std::string> ids;
  for (const auto& row : rows) ids.insert(row.sample_id);
  EXPECT_EQ(rows.size(), 9u);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 9u);
  const auto s = nlohmann::json::parse(testing::read_file(tmp / "out/summary.json"));
  EXPECT_EQ(s.at("counts").at("n_evaluated"), 9);
}

// Runs `vispco optimize ARGS` in one process and on three ranks and compares the two optimize.json files:
// every calibration point's plan and figures, the chosen plan, the frontier, the counts and the test split's
// accuracies (timings aside).
void expect_same_search(const std::string& args) {
  TempDir tmp;
  const CommandResult one = testing::run_cli(args + " --out " + (tmp / "one"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CommandResult three = launch3(args + " --out " + (tmp / "three") + " --chunk 2 --dist-timeout 120");
  ASSERT_EQ(three.exit_code, 0) << three.out << three.err;
  const auto a = nlohmann::json::parse(testing::read_file(tmp / "one/optimize.json"));
  const auto b = nlohmann::json::parse(testing::read_file(tmp / "three/optimize.json"));
  const auto figures = [](const nlohmann::json& points) {
    std::vector<nlohmann::json> out;
    for (const auto& p : points)
      out.push_back({{"plan", p.at("plan")},
                     {"accuracy", p.at("accuracy")},
                     {"n", p.at("n")},
                     {"flops_ratio", p.at("flops_ratio")},
                     {"split", p.at("split")}});
    return out;
  };
  const auto& ca = a.at("calibration");
  const auto& cb = b.at("calibration");
  ASSERT_GE(ca.at("points").size(), 3u) << a.dump();
  EXPECT_EQ(figures(ca.at("points")), figures(cb.at("points")));
  EXPECT_EQ(ca.at("chosen_plan"), cb.at("chosen_plan"));
  EXPECT_EQ(ca.at("frontier"), cb.at("frontier"));
  EXPECT_EQ(a.at("counts"), b.at("counts"));
  EXPECT_EQ(a.at("test").at("chosen").at("accuracy"), b.at("test").at("chosen").at("accuracy"));
  EXPECT_EQ(a.at("test").at("reference").at("accuracy"), b.at("test").at("reference").at("accuracy"));
  std::cout << "chosen " << ca.at("chosen_plan") << " in both runs; calibration points";
  for (const auto& p : ca.at("points")) std::cout << " " << p.at("plan") << " " << p.at("accuracy") << ";";
  std::cout << "\n";
}

std::string search_args(const std::string& method) {
  return "optimize --method " + method + " --model " + model_dir() + " --calib " + dataset() + " --test " +
         dataset() + " --limit-calib 6 --limit-test 3 --no-plots --threads 1 --batch 2 --json";
}

TEST(DistributedSweeps, GridOnThreeRanksEqualsOneProcess) {
  if (!launcher_missing().empty()) GTEST_SKIP() << launcher_missing();
  expect_same_search(search_args("grid") + " --template 'random:layer=0' --keep 64,4 --epsilon-abs 0.2");
}

TEST(DistributedSweeps, MinKOnThreeRanksEqualsOneProcess) {
  // Probes K = 64, 24, 4 one after another, each probe's samples shared; the store's known points broadcast.
  if (!launcher_missing().empty()) GTEST_SKIP() << launcher_missing();
  expect_same_search(search_args("min-k") +
                     " --scorer random --k-min 4 --k-max 64 --k-step 20 --epsilon-abs 0.35");
}

// A JSON value without its timings (keys ending in "_ms"), for comparing runs.
nlohmann::json without_timings(const nlohmann::json& j) {
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : j.items())
      if (k.size() < 3 || k.substr(k.size() - 3) != "_ms") out[k] = without_timings(v);
    return out;
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(without_timings(v));
    return out;
  }
  return j;
}

TEST(DistributedSweeps, ScorerTableOnThreeRanksEqualsOneProcess) {
  if (!launcher_missing().empty()) GTEST_SKIP() << launcher_missing();
  TempDir tmp;
  const auto args = [&](const std::string& name) {
    return "scorer-table --model " + model_dir() + " --data " + dataset() +
           " --scorers random --keeps 4,64 --limit 6 --batch 2 --threads 1 --progress off --out " +
           (tmp / (name + ".md")) + " --store " + (tmp / (name + ".sqlite"));
  };
  const CommandResult one = testing::run_cli(args("one"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CommandResult three = launch3(args("three") + " --chunk 2 --dist-timeout 120");
  ASSERT_EQ(three.exit_code, 0) << three.out << three.err;
  const auto a = nlohmann::json::parse(testing::read_file(tmp / "one.json"));
  const auto b = nlohmann::json::parse(testing::read_file(tmp / "three.json"));
  ASSERT_EQ(a.at("cells").size(), 2u) << a.dump();
  EXPECT_EQ(without_timings(a.at("cells")), without_timings(b.at("cells")));
  EXPECT_EQ(without_timings(a.at("reference")), without_timings(b.at("reference")));
}

TEST(DistributedSweeps, BadRendezvousIsOneErrorLineNotAHang) {
  // No launcher needed: the variables torchrun would set, pointing at a port nobody listens on.
  TempDir tmp;
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = run_shell(
      "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) +
      " " + testing::cli_path() + " " + eval_args(tmp / "out", "--dist-timeout 3"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  testing::expect_one_line_error(r, "c10d rendezvous at 127.0.0.1:");
  EXPECT_NE(r.err.find("rank 1 of 2"), std::string::npos) << r.err;
  EXPECT_LT(s, 60.0) << "a 3 s rendezvous timeout must not hang";  // a hang guard, not a speed figure
  const CommandResult bad =
      run_shell("RANK=1 WORLD_SIZE=two " + std::string(testing::cli_path()) + " " + eval_args(tmp / "out"));
  testing::expect_bad_input(bad, "launcher environment: WORLD_SIZE='two' is not a whole number");
}

TEST(DistributedSweeps, CommandsNotSharedYetAreRefusedUnderALauncher) {
  // Rather than run whole in every process: one line, before anything slow.
  TempDir tmp;
  const std::string env =
      "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " ";
  const std::string cli = std::string(testing::cli_path()) + " ";
  testing::expect_bad_input(run_shell(env + cli + "eval --model " + model_dir() + " --data " + dataset() +
                                      " --plan divprune:keep=auto --out " + (tmp / "a")),
                            "eval: keep=auto plans do not run under a launcher yet");
}

// A report without what differs between two runs of the same search: timings (keys ending in _ms or _s,
// "…_ms_per_sample", "seconds"), and paths (the output folder, the store, the inputs).
nlohmann::json comparable(const nlohmann::json& j) {
  const auto dropped = [](const std::string& k) {
    const auto ends = [&](const std::string& tail) {
      return k.size() >= tail.size() && k.compare(k.size() - tail.size(), tail.size(), tail) == 0;
    };
    return ends("_ms") || ends("_s") || k.find("_ms_") != std::string::npos ||
           k.find("seconds") != std::string::npos || k == "path" || k == "inputs" || k == "store_path" ||
           k == "store";
  };
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : j.items())
      if (!dropped(k)) out[k] = comparable(v);
    return out;
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(comparable(v));
    return out;
  }
  return j;
}

// Runs `vispco optimize ARGS` in one process and on three ranks, each with its own output folder (and so its
// own result store: the second run must not read the first's results), and compares `report` of the two.
// `extra` and `env` go to the three-rank run only. @return the three-rank run's output (stdout + stderr).
std::string expect_same_ladder_report(const std::string& args, const std::string& report,
                                      const std::string& extra = "", const std::string& env = "") {
  TempDir tmp;
  const CommandResult one = testing::run_cli(args + " --out " + (tmp / "one"));
  EXPECT_EQ(one.exit_code, 0) << one.err;
  const CommandResult three =
      launch3(args + " --out " + (tmp / "three") + " --chunk 2 --dist-timeout 120 " + extra, env);
  EXPECT_EQ(three.exit_code, 0) << three.out << three.err;
  if (one.exit_code != 0 || three.exit_code != 0) return "";
  for (const char* rank : {"[rank 1/3]", "[rank 2/3]"})
    EXPECT_NE((three.out + three.err).find(rank), std::string::npos) << rank << " in " << three.err;
  const auto a = nlohmann::json::parse(testing::read_file(tmp / ("one/" + report)));
  const auto b = nlohmann::json::parse(testing::read_file(tmp / ("three/" + report)));
  EXPECT_EQ(comparable(a), comparable(b)) << a.dump() << "\n" << b.dump();
  // The three-rank run's store holds each (plan, sample) once, as the single process's does.
  eval::ResultStore s1(tmp / "one/results.sqlite"), s3(tmp / "three/results.sqlite");
  EXPECT_EQ(s1.runs().size(), s3.runs().size());
  size_t n1 = 0, n3 = 0;
  for (const auto& run : s1.runs()) n1 += s1.results(run).size();
  for (const auto& run : s3.runs()) {
    const auto rows = s3.results(run);
    std::set<std::string> ids;
    for (const auto& r : rows) ids.insert(r.sample_id);
    EXPECT_EQ(ids.size(), rows.size()) << run.plan;
    n3 += rows.size();
  }
  EXPECT_EQ(n1, n3);
  std::cout << report << ": equal on one and three ranks; " << n3 << " stored results in each run\n";
  return three.out + three.err;
}

std::string dynamic_k_args() {
  return "optimize --method dynamic-k --model " + model_dir() + " --train " + dataset() + " --calib " +
         dataset() + " --test " + dataset() +
         " --limit-train 6 --limit-calib 3 --limit-test 3 --template 'random:layer=0' --ladder 4,16"
         " --predictor-steps 20 --epsilon-abs 0.2 --no-plots --threads 1 --batch 2 --json";
}

TEST(DistributedSweeps, DynamicKLadderOnThreeRanksEqualsOneProcess) {
  // The labels' ladder tables (train, validation, test × 3 rungs) are shared sweeps; the predictor, τ, the
  // keep=auto run and the report are rank 0's. The random scorer makes some answers change along the ladder.
  if (!launcher_missing().empty()) GTEST_SKIP() << launcher_missing();
  const std::string all = expect_same_ladder_report(dynamic_k_args(), "dynamic_k.json");
  // Rank 0's own work (a vision-tower pass per sample for the K features) starts after the last shared
  // sweep: no worker waits on it for a next sweep (under --dist-timeout).
  const size_t features = all.find("[rank 0/3] K features");
  ASSERT_NE(features, std::string::npos) << all;
  const size_t last_test_rung = all.rfind("[rank 0/3]   test K=576");
  ASSERT_NE(last_test_rung, std::string::npos) << all;
  EXPECT_GT(features, last_test_rung) << all;
  EXPECT_EQ(all.find("[rank 0/3]   ", features), std::string::npos) << "a table after the features:\n" << all;
}

TEST(DistributedSweeps, DynamicKLadderSurvivesAVanishedWorker) {
  // Rank 2 ends itself (exit 0) holding the lease of its second item, in the first rung's sweep; after 3 s
  // another rank takes the item over, and the later rungs run on two ranks. Same report, each result stored
  // once.
  if (!launcher_missing().empty()) GTEST_SKIP() << launcher_missing();
  const std::string all = expect_same_ladder_report(dynamic_k_args(), "dynamic_k.json", "--lease-timeout 3",
                                                    "VISPCO_TEST_EXIT_AFTER=2:1");
  EXPECT_NE(all.find("[rank 2/3] test hook: ending the process while holding the lease"), std::string::npos)
      << all;
  // Which rank takes the item over varies (rank 0 logs no per-rank count in the ladder's sweeps); the equal
  // report and the store holding each result once are the check.
}

TEST(DistributedSweeps, CoverageLadderOnThreeRanksEqualsOneProcess) {
  if (!launcher_missing().empty()) GTEST_SKIP() << launcher_missing();
  expect_same_ladder_report("optimize --method coverage --model " + model_dir() + " --train " + dataset() +
                                " --calib " + dataset() + " --test " + dataset() +
                                " --limit-train 6 --limit-test 3 --limit-calib 3 --template 'random:layer=0'"
                                " --ladder 4,16 --coverage-draws 20 --epsilon-abs 0.2 --threads 1 --batch 2"
                                " --json",
                            "coverage.json");
}

}  // namespace
}  // namespace vispco
