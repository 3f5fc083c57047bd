// Whether a model's images make their own number of visual tokens N_v (dynamic resolution, AnyRes tiling),
// so that ModelShape::n_visual_tokens is only the nominal image's count: what `vispco optimize --keep-as
// auto` asks to choose between a keep ratio and a count (issue 47).
#pragma once
#include "model/shape.h"

namespace vispco {

/// True for LLaVA-NeXT, Qwen2-VL and Qwen2.5-VL (by ModelShape::architecture), false for LLaVA-1.5 and any
/// other architecture. Interim: a table of architecture names kept here, next to the families, until
/// ModelShape carries the bit itself (each family setting it in its shape(); a header change that rebuilds
/// the whole tree, so left to a quiet moment).
bool n_visual_varies(const ModelShape& shape);

}  // namespace vispco
