// Continuous-batching decode: per-group prefill, KV-cache merge, one batched decoder step per step().
#include "model/decode_batch.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include "core/errors.h"
#include "cost/timer.h"
#include "model/saliency.h"

namespace vispco {
namespace {

// The group's visual tokens: the towers' outputs the requests carry, or one tower pass over their pixels.
VisualTokens group_visual_tokens(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                                 bool want_attention) {
  const bool all_encoded = std::all_of(reqs.begin(), reqs.end(), [&](const VlmRequest& r) {
    return r.visual.embeds.defined() &&
           (!want_attention || (r.visual.cls_attention.defined() && r.visual.keys.defined()));
  });
  if (!all_encoded) {
    std::vector<at::Tensor> px;
    for (const auto& r : reqs) px.push_back(r.pixels);
    return m.encode_image_list(px, want_attention);
  }
  const auto dev = m.context().device;
  std::vector<VisualTokens> rows;  // each [1, N_b, …]
  for (const auto& r : reqs) {
    VisualTokens row;
    row.embeds = r.visual.embeds.unsqueeze(0).to(dev, m.context().dtype);
    if (want_attention) {
      row.cls_attention = r.visual.cls_attention.unsqueeze(0).to(dev, at::kFloat);
      row.keys = r.visual.keys.unsqueeze(0).to(dev, m.context().dtype);
    }
    row.layouts = r.visual.layouts;
    rows.push_back(std::move(row));
  }
  return stack_visual_tokens(rows, m.shape());
}

// A copy of `c` whose every layer's buffers hold exactly its length (ImagePrefix::exact_buffers): the first
// append of a LayerKvCache keeps the tensors it is given.
KvCache exact_copy(const KvCache& c) {
  KvCache out(static_cast<int64_t>(c.layers.size()));
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const auto& layer = c.layers[l];
    if (layer.bytes() == 0) continue;
    out.layers[l].append(layer.keys().clone(), layer.values().clone(), layer.valid().clone());
  }
  return out;
}

// The requests' visual tokens (group_visual_tokens, the tower's attention too when the hook scores with it)
// and the milliseconds the tower took, the device synchronised.
std::pair<VisualTokens, double> encode_timed(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                                             PrefillHook* hook) {
  Stopwatch vision;
  auto vis = group_visual_tokens(m, reqs, hook != nullptr && hook->wants_vision_attention());
  sync_device(m.context().device);
  return {std::move(vis), vision.ms()};
}

// The rows of `vis` grouped by visual layout (N_v, grid), groups and rows in order of first appearance:
// {row indices per group, each group's layout}. Without per-image layouts every row has the shape's grid
// at the embeddings' N_v.
std::pair<std::vector<std::vector<int64_t>>, std::vector<VisualLayout>> group_by_layout(
    const VisualTokens& vis, const ModelShape& shape) {
  std::vector<std::vector<int64_t>> groups;
  std::vector<VisualLayout> layouts;
  for (int64_t b = 0; b < vis.embeds.size(0); ++b) {
    auto l = vis.layout(b, shape);
    if (vis.layouts.empty()) l.n_tokens = vis.embeds.size(1);  // every image as the shape says
    const auto it = std::find(layouts.begin(), layouts.end(), l);
    if (it == layouts.end()) {
      layouts.push_back(l);
      groups.push_back({b});
    } else {
      groups[it - layouts.begin()].push_back(b);
    }
  }
  return {groups, layouts};
}

}  // namespace

VlmRequest with_visual_row(const VlmRequest& r, const VisualTokens& vis, int64_t b, const ModelShape& shape) {
  auto row = vis.row(b, shape);
  VlmRequest out = r;
  out.visual.embeds = row.embeds[0];
  out.visual.cls_attention = row.cls_attention.defined() ? row.cls_attention[0] : at::Tensor();
  out.visual.keys = row.keys.defined() ? row.keys[0] : at::Tensor();
  out.visual.layouts = row.layouts;
  return out;
}

DecodeBatch::DecodeBatch(VisionLanguageModel& m) : m_(m), cache_(m.shape().n_layers) {}

std::vector<int64_t> DecodeBatch::ids() const {
  std::vector<int64_t> out;
  for (const auto& r : rows_) out.push_back(r.id);
  return out;
}

int64_t ImagePrefix::bytes() const {
  int64_t n = cache.bytes();
  if (next_pos.defined()) n += next_pos.numel() * next_pos.element_size();
  return n;
}

