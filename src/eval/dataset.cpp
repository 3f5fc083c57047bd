// jsonl dataset loader: per-line validation with file:line errors, image path resolution and containment,
// missing-image policy, and the dataset hash.
#include "eval/dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>

#include "core/errors.h"
#include "core/hash.h"
#include "core/json_file.h"

namespace vispco::eval {
namespace fs = std::filesystem;

std::map<std::string, size_t> Dataset::family_counts() const {
  std::map<std::string, size_t> counts;
  for (const Sample& s : samples) ++counts[s.family];
  return counts;
}

namespace {

constexpr size_t kMaxWarnings = 20;

// Errors of one line carry "<file>:<line>: ".
struct LineContext {
  const std::string& file;
  size_t line;
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(file + ":" + std::to_string(line) + ": " + what);
  }
};

std::string required_string(const nlohmann::json& rec, const char* key, const LineContext& at) {
  if (!rec.contains(key)) at.fail(std::string("missing field \"") + key + "\"");
  const nlohmann::json& v = rec.at(key);
  if (!v.is_string()) at.fail(std::string("field \"") + key + "\" must be a string, got " + v.type_name());
  std::string s = v.get<std::string>();
  if (s.empty()) at.fail(std::string("field \"") + key + "\" is empty");
  return s;
}

// A string answer, or a number written as JSON prints it (3, 2.5).
std::string answer_text(const nlohmann::json& v, const std::string& where, const LineContext& at) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  at.fail(where + " must be a string or a number, got " + std::string(v.type_name()));
}

std::vector<std::string> parse_answers(const nlohmann::json& v, const LineContext& at) {
  if (!v.is_array() || v.empty()) at.fail("field \"answers\" must be a non-empty list");
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = "answers[" + std::to_string(i) + "]";
    if (v[i].is_object()) {
      if (!v[i].contains("answer")) at.fail(where + " is an object without \"answer\"");
      out.push_back(answer_text(v[i].at("answer"), where + ".answer", at));
    } else {
      out.push_back(answer_text(v[i], where, at));
    }
  }
  return out;
}

std::string most_frequent(const std::vector<std::string>& answers) {
  std::string best;
  size_t best_n = 0;
  for (const std::string& a : answers) {
    const size_t n = static_cast<size_t>(std::count(answers.begin(), answers.end(), a));
    if (n > best_n) best = a, best_n = n;
  }
  return best;
}

// True when the lexically normalised relative path stays inside its folder.
bool stays_inside(const fs::path& rel) {
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory()) return false;
  const fs::path norm = rel.lexically_normal();
  return norm.empty() || *norm.begin() != "..";
}

Sample parse_line(const std::string& text, const fs::path& root, const DatasetOptions& opts,
                  const LineContext& at) {
  nlohmann::json rec;
  try {
    rec = parse_json(text, "the record");
  } catch (const FormatError& e) {
    at.fail(e.what());
  }
  if (!rec.is_object()) at.fail(std::string("expected a JSON object, got ") + rec.type_name());

  Sample s;
  s.line = at.line;
  if (rec.contains("id")) {
    const nlohmann::json& id = rec.at("id");
    if (id.is_string() && !id.get<std::string>().empty())
      s.id = id.get<std::string>();
    else if (id.is_number_integer())
      s.id = id.dump();
    else
      at.fail("field \"id\" must be a non-empty string or an integer");
  } else {
    s.id = std::to_string(at.line);
  }
  s.image = required_string(rec, "image", at);
  s.question = required_string(rec, "question", at);
  if (rec.contains("answers")) s.answers = parse_answers(rec.at("answers"), at);
  if (rec.contains("answer"))
    s.answer = answer_text(rec.at("answer"), "field \"answer\"", at);
  else if (!s.answers.empty())
    s.answer = most_frequent(s.answers);
  else
    at.fail("needs \"answer\" or \"answers\"");
  if (rec.contains("family")) {
    if (!rec.at("family").is_string()) at.fail("field \"family\" must be a string");
    s.family = rec.at("family").get<std::string>();
  }
  if (s.family.empty()) s.family = "default";

  const fs::path rel(s.image);
  if (!opts.allow_outside && !stays_inside(rel))
    at.fail("image path '" + s.image + "' leaves the dataset folder '" + root.string() +
            "' (allow it with --allow-outside / DatasetOptions::allow_outside)");
  s.image_path = (rel.is_absolute() ? rel : root / rel).lexically_normal().string();

  for (auto it = rec.begin(); it != rec.end(); ++it) {
    static const char* const kKnown[] = {"id", "image", "question", "answer", "answers", "family"};
    if (std::find(std::begin(kKnown), std::end(kKnown), it.key()) == std::end(kKnown))
      s.extra[it.key()] = it.value();
  }
  return s;
}

