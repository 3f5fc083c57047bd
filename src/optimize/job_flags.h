// The flags every search that evaluates plans of a model on labelled splits shares (min-k, budget, grid,
// dynamic-k, coverage: paths, compute, output, ε and its rules, plan templates), and the helpers their runs
// share (lists, paths, the ε pair, templates from a scorer name).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "optimize/optimize.h"
#include "optimize/search_flags.h"

namespace vispco::optimize {

/// The shared flags' values (each search method holds its own copy; see SearchFlags).
struct JobFlags {
  std::string model, calib, test;           ///< --model, --calib (the search's split), --test
  std::string out = "optimize_out", store;  ///< report folder; result store ("" = <out>/results.sqlite)
  std::string dtype = "auto", device = "cpu", progress = "auto", gnuplot = "gnuplot";
  int threads = 0;
  int64_t limit_calib = 0, limit_test = 0, batch = 8;  ///< first N samples (0 = all); samples per generate()
  /// --epsilon (relative) or --epsilon-abs (absolute, -1 = not given) and the rules (optimize.h).
  double epsilon = 0.01, epsilon_abs = -1, confidence = 0, epsilon_per_family = 0;
  int64_t min_family_n = 30;
  double min_speedup = 1.0, timing_factor = 2.0;
  bool no_test = false, no_plots = false, json = false;
  /// Plan templates: --template (repeated or ';'-separated) or --scorer/--scorers with --layer/--layers.
  std::vector<std::string> templates;
  std::string scorer, scorers, layers;
  int64_t layer = -1;  ///< -1 = the scorer's default layer
};

/// Declares the shared flags, bound to `j`, for the current method; --model and --calib are required.
void add_job_flags(SearchFlags& flags, JobFlags& j);

/// (ε, absolute) from --epsilon / --epsilon-abs. @throws InvalidArgument when both were given.
std::pair<double, bool> job_epsilon(const JobFlags& j, const SearchFlags& flags);

/// The --template pieces (';' splits); empty when none was given.
/// @throws InvalidArgument when --scorer or --scorers was given too.
std::vector<std::string> given_templates(const JobFlags& j);
/// The templates of a search over one scorer: --template as given, else --scorer at --layer (default: the
/// scorer's), or with `layer_list` each of --layers. @param method for messages ("optimize --method M: …")
/// @throws InvalidArgument (--scorers given, no scorer, unknown scorer).
std::vector<std::string> scorer_templates(const std::string& method, const JobFlags& j, bool layer_list);

/// --batch: samples per generate() call. @throws InvalidArgument "optimize: --batch must be ≥ 1, …".
size_t job_batch(const JobFlags& j);

/// "16,32" → {16, 32}. @throws InvalidArgument "optimize: FLAG must be comma-separated integers, …".
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag);
/// Checks that `path` given to `flag` exists (--model: a folder or GGUF pair, model/model_source.h).
/// @throws IoError naming the flag and path.
void require_path(const std::string& path, const std::string& flag);
/// `store`, or `out`/results.sqlite when it is empty.
std::string store_or_default(const std::string& store, const std::string& out);
/// A log that writes each line to stderr.
OptimizeLog stderr_log();

}  // namespace vispco::optimize
