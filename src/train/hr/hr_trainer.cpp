// The two HR training stages, checkpointing and export (see hr_trainer.h).
#include "train/hr/hr_trainer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/atomic_dir.h"
#include "core/default_dtype.h"
#include "core/errors.h"
#include "core/json_file.h"
#include "core/text_file.h"
#include "cost/timer.h"
#include "eval/synthvqa/hr_families.h"
#include "eval/synthvqa/hr_generator.h"
#include "io/added_tokens.h"
#include "model/answer_targets.h"
#include "model/kv_cache.h"
#include "model/llava/llava_prompt.h"
#include "model/llava_next/anyres.h"
#include "model/llava_next/llava_next.h"
#include "model/llava_next/pack.h"
#include "model/llava_next/presets.h"
#include "model/vlm.h"
#include "prune/bound_plan.h"
#include "prune/plan_hook.h"
#include "train/conversation_loss.h"
#include "train/grounding.h"
#include "train/heldout_probe.h"
#include "train/hr/hr_grounding.h"
#include "train/hr/hr_questions.h"
#include "train/hr/hr_views.h"
#include "train/losses/answer_grounding_loss.h"
#include "train/losses/patch_head_loss.h"
#include "train/losses/token_loss.h"

namespace vispco::train {

namespace fs = std::filesystem;
using eval::synthvqa::make_hr_sample;
using eval::synthvqa::SynthSample;

namespace {

constexpr uint64_t kStageSeedStride = 1000003;  // stage s draws images from data_seed + s·stride
constexpr int64_t kTowerProbeImages = 8;

// Column offsets of the six HR label heads in the patch-head logits.
constexpr int64_t kHeadSizes[6] = {HrPatchLabelSizes::kColour, HrPatchLabelSizes::kShape,
                                   HrPatchLabelSizes::kSize,   HrPatchLabelSizes::kCentre,
                                   HrPatchLabelSizes::kChar,   HrPatchLabelSizes::kInk};

// Stage-1 loss: Σ over the six heads of balanced_patch_loss, the character head (column 4) weighted.
// @param logits [V, n², kTotal] @param labels [V, n², 6] int64.
at::Tensor hr_patch_head_loss(const at::Tensor& logits, const at::Tensor& labels, double glyph_weight) {
  auto loss = at::zeros({}, logits.options());
  int64_t off = 0;
  for (int c = 0; c < 6; ++c) {
    auto lg = logits.narrow(-1, off, kHeadSizes[c]).reshape({-1, kHeadSizes[c]});
    loss = loss + (c == 4 ? glyph_weight : 1.0) *
                      balanced_patch_loss(lg, labels.select(-1, c).reshape({-1}).to(logits.device()));
    off += kHeadSizes[c];
  }
  return loss;
}

// The base model's LLaVA-1.5 weights in a LLaVA-NeXT network with the default pinpoints, image_newline drawn
// N(0, 1/D) as transformers initialises it, written to `dir` (fp32) with the tokenizer and configs.
void write_init_folder(const std::string& base_dir, const std::string& dir, uint64_t seed) {
  RunContext load_ctx;
  load_ctx.dtype = at::kFloat;
  auto base = VisionLanguageModel::load(base_dir, load_ctx);
  LlavaNextConfig cfg;
  cfg.llava = base.config();  // ConfigError for a model of another family
  cfg.validate();
  auto net = random_llava_next_net(cfg, seed, at::kFloat);
  {
    at::NoGradGuard no_grad;
    auto dst = net->named_parameters(true);
    for (const auto& kv : base.net()->named_parameters(true)) dst[kv.key()].copy_(kv.value());
    auto dst_buffers = net->named_buffers(true);
    for (const auto& kv : base.net()->named_buffers(true))
      if (dst_buffers.contains(kv.key())) dst_buffers[kv.key()].copy_(kv.value());
  }
  fs::create_directories(dir);
  save_llava_next(dir, cfg, net, at::kFloat);
  fs::copy_file(fs::path(base_dir) / "tokenizer.model", fs::path(dir) / "tokenizer.model",
                fs::copy_options::overwrite_existing);
  io::write_tokenizer_config(dir, {{cfg.llava.image_token_index, "<image>", true}});
  write_next_preprocessor_config(dir, cfg);
}

// One image's conversation: the sample's own question first, then other questions of its scene that no
// earlier question gives away (hr_conversation). The first turn's QaPair is the one of hr_all_questions()
// with the sample's question text (its objects, for grounding; none when no question matches).
std::vector<QaPair> conversation_of(const SynthSample& s, uint64_t seed, uint64_t index, int64_t turns) {
  QaPair first{s.family, s.question, s.answer, {}};
  for (const auto& q : hr_all_questions(s.scene))
    if (q.question == s.question && q.answer == s.answer) first.objects = q.objects;
  eval::synthvqa::Rng rng(eval::synthvqa::sample_seed(seed, index));
  return hr_conversation(first, s.scene, rng, static_cast<size_t>(turns));
}

// The head of the grounded layer that reads a text answer's glyphs: the LLaVA-1.5 recipe's glyph_head
// (configs/synthvqa-small.json), whose decoder this one starts from.
constexpr int64_t kGlyphHead = 3;

}  // namespace

struct HrTrainer::State {
  HrRecipe recipe;
  std::string out;
  RunContext ctx;
  LlavaNextConfig cfg;
  LlavaNextNet net{nullptr};
  std::unique_ptr<VisionLanguageModel> vlm;
  torch::nn::Linear heads{nullptr};
  int stage = 0;  // 0 tower, 1 decoder, 2 done
  int64_t step = 0;
  std::unique_ptr<torch::optim::AdamW> opt;

