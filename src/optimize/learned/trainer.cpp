// VisPCO training loop: teacher cache, STE student forward, KL + Augmented Lagrangian, DDP steps (§3.4).
#include "optimize/learned/trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"
#include "cost/timer.h"
#include "optimize/learned/kernels.h"
#include "optimize/learned/soft_prune.h"

namespace vispco::optimize::learned {

namespace {
// Warm-up then cosine decay over all steps of max_epochs (the release's cosine_scheduler).
double scheduled_lr(const SearchOptions& o, int64_t step, int64_t total) {
  const auto warm = static_cast<int64_t>(o.warmup * double(total));
  if (step < warm) return o.lr * double(step + 1) / double(warm);
  const double t = total > warm ? double(step - warm) / double(std::max<int64_t>(1, total - warm - 1)) : 1.0;
  return o.min_lr + (o.lr - o.min_lr) * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, t)));
}
}  // namespace

at::Tensor predict_keep_fractions(Predictor& g, const KernelConfig& kernel, const PromptBatch& batch,
                                  const at::Tensor& budget, int64_t n_layers, int64_t first_layer) {
  auto raw = g->forward(batch.state.hidden, batch.pool, budget);
  return keep_fractions(kernel, raw, n_layers, first_layer);
}

nlohmann::json EpochReport::to_json() const {
  using R = EpochReport;
  // clang-format off
  static const JsonFields<R> fields("epoch report", {
      {"epoch", &R::epoch}, {"steps", &R::steps}, {"train_kl", &R::train_kl}, {"train_abs_c", &R::train_abs_c},
      {"val_abs_c", &R::val_abs_c}, {"val_mean_c", &R::val_mean_c}, {"mu", &R::mu},
      {"lambda_min", &R::lambda_min}, {"lambda_max", &R::lambda_max}, {"mu_grew", &R::mu_grew},
      {"converged", &R::converged}, {"lr", &R::lr}, {"val_group_c", &R::val_group_c},
      {"seconds", &R::seconds}});
  // clang-format on
  return fields.write(*this);
}

nlohmann::json SearchResult::to_json() const {
  auto e = nlohmann::json::array();
  for (const auto& r : epochs) e.push_back(r.to_json());
  return {{"epochs", e},
          {"n_epochs", epochs.size()},
          {"converged", converged},
          {"selected_epoch", selected_epoch},
          {"selected_val_abs_c", selected_val_abs_c},
          {"teacher_seconds", teacher_seconds},
          {"train_seconds", train_seconds}};
}

