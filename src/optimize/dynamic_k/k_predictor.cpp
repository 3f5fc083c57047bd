// Training the ordinal K predictor (see k_predictor.h).
#include "optimize/dynamic_k/k_predictor.h"

#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>

#include <limits>

#include "core/errors.h"

namespace vispco::optimize {

void fit_feature_stats(KPredictor& p, const at::Tensor& features) {
  torch::NoGradGuard no_grad;
  auto f = features.to(at::kFloat);
  p->feature_mean.copy_(f.mean(0));
  p->feature_std.copy_(f.size(0) > 1 ? f.std(0).clamp_min(1e-6) : torch::ones_like(p->feature_std));
}

namespace {

// Rows with a label, their features and their cumulative targets [label > k].
std::pair<at::Tensor, at::Tensor> labelled(KPredictor& p, const at::Tensor& features,
                                           const std::vector<int>& labels) {
  if (features.dim() != 2 || features.size(0) != static_cast<int64_t>(labels.size()))
    throw InvalidArgument("k predictor: one label per feature row expected");
  const int64_t R = static_cast<int64_t>(p->meta.ladder.size());
  std::vector<int64_t> rows;
  std::vector<float> y;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0) continue;
    if (labels[i] >= R) throw InvalidArgument("k predictor: label " + std::to_string(labels[i]) + " ≥ R");
    rows.push_back(static_cast<int64_t>(i));
    for (int64_t k = 0; k < R - 1; ++k) y.push_back(labels[i] > k ? 1.f : 0.f);
  }
  if (rows.empty()) throw InvalidArgument("k predictor: no labelled sample");
  auto x = features.to(at::kFloat).index_select(0, torch::tensor(rows, torch::kLong));
  return {x, torch::tensor(y).view({static_cast<int64_t>(rows.size()), R - 1})};
}

}  // namespace

double k_predictor_loss(KPredictor& p, const at::Tensor& features, const std::vector<int>& labels) {
  auto [x, y] = labelled(p, features, labels);
  torch::NoGradGuard no_grad;
  return torch::nn::functional::binary_cross_entropy_with_logits(p->logits(x), y).item<double>();
}

KTrainingResult train_k_predictor(KPredictor& p, const at::Tensor& features, const std::vector<int>& labels,
                                  const KPredictorTraining& t, const at::Tensor& val_features,
                                  const std::vector<int>& val_labels) {
  if (t.steps < 1 || !(t.lr > 0) || t.weight_decay < 0)
    throw InvalidArgument("k predictor: steps ≥ 1, lr > 0 and weight decay ≥ 0 expected");
  auto [x, y] = labelled(p, features, labels);
  const bool validate = !val_labels.empty();
  fit_feature_stats(p, x);
  torch::optim::AdamW opt(p->parameters(), torch::optim::AdamWOptions(t.lr).weight_decay(t.weight_decay));
  namespace F = torch::nn::functional;
  KTrainingResult r;
  {
    torch::NoGradGuard no_grad;
    r.loss_before = F::binary_cross_entropy_with_logits(p->logits(x), y).item<double>();
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<at::Tensor> best_params;
  auto check = [&](int64_t step) {
    const double v = k_predictor_loss(p, val_features, val_labels);
    if (v < best) {
      best = v;
      r.kept_step = step;
      best_params.clear();
      for (const auto& q : p->parameters()) best_params.push_back(q.detach().clone());
    }
  };
  if (validate) check(0);
  for (int64_t s = 1; s <= t.steps; ++s) {
    opt.zero_grad();
    auto loss = F::binary_cross_entropy_with_logits(p->logits(x), y);
    loss.backward();
    opt.step();
    if (validate && (s % 10 == 0 || s == t.steps)) check(s);
  }
  if (validate) {
    torch::NoGradGuard no_grad;
    auto params = p->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(best_params[i]);
    r.val_loss = best;
  } else {
    r.kept_step = t.steps;
  }
  torch::NoGradGuard no_grad;
  r.loss_after = F::binary_cross_entropy_with_logits(p->logits(x), y).item<double>();
  return r;
}

}  // namespace vispco::optimize