bool ImagePrefix::exact_buffers() const {
  for (const auto& l : cache.layers) {
    if (l.bytes() == 0) continue;
    // bytes() counts the buffers' capacity; keys(), values() and valid() are views of their first length().
    const auto k = l.keys(), v = l.values(), valid = l.valid();
    if (l.bytes() != k.numel() * k.element_size() + v.numel() * v.element_size() + valid.numel())
      return false;
  }
  return true;
}

void DecodeBatch::check_rows(size_t n, const std::vector<GenerationConfig>& configs,
                             const std::vector<int64_t>& ids, const std::vector<bool>& record_logits,
                             const std::vector<int64_t>& top_logprobs) const {
  if (n == 0) throw InvalidArgument("decode batch: empty group");
  if (configs.size() != n || ids.size() != n || record_logits.size() != n)
    throw InvalidArgument("decode batch: " + std::to_string(n) + " requests with " +
                          std::to_string(configs.size()) + " configs, " + std::to_string(ids.size()) +
                          " ids and " + std::to_string(record_logits.size()) + " logit flags");
  if (!top_logprobs.empty() && top_logprobs.size() != n)
    throw InvalidArgument("decode batch: " + std::to_string(top_logprobs.size()) + " top_logprobs for " +
                          std::to_string(n) + " requests");
  for (const auto k : top_logprobs)
    if (k < -1 || k > 20)
      throw InvalidArgument("decode batch: top_logprobs must be −1 or in [0, 20], got " + std::to_string(k));
  if (!to_feed_.empty()) throw Error("decode batch: add() between sample() and advance()");
  for (const auto& gc : configs) gc.validate();
}

GenerationStats DecodeBatch::add(const std::vector<VlmRequest>& reqs,
                                 const std::vector<GenerationConfig>& configs,
                                 const std::vector<int64_t>& ids, PrefillHook* hook,
                                 const std::vector<bool>& record_logits,
                                 const std::vector<int64_t>& top_logprobs) {
  check_rows(reqs.size(), configs, ids, record_logits, top_logprobs);
  c10::InferenceMode guard;
  const auto dev = m_.context().device;
  const auto [vis, vision_ms] = encode_timed(m_, reqs, hook);
  // Images of different layouts (N_v, grid) are prefilled in groups of one layout, in order of first
  // appearance; every group's rows then join the batch together (decode mixes them freely).
  const auto [groups, group_layout] = group_by_layout(vis, m_.shape());
  std::vector<Prefilled> parts;
  std::vector<int64_t> order;  // request index of each prefilled row, in join order
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups.size() == 1) {
      parts.push_back(prefill_group(reqs, vis, group_layout[g], hook));
    } else {
      std::vector<VlmRequest> sub;
      std::vector<VisualTokens> rows;
      for (const auto b : groups[g]) {
        sub.push_back(reqs[b]);
        rows.push_back(vis.row(b, m_.shape()));
      }
      parts.push_back(prefill_group(sub, stack_visual_tokens(rows, m_.shape()), group_layout[g], hook));
    }
    order.insert(order.end(), groups[g].begin(), groups[g].end());
  }
  GenerationStats st;
  st.batch = static_cast<int64_t>(reqs.size());
  st.vision_ms = vision_ms;
  st.row_n_visual.assign(reqs.size(), 0);
  st.row_n_visual_kept.assign(reqs.size(), 0);
  for (size_t g = 0; g < groups.size(); ++g)
    for (const auto b : groups[g]) {
      st.row_n_visual[b] = parts[g].stats.n_visual;
      st.row_n_visual_kept[b] = parts[g].stats.n_visual_kept;
    }
  for (const auto& p : parts) {
    st.prepass_ms += p.stats.prepass_ms;
    st.prefill_ms += p.stats.prefill_ms;
    st.n_visual = std::max(st.n_visual, p.stats.n_visual);
    st.n_visual_kept = std::max(st.n_visual_kept, p.stats.n_visual_kept);
    st.n_text_max = std::max(st.n_text_max, p.stats.n_text_max);
    if (st.tokens_per_layer.size() < p.stats.tokens_per_layer.size())
      st.tokens_per_layer.resize(p.stats.tokens_per_layer.size(), 0);
    for (size_t l = 0; l < p.stats.tokens_per_layer.size(); ++l)
      st.tokens_per_layer[l] = std::max(st.tokens_per_layer[l], p.stats.tokens_per_layer[l]);
  }

  join(parts, order, configs, ids, record_logits, top_logprobs);
  return st;
}

