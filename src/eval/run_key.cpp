// Run-key strings for the result store: model folder fingerprint, canonical plan and decoding key.
#include "eval/run_key.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/context.h"
#include "core/errors.h"
#include "core/hash.h"
#include "core/json_file.h"
#include "io/gguf.h"
#include "model/model_source.h"

namespace vispco::eval {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kEdgeBytes = 256;             // bytes hashed at each end of a tensor's data
constexpr uint64_t kMaxHeaderBytes = 100000000;  // as the safetensors reader: 100 MB

// Reads `n` bytes at `offset`. @throws IoError on a short read.
std::string read_at(std::ifstream& in, const std::string& path, uint64_t offset, uint64_t n) {
  std::string buf(n, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(buf.data(), static_cast<std::streamsize>(n));
  if (static_cast<uint64_t>(in.gcount()) != n)
    throw IoError("model hash: cannot read " + std::to_string(n) + " bytes at offset " +
                  std::to_string(offset) + " of '" + path + "' (truncated file?)");
  return buf;
}

void hash_small_file(Sha256& h, const fs::path& p) {
  const std::string bytes = [&] {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw IoError("model hash: cannot read '" + p.string() + "'");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  h.update(p.filename().string() + "\n" + std::to_string(bytes.size()) + "\n");
  h.update(bytes);
}

// Name, size, raw header and the two edges of every tensor of one safetensors file.
void hash_safetensors(Sha256& h, const fs::path& p) {
  const std::string path = p.string();
  std::ifstream in(p, std::ios::binary);
  if (!in) throw IoError("model hash: cannot read '" + path + "'");
  const uint64_t size = fs::file_size(p);
  h.update(p.filename().string() + "\n" + std::to_string(size) + "\n");
  if (size < 8) throw FormatError("model hash: '" + path + "' is shorter than a safetensors header");
  const std::string len_bytes = read_at(in, path, 0, 8);
  uint64_t n_header = 0;
  for (int i = 7; i >= 0; --i) n_header = (n_header << 8) | static_cast<unsigned char>(len_bytes[i]);
  if (n_header > kMaxHeaderBytes || 8 + n_header > size)
    throw FormatError("model hash: '" + path + "' declares a header of " + std::to_string(n_header) +
                      " bytes in a file of " + std::to_string(size));
  const std::string header = read_at(in, path, 8, n_header);
  h.update(header);
  const nlohmann::json j = parse_json(header, "model hash: '" + path + "' header");
  // nlohmann's object keeps keys sorted, so this order is canonical whatever the file's order.
  const uint64_t data_start = 8 + n_header;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") continue;
    uint64_t begin = 0, end = 0;
    try {
      begin = entry.at("data_offsets").at(0).get<uint64_t>();
      end = entry.at("data_offsets").at(1).get<uint64_t>();
    } catch (const nlohmann::json::exception&) {
      throw FormatError("model hash: '" + path + "' tensor '" + name + "' has no valid data_offsets");
    }
    if (begin > end || data_start + end > size)
      throw FormatError("model hash: '" + path + "' tensor '" + name + "' lies outside the file");
    const uint64_t n = end - begin;
    if (n <= 2 * kEdgeBytes) {
      h.update(read_at(in, path, data_start + begin, n));
    } else {
      h.update(read_at(in, path, data_start + begin, kEdgeBytes));
      h.update(read_at(in, path, data_start + end - kEdgeBytes, kEdgeBytes));
    }
  }
}

// Name, size, header bytes and the two edges of every tensor of one GGUF file.
void hash_gguf(Sha256& h, const std::string& path) {
  const auto f = io::GgufFile::open(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("model hash: cannot read '" + path + "'");
  h.update(fs::path(path).filename().string() + "\n" + std::to_string(fs::file_size(path)) + "\n");
  h.update(read_at(in, path, 0, f.data_start()));
  for (const auto& t : f.tensors()) {
    const uint64_t n = t.nbytes, at = f.data_start() + t.offset;
    if (n <= 2 * kEdgeBytes) {
      h.update(read_at(in, path, at, n));
    } else {
      h.update(read_at(in, path, at, kEdgeBytes));
      h.update(read_at(in, path, at + n - kEdgeBytes, kEdgeBytes));
    }
  }
}

}  // namespace

std::string model_folder_hash(const std::string& dir) {
  if (names_gguf(dir) || fs::is_directory(dir)) {
    const ModelSource src = resolve_model_source(dir);
    if (src.is_gguf()) {
      Sha256 h;
      h.update("vispco-model-hash-gguf-v1\n");
      hash_gguf(h, src.text_gguf);
      hash_gguf(h, src.mmproj_gguf);
      return "sha256:" + h.hex_digest();
    }
  }
  if (!fs::is_directory(dir)) throw IoError("model hash: model folder '" + dir + "' does not exist");
  Sha256 h;
  h.update("vispco-model-hash-v2\n");  // v2: every tokenizer and chat-template file (issue 45)
  for (const char* name : kModelKeyFiles) {
    const fs::path p = fs::path(dir) / name;
    if (fs::exists(p)) hash_small_file(h, p);
  }
  std::vector<fs::path> shards;
  for (const auto& e : fs::directory_iterator(dir))
    // gate.safetensors is the learned gate's file (prune/gate.h), not the model's: it keys its own scorer's
    // results (PlanHook::store_key), and training one must not invalidate every stored result of the model.
    // k_predictor.safetensors (optimize/dynamic_k/auto_keep.h) likewise: keep=auto results are keyed by the
    // static plan each sample ran.
    if (e.is_regular_file() && e.path().extension() == ".safetensors" &&
        e.path().filename() != "gate.safetensors" && e.path().filename() != "k_predictor.safetensors")
      shards.push_back(e.path());
  std::sort(shards.begin(), shards.end());
  if (shards.empty()) throw IoError("model hash: no .safetensors file in '" + dir + "'");
  for (const auto& p : shards) hash_safetensors(h, p);
  return "sha256:" + h.hex_digest();
}

std::string canonical_plan(const std::string& plan) {
  const auto a = plan.find_first_not_of(" \t\n"), z = plan.find_last_not_of(" \t\n");
  std::string t = a == std::string::npos ? "" : plan.substr(a, z - a + 1);
  std::string lower = t;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return (lower.empty() || lower == "none") ? "none" : t;
}

std::string decoding_key(const GenerationConfig& gc, c10::ScalarType dtype, int results_version) {
  const nlohmann::json j = {{"dtype", dtype_name(dtype)},
                            {"generation", to_json(gc)},
                            {"prompt", "llava-1.5"},
                            {"results_version", results_version}};
  return j.dump();
}

}  // namespace vispco::eval
