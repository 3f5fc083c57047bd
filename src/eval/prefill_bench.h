// Prefill speed benchmark on a random-weight model of a preset (or a model folder with its weights): this
// machine's matmul GFLOP/s, then vision encode and decoder prefill times at N_v visual tokens, and the
// GFLOP/s they reach under the FLOPs model (cost/flops.h). Shared by `vispco bench`, bench/bench_prefill.cpp
// (Google Benchmark) and the pruning sweep (eval/prefill_sweep.h), which passes a PrefillHook to
// run_prefill(). Lives in eval/ (not cost/) because it builds a model: dependencies point downward (DESIGN.md
// §3).
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"
#include "cost/flops.h"
#include "model/shape.h"
#include "model/vlm.h"

namespace vispco::eval {

/// Settings of one benchmark run (a plain value).
struct PrefillBenchConfig {
  /// Model preset of any family (model/random_presets.h: LLaVA-1.5, LLaVA-NeXT, Qwen2-VL, Qwen2.5-VL), built
  /// in memory with random weights. Ignored when model_dir is set.
  std::string preset = "llava-tinyllama-1.1b";
  /// Model folder (Hugging Face layout of a registered family) loaded with its own weights instead of the
  /// preset; empty = use the preset. Only full depth (n_layers = 0).
  std::string model_dir;
  /// Size of the benchmark's random images, pixels (width × height); 0 × 0 = the family's nominal image
  /// (ModelShape::image_size square: 336² for LLaVA-1.5, the tile side for LLaVA-NeXT, 448² for Qwen2-VL).
  /// The family's own preprocessing sizes it (Qwen's smart_resize, NeXT's AnyRes), so N_v and the tower's
  /// FLOPs follow the image (FamilyModel::image_flops). Both 0 or both ≥ 1.
  int64_t image_width = 0, image_height = 0;
  /// Device of weights and activations (weights are drawn on the CPU, then moved).
  c10::Device device = c10::Device(c10::kCPU);
  /// Weight and activation dtype: kFloat or kBFloat16 (kHalf accepted too; slow on most CPUs).
  c10::ScalarType dtype = c10::kFloat;
  /// Text tokens of the prompt, BOS included, image placeholder excluded; ≥ 1. With N_v = 576 the default
  /// gives the 616-token prefill of DESIGN.md §1.
  int64_t n_text = 40;
  /// Images per prefill, ≥ 1: one batch of `batch` distinct random images, each with the same prompt (no
  /// padding). Times and KV-cache bytes are per batch; PrefillBenchResult's GFLOP/s and its table count the
  /// whole batch, the sweep's FLOPs columns stay per image (its speedups compare batch with batch). At batch
  /// 1 a pruned CPU prefill multiplies matrices of only N_t + K rows, where BLAS runs well under its
  /// large-matrix rate (docs/benchmarks.md); batching restores the rows.
  int64_t batch = 1;
  /// Timed repetitions after one warm-up run; the median is reported. ≥ 1.
  int repeats = 3;
  /// Intra-op threads; 0 = the CPUs this process may use (affinity, cgroup quota: core/cpu_quota.h).
  int n_threads = 0;
  /// 0 = the preset's full depth; N ≥ 1 truncates the decoder to min(N, L) layers and the vision tower to
  /// min(N, n_vision_layers_used()) layers, keeping every width (a quick run; FLOPs follow the truncation).
  int64_t n_layers = 0;
  /// Seed of the random weights and inputs.
  uint64_t seed = 0;
  /// Tokens to generate after the prefill for the decode timing (greedy, EOS ignored); 0 = no decode timing,
  /// else ≥ 2 (the first token comes from the prefill's logits, so n tokens take n − 1 decoder steps).
  int64_t decode_tokens = 0;
  /// @throws InvalidArgument naming the bad field and value (unknown preset lists the valid names).
  void validate() const;
  /// "preset NAME (random weights)" or "model DIR", for tables and progress lines.
  std::string model_label() const;
  /// The progress line before the model is built: "building random-weight PRESET in DTYPE ..." or "loading
  /// DIR in DTYPE ...".
  std::string build_line() const;
};

/// The shape of the model a benchmark runs: the preset's, truncated by n_layers (RandomPreset::shape), or
/// model_dir's config. For a family whose N_v depends on the image, its counts are the nominal image's
/// (PrefillBenchSetup::image_shape() has the benchmark image's). Cheap (builds no weights), so plans can be
/// checked before the model is built.
/// @throws InvalidArgument, IoError, FormatError, ConfigError.
ModelShape bench_model_shape(const PrefillBenchConfig& cfg);

/// Prompt ids for `n_text` text tokens around one image placeholder: BOS, up to four filler ids (as
/// "USER: "), shape.image_token_id, then the rest. Filler ids are deterministic, in [3, min(V, image
/// id)).
/// @throws InvalidArgument when n_text < 1.
std::vector<int64_t> synthetic_prompt_ids(const ModelShape& shape, int64_t n_text);

/// What one run_prefill() did (a pruning hook makes layers differ).
struct PrefillRunStats {
  std::vector<int64_t> tokens_per_layer;  ///< [L] tokens entering each decoder layer (DecoderStats)
  int64_t n_visual_kept = 0;              ///< visual tokens alive after the decoder (K, or N_v unpruned)
  int64_t kv_cache_bytes = 0;             ///< KvCache::bytes() right after the prefill (its peak so far)
};

/// A model (random weights, or a folder's) and its inputs, ready for timing.
class PrefillBenchSetup {
 public:
  /// Builds the (truncated) model of cfg.preset in cfg.dtype on cfg.device, or loads cfg.model_dir, and
  /// applies the thread count. Prompt ids come from synthetic_prompt_ids() (the tokenizer is not used).
  /// @throws InvalidArgument; with model_dir also IoError, FormatError, ConfigError.
  explicit PrefillBenchSetup(const PrefillBenchConfig& cfg);

