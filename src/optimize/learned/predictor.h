// The budget-conditioned predictor g_φ of VisPCO (Ji et al., ACL 2026, §3.3): prompt embeddings (text and
// projected visual tokens, before the decoder) and a budget b ∈ [0, 1] → raw kernel parameters. Token
// features pass two residual blocks, each followed by FiLM modulation (Perez et al., AAAI 2018) from an
// embedding of b, then a masked mean over the prompt tokens and an MLP head (the layout of the authors'
// release); unlike the release, the head also sees the budget embedding directly (a skip past the LayerNorm,
// which normalises a FiLM scale away). Always fp32, whatever the VLM's compute dtype; the VLM stays frozen.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace vispco::optimize::learned {

/// Predictor settings (a plain value: defaults, validate(), JSON round trip, equality over all fields).
struct PredictorOptions {
  /// D, width of the VLM's token embeddings (the predictor's input), ≥ 8.
  int64_t d_model = 0;
  /// P, raw kernel parameters to output (kernels.h n_kernel_params), ≥ 1.
  int64_t n_outputs = 0;
  /// Widths of the MLP head, ≥ 1 each. Release: 256, 128.
  int64_t head_hidden1 = 256, head_hidden2 = 128;
  /// Dropout probability in the residual blocks and the head, in [0, 1). Release 0.1.
  double dropout = 0.1;
  /// Standard deviation of the last layer's initial weights (bias 0), ≥ 0: small, so every sample starts at
  /// the kernel's zero-output parameters.
  double out_init_std = 1e-3;
  /// Seed of the initial weights.
  uint64_t seed = 0;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const PredictorOptions&) const = default;
};
nlohmann::json to_json(const PredictorOptions& o);
/// @throws InvalidArgument for unknown keys or bad values.
PredictorOptions predictor_options_from_json(const nlohmann::json& j);

/// LayerNorm → Linear → GELU → Dropout, plus a linear (or identity) skip: in → out.
struct ResidualBlockImpl : torch::nn::Module {
  ResidualBlockImpl(int64_t in, int64_t out, double dropout);
  /// @param x [..., in] @return [..., out].
  at::Tensor forward(const at::Tensor& x);
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear fc{nullptr}, skip{nullptr};  ///< skip unset when in == out
  double dropout;
};
TORCH_MODULE(ResidualBlock);

/// g_φ. Hidden widths D/2 → D/4 → D/8 (as the release), budget embedding of width D/4, head on [pooled,
/// budget].
struct PredictorImpl : torch::nn::Module {
  /// @throws InvalidArgument for bad options.
  explicit PredictorImpl(const PredictorOptions& opts);
  /// @param tokens [B, T, D] embeddings (any float dtype; used in fp32, detached from the VLM)
  /// @param pool [B, T] bool: the tokens to average (the prompt's valid tokens; never answer tokens)
  /// @param budget [B] budgets b in [0, 1]
  /// @return [B, P] fp32 raw kernel parameters. @throws c10::Error for mismatched shapes.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& pool, const at::Tensor& budget);

  PredictorOptions opts;
  torch::nn::Linear input_proj{nullptr};
  ResidualBlock block1{nullptr}, block2{nullptr};
  torch::nn::Linear budget_fc1{nullptr}, budget_fc2{nullptr}, film1{nullptr}, film2{nullptr};
  torch::nn::LayerNorm head_norm{nullptr};
  torch::nn::Linear head1{nullptr}, head2{nullptr}, head3{nullptr};
};
TORCH_MODULE(Predictor);

/// Writes `<dir>/predictor.pt` (parameters) and `<dir>/predictor.json` ({"options": …} merged with `meta`).
/// @throws IoError.
void save_predictor(const std::string& dir, Predictor& p, const nlohmann::json& meta);
/// Reads what save_predictor() wrote. @param meta_out receives predictor.json when given.
/// @throws IoError (missing file), FormatError (bad JSON), InvalidArgument (bad options).
Predictor load_predictor(const std::string& dir, nlohmann::json* meta_out = nullptr);

}  // namespace vispco::optimize::learned
