// A third, deliberately tiny test family (issue 44: the seam carries what Qwen2.5-VL and LLaVA-NeXT need):
// "UnpaddedMropeLlavaForTesting" is the tiny LLaVA's tower, projector and decoder with
//  - per-image visual tokens: the image is padded to a square as LLaVA-1.5 does, and patch rows or columns
//    that hold no pixel of the image are dropped (LLaVA-NeXT's unpadding idea), so a 2:1 image makes fewer
//    tokens on a non-square grid and a batch mixes layouts;
//  - multi-axis RoPE positions (M-RoPE, Qwen2-VL §2.1), config text_config.rope_scaling mrope_section [2, 3,
//  3];
//  - its own tokenizer format: bytes (id = byte + 3; 1 BOS, 2 EOS), not SentencePiece, and its own template
//    "<image>\nQ: {question}\nA:".
// Like the linear-projector family it joins the registry at run time and uses nothing outside src/model/'s
// seam, so generate, eval, a search and the server take it unchanged.
#pragma once
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "io/tokenizer_model.h"
#include "model/shape.h"

namespace vispco::testing {

/// config.json "architectures"[0] of the family.
inline constexpr const char* kUnpaddedMropeArchitecture = "UnpaddedMropeLlavaForTesting";

/// The family's tokenizer model: one id per byte (byte + 3), 0 unknown, 1 BOS, 2 EOS, no pad. Decoding
/// writes ASCII only (a byte ≥ 0x80 decodes as '?'), so random-weight outputs stay valid UTF-8.
class ByteTokenizerModel final : public io::TokenizerModel {
 public:
  std::string format() const override { return "bytes"; }
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids, bool after_added) const override;
  int64_t bos_id() const override { return 1; }
  int64_t eos_id() const override { return 2; }
  int64_t pad_id() const override { return -1; }
  int64_t vocab_size() const override { return 259; }
  std::string piece(int64_t id) const override;
  std::string piece_bytes(int64_t id) const override;
};

/// Registers the family once per process.
void register_unpadded_mrope_family();

/// A model folder of the family made from the tiny LLaVA folder (same weights; config.json with the family's
/// architecture and rope_scaling; no tokenizer.model). Written once per test binary; registers the family.
const std::string& unpadded_mrope_model_dir();

/// The layout the family gives a W×H image, computed from the geometry alone: the image centred on a
/// max(W, H) square (offset ⌊(side − W)/2⌋), scaled to S = 56 px, and a patch row (column) of 14 px kept when
/// its pixel span meets the image's scaled span.
VisualLayout expected_unpadded_layout(int width, int height);

}  // namespace vispco::testing
