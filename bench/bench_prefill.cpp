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
#include <vector>

#include "bench_flags.h"
#include "core/context.h"
#include "core/errors.h"
#include "eval/prefill_bench.h"

namespace {

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
  using vispco::bench::BenchFlag;
  const std::vector<BenchFlag> flags = {
      {"--preset", [&](const std::string& v) { cfg.preset = v; }},
      {"--dtype", [&](const std::string& v) { cfg.dtype = vispco::parse_dtype(v); }},
      {"--layers", [&](const std::string& v) { cfg.n_layers = std::stoll(v); }},
      {"--n-text", [&](const std::string& v) { cfg.n_text = std::stoll(v); }},
      {"--threads", [&](const std::string& v) { cfg.n_threads = std::stoi(v); }}};
  if (!vispco::bench::parse_bench_flags(argc, argv, flags,
                                        "--preset, --dtype, --layers, --n-text, --threads"))
    return 2;
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