  fs::path ckpt() const { return fs::path(out) / "checkpoint"; }
  fs::path init() const { return fs::path(out) / "init"; }
  const StageSettings& settings() const { return stage == 0 ? recipe.tower : recipe.decoder; }
  int64_t side() const { return cfg.llava.vision.image_size; }
  uint64_t stage_seed(int s) const { return recipe.data_seed + static_cast<uint64_t>(s) * kStageSeedStride; }

  std::vector<at::Tensor> trainable() {
    std::vector<at::Tensor> ps;
    auto add = [&](torch::nn::Module& m) {
      for (auto& p : m.parameters()) ps.push_back(p);
    };
    if (stage == 0) {
      add(*net->vision_tower);
      add(*heads);
    } else {
      add(*net->multi_modal_projector);
      ps.push_back(net->image_newline);
      add(*net->language_model);
    }
    return ps;
  }

  void begin_stage() {
    for (auto& p : net->parameters()) p.set_requires_grad(false);
    for (auto& p : heads->parameters()) p.set_requires_grad(false);
    opt.reset();
    if (stage >= 2) return;
    if (settings().steps == 0) {
      ++stage;
      step = 0;
      begin_stage();
      return;
    }
    auto ps = trainable();
    for (auto& p : ps) p.set_requires_grad(true);
    opt = std::make_unique<torch::optim::AdamW>(
        ps, torch::optim::AdamWOptions(settings().lr).weight_decay(settings().weight_decay));
  }

  // The tower's views of a sample and their labels: pixels [1 + T, 3, S, S], labels [1 + T, n², 6].
  std::pair<at::Tensor, at::Tensor> views_of(const SynthSample& smp) {
    const auto px = vlm->preprocess(smp.rgb);  // [1 + T + 1, 3, S, S]: base, tiles, the size slice
    const auto views = hr_views(smp.scene, side());
    if (static_cast<int64_t>(views.size()) != px.size(0) - 1)
      throw InvalidArgument("HR training: a " + std::to_string(smp.scene.width) + "×" +
                            std::to_string(smp.scene.height) + " image makes " +
                            std::to_string(px.size(0) - 2) + " tiles, not " +
                            std::to_string(views.size() - 1) + " (pinpoints ≠ canvases?)");
    std::vector<at::Tensor> labels;
    for (const auto& v : views) labels.push_back(hr_patch_labels(smp.scene, v, cfg.grid(), side()));
    return {px.narrow(0, 0, px.size(0) - 1), at::stack(labels)};
  }

  at::Tensor head_logits(const at::Tensor& pixels) {  // [V, n², kTotal]
    return heads(
        net->vision_tower->forward(pixels.to(ctx.device), cfg.llava.n_vision_layers_used(), true).features);
  }

