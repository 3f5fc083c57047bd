// Relaxed FLOPs A(R), budget target T(b) and the per-sample constraint of VisPCO (§3.1), on cost/flops.h.
#include "optimize/learned/flops_constraint.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/errors.h"
#include "cost/flops.h"

namespace vispco::optimize::learned {

at::Tensor LayerFlopsPoly::operator()(const at::Tensor& n) const {
  auto x = n.to(at::kDouble);
  return linear * x + quadratic * x * x;
}

LayerFlopsPoly layer_flops_poly(const DecoderFlopsSpec& t) {
  auto f = [&](int64_t n) { return static_cast<double>(decoder_layer_flops(t, n, n).total()); };
  LayerFlopsPoly p;
  p.quadratic = (f(2) - 2 * f(1)) / 2;
  p.linear = f(1) - p.quadratic;
  for (int64_t n : {int64_t{3}, int64_t{1000}})
    if (std::abs(p.at(double(n)) - f(n)) > 1e-9 * f(n))
      throw ConfigError("VisPCO: decoder_layer_flops is not a·n + c·n² (at n = " + std::to_string(n) + ": " +
                        std::to_string(f(n)) + " vs fit " + std::to_string(p.at(double(n))) +
                        "); update vispco/flops_constraint.cpp with the cost model");
  return p;
}

BudgetFloor parse_budget_floor(const std::string& name) {
  if (name == "text") return BudgetFloor::kText;
  if (name == "scorer") return BudgetFloor::kScorer;
  throw InvalidArgument("unknown budget floor '" + name + "' (valid: text, scorer)");
}

std::string budget_floor_name(BudgetFloor f) { return f == BudgetFloor::kText ? "text" : "scorer"; }

FlopsConstraint::FlopsConstraint(const ModelShape& shape, int64_t first_layer, BudgetFloor floor)
    : shape_(shape),
      poly_(layer_flops_poly(shape.flops.decoder)),
      n_layers_(shape.n_layers),
      n_visual_(shape.n_visual_tokens),
      first_(first_layer),
      floor_(floor) {
  if (first_layer < 0 || first_layer >= n_layers_)
    throw InvalidArgument("VisPCO: first prunable layer must be in [0, " + std::to_string(n_layers_) +
                          "), got " + std::to_string(first_layer));
}

at::Tensor FlopsConstraint::relaxed_flops(const at::Tensor& n_text, const at::Tensor& fractions) const {
  TORCH_CHECK(fractions.dim() == 2 && fractions.size(1) == n_layers_ && n_text.dim() == 1 &&
                  n_text.size(0) == fractions.size(0),
              "relaxed_flops: expected n_text [B] and fractions [B, ", n_layers_, "], got ", n_text.sizes(),
              " and ", fractions.sizes());
  auto n = n_text.to(at::kDouble).unsqueeze(1) + double(n_visual_) * fractions.to(at::kDouble);  // [B, L]
  return poly_(n).sum(1);
}

at::Tensor FlopsConstraint::max_flops(const at::Tensor& n_text) const {
  return double(n_layers_) * poly_(n_text.to(at::kDouble) + double(n_visual_));
}

at::Tensor FlopsConstraint::min_flops(const at::Tensor& n_text) const {
  auto text_only = poly_(n_text.to(at::kDouble));
  if (floor_ == BudgetFloor::kText) return double(n_layers_) * text_only;
  return double(first_) * poly_(n_text.to(at::kDouble) + double(n_visual_)) +
         double(n_layers_ - first_) * text_only;
}

at::Tensor FlopsConstraint::target_flops(const at::Tensor& n_text, const at::Tensor& budget) const {
  auto lo = min_flops(n_text);
  return lo + budget.to(at::kDouble) * (max_flops(n_text) - lo);
}

at::Tensor FlopsConstraint::constraint(const at::Tensor& n_text, const at::Tensor& fractions,
                                       const at::Tensor& budget) const {
  auto lo = min_flops(n_text), range = max_flops(n_text) - lo;
  return (relaxed_flops(n_text, fractions) - (lo + budget.to(at::kDouble) * range)) / range;
}

int64_t FlopsConstraint::decoder_flops(int64_t n_text, const std::vector<int64_t>& counts) const {
  if (static_cast<int64_t>(counts.size()) != n_layers_)
    throw InvalidArgument("decoder_flops: " + std::to_string(counts.size()) + " layer counts for " +
                          std::to_string(n_layers_) + " layers");
  std::vector<int64_t> tokens;
  for (auto k : counts) tokens.push_back(n_text + k);
  return prefill_flops(shape_.flops, tokens).decoder_total;
}

}  // namespace vispco::optimize::learned
