// The two training stages of the bundled model, checkpointing and export.
#include "train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <utility>

#include "core/atomic_dir.h"
#include "core/errors.h"
#include "core/json_file.h"
#include "core/text_file.h"
#include "cost/timer.h"
#include "eval/synthvqa/generator.h"
#include "io/image.h"
#include "model/llava/llava.h"
#include "model/llava/presets.h"
#include "train/conversation_loss.h"
#include "train/heldout_probe.h"
#include "train/losses/patch_head_loss.h"
#include "train/mimetic_init.h"
#include "train/patch_labels.h"
#include "train/projector_init.h"
#include "train/scene_questions.h"
#include "train/synth_batch.h"
#include "train/tower_init.h"

namespace vispco::train {

namespace fs = std::filesystem;
using eval::synthvqa::make_sample;

namespace {

// Stage data seeds: stage s draws images from SynthVQA seed data_seed + s·1000003.
constexpr uint64_t kStageSeedStride = 1000003;

// With split_glyphs, text answers enter the corpus one character per word ("K 7 Q"), so BPE learns no
// multi-glyph pieces and each character of a string answer is one token (a per-glyph target, reading in
// order).
std::vector<std::string> tokenizer_corpus(uint64_t seed, int64_t n_images, bool split_glyphs) {
  std::vector<std::string> out = {"USER: ASSISTANT:", "yes", "no", "left right above below",
                                  "bigger smaller"};
  for (uint64_t i = 0; i < static_cast<uint64_t>(n_images); ++i) {
    auto s = make_sample(seed, i);
    for (const auto& q : all_questions(s.scene)) {
      std::string answer = q.answer;
      if (split_glyphs && q.family == "text") {
        answer.clear();
        for (char c : q.answer) answer += std::string(answer.empty() ? "" : " ") + c;
      }
      out.push_back("USER: " + q.question + " ASSISTANT: " + answer);
      out.push_back(answer);
    }
  }
  return out;
}

// The stage-2 loss options of decoder stage `st` (weights, heads and switches; the per-image targets are the
// step's). @param readout, glyph_value the training-only heads, or null.
ConversationOptions stage_options(const StageSettings& st, torch::nn::Linear readout,
                                  torch::nn::Linear glyph_value) {
  ConversationOptions opts;
  opts.pool = st.pool;
  opts.text_loss = st.text_loss;
  opts.grounding = st.grounding;
  opts.answer_grounding = st.answer_grounding;
  opts.readout = st.readout;
  opts.readout_head = readout;
  opts.glyph_readout = st.glyph_readout;
  opts.glyph_head = st.glyph_head;
  opts.glyph_value = st.glyph_value;
  opts.glyph_value_head = glyph_value;
  opts.answer_row_at_first_glyph = st.answer_row_at_first_glyph;
  return opts;
}

// A pending probe gate in position.json and probe.jsonl: {"decoder_step", "min_accuracy", "failed_at",
// "overall"}.
nlohmann::json gate_json(const PendingGate& p) {
  return {{"decoder_step", p.gate.decoder_step},
          {"min_accuracy", p.gate.min_accuracy},
          {"failed_at", p.failed_at},
          {"overall", p.overall}};
}

PendingGate gate_from_json(const nlohmann::json& j) {
  return {.gate = {.decoder_step = j.at("decoder_step").get<int64_t>(),
                   .min_accuracy = j.at("min_accuracy").get<double>()},
          .failed_at = j.at("failed_at").get<int64_t>(),
          .overall = j.at("overall").get<double>()};
}

// One patch head of the tower probe: the accuracy of `pred` against the labels `y` (same shape) over the
// foreground patches (label > 0), recorded in `j` under `name` and printed with the name padded to `width`.
void probe_head(nlohmann::json& j, const char* name, int width, const at::Tensor& pred, const at::Tensor& y) {
  const auto [acc, n] = foreground_accuracy(pred, y);
  j[name] = {{"foreground_accuracy", acc}, {"foreground_patches", n}};
  std::fprintf(stderr, "tower probe: %-*s foreground accuracy %.3f over %ld patches\n", width, name, acc,
               (long)n);
}

}  // namespace

struct Trainer::State {
  TrainRecipe recipe;
  std::string out;
  RunContext ctx;
  std::unique_ptr<VisionLanguageModel> vlm;
  torch::nn::Linear heads{nullptr};
  torch::nn::Linear readout{nullptr};      // the answer-row readout head (recipe stage "readout"), or null
  torch::nn::Linear glyph_value{nullptr};  // the glyph value head (recipe stage "glyph_value"), or null
  int stage = 0;  // 0 vision, 1…n recipe.lowres, n + 1 decoder, n + 2…n + m + 1 recipe.refine, n + m + 2 done
  int64_t step = 0;
  int64_t last_probe = 0;  // decoder step of the last held-out probe (gates after it are still to check)
  std::string stopped;     // set when a probe gate stopped the run
  std::optional<PendingGate>
      pending_gate;  // a gate the last probe failed, which the next probe confirms or clears
  std::unique_ptr<torch::optim::AdamW> opt;

