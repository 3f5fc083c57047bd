// The ordinal K predictor: network and file (see k_predictor.h).
#include "prune/auto_keep/k_predictor.h"

#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_file.h"
#include "core/seed_guard.h"
#include "io/safetensors.h"

namespace vispco {

namespace {

nlohmann::json meta_json(const KPredictorMeta& m) {
  return {{"template", m.template_text}, {"ladder", m.ladder},          {"target", m.target},
          {"n_features", m.n_features},  {"hidden", m.hidden},          {"tau", m.tau},
          {"features", m.features},      {"ladder_unit", m.ladder_unit}};
}

KPredictorMeta meta_from_json(const nlohmann::json& j) {
  KPredictorMeta m;
  m.template_text = j.at("template").get<std::string>();
  m.ladder = j.at("ladder").get<std::vector<int64_t>>();
  m.target = j.at("target").get<std::string>();
  m.n_features = j.at("n_features").get<int64_t>();
  m.hidden = j.at("hidden").get<int64_t>();
  m.tau = j.at("tau").get<double>();
  m.features = j.at("features").get<std::string>();
  m.ladder_unit = j.value("ladder_unit", std::string("count"));
  return m;
}

}  // namespace

KPredictorImpl::KPredictorImpl(KPredictorMeta m, uint64_t seed) : meta(std::move(m)) {
  if (meta.n_features < 1 || meta.hidden < 1 || meta.ladder.size() < 2)
    throw InvalidArgument("k predictor: needs ≥ 1 feature, hidden width ≥ 1 and a ladder of ≥ 2 rungs");
  SeedGuard seeded(seed);  // the layers' initial weights
  const int64_t R = static_cast<int64_t>(meta.ladder.size());
  fc1 = register_module("fc1", torch::nn::Linear(meta.n_features, meta.hidden));
  fc2 = register_module("fc2", torch::nn::Linear(meta.hidden, meta.hidden));
  out = register_module("out", torch::nn::Linear(meta.hidden, R - 1));
  feature_mean = register_buffer("feature_mean", torch::zeros({meta.n_features}));
  feature_std = register_buffer("feature_std", torch::ones({meta.n_features}));
}

at::Tensor KPredictorImpl::logits(const at::Tensor& features) {
  TORCH_CHECK(features.dim() == 2 && features.size(1) == meta.n_features,
              "k predictor: features must be [n, ", meta.n_features, "], got ", features.sizes());
  auto x = (features.to(at::kFloat) - feature_mean) / feature_std;
  return out(torch::relu(fc2(torch::relu(fc1(x)))));
}

std::vector<int> KPredictorImpl::predict(const at::Tensor& features, double tau) {
  if (tau < 0) tau = meta.tau;
  torch::NoGradGuard no_grad;
  auto counts = (torch::sigmoid(logits(features)) >= tau).sum(1).to(at::kLong).contiguous();
  std::vector<int> rungs(counts.size(0));
  for (int64_t i = 0; i < counts.size(0); ++i) rungs[i] = static_cast<int>(counts[i].item<int64_t>());
  return rungs;
}

int64_t KPredictorImpl::n_parameters() {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void save_k_predictor(const std::string& path, KPredictor& p,
                      const std::map<std::string, std::string>& extra) {
  std::map<std::string, at::Tensor> tensors;
  for (const auto& t : p->named_parameters(true))
    tensors[t.key()] = t.value().detach().to(at::kFloat).contiguous();
  for (const auto& t : p->named_buffers(true))
    tensors[t.key()] = t.value().detach().to(at::kFloat).contiguous();
  auto meta = extra;
  meta["format"] = "vispco-k-predictor";
  meta["meta"] = meta_json(p->meta).dump();
  io::save_safetensors(path, tensors, meta);
}

KPredictor load_k_predictor(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw IoError(
        "no K predictor at '" + path +
        "' (train one with `vispco optimize --method dynamic-k`, or name the file with keep=auto:file=PATH)");
  auto f = io::SafetensorsFile::open(path);
  const auto& md = f.metadata();
  if (!md.count("format") || md.at("format") != "vispco-k-predictor" || !md.count("meta"))
    throw FormatError("'" + path +
                      "' is not a vispco K predictor file (metadata format=vispco-k-predictor missing)");
  KPredictorMeta m;
  try {
    m = meta_from_json(parse_json(md.at("meta"), "'" + path + "': K predictor metadata"));
  } catch (const nlohmann::json::exception& e) {
    throw FormatError("'" + path + "': K predictor metadata is malformed: " + e.what());
  }
  if (m.n_features < 1 || m.hidden < 1 || m.ladder.size() < 2 || !(m.tau > 0 && m.tau < 1) ||
      (m.ladder_unit != "count" && m.ladder_unit != "permille"))
    throw FormatError("'" + path +
                      "': K predictor metadata out of range (features, hidden, ladder, tau or ladder_unit)");
  KPredictor p(m);
  torch::NoGradGuard no_grad;
  auto load = [&](const std::string& name, at::Tensor dst) {
    if (!f.contains(name)) throw FormatError("'" + path + "': tensor " + name + " missing");
    auto t = f.tensor(name);
    if (t.sizes() != dst.sizes())
      throw FormatError("'" + path + "': tensor " + name + " has shape " + c10::str(t.sizes()) +
                        ", expected " + c10::str(dst.sizes()));
    dst.copy_(t.to(at::kFloat));
  };
  for (auto& t : p->named_parameters(true)) load(t.key(), t.value());
  for (auto& t : p->named_buffers(true)) load(t.key(), t.value());
  return p;
}

}  // namespace vispco
