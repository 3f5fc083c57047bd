// The two training stages of the bundled model, checkpointing and export.
#include "train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
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
#include "eval/synthvqa/rng.h"
#include "io/image.h"
#include "model/answer_targets.h"
#include "model/generate.h"
#include "model/llava_prompt.h"
#include "model/presets.h"
#include "train/grounding.h"
#include "train/heldout_probe.h"
#include "train/mimetic_init.h"
#include "train/patch_labels.h"
#include "train/projector_init.h"
#include "train/scene_questions.h"
#include "train/tower_init.h"

namespace vispco::train {

namespace fs = std::filesystem;
using eval::synthvqa::make_sample;
using eval::synthvqa::Rng;
using eval::synthvqa::sample_seed;

namespace {

// Stage data seeds: stage s draws images from SynthVQA seed data_seed + s·1000003.
constexpr uint64_t kStageSeedStride = 1000003;

double scheduled_lr(const StageSettings& s, int64_t step) {
  const auto warm = static_cast<int64_t>(s.warmup * s.steps);
  if (step < warm) return s.lr * double(step + 1) / double(warm);
  const double t = s.steps > warm ? double(step - warm) / double(s.steps - warm) : 1.0;
  return s.lr * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * t)));
}

// With split_glyphs, text answers enter the corpus one character per word ("K 7 Q"), so BPE learns no
// multi-glyph pieces and each character of a string answer is one token (a per-glyph target, reading in order).
std::vector<std::string> tokenizer_corpus(uint64_t seed, int64_t n_images, bool split_glyphs) {
  std::vector<std::string> out = {"USER: ASSISTANT:", "yes", "no", "left right above below", "bigger smaller"};
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

// Columns of the tower's patch-head logits: the six label heads of patch_labels(), then the two position
// outputs (position_loss), then the colour- and shape-count heads (count_heads), then the glyph-index head
// (glyph_index_head); −1 for a part the recipe does not train.
struct HeadLayout {
  int64_t position = -1, count = -1, glyph_index = -1, total = PatchLabelSizes::kTotal;
  explicit HeadLayout(const StageSettings& v) {
    if (v.position_loss > 0) position = std::exchange(total, total + 2);
    if (v.count_heads) count = std::exchange(total, total + 2 * PatchExtraSizes::kCount);
    if (v.glyph_index_head) glyph_index = std::exchange(total, total + PatchExtraSizes::kGlyphIndex);
  }
  // (offset, classes, column of patch_extra_labels()) of each extra classification head.
  std::vector<std::array<int64_t, 3>> extra_heads() const {
    std::vector<std::array<int64_t, 3>> out;
    if (count >= 0) {
      out.push_back({count, PatchExtraSizes::kCount, 0});
      out.push_back({count + PatchExtraSizes::kCount, PatchExtraSizes::kCount, 1});
    }
    if (glyph_index >= 0) out.push_back({glyph_index, PatchExtraSizes::kGlyphIndex, 2});
    return out;
  }
};

}  // namespace

at::Tensor balanced_patch_loss(const at::Tensor& logits, const at::Tensor& labels) {
  auto ce = torch::nn::functional::cross_entropy(
      logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));  // [N]
  auto fg = (labels > 0).to(ce.scalar_type());
  const auto n_fg = fg.sum(), n_bg = (1 - fg).sum();
  auto fg_term = (ce * fg).sum() / n_fg.clamp_min(1), bg_term = (ce * (1 - fg)).sum() / n_bg.clamp_min(1);
  // Halves where both kinds are present; a kind absent from the batch contributes nothing.
  const auto both = (n_fg > 0).logical_and(n_bg > 0).to(ce.scalar_type());
  return both * 0.5 * (fg_term + bg_term) + (1 - both) * (fg_term + bg_term);
}

namespace {

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

}  // namespace