void DecodeBatch::join(std::vector<Prefilled>& parts, const std::vector<int64_t>& order,
                       const std::vector<GenerationConfig>& configs, const std::vector<int64_t>& ids,
                       const std::vector<bool>& record_logits, const std::vector<int64_t>& top_logprobs) {
  // Join into copies first (a KvCache copy shares its tensors, and concat_rows replaces them rather than
  // writing into them), then commit with moves that cannot throw: a throw leaves the running batch as it was.
  KvCache joined = cache_;
  auto joined_logits = pending_logits_;
  auto joined_pos = next_pos_;
  for (auto& p : parts) {
    joined.concat_rows(p.cache);
    joined_logits = joined_logits.defined() ? at::cat({joined_logits, p.logits}, 0) : p.logits;
    joined_pos =
        joined_pos.defined() ? at::cat({joined_pos, p.next_pos}, position_batch_dim(p.next_pos)) : p.next_pos;
  }
  std::vector<Row> joining;
  for (const auto i : order) {
    Row r;
    r.id = ids[i];
    r.gc = configs[i];
    r.gen = at::make_generator<at::CPUGeneratorImpl>(configs[i].seed);
    r.record = record_logits[i];
    r.top_n = top_logprobs.empty() ? -1 : top_logprobs[i];
    joining.push_back(std::move(r));
  }
  rows_.reserve(rows_.size() + joining.size());
  cache_ = std::move(joined);
  pending_logits_ = std::move(joined_logits);
  next_pos_ = std::move(joined_pos);
  for (auto& r : joining) rows_.push_back(std::move(r));
}

ImagePrefix DecodeBatch::prefill_image_prefix(const VlmRequest& req, PrefillHook* hook) {
  return std::move(prefill_image_prefixes({req}, hook).at(0));
}

std::vector<ImagePrefix> DecodeBatch::prefill_image_prefixes(const std::vector<VlmRequest>& reqs,
                                                             PrefillHook* hook) {
  if (reqs.empty()) throw InvalidArgument("decode batch: no requests to prefill image prefixes for");
  if (hook != nullptr && hook->wants_visual_saliency())
    throw InvalidArgument(
        "decode batch: a plan that needs the gradient pre-pass reads the whole prompt; its "
        "image prefix cannot be prefilled alone");
  const int64_t image_id = m_.shape().image_token_id;
  std::vector<VlmRequest> heads;  // each prompt up to and including its placeholder
  for (const auto& req : reqs) {
    const auto& ids = req.prompt_ids;
    if (std::count(ids.begin(), ids.end(), image_id) != 1)
      throw InvalidArgument("a prompt must hold exactly one image placeholder (id " +
                            std::to_string(image_id) + ")");
    VlmRequest head = req;
    head.prompt_ids.assign(ids.begin(), std::find(ids.begin(), ids.end(), image_id) + 1);
    heads.push_back(std::move(head));
  }
  c10::InferenceMode guard;
  const auto dev = m_.context().device;
  const auto [vis, vision_ms] = encode_timed(m_, reqs, hook);
  const auto [groups, group_layout] = group_by_layout(vis, m_.shape());  // as add() groups them
  std::vector<ImagePrefix> out(reqs.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& layout = group_layout[g];
    std::vector<VlmRequest> sub;
    std::vector<VisualTokens> rows;
    int64_t longest = 0;
    for (const auto b : groups[g]) {
      sub.push_back(heads[b]);
      if (groups.size() > 1) rows.push_back(vis.row(b, m_.shape()));
      longest = std::max<int64_t>(longest, static_cast<int64_t>(heads[b].prompt_ids.size()));
    }
    const VisualTokens gv = groups.size() == 1 ? vis : stack_visual_tokens(rows, m_.shape());
    Stopwatch prefill;
    if (hook != nullptr) hook->begin(gv.cls_attention, gv.keys, layout);
    auto state = build_prefill_state(m_, sub, gv.embeds.narrow(1, 0, layout.n_tokens), layout);
    const auto next = next_positions(state.positions);  // before pruning: one past each image's last position
    KvCache cache(m_.shape().n_layers);
    DecoderStats dstats;
    m_.language_model()->forward(state, cache, hook, &dstats);
    sync_device(dev);
    const double prefill_ms = prefill.ms();
    const auto kept = state.visual.sum(1).to(at::kCPU);  // [B_g] visual tokens left per row
    for (size_t j = 0; j < groups[g].size(); ++j) {
      const int64_t b = groups[g][j];
      ImagePrefix& p = out[b];
      const auto row = at::tensor({static_cast<int64_t>(j)}, at::kLong);
      p.cache = cache;                // shares the batch's tensors until select_rows() copies this row out
      p.cache.select_rows(row);       // this row, its leading padding dropped
      p.cache = exact_copy(p.cache);  // exact buffers (ImagePrefix), no view of the batch's
      p.next_pos = next.index_select(position_batch_dim(next), row.to(next.device()));
      p.n_prefix = static_cast<int64_t>(heads[b].prompt_ids.size()) - 1;
      p.n_visual = layout.n_tokens;
      p.n_visual_kept = kept[static_cast<int64_t>(j)].item<int64_t>();
      // Left padding enters every layer (it is text, never pruned): this row's own count is T minus its pad.
      const int64_t pad = longest - static_cast<int64_t>(heads[b].prompt_ids.size());
      p.tokens_per_layer = dstats.tokens_per_layer;
      for (auto& n : p.tokens_per_layer) n -= pad;
      p.vision_ms = vision_ms;
      p.prefill_ms = prefill_ms;
    }
  }
  return out;
}

