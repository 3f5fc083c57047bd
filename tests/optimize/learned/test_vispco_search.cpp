// The VisPCO search end to end on the tiny random model: the trainer runs and moves the constraint, the
// predicted plans evaluate through the normal pruning path, and data-parallel training over two real `vispco`
// processes (c10d Gloo, TCPStore) gives the same predictor as one process with the doubled batch.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/run_key.h"
#include "eval/synthvqa/generator.h"
#include "model/tiny_model.h"
#include "optimize/learned/evaluate.h"
#include "optimize/learned/predictor.h"
#include "optimize/learned/trainer.h"

namespace vispco::optimize::learned {
namespace {

using testing::run_cli;
using testing::TempDir;
using testing::tiny_model_dir;

SearchOptions small_options() {
  SearchOptions o;
  o.n_train = 16;
  o.n_val = 4;
  o.batch = 4;
  o.max_epochs = 6;
  o.min_epochs = 6;
  o.dropout = 0.0;
  o.lr = 1e-2;
  o.train_budgets = {0.2, 0.5, 0.8};
  return o;
}

TEST(VisPcoSearch, TrainerRunsAndPullsTowardTheBudgets) {
  auto m = testing::load_tiny();
  DataParallel ddp(DdpOptions{});
  auto o = small_options();
  o.al.mu0 = 100;
  SearchTrainer tr(m, o, ddp);
  auto res = tr.run();
  ASSERT_EQ(res.epochs.size(), 6u);
  for (const auto& e : res.epochs) {
    std::printf("epoch %ld: KL %.5f, train |c| %.4f, val |c| %.4f, μ %g\n", (long)e.epoch, e.train_kl,
                e.train_abs_c, e.val_abs_c, e.mu);
    EXPECT_TRUE(std::isfinite(e.train_kl));
    EXPECT_GE(e.train_kl, -1e-6);
  }
  EXPECT_LT(res.epochs.back().val_abs_c, 0.75 * res.epochs.front().val_abs_c)
      << "the constraint violation did not fall";
}

TEST(VisPcoSearch, RunKeepsTheWeightsOfTheEpochWithTheLowestValidationViolation) {
  auto m = testing::load_tiny();
  DataParallel ddp(DdpOptions{});
  auto o = small_options();
  o.al.mu0 =
      100;  // as above: the violation falls, then rises again (best epoch 3 of 6 when this was written)
  o.restore_best = false;
  // Reference: the same search stepped by hand, with every epoch's weights kept.
  SearchTrainer manual(m, o, ddp);
  std::vector<double> val;
  std::vector<std::vector<at::Tensor>> snapshots;
  for (int64_t e = 0; e < o.max_epochs; ++e) {
    val.push_back(manual.epoch().val_abs_c);
    snapshots.emplace_back();
    for (const auto& p : manual.predictor()->parameters()) snapshots.back().push_back(p.detach().clone());
  }
  const auto best = std::min_element(val.begin(), val.end()) - val.begin();
  ASSERT_LT(size_t(best + 1), val.size()) << "the best epoch is the last: restoring would test nothing";
  o.restore_best = true;
  SearchTrainer tr(m, o, ddp);
  auto res = tr.run();
  ASSERT_EQ(res.epochs.size(), val.size());
  for (size_t e = 0; e < val.size(); ++e)
    EXPECT_DOUBLE_EQ(res.epochs[e].val_abs_c, val[e]) << "epoch " << e + 1;
  std::printf("validation mean|c| per epoch:");
  for (double v : val) std::printf(" %.4f", v);
  std::printf("; best epoch %ld\n", (long)best + 1);
  EXPECT_EQ(res.selected_epoch, best + 1);
  EXPECT_DOUBLE_EQ(res.selected_val_abs_c, val[best]);
  const auto params = tr.predictor()->parameters();
  ASSERT_EQ(params.size(), snapshots[best].size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(at::equal(params[i], snapshots[best][i])) << "parameter " << i;
}

TEST(VisPcoSearch, PredictedPlansEvaluateThroughThePruningPath) {
  TempDir tmp;
  eval::synthvqa::SynthOptions so;
  so.seed = 77;
  so.count = 6;
  eval::synthvqa::generate_synthvqa(so, tmp.str("ds"));
  auto ds = eval::load_dataset(tmp.str("ds"));
  auto m = testing::load_tiny();
  PredictorOptions po;
  po.d_model = m.shape().hidden_size;
  SearchOptions search;
  search.kernel.kind = KernelKind::kStep;
  po.n_outputs = n_kernel_params(search.kernel);
  Predictor g(po);
  BudgetEvalOptions eo;
  eo.budgets = {0.2, 0.6};
  eo.batch = 4;
  eo.store_path = tmp.str("store.sqlite");
  auto pts = evaluate_budgets(m, eval::model_folder_hash(tiny_model_dir()), g, search, ds, eo);
  ASSERT_EQ(pts.size(), 2u);
  for (const auto& p : pts) {
    std::printf("b = %.1f: n %zu, FLOPs ratio %.4f, achieved b %.4f, error %+.4f, plan %s\n", p.budget, p.n,
                p.flops_ratio, p.achieved_budget, p.flops_error, p.common_plan.c_str());
    EXPECT_EQ(p.n, 6u);
    EXPECT_GT(p.flops_ratio, 0.0);
    EXPECT_LE(p.flops_ratio, 1.0 + 1e-12);
    EXPECT_EQ(p.mean_keep.size(), 4u);
    EXPECT_DOUBLE_EQ(p.mean_keep[0], 16.0) << "FastV cannot prune before layer 1";
    // Projected onto the budget: only whole-token rounding is left, ≤ ½ token of N_t + K ≥ 10 per layer.
    EXPECT_TRUE(p.projected);
    EXPECT_LT(std::abs(p.flops_error), 0.05);
  }
  // A second run reads every result from the store and reports the same.
  auto again = evaluate_budgets(m, eval::model_folder_hash(tiny_model_dir()), g, search, ds, eo);
  EXPECT_EQ(again[0].accuracy, pts[0].accuracy);
  EXPECT_EQ(again[1].common_plan, pts[1].common_plan);
  // Without the projection the plans are the predictor's own; a later first layer keeps layers 0–2 whole.
  // (This untrained step kernel sits at k ≈ L/2 = 2, so from layer 1 it keeps ≈ 12 of 16 tokens at layer 2.)
  for (const auto& p : pts) EXPECT_LT(p.mean_keep[2], 16.0) << "the check below would not test anything";
  eo.project = false;
  search.first_layer = 3;
  auto raw = evaluate_budgets(m, eval::model_folder_hash(tiny_model_dir()), g, search, ds, eo);
  for (const auto& p : raw) {
    EXPECT_FALSE(p.projected);
    EXPECT_DOUBLE_EQ(p.raw_flops_error, p.flops_error);
    EXPECT_DOUBLE_EQ(p.mean_keep[2], 16.0) << "first_layer = 3 keeps layer 2 whole";
  }
}

TEST(VisPcoSearch, SearchOptionsRoundTripAndFirstLayer) {
  auto o = small_options();
  o.first_layer = 2;
  o.restore_best = false;
  o.kernel.kind = KernelKind::kRamp;
  const auto back = search_options_from_json(to_json(o));
  EXPECT_EQ(back, o);
  EXPECT_EQ(search_first_layer(back), 2);
  o.first_layer = 0;  // the scorer's earliest: FastV scores with layer 0's attention, so 1
  EXPECT_EQ(search_first_layer(o), 1);
  o.first_layer = -1;
  EXPECT_THROW(o.validate(), InvalidArgument);
  EXPECT_THROW(search_options_from_json({{"restore_best", "yes"}}), InvalidArgument);
  // A first layer at or past the decoder's depth cannot prune: one clear error.
  auto m = testing::load_tiny();
  DataParallel ddp(DdpOptions{});
  auto deep = small_options();
  deep.first_layer = 4;  // tiny decoder: 4 layers
  EXPECT_THROW(SearchTrainer(m, deep, ddp), InvalidArgument);
}

TEST(VisPcoSearch, PredictorFilesRoundTripAndMismatchesAreRejected) {
  TempDir tmp;
  PredictorOptions po;
  po.d_model = 64;
  po.n_outputs = 6;
  po.seed = 3;
  Predictor g(po);
  save_predictor(tmp.str("p"), g, {{"note", "test"}});
  nlohmann::json meta;
  auto h = load_predictor(tmp.str("p"), &meta);
  EXPECT_EQ(meta["note"], "test");
  EXPECT_EQ(h->opts, po);
  auto tokens = at::randn({2, 5, 64});
  auto pool = at::ones({2, 5}, at::kBool);
  auto b = at::tensor({0.2f, 0.7f});
  g->eval();
  EXPECT_EQ(at::equal(g->forward(tokens, pool, b), h->forward(tokens, pool, b)), true);
  meta["options"]["n_outputs"] = 4;  // the weights no longer match the options
  testing::write_file(tmp.str("p") + "/predictor.json", meta.dump());
  EXPECT_THROW(load_predictor(tmp.str("p")), FormatError);
  EXPECT_THROW(load_predictor(tmp.str("nothing")), IoError);
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string train_args(const std::string& out, int64_t batch) {
  return "vispco-search --model " + tiny_model_dir() + " --out " + out +
         " --skip-eval --n-train 8 --n-val 4 --epochs 2 --min-epochs 2 --dropout 0 --lr 1e-2 --threads 1"
         " --train-budgets 0.2,0.5,0.8 --batch " +
         std::to_string(batch);
}

TEST(VisPcoSearch, AnExplicitMinimumAboveTheMaximumIsAnErrorNotAClamp) {
  TempDir tmp;
  const std::string base =
      "vispco-search --model " + tiny_model_dir() + " --skip-eval --n-train 8 --n-val 4 --threads 1";
  auto r = run_cli(base + " --out " + tmp.str("bad") + " --epochs 2 --min-epochs 3");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("min_epochs must be in [1, max_epochs = 2], got 3"), std::string::npos) << r.err;
  r = run_cli(base + " --out " + tmp.str("bad_lr") + " --lr 1e-2 --min-lr 0.5");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("min_lr must be in [0, lr]"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.str("bad") + "/predictor.pt"));
}

TEST(VisPcoSearch, TwoProcessesEqualOneWithTheDoubledBatch) {
  TempDir tmp;
  auto one = run_cli(train_args(tmp.str("one"), 4));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const int port = free_port();
  const std::string ddp = " --world-size 2 --master-addr 127.0.0.1 --master-port " + std::to_string(port);
  auto r1 = std::async(std::launch::async,
                       [&] { return run_cli(train_args(tmp.str("two_r1"), 2) + ddp + " --rank 1"); });
  auto r0 = run_cli(train_args(tmp.str("two"), 2) + ddp + " --rank 0");
  auto r1res = r1.get();
  ASSERT_EQ(r0.exit_code, 0) << r0.err;
  ASSERT_EQ(r1res.exit_code, 0) << r1res.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.str("two_r1") + "/predictor.pt")) << "only rank 0 writes";
  auto a = load_predictor(tmp.str("one")), b = load_predictor(tmp.str("two"));
  PredictorOptions po = a->opts;
  Predictor init(po);  // the common starting point (same seed)
  double max_diff = 0, max_move = 0;
  auto pa = a->named_parameters(), pb = b->named_parameters(), p0 = init->named_parameters();
  for (const auto& item : pa) {
    max_diff = std::max(max_diff, (item.value() - pb[item.key()]).abs().max().item<double>());
    max_move = std::max(max_move, (item.value() - p0[item.key()]).abs().max().item<double>());
  }
  std::printf("2 processes × batch 2 vs 1 × batch 4: max |Δφ| = %.3e; training moved φ by up to %.3e\n",
              max_diff, max_move);
  EXPECT_GT(max_move, 1e-3) << "training did not move the predictor, so the comparison says nothing";
  // Tolerance: the two runs differ only in float summation order (left padding to another length, the
  // all-reduce), amplified a little by Adam's normalisation: 2e-4 absolute and 1% of the distance trained.
  EXPECT_LT(max_diff, 2e-4);
  EXPECT_LT(max_diff, 0.01 * max_move);
}

TEST(VisPcoSearch, BadInputIsOneLineAndNonZero) {
  const std::string base = "vispco-search --model " + tiny_model_dir() + " --skip-eval ";
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--kernel cosine", "unknown kernel 'cosine' (valid: step, ramp, multistep)"},
           {"--scorer divprune",
            "scorer 'divprune' cannot score inside a teacher-forced training forward "
            "(valid: fastv, random)"},
           {"--world-size 2 --rank 2", "--rank must be in [0, 2)"},
           {"--budgets 0.1,x", "--budgets must be comma-separated numbers"},
           {"--budgets 0,0.5", "budgets must be in (0, 1]"},
           {"--floor none", "unknown budget floor 'none'"},
           {"--stages 9 --kernel multistep", "n_stages must be in [1, 8]"},
           {"--grid-frontier /nonexistent/f.csv", "cannot read grid frontier '/nonexistent/f.csv'"}}) {
    auto r = run_cli(base + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace vispco::optimize::learned
