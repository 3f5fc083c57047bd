// The model folder of a test family derived from the tiny LLaVA folder (model/tiny_model.h): the test
// families of linear_projector_family.h and unpadded_mrope_family.h change a few of its files and copy the
// rest.
#pragma once
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "model/tiny_model.h"
#include "test_util.h"

namespace vispco::testing {

/// Writes folder `dst` for test family `architecture`: every file of tiny_model_dir() copied but config.json
/// and `replaced` (which the caller writes), and config.json as the tiny model's with "architectures" =
/// [architecture], then changed by `edit` when given. @return the config written.
inline nlohmann::json write_tiny_variant(const std::filesystem::path& dst, const std::string& architecture,
                                         const std::string& replaced,
                                         const std::function<void(nlohmann::json&)>& edit = {}) {
  namespace fs = std::filesystem;
  const fs::path src = tiny_model_dir();
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().filename() != replaced && e.path().filename() != "config.json")
      fs::copy_file(e.path(), dst / e.path().filename());
  auto config = nlohmann::json::parse(read_file(src / "config.json"));
  config["architectures"] = {architecture};
  if (edit) edit(config);
  write_file(dst / "config.json", config.dump(2));
  return config;
}

}  // namespace vispco::testing
