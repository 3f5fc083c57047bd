// --quant flags shared by generate, eval, serve and bench.
#include <cstdio>

#include "cli/commands.h"
#include "core/errors.h"
#include "model/llava/llava.h"
#include "model/quant.h"

namespace vispco::cli {

void add_quant_flags(CLI::App* cmd, QuantFlags* f) {
  cmd->add_option("--quant", f->quant,
                  "Weights: none | int8 (decoder linear layers int8 per output channel, dynamic activation "
                  "quantisation, LibTorch's quantized kernels; CPU)")
      ->capture_default_str();
  cmd->add_flag("--quant-tower", f->tower, "With --quant int8: the vision tower and projector too");
}

void apply_quant(VisionLanguageModel& model, const QuantFlags& f) {
  if (parse_quant(f.quant) == QuantMode::kNone) {
    if (f.tower) throw InvalidArgument("--quant-tower needs --quant int8");
    return;
  }
  // LLaVA-1.5: decoder and, with --quant-tower, its CLIP tower and projector; other families: the decoder
  // they all share (their towers do not route every linear layer through the int8 path yet).
  const bool llava = model.shape().architecture == "LlavaForConditionalGeneration";
  if (f.tower && !llava)
    throw InvalidArgument("--quant-tower: only LLaVA-1.5's tower is quantised so far; " +
                          model.shape().architecture + " takes --quant int8 for its decoder alone");
  const QuantReport r = llava ? quantize_int8(*model.net(), f.tower)
                              : quantize_int8_decoder(model.language_model(), model.network());
  std::fprintf(
      stderr, "quant: int8 (%s engine, %d-bit activations) — %lld linear layers, weights %.1f MB → %.1f MB\n",
      r.engine.c_str(), r.activation_bits, static_cast<long long>(r.n_layers), r.bytes_before / 1e6,
      r.bytes_int8 / 1e6);
}

std::string quant_model_key(const std::string& model_hash, const QuantFlags& f) {
  if (parse_quant(f.quant) == QuantMode::kNone) return model_hash;
  return model_hash + "+quant:int8" + (f.tower ? "-tower" : "");
}

}  // namespace vispco::cli
