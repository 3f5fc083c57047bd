// The test family of unpadded_mrope_family.h, written only against src/model's seam.
#include "model/unpadded_mrope_family.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>

#include "core/errors.h"
#include "io/image.h"
#include "io/tokenizer.h"
#include "model/family.h"
#include "model/llava/config.h"
#include "model/llava/llava.h"
#include "model/llava/llava_shape.h"
#include "model/tiny_model.h"
#include "model/tiny_variant.h"
#include "model/weights.h"

namespace vispco::testing {

namespace fs = std::filesystem;

std::vector<int64_t> ByteTokenizerModel::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  for (const unsigned char c : text) ids.push_back(int64_t(c) + 3);
  return ids;
}

std::string ByteTokenizerModel::decode(const std::vector<int64_t>& ids, bool) const {
  std::string text;
  for (const auto id : ids)  // ASCII only, so that any id sequence decodes to valid UTF-8 ('?' otherwise)
    if (id >= 3 && id < 259) text += id - 3 < 128 ? static_cast<char>(id - 3) : '?';
  return text;
}

std::string ByteTokenizerModel::piece(int64_t id) const {
  if (id < 3) return id == 0 ? "<unk>" : id == 1 ? "<s>" : "</s>";
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned>(id - 3));
  return buf;
}

std::string ByteTokenizerModel::piece_bytes(int64_t id) const {
  return id < 3 ? "" : std::string(1, id - 3 < 128 ? static_cast<char>(id - 3) : '?');
}

namespace {

constexpr int64_t kSide = 56, kPatch = 14;  // the tiny preset's tower input and patch

// Which of the 4 patch rows (or columns) meet the image's span [begin, end) of the scaled square.
std::vector<int64_t> patches_meeting(double begin, double end) {
  std::vector<int64_t> out;
  for (int64_t p = 0; p < kSide / kPatch; ++p)
    if (p * kPatch < end && (p + 1) * kPatch > begin) out.push_back(p);
  return out;
}

// The image's span along one axis of the scaled square: offset ⌊(side − n)/2⌋ as expand2square.
std::pair<double, double> scaled_span(int n, int side) {
  const double scale = double(kSide) / side;
  const int offset = (side - n) / 2;
  return {offset * scale, (offset + n) * scale};
}

class UnpaddedMropeModel final : public FamilyModelOf<LlavaConfig, LlavaNet> {
 public:
  UnpaddedMropeModel(LlavaConfig cfg, LlavaNet net, io::ImagePreprocessConfig pre)
      : FamilyModelOf(cfg, llava_shape(cfg), std::move(net), pre) {
    shape_.architecture = kUnpaddedMropeArchitecture;
  }
  // [4, S, S]: LLaVA's pixels, plus the image's original width and height in channel 3's first two values.
  at::Tensor preprocess(const cv::Mat& rgb) const override {
    auto px = io::preprocess_llava(rgb, pre_);
    auto size = at::zeros({1, kSide, kSide});
    size[0][0][0] = rgb.cols;
    size[0][0][1] = rgb.rows;
    return at::cat({px, size}, 0);
  }
  VisualTokens encode_images(const at::Tensor& pixels, bool want_cls_attention) override {
    return encode_image_list(pixels.unbind(0), want_cls_attention);
  }
  VisualTokens encode_image_list(const std::vector<at::Tensor>& pixels, bool want_cls_attention) override {
    std::vector<at::Tensor> rgb;
    for (const auto& p : pixels) rgb.push_back(p.narrow(0, 0, 3));
    VisualTokens all = llava_tower_tokens(net_->vision_tower, cfg_, at::stack(rgb, 0), want_cls_attention);
    all.embeds = net_->multi_modal_projector->forward(all.embeds);  // [B, 16, D]
    std::vector<VisualTokens> rows;
    for (size_t b = 0; b < pixels.size(); ++b) {
      const int w = int(pixels[b][3][0][0].item<float>()), h = int(pixels[b][3][0][1].item<float>());
      const auto layout = expected_unpadded_layout(w, h);
      const int side = std::max(w, h);
      const auto [y0, y1] = scaled_span(h, side);
      const auto [x0, x1] = scaled_span(w, side);
      std::vector<int64_t> keep;  // patch indices in the 4×4 grid, row-major
      for (auto r : patches_meeting(y0, y1))
        for (auto c : patches_meeting(x0, x1)) keep.push_back(r * (kSide / kPatch) + c);
      TORCH_CHECK(int64_t(keep.size()) == layout.n_tokens);
      const auto idx = at::tensor(keep, at::kLong).to(all.embeds.device());
      VisualTokens row;
      const auto bi = int64_t(b);
      row.embeds = all.embeds.narrow(0, bi, 1).index_select(1, idx);
      if (all.cls_attention.defined())
        row.cls_attention = all.cls_attention.narrow(0, bi, 1).index_select(1, idx);
      if (all.keys.defined()) row.keys = all.keys.narrow(0, bi, 1).index_select(1, idx);
      row.layouts = {layout};
      rows.push_back(std::move(row));
    }
    return stack_visual_tokens(rows, shape_);
  }
  std::vector<int64_t> prompt_ids(const io::Tokenizer& tok, const std::string& question) const override {
    auto ids = tok.encode("<image>\nQ: " + question + "\nA:", /*add_bos=*/true);
    return ids;
  }
};

LlavaConfig parse_config(const nlohmann::json& config) {
  LlavaConfig cfg = llava_config_from_json(config);
  cfg.validate();
  return cfg;
}

io::Tokenizer byte_tokenizer(int64_t image_token_id) {
  io::Tokenizer tok(std::make_shared<ByteTokenizerModel>());
  tok.set_added_tokens({{image_token_id, "<image>", /*special=*/true}});
  return tok;
}

LoadedFamilyModel load(const std::string& dir, const nlohmann::json& config, const RunContext& ctx) {
  const LlavaConfig cfg = parse_config(config);
  auto net = construct_for_loading<LlavaNet>(cfg, ctx.dtype);
  load_checkpoint_weights(*net, dir, ctx);
  return {std::make_shared<UnpaddedMropeModel>(cfg, net, load_preprocess(dir, cfg.vision.image_size)),
          byte_tokenizer(cfg.image_token_index)};
}

}  // namespace

VisualLayout expected_unpadded_layout(int width, int height) {
  const int side = std::max(width, height);
  const auto [y0, y1] = scaled_span(height, side);
  const auto [x0, x1] = scaled_span(width, side);
  const auto rows = int64_t(patches_meeting(y0, y1).size()), cols = int64_t(patches_meeting(x0, x1).size());
  return {rows * cols, rows, cols};
}

void register_unpadded_mrope_family() {
  static std::once_flag once;
  std::call_once(once, [] {
    ModelFamily f;
    f.architecture = kUnpaddedMropeArchitecture;
    f.summary = "test family: LLaVA with unpadded per-image tokens, M-RoPE and a byte tokenizer";
    f.shape = [](const nlohmann::json& config) {
      auto s = llava_shape(parse_config(config));
      s.architecture = kUnpaddedMropeArchitecture;
      return s;
    };
    f.load = load;
    register_model_family(std::move(f));
  });
}

const std::string& unpadded_mrope_model_dir() {
  return written_once([](const TempDir& dir) {
    register_unpadded_mrope_family();
    const fs::path dst = dir.path() / "unpadded";
    write_tiny_variant(dst, kUnpaddedMropeArchitecture, "tokenizer.model", [](nlohmann::json& config) {
      config["text_config"]["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {2, 3, 3}}};
    });
    return dst.string();
  });
}

}  // namespace vispco::testing
