// Gate training: soft key gating inside the frozen decoder (forward_gated), answer cross-entropy + λ·L1.
#include "train/gate_train.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "cost/timer.h"
#include "io/tokenizer.h"
#include "model/answer_targets.h"
#include "model/generate.h"

namespace vispco::train {

void GateTrainOptions::validate() const {
  if (steps < 1) throw InvalidArgument("train-gate: steps must be ≥ 1 (got " + std::to_string(steps) + ")");
  if (batch < 1) throw InvalidArgument("train-gate: batch must be ≥ 1 (got " + std::to_string(batch) + ")");
  if (!(lr > 0)) throw InvalidArgument("train-gate: lr must be > 0 (got " + std::to_string(lr) + ")");
  if (!(l1 >= 0)) throw InvalidArgument("train-gate: l1 must be ≥ 0 (got " + std::to_string(l1) + ")");
  GateConfig g;
  g.d_model = 1;
  g.hidden = hidden;
  g.temperature = temperature;
  g.validate();
}

nlohmann::json to_json(const GateTrainOptions& o) {
  return {{"steps", o.steps},
          {"batch", o.batch},
          {"lr", o.lr},
          {"l1", o.l1},
          {"hidden", o.hidden},
          {"use_question", o.use_question},
          {"temperature", o.temperature},
          {"seed", o.seed}};
}

GateLoss gate_loss(VisionLanguageModel& m, TokenGate& gate, const std::vector<GateExample>& batch,
                   double l1) {
  if (batch.empty()) throw InvalidArgument("gate_loss: empty batch");
  const auto& cfg = m.config();
  const auto& tok = m.tokenizer();
  const auto dev = m.context().device;
  const int64_t B = static_cast<int64_t>(batch.size());
  std::vector<at::Tensor> px;
  for (const auto& e : batch) px.push_back(e.pixels);
  // Visual tokens without autograd (frozen tower and projector), then a normal tensor for the graph.
  auto visual = m.encode_images(at::stack(px)).embeds.clone();  // [B, N_v, D]
  const int64_t n_v = visual.size(1);
  std::vector<VlmRequest> reqs(B);
  std::vector<std::vector<int64_t>> answer_pos(B);  // indices into prompt_ids of the answer tokens and EOS
  for (int64_t b = 0; b < B; ++b) {
    auto ids = m.prompt_ids(batch[b].question);
    auto ans = tok.encode(batch[b].answer, false);
    ans.push_back(tok.eos_id());
    for (auto id : ans) {
      answer_pos[b].push_back(static_cast<int64_t>(ids.size()));
      ids.push_back(id);
    }
    reqs[b].prompt_ids = std::move(ids);
  }
  auto state = build_prefill_state(m, reqs, visual);
  const int64_t T = state.hidden.size(1);
  auto target = answer_targets(reqs, answer_pos, cfg.image_token_index, n_v, T);
  auto question = gate->cfg.use_question ? pooled_question(state) : at::Tensor();
  auto log_g = gate->log_gate(visual.to(at::kFloat), question);  // [B, N_v]
  auto vis_pos = at::nonzero(state.visual).select(1, 1).view({B, n_v});
  // Key gate: g at visual keys, 1 elsewhere, from layer 0 on, on every query's logit of the key.
  GateKeyHook hook(at::ones({B, T}, log_g.options()).scatter(1, vis_pos, log_g.exp()));
  auto& lm = m.language_model();
  auto logits = lm->logits(lm->forward_gated(state, hook));  // [B, T, V] fp32
  auto task = torch::nn::functional::cross_entropy(
      logits.view({B * T, -1}), target.view({-1}).to(dev),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
  auto mean_gate = log_g.exp().mean();
  GateLoss out;
  out.total = task + l1 * mean_gate;
  out.task = task.item<double>();
  out.l1 = mean_gate.item<double>();
  return out;
}

TokenGate train_gate(VisionLanguageModel& m, const GateTrainOptions& o,
                     const std::function<std::vector<GateExample>(int64_t step)>& data,
                     const std::function<void(const GateStepReport&)>& on_step) {
  o.validate();
  GateConfig gc;
  gc.d_model = m.config().text.hidden_size;
  gc.hidden = o.hidden;
  gc.use_question = o.use_question;
  gc.temperature = o.temperature;
  TokenGate gate(gc, o.seed);
  gate->to(m.context().device);
  for (auto& p : m.net()->parameters()) p.requires_grad_(false);
  torch::optim::Adam opt(gate->parameters(), torch::optim::AdamOptions(o.lr));
  for (int64_t step = 0; step < o.steps; ++step) {
    Stopwatch sw;
    auto batch = data(step);
    if (static_cast<int64_t>(batch.size()) != o.batch)
      throw InvalidArgument("train-gate: the data source gave " + std::to_string(batch.size()) +
                            " examples for a batch of " + std::to_string(o.batch));
    opt.zero_grad();
    auto loss = gate_loss(m, gate, batch, o.l1);
    loss.total.backward();
    opt.step();
    if (on_step) {
      GateStepReport r;
      r.step = step + 1;
      r.steps = o.steps;
      r.loss = loss.total.item<double>();
      r.task = loss.task;
      r.l1 = loss.l1;
      r.seconds = sw.ms() / 1000.0;
      on_step(r);
    }
  }
  gate->eval();
  return gate;
}

}  // namespace vispco::train
