// The learned token gate (seed-described scorer, DESIGN.md §5): a small MLP after the projector gives each
// visual token a gate g = σ(z / τ) from its embedding (optionally also the question's pooled embedding).
// Trained with the VLM frozen (train/gate_train.h): the gate enters the LLM as a key gate on every query's
// weight of the token (= a bias log g on the attention logits; LlamaForCausalLM::forward_gated), so g → 0
// removes the token from every query's view exactly as pruning it at ℓ = 0 would; at inference
// its logits rank the tokens for top-K (prune/scorers/gate.cpp). Stored as safetensors beside the model.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "model/token_state.h"

namespace vispco {

/// Shape and behaviour of a gate (a plain value: defaults, validate(), JSON round trip, equality).
struct GateConfig {
  /// Width D of the visual tokens it reads (the LLM's hidden size), ≥ 1.
  int64_t d_model = 0;
  /// Hidden width of the MLP, ≥ 1.
  int64_t hidden = 64;
  /// Also read the question: the mean of the instruction tokens' input embeddings, concatenated to each
  /// token.
  bool use_question = false;
  /// Temperature τ > 0 of g = σ(z / τ): below 1 sharpens the gates (and the L1 term's pull), above 1 softens.
  double temperature = 1.0;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const GateConfig&) const = default;
};
nlohmann::json to_json(const GateConfig& c);
/// @throws InvalidArgument for unknown keys or bad values.
GateConfig gate_config_from_json(const nlohmann::json& j);

/// The gate network: z = fc2(gelu(fc1([x̂ ; q̂]))), x̂ = x / rms(x) (parameter-free RMS normalisation, so the
/// gate does not depend on the projector's output scale), q̂ the same for the pooled question. fc1 [H, D or
/// 2D], fc2 [1, H]; initialised with fc2's bias at +2 (every gate starts open, g ≈ 0.88 at τ = 1).
struct TokenGateImpl : torch::nn::Module {
  explicit TokenGateImpl(const GateConfig& cfg, uint64_t seed = 0);
  /// Logits z. @param tokens [B, N, D] @param question [B, D] (read only when cfg.use_question) @return [B,
  /// N] fp32.
  at::Tensor logits(const at::Tensor& tokens, const at::Tensor& question = {});
  /// Gates σ(z / τ) in (0, 1), [B, N] fp32.
  at::Tensor gate(const at::Tensor& tokens, const at::Tensor& question = {});
  /// log σ(z / τ) (stable: −softplus(−z / τ)), [B, N] fp32: the log of the key gate in training.
  at::Tensor log_gate(const at::Tensor& tokens, const at::Tensor& question = {});

  GateConfig cfg;
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(TokenGate);

/// `<model_dir>/gate.safetensors`, where `vispco train-gate` writes by default and the gate scorer looks.
std::string default_gate_path(const std::string& model_dir);

/// Writes the gate's parameters (fp32) with its config in the safetensors metadata
/// ({"format": "vispco-gate", "gate_config": JSON} plus `extra`, e.g. the training settings). @throws
/// IoError.
void save_gate(const std::string& path, TokenGate& gate,
               const std::map<std::string, std::string>& extra = {});

/// Reads a gate file on the CPU in fp32. @param expect_d_model the model's hidden size (0: no check).
/// @throws IoError (missing file, with a hint to run `vispco train-gate`), FormatError (not a gate file, bad
/// shape), ConfigError (a missing tensor; the gate was trained for another hidden size).
TokenGate load_gate(const std::string& path, int64_t expect_d_model = 0);

/// The question's pooled embedding: mean over each row's instruction tokens (valid text after the image) of
/// `state.hidden`, fp32 [B, D]; zeros for a row without any.
at::Tensor pooled_question(const TokenState& state);

}  // namespace vispco
