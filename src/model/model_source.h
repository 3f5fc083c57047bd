// What `--model` names: a Hugging Face LLaVA folder, or a llama.cpp LLaVA-1.5 pair of GGUF files (the text
// model and its `mmproj` image encoder, as llama.cpp's llava / mtmd tools take them with -m and --mmproj).
#pragma once
#include <string>

namespace vispco {

/// A resolved model location.
struct ModelSource {
  enum class Kind { kHfFolder, kGgufPair };
  Kind kind = Kind::kHfFolder;
  std::string spec;         ///< what the user gave
  std::string dir;          ///< kHfFolder: the folder
  std::string text_gguf;    ///< kGgufPair: the text model (general.architecture "llama")
  std::string mmproj_gguf;  ///< kGgufPair: the image encoder + projector (general.architecture "clip")
  bool is_gguf() const { return kind == Kind::kGgufPair; }
};

/// Resolves `spec`, in this order: "TEXT.gguf,MMPROJ.gguf"; a folder with config.json (Hugging Face); a
/// folder holding exactly one text GGUF and one mmproj GGUF; a text .gguf file whose folder holds exactly one
/// mmproj GGUF. GGUF files are told apart by their general.architecture (clip = mmproj), read from the header
/// only.
/// @throws IoError when nothing is there; ConfigError when a folder or pair is ambiguous or incomplete
/// (naming the files found and what to pass instead).
ModelSource resolve_model_source(const std::string& spec);

/// True when `spec` names GGUF files (a ".gguf" path or pair), without touching the disk — cheap checks
/// before the slow ones; a folder of GGUF files is only known after resolve_model_source.
bool names_gguf(const std::string& spec);

}  // namespace vispco
