// int8 weights for the decoder's linear layers: dynamic quantisation as PyTorch's
// torch.ao.nn.quantized.dynamic.Linear does it — weights int8 per output channel (symmetric, scale
// max|w_row| / 127), activations quantised per tensor at run time, int8 GEMM with fp32 accumulation —
// through LibTorch's own kernels (quantized::linear_prepack and LinearPackedParamsBase::apply_dynamic on
// the FBGEMM, oneDNN or QNNPACK engine). No hand-written GEMM.
#pragma once
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <string>

namespace vispco {

struct LlavaNetImpl;
class LlamaForCausalLM;

/// Which weights are int8.
enum class QuantMode { kNone, kInt8 };
/// Parses "none" | "int8". @throws InvalidArgument listing the valid names.
QuantMode parse_quant(const std::string& name);

/// What quantize_int8 did.
struct QuantReport {
  std::string engine;  ///< LibTorch quantized engine used ("fbgemm", "onednn", "qnnpack")
  /// Bits of the dynamically quantised activations: 7 (reduce_range) with FBGEMM / x86, or on CPUs without
  /// VNNI (core/cpu_features.h int8_dot), where 8-bit u8·s8 pair sums saturate; else 8.
  int activation_bits = 8;
  int64_t n_layers = 0;      ///< linear layers quantised
  int64_t params = 0;        ///< their weight elements
  int64_t bytes_before = 0;  ///< their weight + bias bytes before, in the dtype they had
  int64_t bytes_int8 = 0;    ///< int8 weights + fp32 per-channel scales and zero points + fp32 biases
  /// Adds another call's layer counts and bytes (same engine).
  void add_layers(const QuantReport& o) {
    n_layers += o.n_layers;
    params += o.params;
    bytes_before += o.bytes_before;
    bytes_int8 += o.bytes_int8;
  }
};

/// Replaces every linear layer of the decoder (q/k/v/o, gate/up/down, and lm_head when it is not tied to the
/// embedding) by an int8 one, and, when `tower`, the vision tower's and the projector's too (as
/// quantize_int8_tower); the float
/// weights are released. The model then computes those layers in fp32 activations around int8 weights (its
/// other layers keep their dtype); CPU only. Picks the first supported engine of FBGEMM, oneDNN, QNNPACK and
/// makes it LibTorch's global quantized engine.
/// @throws InvalidArgument on a CUDA model or when LibTorch has no quantized engine.
QuantReport quantize_int8(LlavaNetImpl& net, bool tower);

/// As quantize_int8 without the tower, for the decoder every family shares (Qwen2-VL/Qwen2.5-VL, LLaVA-NeXT):
/// its q/k/v/o, gate/up/down and untied lm_head. @param whole the model's whole network (its parameters must
/// be on the CPU). @throws InvalidArgument on a CUDA model or when LibTorch has no quantized engine.
QuantReport quantize_int8_decoder(LlamaForCausalLM& lm, const torch::nn::Module& whole);

/// int8 weights for the vision tower and projector of any family: every torch::nn::Linear in `whole` that is
/// not one of `lm`'s modules — CLIP's q/k/v/out and fc1/fc2 plus the projector (LLaVA-1.5, LLaVA-NeXT), the
/// Qwen2-VL / Qwen2.5-VL ViT's qkv/proj and MLP plus the patch merger. Found by walking the module tree, so a
/// family needs no code of its own provided its tower computes every linear layer through linear_forward
/// (layers stored but never run, e.g. CLIP blocks past the feature layer, are quantised too). Call after or
/// instead of quantize_int8_decoder; the engine is chosen as there.
/// @throws InvalidArgument on a CUDA model or when LibTorch has no quantized engine.
QuantReport quantize_int8_tower(const torch::nn::Module& whole, const LlamaForCausalLM& lm);

/// y = linear(x) through the layer's int8 weights when quantize_int8 replaced it, else its float weights
/// (dense_linear: a one-row input takes the matrix–vector path).
/// @param x [..., in] any float dtype @return [..., out] in x's dtype.
at::Tensor linear_forward(const torch::nn::Linear& layer, const at::Tensor& x);

/// The int8 weight a quantised layer holds, dequantised ([out, in] fp32: q · scale per row), or an undefined
/// tensor for a float layer — for tests against a dequantise-then-matmul reference.
at::Tensor dequantized_weight(const torch::nn::Linear& layer);

}  // namespace vispco
