// The per-image K predictor of dynamic K (issue 18; seed §5: "a super-light network (two or three MLP layers)
// predicts K from image features instead of searching"): an MLP from cheap features (k_features.h) to R − 1
// cumulative logits z_k = logit P(label > k) over a K ladder — ordinal classification in the cumulative-link
// form of Frank & Hall (ECML 2001) / CORAL (Cao et al. 2020) — and one safety threshold τ: the predicted rung
// is #{k : σ(z_k) ≥ τ}, so lowering τ only ever adds tokens. Stored as safetensors with its settings in the
// metadata.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vispco::optimize {

/// What a predictor file knows besides its weights (a plain value; equality over all fields).
struct KPredictorMeta {
  std::string template_text;       ///< plan template it predicts K for, canonical ("divprune:layer=0")
  std::vector<int64_t> ladder;     ///< [R] ascending K values; ladder.back() = N_v
  std::string target = "correct";  ///< label target (ladder_table.h KTarget name)
  int64_t n_features = 0;          ///< F, input width
  int64_t hidden = 64;             ///< H, hidden width of both hidden layers
  double tau = 0.5;                ///< safety threshold in (0, 1)
  std::string features = "";       ///< feature recipe name (k_features.h kFeatureRecipe)
  bool operator==(const KPredictorMeta&) const = default;
};

/// fc1 [H, F] → ReLU → fc2 [H, H] → ReLU → out [R − 1, H], on standardised features (x − mean) / std.
struct KPredictorImpl : torch::nn::Module {
  /// @throws InvalidArgument when F < 1, H < 1 or the ladder has < 2 rungs.
  explicit KPredictorImpl(KPredictorMeta meta, uint64_t seed = 0);
  /// Cumulative logits. @param features [n, F] fp32 raw features @return [n, R − 1] fp32.
  at::Tensor logits(const at::Tensor& features);
  /// Predicted rung per row at threshold tau (meta.tau when < 0). @param features [n, F] @return [n] rungs
  /// in [0, R).
  std::vector<int> predict(const at::Tensor& features, double tau = -1);
  /// Parameter count (weights and biases; the feature statistics are buffers).
  int64_t n_parameters();

  KPredictorMeta meta;
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, out{nullptr};
  at::Tensor feature_mean, feature_std;  ///< [F] fp32 buffers (0 and 1 until fit_feature_stats)
};
TORCH_MODULE(KPredictor);

/// Sets feature_mean / feature_std from training features [n, F] (std floored at 1e-6).
void fit_feature_stats(KPredictor& p, const at::Tensor& features);

/// Training settings (a plain value).
struct KPredictorTraining {
  int64_t steps = 600;         ///< full-batch AdamW steps, ≥ 1
  double lr = 3e-3;            ///< learning rate > 0
  double weight_decay = 1e-3;  ///< AdamW decoupled decay ≥ 0
  uint64_t seed = 0;           ///< seed of the predictor's initial weights (training itself draws nothing)
};
/// Mean binary cross-entropy of the R − 1 cumulative logits against [label > k] over rows with label ≥ 0.
/// @param features [n, F] fp32 @throws InvalidArgument (sizes, a label ≥ R, no labelled row).
double k_predictor_loss(KPredictor& p, const at::Tensor& features, const std::vector<int>& labels);

/// What training did.
struct KTrainingResult {
  double loss_before = 0, loss_after = 0;  ///< training loss at step 0 and at the kept step
  double val_loss = 0;                     ///< validation loss at the kept step (0 without validation)
  int64_t kept_step = 0;                   ///< the step whose weights were kept (last without validation)
};
/// Trains on rows with label ≥ 0 (labels −1 are skipped) with full-batch AdamW on k_predictor_loss, after
/// fitting the feature statistics. With validation rows (val_labels non-empty) the loss there is checked
/// every 10 steps and the weights of the best check are kept (early stopping). @param features [n, F] fp32
/// @throws InvalidArgument (sizes, no labelled row, bad settings).
KTrainingResult train_k_predictor(KPredictor& p, const at::Tensor& features, const std::vector<int>& labels,
                                  const KPredictorTraining& t, const at::Tensor& val_features = {},
                                  const std::vector<int>& val_labels = {});

/// Writes the predictor (fp32 tensors; metadata {"format": "vispco-k-predictor", "meta": JSON} plus extra).
/// @throws IoError.
void save_k_predictor(const std::string& path, KPredictor& p,
                      const std::map<std::string, std::string>& extra = {});
/// Reads a predictor file. @throws IoError (missing file, with the hint to run `vispco optimize --method
/// dynamic-k`), FormatError (not a predictor file, bad metadata or tensor shape).
KPredictor load_k_predictor(const std::string& path);

}  // namespace vispco::optimize
