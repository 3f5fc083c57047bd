// Loading a family's weights into its network by parameter name, from a Hugging Face checkpoint (safetensors,
// memory-mapped) or a GGUF pair's tensors: every tensor found and shape-checked before any is assigned, then
// assigned zero-copy where the stored dtype is the compute dtype on the CPU.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/default_dtype.h"
#include "io/image.h"

namespace vispco {

/// Where load_weights finds tensors: a Hugging Face checkpoint folder or a GGUF pair's mapped tensors.
struct TensorSource {
  std::string where;  ///< for messages
  std::function<bool(const std::string&)> contains;
  std::function<at::Tensor(const std::string&)> get;
  size_t count = 0;
  /// Optional: drops the resident mapped pages of a tensor once it has been converted (none for GGUF).
  std::function<void(const std::string&)> release;
};

/// Checkpoint keys that may hold the network's parameter `name`, most likely first.
using CheckpointKeys = std::function<std::vector<std::string>(const std::string& name)>;

/// The two transformers layouts of a vision-language checkpoint: our names (the older layout:
/// language_model.model.…, vision_tower.…) first, then transformers ≥ 4.52's (model.language_model.…,
/// model.vision_tower.…, lm_head.…).
std::vector<std::string> hf_checkpoint_keys(const std::string& name);

/// Replaces every parameter of `net` by the checkpoint's tensor (pass 1 checks all of them first: a bad
/// checkpoint throws before anything changes), converted to ctx.dtype on ctx.device, or used in place
/// (memory-mapped) when it already is. The constructed parameters are freed before the converted copies are
/// made, so the peak is the weights once in the compute dtype.
/// @throws ConfigError naming a missing tensor (and the other key looked for), a shape mismatch or a
///         non-float tensor.
void load_weights(torch::nn::Module& net, const TensorSource& ckpt, const RunContext& ctx,
                  const CheckpointKeys& keys = hf_checkpoint_keys);

/// Builds the network `Net(cfg)` for loading: its parameters are allocated (and randomly initialised by
/// LibTorch's modules) in the compute dtype, not fp32, because load_weights replaces every one of them — an
/// fp32 network of a 1.1B model is 4.4 GB that the process would otherwise keep in its heap beside the
/// weights (issue 20's "no fp32 shadow copies"). The default dtype is restored before returning
/// (core/default_dtype.h).
template <class Net, class Config>
Net construct_for_loading(const Config& cfg, c10::ScalarType dtype) {
  DefaultDtypeGuard guard(dtype);
  return Net(cfg);
}

/// load_weights from the Hugging Face checkpoint folder `dir` (model.safetensors, or the shards of
/// model.safetensors.index.json), each converted tensor's mapped pages dropped once it is copied.
/// @param keys the family's checkpoint names of a parameter (default: the LLaVA layouts).
/// @throws IoError, FormatError (the folder's files), ConfigError (as load_weights).
void load_checkpoint_weights(torch::nn::Module& net, const std::string& dir, const RunContext& ctx,
                             const CheckpointKeys& keys = hf_checkpoint_keys);

/// Writes `net` as a Hugging Face folder: model.safetensors (every parameter by its module name, cast to
/// `dtype`, on the CPU) and config.json (`config` plus "torch_dtype"). The tokenizer is not written.
/// @throws IoError when the folder or a file cannot be written.
void save_hf_folder(const std::string& dir, torch::nn::Module& net, nlohmann::json config,
                    c10::ScalarType dtype);

/// Returns the heap pages of replaced construction-time parameters to the kernel: main() raises glibc's mmap
/// and trim thresholds (training's activations), so freed blocks would otherwise stay resident.
void release_freed_heap();

/// CLIP-style preprocessing settings of a Hugging Face folder: `image_size`, with image_mean / image_std
/// from preprocessor_config.json when present. @throws IoError, FormatError.
io::ImagePreprocessConfig load_preprocess(const std::string& dir, int64_t image_size);

}  // namespace vispco
