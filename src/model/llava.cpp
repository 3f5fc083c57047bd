// LLaVA network assembly, checkpoint loading by name (both transformers layouts), image encoding.
#include "model/llava.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <spdlog/spdlog.h>
#include <torch/nn/utils.h>

#include <malloc.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/default_dtype.h"
#include "core/errors.h"
#include "core/json_file.h"
#include "io/safetensors.h"
#include "model/blocks.h"
#include "model/gguf_llava.h"
#include "model/quant.h"
#include "model/model_source.h"

namespace vispco {

namespace fs = std::filesystem;

LlavaProjectorImpl::LlavaProjectorImpl(const LlavaConfig& cfg) : act(cfg.projector_hidden_act) {
  const int64_t dv = cfg.vision.hidden_size, d = cfg.text.hidden_size;
  linear_1 = register_module("linear_1", torch::nn::Linear(torch::nn::LinearOptions(dv, d).bias(cfg.projector_bias)));
  linear_2 = register_module("linear_2", torch::nn::Linear(torch::nn::LinearOptions(d, d).bias(cfg.projector_bias)));
}

at::Tensor LlavaProjectorImpl::forward(const at::Tensor& x) {
  return linear_forward(linear_2, activation(linear_forward(linear_1, x), act));
}

LlavaNetImpl::LlavaNetImpl(const LlavaConfig& cfg) {
  vision_tower = register_module("vision_tower", ClipVisionTower(cfg.vision));
  multi_modal_projector = register_module("multi_modal_projector", LlavaProjector(cfg));
  language_model = register_module("language_model", LlamaForCausalLM(cfg.text));
}

namespace {

// Checkpoint keys that may hold our parameter `name`: the older transformers layout (our names) first,
// then the layout of transformers ≥ 4.52 (model.vision_tower…, model.language_model.layers…, lm_head…).
std::vector<std::string> checkpoint_keys(const std::string& name) {
  auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  std::vector<std::string> keys{name};
  if (starts("language_model.model.")) keys.push_back("model.language_model." + name.substr(21));
  else if (starts("language_model.lm_head.")) keys.push_back(name.substr(15));
  else keys.push_back("model." + name);
  return keys;
}

/// Builds the network for loading: its parameters are allocated (and randomly initialised by LibTorch's
/// modules) in the compute dtype, not fp32, because load_weights replaces every one of them — an fp32 network
/// of a 1.1B model is 4.4 GB that the process would otherwise keep in its heap beside the weights (issue 20's
/// "no fp32 shadow copies"). The default dtype is restored before returning (core/default_dtype.h).
LlavaNet construct_for_loading(const LlavaConfig& cfg, c10::ScalarType dtype) {
  DefaultDtypeGuard guard(dtype);
  return LlavaNet(cfg);
}

/// Returns the heap pages of the replaced construction-time parameters to the kernel: main() raises glibc's
/// mmap and trim thresholds (training's activations), so freed blocks would otherwise stay resident.
void release_freed_heap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/// Where load_weights finds tensors: a Hugging Face checkpoint folder or a GGUF pair's mapped tensors.
struct TensorSource {
  std::string where;  ///< for messages
  std::function<bool(const std::string&)> contains;
  std::function<at::Tensor(const std::string&)> get;
  size_t count = 0;
  /// Optional: drops the resident mapped pages of a tensor once it has been converted (none for GGUF).
  std::function<void(const std::string&)> release;
};

void load_weights(LlavaNet& net, const TensorSource& ckpt, const RunContext& ctx) {
  // Pass 1: find and check every tensor (views into the mapped file, or the GGUF reader's tensors), so a bad
  // checkpoint throws before anything changes.
  struct Assignment {
    at::Tensor param, tensor;
    std::string key;  // the checkpoint's name of `tensor`
  };
  std::vector<Assignment> assign;
  for (auto& item : net->named_parameters(/*recurse=*/true)) {
    const auto& name = item.key();
    auto& param = item.value();
    std::string found;
    for (const auto& k : checkpoint_keys(name))
      if (ckpt.contains(k)) {
        found = k;
        break;
      }
    if (found.empty())
      throw ConfigError("missing tensor '" + name + "' in " + ckpt.where +
                        " (also looked for '" + checkpoint_keys(name).back() + "'; wrong model folder?)");
    auto t = ckpt.get(found);
    if (t.sizes() != param.sizes()) {
      std::ostringstream msg;
      msg << "tensor '" << found << "' in " << ckpt.where << " has shape " << t.sizes() << " but the config implies "
          << param.sizes();
      throw ConfigError(msg.str());
    }
    if (!at::isFloatingType(t.scalar_type()))
      throw ConfigError("tensor '" + found + "' has non-float dtype " + std::string(c10::toString(t.scalar_type())));
    assign.push_back({param, t, found});
  }
  if (assign.size() < ckpt.count) spdlog::debug("{} checkpoint tensors not used by the model", ckpt.count - assign.size());
  // Pass 2: free the constructed (random) parameters before any converted copy is allocated, so the peak is
  // the weights once in the compute dtype, not twice.
  for (auto& a : assign) a.param.set_data(at::empty({0}, a.param.options()));
  release_freed_heap();
  // Pass 3: the checkpoint's tensors, zero-copy where the dtype already is the compute dtype; a converted
  // tensor's mapped pages are dropped at once, so the peak is the converted weights plus one tensor's pages,
  // not plus the whole mapped file (a bf16 checkpoint computed in fp32: 1.5x the fp32 weights before).
  for (auto& a : assign) {
    if (a.tensor.scalar_type() == ctx.dtype && ctx.device.is_cpu()) {
      a.param.set_data(a.tensor);  // memory-mapped view, no copy
    } else {
      a.param.set_data(a.tensor.to(ctx.device, ctx.dtype));
      if (ckpt.release) ckpt.release(a.key);
    }
    a.tensor = at::Tensor();
  }
}

io::ImagePreprocessConfig load_preprocess(const std::string& dir, const LlavaConfig& cfg) {
  io::ImagePreprocessConfig p;
  p.image_size = static_cast<int>(cfg.vision.image_size);
  const auto path = fs::path(dir) / "preprocessor_config.json";
  if (!fs::exists(path)) return p;
  const nlohmann::json j = read_json_file(path.string(), "image preprocessing config");
  try {
    if (j.contains("image_mean")) p.mean = j["image_mean"].get<std::array<float, 3>>();
    if (j.contains("image_std")) p.std = j["image_std"].get<std::array<float, 3>>();
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path.string() + ": " + e.what());
  }
  return p;
}

}  // namespace

