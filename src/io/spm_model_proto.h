// A SentencePiece model (sentencepiece_model.proto's ModelProto) built from a vocabulary list, for tokenizers
// that arrive as pieces + scores + types rather than as a `tokenizer.model` file: llama.cpp's GGUF
// "llama" vocabulary (tokenizer.ggml.tokens / scores / token_type). The result loads through
// Tokenizer::from_serialized, so GGUF and Hugging Face checkpoints share one tokenizer implementation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vispco::io {

/// ModelProto.SentencePiece.Type; GGUF's token_type uses the same numbers (llama_token_type).
enum class SpmPieceType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

/// One vocabulary entry.
struct SpmPiece {
  std::string piece;  ///< UTF-8 text with "▁" for spaces, or "<0xHH>" for a byte piece
  float score = 0;    ///< merge priority (BPE: higher merges first)
  SpmPieceType type = SpmPieceType::kNormal;
};

/// What the ModelProto needs besides the pieces. Defaults are Llama's tokenizer.model settings.
struct SpmModelSpec {
  std::vector<SpmPiece> pieces;
  bool bpe = true;               ///< TrainerSpec.model_type BPE (2); false: UNIGRAM (1)
  bool byte_fallback = true;     ///< TrainerSpec.byte_fallback (needs the 256 "<0xHH>" byte pieces)
  bool add_dummy_prefix = true;  ///< NormalizerSpec.add_dummy_prefix (GGUF tokenizer.ggml.add_space_prefix)
  bool remove_extra_whitespaces = false;
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;  ///< −1: none
};

/// The serialized ModelProto (protobuf wire format, fields as in sentencepiece_model.proto: pieces = 1
/// {piece 1, score 2, type 3}; trainer_spec = 2 {model_type 3, vocab_size 4, byte_fallback 35,
/// unk/bos/eos/pad id 40–43, their pieces 45–48}; normalizer_spec = 3 {name 1 "identity", add_dummy_prefix 3,
/// remove_extra_whitespaces 4, escape_whitespaces 5}).
/// @throws InvalidArgument for no pieces or a special id outside the pieces (pad may be −1).
std::string serialize_spm_model(const SpmModelSpec& spec);

}  // namespace vispco::io
