// Prune-then-fine-tune loop: replayed plan in the training forward, validation with the plan, early stopping,
// checkpoint/resume, tuned HF folder and report (see finetune.h).
#include "train/finetune.h"

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/atomic_dir.h"
#include "core/context.h"
#include "core/errors.h"
#include "core/json_fields.h"
#include "core/json_file.h"
#include "core/text_file.h"
#include "cost/timer.h"
#include "eval/evaluator.h"
#include "eval/plan_evaluation.h"
#include "eval/synthvqa/generator.h"
#include "model/generate.h"
#include "model/llava/llava.h"
#include "optimize/learned/ddp.h"
#include "prune/bound_plan.h"
#include "prune/plan_hook.h"
#include "prune/replay_hook.h"
#include "train/conversation_loss.h"

namespace vispco::train {

namespace {

namespace fs = std::filesystem;

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[200];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

// Last N of "decoder-last-N", or 0 for the other modes. @throws InvalidArgument.
int64_t last_n(const std::string& mode) {
  if (mode == "projector" || mode == "projector+decoder") return 0;
  static const std::regex re("decoder-last-([1-9][0-9]*)");
  std::smatch m;
  if (std::regex_match(mode, m, re)) return std::stoll(m[1]);
  throw InvalidArgument("finetune: --train must be projector, projector+decoder or decoder-last-N, got '" +
                        mode + "'");
}

// The parameters `mode` trains (everything else frozen). @throws InvalidArgument when N exceeds the layers.
std::vector<at::Tensor> trainable(LlavaNet& net, const std::string& mode, int64_t n_layers) {
  for (auto& p : net->parameters()) p.set_requires_grad(false);
  std::vector<at::Tensor> out;
  auto take = [&](torch::nn::Module& m) {
    for (auto& p : m.parameters()) {
      p.set_requires_grad(true);
      out.push_back(p);
    }
  };
  const int64_t n = last_n(mode);
  if (mode == "projector" || mode == "projector+decoder") take(*net->multi_modal_projector);
  if (mode == "projector+decoder") take(*net->language_model);
  if (n > 0) {
    if (n > n_layers)
      throw InvalidArgument("finetune: decoder-last-" + std::to_string(n) + " but the decoder has " +
                            std::to_string(n_layers) + " layers");
    for (int64_t l = n_layers - n; l < n_layers; ++l) take(*net->language_model->model->layers[l]);
    take(*net->language_model->model->norm);
    if (net->language_model->lm_head) take(*net->language_model->lm_head);
  }
  return out;
}

double lr_at(const FinetuneOptions& o, int64_t step) {  // step 0-based
  const double warm = std::max<double>(1.0, std::floor(o.warmup * o.steps));
  if (step < warm) return o.lr * (step + 1) / warm;
  const double t = (step - warm) / std::max(1.0, o.steps - warm);
  return o.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * std::min(1.0, t))));
}

double accuracy_with(VisionLanguageModel& m, const eval::Dataset& ds, size_t limit, const BoundPlan& plan,
                     size_t batch, eval::EvalReport* full = nullptr) {
  eval::EvalOptions o;
  o.limit = limit;
  o.batch_size = batch;
  auto rep = eval::evaluate_plan(m, "in-memory", ds, o, plan);
  const double acc = rep.metrics.overall.accuracy();
  if (full) *full = std::move(rep);
  return acc;
}

