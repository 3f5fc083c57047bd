// Loading a family's weights by name from a checkpoint; see weights.h.
#include "model/weights.h"

#include <ATen/ATen.h>
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.h"
#include "core/json_file.h"
#include "io/safetensors.h"

namespace vispco {

namespace fs = std::filesystem;

std::vector<std::string> hf_checkpoint_keys(const std::string& name) {
  auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  std::vector<std::string> keys{name};
  if (starts("language_model.model."))
    keys.push_back("model.language_model." + name.substr(21));
  else if (starts("language_model.lm_head."))
    keys.push_back(name.substr(15));
  else
    keys.push_back("model." + name);
  return keys;
}

void release_freed_heap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void load_weights(torch::nn::Module& net, const TensorSource& ckpt, const RunContext& ctx,
                  const CheckpointKeys& keys) {
  // Pass 1: find and check every tensor (views into the mapped file, or the GGUF reader's tensors), so a bad
  // checkpoint throws before anything changes.
  struct Assignment {
    at::Tensor param, tensor;
    std::string key;  // the checkpoint's name of `tensor`
  };
  std::vector<Assignment> assign;
  for (auto& item : net.named_parameters(/*recurse=*/true)) {
    const auto& name = item.key();
    auto& param = item.value();
    std::string found;
    for (const auto& k : keys(name))
      if (ckpt.contains(k)) {
        found = k;
        break;
      }
    if (found.empty())
      throw ConfigError("missing tensor '" + name + "' in " + ckpt.where + " (also looked for '" +
                        keys(name).back() + "'; wrong model folder?)");
    auto t = ckpt.get(found);
    if (t.sizes() != param.sizes()) {
      std::ostringstream msg;
      msg << "tensor '" << found << "' in " << ckpt.where << " has shape " << t.sizes()
          << " but the config implies " << param.sizes();
      throw ConfigError(msg.str());
    }
    if (!at::isFloatingType(t.scalar_type()))
      throw ConfigError("tensor '" + found + "' has non-float dtype " +
                        std::string(c10::toString(t.scalar_type())));
    assign.push_back({param, t, found});
  }
  if (assign.size() < ckpt.count)
    spdlog::debug("{} checkpoint tensors not used by the model", ckpt.count - assign.size());
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

void load_checkpoint_weights(torch::nn::Module& net, const std::string& dir, const RunContext& ctx,
                             const CheckpointKeys& keys) {
  const auto ckpt = io::CheckpointTensors::open_dir(dir);
  at::NoGradGuard no_grad;
  TensorSource ts{ckpt.dir(), [&](const std::string& k) { return ckpt.contains(k); },
                  [&](const std::string& k) { return ckpt.tensor(k); }, ckpt.names().size(),
                  [&](const std::string& k) { ckpt.release(k); }};
  load_weights(net, ts, ctx, keys);
}

io::ImagePreprocessConfig load_preprocess(const std::string& dir, int64_t image_size) {
  io::ImagePreprocessConfig p;
  p.image_size = static_cast<int>(image_size);
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

void save_hf_folder(const std::string& dir, torch::nn::Module& net, nlohmann::json config,
                    c10::ScalarType dtype) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create folder '" + dir + "': " + ec.message());
  std::map<std::string, at::Tensor> tensors;
  for (const auto& item : net.named_parameters(true))
    tensors[item.key()] = item.value().detach().to(at::kCPU, dtype).contiguous();
  io::save_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  std::ofstream out(fs::path(dir) / "config.json");
  config["torch_dtype"] = dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
  out << config.dump(2) << "\n";
  if (!out) throw IoError("cannot write " + (fs::path(dir) / "config.json").string());
}

}  // namespace vispco