  const PrefillBenchConfig& bench_config() const { return bench_; }
  const ModelShape& model_shape() const { return model_->shape(); }
  /// FLOPs of one prefill of this setup (unpruned, LM head at the last position).
  const PrefillFlops& flops() const { return flops_; }
  /// Decoder layers run and vision layers run (after truncation).
  int64_t n_decoder_layers() const;
  int64_t n_vision_layers() const;
  /// Tokens through the decoder: n_text + N_v of the benchmark image.
  int64_t n_tokens() const;
  /// The benchmark image's size, pixels (the config's, or the nominal image's).
  int64_t image_width() const { return image_w_; }
  int64_t image_height() const { return image_h_; }
  /// N_v of the benchmark image (FamilyModel::image_flops).
  int64_t n_visual() const { return image_flops_.n_visual_tokens; }
  /// The model shape with the benchmark image's N_v, FLOPs spec and (for a single-panel family) grid: what
  /// plans are checked and bound against.
  const ModelShape& image_shape() const { return image_shape_; }
  /// The image's layout as the tower reported it (N_v and its grid; the shape's default before the first
  /// run_vision()).
  const VisualLayout& layout() const { return layout_; }

  /// Vision tower + projector on the setup's preprocessed images (B = bench_config().batch; preprocessing
  /// is done once, in the constructor, and not timed). @return visual tokens [B, N_v, D].
  at::Tensor run_vision();
  /// The same, optionally with the [CLS] attention and keys a pre-LLM scorer needs (PrefillHook::begin).
  VisualTokens run_vision_tokens(bool want_cls_attention);
  /// Decoder prefill of the prompt with `visual` spliced in, plus the last position's logits (as generate()'s
  /// prefill, pruning included).
  /// @param visual [B, N_v, D] from run_vision() @param hook optional pruning plan, its begin() already
  /// called (with run_vision_tokens(true)'s signals when it wants them) @param stats if set, filled with the
  /// tokens per layer, the visual tokens kept (first image) and the KV-cache bytes of this run (whole batch).
  /// @return logits [B, V] fp32.
  at::Tensor run_prefill(const at::Tensor& visual, PrefillHook* hook = nullptr,
                         PrefillRunStats* stats = nullptr);

  /// Decode speed after an unpruned prefill of the setup's prompt and the visual tokens of the last
  /// run_vision() (DecodeBatch, as `generate` and the server decode): `new_tokens` ≥ 2 tokens per row,
  /// greedy, EOS ignored, the prefill not timed. @return ms per decoder step (each step one token for every
  /// row).
  /// @throws InvalidArgument when new_tokens < 2 or run_vision() has not run.
  double run_decode(int64_t new_tokens);

  /// The gradient pre-pass a `grad` plan needs (model/saliency.h) on the setup's prompt.
  /// @param visual [B, N_v, D] @return saliency [B, N_v] fp32.
  at::Tensor run_saliency(const at::Tensor& visual);

  /// FLOPs of one run_matmul(): 2·n·D·m, n = B·(N_t + N_v) rows.
  int64_t matmul_flops() const;
  /// Shape of the matmul probe, "[n, D] x [D, m]".
  std::string matmul_shape() const;
  /// One at::matmul of the decoder's widest product, [n, D] × [D, m] in the bench dtype.
  at::Tensor run_matmul();