// Rank 0's resume position, parameters and AdamW state (per parameter: step, exp_avg, exp_avg_sq) on every
// rank of `group`, each through the group's flattened fp32 broadcast (the others have no checkpoint: no
// shared file system needed; fp32 holds a step count exactly up to 2^24).
void share_resume_state(optimize::learned::DataParallel& group, const std::vector<at::Tensor>& params,
                        torch::optim::AdamW& opt, int64_t& step, bool& stopped) {
  at::Tensor pos = at::tensor({static_cast<float>(step), stopped ? 1.0f : 0.0f});
  group.broadcast({pos});
  step = static_cast<int64_t>(pos[0].item<float>());
  stopped = pos[1].item<float>() > 0.5f;
  if (step == 0 && !stopped) return;  // a fresh run: every rank starts from the model folder's weights
  group.broadcast(params);
  // Each parameter's AdamW step (0: no state yet, a parameter that never had a gradient), then its moments.
  auto& state = opt.state();
  const auto key = [](const at::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); };
  at::Tensor steps = at::zeros({static_cast<int64_t>(params.size())}, at::kFloat);  // [n_params]
  if (group.is_main())
    for (size_t i = 0; i < params.size(); ++i)
      if (const auto it = state.find(key(params[i])); it != state.end())
        steps[static_cast<int64_t>(i)] =
            static_cast<float>(static_cast<torch::optim::AdamWParamState&>(*it->second).step());
  group.broadcast({steps});
  std::vector<at::Tensor> moments;  // exp_avg, exp_avg_sq of each parameter with state, in order
  for (size_t i = 0; i < params.size(); ++i) {
    const auto n = static_cast<int64_t>(steps[static_cast<int64_t>(i)].item<float>());
    if (!group.is_main()) {
      state.erase(key(params[i]));
      if (n == 0) continue;
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->step(n);
      s->exp_avg(at::zeros_like(params[i], at::MemoryFormat::Preserve));
      s->exp_avg_sq(at::zeros_like(params[i], at::MemoryFormat::Preserve));
      state[key(params[i])] = std::move(s);
    }
    if (n == 0) continue;
    auto& s = static_cast<torch::optim::AdamWParamState&>(*state.at(key(params[i])));
    TORCH_CHECK(!s.max_exp_avg_sq().defined(), "finetune: AMSGrad state is not shared (AMSGrad is off)");
    moments.push_back(s.exp_avg());
    moments.push_back(s.exp_avg_sq());
  }
  group.broadcast(moments);
}

nlohmann::json per_family(const eval::EvalReport& r) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [f, t] : r.metrics.per_family) j[f] = t.accuracy();
  j["all"] = r.metrics.overall.accuracy();
  return j;
}

}  // namespace

void FinetuneOptions::validate() const {
  if (plan.empty() || plan == "none")
    throw InvalidArgument("finetune: --plan is required (the plan to tune for)");
  last_n(train);
  if (steps < 1) throw InvalidArgument("finetune: --steps must be ≥ 1");
  if (batch < 1) throw InvalidArgument("finetune: --batch must be ≥ 1");
  if (!(lr > 0)) throw InvalidArgument("finetune: --lr must be > 0");
  if (weight_decay < 0) throw InvalidArgument("finetune: --weight-decay must be ≥ 0");
  if (!(warmup >= 0 && warmup < 1)) throw InvalidArgument("finetune: warmup must be in [0, 1)");
  if (val_every < 1) throw InvalidArgument("finetune: --val-every must be ≥ 1");
  if (patience < 1) throw InvalidArgument("finetune: --patience must be ≥ 1");
  if (!(checkpoint_seconds > 0)) throw InvalidArgument("finetune: checkpoint_seconds must be > 0");
  if (eval_batch < 1) throw InvalidArgument("finetune: eval batch must be ≥ 1");
}

static const JsonFields<FinetuneOptions>& finetune_fields() {
  using O = FinetuneOptions;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<FinetuneOptions> fields("finetune options", {
      {"plan", &O::plan}, {"train", &O::train}, {"steps", &O::steps}, {"batch", &O::batch}, {"lr", &O::lr},
      {"weight_decay", &O::weight_decay}, {"warmup", &O::warmup}, {"val_every", &O::val_every},
      {"patience", &O::patience}, {"seed", &O::seed}, {"data_seed", &O::data_seed},
      omitted_at_default("train_scenes", &O::train_scenes), {"checkpoint_seconds", &O::checkpoint_seconds},
      {"val_limit", &O::val_limit}, {"test_limit", &O::test_limit}, {"eval_batch", &O::eval_batch}});
  // clang-format on
  return fields;
}

