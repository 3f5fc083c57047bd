// Loading a LLaVA-style Hugging Face folder, the steps LLaVA-1.5 and LLaVA-NeXT share (transformers'
// from_pretrained of LlavaForConditionalGeneration / LlavaNextForConditionalGeneration): the config's errors
// named by file, the tokenizer checked against image_token_index, the network built in the compute dtype and
// filled from the checkpoint, the preprocessing.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/context.h"
#include "core/errors.h"
#include "io/tokenizer.h"
#include "model/family.h"
#include "model/llava/config.h"
#include "model/weights.h"

namespace vispco {

/// `parse()`: a family's reading and validation of the folder's config.json, a ConfigError it throws prefixed
/// with that file's path ("<dir>/config.json: …"). @throws ConfigError.
template <class Parse>
auto parse_folder_config(const std::string& dir, Parse parse) {
  try {
    return parse();
  } catch (const ConfigError& e) {
    throw ConfigError((std::filesystem::path(dir) / "config.json").string() + ": " + e.what());
  }
}

/// The tokenizer of a LLaVA-style folder: tokenizer.model with tokenizer_config.json's added tokens, whose
/// "<image>" (where it declares one) must be `image_token_index`, the id the model replaces.
/// @throws IoError, FormatError (the files); ConfigError naming both ids when they differ.
io::Tokenizer load_llava_tokenizer(const std::string& dir, int64_t image_token_index);

/// The rest of loading a LLaVA-style folder once its config `cfg` is parsed (`llava` is cfg itself for
/// LLaVA-1.5, cfg.llava for LLaVA-NeXT): load_llava_tokenizer, `Net(cfg)` built for loading in ctx.dtype and
/// filled from the checkpoint (load_checkpoint_weights), the preprocessing at the tower's size
/// (load_preprocess), and `Model(cfg, net, pre)` as the family's half.
/// @throws IoError, FormatError, ConfigError.
template <class Model, class Net, class Config>
LoadedFamilyModel load_llava_style_folder(const std::string& dir, const Config& cfg, const LlavaConfig& llava,
                                          const RunContext& ctx) {
  auto tok = load_llava_tokenizer(dir, llava.image_token_index);
  Net net = construct_for_loading<Net>(cfg, ctx.dtype);
  load_checkpoint_weights(*net, dir, ctx);
  release_freed_heap();
  return {std::make_shared<Model>(cfg, net, load_preprocess(dir, llava.vision.image_size)), tok};
}

}  // namespace vispco