  double tower_step(const StageSettings& st) {
    std::vector<at::Tensor> px, labels;
    for (int64_t b = 0; b < st.batch; ++b) {
      auto [p, l] = views_of(make_hr_sample(stage_seed(0), uint64_t(step * st.batch + b)));
      px.push_back(p);
      labels.push_back(l);
    }
    auto loss = hr_patch_head_loss(head_logits(at::cat(px)), at::cat(labels), st.glyph_weight);
    loss.backward();
    return loss.item<double>();
  }

  // Token loss of one image's conversation, plus answer_grounding × the answer-row attention loss
  // (hr_grounding.h) when the recipe sets it; backward of loss / batch (one image's graph at a time). Returns
  // {total, answer}.
  std::pair<double, double> decoder_image(const SynthSample& smp, uint64_t index, int64_t batch) {
    const auto& tok = vlm->tokenizer();
    const auto px = vlm->preprocess(smp.rgb);
    const AnyresGeometry g = anyres_geometry(smp.scene.height, smp.scene.width, cfg);
    at::Tensor feats;
    {
      at::NoGradGuard no_grad;  // the tower is frozen in this stage
      feats = net->vision_tower
                  ->forward(px.narrow(0, 0, 1 + g.n_tiles()).to(ctx.device), cfg.llava.n_vision_layers_used(),
                            true)
                  .features;
    }
    const auto visual =
        pack_image_features(net->multi_modal_projector->forward(feats), net->image_newline, g).unsqueeze(0);
    VlmRequest req;
    std::vector<int64_t> answer_pos, answer_rows;  // prompt indices: answer tokens; each turn's answer row
    std::vector<GlyphRow> glyph_rows;              // text turns: the row predicting each glyph-spelling token
    const auto turns = conversation_of(smp, recipe.seed, index, recipe.turns);
    for (size_t t = 0; t < turns.size(); ++t) {
      const auto prompt = t == 0 ? llava_prompt_ids(tok, turns[t].question, cfg.llava.image_token_index)
                                 : llava_followup_ids(tok, turns[t].question);
      req.prompt_ids.insert(req.prompt_ids.end(), prompt.begin(), prompt.end());
      answer_rows.push_back(static_cast<int64_t>(req.prompt_ids.size()) - 1);
      auto ans = tok.encode(turns[t].answer, false);
      if (turns[t].family ==
          "text") {  // token j spells the characters decode() adds (teacher_forced_batch.cpp)
        const size_t n_chars = turns[t].answer.size();
        size_t begin = 0;
        for (size_t j = 0; j < ans.size(); ++j) {
          const size_t end = std::min(
              n_chars, tok.decode(std::vector<int64_t>(ans.begin(), ans.begin() + long(j) + 1)).size());
          if (end > begin)
            glyph_rows.push_back(
                {static_cast<int64_t>(req.prompt_ids.size() + j) - 1, t, begin, end, ans[j]});
          begin = std::max(begin, end);
        }
      }
      ans.push_back(tok.eos_id());
      for (auto id : ans) {
        answer_pos.push_back(static_cast<int64_t>(req.prompt_ids.size()));
        req.prompt_ids.push_back(id);
      }
    }
    const std::vector<VlmRequest> reqs{req};
    auto state = build_prefill_state(*vlm, reqs, visual, g.layout());
    const auto target =
        answer_targets(reqs, {answer_pos}, cfg.llava.image_token_index, visual.size(1), state.hidden.size(1));
    auto& lm = vlm->language_model();
    KvCache cache(cfg.llava.text.num_hidden_layers);
    const double w = recipe.decoder.answer_grounding;
    std::unique_ptr<AttentionRowRecorder> rec;
    at::Tensor attention_target;
    if (w > 0)
      std::tie(rec, attention_target) =
          answer_grounding_of(smp, turns, req, answer_rows, glyph_rows, g, state);
    auto token = token_loss(lm->logits(lm->forward(state, cache, rec.get())), target);
    auto loss = token;
    double answer = 0;
    if (rec) {
      auto a = attention_target_loss(rec->recorded(), attention_target.to(token.device()));
      answer = a.item<double>();
      loss = loss + w * a;
    }
    (loss / double(batch)).backward();
    return {loss.item<double>(), answer};
  }