nlohmann::json to_json(const FinetuneOptions& o) { return finetune_fields().write(o); }

FinetuneOptions finetune_options_from_json(const nlohmann::json& j) {
  return finetune_fields().read_valid(j);
}

void check_batch_covers_ranks(int64_t batch, int64_t n_ranks) {
  if (batch < n_ranks)
    throw InvalidArgument("finetune: --batch " + std::to_string(batch) + " is smaller than the " +
                          std::to_string(n_ranks) +
                          " processes of the launch (each trains on a share of every step's batch)");
}

uint64_t training_scene(const FinetuneOptions& options, int64_t step, int64_t b) {
  const auto scene = static_cast<uint64_t>(step * options.batch + b);
  return options.train_scenes > 0 ? scene % options.train_scenes : scene;
}

nlohmann::json FinetuneReport::to_json() const {
  nlohmann::json loss = nlohmann::json::array(), ch = nlohmann::json::array();
  for (const auto& [s, l] : train_loss) loss.push_back({{"step", s}, {"loss", l}});
  for (const auto& c : checks)
    ch.push_back({{"step", c.step}, {"val_accuracy", c.val_accuracy}, {"train_accuracy", c.train_accuracy}});
  return {{"options", train::to_json(options)},
          {"train_loss", loss},
          {"checks", ch},
          {"best_step", best_step},
          {"best_val_accuracy", best_val_accuracy},
          {"stopped", stopped},
          {"test", test},
          {"trainable_parameters", n_trainable},
          {"wall_s", wall_s}};
}

std::string FinetuneReport::to_markdown() const {
  std::ostringstream s;
  s << "# vispco finetune\n\n- plan: `" << options.plan << "`, trains: " << options.train << " ("
    << n_trainable << " parameters), batch " << options.batch << ", lr " << options.lr << ", up to "
    << options.steps << " steps, validation every " << options.val_every << ", patience " << options.patience
    << "\n- chosen step " << best_step << " (validation accuracy " << fmt("%.1f", 100 * best_val_accuracy)
    << " % with the plan); " << stopped << "; wall " << fmt("%.0f", wall_s) << " s\n\n";
  s << "| step | validation % (plan) | training scenes % (plan) | training loss |\n|---:|---:|---:|---:|\n";
  for (const auto& c : checks) {
    double l = NAN;
    for (const auto& [st, v] : train_loss)
      if (st == c.step) l = v;
    s << "| " << c.step << " | " << fmt("%.1f", 100 * c.val_accuracy) << " | "
      << fmt("%.1f", 100 * c.train_accuracy) << " | " << (std::isnan(l) ? std::string("–") : fmt("%.4f", l))
      << " |\n";
  }
  if (!test.is_null()) {
    s << "\n## Test split, per family (accuracy %)\n\n| family | unpruned before | unpruned after | plan "
         "before | "
         "plan after | retention before | retention after |\n|---|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& [fam, ub] : test.at("unpruned_before").items()) {
      const double u0 = ub.get<double>(), u1 = test.at("unpruned_after").at(fam).get<double>();
      const double p0 = test.at("plan_before").at(fam).get<double>(),
                   p1 = test.at("plan_after").at(fam).get<double>();
      s << "| " << fam << " | " << fmt("%.1f", 100 * u0) << " | " << fmt("%.1f", 100 * u1) << " | "
        << fmt("%.1f", 100 * p0) << " | " << fmt("%.1f", 100 * p1) << " | "
        << (u0 > 0 ? fmt("%.3f", p0 / u0) : "n/a") << " | " << (u0 > 0 ? fmt("%.3f", p1 / u0) : "n/a")
        << " |\n";
    }
    const auto& share = test.at("recovered_share");
    s << "\nRetention is against the unpruned model *before* tuning. Share of the pruning gap (unpruned − "
         "plan, "
         "before) recovered by tuning: "
      << (share.is_number() ? fmt("%.1f %%", 100 * share.get<double>()) : std::string("n/a (no gap)"))
      << ".\n";
  }
  return s.str();
}

