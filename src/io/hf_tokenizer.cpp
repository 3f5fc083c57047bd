// Loading tokenizer.json folders (see hf_tokenizer.h).
#include "io/hf_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_file.h"
#include "io/added_tokens.h"
#include "io/bpe_model.h"

namespace vispco::io {

namespace fs = std::filesystem;

namespace {

// The content a tokenizer_config.json special-token field names: "…", {"content": "…"}, or "" for
// null/absent.
std::string special_content(const nlohmann::json& cfg, const char* key, const std::string& where) {
  if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return "";
  const auto& v = cfg[key];
  if (v.is_string()) return v;
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"];
  throw FormatError(where + ": " + key + " must be a string, {\"content\": …} or null (got " + v.dump() +
                    ")");
}

}  // namespace

Tokenizer load_tokenizer_json(const std::string& dir) {
  const fs::path tj = fs::path(dir) / "tokenizer.json", tc = fs::path(dir) / "tokenizer_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(tj, ec))
    throw IoError("tokenizer file not found (or not a file): '" + tj.string() + "'");
  const nlohmann::json tokenizer = read_json_file(tj.string(), "tokenizer file");
  const nlohmann::json cfg =
      fs::exists(tc, ec) ? read_json_file(tc.string(), "tokenizer config") : nlohmann::json(nullptr);
  std::vector<AddedToken> added = load_added_tokens(dir);

  try {
    auto model = std::make_shared<ByteLevelBpeModel>(tokenizer, SpecialIds{}, tj.string());
    const auto resolve = [&](const char* key) -> int64_t {
      const std::string content = special_content(cfg, key, tc.string());
      if (content.empty()) return -1;
      for (const auto& t : added)
        if (t.content == content) return t.id;
      if (const int64_t id = model->id_of(content); id >= 0) return id;
      throw FormatError(tc.string() + ": " + key + " '" + content +
                        "' is neither an added token nor in the vocabulary of " + tj.string());
    };
    model->set_special_ids({resolve("bos_token"), resolve("eos_token"), resolve("pad_token")});
    Tokenizer tok(std::move(model));
    tok.set_added_tokens(std::move(added));
    return tok;
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(tj.string() + ": unexpected JSON shape: " + e.what());
  }
}

}  // namespace vispco::io
