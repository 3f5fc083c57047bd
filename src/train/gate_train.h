// Training of the learned token gate (prune/gate.h) with the VLM frozen: the task loss is the cross-entropy
// of the answer tokens (and EOS) given image and question — as stage 2 of the model's own training
// (train/conversation_loss.h), single turn — with the gate entering every decoder layer as the key
// bias log g of its visual token (a soft, differentiable version of pruning it at ℓ = 0), plus λ times the
// L1 norm of the gates per token (their mean; gates are positive) to make the gate sparse.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/llava/llava.h"
#include "prune/gate.h"

namespace vispco::train {

/// One training example.
struct GateExample {
  at::Tensor pixels;     ///< [3, S, S] fp32 preprocessed (VisionLanguageModel::preprocess)
  std::string question;  ///< the user's question (placed in the LLaVA-1.5 template)
  std::string answer;    ///< the reference answer (its tokens and EOS are the targets)
};

/// Settings of train_gate() (a plain value: defaults, validate(), JSON, equality).
struct GateTrainOptions {
  /// Optimiser steps, ≥ 1.
  int64_t steps = 300;
  /// Examples per step, ≥ 1.
  int64_t batch = 4;
  /// Adam learning rate, > 0.
  double lr = 3e-3;
  /// λ, weight of the L1 sparsity term (mean gate per visual token), ≥ 0.
  double l1 = 0.05;
  /// The gate's shape (d_model is taken from the model).
  int64_t hidden = 64;
  bool use_question = false;
  /// τ of g = σ(z / τ), > 0.
  double temperature = 1.0;
  /// Seed of the gate's initialisation.
  uint64_t seed = 0;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const GateTrainOptions&) const = default;
};
nlohmann::json to_json(const GateTrainOptions& o);

/// The learned gate's soft pruning in the training forward (LlamaForCausalLM::forward_gated): one key gate
/// from layer 0 on that multiplies every query's weight of a key, the query's own key included, i.e. a
/// log g bias on the attention logits; a gate of 0 removes the key as physical pruning at ℓ = 0 does.
class GateKeyHook : public KeyGateHook {
 public:
  /// @param gate [B, T] floating in [0, 1] (g at the visual tokens, 1 elsewhere; may require grad).
  explicit GateKeyHook(at::Tensor gate) : gate_(std::move(gate)) {}
  at::Tensor gate(int64_t layer, const TokenState&, const at::Tensor&) override {
    return layer == 0 ? gate_ : at::Tensor();
  }
  bool gates_own_key() const override { return true; }

 private:
  at::Tensor gate_;
};

/// Loss parts of one batch.
struct GateLoss {
  at::Tensor total;  ///< scalar: task + λ·l1 (differentiable w.r.t. the gate)
  double task = 0;   ///< mean answer-token cross-entropy (nats)
  double l1 = 0;     ///< mean gate over visual tokens, in (0, 1)
};

/// Loss of a batch (see the file comment). @param gate trained module (fp32, on the model's device)
/// @throws InvalidArgument for an empty batch.
GateLoss gate_loss(VisionLanguageModel& m, TokenGate& gate, const std::vector<GateExample>& batch, double l1);

/// What one step did.
struct GateStepReport {
  int64_t step = 0;  ///< 1-based
  int64_t steps = 0;
  double loss = 0, task = 0, l1 = 0;  ///< GateLoss figures
  double seconds = 0;                 ///< wall time of the step
};

/// Trains a fresh gate: `steps` Adam steps on batches from `data(step)` (which must return options.batch
/// examples). Freezes the model's parameters (requires_grad off; the model is inference-only anyway).
/// @return the trained gate (fp32, on the model's device). @throws InvalidArgument for bad options or
/// batches.
TokenGate train_gate(VisionLanguageModel& m, const GateTrainOptions& options,
                     const std::function<std::vector<GateExample>(int64_t step)>& data,
                     const std::function<void(const GateStepReport&)>& on_step = {});

}  // namespace vispco::train
