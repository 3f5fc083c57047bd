// The decode roofline of this machine (issue 20): one decoded token must read every decoder weight once, so
// tokens/s ≤ (bytes/s the memory system streams) ÷ (weight bytes). Three Google Benchmark rows, each with a
// bytes/s rate and the tok/s ceiling it implies for the preset's decoder weights in the chosen dtype:
//   stream_read     a plain sum over a buffer of that size, split across the threads (what memory delivers)
//   linear          LibTorch's at::linear on --rows rows (1: decode at batch 1), over random weights of the
//                   preset's decoder shapes (q, k, v, o, gate, up, down per layer, lm_head)
//   dense_linear    the same products through vispco's dense_linear (model/dense_linear.h: at::mv for one
//                   row — in bf16 on AVX-512 CPUs only —, (W xᵀ)ᵀ for a few bf16 rows), the path the
//                   decoder's decode step takes
//   mv              at::mv (one row only), LibTorch's matrix–vector kernel, dense_linear's one-row path
//                   before vispco's gemv
//   gemv/ISA        vispco's gemv (model/gemv/gemv.h, ≤ 4 rows) on each instruction-set path this CPU runs;
//                   dense_linear takes the best one for ≤ 4 rows without gradients
// With --rows N one pass decodes N sequences by one token each (tok_s_ceiling counts passes). The independent
// reference bench/reference/decode_weight_bandwidth.py measures the linear row in plain PyTorch.
// Own flags after Google Benchmark's: --preset=NAME (llava-tinyllama-1.1b)  --dtype=fp32|bf16 (bf16)
//   --threads=N (0 = all cores)  --rows=N (1: rows per product, the batch of a batched decode step)
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_flags.h"
#include "core/context.h"
#include "core/errors.h"
#include "decoder_shapes.h"
#include "model/dense_linear.h"
#include "model/gemv/gemv.h"
#include "model/llava/presets.h"

namespace {

struct Flags {
  std::string preset = "llava-tinyllama-1.1b";
  c10::ScalarType dtype = c10::kBFloat16;
  int threads = 0;
  int64_t rows = 1;  // sequences decoded together (the batch of a batched decode step)
};

/// [out, in] shapes of the decoder's linear layers and the LM head (the bytes one decode step reads).
std::vector<std::pair<int64_t, int64_t>> decoder_linear_shapes(const vispco::TextConfig& t) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int64_t l = 0; l < t.num_hidden_layers; ++l)
    for (auto s : vispco::bench::decoder_layer_linear_shapes(t)) shapes.push_back(s);
  shapes.emplace_back(t.vocab_size, t.hidden_size);
  return shapes;
}

