// `vispco init-random`: writes a random-weight LLaVA folder in the Hugging Face layout (tests, benchmarks).
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "core/context.h"
#include "core/errors.h"
#include "core/json_file.h"
#include "model/llava/presets.h"
#include "model/llava_next/anyres.h"
#include "model/llava_next/presets.h"

namespace vispco::cli {

void register_init_random(CLI::App& app) {
  struct Opts {
    std::string preset, config, out, dtype = "bf16";
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("init-random", "Write a random-weight LLaVA model folder (HF layout)");
  std::string names;
  for (const auto& p : model_presets()) names += "\n  " + p.name + ": " + p.description;
  for (const auto& p : llava_next_presets()) names += "\n  " + p.name + " (LLaVA-NeXT): " + p.description;
  auto* preset = cmd->add_option("--preset", o->preset, "Named configuration:" + names);
  auto* config = cmd->add_option(
      "--config", o->config,
      "A transformers LLaVA or LLaVA-NeXT config.json (or a training recipe with a \"model\" section)");
  preset->excludes(config);
  cmd->add_option("--out", o->out, "Output folder")->required();
  cmd->add_option("--dtype", o->dtype, "Stored weight dtype: bf16 | fp16 | fp32")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random weights")->capture_default_str();
  cmd->callback([o] {
    // LLaVA-NeXT: a NeXT preset, or a config.json of model_type llava_next.
    std::optional<LlavaNextConfig> next;
    if (!o->preset.empty()) {
      for (const auto& p : llava_next_presets())
        if (p.name == o->preset) next = p.config;
    } else if (!o->config.empty()) {
      const auto j = read_json_file(o->config, "config file");
      if (j.value("model_type", "") == "llava_next") next = llava_next_config_from_json(j);
    }
    if (next) {
      next->validate();
      write_random_llava_next(o->out, *next, o->seed, parse_dtype(o->dtype));
      std::cout << "wrote random LLaVA-NeXT (" << next->llava.text.num_hidden_layers
                << " decoder layers, N_v ≤ " << anyres_largest_layout(*next).n_tokens << ") to " << o->out
                << "\n";
      return;
    }
    LlavaConfig cfg;
    if (!o->preset.empty()) {
      std::string valid;  // both tables' names, for an unknown one
      for (const auto& p : model_presets()) valid += (valid.empty() ? "" : ", ") + p.name;
      for (const auto& p : llava_next_presets()) valid += ", " + p.name;
      bool found = false;
      for (const auto& p : model_presets()) found = found || p.name == o->preset;
      if (!found) throw InvalidArgument("unknown preset '" + o->preset + "' (valid: " + valid + ")");
      cfg = find_preset(o->preset).config;
    } else if (!o->config.empty()) {
      const auto j = read_json_file(o->config, "config file");
      // A training recipe (configs/*.json) holds the model config under "model".
      cfg = llava_config_from_json(j.contains("model") && j["model"].is_object() ? j["model"] : j);
    } else {
      throw InvalidArgument("init-random needs --preset NAME or --config FILE");
    }
    cfg.validate();
    write_random_llava(o->out, cfg, o->seed, parse_dtype(o->dtype));
    std::cout << "wrote random LLaVA (" << cfg.text.num_hidden_layers
              << " decoder layers, N_v = " << cfg.n_visual_tokens() << ") to " << o->out << "\n";
  });
}

}  // namespace vispco::cli
