// --model resolution: Hugging Face folder or llama.cpp GGUF pair.
#include "model/model_source.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/errors.h"
#include "io/gguf.h"

namespace vispco {
namespace fs = std::filesystem;

namespace {

bool ends_with_gguf(const std::string& s) { return s.size() > 5 && s.compare(s.size() - 5, 5, ".gguf") == 0; }

/// general.architecture of a GGUF file (header parse only: the tensors stay on disk).
std::string architecture(const std::string& path) {
  return io::GgufFile::open(path).get_string("general.architecture", "");
}

std::string list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + fs::path(s).filename().string();
  return out.empty() ? "none" : out;
}

/// Splits the .gguf files of `dir` into mmproj (clip) and text files.
void scan(const std::string& dir, std::vector<std::string>& text, std::vector<std::string>& mmproj) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && ends_with_gguf(e.path().string())) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) (architecture(f) == "clip" ? mmproj : text).push_back(f);
}

ModelSource pair(const std::string& spec, const std::string& text, const std::string& mmproj) {
  ModelSource s;
  s.kind = ModelSource::Kind::kGgufPair;
  s.spec = spec;
  s.text_gguf = text;
  s.mmproj_gguf = mmproj;
  return s;
}

}  // namespace

bool names_gguf(const std::string& spec) {
  const auto comma = spec.find(',');
  return ends_with_gguf(comma == std::string::npos ? spec : spec.substr(0, comma));
}

ModelSource resolve_model_source(const std::string& spec) {
  std::error_code ec;
  if (const auto comma = spec.find(','); comma != std::string::npos) {
    const std::string text = spec.substr(0, comma), mmproj = spec.substr(comma + 1);
    for (const auto& f : {text, mmproj})
      if (!fs::is_regular_file(f, ec)) throw IoError("model GGUF file '" + f + "' does not exist");
    if (architecture(mmproj) != "clip")
      throw ConfigError("model '" + spec +
                        "': the second file must be the mmproj GGUF (general.architecture "
                        "clip), got '" +
                        architecture(mmproj) + "'; pass TEXT.gguf,MMPROJ.gguf");
    return pair(spec, text, mmproj);
  }
  if (fs::is_directory(spec, ec)) {
    ModelSource s;
    s.spec = s.dir = spec;
    if (fs::exists(fs::path(spec) / "config.json", ec)) return s;
    std::vector<std::string> text, mmproj;
    scan(spec, text, mmproj);
    if (text.empty() && mmproj.empty()) return s;  // the HF loader reports the missing config.json
    if (text.size() != 1 || mmproj.size() != 1)
      throw ConfigError("model folder '" + spec + "' has no config.json and " + std::to_string(text.size()) +
                        " text GGUF (" + list(text) + ") and " + std::to_string(mmproj.size()) +
                        " mmproj GGUF (" + list(mmproj) +
                        ") files; expected one of each, or pass --model TEXT.gguf,MMPROJ.gguf");
    return pair(spec, text[0], mmproj[0]);
  }
  if (ends_with_gguf(spec)) {
    if (!fs::is_regular_file(spec, ec)) throw IoError("model GGUF file '" + spec + "' does not exist");
    if (architecture(spec) == "clip")
      throw ConfigError("model '" + spec +
                        "' is an mmproj (image encoder) GGUF; pass the text model, or "
                        "TEXT.gguf,MMPROJ.gguf");
    const auto parent = fs::path(spec).parent_path().empty() ? fs::path(".") : fs::path(spec).parent_path();
    std::vector<std::string> text, mmproj;
    scan(parent.string(), text, mmproj);
    if (mmproj.size() != 1)
      throw ConfigError("model '" + spec + "': its folder holds " + std::to_string(mmproj.size()) +
                        " mmproj GGUF files (" + list(mmproj) + "); name the pair: --model " + spec +
                        ",MMPROJ.gguf");
    return pair(spec, spec, mmproj[0]);
  }
  throw IoError("model folder '" + spec + "' does not exist");
}

}  // namespace vispco
