// `vispco bench`: prefill speed of a random-weight preset model against this machine's matmul GFLOP/s
// (eval/prefill_bench.h; the same code as bench/bench_prefill.cpp). Prints a small table or one JSON object.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/context.h"
#include "eval/prefill_bench.h"
#include "model/presets.h"

namespace vispco::cli {

void register_bench(CLI::App& app) {
  struct Opts {
    eval::PrefillBenchConfig cfg;
    std::string dtype = "fp32", device = "cpu";
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "bench",
      "Prefill speed of a random-weight preset model (vision encode, decoder prefill) vs matmul GFLOP/s");
  std::string names;
  for (const auto& p : model_presets()) names += "\n  " + p.name + ": " + p.description;
  cmd->add_option("--preset", o->cfg.preset, "Model dimensions:" + names)->capture_default_str();
  // fp32 by default: on CPUs without AVX512-BF16/AMX, LibTorch's bf16 matmul is ~30x slower than fp32
  // (measured on a 2-core AVX2 machine: ~5 vs ~160 GFLOP/s), so a full-depth bf16 run takes many minutes.
  cmd->add_option("--dtype", o->dtype,
                  "fp32 | bf16 | fp16. fp32 by default: bf16 is slow on CPUs without AVX512-BF16/AMX "
                  "(use --layers 1 there)")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "cpu | cuda[:N]")->capture_default_str();
  cmd->add_option("--n-text", o->cfg.n_text,
                  "Text tokens in the prompt (BOS included), besides the N_v visual ones")
      ->capture_default_str();
  cmd->add_option("--repeats", o->cfg.repeats, "Timed repetitions after one warm-up (median reported)")
      ->capture_default_str();
  cmd->add_option("--threads", o->cfg.n_threads, "Intra-op threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--layers", o->cfg.n_layers,
                  "Truncate decoder and vision tower to N layers, widths kept (0 = full depth)")
      ->capture_default_str();
  cmd->add_option("--seed", o->cfg.seed, "Seed of the random weights and inputs")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print one JSON object instead of the table");
  cmd->callback([o] {
    o->cfg.dtype = parse_dtype(o->dtype);
    o->cfg.device = parse_device(o->device);
    o->cfg.validate();
    const auto progress = [](const std::string& s) { std::cerr << s << "\n"; };
    const auto r = eval::run_prefill_bench(o->cfg, progress);
    if (o->json)
      std::cout << r.to_json().dump(2) << "\n";
    else
      std::cout << r.table();
  });
}

}  // namespace vispco::cli
