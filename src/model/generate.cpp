// Batched prefill (left padding) + KV-cache decode with greedy / temperature / top-p sampling.
#include "model/generate.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"
#include "cost/timer.h"
#include "model/decode_batch.h"

namespace vispco {

void GenerationConfig::validate() const {
  if (max_new_tokens < 1)
    throw InvalidArgument("max_new_tokens must be ≥ 1 (got " + std::to_string(max_new_tokens) + ")");
  if (!(temperature >= 0))
    throw InvalidArgument("temperature must be ≥ 0 (got " + std::to_string(temperature) + ")");
  if (!(top_p > 0 && top_p <= 1))
    throw InvalidArgument("top_p must be in (0, 1] (got " + std::to_string(top_p) + ")");
}

static const JsonFields<GenerationConfig>& generation_fields() {
  using C = GenerationConfig;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<GenerationConfig> fields("generation settings", {
      {"max_new_tokens", &C::max_new_tokens}, {"temperature", &C::temperature}, {"top_p", &C::top_p},
      {"seed", &C::seed}, {"stop_at_eos", &C::stop_at_eos}});
  // clang-format on
  return fields;
}

nlohmann::json to_json(const GenerationConfig& c) { return generation_fields().write(c); }

GenerationConfig generation_config_from_json(const nlohmann::json& j) {
  return generation_fields().read_valid(j);
}

nlohmann::json GenerationStats::to_json() const {
  using S = GenerationStats;
  // clang-format off
  static const JsonFields<S> fields("generation stats", {
      {"batch", &S::batch}, {"n_visual", &S::n_visual}, {"n_visual_kept", &S::n_visual_kept},
      {"n_text_max", &S::n_text_max}, {"tokens_per_layer", &S::tokens_per_layer}, {"vision_ms", &S::vision_ms},
      {"prepass_ms", &S::prepass_ms}, {"prefill_ms", &S::prefill_ms}, {"ttft_ms", &S::ttft_ms},
      {"decode_ms", &S::decode_ms}, {"n_generated", &S::n_generated},
      {"decode_tokens_per_s", &S::decode_tokens_per_s}, {"kv_cache_bytes", &S::kv_cache_bytes}});
  // clang-format on
  return fields.write(*this);
}

namespace {

// [3, B, T] M-RoPE positions of a prefill laid out by build_prefill_state (see there).
at::Tensor multi_axis_positions(const at::Tensor& valid, const std::vector<int64_t>& image_start,
                                const VisualLayout& layout, int64_t axes) {
  if (axes != 3)
    throw InvalidArgument("build_prefill_state: " + std::to_string(axes) +
                          " position axes (supported: 1, or 3 for M-RoPE)");
  if (layout.grid_rows * layout.grid_cols != layout.n_tokens)
    throw InvalidArgument("build_prefill_state: M-RoPE needs N_v = rows·cols, got " +
                          std::to_string(layout.n_tokens) + " tokens on a " +
                          std::to_string(layout.grid_rows) + "×" + std::to_string(layout.grid_cols) +
                          " grid");
  const int64_t B = valid.size(0), T = valid.size(1), n_v = layout.n_tokens;
  auto pos = at::zeros({3, B, T}, at::kLong);
  auto acc = pos.accessor<int64_t, 3>();
  const auto v = valid.to(at::kCPU).contiguous();
  const auto va = v.accessor<bool, 2>();
  for (int64_t b = 0; b < B; ++b) {
    int64_t next = 0;  // the next text position
    for (int64_t t = 0; t < T; ++t) {
      if (!va[b][t]) continue;
      if (t == image_start[b]) {  // the image span: (p₀, p₀ + r, p₀ + c)
        for (int64_t g = 0; g < n_v; ++g) {
          acc[0][b][t + g] = next;
          acc[1][b][t + g] = next + g / layout.grid_cols;
          acc[2][b][t + g] = next + g % layout.grid_cols;
        }
        next += std::max(layout.grid_rows, layout.grid_cols);
        t += n_v - 1;
        continue;
      }
      for (int64_t a = 0; a < 3; ++a) acc[a][b][t] = next;
      ++next;
    }
  }
  return pos;
}

}  // namespace

TokenState build_prefill_state(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                               const at::Tensor& visual, const VisualLayout& given) {
  const int64_t B = static_cast<int64_t>(reqs.size()), n_v = visual.size(1);
  VisualLayout layout = given;
  if (layout.n_tokens == 0) {
    layout = m.shape().default_layout();
    layout.n_tokens = n_v;
  }
  if (layout.n_tokens != n_v)
    throw InvalidArgument("build_prefill_state: " + std::to_string(n_v) +
                          " visual tokens per row for a layout of " + std::to_string(layout.n_tokens));
  const int64_t image_id = m.shape().image_token_id;
  std::vector<int64_t> lengths, image_pos, image_start;
  for (const auto& r : reqs) {
    const auto n_img = std::count(r.prompt_ids.begin(), r.prompt_ids.end(), image_id);
    if (n_img != 1)
      throw InvalidArgument("a prompt must hold exactly one image placeholder (id " +
                            std::to_string(image_id) + "), got " + std::to_string(n_img));
    image_pos.push_back(std::find(r.prompt_ids.begin(), r.prompt_ids.end(), image_id) - r.prompt_ids.begin());
    lengths.push_back(static_cast<int64_t>(r.prompt_ids.size()) - 1 + n_v);
  }
  const int64_t T = *std::max_element(lengths.begin(), lengths.end());
  auto dev = visual.device();
  auto& lm = m.language_model();
  std::vector<at::Tensor> rows;
  auto valid = at::zeros({B, T}, at::TensorOptions().dtype(at::kBool));
  auto is_visual = at::zeros({B, T}, at::TensorOptions().dtype(at::kBool));
  auto grid_index = at::full({B, T}, -1, at::TensorOptions().dtype(at::kLong));
  for (int64_t b = 0; b < B; ++b) {
    const auto& ids = reqs[b].prompt_ids;
    auto id_t = at::tensor(ids, at::TensorOptions().dtype(at::kLong)).to(dev);
    // The placeholder's own row is dropped below; it may lie outside the table (−200, a GGUF's n_vocab).
    auto emb = lm->embed(id_t.masked_fill(id_t == image_id, 0));  // [n_ids, D]
    const int64_t p = image_pos[b], pad = T - lengths[b];
    std::vector<at::Tensor> parts;
    if (pad > 0) parts.push_back(at::zeros({pad, emb.size(1)}, emb.options()));
    parts.push_back(emb.narrow(0, 0, p));
    parts.push_back(visual[b]);
    parts.push_back(emb.narrow(0, p + 1, emb.size(0) - p - 1));
    rows.push_back(at::cat(parts, 0));
    valid[b].narrow(0, pad, lengths[b]).fill_(true);
    image_start.push_back(pad + p);
    is_visual[b].narrow(0, pad + p, n_v).fill_(true);
    grid_index[b].narrow(0, pad + p, n_v).copy_(at::arange(n_v, at::kLong));
  }
  TokenState s;
  s.hidden = at::stack(rows, 0);
  s.valid = valid.to(dev);
  s.visual = is_visual.to(dev);
  s.grid_index = grid_index.to(dev);
  if (m.shape().position_axes == 1)
    s.positions = (s.valid.to(at::kLong).cumsum(1) - 1).clamp_min(0);
  else
    s.positions = multi_axis_positions(valid, image_start, layout, m.shape().position_axes).to(dev);
  return s;
}

at::Tensor sample_next(const at::Tensor& logits, const GenerationConfig& gc, at::Generator& gen) {
  auto l = logits.to(at::kCPU, at::kFloat);
  if (gc.temperature == 0) return l.argmax(-1);
  at::Tensor probs;
  const double scale = l.abs().max().item<double>() / gc.temperature;
  if (scale < 1e30) {  // logits / T stays well inside fp32
    probs = at::softmax(l / gc.temperature, -1);
  } else {
    // A tiny T (1e-300 is inside OpenAI's [0, 2]) overflows logits / T to ±inf and softmax to NaN. The
    // differences to the row's maximum, scaled in fp64, are ≤ 0 (−inf at worst, 0 at the maximum): the same
    // distribution, without inf − inf (it tends to argmax, ties shared).
    const auto d = l.to(at::kDouble);
    probs = at::softmax((d - d.amax(-1, true)) / gc.temperature, -1).to(at::kFloat);
  }
  if (gc.top_p < 1.0) {
    auto [sorted, order] = probs.sort(-1, /*descending=*/true);
    auto before = sorted.cumsum(-1) - sorted;      // mass strictly before each token
    sorted.masked_fill_(before >= gc.top_p, 0.0);  // the first token always survives
    probs = at::zeros_like(probs).scatter_(-1, order, sorted);
    probs = probs / probs.sum(-1, true);
  }
  return at::multinomial(probs, 1, /*replacement=*/false, gen).squeeze(-1);
}

GenerationOutput generate(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                          const GenerationConfig& gc, PrefillHook* hook, bool record_logits) {
  return generate(m, reqs, std::vector<GenerationConfig>(reqs.size(), gc), hook, record_logits);
}

GenerationOutput generate(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                          const std::vector<GenerationConfig>& row_configs, PrefillHook* hook,
                          bool record_logits, const TokenCallback& on_token) {
  if (reqs.empty()) throw InvalidArgument("generate: empty batch");
  if (row_configs.size() != reqs.size())
    throw InvalidArgument("generate: " + std::to_string(row_configs.size()) + " decoding configs for " +
                          std::to_string(reqs.size()) + " requests");
  c10::InferenceMode guard;
  const auto dev = m.context().device;
  const int64_t B = static_cast<int64_t>(reqs.size());
  GenerationOutput out;
  Stopwatch total;
  DecodeBatch batch(m);
  std::vector<int64_t> ids(B);
  for (int64_t b = 0; b < B; ++b) ids[b] = b;
  out.stats = batch.add(reqs, row_configs, ids, hook, std::vector<bool>(B, record_logits));
  auto& st = out.stats;
  st.kv_cache_bytes = batch.kv_cache_bytes();
  out.tokens.assign(B, {});
  out.finish_reasons.assign(B, "length");
  std::vector<std::vector<at::Tensor>> row_logits(B);
  const RowTokenCallback cb = [&](int64_t id, int64_t token) {
    return !on_token || on_token(static_cast<size_t>(id), token);
  };
  Stopwatch decode;
  for (bool first = true; !batch.empty(); first = false) {
    for (auto& f : batch.sample(cb)) {
      if (!f.error.empty()) throw Error("generate: row " + std::to_string(f.id) + ": " + f.error);
      out.tokens[f.id] = std::move(f.tokens);
      out.finish_reasons[f.id] = f.finish_reason;
      row_logits[f.id] = std::move(f.step_logits);
    }
    if (first) {
      st.ttft_ms = total.ms();
      decode.reset();
    }
    batch.advance();
    st.kv_cache_bytes = std::max(st.kv_cache_bytes, batch.kv_cache_bytes());
  }
  sync_device(dev);
  st.decode_ms = decode.ms();
  st.n_generated = batch.n_generated();
  const int64_t after_first = st.n_generated - std::min<int64_t>(st.n_generated, B);
  st.decode_tokens_per_s = st.decode_ms > 0 ? after_first / (st.decode_ms / 1000.0) : 0.0;
  if (record_logits) {  // per step [B, V], NaN for rows that had finished
    size_t steps = 0;
    for (const auto& l : row_logits) steps = std::max(steps, l.size());
    for (size_t s = 0; s < steps; ++s) {
      at::Tensor full;
      for (int64_t b = 0; b < B; ++b) {
        if (s >= row_logits[b].size()) continue;
        const auto& l = row_logits[b][s];
        if (!full.defined()) full = at::full({B, l.size(1)}, NAN, l.options());
        full[b].copy_(l[0]);
      }
      out.step_logits.push_back(full);
    }
  }
  for (const auto& t : out.tokens) {
    auto text = m.tokenizer().decode(t);
    const auto a = text.find_first_not_of(" \t\n"), z = text.find_last_not_of(" \t\n");
    out.texts.push_back(a == std::string::npos ? "" : text.substr(a, z - a + 1));
  }
  return out;
}

}  // namespace vispco
