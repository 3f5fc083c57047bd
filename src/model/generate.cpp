// Batched prefill (left padding) + KV-cache decode with greedy / temperature / top-p sampling.
#include "model/generate.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"
#include "cost/timer.h"
#include "model/saliency.h"

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
  return {{"batch", batch},
          {"n_visual", n_visual},
          {"n_visual_kept", n_visual_kept},
          {"n_text_max", n_text_max},
          {"tokens_per_layer", tokens_per_layer},
          {"vision_ms", vision_ms},
          {"prepass_ms", prepass_ms},
          {"prefill_ms", prefill_ms},
          {"ttft_ms", ttft_ms},
          {"decode_ms", decode_ms},
          {"n_generated", n_generated},
          {"decode_tokens_per_s", decode_tokens_per_s},
          {"kv_cache_bytes", kv_cache_bytes}};
}

TokenState build_prefill_state(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                               const at::Tensor& visual) {
  const int64_t B = static_cast<int64_t>(reqs.size()), n_v = visual.size(1);
  const int64_t image_id = m.config().image_token_index;
  std::vector<int64_t> lengths, image_pos;
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
  auto& lm = m.net()->language_model;
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
    is_visual[b].narrow(0, pad + p, n_v).fill_(true);
    grid_index[b].narrow(0, pad + p, n_v).copy_(at::arange(n_v, at::kLong));
  }
  TokenState s;
  s.hidden = at::stack(rows, 0);
  s.valid = valid.to(dev);
  s.visual = is_visual.to(dev);
  s.grid_index = grid_index.to(dev);
  s.positions = (s.valid.to(at::kLong).cumsum(1) - 1).clamp_min(0);
  return s;
}

