// Loading a VQA dataset in vispco's jsonl form: one JSON object per line with "image" (path, relative to the
// jsonl's folder), "question", and "answer" and/or "answers" (human answers for VQA soft accuracy); optional
// "id" and "family"; every other field is kept in Sample::extra (SynthVQA's "scene"). Generic: SynthVQA and
// user datasets load the same way.
#pragma once
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vispco::eval {

/// One question about one image.
struct Sample {
  /// The record's "id" (string, or integer printed in decimal); the 1-based line number when absent.
  /// Unique within the dataset.
  std::string id;
  /// The image path as written in the jsonl.
  std::string image;
  /// The image path resolved against the jsonl's folder (lexically normalised).
  std::string image_path;
  std::string question;
  /// Reference answer: "answer" if given, else the most frequent entry of "answers" (first on ties).
  std::string answer;
  /// Human answers ("answers": strings, or objects with an "answer" string as in VQA v2); empty if absent.
  std::vector<std::string> answers;
  /// Question family for per-family metrics; "default" when absent.
  std::string family;
  /// 1-based line of the record in the jsonl.
  size_t line = 0;
  /// Every other field of the record (e.g. SynthVQA "scene"), as an object.
  nlohmann::json extra = nlohmann::json::object();
};

/// What to do with a sample whose image is missing or unreadable.
enum class MissingImagePolicy {
  kStop,  ///< throw IoError naming file, line and image
  kSkip,  ///< drop the sample, count it in Dataset::n_skipped, keep a warning
};

/// Loader settings.
struct DatasetOptions {
  /// Accept image paths that are absolute or leave the jsonl's folder ("../x"). Off: such a line is a
  /// FormatError. The check is lexical (symbolic links inside the folder are followed).
  bool allow_outside = false;
  /// Missing or unreadable images: stop (default) or skip.
  MissingImagePolicy on_missing_image = MissingImagePolicy::kStop;
  /// Also decode every image with OpenCV (slower); a file that does not decode counts as unreadable.
  bool decode_images = false;
  /// Include every image's bytes in Dataset::hash (reads each file once). Off: the hash covers the jsonl.
  bool hash_images = true;
};

/// A loaded dataset.
struct Dataset {
  /// The jsonl file read, and the folder image paths are resolved against.
  std::string jsonl_path;
  std::string root;
  /// Samples in file order (skipped ones left out).
  std::vector<Sample> samples;
  /// Number of samples dropped under MissingImagePolicy::kSkip.
  size_t n_skipped = 0;
  /// Human-readable notes on skipped samples (at most 20 kept, then a count of the rest).
  std::vector<std::string> warnings;
  /// "sha256:<hex>": SHA-256 of the jsonl lines (each followed by "\n"), then (hash_images) the 64-hex
  /// SHA-256 of each kept sample's image file in order. Key of the result store's dataset field.
  std::string hash;

  /// Samples per family.
  std::map<std::string, size_t> family_counts() const;
};

/// Loads and validates a dataset. `path` is a .jsonl file, or a folder holding data.jsonl.
/// Blank lines are ignored. Every other line must be a JSON object with a non-empty string "image" and
/// "question", and a string/number "answer" or a non-empty "answers" list; "id" (string or integer) and
/// "family" (string) are optional; ids must be unique.
/// @throws IoError when the file cannot be read or (kStop) an image is missing/unreadable;
///         FormatError "<file>:<line>: <what>" for a bad line or an image path leaving the folder.
Dataset load_dataset(const std::string& path, const DatasetOptions& opts = {});

}  // namespace vispco::eval
