// A LLaVA-1.5 model from llama.cpp's GGUF pair: the text model (general.architecture "llama", written by
// convert_hf_to_gguf.py / the legacy llama converter) and the mmproj (general.architecture "clip", written by
// llava's convert_image_encoder_to_gguf.py). Maps tensor names and hyper-parameters to vispco's Hugging Face
// LLaVA layout, undoes the converter's Q/K row permutation (LlamaModel.permute: GGUF stores RoPE pairs
// interleaved, HF as halves), and rebuilds the SentencePiece tokenizer from tokenizer.ggml.*.
//
// Which vision layer: LLaVA-1.5 feeds the projector hidden_states[-2] of the 24-layer CLIP-L/14-336 tower
// (vision_feature_layer = −2: the output of 23 layers). The legacy llava converter already drops the last
// layer (clip.vision.block_count = 23, tensors v.blk.0–22) and llama.cpp's graph then skips one more, so
// llama.cpp runs 22 layers (ggml-org/llama.cpp#25817). vispco follows the projector's training: with
// clip.vision.feature_layer present (newer converters, HF's unsigned hidden-state index) that layer; without
// it, every stored block — 23 for the published llava-v1.5 mmproj files, as in HF.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "io/image.h"
#include "model/llava/config.h"
#include "model/model_source.h"

namespace vispco {

/// Everything VisionLanguageModel::load needs from a GGUF pair.
struct GgufLlava {
  LlavaConfig config;
  /// Tensors by vispco/HF parameter name (older transformers layout), CPU, as stored (F32/F16/BF16 views;
  /// Q8_0 dequantised; q/k un-permuted copies). vision_model.post_layernorm is absent from llava mmproj files
  /// (unused by LLaVA) and comes as an identity LayerNorm.
  std::map<std::string, at::Tensor> tensors;
  std::string tokenizer_proto;  ///< serialized SentencePiece ModelProto (io::serialize_spm_model)
  int64_t image_token_id =
      -1;  ///< the vocabulary's "<image>" piece, or −1 (then config.image_token_index = n_vocab)
  io::ImagePreprocessConfig preprocess;
  std::string vision_layer_note;  ///< one line: which tower layer feeds the projector and why
};

/// The configuration only (headers parsed, no tensor read). @throws IoError, FormatError, ConfigError
/// (unknown architecture — naming the supported ones —, a missing key, an unsupported projector or RoPE
/// scaling).
LlavaConfig gguf_llava_config(const ModelSource& src);
/// Config, tensors, tokenizer and preprocessing. @throws as gguf_llava_config, and ConfigError for a missing
/// tensor or a ggml type vispco does not read (F32, F16, BF16, Q8_0 are read).
GgufLlava load_gguf_llava(const ModelSource& src);

/// Undoes llama.cpp's LlamaModel.permute for a q/k weight [rows, in] (or bias [rows]) with `n_head` heads:
/// GGUF rows (head, pair, 2) → HF rows (head, 2, pair). Exposed for the test's converter.
at::Tensor gguf_unpermute_qk(const at::Tensor& w, int64_t n_head);
/// llama.cpp's permute itself (HF → GGUF), the inverse of gguf_unpermute_qk.
at::Tensor gguf_permute_qk(const at::Tensor& w, int64_t n_head);

}  // namespace vispco
