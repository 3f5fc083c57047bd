// `vispco train-gate`: trains the learned token gate (prune/gate.h, train/gate_train.h) of a model with the
// model frozen, on SynthVQA samples generated on the fly (training seed disjoint from the calib/test splits)
// or on a jsonl dataset, and saves it beside the model (gate.safetensors) for the `gate` scorer.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "cli/commands.h"
#include "core/context.h"
#include "core/errors.h"
#include "cost/timer.h"
#include "eval/dataset.h"
#include "eval/synthvqa/generator.h"
#include "eval/synthvqa/splits.h"
#include "io/image.h"
#include "train/gate_train.h"

namespace vispco::cli {
namespace {

using train::GateExample;
using train::GateStepReport;
using train::GateTrainOptions;
using train::train_gate;

/// Default SynthVQA seed of gate training: not a standard split's (calib 20250501, test 20250502) and not one
/// of the bundled model's training seeds (recipe data_seed 7001 + stage strides).
constexpr uint64_t kGateDataSeed = 20250601;

struct TrainGateArgs {
  std::string model, data = "synthvqa", out, dtype = "fp32", device = "cpu";
  uint64_t data_seed = kGateDataSeed;
  GateTrainOptions train;
  int64_t log_every = 10;
  int threads = 0;
};

void run_train_gate(const TrainGateArgs& a) {
  a.train.validate();
  if (a.log_every < 1) throw InvalidArgument("train-gate: --log-every must be ≥ 1");
  const bool synth = a.data == "synthvqa";
  if (synth)
    for (const auto& sp : eval::synthvqa::split_table())
      if (sp.seed == a.data_seed)
        throw InvalidArgument("train-gate: --data-seed " + std::to_string(a.data_seed) + " is the " +
                              sp.name + " split's seed; train on data disjoint from evaluation (default " +
                              std::to_string(kGateDataSeed) + ")");
  const std::string out = a.out.empty() ? default_gate_path(a.model) : a.out;
  RunContext ctx;
  ctx.dtype = parse_dtype(a.dtype);
  ctx.device = parse_device(a.device);
  ctx.n_threads = a.threads;
  apply_threads(ctx);
  eval::Dataset ds;
  if (!synth) {
    ds = eval::load_dataset(a.data);
    if (ds.samples.empty()) throw InvalidArgument("train-gate: dataset '" + a.data + "' has no samples");
  }
  auto model = VisionLanguageModel::load(a.model, ctx);
  // Dataset order: shuffled once by the gate seed, then cycled.
  std::vector<size_t> order(ds.samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(a.train.seed));
  const auto data = [&](int64_t step) {
    std::vector<GateExample> batch;
    for (int64_t b = 0; b < a.train.batch; ++b) {
      const uint64_t i = static_cast<uint64_t>(step * a.train.batch + b);
      if (synth) {
        auto s = eval::synthvqa::make_sample(a.data_seed, i);
        batch.push_back({model.preprocess(s.rgb), s.question, s.answer});
      } else {
        const auto& s = ds.samples[order[i % order.size()]];
        batch.push_back({model.preprocess(io::load_image_rgb(s.image_path)), s.question, s.answer});
      }
    }
    return batch;
  };
  Stopwatch wall;
  double ema = -1;
  auto gate = train_gate(model, a.train, data, [&](const GateStepReport& r) {
    ema = ema < 0 ? r.loss : 0.9 * ema + 0.1 * r.loss;
    if (r.step % a.log_every == 0 || r.step == r.steps)
      std::fprintf(stderr, "[gate %ld/%ld] loss %.4f (ema %.4f) task %.4f mean gate %.3f | %.2f s/step\n",
                   (long)r.step, (long)r.steps, r.loss, ema, r.task, r.l1, r.seconds);
  });
  nlohmann::json meta = to_json(a.train);
  meta["data"] = synth ? "synthvqa:" + std::to_string(a.data_seed) : a.data;
  save_gate(out, gate, {{"train_options", meta.dump()}});
  std::cout << "gate written to " << out << " (" << a.train.steps << " steps, " << wall.ms() / 60000.0
            << " min)\n";
}

}  // namespace

void register_train_gate(CLI::App& app) {
  auto a = std::make_shared<TrainGateArgs>();
  auto* cmd = app.add_subcommand(
      "train-gate", "Train the learned token gate of a model (model frozen; task loss + L1 sparsity)");
  cmd->add_option("--model", a->model, kModelHelp)->required();
  cmd->add_option(
         "--data", a->data,
         "Training data: 'synthvqa' (generated on the fly from --data-seed) or a jsonl dataset folder")
      ->capture_default_str();
  cmd->add_option("--data-seed", a->data_seed,
                  "SynthVQA seed of the training samples (not a calib/test seed)")
      ->capture_default_str();
  cmd->add_option("--out", a->out,
                  "Gate file to write (default <model>/gate.safetensors, where `gate` looks)");
  cmd->add_option("--steps", a->train.steps, "Adam steps")->capture_default_str();
  cmd->add_option("--batch", a->train.batch, "Examples per step")->capture_default_str();
  cmd->add_option("--lr", a->train.lr, "Learning rate")->capture_default_str();
  cmd->add_option("--l1", a->train.l1, "Weight λ of the L1 sparsity term (mean gate)")->capture_default_str();
  cmd->add_option("--temperature", a->train.temperature, "τ of the gate σ(z/τ); < 1 sharpens")
      ->capture_default_str();
  cmd->add_option("--hidden", a->train.hidden, "Hidden width of the gate MLP")->capture_default_str();
  cmd->add_flag("--question", a->train.use_question,
                "Also condition the gate on the question's pooled embedding");
  cmd->add_option("--seed", a->train.seed, "Seed of the gate's initialisation (and dataset order)")
      ->capture_default_str();
  cmd->add_option("--log-every", a->log_every, "Print a progress line every N steps")->capture_default_str();
  add_compute_flags(cmd, &a->dtype, &a->device, &a->threads,
                    "Compute dtype of the frozen model: fp32 | bf16");
  cmd->callback([a] { run_train_gate(*a); });
}

}  // namespace vispco::cli
