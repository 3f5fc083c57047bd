// The command-line side of the plan searches (min-k, budget, grid): the shared flags and every plan search's
// section flags into one OptimizeOptions, then the optimize job (run_optimize()) on the model, its report
// (optimize.json, optimize.md, gnuplot plots) and the terminal summary.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/context.h"
#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/run_key.h"
#include "model/family.h"
#include "model/vlm.h"
#include "optimize/job_flags.h"
#include "optimize/plan_evaluator.h"
#include "optimize/plots.h"
#include "optimize/searches.h"
#include "optimize/sweep_group.h"

namespace vispco::optimize {
namespace {

class PlanSearchMethod final : public SearchMethod {
 public:
  explicit PlanSearchMethod(std::string name) : name_(std::move(name)) {}

  void add_flags(SearchFlags& flags) override {
    add_job_flags(flags, job_);
    // Every section, not only this search's: OptimizeOptions (and optimize.json) holds them all, and each is
    // checked whichever search runs.
    for (const auto& e : search_registry())
      if (e.plan) e.plan->add_flags(flags, options_);
    flags
        .option(
            "--keep-as", &options_.keep_as,
            "min-k/budget/grid: one-stage templates vary a count K or a keep ratio of each image's own N_v "
            "('fastv:layer=2' becomes 'fastv:layer=2,keep={P}%'): auto (ratio for models whose images make "
            "their own N_v — LLaVA-NeXT, Qwen2-VL, Qwen2.5-VL —, count for LLaVA-1.5), ratio or count")
        ->capture_default_str();
    add_sweep_flags(flags, &sweep_);
  }

  void run(const SearchFlags& flags, std::ostream& out) override {
    const JobFlags& a = job_;
    const PlanSearch& search = find_plan_search(name_);
    OptimizeOptions o = options_;
    o.method = name_;
    std::tie(o.epsilon, o.epsilon_absolute) = job_epsilon(a, flags);
    o.templates = search.templates(name_, a);
    o.evaluate_test = !a.no_test;
    o.confidence = a.confidence;
    o.epsilon_per_family = a.epsilon_per_family;
    o.min_family_n = a.min_family_n;
    o.min_speedup = a.min_speedup;
    o.timing_factor = a.timing_factor;
    if (a.limit_calib < 0 || a.limit_test < 0)
      throw InvalidArgument("optimize: --limit-calib and --limit-test must be ≥ 0 (0 = all)");
    const size_t batch = job_batch(a);
    o.validate();
    require_path(a.model, "--model");
    require_path(a.calib, "--calib");
    if (o.evaluate_test) {
      if (a.test.empty()) throw InvalidArgument("optimize: --test DIR is required (or pass --no-test)");
      require_path(a.test, "--test");
    }
    const ModelShape shape = load_model_shape(a.model);
    o.validate(shape);  // templates, K values: before the slow steps
    if (!a.no_plots) check_gnuplot(a.gnuplot);

    // Under a launcher (torchrun, srun, mpirun): every rank runs the same search; each evaluation's samples
    // are shared (rank 0 writes the store and the report). Joined first: a bad address fails fast.
    const LaunchFromEnvironment launch = launch_from_environment();
    const auto group = SweepGroup::join(launch.env, sweep_, launch.test_exit_after_items);
    const bool main_rank = !group || group->sharing().is_main();

    DtypeChoice dtype_choice;
    const RunContext ctx =
        inference_context(rank_device(a.device, launch.env), a.dtype, a.threads, &dtype_choice);
    const OptimizeLog log = [base = stderr_log(), prefix = group ? group->sharing().log_prefix() : ""](
                                const std::string& line) { base(prefix + line); };

    const eval::Dataset calib = eval::load_dataset(a.calib);
    const eval::Dataset test = o.evaluate_test ? eval::load_dataset(a.test) : calib;
    const std::string model_hash = eval::model_folder_hash(a.model);
    auto model = VisionLanguageModel::load(a.model, ctx);

    ModelEvalSettings st;
    st.limit_calib = static_cast<size_t>(a.limit_calib);
    st.limit_test = static_cast<size_t>(a.limit_test);
    st.batch_size = batch;
    st.store_path = store_or_default(a.store, a.out);
    eval::ProgressMode pm = eval::parse_progress_mode(a.progress);
    if (pm == eval::ProgressMode::kAuto) pm = isatty(2) ? eval::ProgressMode::kBar : eval::ProgressMode::kOff;
    st.progress = a.json || !main_rank ? eval::ProgressMode::kOff : pm;
    st.sharing = group ? &group->sharing() : nullptr;
    st.log = log;
    st.env.model_dir = a.model;
    ModelPlanEvaluator evaluator(model, model_hash, calib, test, st);

    OptimizeReport rep = run_optimize(o, evaluator, log);
    if (group) group->sharing().finish();
    if (!main_rank) return;  // rank 0 writes the report and prints the summary
    rep.inputs = {{"model", a.model},
                  {"model_hash", model_hash},
                  {"calib", a.calib},
                  {"calib_hash", calib.hash},
                  {"limit_calib", a.limit_calib},
                  {"test", o.evaluate_test ? a.test : ""},
                  {"test_hash", o.evaluate_test ? test.hash : ""},
                  {"limit_test", a.limit_test},
                  {"store", st.store_path},
                  {"dtype", dtype_choice.describe()},
                  {"batch", a.batch}};
    write_report(rep, a.out);
    if (!a.no_plots) {
      rep.plots = write_plots(rep, a.out, a.gnuplot);
      write_report(rep, a.out);  // again, with the plot list
    }
    if (a.json) {
      out << rep.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return;
    }
    out << rep.summary() << "wrote " << a.out << "/optimize.{json,md}"
        << (rep.plots.empty() ? "" : ", " + a.out + "/plots/*.png") << "; store " << st.store_path << "\n";
    std::fprintf(stderr, "dtype: %s\n",
                 dtype_choice.describe().c_str());  // after success: errors stay one line
  }

 private:
  std::string name_;
  JobFlags job_;
  OptimizeOptions options_;  // the sections' flags land here
  SweepFlags sweep_;
};

}  // namespace

std::unique_ptr<SearchMethod> make_plan_search_method(const std::string& name) {
  return std::make_unique<PlanSearchMethod>(name);
}

}  // namespace vispco::optimize
