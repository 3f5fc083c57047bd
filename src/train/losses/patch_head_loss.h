// The stage-1 loss: the vision tower learns dense per-patch labels of SynthVQA scenes (train/patch_labels.h)
// through linear patch heads — six label heads, optionally a patch-position regression and count and
// glyph-index heads — each classification head balanced between foreground and background patches.
#pragma once
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "eval/synthvqa/scene.h"
#include "train/recipe.h"

namespace vispco::train {

/// Columns of the tower's patch-head logits: the six label heads of patch_labels(), then the two position
/// outputs (StageSettings::position_loss), then the colour- and shape-count heads (count_heads), then the
/// glyph-index head (glyph_index_head); −1 for a part the stage does not train.
struct HeadLayout {
  int64_t position = -1;     ///< first of the 2 position columns, or −1
  int64_t count = -1;        ///< first of the 2 · PatchExtraSizes::kCount count columns, or −1
  int64_t glyph_index = -1;  ///< first of the PatchExtraSizes::kGlyphIndex glyph-index columns, or −1
  int64_t total = 0;         ///< columns in all (the patch heads' output width)
  /// The layout of the vision stage `v`.
  explicit HeadLayout(const StageSettings& v);
  /// (first column, classes, column of patch_extra_labels()) of each extra classification head, in column
  /// order.
  std::vector<std::array<int64_t, 3>> extra_heads() const;
};

/// Stage-1 loss of one patch-label head, balanced between foreground and background: the mean
/// cross-entropy over patches whose label is > 0 and the mean over patches labelled 0 (nothing there),
/// averaged (a kind absent from the batch is left out). A plain mean lets the ~95% background patches
/// dominate: an earlier tower trained that way recognised object shapes on only 15% of object patches.
/// @param logits [N, C] fp32 @param labels [N] int64 in [0, C) @return scalar.
at::Tensor balanced_patch_loss(const at::Tensor& logits, const at::Tensor& labels);

/// What a tower probe reports for one patch head: the accuracy of `pred` against `labels` (same shape, int64)
/// over the foreground patches (label > 0), and how many there are (accuracy 0 when none).
std::pair<double, int64_t> foreground_accuracy(const at::Tensor& pred, const at::Tensor& labels);

/// The stage-1 loss of a batch: Σ over the six label heads of balanced_patch_loss (the glyph head weighted by
/// v.glyph_weight), plus v.position_loss × the mean squared error of the position outputs against
/// patch_positions(), plus balanced_patch_loss of each extra head.
/// @param logits [B, N_v, HeadLayout(v).total] fp32 the patch heads on the tower's features
/// @param scenes the B images' scenes @param v the vision stage's settings @param grid patches per side
/// @return scalar fp32 on logits' device.
at::Tensor patch_head_loss(const at::Tensor& logits, const std::vector<const eval::synthvqa::Scene*>& scenes,
                           const StageSettings& v, int64_t grid);

}  // namespace vispco::train
