// Tensors of a Hugging Face checkpoint folder: a single `model.safetensors`, or shards listed by
// `model.safetensors.index.json` (transformers `modeling_utils.py`: SAFE_WEIGHTS_NAME is tried first, then
// SAFE_WEIGHTS_INDEX_NAME; index = {"metadata": {...}, "weight_map": {tensor name: shard file name}}).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.h"
#include "core/json_file.h"
#include "io/safetensors.h"

namespace vispco::io {

namespace {

using json = nlohmann::json;

std::string json_quoted(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

[[noreturn]] void fail(const std::string& index_path, const std::string& what) {
  throw FormatError("checkpoint index '" + index_path + "': " + what);
}

/// A shard must be a plain file name inside the folder: no directories, no way out of it.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos;
}

json read_index(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  if (!in) throw IoError("cannot read checkpoint index '" + index_path + "'");
  std::stringstream text;
  text << in.rdbuf();
  const json index = parse_json(text.str(), "checkpoint index '" + index_path + "'");
  if (!index.is_object()) fail(index_path, "expected a JSON object, got " + index.dump().substr(0, 80));
  if (index.contains("metadata") && !index["metadata"].is_object())
    fail(index_path, "field 'metadata': expected an object");
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    fail(index_path, "field 'weight_map': expected an object {tensor name: shard file name}");
  return index;
}

}  // namespace

CheckpointTensors CheckpointTensors::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index_file = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  CheckpointTensors out;
  out.dir_ = dir;

  if (fs::is_regular_file(single, ec)) {
    out.shards_.push_back(SafetensorsFile::open(single.string()));
    for (const auto& [name, info] : out.shards_[0].entries()) out.shard_of_[name] = 0;
    return out;
  }
  if (!fs::is_regular_file(index_file, ec))
    throw IoError("checkpoint folder '" + dir +
                  "' has neither model.safetensors nor model.safetensors.index.json");

  const std::string index_path = index_file.string();
  const json index = read_index(index_path);
  std::map<std::string, size_t> shard_by_file;  // shard file name -> index into shards_
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string() || !is_plain_file_name(file.get<std::string>()))
      fail(index_path, "weight_map[" + json_quoted(name) +
                           "]: expected a shard file name in the folder, got " + file.dump().substr(0, 80));
    const std::string shard = file.get<std::string>();
    auto [it, inserted] = shard_by_file.emplace(shard, out.shards_.size());
    if (inserted) out.shards_.push_back(SafetensorsFile::open((fs::path(dir) / shard).string()));
    if (!out.shards_[it->second].contains(name))
      fail(index_path, "tensor " + json_quoted(name) + " is listed in shard '" + shard +
                           "' but that shard has no such tensor");
    out.shard_of_[name] = it->second;
  }
  return out;
}

std::vector<std::string> CheckpointTensors::names() const {
  std::vector<std::string> out;
  out.reserve(shard_of_.size());
  for (const auto& [name, shard] : shard_of_) out.push_back(name);
  return out;
}

bool CheckpointTensors::contains(const std::string& name) const { return shard_of_.count(name) != 0; }

const SafetensorsFile& CheckpointTensors::shard(const std::string& name) const {
  auto it = shard_of_.find(name);
  if (it == shard_of_.end())
    throw ConfigError("checkpoint folder '" + dir_ + "' has no tensor " + json_quoted(name) + " (it holds " +
                      std::to_string(shard_of_.size()) +
                      " tensors; a config/checkpoint mismatch or another weight-name layout?)");
  return shards_[it->second];
}

at::Tensor CheckpointTensors::tensor(const std::string& name) const { return shard(name).tensor(name); }

void CheckpointTensors::release(const std::string& name) const { shard(name).release(name); }

}  // namespace vispco::io