  LlavaNet net() { return vlm->net(); }
  fs::path ckpt() const { return fs::path(out) / "checkpoint"; }
  int n_lowres() const { return static_cast<int>(recipe.lowres.size()); }
  int done_stage() const { return n_lowres() + static_cast<int>(recipe.refine.size()) + 2; }
  // Settings of stage i (0 vision, 1…n lowres, n + 1 decoder, then the refine stages).
  const StageSettings& settings_of(int i) const {
    if (i == 0) return recipe.vision;
    return i <= n_lowres()       ? recipe.lowres[i - 1]
           : i == n_lowres() + 1 ? recipe.decoder
                                 : recipe.refine[i - n_lowres() - 2];
  }
  const StageSettings& settings() const { return settings_of(stage); }
  // True when `stage` is the first decoder stage with steps (where the projector gets its data init).
  bool first_decoder_stage() const {
    if (stage < 1) return false;
    for (int i = 1; i < stage; ++i)
      if (settings_of(i).steps > 0) return false;
    return true;
  }

  std::vector<at::Tensor> trainable() {
    std::vector<at::Tensor> ps;
    auto add = [&](torch::nn::Module& m) {
      for (auto& p : m.parameters()) ps.push_back(p);
    };
    if (stage == 0) {
      add(*net()->vision_tower);
      add(*heads);
    } else {
      add(*net()->multi_modal_projector);
      add(*net()->language_model);
      // Training-only heads join only in the stages that use them, so that appending such a stage to a run
      // leaves its optimiser state valid.
      if (readout && settings().readout > 0) add(*readout);
      if (glyph_value && settings().glyph_value > 0) add(*glyph_value);
    }
    return ps;
  }

  // The patch heads on the tower's feature layer ([CLS] dropped): [B, N_v, HeadLayout(recipe.vision).total].
  at::Tensor patch_head_logits(const at::Tensor& images) {
    const auto& cfg = recipe.model;
    return heads(net()->vision_tower->forward(images, cfg.n_vision_layers_used(), true).features);
  }

  // The foreground curriculum (StageSettings::foreground_keep): per image the k visual tokens the patch heads
  // rate most likely to show an object or text, 1 − P(nothing) of the colour and ink heads. @return [B, k].
  at::Tensor foreground_tokens(const at::Tensor& images, int64_t k) {
    at::NoGradGuard no_grad;
    auto logits = patch_head_logits(images);  // [B, N_v, kTotal]
    const int64_t ink_off = PatchLabelSizes::kTotal - PatchLabelSizes::kInk;
    auto fg_colour = 1 - logits.narrow(-1, 0, PatchLabelSizes::kColour).softmax(-1).select(-1, 0);
    auto fg_ink = 1 - logits.narrow(-1, ink_off, PatchLabelSizes::kInk).softmax(-1).select(-1, 0);
    return std::get<1>(at::maximum(fg_colour, fg_ink).topk(k, 1));
  }

