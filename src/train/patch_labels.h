// Dense per-patch targets for pre-training the bundled model's vision tower on SynthVQA scenes (the notes'
// cheap, strong supervision; LLaVA's tower is likewise pre-trained on its own, as CLIP): for each 14-px
// patch, what covers its centre — object colour, shape, size, whether an object's centre lies in it, and the
// text character and ink there.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "eval/synthvqa/scene.h"

namespace vispco::train {

/// Number of classes of each label head (class 0 = nothing there).
struct PatchLabelSizes {
  static constexpr int64_t kColour = 9;  ///< none + 8 colours
  static constexpr int64_t kShape = 7;   ///< none + 6 shapes
  static constexpr int64_t kSize = 3;    ///< none + small, large
  static constexpr int64_t kCentre = 2;  ///< patch holds an object's centre
  static constexpr int64_t kChar = 26;   ///< none + 25 characters of kTextAlphabet
  static constexpr int64_t kInk = 6;     ///< none + 5 inks
  static constexpr int64_t kTotal = kColour + kShape + kSize + kCentre + kChar + kInk;
};

/// Labels of one scene. @param grid patches per side (24 for 336 px, patch 14).
/// @return int64 [grid², 6]: columns colour, shape, size, centre, char, ink. An object covers a patch when
/// the patch centre lies within 0.75 of its circumradius (the later-drawn object wins); a string's box is
/// split evenly among its characters.
at::Tensor patch_labels(const eval::synthvqa::Scene& scene, int64_t grid);

/// Patches (row-major indices into the grid²) that show object `object` of `scene` under patch_labels()'s
/// rule — its footprint where no later-drawn object covers it — plus the patch holding its centre, sorted.
/// The visual tokens a question about that object should look at (grounding targets in training).
/// @throws InvalidArgument when `object` is out of range.
std::vector<int64_t> object_patches(const eval::synthvqa::Scene& scene, size_t object, int64_t grid);

/// The patch (row-major index into the grid²) holding the centre of object `object` — the one patch per
/// object that patch_labels() marks in its centre column. @throws InvalidArgument when `object` is out of
/// range.
int64_t object_centre_patch(const eval::synthvqa::Scene& scene, size_t object, int64_t grid);

/// Patches of each character of string `text` of `scene`, in reading order: those whose centre lies in the
/// character's share of the string's box (patch_labels()'s char rule: the box split evenly among its
/// characters), or, for a character narrower than that, the patch holding the centre of its share. The visual
/// tokens answer token j of a text question should look at. @throws InvalidArgument when `text` is out of
/// range.
std::vector<std::vector<int64_t>> glyph_patches(const eval::synthvqa::Scene& scene, size_t text,
                                                int64_t grid);

/// Classes of the optional extra heads (patch_extra_labels(); class 0 = nothing there).
struct PatchExtraSizes {
  static constexpr int64_t kMaxCount = 10;          ///< SynthVQA scenes hold at most 10 objects
  static constexpr int64_t kCount = kMaxCount + 1;  ///< none + 1…10 objects of that colour (or shape)
  static constexpr int64_t kGlyphIndex = 5;         ///< none + position 1…4 of the character in its string
};

/// The optional per-patch labels of the tower's count and glyph-index heads (recipe vision fields
/// `count_heads`, `glyph_index_head`). @return int64 [grid², 3]: columns
///   0 — on a patch of object o (object_patches()'s rule: its footprint where no later object covers it, plus
///       its centre patch): how many objects of the scene have o's colour (1…10), else 0;
///   1 — the same for o's shape;
///   2 — on a text patch (patch_labels()'s char rule): the position of its character in the string, 1-based.
/// Counting is then a property of every counted object's patches, so a count question reads it the way a
/// colour question reads a colour (one hop) instead of deriving the count from how attention mass divides.
at::Tensor patch_extra_labels(const eval::synthvqa::Scene& scene, int64_t grid);

/// Where each patch is: fp32 [grid², 2], the patch centre's column and row scaled to [−1, 1]
/// (−1 = left/top patch, +1 = right/bottom), the regression target of the tower's position head.
at::Tensor patch_positions(int64_t grid);

}  // namespace vispco::train