at::Tensor sample_next(const at::Tensor& logits, const GenerationConfig& gc, at::Generator& gen) {
  auto l = logits.to(at::kCPU, at::kFloat);
  if (gc.temperature == 0) return l.argmax(-1);
  auto probs = at::softmax(l / gc.temperature, -1);
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
  int64_t max_steps = 0;
  bool all_greedy = true;
  for (const auto& gc : row_configs) {
    gc.validate();
    max_steps = std::max(max_steps, gc.max_new_tokens);
    all_greedy = all_greedy && gc.temperature == 0;
  }
  c10::InferenceMode guard;
  const auto dev = m.context().device;
  const int64_t B = static_cast<int64_t>(reqs.size());
  GenerationOutput out;
  auto& st = out.stats;
  st.batch = B;
  Stopwatch total;

  const bool want_attention = hook != nullptr && hook->wants_vision_attention();
  const bool all_encoded = std::all_of(reqs.begin(), reqs.end(), [&](const VlmRequest& r) {
    return r.visual.embeds.defined() &&
           (!want_attention || (r.visual.cls_attention.defined() && r.visual.keys.defined()));
  });
  VisualTokens vis;
  if (all_encoded) {  // the tower already ran for these images
    std::vector<at::Tensor> e, a, k;
    for (const auto& r : reqs) {
      e.push_back(r.visual.embeds);
      if (want_attention) {
        a.push_back(r.visual.cls_attention);
        k.push_back(r.visual.keys);
      }
    }
    vis.embeds = at::stack(e, 0).to(dev, m.context().dtype);
    if (want_attention) {
      vis.cls_attention = at::stack(a, 0).to(dev, at::kFloat);
      vis.keys = at::stack(k, 0).to(dev, m.context().dtype);
    }
  } else {
    std::vector<at::Tensor> px;
    for (const auto& r : reqs) px.push_back(r.pixels);
    vis = m.encode_images(at::stack(px, 0), want_attention);
  }
  if (hook != nullptr) hook->begin(vis.cls_attention, vis.keys);
  sync_device(dev);
  st.vision_ms = total.ms();
  st.n_visual = vis.embeds.size(1);
  for (const auto& r : reqs) st.n_text_max = std::max<int64_t>(st.n_text_max, r.prompt_ids.size() - 1);
  if (hook != nullptr && hook->wants_visual_saliency()) {
    Stopwatch prepass;
    hook->set_visual_saliency(visual_token_saliency(m, reqs, vis.embeds).saliency);
    sync_device(dev);
    st.prepass_ms = prepass.ms();
  }

  Stopwatch prefill;
  auto& lm = m.net()->language_model;
  auto state = build_prefill_state(m, reqs, vis.embeds);
  KvCache cache(m.config().text.num_hidden_layers);
  DecoderStats dstats;
  auto h = lm->forward(state, cache, hook, &dstats);
  auto logits = lm->logits(h.narrow(1, h.size(1) - 1, 1)).squeeze(1);  // [B, V]
  sync_device(dev);
  st.prefill_ms = prefill.ms();
  st.tokens_per_layer = dstats.tokens_per_layer;
  st.n_visual_kept = state.visual[0].sum().item<int64_t>();

  std::vector<at::Generator> gens;
  for (const auto& gc : row_configs) gens.push_back(at::make_generator<at::CPUGeneratorImpl>(gc.seed));
  const int64_t eos = m.tokenizer().eos_id();
  out.tokens.assign(B, {});
  out.finish_reasons.assign(B, "length");
  std::vector<int64_t> active(B);  // request index of each row of the decode batch
  for (int64_t b = 0; b < B; ++b) active[b] = b;
  auto next_pos = state.positions.narrow(1, state.positions.size(1) - 1, 1) + 1;  // [B', 1]
  Stopwatch decode;
  for (int64_t step = 0; step < max_steps && !active.empty(); ++step) {
    auto cpu_logits = logits.to(at::kCPU, at::kFloat);  // [B', V]
    if (record_logits) {
      auto full = at::full({B, cpu_logits.size(1)}, NAN, cpu_logits.options());
      full.index_copy_(0, at::tensor(active, at::kLong), cpu_logits);
      out.step_logits.push_back(full);
    }
    std::vector<int64_t> next(active.size());
    if (all_greedy) {
      auto am = cpu_logits.argmax(-1);
      auto acc = am.accessor<int64_t, 1>();
      for (size_t i = 0; i < active.size(); ++i) next[i] = acc[static_cast<int64_t>(i)];
    } else {
      for (size_t i = 0; i < active.size(); ++i) {
        const auto r = static_cast<size_t>(active[i]);
        next[i] = sample_next(cpu_logits.narrow(0, static_cast<int64_t>(i), 1), row_configs[r], gens[r])
                      .item<int64_t>();
      }
    }
    if (step == 0) {
      st.ttft_ms = total.ms();
      decode.reset();
    }
    std::vector<int64_t> keep;  // positions in `active` of the rows that go on
    for (size_t i = 0; i < active.size(); ++i) {
      const auto r = static_cast<size_t>(active[i]);
      const auto& gc = row_configs[r];
      bool done = false;
      if (gc.stop_at_eos && next[i] == eos) {
        out.finish_reasons[r] = "stop";
        done = true;
      } else {
        out.tokens[r].push_back(next[i]);
        ++st.n_generated;
        if (on_token && !on_token(r, next[i])) {
          out.finish_reasons[r] = "stop";
          done = true;
        } else if (static_cast<int64_t>(out.tokens[r].size()) >= gc.max_new_tokens) {
          done = true;  // "length"
        }
      }
      if (!done) keep.push_back(static_cast<int64_t>(i));
    }
    st.kv_cache_bytes = std::max(st.kv_cache_bytes, cache.bytes());
    if (keep.empty()) break;
    std::vector<int64_t> next_kept;
    for (auto i : keep) next_kept.push_back(next[static_cast<size_t>(i)]);
    if (keep.size() < active.size()) {  // finished rows leave the batch
      const auto idx = at::tensor(keep, at::kLong);
      cache.select_rows(idx);
      next_pos = next_pos.index_select(0, idx.to(next_pos.device()));
      std::vector<int64_t> still;
      for (auto i : keep) still.push_back(active[static_cast<size_t>(i)]);
      active = std::move(still);
    }
    const int64_t Bk = static_cast<int64_t>(active.size());
    TokenState step_state;
    step_state.hidden = lm->embed(at::tensor(next_kept, at::kLong).to(dev).view({Bk, 1}));
    step_state.positions = next_pos;
    step_state.valid = at::ones({Bk, 1}, at::TensorOptions().dtype(at::kBool).device(dev));
    step_state.visual = at::zeros({Bk, 1}, at::TensorOptions().dtype(at::kBool).device(dev));
    step_state.grid_index = at::full({Bk, 1}, -1, at::TensorOptions().dtype(at::kLong).device(dev));
    next_pos = next_pos + 1;
    logits = lm->logits(lm->forward(step_state, cache)).squeeze(1);
  }
  sync_device(dev);
  st.decode_ms = decode.ms();
  const int64_t after_first = st.n_generated - std::min<int64_t>(st.n_generated, B);
  st.decode_tokens_per_s = st.decode_ms > 0 ? after_first / (st.decode_ms / 1000.0) : 0.0;
  st.kv_cache_bytes = std::max(st.kv_cache_bytes, cache.bytes());
  for (const auto& t : out.tokens) {
    auto text = m.tokenizer().decode(t);
    const auto a = text.find_first_not_of(" \t\n"), z = text.find_last_not_of(" \t\n");
    out.texts.push_back(a == std::string::npos ? "" : text.substr(a, z - a + 1));
  }
  return out;
}

}  // namespace vispco
