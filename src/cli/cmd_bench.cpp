// `vispco bench`: prefill speed of a random-weight preset model (or a model folder) against this machine's
// matmul GFLOP/s (eval/prefill_bench.h; the same code as bench/bench_prefill.cpp), or with --sweep-keep and
// --sweep-plan a pruning sweep: prefill time, KV cache and FLOPs-model speedup per (plan, K)
// (eval/prefill_sweep.h). Prints a small table or one JSON object.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/context.h"
#include "core/cpu_features.h"
#include "core/errors.h"
#include "eval/prefill_bench.h"
#include "eval/prefill_sweep.h"
#include "model/random_presets.h"

namespace vispco::cli {

void register_bench(CLI::App& app) {
  struct Opts {
    eval::PrefillBenchConfig cfg;
    std::string dtype = "auto", device = "cpu", sweep_keep, image_size;
    std::vector<std::string> sweep_plans;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "bench",
      "Prefill speed of a random-weight preset model (vision encode, decoder prefill) vs matmul GFLOP/s; "
      "with --sweep-keep/--sweep-plan, prefill time, KV cache and speedup vs the FLOPs model per pruning "
      "plan");
  std::string names;
  for (const auto& p : random_presets()) names += "\n  " + p.name + " (" + p.family + "): " + p.description;
  auto* preset = cmd->add_option("--preset", o->cfg.preset, "Model dimensions (random weights):" + names)
                     ->capture_default_str();
  cmd->add_option(
         "--model", o->cfg.model_dir,
         "Model folder (Hugging Face layout of any supported family) loaded with its weights instead of a "
         "--preset (full depth only)")
      ->excludes(preset);
  cmd->add_option(
      "--image-size", o->image_size,
      "Benchmark image WIDTHxHEIGHT in pixels, e.g. 1344x756 (default: the model's nominal image). "
      "The family's preprocessing sizes it: Qwen2-VL's N_v and tower FLOPs follow the image, "
      "LLaVA-NeXT's tiles follow its aspect ratio, LLaVA-1.5 resizes every image to 336²");
  cmd->add_option(
      "--sweep-keep", o->sweep_keep,
      "Pruning sweep: kept visual tokens K to try, comma-separated counts (e.g. 576,288,192,128,64) "
      "or keep ratios of each image's N_v (e.g. 50%,25%,11%); needs --sweep-plan");
  cmd->add_option(
         "--sweep-plan", o->sweep_plans,
         "Pruning sweep: a plan template per scorer, repeatable or ';'-separated: one stage without keep "
         "(fastv:layer=2, visionzip:layer=0) or a plan with {K} where K goes")
      ->delimiter(';');
  // auto by default: on CPUs without AVX512-BF16/AMX, LibTorch's bf16 matmul is ~30x slower than fp32
  // (measured on a 2-core AVX2 machine: ~5 vs ~160 GFLOP/s); auto times both on this machine (cached,
  // model/dtype_calibration.h) and picks the faster.
  add_compute_flags(cmd, &o->dtype, &o->device, &o->cfg.n_threads,
                    "auto | fp32 | bf16 | fp16 (auto: bf16 on CUDA; on the CPU the faster of fp32 and bf16 "
                    "as timed once on "
                    "this machine and cached in ~/.cache/vispco)");
  cmd->add_option("--n-text", o->cfg.n_text,
                  "Text tokens in the prompt (BOS included), besides the N_v visual ones")
      ->capture_default_str();
  cmd->add_option(
         "--batch", o->cfg.batch,
         "Images per prefill (distinct random images, same prompt): times per batch, FLOPs per image")
      ->capture_default_str();
  cmd->add_option("--repeats", o->cfg.repeats, "Timed repetitions after one warm-up (median reported)")
      ->capture_default_str();
  cmd->add_option("--layers", o->cfg.n_layers,
                  "Truncate decoder and vision tower to N layers, widths kept (0 = full depth)")
      ->capture_default_str();
  cmd->add_option("--decode-tokens", o->cfg.decode_tokens,
                  "Also time decode: tokens generated after the prefill (greedy, EOS ignored; 0 = skip, else "
                  "≥ 2), reported in ms per decoder step and tokens/s")
      ->capture_default_str();
  cmd->add_option("--seed", o->cfg.seed, "Seed of the random weights and inputs")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print one JSON object instead of the table");
  cmd->callback([o] {
    o->cfg.device = parse_device(o->device);
    RunContext threads_ctx;
    threads_ctx.n_threads = o->cfg.n_threads;
    apply_threads(threads_ctx);  // a measured auto dtype (core/auto_dtype.h) times the thread count in force
    const DtypeChoice dtype_choice = choose_dtype(o->dtype, o->cfg.device);
    o->cfg.dtype = dtype_choice.dtype;
    if (!o->image_size.empty()) {
      const auto [w, h] = eval::parse_image_size(o->image_size);
      o->cfg.image_width = w;
      o->cfg.image_height = h;
    }
    o->cfg.validate();
    const auto progress = [](const std::string& s) { std::cerr << s << "\n"; };
    if (!o->sweep_keep.empty() || !o->sweep_plans.empty()) {
      if (o->sweep_keep.empty())
        throw InvalidArgument("--sweep-plan needs --sweep-keep (e.g. 576,288,192,128,64)");
      if (o->sweep_plans.empty())
        throw InvalidArgument("--sweep-keep needs --sweep-plan (e.g. fastv:layer=2)");
      const eval::PrefillSweepSpec spec = eval::parse_sweep_spec(o->sweep_keep, o->sweep_plans);
      const auto r = eval::run_prefill_sweep(o->cfg, spec, progress);
      auto j = r.to_json();
      j["dtype_choice"] = dtype_choice.describe();
      j["cpu_features"] = detect_cpu_features().summary();
      std::cout << (o->json ? j.dump(2) + "\n" : r.table());
      std::cerr << "dtype: " << dtype_choice.describe()
                << " | CPU features: " << detect_cpu_features().summary() << "\n";
      return;
    }
    const auto r = eval::run_prefill_bench(o->cfg, progress);
    if (o->json) {
      auto j = r.to_json();
      j["dtype_choice"] = dtype_choice.describe();
      j["cpu_features"] = detect_cpu_features().summary();
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << r.table();
    }
    std::cerr << "dtype: " << dtype_choice.describe()
              << " | CPU features: " << detect_cpu_features().summary() << "\n";
  });
}

}  // namespace vispco::cli
