// Prefill speed benchmark on a random-weight preset model or a model folder (see prefill_bench.h).
#include "eval/prefill_bench.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.h"
#include "cost/timer.h"
#include "io/tokenizer.h"
#include "model/family.h"
#include "model/generate.h"
#include "model/llava/presets.h"
#include "model/saliency.h"

namespace vispco::eval {

void PrefillBenchConfig::validate() const {
  if (model_dir.empty())
    find_preset(preset);  // throws listing the valid names
  else if (n_layers != 0)
    throw InvalidArgument("layers " + std::to_string(n_layers) +
                          " truncates a random-weight preset; a model folder (--model) runs at full depth "
                          "(use --layers 0)");
  if (dtype != c10::kFloat && dtype != c10::kBFloat16 && dtype != c10::kHalf)
    throw InvalidArgument("bench dtype must be fp32, bf16 or fp16 (got " + std::string(c10::toString(dtype)) +
                          ")");
  if (n_text < 1)
    throw InvalidArgument("n_text must be ≥ 1 (BOS counts; got " + std::to_string(n_text) + ")");
  if (repeats < 1) throw InvalidArgument("repeats must be ≥ 1 (got " + std::to_string(repeats) + ")");
  if (batch < 1) throw InvalidArgument("batch must be ≥ 1 image (got " + std::to_string(batch) + ")");
  if (n_threads < 0)
    throw InvalidArgument("threads must be ≥ 0, 0 = all cores (got " + std::to_string(n_threads) + ")");
  if (n_layers < 0)
    throw InvalidArgument("layers must be ≥ 0, 0 = full depth (got " + std::to_string(n_layers) + ")");
}

std::string PrefillBenchConfig::model_label() const {
  return model_dir.empty() ? "preset " + preset + " (random weights)" : "model " + model_dir;
}

std::string PrefillBenchConfig::build_line() const {
  return (model_dir.empty() ? "building random-weight " + preset : "loading " + model_dir) + " in " +
         dtype_name(dtype) + " ...";
}

ModelShape bench_model_shape(const PrefillBenchConfig& cfg) {
  cfg.validate();
  if (!cfg.model_dir.empty()) return load_model_shape(cfg.model_dir);
  return preset_shape(cfg.preset, cfg.n_layers);
}

std::vector<int64_t> synthetic_prompt_ids(const ModelShape& shape, int64_t n_text) {
  if (n_text < 1)
    throw InvalidArgument("n_text must be ≥ 1 (BOS counts; got " + std::to_string(n_text) + ")");
  const int64_t hi = std::min(shape.vocab_size, shape.image_token_id);
  if (hi <= 3)
    throw InvalidArgument("vocab_size / image_token_index leave no text ids above the specials (min = " +
                          std::to_string(hi) + ")");
  std::vector<int64_t> ids{shape.bos_token_id};
  const auto filler = [&](int64_t i) { return 3 + (i * 7919) % (hi - 3); };
  const int64_t n_before = std::min<int64_t>(4, n_text - 1);  // "USER: " is four pieces in Llama's vocabulary
  for (int64_t i = 1; i <= n_before; ++i) ids.push_back(filler(i));
  ids.push_back(shape.image_token_id);
  for (int64_t i = n_before + 1; i < n_text; ++i) ids.push_back(filler(i));
  return ids;
}

namespace {
// One request per image of the batch, all with the same prompt.
std::vector<VlmRequest> requests(const at::Tensor& pixels, const std::vector<int64_t>& prompt_ids) {
  std::vector<VlmRequest> reqs;
  for (int64_t b = 0; b < pixels.size(0); ++b) reqs.push_back(VlmRequest{pixels[b], prompt_ids});
  return reqs;
}
}  // namespace

PrefillBenchSetup::PrefillBenchSetup(const PrefillBenchConfig& cfg) : bench_(cfg) {
  const ModelShape shape = bench_model_shape(bench_);  // validates
  const int64_t n = bench_.n_text + shape.n_visual_tokens;
  if (n > shape.max_positions)
    throw InvalidArgument("n_text " + std::to_string(bench_.n_text) + " + N_v " +
                          std::to_string(shape.n_visual_tokens) + " exceeds the preset's " +
                          std::to_string(shape.max_positions) + " positions");
  RunContext ctx;
  ctx.device = bench_.device;
  ctx.dtype = bench_.dtype;
  ctx.n_threads = bench_.n_threads;
  ctx.seed = bench_.seed;
  apply_threads(ctx);
  if (bench_.model_dir.empty()) {
    // Empty tokenizer (its methods throw): the prompt is built from ids directly.
    model_ = std::make_unique<VisionLanguageModel>(
        random_preset_model(bench_.preset, bench_.n_layers, bench_.seed, ctx));
  } else {
    model_ = std::make_unique<VisionLanguageModel>(VisionLanguageModel::load(bench_.model_dir, ctx));
  }
  flops_ = prefill_flops(shape.flops, unpruned_tokens_per_layer(shape.flops, bench_.n_text));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(bench_.seed + 1);
  const int64_t s = shape.image_size, d = shape.hidden_size;
  pixels_ = at::randn({bench_.batch, shape.num_channels, s, s}, gen);
  prompt_ids_ = synthetic_prompt_ids(shape, bench_.n_text);
  const auto opts = at::TensorOptions().dtype(bench_.dtype).device(bench_.device);
  mm_a_ = at::randn({bench_.batch * n, d}, gen).to(opts);
  mm_b_ = (at::randn({d, shape.flops.decoder.intermediate_size}, gen) * 0.02).to(opts);
}

int64_t PrefillBenchSetup::n_decoder_layers() const { return model_shape().n_layers; }
int64_t PrefillBenchSetup::n_vision_layers() const { return model_shape().n_vision_layers; }
int64_t PrefillBenchSetup::n_tokens() const { return bench_.n_text + model_shape().n_visual_tokens; }

at::Tensor PrefillBenchSetup::run_vision() {
  auto v = model_->encode_images(pixels_).embeds;
  sync_device(model_->context().device);
  return v;
}

VisualTokens PrefillBenchSetup::run_vision_tokens(bool want_cls_attention) {
  auto v = model_->encode_images(pixels_, want_cls_attention);
  sync_device(model_->context().device);
  return v;
}

at::Tensor PrefillBenchSetup::run_prefill(const at::Tensor& visual, PrefillHook* hook,
                                          PrefillRunStats* stats) {
  c10::InferenceMode guard;
  auto& lm = model_->language_model();
  auto state = build_prefill_state(*model_, requests(pixels_, prompt_ids_), visual);
  KvCache cache(n_decoder_layers());
  DecoderStats dstats;
  auto h = lm->forward(state, cache, hook, stats != nullptr ? &dstats : nullptr);
  auto logits = lm->logits(h.narrow(1, h.size(1) - 1, 1)).squeeze(1);
  sync_device(model_->context().device);
  if (stats != nullptr) {
    stats->tokens_per_layer = std::move(dstats.tokens_per_layer);
    stats->n_visual_kept = state.visual[0].sum().item<int64_t>();
    stats->kv_cache_bytes = cache.bytes();
  }
  return logits;
}

at::Tensor PrefillBenchSetup::run_saliency(const at::Tensor& visual) {
  auto s = visual_token_saliency(*model_, requests(pixels_, prompt_ids_), visual).saliency;
  sync_device(model_->context().device);
  return s;
}

int64_t PrefillBenchSetup::matmul_flops() const { return 2 * mm_a_.size(0) * mm_a_.size(1) * mm_b_.size(1); }

std::string PrefillBenchSetup::matmul_shape() const {
  std::ostringstream o;
  o << "[" << mm_a_.size(0) << ", " << mm_a_.size(1) << "] x [" << mm_b_.size(0) << ", " << mm_b_.size(1)
    << "]";
  return o.str();
}

at::Tensor PrefillBenchSetup::run_matmul() {
  c10::InferenceMode guard;
  auto c = at::matmul(mm_a_, mm_b_);
  sync_device(model_->context().device);
  return c;
}

double median(std::vector<double> xs) {
  if (xs.empty()) throw InvalidArgument("median of an empty list");
  std::sort(xs.begin(), xs.end());
  const size_t h = xs.size() / 2;
  return xs.size() % 2 ? xs[h] : 0.5 * (xs[h - 1] + xs[h]);
}

std::vector<double> time_runs(int repeats, const std::function<void()>& f) {
  f();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    Stopwatch sw;
    f();
    ms.push_back(sw.ms());
  }
  return ms;
}

