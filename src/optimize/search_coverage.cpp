// `vispco optimize --method coverage`, the registry row (search_method.h): the ε-coverage experiment
// (coverage_run.h) with the rule of min-k and grid — its flags, their checks and its run, writing
// coverage.{json,md}.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/context.h"
#include "core/errors.h"
#include "core/text_file.h"
#include "eval/dataset.h"
#include "eval/run_key.h"
#include "model/family.h"
#include "model/vlm.h"
#include "optimize/coverage_run.h"
#include "optimize/job_flags.h"
#include "optimize/searches.h"
#include "optimize/sweep_group.h"
#include "prune/auto_keep/auto_keep.h"

namespace vispco::optimize {
namespace {

namespace fs = std::filesystem;
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;

class CoverageMethod final : public SearchMethod {
 public:
  void add_flags(SearchFlags& flags) override {
    add_job_flags(flags, job_);
    flags.option("--train", &pool_, "coverage: the pool the calibration subsets are drawn from");
    flags.option("--ladder", &ladder_,
                 "coverage: comma-separated K rungs (default 36,64,96,128,144,192,256,288,384)");
    flags.option("--limit-train", &limit_pool_, "coverage: first N pool samples (0 = all)");
    flags.option("--coverage-draws", &draws_, "coverage: re-drawn calibration subsets")
        ->capture_default_str();
    flags.flag("--with-replacement", &with_replacement_,
               "coverage: draw each subset with replacement (a bootstrap of the pool)");
    flags.option("--seed", &seed_, "coverage: seed of the draws")->capture_default_str();
    add_sweep_flags(flags, &sweep_);
  }

  void run(const SearchFlags& flags, std::ostream& out) override {
    const JobFlags& a = job_;
    CoverageRunOptions o;
    const auto templates = scorer_templates("coverage", a, false);
    if (templates.size() != 1)
      throw InvalidArgument("optimize --method coverage: give exactly one --template");
    o.template_text = templates[0];
    o.ladder = parse_int_list(ladder_.empty() ? "36,64,96,128,144,192,256,288,384" : ladder_, "--ladder");
    auto& c = o.coverage;
    std::tie(c.epsilon, c.absolute) = job_epsilon(a, flags);
    if (a.limit_calib < 0 || a.limit_test < 0 || limit_pool_ < 0 || draws_ < 1 || a.min_family_n < 1)
      throw InvalidArgument(
          "optimize --method coverage: --limit-* must be ≥ 0, --coverage-draws and --min-family-n ≥ 1");
    c.confidence = a.confidence > 0 ? a.confidence : 0.9;
    c.epsilon_per_family = a.epsilon_per_family;
    c.min_family_n = static_cast<size_t>(a.min_family_n);
    c.n_calib = a.limit_calib > 0 ? static_cast<size_t>(a.limit_calib) : 500;
    c.draws = static_cast<size_t>(draws_);
    c.with_replacement = with_replacement_;
    c.seed = static_cast<uint64_t>(seed_);
    o.limit_pool = static_cast<size_t>(limit_pool_);
    o.limit_test = static_cast<size_t>(a.limit_test);
    o.batch_size = job_batch(a);
    o.store_path = store_or_default(a.store, a.out);
    o.validate();
    if (pool_.empty())
      throw InvalidArgument(
          "optimize --method coverage: --train DIR is required (the pool calibration subsets are "
          "drawn from: vispco data synth --seed S --count N --out DIR)");
    if (a.test.empty()) throw InvalidArgument("optimize: --test DIR is required");
    for (const auto& [path, flag] : {std::pair{a.model, "--model"}, {pool_, "--train"}, {a.test, "--test"}})
      require_path(path, flag);
    const ModelShape shape = load_model_shape(a.model);
    parse_auto_keep(auto_keep_text(o.template_text), shape);
    // Under a launcher (torchrun, srun, mpirun): every rung's samples are shared (coverage_run.h); rank 0
    // writes the store and the report. Joined before the slow steps: a bad address fails fast.
    const LaunchFromEnvironment launch = launch_from_environment();
    const auto group = SweepGroup::join(launch.env, sweep_, launch.test_exit_after_items);
    DtypeChoice dtype_choice;
    const RunContext ctx =
        inference_context(rank_device(a.device, launch.env), a.dtype, a.threads, &dtype_choice);
    const eval::Dataset pool = eval::load_dataset(pool_), test = eval::load_dataset(a.test);
    const std::string model_hash = eval::model_folder_hash(a.model);
    auto model = VisionLanguageModel::load(a.model, ctx);
    const auto log = [base = stderr_log(), prefix = group ? group->sharing().log_prefix() : ""](
                         const std::string& line) { base(prefix + line); };
    auto rep =
        run_coverage(model, a.model, model_hash, pool, test, o, log, group ? &group->sharing() : nullptr);
    if (group) {
      group->sharing().finish();
      if (!group->sharing().is_main()) return;  // the same report; rank 0 writes it
    }
    rep.inputs = {{"model", a.model},      {"model_hash", model_hash},
                  {"pool", pool_},         {"pool_hash", pool.hash},
                  {"test", a.test},        {"test_hash", test.hash},
                  {"store", o.store_path}, {"dtype", dtype_choice.describe()}};
    fs::create_directories(a.out);
    write_text_atomically((fs::path(a.out) / "coverage.json").string(),
                          rep.to_json().dump(2, ' ', false, kReplace) + "\n");
    write_text_atomically((fs::path(a.out) / "coverage.md").string(), rep.to_markdown());
    if (a.json) {
      out << rep.to_json().dump(-1, ' ', false, kReplace) << "\n";
      return;
    }
    out << rep.summary() << "wrote " << a.out << "/coverage.{json,md}\n";
    std::fprintf(stderr, "dtype: %s\n", dtype_choice.describe().c_str());
  }

 private:
  JobFlags job_;
  std::string pool_, ladder_;
  int64_t limit_pool_ = 0, draws_ = 500, seed_ = 0;
  bool with_replacement_ = false;
  SweepFlags sweep_;
};

}  // namespace

std::unique_ptr<SearchMethod> make_coverage_method() { return std::make_unique<CoverageMethod>(); }

}  // namespace vispco::optimize
