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
#include "model/visual_tokens.h"

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

namespace {

// One prefill group's loss parts: examples whose images share a layout (N_v and grid), so one state holds
// them.
struct GroupLoss {
  at::Tensor task;       ///< scalar: mean answer-token cross-entropy of the group
  at::Tensor mean_gate;  ///< scalar: mean gate over the group's visual tokens
  int64_t n_tokens = 0;  ///< answer tokens (and EOS) of the group
  int64_t n_gates = 0;   ///< visual tokens of the group
};

GroupLoss group_loss(VisionLanguageModel& m, TokenGate& gate, const std::vector<GateExample>& batch,
                     const at::Tensor& visual, const VisualLayout& layout) {
  const auto& tok = m.tokenizer();
  const auto dev = m.context().device;
  const int64_t B = static_cast<int64_t>(batch.size());
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
  auto state = build_prefill_state(m, reqs, visual, layout);
  const int64_t T = state.hidden.size(1);
  auto target = answer_targets(reqs, answer_pos, m.shape().image_token_id, n_v, T);
  auto question = gate->cfg.use_question ? pooled_question(state) : at::Tensor();
  auto log_g = gate->log_gate(visual.to(at::kFloat), question);  // [B, N_v]
  auto vis_pos = at::nonzero(state.visual).select(1, 1).view({B, n_v});
  // Key gate: g at visual keys, 1 elsewhere, from layer 0 on, on every query's logit of the key.
  GateKeyHook hook(at::ones({B, T}, log_g.options()).scatter(1, vis_pos, log_g.exp()));
  auto& lm = m.language_model();
  auto logits = lm->logits(lm->forward_gated(state, hook));  // [B, T, V] fp32
  GroupLoss out;
  out.task = torch::nn::functional::cross_entropy(
      logits.view({B * T, -1}), target.view({-1}).to(dev),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
  out.mean_gate = log_g.exp().mean();
  out.n_tokens = target.ne(-100).sum().item<int64_t>();
  out.n_gates = B * n_v;
  return out;
}

}  // namespace

GateLoss gate_loss(VisionLanguageModel& m, TokenGate& gate, const std::vector<GateExample>& batch,
                   double l1) {
  if (batch.empty()) throw InvalidArgument("gate_loss: empty batch");
  std::vector<at::Tensor> px;
  for (const auto& e : batch) px.push_back(e.pixels);
  // Visual tokens without autograd (frozen tower and projector), then normal tensors for the graph. Images of
  // one layout share a prefill; a batch of several layouts (dynamic resolution) runs one prefill per layout.
  const auto vt = m.encode_image_list(px);
  std::vector<GroupLoss> groups;
  if (!vt.ragged()) {
    groups.push_back(group_loss(m, gate, batch, vt.embeds.clone(), vt.layout(0, m.shape())));
  } else {
    std::vector<std::pair<VisualLayout, std::vector<int64_t>>> by_layout;  // in order of first appearance
    for (int64_t b = 0; b < static_cast<int64_t>(batch.size()); ++b) {
      const auto l = vt.layout(b, m.shape());
      auto it = std::find_if(by_layout.begin(), by_layout.end(), [&](const auto& g) { return g.first == l; });
      if (it == by_layout.end()) it = by_layout.insert(by_layout.end(), {l, {}});
      it->second.push_back(b);
    }
    for (const auto& [layout, rows] : by_layout) {
      std::vector<GateExample> examples;
      std::vector<at::Tensor> visual;
      for (auto b : rows) {
        examples.push_back(batch[static_cast<size_t>(b)]);
        visual.push_back(vt.row(b, m.shape()).embeds);
      }
      groups.push_back(group_loss(m, gate, examples, at::cat(visual).clone(), layout));
    }
  }
  at::Tensor task, mean_gate;
  if (groups.size() == 1) {
    task = groups[0].task;
    mean_gate = groups[0].mean_gate;
  } else {  // the means over the whole batch: each group's weighted by its answer tokens / visual tokens
    int64_t n_tokens = 0, n_gates = 0;
    for (const auto& g : groups) {
      n_tokens += g.n_tokens;
      n_gates += g.n_gates;
    }
    task = at::zeros({}, groups[0].task.options());
    mean_gate = at::zeros({}, groups[0].mean_gate.options());
    for (const auto& g : groups) {
      task = task + g.task * (double(g.n_tokens) / double(n_tokens));
      mean_gate = mean_gate + g.mean_gate * (double(g.n_gates) / double(n_gates));
    }
  }
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
  gc.d_model = m.shape().hidden_size;
  gc.hidden = o.hidden;
  gc.use_question = o.use_question;
  gc.temperature = o.temperature;
  TokenGate gate(gc, o.seed);
  gate->to(m.context().device);
  for (auto& p : m.network().parameters()) p.requires_grad_(false);
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