namespace {

double gflops_per_s(int64_t flops, double ms) {
  return ms > 0 ? static_cast<double>(flops) / (ms * 1e6) : 0.0;
}

}  // namespace

PrefillBenchResult run_prefill_bench(const PrefillBenchConfig& cfg,
                                     const std::function<void(const std::string&)>& progress) {
  const auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  say(cfg.build_line());
  PrefillBenchSetup setup(cfg);
  PrefillBenchResult r;
  r.record_run(cfg, setup);
  if (cfg.model_dir.empty()) r.preset = cfg.preset;
  r.model_dir = cfg.model_dir;
  r.matmul_shape = setup.matmul_shape();
  r.flops = setup.flops();

  say("matmul " + r.matmul_shape + " ...");
  r.matmul_ms_runs = time_runs(cfg.repeats, [&] { setup.run_matmul(); });
  say("vision encode ...");
  at::Tensor visual;
  r.vision_ms_runs = time_runs(cfg.repeats, [&] { visual = setup.run_vision(); });
  say("decoder prefill ...");
  r.prefill_ms_runs = time_runs(cfg.repeats, [&] { setup.run_prefill(visual); });

  r.matmul_ms = median(r.matmul_ms_runs);
  r.vision_ms = median(r.vision_ms_runs);
  r.prefill_ms = median(r.prefill_ms_runs);
  r.matmul_gflops = gflops_per_s(setup.matmul_flops(), r.matmul_ms);
  r.vision_gflops = gflops_per_s(cfg.batch * (r.flops.vision + r.flops.projector), r.vision_ms);
  r.prefill_gflops = gflops_per_s(cfg.batch * (r.flops.decoder_total + r.flops.lm_head), r.prefill_ms);
  r.vision_vs_matmul = r.matmul_gflops > 0 ? r.vision_gflops / r.matmul_gflops : 0.0;
  r.prefill_vs_matmul = r.matmul_gflops > 0 ? r.prefill_gflops / r.matmul_gflops : 0.0;
  return r;
}

