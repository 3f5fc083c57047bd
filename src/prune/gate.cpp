// The learned token gate: module, file format, pooled question.
#include "prune/gate.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"
#include "core/json_file.h"
#include "io/safetensors.h"
#include "prune/scorers/scorers.h"

namespace vispco {

void GateConfig::validate() const {
  if (d_model < 1) throw InvalidArgument("gate: d_model must be ≥ 1 (got " + std::to_string(d_model) + ")");
  if (hidden < 1) throw InvalidArgument("gate: hidden must be ≥ 1 (got " + std::to_string(hidden) + ")");
  if (!(temperature > 0) || !std::isfinite(temperature))
    throw InvalidArgument("gate: temperature must be > 0 (got " + std::to_string(temperature) + ")");
}

static const JsonFields<GateConfig>& gate_fields() {
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<GateConfig> fields("gate config", {
      {"d_model", &GateConfig::d_model}, {"hidden", &GateConfig::hidden},
      {"use_question", &GateConfig::use_question}, {"temperature", &GateConfig::temperature}});
  // clang-format on
  return fields;
}

nlohmann::json to_json(const GateConfig& c) { return gate_fields().write(c); }

GateConfig gate_config_from_json(const nlohmann::json& j) { return gate_fields().read_valid(j); }

TokenGateImpl::TokenGateImpl(const GateConfig& c, uint64_t seed) : cfg(c) {
  cfg.validate();
  const int64_t in = cfg.use_question ? 2 * cfg.d_model : cfg.d_model;
  fc1 = register_module("fc1", torch::nn::Linear(in, cfg.hidden));
  fc2 = register_module("fc2", torch::nn::Linear(cfg.hidden, 1));
  // Deterministic initialisation by seed (LibTorch's default init uses the global generator).
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  fc1->weight.copy_(at::randn(fc1->weight.sizes(), gen) / std::sqrt(double(in)));
  fc1->bias.zero_();
  fc2->weight.copy_(at::randn(fc2->weight.sizes(), gen) * (0.1 / std::sqrt(double(cfg.hidden))));
  fc2->bias.fill_(2.0);
}

namespace {
at::Tensor rms_normalise(const at::Tensor& x) { return x * at::rsqrt((x * x).mean(-1, true) + 1e-6); }
}  // namespace

at::Tensor TokenGateImpl::logits(const at::Tensor& tokens, const at::Tensor& question) {
  TORCH_CHECK(tokens.dim() == 3 && tokens.size(2) == cfg.d_model, "gate: tokens must be [B, N, ", cfg.d_model,
              "], got ", tokens.sizes());
  auto x = rms_normalise(tokens.to(fc1->weight.dtype()));
  if (cfg.use_question) {
    TORCH_CHECK(question.defined() && question.dim() == 2 && question.size(0) == tokens.size(0) &&
                    question.size(1) == cfg.d_model,
                "gate: question must be [B, ", cfg.d_model, "]");
    auto q = rms_normalise(question.to(fc1->weight.dtype())).unsqueeze(1).expand_as(x);
    x = at::cat({x, q}, -1);
  }
  return fc2(at::gelu(fc1(x))).squeeze(-1).to(at::kFloat);
}

at::Tensor TokenGateImpl::gate(const at::Tensor& tokens, const at::Tensor& question) {
  return at::sigmoid(logits(tokens, question) / cfg.temperature);
}

at::Tensor TokenGateImpl::log_gate(const at::Tensor& tokens, const at::Tensor& question) {
  return -at::softplus(-logits(tokens, question) / cfg.temperature);
}

std::string default_gate_path(const std::string& model_dir) {
  return (std::filesystem::path(model_dir) / "gate.safetensors").string();
}

void save_gate(const std::string& path, TokenGate& gate, const std::map<std::string, std::string>& extra) {
  std::map<std::string, at::Tensor> tensors;
  for (const auto& p : gate->named_parameters(true))
    tensors[p.key()] = p.value().detach().to(at::kCPU, at::kFloat).contiguous();
  auto meta = extra;
  meta["format"] = "vispco-gate";
  meta["gate_config"] = to_json(gate->cfg).dump();
  io::save_safetensors(path, tensors, meta);
}

TokenGate load_gate(const std::string& path, int64_t expect_d_model) {
  if (!std::filesystem::exists(path))
    throw IoError("no learned gate at '" + path +
                  "' (train one with `vispco train-gate --model DIR`, or name the "
                  "file with the stage option file=PATH)");
  auto f = io::SafetensorsFile::open(path);
  const auto& meta = f.metadata();
  if (!meta.count("format") || meta.at("format") != "vispco-gate" || !meta.count("gate_config"))
    throw FormatError("'" + path + "' is not a vispco gate file (metadata format=vispco-gate missing)");
  GateConfig cfg;
  try {
    cfg = gate_config_from_json(parse_json(meta.at("gate_config"), "'" + path + "': gate_config"));
  } catch (const nlohmann::json::exception& e) {
    throw FormatError("'" + path + "': gate_config is not JSON: " + e.what());
  }
  if (expect_d_model > 0 && cfg.d_model != expect_d_model)
    throw ConfigError("gate '" + path + "' reads " + std::to_string(cfg.d_model) +
                      "-wide tokens but this model's hidden size is " + std::to_string(expect_d_model) +
                      " (a gate trained for another model?)");
  TokenGate gate(cfg);
  torch::NoGradGuard no_grad;
  for (auto& p : gate->named_parameters(true)) {
    auto t = f.tensor(p.key());
    if (t.sizes() != p.value().sizes())
      throw FormatError("'" + path + "': tensor " + p.key() + " has shape " + c10::str(t.sizes()) +
                        ", expected " + c10::str(p.value().sizes()));
    p.value().copy_(t.to(at::kFloat));
  }
  return gate;
}

at::Tensor pooled_question(const TokenState& state) {
  auto m = instruction_mask(state).to(at::kFloat).unsqueeze(-1);  // [B, T, 1]
  auto sum = (state.hidden.to(at::kFloat) * m).sum(1);            // [B, D]
  return sum / m.sum(1).clamp_min(1.0);
}

}  // namespace vispco
