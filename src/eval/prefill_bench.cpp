// Prefill speed benchmark on a random-weight preset model or a model folder (see prefill_bench.h).
#include "eval/prefill_bench.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <sstream>

#include "core/errors.h"
#include "cost/timer.h"
#include "io/tokenizer.h"
#include "model/decode_batch.h"
#include "model/family.h"
#include "model/generate.h"
#include "model/random_presets.h"
#include "model/saliency.h"

namespace vispco::eval {

void PrefillBenchConfig::validate() const {
  if (model_dir.empty())
    find_random_preset(preset);  // throws listing the valid names
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
    throw InvalidArgument("threads must be ≥ 0, 0 = the default count (got " + std::to_string(n_threads) +
                          ")");
  if (n_layers < 0)
    throw InvalidArgument("layers must be ≥ 0, 0 = full depth (got " + std::to_string(n_layers) + ")");
  if (decode_tokens == 1 || decode_tokens < 0)
    throw InvalidArgument("decode_tokens must be 0 (no decode timing) or ≥ 2 (got " +
                          std::to_string(decode_tokens) + ")");
  if (image_width < 0 || image_height < 0 || (image_width == 0) != (image_height == 0))
    throw InvalidArgument("image size " + std::to_string(image_width) + "x" + std::to_string(image_height) +
                          ": give both width and height ≥ 1 (or neither, for the model's nominal image)");
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
  return find_random_preset(cfg.preset).shape(cfg.n_layers);
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
std::vector<VlmRequest> requests(const std::vector<at::Tensor>& pixels,
                                 const std::vector<int64_t>& prompt_ids) {
  std::vector<VlmRequest> reqs;
  for (const auto& p : pixels) reqs.push_back(VlmRequest{p, prompt_ids});
  return reqs;
}

// Uniform random RGB bytes, height × width, deterministic by seed.
cv::Mat random_rgb(int64_t height, int64_t width, uint64_t seed) {
  cv::Mat img(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  cv::RNG rng(seed);
  rng.fill(img, cv::RNG::UNIFORM, 0, 256);
  return img;
}

// shape with one image's N_v and FLOPs; its grid too when the family draws the image as one panel holding
// exactly its N_v tokens (LLaVA-1.5, Qwen2-VL), so that grid-based plans (pool) see the image's grid.
ModelShape with_image(ModelShape shape, const FlopsSpec& f, const std::vector<TokenPanel>& panels) {
  shape.n_visual_tokens = f.n_visual_tokens;
  shape.flops = f;
  if (panels.size() == 1 &&
      panels[0].rows * panels[0].cols + (shape.has_cls_token ? 1 : 0) == f.n_visual_tokens) {
    shape.grid_rows = panels[0].rows;
    shape.grid_cols = panels[0].cols;
  }
  return shape;
}
}  // namespace

PrefillBenchSetup::PrefillBenchSetup(const PrefillBenchConfig& cfg) : bench_(cfg) {
  const ModelShape shape = bench_model_shape(bench_);  // validates
  RunContext ctx;
  ctx.device = bench_.device;
  ctx.dtype = bench_.dtype;
  ctx.n_threads = bench_.n_threads;
  ctx.seed = bench_.seed;
  apply_threads(ctx);
  if (bench_.model_dir.empty()) {
    // Empty tokenizer (its methods throw): the prompt is built from ids directly.
    model_ = std::make_unique<VisionLanguageModel>(
        find_random_preset(bench_.preset).build(bench_.n_layers, bench_.seed, ctx));
  } else {
    model_ = std::make_unique<VisionLanguageModel>(VisionLanguageModel::load(bench_.model_dir, ctx));
  }
  image_w_ = bench_.image_width > 0 ? bench_.image_width : shape.image_size;
  image_h_ = bench_.image_height > 0 ? bench_.image_height : shape.image_size;
  image_flops_ = model_->family().image_flops(image_h_, image_w_);
  image_shape_ = with_image(shape, image_flops_, model_->token_panels(image_h_, image_w_));
  layout_ = image_shape_.default_layout();
  const int64_t n = bench_.n_text + n_visual();
  if (n > shape.max_positions)
    throw InvalidArgument("n_text " + std::to_string(bench_.n_text) + " + N_v " + std::to_string(n_visual()) +
                          " exceeds the model's " + std::to_string(shape.max_positions) + " positions");
  flops_ = prefill_flops(image_flops_, unpruned_tokens_per_layer(image_flops_, bench_.n_text));
  for (int64_t b = 0; b < bench_.batch; ++b)
    pixels_.push_back(model_->preprocess(random_rgb(image_h_, image_w_, bench_.seed + 1 + b)));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(bench_.seed + 1);
  const int64_t d = shape.hidden_size;
  prompt_ids_ = synthetic_prompt_ids(shape, bench_.n_text);
  const auto opts = at::TensorOptions().dtype(bench_.dtype).device(bench_.device);
  mm_a_ = at::randn({bench_.batch * n, d}, gen).to(opts);
  mm_b_ = (at::randn({d, shape.flops.decoder.intermediate_size}, gen) * 0.02).to(opts);
}

int64_t PrefillBenchSetup::n_decoder_layers() const { return model_shape().n_layers; }
int64_t PrefillBenchSetup::n_vision_layers() const { return model_shape().n_vision_layers; }
int64_t PrefillBenchSetup::n_tokens() const { return bench_.n_text + n_visual(); }

at::Tensor PrefillBenchSetup::run_vision() { return run_vision_tokens(false).embeds; }

VisualTokens PrefillBenchSetup::run_vision_tokens(bool want_cls_attention) {
  auto v = model_->encode_image_list(pixels_, want_cls_attention);
  sync_device(model_->context().device);
  if (!v.layouts.empty()) layout_ = v.layouts.front();
  last_visual_ = v;
  return v;
}

double PrefillBenchSetup::run_decode(int64_t new_tokens) {
  if (new_tokens < 2)
    throw InvalidArgument("decode timing needs ≥ 2 new tokens (got " + std::to_string(new_tokens) + ")");
  if (!last_visual_.embeds.defined()) throw InvalidArgument("run_decode: call run_vision() first");
  c10::InferenceMode guard;
  const int64_t batch = static_cast<int64_t>(pixels_.size());
  std::vector<VlmRequest> reqs;
  std::vector<int64_t> ids;
  for (int64_t b = 0; b < batch; ++b) {
    reqs.push_back(with_visual_row(VlmRequest{pixels_[b], prompt_ids_}, last_visual_, b, image_shape_));
    ids.push_back(b);
  }
  GenerationConfig gc;
  gc.max_new_tokens = new_tokens;
  gc.stop_at_eos = false;
  DecodeBatch decode(*model_);
  decode.add(reqs, std::vector<GenerationConfig>(batch, gc), ids, nullptr, std::vector<bool>(batch, false));
  sync_device(model_->context().device);
  Stopwatch sw;
  int64_t steps = 0;
  while (true) {
    decode.sample();
    if (decode.empty()) break;
    decode.advance();
    ++steps;
  }
  sync_device(model_->context().device);
  return steps > 0 ? sw.ms() / static_cast<double>(steps) : 0.0;
}

at::Tensor PrefillBenchSetup::run_prefill(const at::Tensor& visual, PrefillHook* hook,
                                          PrefillRunStats* stats) {
  c10::InferenceMode guard;
  auto& lm = model_->language_model();
  auto state = build_prefill_state(*model_, requests(pixels_, prompt_ids_), visual, layout_);
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

std::pair<int64_t, int64_t> parse_image_size(const std::string& text) {
  const std::string times = "\u00d7";
  size_t at = text.find('x'), sep = 1;
  if (at == std::string::npos && (at = text.find(times)) != std::string::npos) sep = times.size();
  const auto number = [](const std::string& piece) -> int64_t {
    if (piece.empty() || piece.size() > 5 || piece.find_first_not_of("0123456789") != std::string::npos)
      return 0;
    return std::stoll(piece);
  };
  const int64_t w = at == std::string::npos ? 0 : number(text.substr(0, at));
  const int64_t h = at == std::string::npos ? 0 : number(text.substr(at + sep));
  if (w < 1 || h < 1 || w > 16384 || h > 16384)
    throw InvalidArgument("image size '" + text +
                          "' must be WIDTHxHEIGHT in pixels, each in [1, 16384] (e.g. 1344x756)");
  return {w, h};
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
  if (cfg.decode_tokens > 0) {
    say("decode, " + std::to_string(cfg.decode_tokens) + " tokens ...");
    r.decode_tokens = cfg.decode_tokens;
    setup.run_decode(cfg.decode_tokens);  // warm-up
    for (int i = 0; i < cfg.repeats; ++i) r.decode_ms_runs.push_back(setup.run_decode(cfg.decode_tokens));
    r.decode_ms_per_token = median(r.decode_ms_runs);
    r.decode_tokens_per_s =
        r.decode_ms_per_token > 0 ? static_cast<double>(cfg.batch) * 1000.0 / r.decode_ms_per_token : 0.0;
  }

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
  n_visual = setup.n_visual();
  n_text = cfg.n_text;
  image_width = setup.image_width();
  image_height = setup.image_height();
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
  j["image_width"] = image_width;
  j["image_height"] = image_height;
  j["batch"] = batch;
  j["repeats"] = repeats;
}

std::string PrefillRunInfo::run_headline(const std::string& label, const std::string& tokens_note) const {
  std::ostringstream o;
  o << label << ", " << dtype << " on " << device << ", " << n_threads << " threads, image " << image_width
    << "x" << image_height << ", N_v " << n_visual << " + N_t " << n_text << " = " << n_visual + n_text
    << " tokens" << tokens_note << ", " << n_decoder_layers << " decoder / " << n_vision_layers
    << " vision layers"
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
                      {"decode_tokens", decode_tokens},
                      {"decode_ms_per_token", decode_ms_per_token},
                      {"decode_tokens_per_s", decode_tokens_per_s},
                      {"decode_ms_runs", decode_ms_runs},
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
  if (decode_tokens > 0) {
    const double lo = *std::min_element(decode_ms_runs.begin(), decode_ms_runs.end());
    const double hi = *std::max_element(decode_ms_runs.begin(), decode_ms_runs.end());
    std::snprintf(line, sizeof line, "%-34s %11.1f (%8.1f - %8.1f) %10s %9s %10s  %.2f tokens/s\n",
                  ("decode, ms per step (" + std::to_string(decode_tokens) + " tokens)").c_str(),
                  decode_ms_per_token, lo, hi, "-", "-", "-", decode_tokens_per_s);
    o << line;
  }
  return o.str();
}

}  // namespace vispco::eval
