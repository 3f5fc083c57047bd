// The standard SynthVQA and SynthVQA-HR splits: fixed seeds and counts, and the content hashes every machine
// must reproduce.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "eval/synthvqa/generator.h"

namespace vispco::eval::synthvqa {

/// One standard split.
struct SplitInfo {
  const char* name;          ///< "calib", "test", "hr-calib" or "hr-test"
  uint64_t seed;             ///< dataset seed
  size_t count;              ///< number of samples
  const char* content_hash;  ///< generator.h SynthResult::content_hash recorded for the kind's version
  SynthKind kind = SynthKind::kSynthVqa;  ///< which generator draws it
};

/// The split registry: SynthVQA calib (500 samples, for choosing plans) and test (2000, for reporting);
/// SynthVQA-HR hr-calib (500) and hr-test (2000).
const std::vector<SplitInfo>& split_table();
/// @throws InvalidArgument naming the valid splits.
const SplitInfo& find_split(const std::string& name);

/// Compares a generated split's content hash with the recorded one.
/// @throws FormatError "SynthVQA split '<name>' in '<where>': content hash expected X, got Y (…)".
void check_split_hash(const SplitInfo& split, const std::string& got, const std::string& where);

/// Generates a standard split into out_dir and checks its content hash against the recorded one.
/// The files stay in place on a mismatch, for inspection.
/// @throws FormatError "content hash expected X, got Y" on a mismatch; what generate_synthvqa throws.
SynthResult generate_split(const std::string& name, const std::string& out_dir, int n_threads = 0);

}  // namespace vispco::eval::synthvqa
