// The stage-1 patch-head loss (see patch_head_loss.h).
#include "train/losses/patch_head_loss.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>

#include <utility>

#include "train/patch_labels.h"

namespace vispco::train {

HeadLayout::HeadLayout(const StageSettings& v) : total(PatchLabelSizes::kTotal) {
  if (v.position_loss > 0) position = std::exchange(total, total + 2);
  if (v.count_heads) count = std::exchange(total, total + 2 * PatchExtraSizes::kCount);
  if (v.glyph_index_head) glyph_index = std::exchange(total, total + PatchExtraSizes::kGlyphIndex);
}

std::vector<std::array<int64_t, 3>> HeadLayout::extra_heads() const {
  std::vector<std::array<int64_t, 3>> out;
  if (count >= 0) {
    out.push_back({count, PatchExtraSizes::kCount, 0});
    out.push_back({count + PatchExtraSizes::kCount, PatchExtraSizes::kCount, 1});
  }
  if (glyph_index >= 0) out.push_back({glyph_index, PatchExtraSizes::kGlyphIndex, 2});
  return out;
}

at::Tensor balanced_patch_loss(const at::Tensor& logits, const at::Tensor& labels) {
  auto ce = torch::nn::functional::cross_entropy(
      logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));  // [N]
  auto fg = (labels > 0).to(ce.scalar_type());
  const auto n_fg = fg.sum(), n_bg = (1 - fg).sum();
  auto fg_term = (ce * fg).sum() / n_fg.clamp_min(1), bg_term = (ce * (1 - fg)).sum() / n_bg.clamp_min(1);
  // Halves where both kinds are present; a kind absent from the batch contributes nothing.
  const auto both = (n_fg > 0).logical_and(n_bg > 0).to(ce.scalar_type());
  return both * 0.5 * (fg_term + bg_term) + (1 - both) * (fg_term + bg_term);
}

std::pair<double, int64_t> foreground_accuracy(const at::Tensor& pred, const at::Tensor& labels) {
  const auto fg = labels > 0;
  const int64_t n = fg.sum().item<int64_t>();
  const double acc =
      n ? (pred.masked_select(fg) == labels.masked_select(fg)).to(at::kDouble).mean().item<double>() : 0.0;
  return {acc, n};
}

at::Tensor patch_head_loss(const at::Tensor& logits, const std::vector<const eval::synthvqa::Scene*>& scenes,
                           const StageSettings& v, int64_t grid) {
  std::vector<at::Tensor> labels;
  for (const auto* scene : scenes) labels.push_back(patch_labels(*scene, grid));
  auto lab = at::stack(labels).to(logits.device());  // [B, N_v, 6]
  const int64_t sizes[] = {PatchLabelSizes::kColour, PatchLabelSizes::kShape, PatchLabelSizes::kSize,
                           PatchLabelSizes::kCentre, PatchLabelSizes::kChar,  PatchLabelSizes::kInk};
  int64_t off = 0;
  auto loss = at::zeros({}, logits.options());
  for (int c = 0; c < 6; ++c) {
    auto lg = logits.narrow(-1, off, sizes[c]).reshape({-1, sizes[c]});
    const double weight = c == 4 ? v.glyph_weight : 1.0;  // column 4: the glyph (character) head
    loss = loss + weight * balanced_patch_loss(lg, lab.select(-1, c).reshape({-1}));
    off += sizes[c];
  }
  const HeadLayout layout(v);
  if (layout.position >= 0) {  // the two outputs after the label heads regress (column, row)
    auto where = patch_positions(grid).to(logits.device()).unsqueeze(0).expand({logits.size(0), -1, -1});
    loss = loss + v.position_loss * at::mse_loss(logits.narrow(-1, layout.position, 2), where);
  }
  if (const auto extra = layout.extra_heads(); !extra.empty()) {
    std::vector<at::Tensor> extra_labels;
    for (const auto* scene : scenes) extra_labels.push_back(patch_extra_labels(*scene, grid));
    auto elab = at::stack(extra_labels).to(logits.device());  // [B, N_v, 3]
    for (const auto& [offset, classes, column] : extra)
      loss = loss + balanced_patch_loss(logits.narrow(-1, offset, classes).reshape({-1, classes}),
                                        elab.select(-1, column).reshape({-1}));
  }
  return loss;
}

}  // namespace vispco::train