struct SearchTrainer::State {
  VisionLanguageModel* model = nullptr;
  SearchOptions opts;
  DataParallel* ddp = nullptr;
  Predictor g{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt;
  std::unique_ptr<AugmentedLagrangian> al;
  std::unique_ptr<FlopsConstraint> flops;
  std::unique_ptr<Scorer> scorer;  // the registry's scorer opts.scorer
  SoftThresholdSelector selector;  // opts.threshold
  int64_t n_layers = 0, first_layer = 1;
  int64_t epoch = 0;  // epochs done
  bool teacher_ready = false;
  double teacher_seconds = 0;
  std::vector<at::Tensor> teacher_logp;   // per training sample [A, V] fp32
  std::vector<PromptSample> train_cache;  // per training sample, visual tokens encoded (no pixels)
  std::vector<PromptBatch> val_batches;   // prompts only
  // The epoch with the lowest validation mean |c| so far, and g_φ's weights after it.
  int64_t best_epoch = 0;
  double best_abs_c = 0;
  std::vector<at::Tensor> best_weights;

  std::vector<at::Tensor> weights() {
    auto w = g->parameters();
    for (auto& b : g->buffers()) w.push_back(b);
    return w;
  }
  void remember_if_best(const EpochReport& r) {
    if (std::isnan(r.val_abs_c) || (best_epoch > 0 && !(r.val_abs_c < best_abs_c))) return;
    best_epoch = r.epoch;
    best_abs_c = r.val_abs_c;
    best_weights.clear();
    for (const auto& w : weights()) best_weights.push_back(w.detach().clone());
  }
  void restore_best() {
    at::NoGradGuard no_grad;
    auto w = weights();
    for (size_t i = 0; i < w.size(); ++i) w[i].copy_(best_weights[i]);
  }

  std::vector<PromptSample> train_samples(const std::vector<int64_t>& idx) {
    std::vector<PromptSample> out;
    for (auto i : idx) out.push_back(train_cache[i]);
    return out;
  }

  at::Tensor answer_logp(const at::Tensor& h, const PromptBatch& batch, int64_t b) {
    auto& lm = model->language_model();
    auto rows = h[b].index_select(0, batch.predict_pos[b]);  // [A, D]
    return at::log_softmax(lm->logits(rows), -1);            // [A, V] fp32
  }

  void cache_teacher() {
    Stopwatch sw;
    teacher_logp.assign(opts.n_train, {});
    train_cache.clear();
    auto& lm = model->language_model();
    for (int64_t start = 0; start < opts.n_train; start += opts.batch) {
      std::vector<int64_t> idx;
      std::vector<PromptSample> ps;
      for (int64_t i = start; i < std::min(opts.n_train, start + opts.batch); ++i) {
        idx.push_back(i);
        ps.push_back(synthvqa_prompt_sample(*model, opts.train_seed, uint64_t(i), true));
      }
      encode_visual(*model, ps);  // once: images are rendered and encoded for the teacher only
      train_cache.insert(train_cache.end(), ps.begin(), ps.end());
      auto batch = make_prompt_batch(*model, ps);
      at::NoGradGuard no_grad;
      KvCache cache(n_layers);
      auto h = lm->forward(batch.state, cache);
      for (size_t b = 0; b < idx.size(); ++b)
        teacher_logp[idx[b]] = answer_logp(h, batch, int64_t(b)).detach();
    }
    // Validation prompts (no answers), for the constraint only.
    for (int64_t start = 0; start < opts.n_val; start += opts.batch) {
      std::vector<PromptSample> ps;
      for (int64_t i = start; i < std::min(opts.n_val, start + opts.batch); ++i)
        ps.push_back(synthvqa_prompt_sample(*model, opts.val_seed, uint64_t(i), false));
      val_batches.push_back(make_prompt_batch(*model, ps));
    }
    teacher_seconds = sw.ms() / 1000.0;
    teacher_ready = true;
  }

  // Constraint values of every validation prompt at every training budget, eval mode.
  std::pair<at::Tensor, at::Tensor> validation_constraint() {
    g->eval();
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> cs, gs;
    const auto nb = static_cast<int64_t>(opts.train_budgets.size());
    for (const auto& vb : val_batches) {
      const int64_t B = vb.state.hidden.size(0);
      for (int64_t k = 0; k < nb; ++k) {
        auto budget = at::full({B}, opts.train_budgets[k], at::kFloat);
        auto R = predict_keep_fractions(g, opts.kernel, vb, budget, n_layers, first_layer);
        cs.push_back(flops->constraint(vb.n_text, R.cpu(), budget));
        gs.push_back(at::full({B}, k, at::kLong));
      }
    }
    g->train();
    return {at::cat(cs), at::cat(gs)};
  }
};

SearchTrainer::SearchTrainer(VisionLanguageModel& model, SearchOptions opts, DataParallel& ddp)
    : s_(std::make_unique<State>()) {
  opts.validate();
  auto& s = *s_;
  s.model = &model;
  s.opts = opts;
  s.ddp = &ddp;
  const auto& shape = model.shape();
  s.n_layers = shape.n_layers;
  s.first_layer = search_first_layer(opts);
  if (s.first_layer >= s.n_layers)
    throw InvalidArgument("VisPCO: scorer " + opts.scorer + " from layer " + std::to_string(s.first_layer) +
                          " cannot prune a " + std::to_string(s.n_layers) + "-layer decoder");
  const int64_t global = opts.batch * ddp.world_size();
  if (opts.n_train < global)
    throw InvalidArgument("VisPCO: n_train = " + std::to_string(opts.n_train) +
                          " is below the global batch " + std::to_string(opts.batch) + " × " +
                          std::to_string(ddp.world_size()) + " processes");
  s.flops = std::make_unique<FlopsConstraint>(shape, s.first_layer, opts.floor);
  s.scorer = make_scorer(opts.scorer);
  s.selector = SoftThresholdSelector(opts.threshold);
  PredictorOptions po;
  po.d_model = shape.hidden_size;
  po.n_outputs = n_kernel_params(opts.kernel);
  po.dropout = opts.dropout;
  po.seed = opts.seed;
  s.g = Predictor(po);
  s.g->to(model.context().device);
  s.g->train();
  // Every process starts from rank 0's weights (they are equal by seed already; this makes it a guarantee).
  ddp.broadcast(s.g->parameters());
  s.opt = std::make_unique<torch::optim::AdamW>(
      s.g->parameters(), torch::optim::AdamWOptions(opts.lr).weight_decay(opts.weight_decay));
  s.al = std::make_unique<AugmentedLagrangian>(static_cast<int64_t>(opts.train_budgets.size()), opts.al);
}

SearchTrainer::~SearchTrainer() = default;

Predictor& SearchTrainer::predictor() { return s_->g; }
const AugmentedLagrangian& SearchTrainer::lagrangian() const { return *s_->al; }
const FlopsConstraint& SearchTrainer::flops() const { return *s_->flops; }
const SearchOptions& SearchTrainer::options() const { return s_->opts; }

EpochReport SearchTrainer::epoch() {
  auto& s = *s_;
  if (!s.teacher_ready) s.cache_teacher();
  Stopwatch sw;
  const auto& o = s.opts;
  const int64_t world = s.ddp->world_size(), rank = s.ddp->rank();
  const int64_t global = o.batch * world, steps = o.n_train / global;
  const auto nb = static_cast<int64_t>(o.train_budgets.size());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed * 1000003ULL + uint64_t(s.epoch) + 1);
  auto perm = at::randperm(o.n_train, gen, at::TensorOptions().dtype(at::kLong));
  const int64_t* pv = perm.data_ptr<int64_t>();
  auto& lm = s.model->language_model();
  EpochReport rep;
  rep.epoch = s.epoch + 1;
  double kl_sum = 0, abs_c_sum = 0;
  int64_t n_seen = 0;
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<int64_t> idx;
    for (int64_t j = 0; j < o.batch; ++j) idx.push_back(pv[step * global + rank * o.batch + j]);
    auto batch = make_prompt_batch(*s.model, s.train_samples(idx));
    const int64_t B = static_cast<int64_t>(idx.size());
    std::vector<double> bud;
    std::vector<int64_t> grp;
    for (auto i : idx) {
      grp.push_back((i + s.epoch) % nb);
      bud.push_back(o.train_budgets[grp.back()]);
    }
    auto budget = at::tensor(bud, at::kFloat);
    auto group = at::tensor(grp, at::kLong);
    auto R = predict_keep_fractions(s.g, o.kernel, batch, budget, s.n_layers, s.first_layer);  // [B, L]
    auto c = s.flops->constraint(batch.n_text, R.cpu(), budget);                               // [B] fp64
    SoftPruneHook hook(R, batch.visual_pos, batch.query_pos, s.first_layer, *s.scorer, o.scorer, s.selector,
                       static_cast<uint64_t>(s.epoch * steps + step));
    auto h = lm->forward_gated(batch.state, hook);
    std::vector<at::Tensor> kls;
    for (int64_t b = 0; b < B; ++b) {
      auto ls = s.answer_logp(h, batch, b);
      const auto& lt = s.teacher_logp[idx[b]];
      kls.push_back((lt.exp() * (lt - ls)).sum(-1).mean());
    }
    auto kl = at::stack(kls);  // [B]
    auto loss = o.kl_weight * kl.mean() + s.al->penalty(c, group).to(at::kFloat);
    const double lr = scheduled_lr(o, s.epoch * steps + step, o.max_epochs * steps);
    for (auto& pg : s.opt->param_groups()) static_cast<torch::optim::AdamWOptions&>(pg.options()).lr(lr);
    rep.lr = lr;
    s.opt->zero_grad();
    loss.backward();
    s.ddp->average_gradients(s.g->parameters());
    if (o.clip > 0) torch::nn::utils::clip_grad_norm_(s.g->parameters(), o.clip);
    s.opt->step();
    kl_sum += kl.sum().item<double>();
    abs_c_sum += c.abs().sum().item<double>();
    n_seen += B;
  }
  rep.steps = steps;
  rep.train_kl = n_seen ? kl_sum / n_seen : 0;
  rep.train_abs_c = n_seen ? abs_c_sum / n_seen : 0;
  // Every process holds the same g_φ (the all-reduced gradients are equal everywhere); broadcasting rank 0's
  // weights makes that exact, so every process computes the same validation constraint and AL update.
  s.ddp->broadcast(s.g->parameters());
  auto [cv, gv] = s.validation_constraint();
  auto upd = s.al->update(cv, gv);
  ++s.epoch;
  rep.val_abs_c = upd.mean_abs;
  rep.val_mean_c = cv.mean().item<double>();
  for (int64_t k = 0; k < nb; ++k) rep.val_group_c.push_back(cv.masked_select(gv == k).mean().item<double>());
  rep.mu = s.al->mu();
  const auto& lam = s.al->lambdas();
  rep.lambda_min = *std::min_element(lam.begin(), lam.end());
  rep.lambda_max = *std::max_element(lam.begin(), lam.end());
  rep.mu_grew = upd.mu_grew;
  rep.converged = upd.converged;
  rep.seconds = sw.ms() / 1000.0;
  s.remember_if_best(rep);
  return rep;
}

SearchResult SearchTrainer::run(const std::function<void(const EpochReport&)>& on_epoch) {
  auto& s = *s_;
  SearchResult res;
  if (!s.teacher_ready) s.cache_teacher();
  res.teacher_seconds = s.teacher_seconds;
  Stopwatch sw;
  while (s.epoch < s.opts.max_epochs) {
    auto r = epoch();
    res.epochs.push_back(r);
    if (on_epoch) on_epoch(r);
    if (r.converged && s.epoch >= s.opts.min_epochs) {
      res.converged = true;
      break;
    }
  }
  if (!res.epochs.empty()) {
    res.selected_epoch = res.epochs.back().epoch;
    res.selected_val_abs_c = res.epochs.back().val_abs_c;
    // Weights only: the multipliers, μ and the optimiser state stay those of the last epoch.
    if (s.opts.restore_best && s.best_epoch > 0 && s.best_epoch != res.selected_epoch) {
      s.restore_best();
      res.selected_epoch = s.best_epoch;
      res.selected_val_abs_c = s.best_abs_c;
    }
  }
  res.train_seconds = sw.ms() / 1000.0;
  return res;
}

}  // namespace vispco::optimize::learned
