// The FiLM-conditioned predictor g_φ of VisPCO (§3.3), its initialisation and its files.
#include "optimize/learned/predictor.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/dropout.h>
#include <torch/serialize.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"
#include "core/json_file.h"

namespace vispco::optimize::learned {

namespace fs = std::filesystem;

void PredictorOptions::validate() const {
  auto bad = [](const std::string& what) { throw InvalidArgument("predictor: " + what); };
  if (d_model < 8) bad("d_model must be ≥ 8, got " + std::to_string(d_model));
  if (n_outputs < 1) bad("n_outputs must be ≥ 1, got " + std::to_string(n_outputs));
  if (head_hidden1 < 1 || head_hidden2 < 1) bad("head widths must be ≥ 1");
  if (!(dropout >= 0 && dropout < 1)) bad("dropout must be in [0, 1), got " + std::to_string(dropout));
  if (!(out_init_std >= 0)) bad("out_init_std must be ≥ 0, got " + std::to_string(out_init_std));
}

static const JsonFields<PredictorOptions>& predictor_options_fields() {
  using T = PredictorOptions;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<PredictorOptions> fields("predictor", {
      {"d_model", &T::d_model}, {"n_outputs", &T::n_outputs}, {"head_hidden1", &T::head_hidden1},
      {"head_hidden2", &T::head_hidden2}, {"dropout", &T::dropout}, {"out_init_std", &T::out_init_std},
      {"seed", &T::seed}});
  // clang-format on
  return fields;
}

nlohmann::json to_json(const PredictorOptions& o) { return predictor_options_fields().write(o); }

PredictorOptions predictor_options_from_json(const nlohmann::json& j) {
  return predictor_options_fields().read_valid(j);
}

ResidualBlockImpl::ResidualBlockImpl(int64_t in, int64_t out, double dropout_) : dropout(dropout_) {
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({in})));
  fc = register_module("fc", torch::nn::Linear(in, out));
  if (in != out) skip = register_module("skip", torch::nn::Linear(in, out));
}

at::Tensor ResidualBlockImpl::forward(const at::Tensor& x) {
  auto y = at::gelu(fc(norm(x)));
  y = torch::nn::functional::dropout(
      y, torch::nn::functional::DropoutFuncOptions().p(dropout).training(is_training()));
  return y + (skip ? skip(x) : x);
}

