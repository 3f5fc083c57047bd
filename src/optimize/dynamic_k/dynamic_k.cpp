// The dynamic-K search: ladder tables, labels, predictor, τ on validation, test report (see dynamic_k.h).
#include "optimize/dynamic_k/dynamic_k.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "core/errors.h"
#include "core/text_file.h"
#include "cost/timer.h"
#include "eval/distributed/shared_eval.h"
#include "eval/evaluator.h"
#include "eval/metrics.h"
#include "optimize/confidence.h"
#include "optimize/dynamic_k/auto_keep_eval.h"
#include "optimize/dynamic_k/k_features.h"
#include "optimize/dynamic_k/ladder_eval.h"
#include "optimize/epsilon_coverage.h"
#include "optimize/plan_flops.h"
#include "optimize/plots.h"
#include "prune/auto_keep/auto_keep.h"
#include "prune/bound_plan.h"
#include "prune/plan_hook.h"

namespace vispco::optimize {

namespace {

namespace fs = std::filesystem;
using Log = std::function<void(const std::string&)>;

std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

struct SplitTable {
  LadderTable table;
  at::Tensor features;
  double unpruned_prefill_ms = 0;
};

// The split's ladder table (under a launcher: one shared sweep per rung, every rank takes part).
SplitTable build_table(VisionLanguageModel& m, const std::string& hash, const eval::Dataset& ds, size_t limit,
                       const AutoKeepPlan& plan, const std::vector<int64_t>& ladder, const DynamicKOptions& o,
                       const ScorerEnv& env, const std::string& split, const Log& log,
                       eval::WorkSharing* sharing) {
  auto le = evaluate_ladder(
      m, hash, ds, limit, plan, ladder, o.batch_size, o.store_path, env,
      [&](const std::string& line) {
        if (log) log("  " + split + " " + line);
      },
      sharing);
  return {std::move(le.table), {}, le.unpruned_prefill_ms};
}

// The K features of the table's samples (one vision-tower pass each): rank 0's alone, so called only after
// the last shared sweep — a worker waiting for a next sweep would otherwise wait out --dist-timeout.
void add_features(VisionLanguageModel& m, const eval::Dataset& ds, const DynamicKOptions& o, SplitTable& st) {
  std::vector<size_t> idx(st.table.n());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  st.features = dataset_k_features(m, ds, idx, o.batch_size).features;
}

bool within(double acc, double ref, const DynamicKOptions& o) {
  return o.epsilon_absolute ? acc >= ref - o.epsilon - 1e-12 : acc >= (1.0 - o.epsilon) * ref - 1e-12;
}

// Per-sample scores of an assignment, and of the unpruned rung.
std::vector<double> scores_at(const LadderTable& t, const std::vector<int>& rungs) {
  std::vector<double> s(t.n());
  for (size_t i = 0; i < t.n(); ++i) s[i] = t.score[i][rungs.empty() ? t.rungs() - 1 : rungs[i]];
  return s;
}

// Static accuracy at FLOPs ratio x, linear between rungs (sorted by FLOPs); NaN outside.
double static_accuracy_at(const std::vector<DynamicKPoint>& pts, double x) {
  for (size_t i = 1; i < pts.size(); ++i) {
    const auto &a = pts[i - 1].figures, &b = pts[i].figures;
    if (x >= a.flops_ratio - 1e-12 && x <= b.flops_ratio + 1e-12) {
      const double w =
          b.flops_ratio > a.flops_ratio ? (x - a.flops_ratio) / (b.flops_ratio - a.flops_ratio) : 0.0;
      return a.accuracy + w * (b.accuracy - a.accuracy);
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// Smallest FLOPs ratio at which the static curve's upper envelope reaches `acc`; NaN when it never does.
double static_flops_for(const std::vector<DynamicKPoint>& pts, double acc) {
  double best = -1;
  for (size_t i = 0; i < pts.size(); ++i) {
    const auto& b = pts[i].figures;
    if (b.accuracy >= acc) {
      if (i == 0) return b.flops_ratio;
      const auto& a = pts[i - 1].figures;
      const double lo = std::max(best, a.accuracy);
      if (lo >= acc) return a.flops_ratio;
      const double w = b.accuracy > lo ? (acc - lo) / (b.accuracy - lo) : 1.0;
      return a.flops_ratio + w * (b.flops_ratio - a.flops_ratio);
    }
    best = std::max(best, b.accuracy);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

std::string plot_accuracy_vs_flops(const DynamicKReport& r, const std::string& png) {
  std::vector<std::pair<double, double>> st;
  for (const auto& p : r.test_static) st.emplace_back(p.figures.flops_ratio, 100 * p.figures.accuracy);
  std::string gp = gnuplot_header(png, "dynamic vs static K: " + r.options.template_text + " (test split)",
                                  "mean LLM prefill FLOPs ratio", "accuracy (%)");
  gp += gnuplot_block("static", st);
  gp += gnuplot_block("dyn", {{r.test_dynamic.flops_ratio, 100 * r.test_dynamic.accuracy}});
  gp += gnuplot_block("oracle", {{r.test_oracle.flops_ratio, 100 * r.test_oracle.accuracy}});
  gp +=
      "set logscale x\nplot $static using 1:2 with linespoints pt 7 lc rgb 'gray40' title 'static K "
      "(ladder)', "
      "$dyn using 1:2 with points pt 9 ps 2 lc rgb 'red' title 'dynamic K (predictor)', "
      "$oracle using 1:2 with points pt 5 ps 1.5 lc rgb 'blue' title 'oracle K (labels)'\n";
  return gp;
}

std::string plot_k_distribution(const DynamicKReport& r,
                                const std::map<std::string, std::vector<size_t>>& hist,
                                const std::string& png) {
  std::string gp = gnuplot_header(png, "predicted K per family: " + r.options.template_text + " (test split)",
                                  "K (kept visual tokens)", "share of the family's samples (%)");
  std::string plot = "set logscale x 2\nplot ";
  int i = 0;
  for (const auto& [fam, h] : hist) {
    size_t total = 0;
    for (auto c : h) total += c;
    std::vector<std::pair<double, double>> xy;
    for (size_t k = 0; k < h.size(); ++k)
      xy.emplace_back(static_cast<double>(r.ladder[k]), total ? 100.0 * h[k] / total : 0.0);
    const std::string name = "f" + std::to_string(i++);
    gp += gnuplot_block(name, xy);
    plot += "$" + name + " using 1:2 with linespoints title " + gnuplot_quoted(fam) + ", ";
  }
  return gp + plot.substr(0, plot.size() - 2) + "\n";
}

std::string pct(double x) { return std::isfinite(x) ? fmt("%.1f", 100 * x) : "n/a"; }

}  // namespace

void DynamicKOptions::validate() const {
  if (template_text.empty())
    throw InvalidArgument("dynamic-k: --template is required (e.g. divprune:layer=0)");
  if (ladder.empty()) throw InvalidArgument("dynamic-k: the K ladder is empty");
  for (size_t i = 0; i < ladder.size(); ++i) {
    if (ladder[i] < 1) throw InvalidArgument("dynamic-k: ladder values must be ≥ 1");
    if (i && ladder[i] <= ladder[i - 1])
      throw InvalidArgument("dynamic-k: the ladder must be strictly ascending");
  }
  if (epsilon_absolute ? !(epsilon >= 0 && epsilon <= 1) : !(epsilon >= 0 && epsilon < 1))
    throw InvalidArgument("dynamic-k: epsilon " + std::to_string(epsilon) + " out of range");
  k_target_from_name(target);
  if (hidden < 1) throw InvalidArgument("dynamic-k: hidden width must be ≥ 1");
  if (confidence != 0.0 && !(confidence >= 0.5 && confidence < 1.0))
    throw InvalidArgument("dynamic-k: --confidence must be 0 (off) or in [0.5, 1)");
  if (batch_size < 1) throw InvalidArgument("dynamic-k: batch must be ≥ 1");
  if (store_path.empty()) throw InvalidArgument("dynamic-k: a result store (--store) is required");
}

nlohmann::json DynamicKReport::to_json() const {
  nlohmann::json st = nlohmann::json::array();
  for (const auto& p : test_static)
    st.push_back({{"name", p.name}, {"figures", optimize::to_json(p.figures)}});
  nlohmann::json sweep = nlohmann::json::array();
  for (const auto& s : tau_sweep) sweep.push_back({{"tau", s[0]}, {"accuracy", s[1]}, {"flops_ratio", s[2]}});
  return {
      {"method", "dynamic-k"},
      {"template", options.template_text},
      {"ladder", ladder},
      {"ladder_unit", options.permille ? "permille" : "count"},
      {"epsilon", options.epsilon},
      {"epsilon_absolute", options.epsilon_absolute},
      {"target", options.target},
      {"inputs", inputs},
      {"predictor",
       {{"path", predictor_path},
        {"parameters", n_parameters},
        {"hidden", options.hidden},
        {"train_loss_before", training.loss_before},
        {"train_loss_after", training.loss_after},
        {"holdout_loss", training.val_loss},
        {"kept_step", training.kept_step},
        {"n_train", n_train},
        {"n_train_labelled", n_train_labelled},
        {"n_holdout", n_holdout},
        {"label_histogram", label_histogram},
        {"tau", tau},
        {"tau_met_epsilon", tau_met_epsilon},
        {"predict_ms_per_sample", predict_ms_per_sample},
        {"unpruned_prefill_ms_per_sample", unpruned_prefill_ms_per_sample}}},
      {"validation",
       {{"unpruned_accuracy", val_unpruned_accuracy},
        {"dynamic", optimize::to_json(val_dynamic)},
        {"loss_bound", val_loss_bound},
        {"tau_sweep", sweep}}},
      {"epsilon_coverage", coverage},
      {"test",
       {{"static", st},
        {"static_chosen_on_validation", static_chosen_rung >= 0 ? test_static[static_chosen_rung].name : ""},
        {"dynamic", optimize::to_json(test_dynamic)},
        {"oracle", optimize::to_json(test_oracle)},
        {"static_accuracy_at_dynamic_flops", num(static_accuracy_at_dynamic_flops)},
        {"static_flops_at_dynamic_accuracy", num(static_flops_at_dynamic_accuracy)},
        {"end_to_end", end_to_end}}},
      {"plots", plots},
      {"wall_s", wall_s}};
}

std::string DynamicKReport::summary() const {
  const std::string keep_name = options.permille ? "keep ‰" : "K";
  std::ostringstream s;
  s << "dynamic K for " << options.template_text << ": tau " << fmt("%.3f", tau) << ", test accuracy "
    << pct(test_dynamic.accuracy) << " % at mean " << keep_name << " " << fmt("%.1f", test_dynamic.mean_keep)
    << ", FLOPs ratio " << fmt("%.3f", test_dynamic.flops_ratio) << "\n";
  s << "static at the same FLOPs: " << pct(static_accuracy_at_dynamic_flops)
    << " %; static FLOPs for the same accuracy: "
    << (std::isfinite(static_flops_at_dynamic_accuracy) ? fmt("%.3f", static_flops_at_dynamic_accuracy)
                                                        : "n/a")
    << "; oracle: " << pct(test_oracle.accuracy) << " % at FLOPs " << fmt("%.3f", test_oracle.flops_ratio)
    << "\n";
  return s.str();
}

std::string DynamicKReport::to_markdown() const {
  const std::string keep_name = options.permille ? "keep ‰" : "K";
  std::ostringstream s;
  s << "# vispco optimize --method dynamic-k\n\n";
  s << "- template: `" << options.template_text << "`, ladder "
    << (options.permille ? "keep ratio (‰ of each image's N_v)" : "K") << " ∈ {";
  for (size_t i = 0; i < ladder.size(); ++i) s << (i ? ", " : "") << ladder[i];
  s << "}, label target: " << options.target << ", ε = " << options.epsilon
    << (options.epsilon_absolute ? " (absolute)" : " (relative)") << "\n";
  s << "- inputs: `" << inputs.dump() << "`\n";
  s << "- predictor: `" << predictor_path << "`, " << n_parameters << " parameters, trained on "
    << n_train_labelled << " labelled of " << n_train << " samples, every fifth (" << n_holdout
    << ") held out for early stopping (loss "
    << fmt("%.4f → %.4f, held-out %.4f", training.loss_before, training.loss_after, training.val_loss)
    << " at step " << training.kept_step << " of " << options.training.steps << "); labels per rung:";
  for (size_t i = 0; i < label_histogram.size(); ++i) s << " " << ladder[i] << ":" << label_histogram[i];
  s << "\n- τ = " << fmt("%.4f", tau)
    << (tau_met_epsilon ? "" : " (no τ held ε on validation: every sample near N_v)")
    << " (validation: unpruned " << pct(val_unpruned_accuracy) << " %, dynamic " << pct(val_dynamic.accuracy)
    << " % at FLOPs " << fmt("%.3f", val_dynamic.flops_ratio) << ")\n";
  s << "- prediction cost: " << fmt("%.3f", predict_ms_per_sample)
    << " ms per sample (features + MLP, the tower's "
    << "output re-used) = "
    << fmt("%.2f", unpruned_prefill_ms_per_sample > 0
                       ? 100 * predict_ms_per_sample / unpruned_prefill_ms_per_sample
                       : 0)
    << " % of the unpruned prefill (" << fmt("%.1f", unpruned_prefill_ms_per_sample) << " ms)\n\n";
  s << "## Test split\n\n| plan | accuracy % | mean " << keep_name
    << " | LLM FLOPs ratio |\n|---|---:|---:|---:|\n";
  for (size_t i = 0; i < test_static.size(); ++i) {
    const auto& p = test_static[i];
    s << "| " << p.name << (static_cast<int>(i) == static_chosen_rung ? " (chosen on validation)" : "")
      << " | " << pct(p.figures.accuracy) << " | " << fmt("%.0f", p.figures.mean_keep) << " | "
      << fmt("%.3f", p.figures.flops_ratio) << " |\n";
  }
  s << "| **dynamic** | **" << pct(test_dynamic.accuracy) << "** | " << fmt("%.1f", test_dynamic.mean_keep)
    << " | " << fmt("%.3f", test_dynamic.flops_ratio) << " |\n";
  s << "| oracle (labels) | " << pct(test_oracle.accuracy) << " | " << fmt("%.1f", test_oracle.mean_keep)
    << " | " << fmt("%.3f", test_oracle.flops_ratio) << " |\n\n";
  s << "At the dynamic plan's mean FLOPs the static curve reaches " << pct(static_accuracy_at_dynamic_flops)
    << " % (linear between rungs); reaching the dynamic accuracy statically takes FLOPs ratio "
    << (std::isfinite(static_flops_at_dynamic_accuracy) ? fmt("%.3f", static_flops_at_dynamic_accuracy)
                                                        : "n/a");
  if (std::isfinite(static_flops_at_dynamic_accuracy) && static_flops_at_dynamic_accuracy > 0) {
    const double saving = 1 - test_dynamic.flops_ratio / static_flops_at_dynamic_accuracy;
    s << " (dynamic uses " << fmt("%.1f", 100 * std::abs(saving)) << (saving >= 0 ? " % fewer)" : " % more)");
  }
  s << ".\n\n## Per family (test)\n\n| family | n | unpruned % | dynamic % | retention | mean " << keep_name
    << " | FLOPs "
       "ratio | "
       "oracle mean "
    << keep_name << " |\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [fam, f] : test_dynamic.per_family) {
    const auto& o = test_oracle.per_family.at(fam);
    s << "| " << fam << " | " << f.n << " | " << pct(f.unpruned_accuracy) << " | " << pct(f.accuracy) << " | "
      << (f.unpruned_accuracy > 0 ? fmt("%.3f", f.accuracy / f.unpruned_accuracy) : "n/a") << " | "
      << fmt("%.1f", f.mean_keep) << " | " << fmt("%.3f", f.flops_ratio) << " | " << fmt("%.1f", o.mean_keep)
      << " |\n";
  }
  if (!coverage.is_null()) {
    s << "\n## ε on the test split over re-drawn calibration subsets (static min-K on the ladder)\n\n";
    s << coverage.at("draws").get<size_t>() << " subsets of " << coverage.at("n_calib").get<size_t>()
      << " samples drawn from the training split; on each the smallest ladder K within ε by the point "
         "estimate, and by "
         "the upper "
      << fmt("%.2f", coverage.at("confidence").get<double>())
      << " confidence bound on the paired loss (Clopper–Pearson on samples lost and gained). Test-split loss "
         "above ε in "
      << pct(coverage.at("violation_rate_point").get<double>())
      << " % of the draws with the point estimate (mean K "
      << fmt("%.1f", coverage.at("mean_keep_point").get<double>()) << "), "
      << pct(coverage.at("violation_rate_bound").get<double>()) << " % with the bound (mean K "
      << fmt("%.1f", coverage.at("mean_keep_bound").get<double>()) << ").\n";
  }
  s << "\n## End to end (`--plan " << options.template_text << ",keep=auto`)\n\n```\n"
    << end_to_end.dump(1) << "\n```\n";
  if (!plots.empty()) {
    s << "\n";
    for (const auto& p : plots) s << "![" << p << "](" << p << ")\n";
  }
  return s.str();
}

DynamicKReport run_dynamic_k(VisionLanguageModel& model, const std::string& model_dir,
                             const std::string& model_hash, const eval::Dataset& train,
                             const eval::Dataset& val, const eval::Dataset& test,
                             const DynamicKOptions& options, const std::string& out_dir, bool no_plots,
                             const Log& log, eval::WorkSharing* sharing) {
  options.validate();
  Stopwatch wall;
  const auto& shape = model.shape();
  const LadderPlan lp =
      ladder_plan(options.ladder, options.template_text, shape, "dynamic-k", options.permille);
  const AutoKeepPlan& plan = lp.plan;
  DynamicKReport rep;
  rep.options = options;
  rep.options.template_text = plan.template_text;
  rep.ladder = lp.ladder;
  const ScorerEnv env{model_dir};
  const KTarget target = k_target_from_name(options.target);

  // Under a launcher the tables are shared sweeps, all three before anything of rank 0's alone; the rest
  // (features, predictor, τ, end to end) is rank 0's (see dynamic_k.h).
  const bool main = sharing == nullptr || sharing->is_main();
  if (log) log("ladder tables (train, validation, test) …");
  auto tr = build_table(model, model_hash, train, options.limit_train, plan, rep.ladder, options, env,
                        "train", log, sharing);
  auto va = build_table(model, model_hash, val, options.limit_val, plan, rep.ladder, options, env, "val", log,
                        sharing);
  auto te = build_table(model, model_hash, test, options.limit_test, plan, rep.ladder, options, env, "test",
                        log, sharing);
  if (!main) return rep;
  if (log) log("K features (train, validation, test) …");
  for (auto [ds, st] : {std::pair{&train, &tr}, std::pair{&val, &va}, std::pair{&test, &te}})
    add_features(model, *ds, options, *st);
  const int R = static_cast<int>(rep.ladder.size());

  // Labels and training.
  const auto labels = ladder_labels(tr.table, target);
  rep.n_train = labels.size();
  rep.label_histogram.assign(R, 0);
  for (int l : labels)
    if (l >= 0) {
      ++rep.n_train_labelled;
      ++rep.label_histogram[l];
    }
  KPredictorMeta meta;
  meta.template_text = plan.template_text;
  meta.ladder = rep.ladder;
  meta.ladder_unit = options.permille ? "permille" : "count";
  meta.target = options.target;
  meta.n_features = k_feature_width(shape);
  meta.hidden = options.hidden;
  meta.features = kKFeatureRecipe;
  KPredictor pred(meta, options.training.seed);
  rep.n_parameters = pred->n_parameters();
  // Every fifth training sample is held out for early stopping; validation (--calib) is kept for τ alone.
  std::vector<int> fit_labels = labels, holdout_labels(labels.size(), -1);
  for (size_t i = 4; i < labels.size(); i += 5) {
    holdout_labels[i] = labels[i];
    fit_labels[i] = -1;
    ++rep.n_holdout;
  }
  rep.training =
      train_k_predictor(pred, tr.features, fit_labels, options.training, tr.features, holdout_labels);
  if (log)
    log("predictor: " + std::to_string(rep.n_parameters) + " parameters, loss " +
        fmt("%.4f → %.4f, held-out %.4f at step ", rep.training.loss_before, rep.training.loss_after,
            rep.training.val_loss) +
        std::to_string(rep.training.kept_step));

  // τ on validation: the fewest FLOPs within ε of the unpruned accuracy (τ → 0 keeps every token).
  const auto va_full = assignment_figures(va.table, constant_rungs(va.table, R - 1));
  rep.val_unpruned_accuracy = va_full.accuracy;
  double best_flops = 2.0;
  rep.tau = 1e-6;
  rep.tau_met_epsilon = false;
  std::vector<double> taus = {1e-4, 1e-3, 3e-3, 0.01, 0.02, 0.03};
  for (int i = 5; i <= 95; i += 5) taus.push_back(i / 100.0);
  for (double t : {0.97, 0.98, 0.99, 0.995, 0.999}) taus.push_back(t);
  const auto va_ref_scores = scores_at(va.table, {});
  for (const double tau : taus) {
    const auto rungs = pred->predict(va.features, tau);
    const auto f = assignment_figures(va.table, rungs);
    rep.tau_sweep.push_back({tau, f.accuracy, f.flops_ratio});
    const double compared =
        options.confidence > 0
            ? va_full.accuracy -
                  paired_loss_bound(va_ref_scores, scores_at(va.table, rungs), options.confidence).upper
            : f.accuracy;
    if (within(compared, va_full.accuracy, options) && f.flops_ratio < best_flops) {
      best_flops = f.flops_ratio;
      rep.tau = tau;
      rep.tau_met_epsilon = true;
    }
  }
  pred->meta.tau = rep.tau;
  rep.val_dynamic = assignment_figures(va.table, pred->predict(va.features));
  if (options.confidence > 0)
    rep.val_loss_bound =
        paired_loss_bound(va_ref_scores, scores_at(va.table, pred->predict(va.features)), options.confidence)
            .to_json();

  if (options.coverage_draws > 0 && tr.table.n() >= options.coverage_n_calib) {
    CoverageOptions co;
    co.n_calib = options.coverage_n_calib;
    co.draws = options.coverage_draws;
    co.epsilon = options.epsilon;
    co.absolute = options.epsilon_absolute;
    co.confidence = std::max(options.confidence, 0.9);
    rep.coverage = epsilon_coverage(tr.table, te.table, co).to_json();
  }

  // Static rungs: the one chosen on validation is the smallest K within ε there.
  for (int r = 0; r < R; ++r) {
    rep.test_static.push_back({"static " + plan.keep_text(rep.ladder[r]),
                               assignment_figures(te.table, constant_rungs(te.table, r))});
    if (rep.static_chosen_rung < 0 &&
        within(assignment_figures(va.table, constant_rungs(va.table, r)).accuracy, va_full.accuracy, options))
      rep.static_chosen_rung = r;
  }
  const auto test_rungs = pred->predict(te.features);
  rep.test_dynamic = assignment_figures(te.table, test_rungs);
  auto oracle = ladder_labels(te.table, target);
  for (auto& l : oracle)
    if (l < 0) l = 0;  // wrong at every K: the fewest tokens
  rep.test_oracle = assignment_figures(te.table, oracle);
  rep.static_accuracy_at_dynamic_flops = static_accuracy_at(rep.test_static, rep.test_dynamic.flops_ratio);
  rep.static_flops_at_dynamic_accuracy = static_flops_for(rep.test_static, rep.test_dynamic.accuracy);

  // Predictor file, then the keep=auto plan end to end on test.
  fs::create_directories(out_dir);
  rep.predictor_path = (fs::path(out_dir) / "k_predictor.safetensors").string();
  save_k_predictor(rep.predictor_path, pred,
                   {{"model_hash", model_hash},
                    {"train_dataset", train.hash},
                    {"val_dataset", val.hash},
                    {"epsilon", std::to_string(options.epsilon)}});
  {
    AutoKeepPlan auto_plan = plan;
    auto_plan.predictor_file = rep.predictor_path;
    const BoundPlan bound = BoundPlan::bind(auto_plan.to_string(), shape, env);  // the file just written
    eval::EvalOptions eo;
    eo.limit = te.table.n();
    eo.batch_size = options.batch_size;
    eo.store_path = options.store_path;
    const auto e2e = evaluate_auto_keep(model, model_hash, test, eo, bound);
    rep.end_to_end = e2e.to_json();
    rep.end_to_end.erase("report");
    rep.end_to_end["accuracy"] = e2e.report.metrics.overall.accuracy();
    rep.end_to_end["matches_table"] =
        std::abs(e2e.report.metrics.overall.accuracy() - rep.test_dynamic.accuracy) < 1e-9;
    const double n = static_cast<double>(std::max<size_t>(1, e2e.keep.size()));
    rep.predict_ms_per_sample = (e2e.feature_ms + e2e.predictor_ms) / n;
  }
  rep.unpruned_prefill_ms_per_sample = te.unpruned_prefill_ms;
  rep.inputs = {{"model", model_dir},      {"train", train.jsonl_path}, {"val", val.jsonl_path},
                {"test", test.jsonl_path}, {"n_train", tr.table.n()},   {"n_val", va.table.n()},
                {"n_test", te.table.n()}};
  if (!no_plots) {
    std::map<std::string, std::vector<size_t>> hist;
    for (size_t i = 0; i < te.table.n(); ++i) {
      auto& h = hist[te.table.families[i]];
      h.resize(R, 0);
      ++h[test_rungs[i]];
    }
    rep.plots = render_gnuplot({{"dynamic_vs_static", plot_accuracy_vs_flops(rep, "dynamic_vs_static.png")},
                                {"k_per_family", plot_k_distribution(rep, hist, "k_per_family.png")}},
                               out_dir);
  }
  rep.wall_s = wall.ms() / 1000.0;
  write_text_atomically((fs::path(out_dir) / "dynamic_k.json").string(), rep.to_json().dump(2) + "\n");
  write_text_atomically((fs::path(out_dir) / "dynamic_k.md").string(), rep.to_markdown());
  return rep;
}

}  // namespace vispco::optimize
