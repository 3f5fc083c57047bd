// A tiny random-weight LLaVA ("tiny" preset) written once per test binary in the HF layout.
#pragma once
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string>

#include "model/generate.h"
#include "model/llava/llava.h"
#include "model/llava/presets.h"
#include "test_util.h"

namespace vispco::testing {

/// Folder of the tiny random model (fp32 weights, seed 7), created on first use.
inline const std::string& tiny_model_dir() {
  return written_once([](const TempDir& dir) {
    write_random_llava(dir.str("tiny"), find_preset("tiny").config, 7, at::kFloat);
    return dir.str("tiny");
  });
}

/// Largest |a − b|; +inf when either holds a NaN (so a NaN never passes a tolerance check).
inline double max_diff(const at::Tensor& a, const at::Tensor& b) {
  if (a.isnan().any().item<bool>() || b.isnan().any().item<bool>()) return INFINITY;
  return (a - b).abs().max().item<double>();
}

/// The tiny model loaded in fp32 on the CPU.
inline VisionLanguageModel load_tiny() { return VisionLanguageModel::load(tiny_model_dir(), RunContext{}); }

/// The transformers ≥ 4.52 name of an older-layout LLaVA checkpoint key: "language_model.model.X" →
/// "model.language_model.X", "language_model.lm_head.X" → "lm_head.X", anything else → "model." + name.
/// Written here by hand, not taken from the loader it tests.
inline std::string newer_layout_key(const std::string& name) {
  if (name.rfind("language_model.model.", 0) == 0) return "model.language_model." + name.substr(21);
  if (name.rfind("language_model.lm_head.", 0) == 0) return name.substr(15);
  return "model." + name;
}

/// Greedy decoding of exactly `n` new tokens (EOS does not end a row).
inline GenerationConfig greedy(int64_t n) {
  GenerationConfig gc;
  gc.max_new_tokens = n;
  gc.stop_at_eos = false;
  return gc;
}

/// A deterministic pseudo-image, [3, S, S] fp32, CLIP-normalised range.
inline at::Tensor test_pixels(int64_t size, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn({3, size, size}, gen);
}

}  // namespace vispco::testing
