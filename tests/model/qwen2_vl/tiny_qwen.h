// The tiny random-weight Qwen2.5-VL ("tiny-qwen2.5-vl" preset, seed 3, fp32) written once per test binary in
// the HF layout, shared by the tests that load it (as model/tiny_model.h shares the tiny LLaVA).
#pragma once
#include <string>

#include "model/qwen2_vl/presets.h"
#include "test_util.h"

namespace vispco::testing {

/// Folder of the tiny random Qwen2.5-VL, created on first use.
inline const std::string& tiny_qwen_dir() {
  return written_once([](const TempDir& dir) {
    write_random_qwen2_vl(dir.str(), find_qwen2_vl_preset("tiny-qwen2.5-vl").config, 3, c10::kFloat);
    return dir.str();
  });
}

}  // namespace vispco::testing
