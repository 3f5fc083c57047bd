// Reading and writing Hugging Face added tokens (see added_tokens.h).
#include "io/added_tokens.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_file.h"

namespace vispco::io {

namespace fs = std::filesystem;

namespace {

// The parsed file, or null when absent. @throws FormatError when it is not JSON.
nlohmann::json read_json(const fs::path& p) {
  return fs::exists(p) ? read_json_file(p.string(), "tokenizer file") : nlohmann::json(nullptr);
}

void add(std::map<int64_t, AddedToken>& by_id, AddedToken t, const fs::path& from) {
  auto [it, fresh] = by_id.emplace(t.id, t);
  if (fresh) return;
  if (it->second.content != t.content)
    throw FormatError(from.string() + ": added token " + std::to_string(t.id) + " is '" + t.content +
                      "' but another tokenizer file says '" + it->second.content + "'");
  it->second.special = it->second.special || t.special;
}

// A special_tokens_map.json value: "<s>" or {"content": "<s>", …}, or a list of those.
void special_contents(const nlohmann::json& v, std::vector<std::string>& out) {
  if (v.is_string())
    out.push_back(v.get<std::string>());
  else if (v.is_object() && v.contains("content") && v["content"].is_string())
    out.push_back(v["content"]);
  else if (v.is_array())
    for (const auto& e : v) special_contents(e, out);
}

}  // namespace

std::vector<AddedToken> load_added_tokens(const std::string& dir) {
  std::map<int64_t, AddedToken> by_id;
  const fs::path tj = fs::path(dir) / "tokenizer.json", tc = fs::path(dir) / "tokenizer_config.json",
                 sm = fs::path(dir) / "special_tokens_map.json";
  try {
    if (auto j = read_json(tj); j.is_object() && j.contains("added_tokens")) {
      if (!j["added_tokens"].is_array())
        throw FormatError(tj.string() + ": \"added_tokens\" must be an array");
      for (const auto& e : j["added_tokens"])
        add(by_id, {e.at("id").get<int64_t>(), e.at("content").get<std::string>(), e.value("special", false)},
            tj);
    }
    if (auto j = read_json(tc); j.is_object() && j.contains("added_tokens_decoder")) {
      if (!j["added_tokens_decoder"].is_object())
        throw FormatError(tc.string() + ": \"added_tokens_decoder\" must be an object of id → token");
      for (const auto& [k, e] : j["added_tokens_decoder"].items()) {
        size_t used = 0;
        int64_t id = -1;
        try {
          id = std::stoll(k, &used);
        } catch (const std::exception&) {
        }
        if (id < 0 || used != k.size())
          throw FormatError(tc.string() + ": added_tokens_decoder key '" + k + "' is not a token id");
        add(by_id, {id, e.at("content").get<std::string>(), e.value("special", false)}, tc);
      }
    }
    if (auto j = read_json(sm); j.is_object()) {
      std::vector<std::string> special;
      for (const auto& [k, v] : j.items()) special_contents(v, special);
      for (auto& [id, t] : by_id)
        if (std::find(special.begin(), special.end(), t.content) != special.end()) t.special = true;
    }
  } catch (const nlohmann::json::exception& e) {
    throw FormatError("added tokens in " + dir + ": " + e.what());
  }
  std::vector<AddedToken> out;
  for (auto& [id, t] : by_id) out.push_back(t);
  return out;
}

void write_tokenizer_config(const std::string& dir, const std::vector<AddedToken>& tokens) {
  nlohmann::json dec = nlohmann::json::object();
  for (const auto& t : tokens)
    dec[std::to_string(t.id)] = {{"content", t.content}, {"special", t.special}, {"lstrip", false},
                                 {"rstrip", false},      {"normalized", false},  {"single_word", false}};
  const nlohmann::json j = {
      {"tokenizer_class", "LlamaTokenizer"}, {"legacy", true}, {"added_tokens_decoder", dec}};
  const auto p = fs::path(dir) / "tokenizer_config.json";
  std::ofstream out(p);
  out << j.dump(2) << "\n";
  if (!out) throw IoError("cannot write '" + p.string() + "'");
}

}  // namespace vispco::io