PredictorImpl::PredictorImpl(const PredictorOptions& o) : opts(o) {
  opts.validate();
  const int64_t D = opts.d_model, d2 = D / 2, d4 = D / 4, d8 = D / 8;
  input_proj = register_module("input_proj", torch::nn::Linear(D, d2));
  block1 = register_module("block1", ResidualBlock(d2, d4, opts.dropout));
  block2 = register_module("block2", ResidualBlock(d4, d8, opts.dropout));
  budget_fc1 = register_module("budget_fc1", torch::nn::Linear(1, d4));
  budget_fc2 = register_module("budget_fc2", torch::nn::Linear(d4, d4));
  film1 = register_module("film1", torch::nn::Linear(d4, 2 * d4));
  film2 = register_module("film2", torch::nn::Linear(d4, 2 * d8));
  head_norm = register_module("head_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d8})));
  head1 = register_module("head1", torch::nn::Linear(d8 + d4, opts.head_hidden1));
  head2 = register_module("head2", torch::nn::Linear(opts.head_hidden1, opts.head_hidden2));
  head3 = register_module("head3", torch::nn::Linear(opts.head_hidden2, opts.n_outputs));
  // Deterministic initialisation from the options' seed (a local generator, not the global one): linear
  // layers U(±1/√fan_in) as PyTorch's default, LayerNorms at 1/0, FiLM as the identity (scale 1 + 0, shift
  // 0), the last layer small so that every sample starts near the kernel's zero-output parameters.
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(opts.seed);
  for (auto* lin : {&input_proj, &budget_fc1, &budget_fc2, &head1, &head2, &block1->fc, &block2->fc}) {
    const double bound = 1.0 / std::sqrt(double((*lin)->weight.size(1)));
    (*lin)->weight.uniform_(-bound, bound, gen);
    (*lin)->bias.uniform_(-bound, bound, gen);
  }
  for (auto* blk : {&block1, &block2})
    if ((*blk)->skip) {
      const double bound = 1.0 / std::sqrt(double((*blk)->skip->weight.size(1)));
      (*blk)->skip->weight.uniform_(-bound, bound, gen);
      (*blk)->skip->bias.uniform_(-bound, bound, gen);
    }
  head3->weight.normal_(0.0, opts.out_init_std, gen);
  head3->bias.zero_();
  for (auto* film : {&film1, &film2}) {
    (*film)->weight.zero_();
    (*film)->bias.zero_();
  }
}

at::Tensor PredictorImpl::forward(const at::Tensor& tokens, const at::Tensor& pool,
                                  const at::Tensor& budget) {
  TORCH_CHECK(tokens.dim() == 3 && tokens.size(2) == opts.d_model, "predictor: tokens must be [B, T, ",
              opts.d_model, "], got ", tokens.sizes());
  TORCH_CHECK(pool.dim() == 2 && pool.size(0) == tokens.size(0) && pool.size(1) == tokens.size(1),
              "predictor: pool must be [B, T], got ", pool.sizes());
  TORCH_CHECK(budget.dim() == 1 && budget.size(0) == tokens.size(0), "predictor: budget must be [B], got ",
              budget.sizes());
  const auto dev = input_proj->weight.device();
  auto x = input_proj(tokens.detach().to(dev, at::kFloat));
  auto e = budget_fc2(at::gelu(budget_fc1(budget.detach().to(dev, at::kFloat).unsqueeze(1))));  // [B, D/4]
  auto film = [](const at::Tensor& h, const at::Tensor& params) {
    auto parts = params.chunk(2, -1);
    return h * (1 + parts[0].unsqueeze(1)) + parts[1].unsqueeze(1);
  };
  x = film(block1(x), film1(e));
  x = film(block2(x), film2(e));
  auto w = pool.to(dev, at::kFloat).unsqueeze(-1);         // [B, T, 1]
  auto pooled = (x * w).sum(1) / w.sum(1).clamp_min(1.0);  // [B, D/8]
  // The budget embedding also enters the head directly: after the LayerNorm a FiLM scale on the pooled
  // features is largely normalised away, and the kernel parameters depend on b first of all.
  auto h = at::gelu(head1(at::cat({head_norm(pooled), e}, -1)));
  h = torch::nn::functional::dropout(
      h, torch::nn::functional::DropoutFuncOptions().p(opts.dropout).training(is_training()));
  return head3(at::gelu(head2(h)));
}

void save_predictor(const std::string& dir, Predictor& p, const nlohmann::json& meta) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create folder '" + dir + "': " + ec.message());
  torch::save(p, (fs::path(dir) / "predictor.pt").string());
  nlohmann::json j = meta;
  j["options"] = to_json(p->opts);
  const auto path = fs::path(dir) / "predictor.json";
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw IoError("cannot write " + path.string());
}

Predictor load_predictor(const std::string& dir, nlohmann::json* meta_out) {
  const auto json_path = fs::path(dir) / "predictor.json", pt_path = fs::path(dir) / "predictor.pt";
  if (!fs::exists(json_path) || !fs::exists(pt_path))
    throw IoError("no VisPCO predictor in '" + dir + "' (expected predictor.json and predictor.pt)");
  nlohmann::json j;
  try {
    std::ifstream in(json_path);
    j = parse_json(in, json_path.string());
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(json_path.string() + ": " + e.what());
  }
  if (!j.contains("options")) throw FormatError(json_path.string() + ": no \"options\" object");
  Predictor p(predictor_options_from_json(j["options"]));
  std::map<std::string, std::vector<int64_t>> expected;
  for (const auto& item : p->named_parameters()) expected[item.key()] = item.value().sizes().vec();
  try {
    torch::load(p, pt_path.string());
  } catch (const c10::Error& e) {
    throw FormatError(pt_path.string() + ": not a VisPCO predictor (" + e.what_without_backtrace() + ")");
  }
  for (const auto& item : p->named_parameters())
    if (item.value().sizes().vec() != expected[item.key()])
      throw FormatError(
          pt_path.string() + ": parameter '" + item.key() +
          "' has another shape than predictor.json's options imply (saved by an older vispco?)");
  p->eval();
  if (meta_out != nullptr) *meta_out = j;
  return p;
}

}  // namespace vispco::optimize::learned