  // The recorder of the answer-grounded layer at each turn's answer row and at each glyph row, and its target
  // [1, H, R, T]: at answer rows head 0 on the turn's objects (hr_turn_grounding), at the glyph row of a text
  // token head kGlyphHead on the glyphs it spells (each glyph an equal share); zero rows where there is none.
  std::pair<std::unique_ptr<AttentionRowRecorder>, at::Tensor> answer_grounding_of(
      const SynthSample& smp, const std::vector<QaPair>& turns, const VlmRequest& req,
      const std::vector<int64_t>& answer_rows, const std::vector<GlyphRow>& glyph_rows,
      const AnyresGeometry& g, const TokenState& state) {
    const auto& ids = req.prompt_ids;
    const auto img = std::find(ids.begin(), ids.end(), cfg.llava.image_token_index) - ids.begin();
    const int64_t n_v = g.n_tokens(), T = state.hidden.size(1);
    if (img == static_cast<int64_t>(ids.size()) || ids.front() != vlm->tokenizer().bos_id() ||
        T != static_cast<int64_t>(ids.size()) + n_v - 1)
      throw InvalidArgument("HR answer grounding: the prompt is not BOS … <image> … of " + std::to_string(T) +
                            " positions");
    const auto seq = [&](int64_t i) { return i < img ? i : i + n_v - 1; };  // prompt index → position
    const int64_t n_answer = static_cast<int64_t>(answer_rows.size());
    const int64_t R = n_answer + static_cast<int64_t>(glyph_rows.size());
    auto rows = at::empty({1, R}, at::kLong);
    const int64_t H = cfg.llava.text.num_attention_heads, glyph_head = std::min<int64_t>(kGlyphHead, H - 1);
    auto target = at::zeros({1, H, R, T}, at::kFloat);
    auto ta = target.accessor<float, 4>();
    std::vector<HrTurnGrounding> grounding;
    for (const auto& q : turns) grounding.push_back(hr_turn_grounding(q, smp.scene, g, side()));
    for (int64_t r = 0; r < n_answer; ++r) {
      rows[0][r] = seq(answer_rows[size_t(r)]);
      const auto& gr = grounding[size_t(r)];
      const size_t shares = gr.objects.size() + (gr.sink ? 1 : 0);
      if (shares == 0) continue;
      for (const auto& tokens : gr.objects)
        for (auto k : tokens) ta[0][0][r][img + k] += 1.0f / float(shares * tokens.size());
      if (gr.sink) ta[0][0][r][0] += 1.0f / float(shares);  // BOS
    }
    for (size_t i = 0; i < glyph_rows.size(); ++i) {
      const GlyphRow& gl = glyph_rows[i];
      const int64_t r = n_answer + static_cast<int64_t>(i);
      rows[0][r] = seq(gl.row);
      const auto& glyphs = grounding[gl.turn].glyphs;
      size_t n = 0;
      for (size_t c = gl.begin; c < gl.end && c < glyphs.size(); ++c) n += glyphs[c].empty() ? 0 : 1;
      for (size_t c = gl.begin; c < gl.end && c < glyphs.size(); ++c)
        for (auto k : glyphs[c]) ta[0][glyph_head][r][img + k] += 1.0f / float(n * glyphs[c].size());
    }
    // The LLaVA-1.5 recipe's grounded layer (3), or L − 2 in shallower decoders (the recorder needs a later
    // one).
    const int64_t L = cfg.llava.text.num_hidden_layers;
    std::set<int64_t> layers;
    for (int64_t l : ConversationOptions{}.answer_grounding_layers) layers.insert(std::min(l, L - 2));
    if (L < 2) throw InvalidArgument("HR answer grounding needs a decoder of ≥ 2 layers");
    return {std::make_unique<AttentionRowRecorder>(layers, rows.to(state.hidden.device())), target};
  }

  // Mean {total, answer-grounding} loss over the step's images.
  std::pair<double, double> decoder_step(const StageSettings& st) {
    double sum = 0, answer = 0;
    for (int64_t b = 0; b < st.batch; ++b) {
      const auto index = uint64_t(step * st.batch + b);
      const auto [l, a] = decoder_image(make_hr_sample(stage_seed(1), index), index, st.batch);
      sum += l;
      answer += a;
    }
    return {sum / double(st.batch), answer / double(st.batch)};
  }

