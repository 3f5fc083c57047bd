// The standard SynthVQA splits and their recorded content hashes (generator version 1). A change to the
// generator that alters any byte must bump kGeneratorVersion and re-record these hashes.
#include "eval/synthvqa/splits.h"

#include "core/errors.h"
#include "core/named_table.h"

namespace vispco::eval::synthvqa {

const std::vector<SplitInfo>& split_table() {
  static const std::vector<SplitInfo> t{
      {"calib", 20250501, 500, "sha256:42237ae3ac5cdbcc47a353534fd4484c288210d21f9b645a396e43b152bce81c"},
      {"test", 20250502, 2000, "sha256:de41cc590e5651b90b8bc3c66f1e72e7e59288224224f1e74f73f71ce4a1a0e3"},
  };
  return t;
}

const SplitInfo& find_split(const std::string& name) {
  return find_named(split_table(), name, "SynthVQA split");
}

void check_split_hash(const SplitInfo& split, const std::string& got, const std::string& where) {
  if (got != split.content_hash)
    throw FormatError("SynthVQA split '" + std::string(split.name) + "' in '" + where +
                      "': content hash expected " + split.content_hash + ", got " + got +
                      " (generator version " + std::to_string(kGeneratorVersion) +
                      "; an OpenCV drawing change, or a generator edit without a version bump?)");
}

SynthResult generate_split(const std::string& name, const std::string& out_dir, int n_threads) {
  const SplitInfo& split = find_split(name);
  SynthOptions opts;
  opts.seed = split.seed;
  opts.count = split.count;
  opts.n_threads = n_threads;
  opts.split = split.name;
  SynthResult result = generate_synthvqa(opts, out_dir);
  check_split_hash(split, result.content_hash, out_dir);
  return result;
}

}  // namespace vispco::eval::synthvqa