FinetuneReport run_finetune(const std::string& model_dir, const eval::Dataset& val, const eval::Dataset* test,
                            const FinetuneOptions& options, const std::string& out_dir, int n_threads,
                            const std::function<void(const std::string&)>& log, eval::ProgressMode progress,
                            optimize::learned::DataParallel* group, int64_t stop_at_step) {
  options.validate();
  if (stop_at_step != 0 && !(stop_at_step >= 1 && stop_at_step < options.steps))
    throw InvalidArgument("finetune: --stop-at-step " + std::to_string(stop_at_step) + " must be in [1, " +
                          std::to_string(options.steps) + ") (--steps " + std::to_string(options.steps) +
                          ")");
  const int64_t last_step = stop_at_step > 0 ? stop_at_step : options.steps;  // of this run
  Stopwatch wall;
  // Data parallelism (see finetune.h): this rank's share [lo, hi) of every step's batch.
  const bool dist = group != nullptr && group->world_size() > 1;
  const int64_t n_ranks = dist ? group->world_size() : 1, rank = dist ? group->rank() : 0;
  const bool main = rank == 0;
  check_batch_covers_ranks(options.batch, n_ranks);
  const int64_t lo = options.batch * rank / n_ranks, hi = options.batch * (rank + 1) / n_ranks;
  auto say = [&](const std::string& l) {
    if (log) log(l);
  };
  RunContext ctx;  // training needs fp32
  ctx.dtype = at::kFloat;
  ctx.n_threads = n_threads;
  apply_threads(ctx);
  auto m = VisionLanguageModel::load(model_dir, ctx);
  const auto& cfg = m.config();
  // The plan bound once (a gate file read here); every hook below shares its scorers.
  const BoundPlan plan = BoundPlan::bind(options.plan, m.shape(), ScorerEnv{model_dir});
  if (plan.is_auto())
    throw InvalidArgument("finetune: --plan must fix K (keep=auto is not a plan to tune for)");
  if (plan.unpruned()) throw InvalidArgument("finetune: --plan must prune something");
  {  // a plan whose stages merge tokens cannot be replayed: refuse it before any file is written
    const auto s0 = eval::synthvqa::make_sample(options.data_seed, 0);
    const auto probe = plan.hook(0);
    GenerationConfig one;
    one.max_new_tokens = 1;
    generate(m, {{m.preprocess(s0.rgb), m.prompt_ids(s0.question)}}, one, probe.get());
    ReplayHook check(probe->traces());
  }
  FinetuneReport rep;
  rep.options = options;
  rep.options.plan = plan.text();
  auto net = m.net();
  auto params = trainable(net, options.train, cfg.text.num_hidden_layers);
  for (const auto& p : params) rep.n_trainable += p.numel();
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(options.lr).weight_decay(options.weight_decay));

  const fs::path out(out_dir), ckpt = out / "checkpoint";
  // The training-scene probe: the first scenes of the training stream (seen in the first steps), for the
  // overfitting check (training accuracy next to validation accuracy). Rank 0's: it alone validates.
  const size_t n_probe =
      options.val_limit > 0 ? std::min(options.val_limit, val.samples.size()) : val.samples.size();
  eval::Dataset probe;
  if (main) {
    fs::create_directories(out);
    if (!fs::exists(out / "train-probe" / "data.jsonl")) {
      eval::synthvqa::SynthOptions so;
      so.seed = options.data_seed;
      size_t seen = static_cast<size_t>(options.steps * options.batch);
      if (options.train_scenes > 0) seen = std::min(seen, options.train_scenes);
      so.count = std::max<size_t>(1, std::min(n_probe, seen));
      so.n_threads = 1;
      eval::synthvqa::generate_synthvqa(so, (out / "train-probe").string());
    }
    probe = eval::load_dataset((out / "train-probe").string());
  }

  int64_t step = 0, since_best = 0;
  std::vector<at::Tensor> best;  // trainable parameters at the best check
  const auto snapshot = [&] {
    best.clear();
    for (const auto& p : params) best.push_back(p.detach().clone());
  };
  if (main) recover_directory(ckpt);  // a run killed while publishing its checkpoint resumes from it
  if (main && fs::exists(ckpt / "position.json")) {  // resume
    const auto pos = read_json_file((ckpt / "position.json").string(), "finetune checkpoint");
    auto stored = finetune_options_from_json(pos.at("options"));  // keys added later take their defaults
    // train_scenes joined the JSON form later: a checkpoint without it did not record it.
    if (!pos.at("options").contains("train_scenes")) stored.train_scenes = rep.options.train_scenes;
    if (stored != rep.options)
      throw InvalidArgument("finetune: " + ckpt.string() +
                            " was written with other options; use another --out");
    std::vector<at::Tensor> cur, saved_best;
    torch::load(cur, (ckpt / "params.pt").string());
    torch::load(saved_best, (ckpt / "best.pt").string());
    torch::load(opt, (ckpt / "optimizer.pt").string());
    torch::NoGradGuard g;
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(cur.at(i));
    best = saved_best;
    step = pos.at("step").get<int64_t>();
    since_best = pos.at("since_best").get<int64_t>();
    rep.best_step = pos.at("best_step").get<int64_t>();
    rep.best_val_accuracy = pos.at("best_val_accuracy").get<double>();
    for (const auto& c : pos.at("checks"))
      rep.checks.push_back({c.at("step").get<int64_t>(), c.at("val_accuracy").get<double>(),
                            c.at("train_accuracy").get<double>()});
    for (const auto& l : pos.at("train_loss"))
      rep.train_loss.emplace_back(l.at("step").get<int64_t>(), l.at("loss").get<double>());
    rep.stopped = pos.value("stopped", "");
    say("resumed at step " + std::to_string(step));
  }
  if (dist) {
    bool stopped = !rep.stopped.empty();
    share_resume_state(*group, params, opt, step, stopped);
    if (!main && stopped) rep.stopped = "stopped before the resume (rank 0's report)";
  }
  const auto save_ckpt = [&] {
    // Written into a staging folder and published whole (core/atomic_dir.h): a kill at any instant leaves a
    // complete checkpoint, the old or the new one.
    const fs::path tmp = begin_staging(ckpt);
    std::vector<at::Tensor> cur;
    for (const auto& p : params) cur.push_back(p.detach().clone());
    torch::save(cur, (tmp / "params.pt").string());
    torch::save(best.empty() ? cur : best, (tmp / "best.pt").string());
    torch::save(opt, (tmp / "optimizer.pt").string());
    auto j = rep.to_json();
    write_text_atomically((tmp / "position.json").string(),
                          nlohmann::json{{"options", train::to_json(rep.options)},
                                         {"step", step},
                                         {"since_best", since_best},
                                         {"best_step", rep.best_step},
                                         {"best_val_accuracy", rep.best_val_accuracy},
                                         {"checks", j["checks"]},
                                         {"train_loss", j["train_loss"]},
                                         {"stopped", rep.stopped}}
                              .dump(1));
    publish_directory(ckpt);
  };
  const auto check = [&] {
    net->eval();
    const double v = accuracy_with(m, val, options.val_limit, plan, options.eval_batch);
    const double t = accuracy_with(m, probe, 0, plan, options.eval_batch);
    net->train();
    rep.checks.push_back({step, v, t});
    if (rep.checks.size() == 1 || v > rep.best_val_accuracy) {
      rep.best_val_accuracy = v;
      rep.best_step = step;
      since_best = 0;
      snapshot();
    } else {
      ++since_best;
    }
    say("check step " + std::to_string(step) + ": validation " + fmt("%.4f", v) + ", training scenes " +
        fmt("%.4f", t) + " (best " + fmt("%.4f", rep.best_val_accuracy) + " at step " +
        std::to_string(rep.best_step) + ")");
  };

  if (main && rep.checks.empty()) check();  // step 0: the untuned model
  Stopwatch since_ckpt;
  double loss_sum = 0;
  int64_t loss_n = 0;
  eval::Progress bar(static_cast<size_t>(std::max<int64_t>(0, last_step - step)), "finetune", progress);
  while (rep.stopped.empty() && step < last_step) {
    // One batch of fresh (image, question, answer) scenes.
    std::vector<eval::synthvqa::SynthSample> samples;
    std::vector<at::Tensor> px;
    std::vector<VlmRequest> reqs;
    std::vector<std::vector<std::pair<std::string, std::string>>> turns;
    for (int64_t b = lo; b < hi; ++b) {
      samples.push_back(eval::synthvqa::make_sample(options.data_seed, training_scene(options, step, b)));
      px.push_back(m.preprocess(samples.back().rgb));
      reqs.push_back({px.back(), m.prompt_ids(samples.back().question)});
      turns.push_back({{samples.back().question, samples.back().answer}});
    }
    // The plan's decisions, from an inference prefill of the prompts (exactly what inference would keep).
    const auto hook = plan.hook(0);
    GenerationConfig one;
    one.max_new_tokens = 1;
    generate(m, reqs, one, hook.get());
    ReplayHook replay(hook->traces());
    ConversationOptions co;
    co.prune_hook = &replay;
    for (auto g : opt.param_groups())
      static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr_at(options, step));
    opt.zero_grad();
    auto parts = conversation_loss(m, at::stack(px).to(ctx.device), turns, co);
    double step_loss = 0;
    if (dist) {
      // The whole batch's loss is Σ_r n_r·L_r / N (L_r this rank's mean over its n_r targets, N = Σ_r n_r):
      // each rank back-propagates W·n_r/N·L_r, whose gradients averaged over the W ranks are its gradient.
      // n_r is what the loss averaged over (its own count, so the weighting cannot drift from it).
      at::Tensor counts = at::tensor({static_cast<float>(parts.n_targets)});
      group->all_reduce_sum(counts);
      const double n_all = counts.item<float>(), share = static_cast<double>(parts.n_targets) / n_all;
      (parts.total * (static_cast<double>(n_ranks) * share)).backward();
      group->average_gradients(params);
      at::Tensor loss = at::tensor({static_cast<float>(parts.total.item<double>() * share)});
      group->all_reduce_sum(loss);
      step_loss = loss.item<float>();
    } else {
      parts.total.backward();
      step_loss = parts.total.item<double>();
    }
    torch::nn::utils::clip_grad_norm_(params, 1.0);
    opt.step();
    loss_sum += step_loss;
    ++loss_n;
    ++step;
    bar.advance();
    if (step % options.val_every == 0 || step == options.steps) {
      rep.train_loss.emplace_back(step, loss_sum / loss_n);
      say("step " + std::to_string(step) + "/" + std::to_string(options.steps) + " loss " +
          fmt("%.4f", loss_sum / loss_n) + " lr " + fmt("%.2e", lr_at(options, step - 1)));
      loss_sum = 0;
      loss_n = 0;
      if (main) check();
      if (main && since_best >= options.patience)
        rep.stopped =
            "early stopping after " + std::to_string(options.patience) + " checks without a new best";
      if (dist) {  // rank 0's decision on every rank
        at::Tensor stop = at::tensor({rep.stopped.empty() ? 0.0f : 1.0f});
        group->broadcast({stop});
        if (!main && stop.item<float>() > 0.5f) rep.stopped = "early stopping (rank 0's checks)";
      }
    }
    if (main && since_ckpt.ms() / 1000.0 >= options.checkpoint_seconds) {
      save_ckpt();
      since_ckpt.reset();
    }
  }
  if (rep.stopped.empty() && step < options.steps) {  // --stop-at-step: a checkpoint to resume from, no more
    if (main) save_ckpt();                            // (written with `stopped` empty: the run goes on)
    rep.stopped = "paused after step " + std::to_string(step) + " (--stop-at-step; run again to resume)";
    rep.paused = true;
    return rep;
  }
  if (rep.stopped.empty()) rep.stopped = "steps done";
  if (!main) return rep;  // rank 0 writes the checkpoint, the tuned model and the report
  save_ckpt();

  // The tuned model: the best check's weights, the source folder's other files, the plan recorded.
  eval::EvalReport before_plan, before_full, after_plan, after_full;
  if (test) {
    auto src = VisionLanguageModel::load(model_dir, ctx);  // the untuned model, whatever was resumed
    accuracy_with(src, *test, options.test_limit, plan, options.eval_batch, &before_plan);
    accuracy_with(src, *test, options.test_limit, BoundPlan(), options.eval_batch, &before_full);
  }
  {
    torch::NoGradGuard g;
    for (size_t i = 0; i < params.size() && !best.empty(); ++i) params[i].copy_(best[i]);
  }
  const fs::path model_out = out / "model";
  fs::create_directories(model_out);
  for (const auto& e : fs::directory_iterator(model_dir)) {
    const auto name = e.path().filename().string();
    const bool weights = e.path().extension() == ".safetensors" && name != "gate.safetensors";
    if (!e.is_regular_file() || weights || name == "model.safetensors.index.json" || name == "config.json" ||
        name == "README.md" || e.path().extension() == ".png")
      continue;
    fs::copy_file(e.path(), model_out / name, fs::copy_options::overwrite_existing);
  }
  save_llava(model_out.string(), cfg, net, at::kBFloat16);  // as the bundled model ships
  auto j = read_json_file((model_out / "config.json").string(), "model config");
  j["vispco"] = {{"tuned_for_plan", rep.options.plan},
                 {"finetune",
                  {{"from", fs::absolute(model_dir).string()},
                   {"best_step", rep.best_step},
                   {"best_val_accuracy", rep.best_val_accuracy},
                   {"train", options.train}}}};
  write_text_atomically((model_out / "config.json").string(), j.dump(2) + "\n");
  if (test) {  // what ships: the saved (bf16) folder, computed in fp32 like the "before" figures
    auto tuned = VisionLanguageModel::load(model_out.string(), ctx);
    accuracy_with(tuned, *test, options.test_limit, plan, options.eval_batch, &after_plan);
    accuracy_with(tuned, *test, options.test_limit, BoundPlan(), options.eval_batch, &after_full);
    const double u0 = before_full.metrics.overall.accuracy(), p0 = before_plan.metrics.overall.accuracy(),
                 p1 = after_plan.metrics.overall.accuracy();
    rep.test = {{"unpruned_before", per_family(before_full)},
                {"unpruned_after", per_family(after_full)},
                {"plan_before", per_family(before_plan)},
                {"plan_after", per_family(after_plan)},
                {"n", before_full.rows.size()}};
    rep.test["recovered_share"] = u0 > p0 ? nlohmann::json((p1 - p0) / (u0 - p0)) : nlohmann::json(nullptr);
  }
  rep.wall_s = wall.ms() / 1000.0;
  write_text_atomically((out / "finetune.json").string(), rep.to_json().dump(2) + "\n");
  write_text_atomically((out / "finetune.md").string(), rep.to_markdown());
  return rep;
}

}  // namespace vispco::train