// "bytes" shows as a rate (e.g. "bytes=19.3G/s"); "tok_s_ceiling" = 1 / (time of one pass over the weights).
void add_counters(benchmark::State& state, int64_t bytes) {
  state.counters["bytes"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tok_s_ceiling"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}

// Σ p[0, n) with four independent vector accumulators (so the loads, not the adds' latency, set the pace):
// 64-byte loads on AVX-512, 32-byte loads on AVX2, plain code elsewhere. Each is compiled for its ISA with a
// target attribute and called only where the CPU has it.
__attribute__((target("avx512f"))) float sum_avx512(const float* p, size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
  }
  alignas(64) float t[16];
  _mm512_store_ps(t, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  float s = 0;
  for (float v : t) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
}
__attribute__((target("avx2"))) float sum_avx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float v : t) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
}
float sum_plain(const float* p, size_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  for (; i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
}
using SumFn = float (*)(const float*, size_t);
SumFn widest_sum() {
  if (__builtin_cpu_supports("avx512f")) return sum_avx512;
  if (__builtin_cpu_supports("avx2")) return sum_avx2;
  return sum_plain;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Flags flags;
  const std::vector<vispco::bench::BenchFlag> own = {
      {"--preset", [&](const std::string& v) { flags.preset = v; }},
      {"--dtype", [&](const std::string& v) { flags.dtype = vispco::parse_dtype(v); }},
      {"--threads", [&](const std::string& v) { flags.threads = std::stoi(v); }},
      {"--rows", [&](const std::string& v) {
         flags.rows = std::stoll(v);
         if (flags.rows < 1) throw std::invalid_argument("rows must be ≥ 1");
       }}};
  if (!vispco::bench::parse_bench_flags(argc, argv, own, "--preset, --dtype, --threads, --rows ≥ 1"))
    return 2;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  try {
    shapes = decoder_linear_shapes(vispco::find_preset(flags.preset).config.text);
  } catch (const vispco::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  if (flags.threads > 0) at::set_num_threads(flags.threads);
  const int n_threads = at::get_num_threads();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  auto weights = std::make_shared<std::vector<at::Tensor>>();
  int64_t bytes = 0;
  for (auto [out, in] : shapes) {
    weights->push_back((at::randn({out, in}, gen) * 0.02).to(flags.dtype));
    bytes += weights->back().nbytes();
  }
  auto x_of = std::make_shared<std::vector<at::Tensor>>();
  for (auto [out, in] : shapes) x_of->push_back(at::randn({flags.rows, in}, gen).to(flags.dtype));
  // The streaming buffer: as many bytes as the weights, read as 64-bit integers (integer adds have one cycle
  // of latency, so four chains keep up with memory without vector code or reordered float sums).
  auto buffer = std::make_shared<std::vector<uint64_t>>(static_cast<size_t>(bytes) / sizeof(uint64_t), 1);

  benchmark::AddCustomContext("preset", flags.preset);
  benchmark::AddCustomContext("dtype", vispco::dtype_name(flags.dtype));
  benchmark::AddCustomContext("threads", std::to_string(n_threads));
  benchmark::AddCustomContext("rows", std::to_string(flags.rows));
  benchmark::AddCustomContext("decoder_weight_bytes", std::to_string(bytes));

  benchmark::RegisterBenchmark("stream_read",
                               [buffer, n_threads, bytes](benchmark::State& state) {
                                 const auto& b = *buffer;
                                 for (auto _ : state) {
                                   std::vector<uint64_t> sums(n_threads, 0);
                                   std::vector<std::thread> pool;
                                   for (int t = 0; t < n_threads; ++t)
                                     pool.emplace_back([&, t] {
                                       const size_t lo = b.size() * t / n_threads;
                                       const size_t hi = b.size() * (t + 1) / n_threads;
                                       uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                                       size_t i = lo;
                                       for (; i + 4 <= hi; i += 4) {
                                         s0 += b[i];
                                         s1 += b[i + 1];
                                         s2 += b[i + 2];
                                         s3 += b[i + 3];
                                       }
                                       for (; i < hi; ++i) s0 += b[i];
                                       sums[t] = s0 + s1 + s2 + s3;
                                     });
                                   for (auto& th : pool) th.join();
                                   benchmark::DoNotOptimize(sums.data());
                                 }
                                 add_counters(state, bytes);
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  // The wide reader: its own threads (not LibTorch's pool), each summing a contiguous slice of a float buffer
  // as large as the weights; "max" over repetitions is the ceiling to compare against.
  auto floats = std::make_shared<std::vector<float>>(static_cast<size_t>(bytes) / sizeof(float), 1.0f);
  const int n_cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> wide_threads = {n_threads};
  if (n_cpus != n_threads) wide_threads.push_back(n_cpus);
  for (int nt : wide_threads)
    benchmark::RegisterBenchmark(("stream_read_wide/threads:" + std::to_string(nt)).c_str(),
                                 [floats, nt, bytes](benchmark::State& state) {
                                   const SumFn sum = widest_sum();
                                   const auto& f = *floats;
                                   for (auto _ : state) {
                                     std::vector<float> sums(nt, 0);
                                     std::vector<std::thread> pool;
                                     for (int t = 0; t < nt; ++t)
                                       pool.emplace_back([&, t] {
                                         const size_t lo = f.size() * t / nt, hi = f.size() * (t + 1) / nt;
                                         sums[t] = sum(f.data() + lo, hi - lo);
                                       });
                                     for (auto& th : pool) th.join();
                                     benchmark::DoNotOptimize(sums.data());
                                   }
                                   add_counters(state, bytes);
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->ComputeStatistics(
            "max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
  // One pass of `product` over every weight (a decode step's linear layers), as one benchmark row.
  const auto register_products = [&](const char* name,
                                     at::Tensor (*product)(const at::Tensor&, const at::Tensor&)) {
    benchmark::RegisterBenchmark(name,
                                 [weights, x_of, bytes, product](benchmark::State& state) {
                                   c10::InferenceMode guard;
                                   for (auto _ : state)
                                     for (size_t i = 0; i < weights->size(); ++i)
                                       benchmark::DoNotOptimize(product((*x_of)[i], (*weights)[i]));
                                   add_counters(state, bytes);
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  };
  register_products("linear", [](const at::Tensor& x, const at::Tensor& w) { return at::linear(x, w); });
  register_products("dense_linear",
                    [](const at::Tensor& x, const at::Tensor& w) { return vispco::dense_linear(x, w); });
  if (flags.rows == 1)
    register_products("mv", [](const at::Tensor& x, const at::Tensor& w) { return at::mv(w, x.view({-1})); });
  if (flags.rows <= vispco::kGemvMaxRows) {
    using vispco::GemvIsa;
    static const std::pair<const char*, GemvIsa> kPaths[] = {{"gemv/scalar", GemvIsa::kScalar},
                                                             {"gemv/avx2", GemvIsa::kAvx2},
                                                             {"gemv/avx512", GemvIsa::kAvx512},
                                                             {"gemv/avx512_bf16", GemvIsa::kAvx512Bf16}};
    // A captureless lambda per path (register_products takes a function pointer).
    const std::array<at::Tensor (*)(const at::Tensor&, const at::Tensor&), 4> fns = {
        [](const at::Tensor& x, const at::Tensor& w) { return vispco::gemv(x, w, {}, GemvIsa::kScalar); },
        [](const at::Tensor& x, const at::Tensor& w) { return vispco::gemv(x, w, {}, GemvIsa::kAvx2); },
        [](const at::Tensor& x, const at::Tensor& w) { return vispco::gemv(x, w, {}, GemvIsa::kAvx512); },
        [](const at::Tensor& x, const at::Tensor& w) {
          return vispco::gemv(x, w, {}, GemvIsa::kAvx512Bf16);
        }};
    for (size_t k = 0; k < fns.size(); ++k)
      if (vispco::gemv_isa_supported(kPaths[k].second) && kPaths[k].second != GemvIsa::kScalar)
        register_products(kPaths[k].first, fns[k]);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