  // Foreground accuracy of each patch head on the views of kTowerProbeImages unseen images.
  void probe_tower() {
    std::vector<at::Tensor> px, labels;
    for (int64_t i = 0; i < kTowerProbeImages; ++i) {
      auto [p, l] = views_of(make_hr_sample(stage_seed(97), uint64_t(i)));
      px.push_back(p);
      labels.push_back(l);
    }
    at::NoGradGuard no_grad;
    const auto logits = head_logits(at::cat(px)).cpu();
    const auto lab = at::cat(labels);
    const char* names[] = {"colour", "shape", "size", "centre", "char", "ink"};
    nlohmann::json j{{"step", step}};
    std::string line;
    int64_t off = 0;
    for (int c = 0; c < 6; ++c) {
      const auto y = lab.select(-1, c), pred = logits.narrow(-1, off, kHeadSizes[c]).argmax(-1);
      const auto [acc, n] = foreground_accuracy(pred, y);
      j[names[c]] = {{"foreground_accuracy", acc}, {"foreground_patches", n}};
      char buf[64];
      std::snprintf(buf, sizeof buf, " %s %.3f", names[c], acc);
      line += buf;
      off += kHeadSizes[c];
    }
    append_text((fs::path(out) / "tower_probe.jsonl").string(), j.dump() + "\n");
    std::fprintf(stderr, "tower probe [%ld] foreground accuracy:%s\n", (long)step, line.c_str());
  }

