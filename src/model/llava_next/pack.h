// LLaVA-NeXT's pack_image_features (transformers v4.52 modeling_llava_next.py LlavaNextModel
// .pack_image_features, the "spatial_unpad" merge): one image's tower features — the base image's n² first,
// then each tile's n² — become its visual-token sequence: the base features as they are, then the tiles'
// features laid on their spatial grid ((tile_rows·n) × (tile_cols·n), tile (i, j)'s patch (a, b) at row
// i·n + a, column j·n + b), cut to the image's aspect (unpad_image, anyres.h), each kept row followed by
// image_newline, flattened row by row.
#pragma once
#include <ATen/core/Tensor.h>

#include "model/llava_next/anyres.h"

namespace vispco {

/// The packing order of an image of geometry `g`: for token k of its N_v, the row of its flattened features
/// [(1 + T)·n²] (base first, then tile t = i·tile_cols + j) that it copies, or (1 + T)·n² for image_newline.
/// @return [N_v] int64, CPU.
at::Tensor anyres_pack_index(const AnyresGeometry& g);

/// Packs one image's features. @param features [1 + T, n², C] (base, then the tiles row-major), any dtype and
/// device @param newline [C], what a newline token gets (image_newline for the projected features; zeros for
/// the tower's attention keys) @return [N_v, C].
/// @throws InvalidArgument when features do not hold 1 + g.n_tiles() slices of n² rows of newline's width.
at::Tensor pack_image_features(const at::Tensor& features, const at::Tensor& newline,
                               const AnyresGeometry& g);

}  // namespace vispco
