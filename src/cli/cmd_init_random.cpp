// `vispco init-random`: writes a random-weight model folder in the Hugging Face layout of its family (tests,
// benchmarks), by preset name (model/random_presets.h) or from a config.json.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/context.h"
#include "core/errors.h"
#include "core/json_file.h"
#include "model/random_presets.h"

namespace vispco::cli {

void register_init_random(CLI::App& app) {
  struct Opts {
    std::string preset, config, out, dtype = "bf16";
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      app.add_subcommand("init-random", "Write a random-weight model folder (HF layout of its family)");
  std::string names;
  for (const auto& p : random_presets()) names += "\n  " + p.name + " (" + p.family + "): " + p.description;
  auto* preset = cmd->add_option("--preset", o->preset, "Named configuration:" + names);
  auto* config =
      cmd->add_option("--config", o->config,
                      "A transformers config.json (LLaVA, LLaVA-NeXT, Qwen2-VL, Qwen2.5-VL), or a training "
                      "recipe with a \"model\" section");
  preset->excludes(config);
  cmd->add_option("--out", o->out, "Output folder")->required();
  cmd->add_option("--dtype", o->dtype, "Stored weight dtype: bf16 | fp16 | fp32")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random weights")->capture_default_str();
  cmd->callback([o] {
    const auto dtype = parse_dtype(o->dtype);
    if (!o->preset.empty())
      std::cout << find_random_preset(o->preset).write(o->out, o->seed, dtype) << "\n";
    else if (!o->config.empty())
      std::cout << write_random_from_config(read_json_file(o->config, "config file"), o->out, o->seed, dtype)
                << "\n";
    else
      throw InvalidArgument("init-random needs --preset NAME or --config FILE");
  });
}

}  // namespace vispco::cli