  // The held-out probe twice: every visual token, then the base view alone (the tiles removed before the
  // decoder: base_view:keep=<base tokens>), so the log shows whether the answers use the tiles (issue 63's
  // gate: a run whose tiles add nothing is stopped by hand, not after an hour).
  void probe_decoder() {
    const ProbeSource source{make_hr_sample, static_cast<int64_t>(eval::synthvqa::hr_family_table().size())};
    const auto r = heldout_probe(*vlm, stage_seed(96), recipe.probe_per_family, 4, source);
    const int64_t base_tokens = cfg.grid() * cfg.grid();
    const auto base_plan = BoundPlan::bind("base_view:keep=" + std::to_string(base_tokens), vlm->shape(), {});
    const auto hook = base_plan.hook();
    const auto b = heldout_probe(*vlm, stage_seed(96), recipe.probe_per_family, 4, source, hook.get());
    auto j = r.to_json();
    j["step"] = step;
    j["base_view"] = b.to_json();
    append_text((fs::path(out) / "probe.jsonl").string(), j.dump() + "\n");
    std::fprintf(stderr, "probe [%ld] overall %.3f (base view %.3f):", (long)step, r.overall, b.overall);
    for (const auto& [f, a] : r.accuracy)
      std::fprintf(stderr, " %s %.2f/%.2f", f.c_str(), a, b.accuracy.count(f) ? b.accuracy.at(f) : 0.0);
    std::fprintf(stderr, " (%.0f + %.0f s)\n", r.seconds, b.seconds);
  }
};

HrTrainer::HrTrainer(HrRecipe recipe, const std::string& base_dir, std::string out_dir, RunContext ctx)
    : s_(std::make_unique<State>()) {
  recipe.validate();
  auto& s = *s_;
  s.recipe = recipe;
  s.out = std::move(out_dir);
  s.ctx = ctx;
  s.ctx.dtype = at::kFloat;  // training is fp32
  std::error_code ec;
  fs::create_directories(s.out, ec);
  if (ec) throw IoError("cannot create '" + s.out + "': " + ec.message());
  recover_directory(s.ckpt());  // a run killed while publishing its checkpoint resumes from it
  const bool resume = fs::exists(s.ckpt() / "position.json");
  nlohmann::json pos;
  if (resume) {
    pos = read_json_file((s.ckpt() / "position.json").string(), "HR training checkpoint");
    if (!(hr_recipe_from_json(pos.at("recipe")) == recipe))
      throw InvalidArgument("the checkpoint in " + s.ckpt().string() +
                            " was made with another HR recipe; use the same recipe or a new --out folder");
  } else if (!fs::exists(s.init() / "config.json")) {
    write_init_folder(base_dir, s.init().string(), recipe.seed);
  }
  // The starting weights, copied into a network of our own (the loader may map fp32 files read-only).
  auto start = VisionLanguageModel::load(s.init().string(), s.ctx);
  auto* next = dynamic_cast<LlavaNextModel*>(&start.family());
  if (next == nullptr)
    throw ConfigError(s.init().string() +
                      " is not a LLaVA-NeXT folder (made by another command?); use a new --out folder");
  auto& family = *next;
  s.cfg = family.config();
  s.net = random_llava_next_net(s.cfg, recipe.seed, at::kFloat);
  {
    at::NoGradGuard no_grad;
    auto dst = s.net->named_parameters(true);
    for (const auto& kv : family.net()->named_parameters(true)) dst[kv.key()].copy_(kv.value());
  }
  at::manual_seed(recipe.seed + 1);
  s.heads = torch::nn::Linear(s.cfg.llava.vision.hidden_size, HrPatchLabelSizes::kTotal);
  if (resume) {
    torch::load(s.net, (s.ckpt() / "net.pt").string());
    torch::load(s.heads, (s.ckpt() / "heads.pt").string());
    s.stage = pos.at("stage").get<int>();
    s.step = pos.at("step").get<int64_t>();
  }
  s.net->to(s.ctx.device);
  s.heads->to(s.ctx.device);
  s.vlm = std::make_unique<VisionLanguageModel>(
      std::make_shared<LlavaNextModel>(s.cfg, s.net, family.preprocess_config()), start.tokenizer(), s.ctx);
  s.begin_stage();
  if (resume && s.opt && fs::exists(s.ckpt() / "optimizer.pt"))
    torch::load(*s.opt, (s.ckpt() / "optimizer.pt").string());
}

HrTrainer::~HrTrainer() = default;

bool HrTrainer::done() const { return s_->stage >= 2; }

StepReport HrTrainer::step() {
  auto& s = *s_;
  if (done()) throw InvalidArgument("HR training is already complete");
  const auto& st = s.settings();
  const double lr = scheduled_lr(st, s.step);
  for (auto& g : s.opt->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  Stopwatch sw;
  s.opt->zero_grad();
  s.net->train();
  double loss = 0, answer = 0;
  if (s.stage == 0)
    loss = s.tower_step(st);
  else
    std::tie(loss, answer) = s.decoder_step(st);
  s.net->eval();
  torch::nn::utils::clip_grad_norm_(s.trainable(), st.clip);
  s.opt->step();
  StepReport r;
  r.stage = s.stage == 0 ? "hr-tower" : "hr-decoder";
  r.loss = loss;
  if (s.stage == 1) {
    r.answer_loss = answer;
    r.token_loss = loss - s.recipe.decoder.answer_grounding * answer;
  }
  r.lr = lr;
  r.step = ++s.step;
  r.steps = st.steps;
  r.samples_per_s = st.batch / (sw.ms() / 1000.0);
  const bool last = s.step >= st.steps;
  if (s.recipe.probe_every > 0 && (s.step % s.recipe.probe_every == 0 || last))
    s.stage == 0 ? s.probe_tower() : s.probe_decoder();
  if (last) {
    ++s.stage;
    s.step = 0;
    s.begin_stage();
  }
  return r;
}

void HrTrainer::save_checkpoint() {
  auto& s = *s_;
  const fs::path tmp = begin_staging(s.ckpt());  // published whole (core/atomic_dir.h)
  torch::save(s.net, (tmp / "net.pt").string());
  torch::save(s.heads, (tmp / "heads.pt").string());
  if (s.opt) torch::save(*s.opt, (tmp / "optimizer.pt").string());
  const nlohmann::json position{{"stage", s.stage}, {"step", s.step}, {"recipe", to_json(s.recipe)}};
  write_text_atomically((tmp / "position.json").string(), position.dump(2));
  publish_directory(s.ckpt());
}

double HrTrainer::checkpoint_seconds() const { return double(s_->recipe.checkpoint_seconds); }

void HrTrainer::export_model(const std::string& dir, c10::ScalarType dtype) {
  auto& s = *s_;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create '" + dir + "': " + ec.message());
  save_llava_next(dir, s.cfg, s.net, dtype);
  fs::copy_file(s.init() / "tokenizer.model", fs::path(dir) / "tokenizer.model",
                fs::copy_options::overwrite_existing);
  io::write_tokenizer_config(dir, {{s.cfg.llava.image_token_index, "<image>", true}});
  write_next_preprocessor_config(dir, s.cfg);
}

}  // namespace vispco::train
