// Dynamic int8 linear layers through LibTorch's quantized kernels. The packed weights live in a table keyed
// by the layer object (with a weak reference, so a destroyed layer's address is never mistaken for a live
// one); linear_forward consults it, so the decoder's code calls one function for float and int8 layers alike.
#include "model/quant.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/native/quantized/PackedParams.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "core/cpu_features.h"
#include "core/errors.h"
#include "model/dense_linear.h"
#include "model/llava/llava.h"

namespace vispco {
namespace {

struct Entry {
  std::weak_ptr<torch::nn::LinearImpl> owner;
  c10::intrusive_ptr<LinearPackedParamsBase> packed;
  int64_t out = 0, in = 0;
};

std::shared_mutex table_mutex;
std::unordered_map<const torch::nn::LinearImpl*, Entry> table;
std::atomic<bool> any_quantized{false};
std::atomic<bool> reduce_range{
    false};  // FBGEMM quantises activations to 7 bits (its u8·s8 pair sums saturate)

const Entry* find(const torch::nn::LinearImpl* layer) {
  std::shared_lock lock(table_mutex);
  auto it = table.find(layer);
  if (it == table.end() || it->second.owner.expired()) return nullptr;
  return &it->second;
}

std::string engine_name(at::QEngine e) {
  switch (e) {
    case at::kFBGEMM:
      return "fbgemm";
    case at::kONEDNN:
      return "onednn";
    case at::kQNNPACK:
      return "qnnpack";
    case at::kX86:
      return "x86";
    default:
      return "none";
  }
}

/// The first supported engine of FBGEMM, x86, oneDNN, QNNPACK, made global. @throws InvalidArgument.
at::QEngine choose_engine() {
  const auto& supported = at::globalContext().supportedQEngines();
  for (const auto e : {at::kFBGEMM, at::kX86, at::kONEDNN, at::kQNNPACK})
    if (std::find(supported.begin(), supported.end(), e) != supported.end()) {
      at::globalContext().setQEngine(e);
      return e;
    }
  throw InvalidArgument("--quant int8: this LibTorch has no quantized engine (FBGEMM, oneDNN or QNNPACK)");
}

void quantize_layer(const torch::nn::Linear& layer, QuantReport& rep) {
  static auto prepack =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("quantized::linear_prepack", "")
          .typed<c10::intrusive_ptr<LinearPackedParamsBase>(at::Tensor, c10::optional<at::Tensor>)>();
  auto w = layer->weight.detach().to(at::kCPU, at::kFloat).contiguous();  // [out, in]
  const int64_t out = w.size(0), in = w.size(1);
  // Symmetric per output channel: scale = max|w_row| / 127, zero point 0 (torch.ao's per_channel_symmetric).
  auto scales = (w.abs().amax(1) / 127.0).clamp_min(1e-12).to(at::kDouble);
  auto zero_points = at::zeros({out}, at::kLong);
  auto qw = at::quantize_per_channel(w, scales, zero_points, 0, at::kQInt8);
  c10::optional<at::Tensor> bias;
  if (layer->options.bias() && layer->bias.defined() && layer->bias.numel() == out)
    bias = layer->bias.detach().to(at::kCPU, at::kFloat).contiguous();
  rep.bytes_before += layer->weight.numel() * layer->weight.element_size() +
                      (bias ? layer->bias.numel() * layer->bias.element_size() : 0);
  rep.bytes_int8 += out * in + out * (4 + 4) + (bias ? out * 4 : 0);
  rep.params += out * in;
  ++rep.n_layers;
  Entry e;
  e.owner = layer.ptr();
  e.packed = prepack.call(qw, bias);
  e.out = out;
  e.in = in;
  {
    std::unique_lock lock(table_mutex);
    table[layer.get()] = std::move(e);
  }
  // The float weights are no longer needed: drop them (a memory-mapped view is simply unreferenced).
  at::NoGradGuard no_grad;
  layer->weight.set_data(at::empty({0}, layer->weight.options()));
  if (bias) layer->bias.set_data(at::empty({0}, layer->bias.options()));
}

}  // namespace

QuantMode parse_quant(const std::string& name) {
  if (name == "none") return QuantMode::kNone;
  if (name == "int8") return QuantMode::kInt8;
  throw InvalidArgument("unknown --quant '" + name + "' (valid: none, int8)");
}

namespace {

// Checks the model is on the CPU, chooses the engine and the activation width; the report of no layers yet.
QuantReport prepare_engine(const torch::nn::Module& whole) {
  for (const auto& p : whole.parameters())
    if (!p.device().is_cpu())
      throw InvalidArgument("--quant int8 runs on the CPU only (LibTorch's quantized kernels)");
  QuantReport rep;
  const at::QEngine engine = choose_engine();
  rep.engine = engine_name(engine);
  // 7-bit activations as torch.ao's dynamic Linear on x86 (FBGEMM), and for oneDNN on x86 CPUs without VNNI:
  // there its u8·s8 kernels sum pairs of products in saturating 16-bit lanes (vpmaddubsw), and 8-bit
  // activations overflow them (measured on an AVX2 CPU: max error 0.64 vs 0.05 with 7 bits on a 96-wide
  // layer).
  const bool x86 = detect_cpu_features().avx2;
  reduce_range = engine == at::kFBGEMM || engine == at::kX86 || (x86 && !detect_cpu_features().int8_dot());
  rep.activation_bits = reduce_range ? 7 : 8;
  return rep;
}

// The decoder's layers (quantize_int8 and quantize_int8_decoder).
QuantReport quantize_decoder_layers(LlamaForCausalLM& lm, const torch::nn::Module& whole) {
  QuantReport rep = prepare_engine(whole);
  for (const auto& m : *lm->model->layers) {
    auto& layer = *m->as<LlamaDecoderLayerImpl>();
    auto& a = *layer.self_attn;
    auto& f = *layer.mlp;
    for (const auto* l : {&a.q_proj, &a.k_proj, &a.v_proj, &a.o_proj, &f.gate_proj, &f.up_proj, &f.down_proj})
      quantize_layer(*l, rep);
  }
  if (lm->lm_head) quantize_layer(lm->lm_head, rep);
  return rep;
}

}  // namespace

QuantReport quantize_int8_decoder(LlamaForCausalLM& lm, const torch::nn::Module& whole) {
  QuantReport rep = quantize_decoder_layers(lm, whole);
  any_quantized = true;
  return rep;
}

QuantReport quantize_int8_tower(const torch::nn::Module& whole, const LlamaForCausalLM& lm) {
  QuantReport rep = prepare_engine(whole);
  std::unordered_set<const torch::nn::Module*> decoder;
  decoder.insert(lm.get());
  for (const auto& m : lm->modules(/*include_self=*/false)) decoder.insert(m.get());
  for (const auto& m : whole.modules(/*include_self=*/false)) {
    auto linear = std::dynamic_pointer_cast<torch::nn::LinearImpl>(m);
    if (!linear || decoder.count(m.get()) || find(linear.get())) continue;  // decoder's, or already int8
    quantize_layer(torch::nn::Linear(linear), rep);
  }
  any_quantized = true;
  return rep;
}

QuantReport quantize_int8(LlavaNetImpl& net, bool tower) {
  QuantReport rep = quantize_decoder_layers(net.language_model, net);
  any_quantized = true;
  if (!tower) return rep;
  rep.add_layers(quantize_int8_tower(net, net.language_model));
  return rep;
}

at::Tensor linear_forward(const torch::nn::Linear& layer, const at::Tensor& x) {
  if (!any_quantized.load(std::memory_order_relaxed)) return dense_linear(x, layer->weight, layer->bias);
  const Entry* e = find(layer.get());
  if (!e) return dense_linear(x, layer->weight, layer->bias);
  auto sizes = x.sizes().vec();
  auto x2 = x.reshape({-1, e->in}).to(at::kFloat).contiguous();
  auto y = e->packed->apply_dynamic(x2, reduce_range.load(std::memory_order_relaxed));
  sizes.back() = e->out;
  return y.view(sizes).to(x.scalar_type());
}

at::Tensor dequantized_weight(const torch::nn::Linear& layer) {
  const Entry* e = find(layer.get());
  if (!e) return {};
  auto [qw, bias] = e->packed->unpack();
  return qw.dequantize();
}

}  // namespace vispco