VisionLanguageModel::VisionLanguageModel(LlavaConfig cfg, LlavaNet net, io::Tokenizer tok, RunContext ctx)
    : cfg_(std::move(cfg)), net_(std::move(net)), tok_(std::move(tok)), ctx_(ctx) {
  pre_.image_size = static_cast<int>(cfg_.vision.image_size);
  net_->eval();
  for (auto& p : net_->parameters()) p.set_requires_grad(false);
}

VisionLanguageModel VisionLanguageModel::load(const std::string& dir, const RunContext& ctx) {
  const ModelSource src = resolve_model_source(dir);
  if (src.is_gguf()) {
    GgufLlava g = load_gguf_llava(src);
    std::fprintf(stderr, "%s\n", g.vision_layer_note.c_str());  // stderr: stdout may carry --json
    auto tok = io::Tokenizer::from_serialized(g.tokenizer_proto);
    if (g.image_token_id >= 0) tok.set_added_tokens({{g.image_token_id, "<image>", true}});
    LlavaNet net = construct_for_loading(g.config, ctx.dtype);
    {
      at::NoGradGuard no_grad;
      TensorSource ts{"GGUF pair " + src.text_gguf + " + " + src.mmproj_gguf,
                      [&](const std::string& k) { return g.tensors.count(k) != 0; },
                      [&](const std::string& k) { return g.tensors.at(k); }, g.tensors.size()};
      load_weights(net, ts, ctx);
    }
    release_freed_heap();
    VisionLanguageModel m(g.config, net, tok, ctx);
    m.pre_ = g.preprocess;
    return m;
  }
  if (!fs::is_directory(dir)) throw IoError("model folder '" + dir + "' does not exist");
  auto cfg = load_llava_config(dir);
  const auto tok_path = (fs::path(dir) / "tokenizer.model").string();
  auto tok = io::Tokenizer::load(tok_path);
  tok.set_added_tokens(io::load_added_tokens(dir));
  for (const auto& t : tok.added_tokens())  // the processor's "<image>" must be the id the model replaces
    if (t.content == "<image>" && t.id != cfg.image_token_index)
      throw ConfigError(dir + ": the tokenizer's <image> is id " + std::to_string(t.id) +
                        " but config.json's image_token_index is " + std::to_string(cfg.image_token_index));
  auto ckpt = io::CheckpointTensors::open_dir(dir);
  LlavaNet net = construct_for_loading(cfg, ctx.dtype);
  {
    at::NoGradGuard no_grad;
    TensorSource ts{ckpt.dir(), [&](const std::string& k) { return ckpt.contains(k); },
                    [&](const std::string& k) { return ckpt.tensor(k); }, ckpt.names().size(),
                    [&](const std::string& k) { ckpt.release(k); }};
    load_weights(net, ts, ctx);
  }
  release_freed_heap();
  VisionLanguageModel m(cfg, net, tok, ctx);
  m.pre_ = load_preprocess(dir, cfg);
  return m;
}

at::Tensor VisionLanguageModel::preprocess(const cv::Mat& rgb) const { return io::preprocess_llava(rgb, pre_); }

VisualTokens VisionLanguageModel::encode_images(const at::Tensor& pixels, bool want_cls_attention) {
  c10::InferenceMode guard;
  auto px = pixels.to(ctx_.device, ctx_.dtype);
  const bool drop_cls = cfg_.vision_feature_select_strategy == "default";
  auto vo = net_->vision_tower->forward(px, cfg_.n_vision_layers_used(), drop_cls, want_cls_attention);
  VisualTokens out;
  out.embeds = net_->multi_modal_projector->forward(vo.features);
  if (vo.cls_attention.defined()) out.cls_attention = vo.cls_attention.mean(1);
  out.keys = vo.keys;
  return out;
}

std::vector<int64_t> VisionLanguageModel::prompt_ids(const std::string& question) const {
  return io::encode_llava_prompt(tok_, question, cfg_.image_token_index);
}

void save_llava(const std::string& dir, const LlavaConfig& cfg, LlavaNet& net, c10::ScalarType dtype) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create folder '" + dir + "': " + ec.message());
  std::map<std::string, at::Tensor> tensors;
  for (const auto& item : net->named_parameters(true))
    tensors[item.key()] = item.value().detach().to(at::kCPU, dtype).contiguous();
  io::save_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  std::ofstream out(fs::path(dir) / "config.json");
  auto j = llava_config_to_json(cfg);
  j["torch_dtype"] = dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
  out << j.dump(2) << "\n";
  if (!out) throw IoError("cannot write " + (fs::path(dir) / "config.json").string());
}

}  // namespace vispco
