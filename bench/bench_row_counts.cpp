// The bf16 row-count cliff of LibTorch 1.13's oneDNN AMX matmul (issue 47; docs/benchmarks.md, "the bf16
// row-count cliff"): one decoder layer's seven products (q, k, v, o, gate, up, down) of a Qwen2-VL preset at
// each row count of --rows, timed two ways:
//   linear        at::linear as LibTorch runs it
//   dense_linear  vispco's dense_linear (model/dense_linear.h), which moves a row count that
//                 amx_slow_row_count (model/amx_row_blocks.h) flags to amx_fast_row_count's (on AMX CPUs)
// Counters: "flops" (a rate: the layer's products' FLOPs, 2·rows·in·out each, per second) and "padded_rows"
// (the row count dense_linear runs at: rows when nothing moves).
// Own flags after Google Benchmark's: --preset=NAME (qwen2.5-vl-3b)  --threads=N (0 = all cores)
//   --rows=R1,R2,… (174,175,153,154,464,465,1262,1064)
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "core/errors.h"
#include "decoder_shapes.h"
#include "model/amx_row_blocks.h"
#include "model/dense_linear.h"
#include "model/qwen2_vl/presets.h"

namespace {

struct Flags {
  std::string preset = "qwen2.5-vl-3b";
  int threads = 0;
  std::vector<int64_t> rows = {174, 175, 153, 154, 464, 465, 1262, 1064};
};

std::vector<int64_t> parse_rows(const std::string& v) {
  std::vector<int64_t> rows;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');) {
    rows.push_back(std::stoll(item));
    if (rows.back() < 1) throw std::invalid_argument("rows must be ≥ 1");
  }
  if (rows.empty()) throw std::invalid_argument("--rows needs at least one row count");
  return rows;
}

// The [out, in] bf16 weights of one decoder layer: q, k, v, o, gate, up, down.
std::vector<at::Tensor> layer_weights(const vispco::TextConfig& t) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  std::vector<at::Tensor> w;
  for (auto [out, in] : vispco::bench::decoder_layer_linear_shapes(t))
    w.push_back((at::randn({out, in}, gen) * 0.02).to(at::kBFloat16));
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Flags flags;
  const std::vector<vispco::bench::BenchFlag> own = {
      {"--preset", [&](const std::string& v) { flags.preset = v; }},
      {"--threads", [&](const std::string& v) { flags.threads = std::stoi(v); }},
      {"--rows", [&](const std::string& v) { flags.rows = parse_rows(v); }}};
  if (!vispco::bench::parse_bench_flags(argc, argv, own, "--preset (a Qwen2-VL preset), --threads, --rows"))
    return 2;
  std::shared_ptr<std::vector<at::Tensor>> weights;
  try {
    weights = std::make_shared<std::vector<at::Tensor>>(
        layer_weights(vispco::find_qwen2_vl_preset(flags.preset).config.text));
  } catch (const vispco::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  if (flags.threads > 0) at::set_num_threads(flags.threads);
  benchmark::AddCustomContext("preset", flags.preset);
  benchmark::AddCustomContext("threads", std::to_string(at::get_num_threads()));
  for (int64_t rows : flags.rows) {
    auto xs = std::make_shared<std::vector<at::Tensor>>();
    int64_t flops = 0;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    for (const auto& w : *weights) {
      xs->push_back(at::randn({rows, w.size(1)}, gen).to(at::kBFloat16));
      flops += 2 * rows * w.size(0) * w.size(1);
    }
    const int64_t padded = vispco::dense_linear_row_count(xs->front(), weights->front());
    for (bool ours : {false, true}) {
      const std::string name = std::string(ours ? "dense_linear/" : "linear/") + std::to_string(rows);
      benchmark::RegisterBenchmark(
          name.c_str(),
          [weights, xs, flops, ours, padded, rows](benchmark::State& state) {
            for (auto _ : state)
              for (size_t i = 0; i < weights->size(); ++i) {
                const auto& x = (*xs)[i];
                const auto& w = (*weights)[i];
                auto y = ours ? vispco::dense_linear(x, w) : at::linear(x, w);
                benchmark::DoNotOptimize(y.data_ptr());
              }
            state.counters["flops"] =
                benchmark::Counter(static_cast<double>(flops), benchmark::Counter::kIsIterationInvariantRate);
            state.counters["padded_rows"] = static_cast<double>(ours ? padded : rows);
          })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