void PrefillRunInfo::record_run(const PrefillBenchConfig& cfg, const PrefillBenchSetup& setup) {
  dtype = dtype_name(cfg.dtype);
  device = cfg.device.str();
  n_threads = at::get_num_threads();
  n_decoder_layers = setup.n_decoder_layers();
  n_vision_layers = setup.n_vision_layers();
  n_layers_limit = cfg.n_layers;
  n_visual = setup.model_shape().n_visual_tokens;
  n_text = cfg.n_text;
  batch = cfg.batch;
  repeats = cfg.repeats;
}

void PrefillRunInfo::add_run_json(nlohmann::json& j) const {
  j["dtype"] = dtype;
  j["device"] = device;
  j["n_threads"] = n_threads;
  j["n_decoder_layers"] = n_decoder_layers;
  j["n_vision_layers"] = n_vision_layers;
  j["n_layers_limit"] = n_layers_limit;
  j["n_visual"] = n_visual;
  j["n_text"] = n_text;
  j["batch"] = batch;
  j["repeats"] = repeats;
}

std::string PrefillRunInfo::run_headline(const std::string& label, const std::string& tokens_note) const {
  std::ostringstream o;
  o << label << ", " << dtype << " on " << device << ", " << n_threads << " threads, N_v " << n_visual
    << " + N_t " << n_text << " = " << n_visual + n_text << " tokens" << tokens_note << ", "
    << n_decoder_layers << " decoder / " << n_vision_layers << " vision layers"
    << (n_layers_limit > 0 ? " (truncated by --layers " + std::to_string(n_layers_limit) + ")"
                           : " (full depth)");
  return o.str();
}

nlohmann::json PrefillBenchResult::to_json() const {
  nlohmann::json j = {{"preset", preset},
                      {"model_dir", model_dir},
                      {"matmul_shape", matmul_shape},
                      {"matmul_ms", matmul_ms},
                      {"matmul_gflops", matmul_gflops},
                      {"vision_ms", vision_ms},
                      {"prefill_ms", prefill_ms},
                      {"matmul_ms_runs", matmul_ms_runs},
                      {"vision_ms_runs", vision_ms_runs},
                      {"prefill_ms_runs", prefill_ms_runs},
                      {"vision_gflops", vision_gflops},
                      {"prefill_gflops", prefill_gflops},
                      {"vision_vs_matmul", vision_vs_matmul},
                      {"prefill_vs_matmul", prefill_vs_matmul},
                      {"flops", flops.to_json()}};
  add_run_json(j);
  return j;
}

std::string PrefillBenchResult::table() const {
  std::ostringstream o;
  o << run_headline(model_dir.empty() ? preset : model_dir, "")
    << (batch > 1 ? ", batch of " + std::to_string(batch) + " images (GFLOP of the whole batch)" : "")
    << ", median of " << repeats << " after 1 warm-up\n";
  char line[200];
  std::snprintf(line, sizeof line, "%-34s %11s %21s %10s %9s %10s\n", "part", "time ms", "(min - max)",
                "GFLOP", "GFLOP/s", "/ matmul");
  o << line;
  const auto row = [&](const std::string& name, const std::vector<double>& runs, double ms, double gflop,
                       double rate, double ratio) {
    const double lo = runs.empty() ? 0.0 : *std::min_element(runs.begin(), runs.end());
    const double hi = runs.empty() ? 0.0 : *std::max_element(runs.begin(), runs.end());
    std::snprintf(line, sizeof line, "%-34s %11.1f (%8.1f - %8.1f) %10.1f %9.1f %10.2f\n", name.c_str(), ms,
                  lo, hi, gflop, rate, ratio);
    o << line;
  };
  const double mm_gflop = matmul_gflops * matmul_ms * 1e-3;
  row("matmul " + matmul_shape, matmul_ms_runs, matmul_ms, mm_gflop, matmul_gflops, 1.0);
  row("vision tower + projector", vision_ms_runs, vision_ms,
      static_cast<double>(batch * (flops.vision + flops.projector)) * 1e-9, vision_gflops, vision_vs_matmul);
  row("decoder prefill + last logits", prefill_ms_runs, prefill_ms,
      static_cast<double>(batch * (flops.decoder_total + flops.lm_head)) * 1e-9, prefill_gflops,
      prefill_vs_matmul);
  return o.str();
}

}  // namespace vispco::eval