 private:
  PrefillBenchConfig bench_;
  std::unique_ptr<VisionLanguageModel> model_;
  int64_t image_w_ = 0, image_h_ = 0;
  FlopsSpec image_flops_;
  ModelShape image_shape_;
  VisualLayout layout_;
  VisualTokens last_visual_;  // the last run_vision() output (run_decode's visual tokens)
  PrefillFlops flops_;
  std::vector<at::Tensor> pixels_;  // one preprocessed image per batch row (the family's pixel layout)
  std::vector<int64_t> prompt_ids_;
  at::Tensor mm_a_, mm_b_;  // [n, D], [D, m]
};

/// What a prefill measurement ran: the settings and model depth that PrefillBenchResult and the sweep's
/// PrefillSweepResult share (under the same JSON keys).
struct PrefillRunInfo {
  std::string dtype;             ///< "fp32" | "bf16" | "fp16"
  std::string device;            ///< "cpu", "cuda:0", ...
  int n_threads = 0;             ///< intra-op threads LibTorch used
  int64_t n_decoder_layers = 0;  ///< decoder layers run (truncated when n_layers_limit > 0)
  int64_t n_vision_layers = 0;   ///< vision layers run
  int64_t n_layers_limit = 0;    ///< PrefillBenchConfig::n_layers (0 = full depth)
  int64_t n_visual = 0;          ///< N_v
  int64_t n_text = 0;            ///< N_t (BOS included)
  int64_t image_width = 0;       ///< the benchmark image, pixels
  int64_t image_height = 0;
  int64_t batch = 1;  ///< images per prefill (times are per batch, FLOPs per image)
  int repeats = 0;
  /// Records the run of `cfg` on `setup` (n_threads: LibTorch's count now).
  void record_run(const PrefillBenchConfig& cfg, const PrefillBenchSetup& setup);
  /// Adds these fields to the JSON object `j`.
  void add_run_json(nlohmann::json& j) const;
  /// "LABEL, DTYPE on DEVICE, T threads, image WxH, N_v A + N_t B = C tokens<tokens_note>, L decoder / V
  /// vision layers (full depth | truncated by --layers N)".
  std::string run_headline(const std::string& label, const std::string& tokens_note) const;
};

/// Figures of one benchmark run. Times are wall clock, median of `repeats` after a warm-up.
struct PrefillBenchResult : PrefillRunInfo {
  std::string preset;     ///< the preset name; empty when model_dir is set
  std::string model_dir;  ///< the model folder loaded (empty: random-weight preset)
  std::string matmul_shape;
  double matmul_ms = 0;                ///< median time of one matmul probe
  double matmul_gflops = 0;            ///< its GFLOP/s (1 GFLOP = 1e9 FLOPs)
  double vision_ms = 0;                ///< vision tower + projector
  double prefill_ms = 0;               ///< decoder prefill + last logits
  int64_t decode_tokens = 0;           ///< tokens per row of the decode timing (0: not measured)
  double decode_ms_per_token = 0;      ///< median ms per decoder step (one token for every row of the batch)
  double decode_tokens_per_s = 0;      ///< batch × 1000 / decode_ms_per_token
  std::vector<double> decode_ms_runs;  ///< ms per step of every timed repetition
  std::vector<double> vision_ms_runs, prefill_ms_runs, matmul_ms_runs;  ///< every timed repetition
  PrefillFlops flops;                                                   ///< FLOPs model of this run
  double vision_gflops = 0;      ///< batch × (flops.vision + flops.projector) / vision time
  double prefill_gflops = 0;     ///< batch × (flops.decoder_total + flops.lm_head) / prefill time
  double vision_vs_matmul = 0;   ///< vision_gflops / matmul_gflops
  double prefill_vs_matmul = 0;  ///< prefill_gflops / matmul_gflops
  nlohmann::json to_json() const;
  /// A small fixed-width table (one line per measured part) for the terminal.
  std::string table() const;
};

/// Parses an image size "WIDTHxHEIGHT" (e.g. "1344x756"; 'x' or '×' between two integers ≥ 1, each ≤ 16384).
/// @return {width, height}. @throws InvalidArgument naming the text.
std::pair<int64_t, int64_t> parse_image_size(const std::string& text);

/// Median of `xs` (mean of the two middle values for an even count). @throws InvalidArgument when empty.
double median(std::vector<double> xs);

/// One warm-up call of `f`, then `repeats` timed calls. @return the wall-clock times in ms.
std::vector<double> time_runs(int repeats, const std::function<void()>& f);

/// Builds the setup and measures matmul, vision and prefill (one warm-up each, then cfg.repeats timed runs).
/// @param progress if set, called with a short line before each phase (model build can take a minute).
PrefillBenchResult run_prefill_bench(const PrefillBenchConfig& cfg,
                                     const std::function<void(const std::string&)>& progress = {});

}  // namespace vispco::eval