GenerationStats DecodeBatch::add_after_prefixes(const std::vector<const ImagePrefix*>& prefixes,
                                                const std::vector<VlmRequest>& reqs,
                                                const std::vector<GenerationConfig>& configs,
                                                const std::vector<int64_t>& ids,
                                                const std::vector<bool>& record_logits,
                                                const std::vector<int64_t>& top_logprobs) {
  check_rows(reqs.size(), configs, ids, record_logits, top_logprobs);
  if (prefixes.size() != reqs.size())
    throw InvalidArgument("decode batch: " + std::to_string(prefixes.size()) + " image prefixes for " +
                          std::to_string(reqs.size()) + " requests");
  c10::InferenceMode guard;
  const auto dev = m_.context().device;
  const int64_t image_id = m_.shape().image_token_id;
  const int64_t B = static_cast<int64_t>(reqs.size());
  std::vector<std::vector<int64_t>> tails;  // each prompt's ids after its image placeholder
  int64_t T = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (prefixes[b] == nullptr) throw InvalidArgument("decode batch: a null image prefix");
    const auto& pids = reqs[b].prompt_ids;
    if (std::count(pids.begin(), pids.end(), image_id) != 1)
      throw InvalidArgument("a prompt must hold exactly one image placeholder (id " +
                            std::to_string(image_id) + ")");
    const auto p = std::find(pids.begin(), pids.end(), image_id) - pids.begin();
    if (!prefixes[b]->exact_buffers())
      throw InvalidArgument(
          "decode batch: an image prefix whose KV buffers have spare capacity (it would be written "
          "in place when shared); make it with prefill_image_prefixes()");
    if (p != prefixes[b]->n_prefix)
      throw InvalidArgument("decode batch: the image prefix was made for " +
                            std::to_string(prefixes[b]->n_prefix) +
                            " ids before the image, this prompt has " + std::to_string(p));
    tails.emplace_back(pids.begin() + p + 1, pids.end());
    if (tails.back().empty())
      throw InvalidArgument(
          "decode batch: a prompt ends with its image; the split prefill needs text after it");
    T = std::max<int64_t>(T, static_cast<int64_t>(tails.back().size()));
  }
  Stopwatch prefill;
  auto& lm = m_.language_model();
  Prefilled part;
  part.cache = KvCache(m_.shape().n_layers);
  for (const auto* pre : prefixes) part.cache.concat_rows(pre->cache);  // left-padded to the longest layer
  // The text after each image, left-padded to T; its positions continue from the prefix's next position.
  const int64_t A = position_axes(prefixes[0]->next_pos);
  const auto on = at::TensorOptions().device(dev);
  std::vector<at::Tensor> rows;
  auto valid = at::zeros({B, T}, at::TensorOptions().dtype(at::kBool));
  auto offset = at::zeros({B, T}, at::TensorOptions().dtype(at::kLong));  // 0 … n−1 over the valid tail
  auto start = at::zeros({B, 1}, at::TensorOptions().dtype(at::kLong));   // the prefix's next position
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = static_cast<int64_t>(tails[b].size()), pad = T - n;
    auto emb = lm->embed(at::tensor(tails[b], at::kLong).to(dev));  // [n, D]
    rows.push_back(pad > 0 ? at::cat({at::zeros({pad, emb.size(1)}, emb.options()), emb}, 0) : emb);
    valid[b].narrow(0, pad, n).fill_(true);
    offset[b].narrow(0, pad, n).copy_(at::arange(n, at::kLong));
    const auto np = prefixes[b]->next_pos.to(at::kCPU).flatten();  // one value on every axis
    start[b][0].fill_(np[0].item<int64_t>());
  }
  TokenState s;
  s.hidden = at::stack(rows, 0);
  s.valid = valid.to(dev);
  s.visual = at::zeros({B, T}, on.dtype(at::kBool));
  s.grid_index = at::full({B, T}, -1, on.dtype(at::kLong));
  auto pos = ((start + offset) * valid.to(at::kLong)).to(dev);  // padding at position 0
  s.positions = A == 1 ? pos : pos.unsqueeze(0).expand({A, B, T}).contiguous();
  DecoderStats dstats;
  auto h = lm->forward(s, part.cache, nullptr, &dstats);
  part.logits = lm->logits(h.narrow(1, h.size(1) - 1, 1)).squeeze(1);  // [B, V]
  part.next_pos = next_positions(s.positions);
  sync_device(dev);
  auto& st = part.stats;
  st.prefill_ms = prefill.ms();
  st.batch = B;
  for (int64_t b = 0; b < B; ++b) {
    const auto* pre = prefixes[b];
    st.n_text_max = std::max<int64_t>(st.n_text_max, static_cast<int64_t>(reqs[b].prompt_ids.size()) - 1);
    st.n_visual = std::max(st.n_visual, pre->n_visual);
    st.n_visual_kept = std::max(st.n_visual_kept, pre->n_visual_kept);
    st.row_n_visual.push_back(pre->n_visual);
    st.row_n_visual_kept.push_back(pre->n_visual_kept);
    if (st.tokens_per_layer.size() < pre->tokens_per_layer.size())
      st.tokens_per_layer.resize(pre->tokens_per_layer.size(), 0);
    for (size_t l = 0; l < pre->tokens_per_layer.size(); ++l)
      st.tokens_per_layer[l] =
          std::max(st.tokens_per_layer[l], pre->tokens_per_layer[l] + static_cast<int64_t>(tails[b].size()));
  }
  const GenerationStats out = st;
  std::vector<Prefilled> parts;
  parts.push_back(std::move(part));
  std::vector<int64_t> order(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) order[b] = b;
  join(parts, order, configs, ids, record_logits, top_logprobs);
  return out;
}

