// `vispco optimize --method dynamic-k`, the registry row (search_method.h): its flags, their checks and its
// run (dynamic_k.h), writing dynamic_k.{json,md} and the K predictor. It needs per-sample outcomes, which the
// plan searches' PlanEvaluator does not give, so it is a job of its own.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/context.h"
#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/run_key.h"
#include "model/family.h"
#include "model/vlm.h"
#include "optimize/dynamic_k/dynamic_k.h"
#include "optimize/job_flags.h"
#include "optimize/plan_template.h"
#include "optimize/plots.h"
#include "optimize/searches.h"
#include "optimize/sweep_group.h"
#include "prune/auto_keep/auto_keep.h"

namespace vispco::optimize {
namespace {

// The default count ladder's shares of LLaVA-1.5's 576 tokens, in ‰ (16/576 = 2.8 %, …, 288/576 = 50 %).
const std::vector<int64_t> kPermilleLadder = {28, 42, 56, 83, 111, 167, 250, 333, 500, 1000};

class DynamicKMethod final : public SearchMethod {
 public:
  void add_flags(SearchFlags& flags) override {
    add_job_flags(flags, job_);
    flags.option("--train", &train_,
                 "dynamic-k: fresh scenes to label and train the K predictor on (--calib validates)");
    flags.option(
        "--ladder", &ladder_,
        "dynamic-k: comma-separated rungs: counts K (default 16,24,32,48,64,96,144,192,288,576) or, "
        "for a keep-ratio ladder, ‰ of each image's N_v (default 28,42,56,83,111,167,250,333,500,1000)");
    flags
        .option(
            "--keep-as", &keep_as_,
            "dynamic-k: the ladder and keep=auto are counts K or keep ratios of each image's own N_v (the "
            "same auto rule)")
        ->capture_default_str();
    flags.option("--target", &target_, "dynamic-k: label target: correct | agree (with the unpruned answer)")
        ->capture_default_str();
    flags.option("--hidden", &hidden_, "dynamic-k: predictor hidden width")->capture_default_str();
    flags.option("--predictor-steps", &predictor_steps_, "dynamic-k: predictor training steps")
        ->capture_default_str();
    flags.option("--limit-train", &limit_train_, "dynamic-k: first N training samples (0 = all)")
        ->capture_default_str();
    add_sweep_flags(flags, &sweep_);
  }

  void run(const SearchFlags& flags, std::ostream& out) override {
    const JobFlags& a = job_;
    DynamicKOptions o;
    const auto templates = scorer_templates("dynamic-k", a, false);
    if (templates.size() != 1)
      throw InvalidArgument("optimize --method dynamic-k: give exactly one --template");
    o.template_text = templates[0];
    const ModelShape shape = load_model_shape(a.model);
    o.permille = keep_as_ratio(parse_keep_as(keep_as_), shape);
    if (o.permille) o.ladder = kPermilleLadder;
    if (!ladder_.empty()) o.ladder = parse_int_list(ladder_, "--ladder");
    std::tie(o.epsilon, o.epsilon_absolute) = job_epsilon(a, flags);
    o.target = target_;
    o.confidence = a.confidence;
    o.hidden = hidden_;
    o.training.steps = predictor_steps_;
    if (a.limit_calib < 0 || a.limit_test < 0 || limit_train_ < 0)
      throw InvalidArgument("optimize: --limit-train, --limit-calib and --limit-test must be ≥ 0 (0 = all)");
    o.limit_train = static_cast<size_t>(limit_train_);
    o.limit_val = static_cast<size_t>(a.limit_calib);
    o.limit_test = static_cast<size_t>(a.limit_test);
    o.batch_size = job_batch(a);
    o.store_path = store_or_default(a.store, a.out);
    o.validate();
    if (train_.empty())
      throw InvalidArgument(
          "optimize --method dynamic-k: --train DIR is required (fresh scenes to label: "
          "vispco data synth --seed S --count N --out DIR)");
    if (a.no_test)
      throw InvalidArgument(
          "optimize --method dynamic-k: the test split is part of its report (no --no-test)");
    if (a.test.empty()) throw InvalidArgument("optimize: --test DIR is required");
    for (const auto& [path, flag] :
         {std::pair{a.model, "--model"}, {train_, "--train"}, {a.calib, "--calib"}, {a.test, "--test"}})
      require_path(path, flag);
    parse_auto_keep(auto_keep_text(o.template_text), shape);
    if (!a.no_plots) check_gnuplot(a.gnuplot);
    // Under a launcher (torchrun, srun, mpirun): the ladder tables are shared sweeps, the rest is rank 0's
    // (dynamic_k.h). Joined before the slow steps: a bad address fails fast.
    const LaunchFromEnvironment launch = launch_from_environment();
    const auto group = SweepGroup::join(launch.env, sweep_, launch.test_exit_after_items);
    const bool main_rank = !group || group->sharing().is_main();
    DtypeChoice dtype_choice;
    const RunContext ctx =
        inference_context(rank_device(a.device, launch.env), a.dtype, a.threads, &dtype_choice);
    const eval::Dataset train = eval::load_dataset(train_), val = eval::load_dataset(a.calib),
                        test = eval::load_dataset(a.test);
    const std::string model_hash = eval::model_folder_hash(a.model);
    auto model = VisionLanguageModel::load(a.model, ctx);
    const auto log = [base = stderr_log(), prefix = group ? group->sharing().log_prefix() : ""](
                         const std::string& line) { base(prefix + line); };
    auto rep = run_dynamic_k(model, a.model, model_hash, train, val, test, o, a.out, a.no_plots, log,
                             group ? &group->sharing() : nullptr);
    if (group) group->sharing().finish();
    if (!main_rank) return;  // rank 0 wrote the predictor and the report
    if (a.json) {
      out << rep.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return;
    }
    out << rep.summary() << "wrote " << a.out << "/dynamic_k.{json,md}, predictor " << rep.predictor_path
        << " (use it: --plan " << rep.options.template_text << ",keep=auto:file=" << rep.predictor_path
        << ", or copy it to " << a.model << "/k_predictor.safetensors)\n";
    std::fprintf(stderr, "dtype: %s\n", dtype_choice.describe().c_str());
  }

 private:
  JobFlags job_;
  std::string train_, ladder_, target_ = "correct", keep_as_ = "auto";
  int64_t hidden_ = 64, predictor_steps_ = 600, limit_train_ = 0;
  SweepFlags sweep_;
};

}  // namespace

std::unique_ptr<SearchMethod> make_dynamic_k_method() { return std::make_unique<DynamicKMethod>(); }

}  // namespace vispco::optimize
