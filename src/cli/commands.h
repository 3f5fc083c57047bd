// The subcommands of `vispco`: each lives in its own cli/cmd_<name>.cpp and registers itself on the app.
// A command's callback throws vispco::Error on bad input; main() prints it as one line and exits 2.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "optimize/search_flags.h"

namespace vispco {
class VisionLanguageModel;
}

namespace vispco::cli {

/// Help text of every command's --model (model/model_source.h resolves it).
inline constexpr const char* kModelHelp = optimize::kModelFlagHelp;

// Each registers one subcommand (its options and callback) on `app`. Keep this list sorted.
void register_bench(CLI::App& app);
void register_data(CLI::App& app);
void register_eval(CLI::App& app);
void register_finetune(CLI::App& app);
void register_generate(CLI::App& app);
void register_hostile_load(CLI::App& app);
void register_init_random(CLI::App& app);
void register_loadtest(CLI::App& app);
void register_optimize(CLI::App& app);
void register_scorer_table(CLI::App& app);
void register_serve(CLI::App& app);
void register_train(CLI::App& app);
void register_train_gate(CLI::App& app);
void register_train_hr(CLI::App& app);
void register_vispco(CLI::App& app);  // `vispco vispco-search`

/// Registers `command` as the search method `method` of the search registry (optimize/search_method.h) alone:
/// its flags and its run, as `vispco optimize --method METHOD` has them (e.g. `vispco vispco-search`).
/// @throws InvalidArgument when `method` is not registered.
void register_search_alias(CLI::App& app, const std::string& command, const std::string& method,
                           const std::string& description);

/// The plan a command runs: `given` when the user named one (warning on stderr when the model was fine-tuned
/// for another plan), else the plan the model folder was fine-tuned for (config.json
/// "vispco"."tuned_for_plan", train/finetune.h; said on stderr), else "none". @throws what reading the config
/// throws.
std::string plan_for_model(const std::string& model_dir, const std::string& given, bool given_explicitly);

/// Help text of --dtype for the commands that resolve it with choose_dtype() (core/context.h).
inline constexpr const char* kDtypeHelp = optimize::kDtypeFlagHelp;
/// Adds --dtype, --device and --threads, writing into the given fields (their current values are the
/// defaults shown by --help). @param dtype_help the --dtype text @param threads_help the --threads text
void add_compute_flags(CLI::App* cmd, std::string* dtype, std::string* device, int* threads,
                       const char* dtype_help = kDtypeHelp,
                       const char* threads_help =
                           "Intra-op threads (0 = the CPUs this process may use: affinity, cgroup quota)");

/// Adds option `name` bound to an unsigned count (e.g. a size_t member of an options struct): the text must
/// be a whole number ≥ 0, else parsing fails with "NAME: must be a whole number ≥ 0, got 'TEXT'" (CLI11 would
/// wrap "-1" to a huge value). @return the option, for chaining.
CLI::Option* add_count_option(CLI::App* cmd, const std::string& name, size_t* target,
                              const std::string& help);

/// --quant / --quant-tower of the inference commands (model/quant.h).
struct QuantFlags {
  std::string quant = "none";  ///< none | int8
  bool tower = false;          ///< also the vision tower and the projector
};
/// Adds --quant and --quant-tower to `cmd`, writing into `*f`.
void add_quant_flags(CLI::App* cmd, QuantFlags* f);
/// Quantises `model` as the flags say and says so on stderr (engine, layers, weight bytes before → after);
/// nothing for "none". @throws InvalidArgument for an unknown --quant or a CUDA model.
void apply_quant(VisionLanguageModel& model, const QuantFlags& f);
/// The result-store model key of a quantised model: `model_hash` + "+quant:int8" (+ "-tower"), so int8
/// results never mix with float ones; `model_hash` itself for "none".
std::string quant_model_key(const std::string& model_hash, const QuantFlags& f);

}  // namespace vispco::cli
