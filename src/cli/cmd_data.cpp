// `vispco data`: dataset tools. `data synth` writes a SynthVQA or SynthVQA-HR dataset (custom seed/count, or
// a standard split checked against its recorded hash); `data check` loads any jsonl dataset and reports it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/synthvqa/generator.h"
#include "eval/synthvqa/splits.h"

namespace vispco::cli {
namespace {

struct SynthArgs {
  uint64_t seed = 0;
  size_t count = 0;
  std::string split;
  std::string out;
  int n_threads = 0;
  bool hr = false;
};

void run_synth(const SynthArgs& a, bool seed_given, bool count_given) {
  namespace sv = eval::synthvqa;
  sv::SynthResult r;
  if (!a.split.empty()) {
    if (seed_given || count_given)
      throw InvalidArgument("data synth: --split fixes seed and count; drop --seed/--count or --split");
    if (a.hr && sv::find_split(a.split).kind != sv::SynthKind::kHr)
      throw InvalidArgument("data synth: --split " + a.split +
                            " is a SynthVQA split; the SynthVQA-HR splits are hr-calib and hr-test");
    r = sv::generate_split(a.split, a.out, a.n_threads);
  } else {
    if (!seed_given || !count_given)
      throw InvalidArgument(
          "data synth: give --split calib|test|hr-calib|hr-test, or both --seed and --count (with --hr for "
          "SynthVQA-HR)");
    sv::SynthOptions opts;
    opts.kind = a.hr ? sv::SynthKind::kHr : sv::SynthKind::kSynthVqa;
    opts.seed = a.seed;
    opts.count = a.count;
    opts.n_threads = a.n_threads;
    r = sv::generate_synthvqa(opts, a.out);
  }
  std::printf("wrote %zu samples to %s in %.2f s\ncontent hash %s%s\n", r.count, a.out.c_str(), r.seconds,
              r.content_hash.c_str(), a.split.empty() ? "" : " (matches the recorded split hash)");
  for (const auto& [family, n] : r.per_family) std::printf("  %-12s %zu\n", family.c_str(), n);
}

struct CheckArgs {
  std::string data;
  bool allow_outside = false;
  bool skip_missing = false;
  bool decode = false;
};

void run_check(const CheckArgs& a) {
  eval::DatasetOptions opts;
  opts.allow_outside = a.allow_outside;
  opts.on_missing_image = a.skip_missing ? eval::MissingImagePolicy::kSkip : eval::MissingImagePolicy::kStop;
  opts.decode_images = a.decode;
  const eval::Dataset ds = eval::load_dataset(a.data, opts);
  std::printf("%s: %zu samples, %zu skipped (missing/unreadable images)\nhash %s\n", ds.jsonl_path.c_str(),
              ds.samples.size(), ds.n_skipped, ds.hash.c_str());
  for (const std::string& w : ds.warnings) std::printf("  warning: %s\n", w.c_str());
  for (const auto& [family, n] : ds.family_counts()) std::printf("  %-12s %zu\n", family.c_str(), n);
}

}  // namespace

void register_data(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "Dataset tools: generate SynthVQA, check a jsonl dataset");
  data->require_subcommand(1);

  auto synth = std::make_shared<SynthArgs>();
  CLI::App* s = data->add_subcommand(
      "synth", "Generate a SynthVQA or SynthVQA-HR dataset (images/, data.jsonl, manifest.json)");
  CLI::Option* seed = s->add_option("--seed", synth->seed, "Dataset seed (with --count)");
  CLI::Option* count =
      s->add_option("--count", synth->count, "Number of samples (with --seed), 1 to 10,000,000")
          ->check(CLI::Range(size_t(1), size_t(10000000)));
  std::vector<std::string> split_names;
  for (const auto& sp : eval::synthvqa::split_table()) split_names.emplace_back(sp.name);
  s->add_option("--split", synth->split,
                "Standard split (fixed seed and count, hash checked): calib, test (SynthVQA, 336 px); "
                "hr-calib, hr-test (SynthVQA-HR)")
      ->check(CLI::IsMember(split_names));
  s->add_flag("--hr", synth->hr,
              "SynthVQA-HR: high-resolution scenes (672x672, 672x336, 336x672, 1008x336, 336x1008) with tiny "
              "objects and small text (with --seed/--count; the hr-* splits imply it)");
  s->add_option("--out", synth->out, "Output folder")->required();
  s->add_option("--threads", synth->n_threads,
                "Worker threads (0 = the CPUs this process may use: affinity, cgroup quota)")
      ->check(CLI::NonNegativeNumber);
  s->callback([synth, seed, count] { run_synth(*synth, seed->count() > 0, count->count() > 0); });

  auto check = std::make_shared<CheckArgs>();
  CLI::App* c =
      data->add_subcommand("check", "Load a jsonl dataset (file or folder with data.jsonl) and report");
  c->add_option("--data", check->data, "data.jsonl or its folder")->required();
  c->add_flag("--allow-outside", check->allow_outside, "Allow image paths outside the dataset folder");
  c->add_flag("--skip-missing", check->skip_missing, "Skip samples whose image is missing (default: stop)");
  c->add_flag("--decode", check->decode, "Also decode every image");
  c->callback([check] { run_check(*check); });
}

}  // namespace vispco::cli