DecodeBatch::Prefilled DecodeBatch::prefill_group(const std::vector<VlmRequest>& reqs,
                                                  const VisualTokens& vis, const VisualLayout& layout,
                                                  PrefillHook* hook) {
  const auto dev = m_.context().device;
  Prefilled out;
  auto& st = out.stats;
  if (hook != nullptr) hook->begin(vis.cls_attention, vis.keys, layout);
  st.n_visual = layout.n_tokens;
  for (const auto& r : reqs) st.n_text_max = std::max<int64_t>(st.n_text_max, r.prompt_ids.size() - 1);
  const auto embeds = vis.embeds.narrow(1, 0, layout.n_tokens);
  if (hook != nullptr && hook->wants_visual_saliency()) {
    Stopwatch prepass;
    hook->set_visual_saliency(visual_token_saliency(m_, reqs, embeds, false, layout).saliency);
    sync_device(dev);
    st.prepass_ms = prepass.ms();
  }
  Stopwatch prefill;
  auto& lm = m_.language_model();
  auto state = build_prefill_state(m_, reqs, embeds, layout);
  out.cache = KvCache(m_.shape().n_layers);
  DecoderStats dstats;
  auto h = lm->forward(state, out.cache, hook, &dstats);
  out.logits = lm->logits(h.narrow(1, h.size(1) - 1, 1)).squeeze(1);  // [B, V]
  sync_device(dev);
  st.prefill_ms = prefill.ms();
  st.tokens_per_layer = dstats.tokens_per_layer;
  st.n_visual_kept = state.visual[0].sum().item<int64_t>();
  out.next_pos = next_positions(state.positions);
  return out;
}

