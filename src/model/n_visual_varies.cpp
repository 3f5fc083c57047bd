// Families whose images make their own N_v; see n_visual_varies.h.
#include "model/n_visual_varies.h"

#include <array>
#include <string_view>

namespace vispco {

bool n_visual_varies(const ModelShape& shape) {
  // AnyRes tiles and unpadding (LLaVA-NeXT); smart_resize keeping each image's size (Qwen2-VL, Qwen2.5-VL).
  static constexpr std::array<std::string_view, 3> kVarying = {"LlavaNextForConditionalGeneration",
                                                               "Qwen2VLForConditionalGeneration",
                                                               "Qwen2_5_VLForConditionalGeneration"};
  for (const auto name : kVarying)
    if (shape.architecture == name) return true;
  return false;
}

}  // namespace vispco
