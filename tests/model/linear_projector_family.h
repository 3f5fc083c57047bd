// A deliberately tiny second model family (issue 44's proof of the seam): LLaVA-1.5 with a one-layer linear
// projector (D_v → D, no activation, as the original LLaVA of Liu et al., NeurIPS 2023 §4.1), architecture
// "LlavaLinearProjectorForTesting". It lives in the tests and joins the registry at run time
// (register_model_family), so it shows that a family needs no code outside model/: generate, eval, the
// searches and the server take it through VisionLanguageModel and ModelShape alone.
#pragma once
#include <string>

namespace vispco::testing {

/// config.json "architectures"[0] of the family.
inline constexpr const char* kLinearProjectorArchitecture = "LlavaLinearProjectorForTesting";

/// Registers the family once per process (later calls do nothing).
void register_linear_projector_family();

/// A model folder of the family derived from the tiny LLaVA folder (model/tiny_model.h): the same tower,
/// decoder, tokenizer and preprocessing, the projector replaced by one Linear (weight [D, D_v] and bias [D],
/// seeded normal · 0.05) named "multi_modal_projector.{weight,bias}". Written once per test binary; the
/// family is registered first.
const std::string& linear_projector_model_dir();

}  // namespace vispco::testing