std::vector<FinishedRow> DecodeBatch::sample(const RowTokenCallback& on_token) {
  if (!to_feed_.empty()) throw Error("decode batch: sample() twice without advance()");
  std::vector<FinishedRow> finished;
  if (rows_.empty()) return finished;
  c10::InferenceMode guard;
  const auto cpu_logits = pending_logits_.to(at::kCPU, at::kFloat);  // [B', V]
  const bool all_greedy =
      std::all_of(rows_.begin(), rows_.end(), [](const Row& r) { return r.gc.temperature == 0; });
  std::vector<int64_t> next(rows_.size());
  std::vector<std::string> errors(rows_.size());  // a row whose sampling fails ends alone
  if (all_greedy) {
    const auto am = cpu_logits.argmax(-1);
    const auto acc = am.accessor<int64_t, 1>();
    for (size_t i = 0; i < rows_.size(); ++i) next[i] = acc[static_cast<int64_t>(i)];
  } else {
    for (size_t i = 0; i < rows_.size(); ++i) {
      try {
        next[i] = sample_next(cpu_logits.narrow(0, static_cast<int64_t>(i), 1), rows_[i].gc, rows_[i].gen)
                      .item<int64_t>();
      } catch (const std::exception& e) {
        errors[i] = std::string("sampling failed: ") + e.what();
      }
    }
  }
  // EOS only matters to rows that stop at it (a benchmark ignoring EOS runs without a tokenizer).
  const bool any_stop_at_eos =
      std::any_of(rows_.begin(), rows_.end(), [](const Row& r) { return r.gc.stop_at_eos; });
  const int64_t eos = any_stop_at_eos ? m_.tokenizer().eos_id() : -1;
  std::vector<int64_t> keep;  // batch indices of the rows that go on
  std::vector<Row> kept_rows;
  for (size_t i = 0; i < rows_.size(); ++i) {
    auto& r = rows_[i];
    if (r.record) r.logits.push_back(cpu_logits.narrow(0, static_cast<int64_t>(i), 1).clone());
    std::string reason;
    if (!errors[i].empty()) {
      finished.push_back(
          {r.id, std::move(r.tokens), "error", std::move(r.logits), std::move(r.logprobs), errors[i]});
      continue;
    }
    if (r.gc.stop_at_eos && next[i] == eos) {
      reason = "stop";
    } else {
      r.tokens.push_back(next[i]);
      ++n_generated_;
      if (r.top_n >= 0)
        r.logprobs.push_back(step_logprobs(cpu_logits[static_cast<int64_t>(i)], next[i], r.top_n));
      if (on_token && !on_token(r.id, next[i]))
        reason = "stop";
      else if (static_cast<int64_t>(r.tokens.size()) >= r.gc.max_new_tokens)
        reason = "length";
    }
    if (reason.empty()) {
      keep.push_back(static_cast<int64_t>(i));
      to_feed_.push_back(next[i]);
      kept_rows.push_back(std::move(r));
    } else {
      finished.push_back({r.id, std::move(r.tokens), reason, std::move(r.logits), std::move(r.logprobs), {}});
    }
  }
  if (keep.size() < rows_.size()) {  // finished rows leave the batch
    const auto idx = at::tensor(keep, at::kLong);
    cache_.select_rows(idx);
    next_pos_ = next_pos_.index_select(position_batch_dim(next_pos_), idx.to(next_pos_.device()));
  }
  rows_ = std::move(kept_rows);
  pending_logits_ = at::Tensor();
  if (rows_.empty()) {  // a fresh cache for the next group
    cache_ = KvCache(m_.shape().n_layers);
    next_pos_ = at::Tensor();
  }
  return finished;
}

void DecodeBatch::advance() {
  if (rows_.empty()) return;
  if (to_feed_.size() != rows_.size()) throw Error("decode batch: advance() without sample()");
  c10::InferenceMode guard;
  const auto dev = m_.context().device;
  auto& lm = m_.language_model();
  const int64_t B = rows();
  const auto on = at::TensorOptions().device(dev);
  TokenState s;
  s.hidden = lm->embed(at::tensor(to_feed_, at::kLong).to(dev).view({B, 1}));
  s.positions = next_pos_;  // [B, 1] or [A, B, 1]
  s.valid = at::ones({B, 1}, on.dtype(at::kBool));
  s.visual = at::zeros({B, 1}, on.dtype(at::kBool));
  s.grid_index = at::full({B, 1}, -1, on.dtype(at::kLong));
  to_feed_.clear();
  next_pos_ = next_pos_ + 1;
  pending_logits_ = lm->logits(lm->forward(s, cache_)).squeeze(1);
}

std::vector<FinishedRow> DecodeBatch::step(const RowTokenCallback& on_token) {
  auto finished = sample(on_token);
  advance();
  return finished;
}

}  // namespace vispco
