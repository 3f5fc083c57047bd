// --quant flags shared by generate, eval, serve and bench.
#include <cstdio>

#include "cli/commands.h"
#include "core/errors.h"
#include "model/quant.h"
#include "model/vlm.h"

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
  // The decoder every family shares and, with --quant-tower, every other linear layer of the network (the
  // vision tower's and the projector's, model/quant.h).
  QuantReport r = quantize_int8_decoder(model.language_model(), model.network());
  if (f.tower) r.add_layers(quantize_int8_tower(model.network(), model.language_model()));
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
