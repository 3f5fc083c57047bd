// The per-image K predictor of dynamic K (issue 18; seed §5: "a super-light network (two or three MLP layers)
// predicts K from image features instead of searching"): an MLP from cheap features (k_features.h) to R − 1
// cumulative logits z_k = logit P(label > k) over a K ladder — ordinal classification in the cumulative-link
// form of Frank & Hall (ECML 2001) / CORAL (Cao et al. 2020) — and one safety threshold τ: the predicted rung
// is #{k : σ(z_k) ≥ τ}, so lowering τ only ever adds tokens. Stored as safetensors with its settings in the
// metadata. This is its inference half (network, file); training lives in optimize/dynamic_k/k_predictor.h.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vispco {

/// What a predictor file knows besides its weights (a plain value; equality over all fields).
struct KPredictorMeta {
  std::string template_text;  ///< plan template it predicts K for, canonical ("divprune:layer=0")
  /// [R] ascending rungs; the last one keeps every visual token: counts K ending at N_v (ladder_unit
  /// "count"), or keep ratios in ‰ of each image's own N_v ending at 1000 ("permille"; issue 47: models whose
  /// images make their own N_v).
  std::vector<int64_t> ladder;
  std::string ladder_unit = "count";  ///< "count" | "permille"; files written before it existed: "count"
  std::string target = "correct";     ///< label target (optimize/dynamic_k/ladder_table.h KTarget name)
  int64_t n_features = 0;             ///< F, input width
  int64_t hidden = 64;                ///< H, hidden width of both hidden layers
  double tau = 0.5;                   ///< safety threshold in (0, 1)
  std::string features = "";          ///< feature recipe name (prune/auto_keep/k_features.h kKFeatureRecipe)
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

/// Writes the predictor (fp32 tensors; metadata {"format": "vispco-k-predictor", "meta": JSON} plus extra).
/// @throws IoError.
void save_k_predictor(const std::string& path, KPredictor& p,
                      const std::map<std::string, std::string>& extra = {});
/// Reads a predictor file. @throws IoError (missing file, with the hint to run `vispco optimize --method
/// dynamic-k`), FormatError (not a predictor file, bad metadata or tensor shape).
KPredictor load_k_predictor(const std::string& path);

}  // namespace vispco