  // Foreground accuracy of each patch head on 32 images of a seed no stage trains on (what the tower can tell
  // the decoder; a plain accuracy would be ~95% background), appended with the step to
  // <out>/tower_probe.jsonl (the tower's learning curves; every probe_every steps) and, at the end of the
  // stage, to tower_probe.json.
  void probe_tower(bool final) {
    constexpr int64_t kProbeImages = 32;
    const uint64_t seed = recipe.data_seed + 97 * kStageSeedStride;
    const auto& cfg = recipe.model;
    std::vector<at::Tensor> px, labels;
    for (int64_t i = 0; i < kProbeImages; ++i) {
      auto smp = make_sample(seed, uint64_t(i));
      px.push_back(vlm->preprocess(smp.rgb));
      labels.push_back(patch_labels(smp.scene, cfg.vision.grid()));
    }
    at::NoGradGuard no_grad;
    auto logits = patch_head_logits(at::stack(px).to(ctx.device)).cpu();
    auto lab = at::stack(labels);
    const HeadLayout layout(recipe.vision);
    auto extra = layout.extra_heads();
    const int64_t sizes[] = {PatchLabelSizes::kColour, PatchLabelSizes::kShape, PatchLabelSizes::kSize,
                             PatchLabelSizes::kCentre, PatchLabelSizes::kChar,  PatchLabelSizes::kInk};
    const char* names[] = {"colour", "shape", "size", "centre", "char", "ink"};
    nlohmann::json j;
    int64_t off = 0;
    for (int c = 0; c < 6; ++c) {
      probe_head(j, names[c], 6, logits.narrow(-1, off, sizes[c]).argmax(-1), lab.select(-1, c));
      off += sizes[c];
    }
    if (!extra.empty()) {
      std::vector<at::Tensor> extra_labels;
      for (int64_t i = 0; i < kProbeImages; ++i)
        extra_labels.push_back(patch_extra_labels(make_sample(seed, uint64_t(i)).scene, cfg.vision.grid()));
      auto elab = at::stack(extra_labels);
      const char* extra_names[] = {"colour_count", "shape_count", "glyph_index"};
      for (const auto& [offset, classes, column] : extra) {
        probe_head(j, extra_names[column], 12, logits.narrow(-1, offset, classes).argmax(-1),
                   elab.select(-1, column));
      }
    }
    if (layout.position >= 0) {  // position head: mean error, in patches
      auto err = (logits.narrow(-1, layout.position, 2) - patch_positions(cfg.vision.grid()).unsqueeze(0))
                     .abs()
                     .mean()
                     .item<double>() *
                 double(cfg.vision.grid() - 1) / 2.0;
      j["position"] = {{"mean_abs_error_patches", err}};
      std::fprintf(stderr, "tower probe: position mean abs error %.2f patches\n", err);
    }
    if (final) write_text_atomically((fs::path(out) / "tower_probe.json").string(), j.dump(2) + "\n");
    j["step"] = step;
    append_text((fs::path(out) / "tower_probe.jsonl").string(), j.dump() + "\n");
  }

  // The held-out probe of the decoder stages (recipe.probe_every), appended to <out>/probe.jsonl.
  void probe_decoder(const std::string& stage_name) {
    const uint64_t seed = recipe.data_seed + 96 * kStageSeedStride;
    const ProbeResult r = heldout_probe(*vlm, seed, recipe.probe_per_family);
    nlohmann::json j = r.to_json();
    j["stage"] = stage_name;
    j["stage_index"] = stage;
    j["step"] = step;
    int64_t before = 0;  // decoder steps of the stages before this one
    for (int i = 1; i < stage; ++i) before += settings_of(i).steps;
    const int64_t now = before + step;
    j["decoder_step"] = now;
    if (stopped.empty()) {
      auto verdict = check_probe_gates(recipe.probe_gates, last_probe, now, r.overall, pending_gate);
      pending_gate = verdict.pending;
      if (!verdict.stop.empty()) j["stopped"] = stopped = verdict.stop;
      if (pending_gate) j["gate_pending"] = gate_json(*pending_gate);
    }
    last_probe = now;
    append_text((fs::path(out) / "probe.jsonl").string(), j.dump() + "\n");
    std::fprintf(stderr, "probe [%s %ld] overall %.3f:", stage_name.c_str(), (long)step, r.overall);
    for (const auto& [f, a] : r.accuracy) std::fprintf(stderr, " %s %.2f", f.c_str(), a);
    std::fprintf(stderr, " (%.0f s)\n", r.seconds);
  }

  void init_projector() {
    constexpr int64_t kInitImages = 32;
    const uint64_t seed = recipe.data_seed + 98 * kStageSeedStride;
    std::vector<at::Tensor> px;
    for (int64_t i = 0; i < kInitImages; ++i)
      px.push_back(vlm->preprocess(make_sample(seed, uint64_t(i)).rgb));
    at::NoGradGuard no_grad;
    const auto& cfg = recipe.model;
    auto feats = net()
                     ->vision_tower
                     ->forward(at::stack(px).to(ctx.device), cfg.n_vision_layers_used(),
                               cfg.vision_feature_select_strategy == "default")
                     .features;
    standardise_projector_input(net()->multi_modal_projector, feats);
  }

