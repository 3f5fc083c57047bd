// Attention at long visual sequences (issues 48, 63): one decoder layer's attention core over T positions,
// computed as the decoder computes it — causal key skipping in query chunks (attention/causal_skip:
// model/attention_chunks.h) — against query chunks that compute every key and mask (attention/query_chunks,
// the decoder before issue 63) and the one-block form before issue 48 (the whole [B, H, T, S] score tensor).
// Counters: score_block_MB (the largest fp32 score block one call holds) and peak_rss_MB (the process's
// high-water mark, getrusage: run one benchmark per process with
// --benchmark_filter for a figure that is that benchmark's own).
// Own flags after Google Benchmark's (defaults: LLaVA-NeXT-7B's decoder at the largest AnyRes image):
//   --positions=N (2928 visual + 40 text = 2968)  --heads=N (32)  --kv-heads=N (32)  --head-dim=N (128)
//   --dtype=fp32|bf16 (bf16)  --threads=N (0 = all cores)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>
#include <sys/resource.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "core/context.h"
#include "model/attention_chunks.h"
#include "model/blocks.h"

namespace {

struct Shape {
  int64_t positions = 2968, heads = 32, kv_heads = 32, head_dim = 128;
  at::ScalarType dtype = at::kBFloat16;
};
Shape g_shape;

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

// One layer's attention over g_shape with a causal mask, at the given score budget; `skip`: keys after each
// query chunk are skipped (causal_past = 0) instead of masked.
void run(benchmark::State& state, int64_t budget_bytes, bool skip) {
  c10::InferenceMode guard;
  const auto& s = g_shape;
  const auto opts = at::TensorOptions().dtype(s.dtype);
  at::manual_seed(1);
  auto q = at::randn({1, s.heads, s.positions, s.head_dim}, opts);
  auto k = at::randn({1, s.kv_heads, s.positions, s.head_dim}, opts);
  auto v = at::randn({1, s.kv_heads, s.positions, s.head_dim}, opts);
  auto mask = vispco::causal_mask(at::ones({1, s.positions}, at::kBool), s.positions, 0);
  for (auto _ : state) {
    auto out = vispco::attention_in_chunks(q, k, v, mask, {}, nullptr, budget_bytes, skip ? 0 : -1);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  const int64_t rows = std::min(
      s.positions, skip ? vispco::causal_query_chunk(1, s.heads, s.positions, s.positions, budget_bytes)
                        : vispco::attention_query_chunk(1, s.heads, s.positions, budget_bytes));
  state.counters["score_block_MB"] = static_cast<double>(rows * s.heads * s.positions * 4) / (1 << 20);
  state.counters["peak_rss_MB"] = peak_rss_mb();
  // q·kᵀ and probs·v: 2 · 2·H·T·S·D_h multiply-adds counted as FLOPs (the mask's upper half included, as
  // the FLOPs model counts attention: cost/flops.h), also where the skipping computes about half of them.
  const double flops = 4.0 * s.heads * s.positions * s.positions * s.head_dim;
  state.counters["flops"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  int threads = 0;
  using vispco::bench::BenchFlag;
  const std::vector<BenchFlag> flags = {
      {"--positions", [](const std::string& v) { g_shape.positions = std::stoll(v); }},
      {"--heads", [](const std::string& v) { g_shape.heads = std::stoll(v); }},
      {"--kv-heads", [](const std::string& v) { g_shape.kv_heads = std::stoll(v); }},
      {"--head-dim", [](const std::string& v) { g_shape.head_dim = std::stoll(v); }},
      {"--dtype", [](const std::string& v) { g_shape.dtype = vispco::parse_dtype(v); }},
      {"--threads", [&](const std::string& v) { threads = std::stoi(v); }}};
  if (!vispco::bench::parse_bench_flags(argc, argv, flags,
                                        "--positions, --heads, --kv-heads, --head-dim, --dtype, --threads"))
    return 2;
  if (threads > 0) at::set_num_threads(threads);
  benchmark::AddCustomContext("positions", std::to_string(g_shape.positions));
  benchmark::AddCustomContext("heads",
                              std::to_string(g_shape.heads) + "/" + std::to_string(g_shape.kv_heads));
  benchmark::AddCustomContext("dtype", std::string(c10::toString(g_shape.dtype)));
  benchmark::RegisterBenchmark("attention/causal_skip", [](benchmark::State& st) {
    run(st, vispco::kAttentionScoreBudgetBytes, true);
  })->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("attention/query_chunks", [](benchmark::State& st) {
    run(st, vispco::kAttentionScoreBudgetBytes, false);
  })->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("attention/one_block", [](benchmark::State& st) {
    run(st, std::numeric_limits<int64_t>::max() / 2, false);
  })->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
