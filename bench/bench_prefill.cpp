// Google Benchmark front end of the prefill speed benchmark (eval/prefill_bench.h, shared with `vispco
// bench`): matmul probe, vision tower + projector, decoder prefill of a random-weight preset model, each with
// a GFLOP/s counter from the FLOPs model (cost/flops.h). Own flags after Google Benchmark's:
//   --preset=NAME (llava-tinyllama-1.1b)  --dtype=fp32|bf16|fp16 (fp32)  --layers=N (0 = full depth)
//   --n-text=N (40)  --threads=N (0 = all cores)
// bf16 on CPUs without AVX512-BF16/AMX is ~30x slower than fp32: use --layers=1 there.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>

#include "core/context.h"
#include "core/errors.h"
#include "eval/prefill_bench.h"

namespace {

// Parses "--name=value" flags into `cfg`; returns false (after printing why) on an unknown flag or bad value.
bool parse_flags(int argc, char** argv, vispco::eval::PrefillBenchConfig& cfg) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    const std::string key = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
    try {
      if (key == "--preset")
        cfg.preset = value;
      else if (key == "--dtype")
        cfg.dtype = vispco::parse_dtype(value);
      else if (key == "--layers")
        cfg.n_layers = std::stoll(value);
      else if (key == "--n-text")
        cfg.n_text = std::stoll(value);
      else if (key == "--threads")
        cfg.n_threads = std::stoi(value);
      else {
        std::fprintf(stderr,
                     "unknown flag '%s' (own flags: --preset, --dtype, --layers, --n-text, --threads)\n",
                     a.c_str());
        return false;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bad value in '%s': %s\n", a.c_str(), e.what());
      return false;
    }
  }
  return true;
}

// "flops" shows as a rate (e.g. "flops=160G/s"); "flop_per_iter" is the FLOPs model's count of one call.
void add_rate(benchmark::State& state, int64_t flops) {
  state.counters["flops"] =
      benchmark::Counter(static_cast<double>(flops), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flop_per_iter"] = static_cast<double>(flops);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  vispco::eval::PrefillBenchConfig cfg;
  cfg.repeats = 1;  // unused here: Google Benchmark picks the iteration count
  if (!parse_flags(argc, argv, cfg)) return 2;
  std::shared_ptr<vispco::eval::PrefillBenchSetup> setup;
  try {
    std::fprintf(stderr, "building random-weight %s (%s, layers %lld) ...\n", cfg.preset.c_str(),
                 vispco::dtype_name(cfg.dtype).c_str(), static_cast<long long>(cfg.n_layers));
    setup = std::make_shared<vispco::eval::PrefillBenchSetup>(cfg);
  } catch (const vispco::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  const auto& f = setup->flops();
  benchmark::AddCustomContext("preset", cfg.preset);
  benchmark::AddCustomContext("dtype", vispco::dtype_name(cfg.dtype));
  benchmark::AddCustomContext("decoder_layers", std::to_string(setup->n_decoder_layers()));
  benchmark::AddCustomContext("vision_layers", std::to_string(setup->n_vision_layers()));
  benchmark::AddCustomContext("tokens", std::to_string(setup->n_tokens()));
  benchmark::AddCustomContext("matmul", setup->matmul_shape());

  benchmark::RegisterBenchmark("matmul",
                               [setup](benchmark::State& state) {
                                 for (auto _ : state) benchmark::DoNotOptimize(setup->run_matmul());
                                 add_rate(state, setup->matmul_flops());
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("vision_encode",
                               [setup, flops = f.vision + f.projector](benchmark::State& state) {
                                 for (auto _ : state) benchmark::DoNotOptimize(setup->run_vision());
                                 add_rate(state, flops);
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  // One warm-up call of each (Google Benchmark 1.7 has no warm-up phase; a 1-iteration run would time it).
  setup->run_matmul();
  const auto visual = setup->run_vision();
  setup->run_prefill(visual);
  benchmark::RegisterBenchmark("decoder_prefill",
                               [setup, visual, flops = f.decoder_total + f.lm_head](benchmark::State& state) {
                                 for (auto _ : state) benchmark::DoNotOptimize(setup->run_prefill(visual));
                                 add_rate(state, flops);
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