  // Network and heads onto ctx.device (the optimiser, made by begin_stage, follows its parameters).
  void to_device() {
    net()->to(ctx.device);
    heads->to(ctx.device);
    if (readout) readout->to(ctx.device);
    if (glyph_value) glyph_value->to(ctx.device);
  }

  // AdamW's moment estimates onto ctx.device (torch::load keeps the device they were saved from).
  void optimizer_state_to_device() {
    for (auto& kv : opt->state()) {
      auto& st = static_cast<torch::optim::AdamWParamState&>(*kv.second);
      st.exp_avg(st.exp_avg().to(ctx.device));
      st.exp_avg_sq(st.exp_avg_sq().to(ctx.device));
      if (st.max_exp_avg_sq().defined()) st.max_exp_avg_sq(st.max_exp_avg_sq().to(ctx.device));
    }
  }

  void begin_stage() {
    for (auto& p : net()->parameters()) p.set_requires_grad(false);
    for (auto& p : heads->parameters()) p.set_requires_grad(false);
    if (stage >= done_stage()) return;
    const auto& st = settings();
    auto ps = trainable();
    for (auto& p : ps) p.set_requires_grad(true);
    opt = std::make_unique<torch::optim::AdamW>(
        ps, torch::optim::AdamWOptions(st.lr).weight_decay(st.weight_decay));
    // Skip stages with no steps.
    if (st.steps == 0) {
      ++stage;
      step = 0;
      begin_stage();
    }
  }
};

Trainer::Trainer(TrainRecipe recipe, std::string out_dir, RunContext ctx) : s_(std::make_unique<State>()) {
  recipe.validate();
  s_->recipe = recipe;
  s_->out = out_dir;
  s_->ctx = ctx;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw IoError("cannot create '" + out_dir + "': " + ec.message());
  const auto tok_path = (fs::path(out_dir) / "tokenizer.model").string();
  recover_directory(s_->ckpt());  // a run killed while publishing its checkpoint resumes from it
  const bool resume = fs::exists(s_->ckpt() / "position.json");
  bool continue_after_tower = false;
  bool stored_readout = false;      // whether the checkpoint's own recipe trains a readout head
  bool stored_glyph_value = false;  // … and a glyph value head
  if (resume) {
    const auto pos = read_json_file((s_->ckpt() / "position.json").string(), "training checkpoint");
    // The same recipe, or the same with refine stages appended (a finished run continued by more stages) and
    // probe gates placed in them.
    auto stored = recipe_from_json(pos.at("recipe"));
    stored_readout = stored.trains_readout();
    stored_glyph_value = stored.trains_glyph_value();
    auto prefix = recipe;
    if (prefix.refine.size() >= stored.refine.size()) prefix.refine.resize(stored.refine.size());
    const int64_t stored_steps = stored.decoder_steps();
    // Gates beyond the stored run's steps never fired in it: compare without them on both sides.
    const auto beyond = [&](const ProbeGate& g) { return g.decoder_step > stored_steps; };
    std::erase_if(prefix.probe_gates, beyond);
    std::erase_if(stored.probe_gates, beyond);
    // A finished tower-only run (a recipe with no decoder steps) continues with any decoder stages on the
    // same tower: everything that shapes stage 1 and the tokenizer is equal, so this is the state a
    // from-scratch run of the new recipe reaches after its vision stage.
    const bool same_tower =
        stored.model == recipe.model && stored.tokenizer_vocab == recipe.tokenizer_vocab &&
        stored.tokenizer_images == recipe.tokenizer_images &&
        stored.tokenizer_split_glyphs == recipe.tokenizer_split_glyphs && stored.seed == recipe.seed &&
        stored.data_seed == recipe.data_seed && stored.vision == recipe.vision;
    continue_after_tower = prefix != stored && stored_steps == 0 && same_tower;  // also mid-vision (stage 0)
    if (prefix != stored && !continue_after_tower)
      throw InvalidArgument(
          "the checkpoint in " + s_->ckpt().string() +
          " was made with another recipe; use a new --out folder, the same recipe, the same "
          "recipe with refine stages appended, or (after a tower-only run) the same tower");
  } else {
    io::train_sentencepiece(tokenizer_corpus(recipe.data_seed + 99 * kStageSeedStride,
                                             recipe.tokenizer_images, recipe.tokenizer_split_glyphs),
                            static_cast<int>(recipe.tokenizer_vocab), tok_path);
  }
  auto tok = io::Tokenizer::load(tok_path);
  auto net = random_llava_net(recipe.model, recipe.seed, at::kFloat);
  s_->vlm = std::make_unique<VisionLanguageModel>(recipe.model, net, tok, ctx);
  s_->heads = torch::nn::Linear(recipe.model.vision.hidden_size, HeadLayout(recipe.vision).total);
  if (recipe.trains_readout()) s_->readout = torch::nn::Linear(recipe.model.text.hidden_size, 3);
  if (recipe.trains_glyph_value())
    s_->glyph_value = torch::nn::Linear(recipe.model.text.d_head(), PatchLabelSizes::kChar - 1);
  if (resume) {
    const auto pos = read_json_file((s_->ckpt() / "position.json").string(), "training checkpoint");
    torch::load(net, (s_->ckpt() / "net.pt").string());
    torch::load(s_->heads, (s_->ckpt() / "heads.pt").string());
    // A run continued by stages with a readout its own stages had none of keeps the freshly built head: it is
    // the head a from-scratch run starts with (built after the seeded network, in the same order).
    if (s_->readout && stored_readout) {
      if (!fs::exists(s_->ckpt() / "readout.pt"))
        throw IoError("the checkpoint in " + s_->ckpt().string() +
                      " lacks readout.pt (incomplete checkpoint)");
      torch::load(s_->readout, (s_->ckpt() / "readout.pt").string());
    }
    if (s_->glyph_value && stored_glyph_value) {
      if (!fs::exists(s_->ckpt() / "glyph_value.pt"))
        throw IoError("the checkpoint in " + s_->ckpt().string() +
                      " lacks glyph_value.pt (incomplete checkpoint)");
      torch::load(s_->glyph_value, (s_->ckpt() / "glyph_value.pt").string());
    }
    s_->to_device();  // loaded onto the device they were saved from
    s_->stage = pos.at("stage").get<int>();
    s_->step = pos.at("step").get<int64_t>();
    s_->last_probe = pos.value("last_probe", int64_t{0});
    s_->stopped = pos.value("stopped", std::string());
    if (pos.contains("gate_pending")) s_->pending_gate = gate_from_json(pos.at("gate_pending"));
    if (continue_after_tower && s_->stage >= 1) {
      s_->stage = 1;  // the first stage after the vision stage
      s_->step = 0;
      s_->last_probe = 0;
      s_->stopped.clear();
    }
    s_->begin_stage();
    if (s_->opt && fs::exists(s_->ckpt() / "optimizer.pt")) {
      torch::load(*s_->opt, (s_->ckpt() / "optimizer.pt").string());
      s_->optimizer_state_to_device();  // a checkpoint written on another device resumes here
    }
  } else {
    // After every seeded draw of a run without these options, so that they change nothing else.
    auto& tower = net->vision_tower->vision_model;
    if (recipe.vision.sincos_positions > 0) sincos_position_init(tower, recipe.vision.sincos_positions);
    if (recipe.vision.mimetic_tower) {
      at::manual_seed(recipe.seed + 2);
      mimetic_tower_init(tower);
    }
    s_->to_device();  // initialised on the CPU, so every device starts from the same weights
    s_->begin_stage();
  }
}

Trainer::~Trainer() = default;

bool Trainer::done() const { return s_->stage >= s_->done_stage(); }

std::string Trainer::stopped_by_probe() const { return s_->stopped; }

StepReport Trainer::step() {
  auto& s = *s_;
  if (done()) throw InvalidArgument("training is already complete");
  const auto& st = s.settings();
  const double lr = scheduled_lr(st, s.step);
  for (auto& g : s.opt->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  Stopwatch sw;
  // Before the first step of the first decoder stage (not at the stage switch, so a checkpoint taken between
  // the two cannot apply it twice): standardise the projector's input on a sample of training images.
  // The decoder's mimetic attention initialisation happens at the same point, for the same reason.
  if (s.step == 0 && s.first_decoder_stage()) {
    s.init_projector();
    if (s.recipe.mimetic_init) {
      at::manual_seed(s.recipe.seed + 1);  // the same draw whether or not the run was resumed here
      mimetic_attention_init(s.net()->language_model);
    }
  }
  const uint64_t data_seed = s.recipe.data_seed + static_cast<uint64_t>(s.stage) * kStageSeedStride;
  const auto batch = draw_synth_batch(*s.vlm, data_seed, s.step, st.batch,
                                      s.stage == 0 ? static_cast<int>(st.min_texts) : 0, s.ctx.device);
  const int64_t grid = s.recipe.model.vision.grid();
  at::Tensor loss;
  ConversationLoss parts;
  s.opt->zero_grad();
  if (s.stage == 0) {
    loss = patch_head_loss(s.patch_head_logits(batch.images), batch.scenes(), st, grid);
  } else {
    auto data = synth_conversations(batch.samples, s.recipe.seed, s.step, s.recipe.turns, st, grid);
    auto opts = stage_options(st, s.readout, s.glyph_value);
    opts.turn_patches = std::move(data.turn_patches);
    opts.turn_answers = std::move(data.turn_answers);
    opts.patch_glyphs = data.patch_glyphs;
    if (st.foreground_keep > 0) opts.visual_keep = s.foreground_tokens(batch.images, st.foreground_keep);
    parts = conversation_loss(*s.vlm, batch.images, data.turns, opts);
    loss = parts.total;
  }
  loss.backward();
  torch::nn::utils::clip_grad_norm_(s.trainable(), st.clip);
  s.opt->step();
  StepReport r;
  r.stage = s.stage == 0             ? "vision"
            : st.pool > 1            ? "decoder-pool" + std::to_string(st.pool)
            : st.foreground_keep > 0 ? "decoder-fg" + std::to_string(st.foreground_keep)
                                     : "decoder";
  r.loss = loss.item<double>();
  if (parts.token.defined()) {
    r.token_loss = parts.token.item<double>();
    r.grounding_loss = parts.grounding.item<double>();
    r.answer_loss = parts.answer.item<double>();
    r.readout_loss = parts.readout.defined() ? parts.readout.item<double>() : 0.0;
    r.glyph_loss = parts.glyph.defined() ? parts.glyph.item<double>() : 0.0;
    r.glyph_value_loss = parts.glyph_value.defined() ? parts.glyph_value.item<double>() : 0.0;
  }
  r.lr = lr;
  r.step = ++s.step;
  r.steps = st.steps;
  r.samples_per_s = st.batch / (sw.ms() / 1000.0);
  if (s.stage > 0 && s.recipe.probe_every > 0 && (s.step % s.recipe.probe_every == 0 || s.step >= st.steps))
    s.probe_decoder(r.stage);
  if (s.stage == 0 && s.recipe.probe_every > 0 && s.step % s.recipe.probe_every == 0 && s.step < st.steps)
    s.probe_tower(false);
  if (s.step >= st.steps) {
    if (s.stage == 0) s.probe_tower(true);
    ++s.stage;
    s.step = 0;
    s.begin_stage();
  }
  return r;
}

void Trainer::save_checkpoint() {
  auto& s = *s_;
  // Written into a staging folder and published whole (core/atomic_dir.h): a kill at any instant leaves a
  // complete checkpoint, the old or the new one.
  const fs::path tmp = begin_staging(s.ckpt());
  torch::save(s.net(), (tmp / "net.pt").string());
  torch::save(s.heads, (tmp / "heads.pt").string());
  if (s.readout) torch::save(s.readout, (tmp / "readout.pt").string());
  if (s.glyph_value) torch::save(s.glyph_value, (tmp / "glyph_value.pt").string());
  if (s.opt && !done()) torch::save(*s.opt, (tmp / "optimizer.pt").string());
  nlohmann::json position{{"stage", s.stage},
                          {"step", s.step},
                          {"last_probe", s.last_probe},
                          {"stopped", s.stopped},
                          {"recipe", to_json(s.recipe)}};
  if (s.pending_gate) position["gate_pending"] = gate_json(*s.pending_gate);
  write_text_atomically((tmp / "position.json").string(), position.dump(2));
  publish_directory(s.ckpt());
}

double Trainer::checkpoint_seconds() const { return double(s_->recipe.checkpoint_seconds); }

void Trainer::export_model(const std::string& dir, c10::ScalarType dtype) {
  auto net = s_->net();
  save_llava(dir, s_->recipe.model, net, dtype);
  fs::copy_file(fs::path(s_->out) / "tokenizer.model", fs::path(dir) / "tokenizer.model",
                fs::copy_options::overwrite_existing);
  write_preprocessor_config(dir, s_->recipe.model);
  // transformers' LlavaProcessor learns what "<image>" is from the added tokens.
  io::write_tokenizer_config(dir, {{s_->recipe.model.image_token_index, "<image>", true}});
}

}  // namespace vispco::train
