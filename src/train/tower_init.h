// Initialisations of the CLIP vision tower that give a from-scratch tower local attention at step 0:
// 2-D sine-cosine patch positions (MAE, He et al. 2022, §A.1: fixed 2-D sin-cos embeddings; here only the
// starting value of CLIP's learned table) and mimetic attention (Trockman & Kolter, "Mimetic Initialization
// of Self-Attention Layers", ICML 2023, §3: W_q W_kᵀ ≈ I, W_v W_o ≈ −β·I for ViTs). With both, q·k between
// two patches starts as the similarity of their positions, which peaks at the neighbours — what reading a
// glyph that straddles patch borders needs; with N(0, 0.02²) positions the tower must first learn its
// neighbourhoods.
#pragma once
#include "model/llava/clip_vision.h"

namespace vispco::train {

/// Overwrites the patch rows of `tower`'s learned position table [1 + G², D_v] (row 0, [CLS], is zeroed) with
/// scale · [sin(r·ω_k), cos(r·ω_k), sin(c·ω_k), cos(c·ω_k)]_k, k = 0…D_v/4 − 1, ω_k = 10000^(−k/(D_v/4)), for
/// the patch in grid row r and column c (MAE's 2-D sin-cos layout). No autograd.
/// @throws InvalidArgument when D_v is not a multiple of 4 or scale ≤ 0.
void sincos_position_init(ClipVisionModel& tower, double scale);

/// Re-initialises every encoder layer's q/k/v/out projections in place, drawing from the global LibTorch
/// generator: q ~ N(0, 1/D_v); k = q + N(0, (0.2)²/D_v) (so W_q W_kᵀ ≈ a scaled identity); v ~ N(0, 1/D_v);
/// out = −beta · vᵀ (W_v W_o ≈ −β·I, the paper's ViT setting). Biases zero. No autograd.
/// @throws InvalidArgument when beta < 0.
void mimetic_tower_init(ClipVisionModel& tower, double beta = 0.5);

}  // namespace vispco::train