struct Trainer::State {
  TrainRecipe recipe;
  std::string out;
  RunContext ctx;
  std::unique_ptr<VisionLanguageModel> vlm;
  torch::nn::Linear heads{nullptr};
  torch::nn::Linear readout{nullptr};  // the answer-row readout head (recipe stage "readout"), or null
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
    return i <= n_lowres()     ? recipe.lowres[i - 1]
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
    auto feats = net()->vision_tower->forward(at::stack(px).to(ctx.device), cfg.n_vision_layers_used(), true).features;
    auto logits = heads(feats).cpu();
    auto lab = at::stack(labels);
    const HeadLayout layout(recipe.vision);
    auto extra = layout.extra_heads();
    const int64_t sizes[] = {PatchLabelSizes::kColour, PatchLabelSizes::kShape, PatchLabelSizes::kSize,
                             PatchLabelSizes::kCentre, PatchLabelSizes::kChar,  PatchLabelSizes::kInk};
    const char* names[] = {"colour", "shape", "size", "centre", "char", "ink"};
    nlohmann::json j;
    int64_t off = 0;
    for (int c = 0; c < 6; ++c) {
      auto pred = logits.narrow(-1, off, sizes[c]).argmax(-1);
      auto y = lab.select(-1, c);
      auto fg = y > 0;
      const int64_t n = fg.sum().item<int64_t>();
      const double acc = n ? (pred.masked_select(fg) == y.masked_select(fg)).to(at::kDouble).mean().item<double>() : 0.0;
      j[names[c]] = {{"foreground_accuracy", acc}, {"foreground_patches", n}};
      std::fprintf(stderr, "tower probe: %-6s foreground accuracy %.3f over %ld patches\n", names[c], acc, (long)n);
      off += sizes[c];
    }
    if (!extra.empty()) {
      std::vector<at::Tensor> extra_labels;
      for (int64_t i = 0; i < kProbeImages; ++i)
        extra_labels.push_back(patch_extra_labels(make_sample(seed, uint64_t(i)).scene, cfg.vision.grid()));
      auto elab = at::stack(extra_labels);
      const char* extra_names[] = {"colour_count", "shape_count", "glyph_index"};
      for (const auto& [offset, classes, column] : extra) {
        auto pred = logits.narrow(-1, offset, classes).argmax(-1);
        auto y = elab.select(-1, column);
        auto fg = y > 0;
        const int64_t n = fg.sum().item<int64_t>();
        const double acc =
            n ? (pred.masked_select(fg) == y.masked_select(fg)).to(at::kDouble).mean().item<double>() : 0.0;
        j[extra_names[column]] = {{"foreground_accuracy", acc}, {"foreground_patches", n}};
        std::fprintf(stderr, "tower probe: %-12s foreground accuracy %.3f over %ld patches\n",
                     extra_names[column], acc, (long)n);
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
    for (int64_t i = 0; i < kInitImages; ++i) px.push_back(vlm->preprocess(make_sample(seed, uint64_t(i)).rgb));
    at::NoGradGuard no_grad;
    const auto& cfg = recipe.model;
    auto feats = net()->vision_tower->forward(at::stack(px).to(ctx.device), cfg.n_vision_layers_used(),
                                              cfg.vision_feature_select_strategy == "default").features;
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
    opt = std::make_unique<torch::optim::AdamW>(ps, torch::optim::AdamWOptions(st.lr).weight_decay(st.weight_decay));
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
  bool stored_readout = false;  // whether the checkpoint's own recipe trains a readout head
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
    // A finished tower-only run (a recipe with no decoder steps) continues with any decoder stages on the same
    // tower: everything that shapes stage 1 and the tokenizer is equal, so this is the state a from-scratch
    // run of the new recipe reaches after its vision stage.
    const bool same_tower = stored.model == recipe.model && stored.tokenizer_vocab == recipe.tokenizer_vocab &&
                            stored.tokenizer_images == recipe.tokenizer_images &&
                            stored.tokenizer_split_glyphs == recipe.tokenizer_split_glyphs &&
                            stored.seed == recipe.seed && stored.data_seed == recipe.data_seed &&
                            stored.vision == recipe.vision;
    continue_after_tower = prefix != stored && stored_steps == 0 && same_tower;  // also mid-vision (stage 0)
    if (prefix != stored && !continue_after_tower)
      throw InvalidArgument("the checkpoint in " + s_->ckpt().string() +
                            " was made with another recipe; use a new --out folder, the same recipe, the same "
                            "recipe with refine stages appended, or (after a tower-only run) the same tower");
  } else {
    io::train_sentencepiece(tokenizer_corpus(recipe.data_seed + 99 * kStageSeedStride, recipe.tokenizer_images,
                                             recipe.tokenizer_split_glyphs),
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
        throw IoError("the checkpoint in " + s_->ckpt().string() + " lacks readout.pt (incomplete checkpoint)");
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

at::Tensor conversation_loss(VisionLanguageModel& m, const at::Tensor& images,
                             const std::vector<std::vector<std::pair<std::string, std::string>>>& turns,
                             int64_t pool, const at::Tensor& visual_keep) {
  ConversationOptions opts;
  opts.pool = pool;
  opts.visual_keep = visual_keep;
  return conversation_loss(m, images, turns, opts).total;
}

namespace {

// Position among the n_v visual tokens fed to the decoder of each grid patch, or −1 (not fed).
std::vector<int64_t> patch_to_visual(int64_t grid, int64_t pool, const at::Tensor& keep_row) {
  std::vector<int64_t> pos(static_cast<size_t>(grid * grid), -1);
  if (keep_row.defined()) {
    auto k = std::get<0>(keep_row.cpu().sort());
    auto a = k.accessor<int64_t, 1>();
    for (int64_t j = 0; j < k.size(0); ++j) pos[static_cast<size_t>(a[j])] = j;
  } else {
    const int64_t side = grid / pool;
    for (int64_t r = 0; r < grid; ++r)
      for (int64_t c = 0; c < grid; ++c) pos[static_cast<size_t>(r * grid + c)] = (r / pool) * side + c / pool;
  }
  return pos;
}

}  // namespace

ConversationLoss conversation_loss(VisionLanguageModel& m, const at::Tensor& images,
                                   const std::vector<std::vector<std::pair<std::string, std::string>>>& turns,
                                   const ConversationOptions& opts) {
  const auto& cfg = m.config();
  const auto& tok = m.tokenizer();
  auto net = m.net();
  const int64_t pool = opts.pool;
  at::Tensor feats;
  {
    at::NoGradGuard no_grad;  // the tower is frozen in this stage
    feats = net->vision_tower->forward(images, cfg.n_vision_layers_used(), cfg.vision_feature_select_strategy == "default")
                .features;
  }
  auto visual = net->multi_modal_projector->forward(feats);  // [B, N_v, D]
  if (opts.visual_keep.defined()) {
    auto idx = std::get<0>(opts.visual_keep.sort(1)).to(visual.device());  // original order
    visual = visual.gather(1, idx.unsqueeze(-1).expand({-1, -1, visual.size(2)}));
  }
  if (pool > 1) {
    const int64_t g = cfg.vision.grid(), D = visual.size(2);
    if (g % pool != 0) throw InvalidArgument("conversation_loss: pool must divide the patch grid side");
    auto grid = visual.transpose(1, 2).reshape({visual.size(0), D, g, g});
    visual = at::avg_pool2d(grid, {pool, pool}).flatten(2).transpose(1, 2).contiguous();  // [B, N_v/pool², D]
  }
  const int64_t n_v = visual.size(1), B = images.size(0);
  const bool ground = opts.grounding > 0, ground_answer = opts.answer_grounding > 0;
  if (ground && opts.turn_patches.size() != turns.size())
    throw InvalidArgument("conversation_loss: grounding needs turn_patches for every conversation");
  if (ground_answer && opts.turn_answers.size() != turns.size())
    throw InvalidArgument("conversation_loss: answer grounding needs turn_answers for every conversation");
  const bool readout = opts.readout > 0;
  if (readout && (!ground_answer || !opts.readout_head || opts.answer_grounding_layers.empty()))
    throw InvalidArgument("conversation_loss: the readout needs answer_grounding > 0 (with its layers) and a readout_head");
  const bool glyph_readout = opts.glyph_readout > 0;
  if (glyph_readout && (!ground_answer || opts.answer_grounding_layers.empty()))
    throw InvalidArgument(
        "conversation_loss: the glyph readout needs answer_grounding > 0 (with its layers)");
  if ((readout || glyph_readout) &&
      (opts.readout_layer < 0 || opts.readout_layer >= cfg.text.num_hidden_layers - 1))
    throw InvalidArgument("conversation_loss: readout_layer must be in [0, L − 1)");
  if (opts.glyph_head < 0 || opts.glyph_head >= cfg.text.num_attention_heads)
    throw InvalidArgument("conversation_loss: glyph_head must be in [0, H)");
  const bool glyph_value = opts.glyph_value > 0;
  if (glyph_value && (!ground_answer || opts.answer_grounding_layers.empty() || !opts.glyph_value_head))
    throw InvalidArgument(
        "conversation_loss: the glyph value loss needs answer_grounding > 0 (with its layers) and a "
        "glyph_value_head");
  if (glyph_value && (!opts.patch_glyphs.defined() || opts.patch_glyphs.dim() != 2 ||
                      opts.patch_glyphs.size(0) != images.size(0) ||
                      opts.patch_glyphs.size(1) != cfg.vision.grid() * cfg.vision.grid()))
    throw InvalidArgument("conversation_loss: the glyph value loss needs patch_glyphs [B, N_grid]");
  std::vector<VlmRequest> reqs(B);
  std::vector<std::vector<int64_t>> answer_pos(B);  // indices into ids of the tokens to predict
  std::vector<std::vector<std::pair<int64_t, size_t>>> words(B);  // (index into ids of an object word, turn)
  std::vector<std::vector<int64_t>> answer_rows(B);  // per turn, index into ids of the last prompt token
  struct GlyphRow {
    int64_t row;  // index into ids of the token that predicts answer token j
    size_t turn, begin, end;  // the answer characters [begin, end) token j spells
    int64_t token;            // answer token j (the glyph readout's target)
  };
  std::vector<std::vector<GlyphRow>> glyph_rows(B);  // text answers with per-glyph grounding
  for (int64_t b = 0; b < B; ++b) {
    auto& ids = reqs[b].prompt_ids;
    if (ground && opts.turn_patches[b].size() != turns[b].size())
      throw InvalidArgument("conversation_loss: turn_patches must have one entry per turn");
    if (ground_answer && opts.turn_answers[b].size() != turns[b].size())
      throw InvalidArgument("conversation_loss: turn_answers must have one entry per turn");
    for (size_t t = 0; t < turns[b].size(); ++t) {
      const auto& [q, a] = turns[b][t];
      auto prompt = t == 0 ? llava_prompt_ids(tok, q, cfg.image_token_index)
                           : llava_followup_ids(tok, q);
      if (ground)
        for (auto i : object_word_ends(tok, prompt, 0, prompt.size()))
          words[b].push_back({static_cast<int64_t>(ids.size()) + i, t});
      ids.insert(ids.end(), prompt.begin(), prompt.end());
      auto ans = tok.encode(a, false);
      size_t first_glyph = 0;  // answer tokens before the first one that spells a character (a bare "▁")
      if (opts.answer_row_at_first_glyph)
        while (first_glyph + 1 < ans.size() &&
               tok.decode(std::vector<int64_t>(ans.begin(), ans.begin() + static_cast<long>(first_glyph) + 1))
                   .empty())
          ++first_glyph;
      answer_rows[b].push_back(static_cast<int64_t>(ids.size() + first_glyph) - 1);
      if (ground_answer && !opts.turn_answers[b][t].glyphs.empty()) {
        const size_t n_chars = opts.turn_answers[b][t].glyphs.size();
        size_t begin = 0;
        for (size_t j = 0; j < ans.size(); ++j) {  // token j spells the characters decode() adds
          const size_t end = std::min(n_chars, tok.decode(std::vector<int64_t>(ans.begin(), ans.begin() + j + 1)).size());
          if (end > begin)
            glyph_rows[b].push_back({static_cast<int64_t>(ids.size() + j) - 1, t, begin, end, ans[j]});
          begin = std::max(begin, end);
        }
      }
      ans.push_back(tok.eos_id());
      for (auto id : ans) {
        answer_pos[b].push_back(static_cast<int64_t>(ids.size()));
        ids.push_back(id);
      }
    }
    if (opts.text_loss) {  // every text token after the image placeholder
      const auto p = std::find(ids.begin(), ids.end(), cfg.image_token_index) - ids.begin();
      answer_pos[b].clear();
      for (int64_t i = p + 1; i < static_cast<int64_t>(ids.size()); ++i) answer_pos[b].push_back(i);
    }
  }
  auto state = build_prefill_state(m, reqs, visual);
  const int64_t T = state.hidden.size(1);
  auto target = answer_targets(reqs, answer_pos, cfg.image_token_index, n_v, T);
  // Recorded query rows: the object words (word grounding), then each turn's answer row (answer grounding).
  std::unique_ptr<AttentionRowRecorder> rec;
  at::Tensor ground_target, answer_target, readout_target;  // readout_target [B, R, 3], NaN = none
  at::Tensor glyph_target;  // [B, R] int64, the token a text answer row emits, −100 = none
  std::vector<int64_t> glyph_tokens;  // glyph value loss: (b, position) of each visual token showing a glyph,
  std::vector<int64_t> glyph_classes;  // and its glyph class − 1 (0…24)
  std::set<int64_t> layers;
  if (ground) layers.insert(opts.grounding_layers.begin(), opts.grounding_layers.end());
  if (ground_answer) layers.insert(opts.answer_grounding_layers.begin(), opts.answer_grounding_layers.end());
  if (!layers.empty()) {
    int64_t R = 1, H = cfg.text.num_attention_heads;
    for (int64_t b = 0; b < B; ++b)
      R = std::max<int64_t>(R, static_cast<int64_t>((ground ? words[b].size() : 0) +
                                                    (ground_answer ? answer_rows[b].size() + glyph_rows[b].size() : 0)));
    auto rows = at::zeros({B, R}, at::kLong);
    ground_target = at::zeros({B, R, T}, at::kBool);
    answer_target = at::zeros({B, H, R, T}, at::kFloat);
    readout_target = at::full({B, R, 3}, NAN, at::kFloat);
    glyph_target = at::full({B, R}, -100, at::kLong);
    auto ro = readout_target.accessor<float, 3>();
    auto go = glyph_target.accessor<int64_t, 2>();
    auto ra = rows.accessor<int64_t, 2>();
    auto ta = ground_target.accessor<bool, 3>();
    auto aa = answer_target.accessor<float, 4>();
    for (int64_t b = 0; b < B; ++b) {
      const auto& ids = reqs[b].prompt_ids;
      const int64_t p = std::find(ids.begin(), ids.end(), cfg.image_token_index) - ids.begin();
      const int64_t pad = T - (static_cast<int64_t>(ids.size()) - 1 + n_v);
      const auto seq = [&](int64_t i) { return pad + (i < p ? i : i + n_v - 1); };  // ids index → position
      const auto to_visual = patch_to_visual(cfg.vision.grid(), pool,
                                             opts.visual_keep.defined() ? opts.visual_keep[b] : at::Tensor());
      const auto key = [&](int64_t patch) {  // position of a grid patch's visual token, or −1
        return patch >= 0 && patch < static_cast<int64_t>(to_visual.size()) && to_visual[patch] >= 0
                   ? pad + p + to_visual[patch]
                   : int64_t{-1};
      };
      if (glyph_value) {  // each visual token once: pooled patches share a token (the first patch's glyph)
        const auto cls = opts.patch_glyphs[b].cpu();
        const auto ca = cls.accessor<int64_t, 1>();
        std::set<int64_t> seen;
        for (int64_t patch = 0; patch < cls.size(0); ++patch)
          if (ca[patch] > 0 && key(patch) >= 0 && seen.insert(key(patch)).second) {
            glyph_tokens.insert(glyph_tokens.end(), {b, key(patch)});
            glyph_classes.push_back(ca[patch] - 1);
          }
      }
      int64_t r = 0;
      if (ground)
        for (const auto& [i, t] : words[b]) {
          ra[b][r] = seq(i);
          for (auto patch : opts.turn_patches[b][t])
            if (key(patch) >= 0) ta[b][r][key(patch)] = true;
          ++r;
        }
      if (ground_answer)
        for (size_t t = 0; t < answer_rows[b].size(); ++t, ++r) {
          ra[b][r] = seq(answer_rows[b][t]);
          const AnswerGrounding& g = opts.turn_answers[b][t];
          for (int k = 0; k < 3; ++k) ro[b][r][k] = g.readout[static_cast<size_t>(k)];
          for (size_t h = 0; h < g.heads.size() && static_cast<int64_t>(h) < H; ++h) {
            std::vector<std::vector<int64_t>> objects;  // keys of each object that reaches the decoder
            for (const auto& patches : g.heads[h]) {
              std::vector<int64_t> keys;
              for (auto patch : patches)
                if (key(patch) >= 0) keys.push_back(key(patch));
              std::sort(keys.begin(), keys.end());
              keys.erase(std::unique(keys.begin(), keys.end()), keys.end());  // pooled patches share a token
              if (!keys.empty()) objects.push_back(std::move(keys));
            }
            const size_t shares = objects.size() + (g.sink ? 1 : 0);
            if (shares == 0) continue;
            for (const auto& keys : objects)
              for (auto k : keys) aa[b][h][r][k] += 1.0f / float(shares * keys.size());
            if (g.sink) aa[b][h][r][pad] += 1.0f / float(shares);  // BOS
          }
        }
      if (ground_answer)  // the glyph head at each text answer token's row on the glyphs it spells
        for (const auto& gr : glyph_rows[b]) {
          ra[b][r] = seq(gr.row);
          go[b][r] = gr.token;
          std::vector<std::vector<int64_t>> glyphs;
          for (size_t c = gr.begin; c < gr.end; ++c) {
            std::vector<int64_t> keys;
            for (auto patch : opts.turn_answers[b][gr.turn].glyphs[c])
              if (key(patch) >= 0) keys.push_back(key(patch));
            std::sort(keys.begin(), keys.end());
            keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
            if (!keys.empty()) glyphs.push_back(std::move(keys));
          }
          for (const auto& keys : glyphs)
            for (auto k : keys) aa[b][opts.glyph_head][r][k] += 1.0f / float(glyphs.size() * keys.size());
          ++r;
        }
    }
    rec = std::make_unique<AttentionRowRecorder>(layers, rows.to(state.hidden.device()));
    if (readout || glyph_readout) rec->record_hidden_after(opts.readout_layer);
    if (glyph_value) rec->record_input_of(*opts.answer_grounding_layers.begin());
  }
  KvCache cache(cfg.text.num_hidden_layers);
  auto& lm = net->language_model;
  if (opts.prune_hook != nullptr) {
    if (rec || pool != 1 || opts.visual_keep.defined())
      throw InvalidArgument("conversation_loss: a prune hook excludes pooling, visual_keep, grounding and readout");
    // Targets by original position (unique per row among valid tokens), read back at the survivors.
    const int64_t width = state.positions.max().item<int64_t>() + 2, dummy = width - 1;
    auto at_pos = [&](const TokenState& s) { return at::where(s.valid, s.positions, at::full_like(s.positions, dummy)); };
    auto by_pos = at::full({B, width}, -100, at::kLong);
    by_pos.scatter_(1, at_pos(state).cpu(), target.cpu());
    by_pos.select(1, dummy).fill_(-100);
    auto h = lm->forward(state, cache, opts.prune_hook);  // state → the surviving tokens
    target = by_pos.gather(1, at_pos(state).cpu());
    auto logits = lm->logits(h);  // [B, T', V] fp32
    ConversationLoss out;
    out.token = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), target.view({-1}).to(logits.device()),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
    out.total = out.token;
    out.grounding = out.answer = out.readout = out.glyph = out.glyph_value =
        at::zeros({}, out.token.options());
    return out;
  }
  auto logits = lm->logits(lm->forward(state, cache, rec.get()));  // [B, T, V] fp32
  ConversationLoss out;
  out.token = torch::nn::functional::cross_entropy(
      logits.view({B * T, -1}), target.view({-1}).to(logits.device()),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
  // The recorded layers in order; each loss takes its own.
  std::vector<at::Tensor> word_probs, answer_probs;
  if (rec) {
    size_t k = 0;
    for (int64_t l : layers) {
      const auto& pr = rec->recorded().at(k++);
      if (ground && opts.grounding_layers.count(l)) word_probs.push_back(pr);
      if (ground_answer && opts.answer_grounding_layers.count(l)) answer_probs.push_back(pr);
    }
  }
  out.grounding = ground ? grounding_loss(word_probs, ground_target.to(logits.device()))
                         : at::zeros({}, out.token.options());
  out.answer = ground_answer ? attention_target_loss(answer_probs, answer_target.to(logits.device()))
                             : at::zeros({}, out.token.options());
  out.readout = at::zeros({}, out.token.options());
  if (readout) {  // mean squared error over the (row, target) entries a family defines
    const auto y = readout_target.to(logits.device());
    const auto has = y.isnan().logical_not();
    if (has.any().item<bool>()) {
      auto head = opts.readout_head;  // a holder copy shares the module
      const auto pred = head->forward(rec->hidden());  // [B, R, 3]
      out.readout = (pred - y.nan_to_num()).pow(2).masked_select(has).mean();
    }
  }
  out.glyph = at::zeros({}, out.token.options());
  if (glyph_readout) {  // cross-entropy of the LM head on the hidden state after readout_layer at text answer
                        // rows
    const auto y = glyph_target.to(logits.device());
    if (y.ge(0).any().item<bool>()) {
      const auto lens = lm->logits(lm->model->norm(rec->hidden()));  // [B, R, V] fp32
      out.glyph = torch::nn::functional::cross_entropy(
          lens.reshape({-1, lens.size(-1)}), y.view({-1}),
          torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
    }
  }
  out.glyph_value = at::zeros({}, out.token.options());
  if (glyph_value && !glyph_classes.empty()) {  // the grounded layer's value of glyph_head's key/value group
    auto& layer = *lm->model->layers[*opts.answer_grounding_layers.begin()]->as<LlamaDecoderLayerImpl>();
    const int64_t d_head = cfg.text.d_head();
    const int64_t group = opts.glyph_head / (cfg.text.num_attention_heads / cfg.text.num_key_value_heads);
    std::vector<int64_t> flat;  // index into the [B·T] rows of the layer's input
    for (size_t i = 0; i < glyph_tokens.size(); i += 2)
      flat.push_back(glyph_tokens[i] * T + glyph_tokens[i + 1]);
    const auto& h = rec->layer_input();
    const auto x = h.reshape({-1, h.size(-1)}).index_select(0, at::tensor(flat, at::kLong).to(h.device()));
    const auto v = layer.self_attn->v_proj(layer.input_layernorm(x)).narrow(-1, group * d_head, d_head);
    auto head = opts.glyph_value_head;
    out.glyph_value = torch::nn::functional::cross_entropy(
        head->forward(v.to(at::kFloat)), at::tensor(glyph_classes, at::kLong).to(logits.device()));
  }
  out.total = out.token;
  if (readout) out.total = out.total + opts.readout * out.readout;
  if (glyph_value) out.total = out.total + opts.glyph_value * out.glyph_value;
  if (glyph_readout) out.total = out.total + opts.glyph_readout * out.glyph;
  if (ground) out.total = out.total + opts.grounding * out.grounding;
  if (ground_answer) out.total = out.total + opts.answer_grounding * out.answer;
  return out;
}

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
  std::vector<eval::synthvqa::SynthSample> samples;
  std::vector<at::Tensor> px;
  for (int64_t b = 0; b < st.batch; ++b) {
    samples.push_back(make_sample(data_seed, static_cast<uint64_t>(s.step * st.batch + b),
                                  {.min_texts = s.stage == 0 ? static_cast<int>(st.min_texts) : 0}));
    px.push_back(s.vlm->preprocess(samples.back().rgb));
  }
  auto images = at::stack(px).to(s.ctx.device);
  const auto& cfg = s.recipe.model;
  at::Tensor loss;
  ConversationLoss parts;
  s.opt->zero_grad();
  if (s.stage == 0) {
    auto feats = s.net()->vision_tower->forward(images, cfg.n_vision_layers_used(), true).features;
    auto logits = s.heads(feats);  // [B, N_v, kTotal]
    std::vector<at::Tensor> labels;
    for (const auto& smp : samples) labels.push_back(patch_labels(smp.scene, cfg.vision.grid()));
    auto lab = at::stack(labels).to(s.ctx.device);  // [B, N_v, 6]
    const int64_t sizes[] = {PatchLabelSizes::kColour, PatchLabelSizes::kShape, PatchLabelSizes::kSize,
                             PatchLabelSizes::kCentre, PatchLabelSizes::kChar,  PatchLabelSizes::kInk};
    int64_t off = 0;
    loss = at::zeros({}, logits.options());
    for (int c = 0; c < 6; ++c) {
      auto lg = logits.narrow(-1, off, sizes[c]).reshape({-1, sizes[c]});
      const double weight = c == 4 ? st.glyph_weight : 1.0;  // column 4: the glyph (character) head
      loss = loss + weight * balanced_patch_loss(lg, lab.select(-1, c).reshape({-1}));
      off += sizes[c];
    }
    const HeadLayout layout(st);
    if (layout.position >= 0) {  // the two outputs after the label heads regress (column, row)
      auto where = patch_positions(cfg.vision.grid()).to(logits.device()).unsqueeze(0).expand({logits.size(0), -1, -1});
      loss = loss + st.position_loss * at::mse_loss(logits.narrow(-1, layout.position, 2), where);
    }
    if (const auto extra = layout.extra_heads(); !extra.empty()) {
      std::vector<at::Tensor> extra_labels;
      for (const auto& smp : samples)
        extra_labels.push_back(patch_extra_labels(smp.scene, cfg.vision.grid()));
      auto elab = at::stack(extra_labels).to(s.ctx.device);  // [B, N_v, 3]
      for (const auto& [offset, classes, column] : extra)
        loss = loss + balanced_patch_loss(logits.narrow(-1, offset, classes).reshape({-1, classes}),
                                          elab.select(-1, column).reshape({-1}));
    }
  } else {
    std::vector<std::vector<std::pair<std::string, std::string>>> turns;
    ConversationOptions opts;
    opts.pool = st.pool;
    opts.text_loss = st.text_loss;
    opts.grounding = st.grounding;
    const int64_t grid = cfg.vision.grid();
    // Patches of the objects a question is about (grounding targets).
    auto patches_of = [&](const eval::synthvqa::Scene& scene, const std::vector<int>& objects) {
      std::vector<int64_t> out;
      for (int o : objects)
        for (auto p : object_patches(scene, static_cast<size_t>(o), grid)) out.push_back(p);
      return out;
    };
    opts.answer_grounding = st.answer_grounding;
    const AnswerGroundingOptions grounding_options{.count_centres = st.count_centres,
                                                   .count_footprints = st.count_footprints,
                                                   .text_glyphs = st.text_glyphs};
    opts.readout = st.readout;
    opts.readout_head = s.readout;
    opts.glyph_readout = st.glyph_readout;
    opts.glyph_head = st.glyph_head;
    opts.glyph_value = st.glyph_value;
    opts.glyph_value_head = s.glyph_value;
    if (st.glyph_value > 0) {
      std::vector<at::Tensor> glyphs;
      for (const auto& smp : samples) glyphs.push_back(patch_labels(smp.scene, grid).select(1, 4));
      opts.patch_glyphs = at::stack(glyphs);  // [B, N_grid]
    }
    opts.answer_row_at_first_glyph = st.answer_row_at_first_glyph;
    for (int64_t b = 0; b < st.batch; ++b) {
      Rng rng(sample_seed(s.recipe.seed, static_cast<uint64_t>(s.step * st.batch + b)));
      const auto& scene = samples[b].scene;
      std::vector<std::pair<std::string, std::string>> conv = {{samples[b].question, samples[b].answer}};
      std::vector<std::vector<int64_t>> refs(1);
      std::vector<AnswerGrounding> answers(1);
      const bool need_objects = st.grounding > 0 || st.answer_grounding > 0;
      if (need_objects)
        for (const auto& q : all_questions(scene))
          if (q.question == samples[b].question) {
            if (st.grounding > 0) refs[0] = patches_of(scene, q.objects);
            if (st.answer_grounding > 0) answers[0] = answer_grounding_of(q, scene, grid, grounding_options);
          }
      for (const auto& q : sample_questions(scene, rng, static_cast<size_t>(s.recipe.turns - 1), st.turn_weights))
        if (q.question != samples[b].question) {
          conv.push_back({q.question, q.answer});
          refs.push_back(st.grounding > 0 ? patches_of(scene, q.objects) : std::vector<int64_t>{});
          answers.push_back(st.answer_grounding > 0 ? answer_grounding_of(q, scene, grid, grounding_options) : AnswerGrounding{});
        }
      turns.push_back(conv);
      opts.turn_patches.push_back(std::move(refs));
      if (st.answer_grounding > 0) opts.turn_answers.push_back(std::move(answers));
    }
    at::Tensor keep;
    if (st.foreground_keep > 0) {
      at::NoGradGuard no_grad;
      auto feats = s.net()->vision_tower->forward(images, cfg.n_vision_layers_used(), true).features;
      auto logits = s.heads(feats);  // [B, N_v, kTotal]
      const int64_t ink_off = PatchLabelSizes::kTotal - PatchLabelSizes::kInk;
      auto fg_colour = 1 - logits.narrow(-1, 0, PatchLabelSizes::kColour).softmax(-1).select(-1, 0);
      auto fg_ink = 1 - logits.narrow(-1, ink_off, PatchLabelSizes::kInk).softmax(-1).select(-1, 0);
      keep = std::get<1>(at::maximum(fg_colour, fg_ink).topk(st.foreground_keep, 1));  // [B, K]
    }
    opts.visual_keep = keep;
    parts = conversation_loss(*s.vlm, images, turns, opts);
    loss = parts.total;
  }
  loss.backward();
  torch::nn::utils::clip_grad_norm_(s.trainable(), st.clip);
  s.opt->step();
  StepReport r;
  r.stage = s.stage == 0                ? "vision"
            : st.pool > 1                ? "decoder-pool" + std::to_string(st.pool)
            : st.foreground_keep > 0     ? "decoder-fg" + std::to_string(st.foreground_keep)
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

bool Trainer::run(double max_seconds, const std::function<void(const StepReport&)>& on_step) {
  Stopwatch total, since_ckpt;
  while (!done() && s_->stopped.empty()) {
    if (max_seconds > 0 && total.ms() / 1000.0 >= max_seconds) break;
    auto r = step();
    if (on_step) on_step(r);
    if (since_ckpt.ms() / 1000.0 >= s_->recipe.checkpoint_seconds) {
      save_checkpoint();
      since_ckpt.reset();
    }
  }
  save_checkpoint();
  return done();
}

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
