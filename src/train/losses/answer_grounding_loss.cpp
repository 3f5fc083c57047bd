// Answer-position grounding loss (see answer_grounding_loss.h).
#include "train/losses/answer_grounding_loss.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/errors.h"

namespace vispco::train {

namespace {

// The distinct sequence positions of `patches`' visual tokens (pooled patches share a token).
std::vector<int64_t> keys_of(const SequenceMap& map, const std::vector<int64_t>& patches) {
  std::vector<int64_t> keys;
  for (auto patch : patches)
    if (map.key(patch) >= 0) keys.push_back(map.key(patch));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

}  // namespace

at::Tensor answer_grounding_target(const TeacherForcedBatch& batch, const QueryRows& rows,
                                   const std::vector<std::vector<AnswerGrounding>>& turn_answers,
                                   int64_t n_heads, int64_t glyph_head) {
  const int64_t H = n_heads;
  auto target = at::zeros({batch.batch(), H, rows.R, batch.T}, at::kFloat);
  auto aa = target.accessor<float, 4>();
  for (int64_t b = 0; b < batch.batch(); ++b) {
    const auto& map = batch.maps[b];
    int64_t r = rows.first_answer[b];
    for (size_t t = 0; t < batch.answer_rows[b].size(); ++t, ++r) {
      const AnswerGrounding& g = turn_answers[b][t];
      for (size_t h = 0; h < g.heads.size() && static_cast<int64_t>(h) < H; ++h) {
        std::vector<std::vector<int64_t>> objects;  // keys of each object that reaches the decoder
        for (const auto& patches : g.heads[h])
          if (auto keys = keys_of(map, patches); !keys.empty()) objects.push_back(std::move(keys));
        const size_t shares = objects.size() + (g.sink ? 1 : 0);
        if (shares == 0) continue;
        for (const auto& keys : objects)
          for (auto k : keys) aa[b][h][r][k] += 1.0f / float(shares * keys.size());
        if (g.sink) aa[b][h][r][map.pad] += 1.0f / float(shares);  // BOS
      }
    }
    // The glyph head at each text answer token's row on the glyphs it spells.
    for (const auto& gr : batch.glyph_rows[b]) {
      std::vector<std::vector<int64_t>> glyphs;
      for (size_t c = gr.begin; c < gr.end; ++c)
        if (auto keys = keys_of(map, turn_answers[b][gr.turn].glyphs[c]); !keys.empty())
          glyphs.push_back(std::move(keys));
      for (const auto& keys : glyphs)
        for (auto k : keys) aa[b][glyph_head][r][k] += 1.0f / float(glyphs.size() * keys.size());
      ++r;
    }
  }
  return target;
}

at::Tensor attention_target_loss(const std::vector<at::Tensor>& probs, const at::Tensor& target) {
  for (const auto& p : probs)
    if (p.sizes() != target.sizes())
      throw InvalidArgument(
          "attention_target_loss: attention rows [B, H, R, T] must match the target's shape");
  const auto has = target.sum(-1) > 0;  // [B, H, R]
  const int64_t n = has.sum().item<int64_t>();
  if (n == 0 || probs.empty()) return at::zeros({}, at::kFloat);
  std::vector<at::Tensor> terms;
  for (const auto& p : probs)
    terms.push_back(-(target.to(p.scalar_type()) * p.clamp_min(1e-6).log()).sum() / static_cast<double>(n));
  return at::stack(terms).mean();
}

}  // namespace vispco::train