// Checks the image; returns "" when usable, else why not. Adds its bytes' digest to `hash` when asked.
std::string check_image(const Sample& s, const DatasetOptions& opts, std::string* digest) {
  std::error_code ec;
  if (!fs::is_regular_file(s.image_path, ec)) return "image '" + s.image_path + "' is missing";
  if (opts.hash_images) {
    try {
      *digest = sha256_file_hex(s.image_path);
    } catch (const IoError&) {
      return "image '" + s.image_path + "' is unreadable";
    }
  } else if (!std::ifstream(s.image_path, std::ios::binary)) {
    return "image '" + s.image_path + "' is unreadable";
  }
  if (opts.decode_images && cv::imread(s.image_path, cv::IMREAD_UNCHANGED).empty())
    return "image '" + s.image_path + "' does not decode";
  return "";
}

}  // namespace

Dataset load_dataset(const std::string& path, const DatasetOptions& opts) {
  Dataset ds;
  fs::path file(path);
  std::error_code ec;
  if (fs::is_directory(file, ec)) file /= "data.jsonl";
  ds.jsonl_path = file.string();
  ds.root = file.parent_path().empty() ? "." : file.parent_path().string();
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw IoError("cannot open dataset '" + ds.jsonl_path + "' (a .jsonl file, or a folder with data.jsonl)");

  Sha256 hash;
  std::vector<std::string> image_digests;
  std::map<std::string, size_t> id_lines;
  size_t n_warnings_dropped = 0;
  std::string text;
  for (size_t line_no = 1; std::getline(in, text); ++line_no) {
    hash.update(text);
    hash.update("\n");
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const LineContext at{ds.jsonl_path, line_no};
    Sample s = parse_line(text, ds.root, opts, at);
    if (const auto [it, fresh] = id_lines.emplace(s.id, line_no); !fresh)
      at.fail("duplicate id '" + s.id + "' (first on line " + std::to_string(it->second) + ")");
    std::string digest;
    if (const std::string problem = check_image(s, opts, &digest); !problem.empty()) {
      const std::string msg = ds.jsonl_path + ":" + std::to_string(line_no) + ": " + problem;
      if (opts.on_missing_image == MissingImagePolicy::kStop)
        throw IoError(msg + " (skip such samples with --skip-missing / MissingImagePolicy::kSkip)");
      ++ds.n_skipped;
      if (ds.warnings.size() < kMaxWarnings)
        ds.warnings.push_back(msg);
      else
        ++n_warnings_dropped;
      continue;
    }
    image_digests.push_back(digest);
    ds.samples.push_back(std::move(s));
  }
  if (in.bad()) throw IoError("read error in '" + ds.jsonl_path + "'");
  if (n_warnings_dropped > 0)
    ds.warnings.push_back("... and " + std::to_string(n_warnings_dropped) + " more");
  for (const std::string& d : image_digests) hash.update(d);
  ds.hash = "sha256:" + hash.hex_digest();
  return ds;
}

}  // namespace vispco::eval
