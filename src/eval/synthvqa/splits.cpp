// The standard SynthVQA splits and their recorded content hashes (SynthVQA generator version 1, SynthVQA-HR
// generator version 1). A change to a generator that alters any byte must bump its version
// (kGeneratorVersion, kHrGeneratorVersion) and re-record its splits' hashes.
#include "eval/synthvqa/splits.h"

#include "core/errors.h"
#include "core/named_table.h"

namespace vispco::eval::synthvqa {

const std::vector<SplitInfo>& split_table() {
  static const std::vector<SplitInfo> t{
      {"calib", 20250501, 500, "sha256:42237ae3ac5cdbcc47a353534fd4484c288210d21f9b645a396e43b152bce81c"},
      {"test", 20250502, 2000, "sha256:de41cc590e5651b90b8bc3c66f1e72e7e59288224224f1e74f73f71ce4a1a0e3"},
      {"hr-calib", 20260601, 500, "sha256:5c46265f1a48a3b1adc688e5b8b1204b76e0cd215ec84757a73ad417ffdbf1fa",
       SynthKind::kHr},
      {"hr-test", 20260602, 2000, "sha256:0b1e8abc894d1e95c495c550333da29c27c06a985615a25afd0cb9974ee95c6f",
       SynthKind::kHr},
  };
  return t;
}

const SplitInfo& find_split(const std::string& name) {
  return find_named(split_table(), name, "SynthVQA split");
}

void check_split_hash(const SplitInfo& split, const std::string& got, const std::string& where) {
  if (got != split.content_hash)
    throw FormatError("SynthVQA split '" + std::string(split.name) + "' in '" + where +
                      "': content hash expected " + split.content_hash + ", got " + got + " (" +
                      info(split.kind).name + " generator version " +
                      std::to_string(info(split.kind).generator_version) +
                      "; an OpenCV drawing change, or a generator edit without a version bump?)");
}

SynthResult generate_split(const std::string& name, const std::string& out_dir, int n_threads) {
  const SplitInfo& split = find_split(name);
  SynthOptions opts;
  opts.seed = split.seed;
  opts.count = split.count;
  opts.n_threads = n_threads;
  opts.split = split.name;
  opts.kind = split.kind;
  SynthResult result = generate_synthvqa(opts, out_dir);
  check_split_hash(split, result.content_hash, out_dir);
  return result;
}

}  // namespace vispco::eval::synthvqa
