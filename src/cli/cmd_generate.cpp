// `vispco generate`: one image + one prompt → the answer and one timing line (or JSON).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/context.h"
#include "core/errors.h"
#include "cost/timer.h"
#include "io/image.h"
#include "model/decode_batch.h"
#include "model/family.h"
#include "model/generate.h"
#include "model/logprobs.h"
#include "model/vlm.h"
#include "prune/bound_plan.h"
#include "prune/heatmap.h"
#include "prune/plan_hook.h"

namespace vispco::cli {

void register_generate(CLI::App& app) {
  struct Opts {
    std::string model, image, prompt, dtype = "auto", device = "cpu", plan = "none", heatmap;
    GenerationConfig gen;
    int threads = 0;
    int64_t top_logprobs = -1;  // −1: off
    QuantFlags quant;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("generate", "Answer a prompt about an image");
  cmd->add_option("--model", o->model, kModelHelp)->required();
  cmd->add_option("--image", o->image, "Image file (JPEG, PNG, WebP, BMP)")->required();
  cmd->add_option("--prompt", o->prompt, "Question / instruction")->required();
  cmd->add_option("--max-new-tokens", o->gen.max_new_tokens, "Most tokens to generate")
      ->capture_default_str();
  cmd->add_option("--temperature", o->gen.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-p", o->gen.top_p, "Nucleus sampling mass")->capture_default_str();
  cmd->add_option("--seed", o->gen.seed, "Sampling seed")->capture_default_str();
  add_compute_flags(cmd, &o->dtype, &o->device, &o->threads);
  add_quant_flags(cmd, &o->quant);
  cmd->add_flag_callback(
      "--ignore-eos", [o] { o->gen.stop_at_eos = false; },
      "Keep generating after EOS until --max-new-tokens (decode benchmarks)");
  cmd->add_option(
         "--plan", o->plan,
         "Pruning plan: 'scorer:[layer=L,]keep=K[+…]' (layer defaults to the method's paper layer), "
         "'pdrop:[layers=a/b/c,]ratio=r|keep=K', a .json file, or none; a scorer with per-token scores "
         "takes select=topk|mmr|dpp (README, Scorer × selector)")
      ->capture_default_str();
  cmd->add_option("--top-logprobs", o->top_logprobs,
                  "Print each generated token's log-probability and the N most likely alternatives (0–20; "
                  "log-softmax of the raw logits, as OpenAI's logprobs)");
  cmd->add_option("--heatmap", o->heatmap, "Write the token heat-map of the plan's first scored stage (PNG)");
  cmd->add_flag("--json", o->json, "Print one JSON object instead of text");
  cmd->callback([o, cmd] {
    o->plan = plan_for_model(o->model, o->plan, cmd->count("--plan") > 0);
    o->gen.validate();
    if (o->top_logprobs != -1 && (o->top_logprobs < 0 || o->top_logprobs > 20))
      throw InvalidArgument("generate: --top-logprobs must be in [0, 20], got " +
                            std::to_string(o->top_logprobs));
    DtypeChoice dtype_choice;
    RunContext ctx = inference_context(o->device, o->dtype, o->threads, &dtype_choice);
    ctx.seed = o->gen.seed;
    const ModelShape shape = load_model_shape(o->model);  // cheap: checks the plan before the slow steps
    // The plan bound once, before the slow steps (a keep=auto predictor and a gate file loaded here).
    const BoundPlan bound = BoundPlan::bind(o->plan, shape, ScorerEnv{o->model});
    const bool auto_keep = bound.is_auto();
    auto rgb = io::load_image_rgb(o->image);
    auto model = VisionLanguageModel::load(o->model, ctx);
    apply_quant(model, o->quant);
    VlmRequest req{model.preprocess(rgb), model.prompt_ids(o->prompt)};
    double predict_ms = 0;
    BoundPlan run = bound;
    if (auto_keep) {  // K from the image and the question, then the static plan at that K
      Stopwatch sw;
      auto vt = model.encode_image_list({req.pixels}, true);
      const int64_t k = bound.predict_keep(model, vt, {o->prompt}).at(0);
      req = with_visual_row(req, vt, 0, model.shape());  // generate() re-uses the tower's output
      predict_ms = sw.ms();
      run = bound.at_keep(k);  // N_v runs unpruned, as in eval and serve
    }
    const auto hook_ptr = run.hook(o->gen.seed);
    PlanHook* hook = hook_ptr.get();
    if (!o->heatmap.empty() && hook == nullptr) throw InvalidArgument("--heatmap needs a pruning --plan");
    const bool want_logprobs = o->top_logprobs >= 0;
    auto res = generate(model, {req}, o->gen, hook, want_logprobs);
    std::vector<PositionLogprobs> logprobs;
    if (want_logprobs)
      logprobs = token_logprobs(res.step_logits, 0, res.tokens[0], o->top_logprobs, model.tokenizer());
    if (!o->heatmap.empty() && !hook->traces().empty()) {
      at::Tensor scores;
      for (const auto& t : hook->traces())
        if (!scores.defined() && !t.scores[0].isnan().all().item<bool>()) scores = t.scores[0];
      if (!scores.defined()) scores = hook->traces().front().scores[0];
      write_token_heatmap(o->heatmap, rgb, model.token_panels(rgb.rows, rgb.cols), scores,
                          hook->traces().back().kept[0]);
    }
    const auto& s = res.stats;
    const double rss_mb = peak_rss_bytes() / 1048576.0;
    if (o->json) {
      nlohmann::json j = {{"answer", res.texts[0]},
                          {"tokens", res.tokens[0]},
                          {"plan", run.text()},
                          {"stats", s.to_json()},
                          {"dtype", dtype_choice.describe()}};
      if (auto_keep) j["keep_auto"] = {{"plan", bound.text()}, {"predict_ms", predict_ms}};
      j["stats"]["peak_rss_mb"] = rss_mb;
      if (want_logprobs) j["logprobs"] = {{"content", to_openai_json(logprobs)}};
      std::cout << j.dump() << "\n";
      return;
    }
    std::cout << res.texts[0] << "\n";
    if (auto_keep)
      std::printf(
          "[keep=auto: K = %ld → plan %s (tower + features + predictor %.1f ms; the tower's output is "
          "re-used)]\n",
          (long)(run.unpruned() ? shape.n_visual_tokens : run.plan().stages.at(0).keep), run.text().c_str(),
          predict_ms);
    for (size_t i = 0; i < logprobs.size(); ++i) {  // one line per generated token
      const auto& p = logprobs[i];
      std::printf("%3zu %6ld %-12s %9.4f |", i, (long)p.chosen.id, p.chosen.piece.c_str(), p.chosen.logprob);
      for (const auto& t : p.top) std::printf(" %s %.4f", t.piece.c_str(), t.logprob);
      std::printf("\n");
    }
    char prepass[64] = "";
    if (s.prepass_ms > 0)
      std::snprintf(prepass, sizeof prepass, " | gradient pre-pass %.1f ms", s.prepass_ms);
    std::fprintf(
        stdout,
        "[vision %.1f ms%s | prefill %.1f ms | TTFT %.1f ms | decode %.1f tok/s | N_v %ld kept %ld | "
        "N_t %ld | peak RSS %.0f MB | %s]\n",
        s.vision_ms, prepass, s.prefill_ms, s.ttft_ms, s.decode_tokens_per_s, (long)s.n_visual,
        (long)s.n_visual_kept, (long)s.n_text_max, rss_mb, dtype_choice.describe().c_str());
  });
}

}  // namespace vispco::cli
