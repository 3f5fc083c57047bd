// The teacher-forced input of a decoder training step (see teacher_forced_batch.h).
#include "train/teacher_forced_batch.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "core/errors.h"
#include "io/tokenizer.h"
#include "model/answer_targets.h"
#include "model/llava/llava_prompt.h"

namespace vispco::train {

namespace {

// Position among the n_v visual tokens fed to the decoder of each grid patch, or −1 (not fed).
std::vector<int64_t> patch_to_visual(int64_t grid, int64_t pool, const at::Tensor& keep_row) {
  std::vector<int64_t> pos(static_cast<size_t>(grid * grid), -1);
  if (keep_row.defined()) {
    auto k = std::get<0>(keep_row.cpu().sort());
    auto a = k.accessor<int64_t, 1>();
    for (int64_t j = 0; j < k.size(0); ++j) pos[static_cast<size_t>(a[j])] = j;
  } else {
    const int64_t side = grid / pool;
    for (int64_t r = 0; r < grid; ++r)
      for (int64_t c = 0; c < grid; ++c)
        pos[static_cast<size_t>(r * grid + c)] = (r / pool) * side + c / pool;
  }
  return pos;
}

}  // namespace

at::Tensor decoder_visual_tokens(VisionLanguageModel& m, const at::Tensor& images, int64_t pool,
                                 const at::Tensor& visual_keep) {
  const auto& cfg = m.config();
  auto net = m.net();
  at::Tensor feats;
  {
    at::NoGradGuard no_grad;  // the tower is frozen in this stage
    feats = net->vision_tower
                ->forward(images, cfg.n_vision_layers_used(), cfg.vision_feature_select_strategy == "default")
                .features;
  }
  auto visual = net->multi_modal_projector->forward(feats);  // [B, N_v, D]
  if (visual_keep.defined()) {
    auto idx = std::get<0>(visual_keep.sort(1)).to(visual.device());  // original order
    visual = visual.gather(1, idx.unsqueeze(-1).expand({-1, -1, visual.size(2)}));
  }
  if (pool > 1) {
    const int64_t g = cfg.vision.grid(), D = visual.size(2);
    if (g % pool != 0) throw InvalidArgument("conversation_loss: pool must divide the patch grid side");
    auto grid = visual.transpose(1, 2).reshape({visual.size(0), D, g, g});
    visual = at::avg_pool2d(grid, {pool, pool}).flatten(2).transpose(1, 2).contiguous();  // [B, N_v/pool², D]
  }
  return visual;
}

TeacherForcedBatch build_teacher_forced_batch(VisionLanguageModel& m, const at::Tensor& visual,
                                              const std::vector<Conversation>& turns,
                                              const TeacherForcedOptions& options) {
  const auto& cfg = m.config();
  const auto& tok = m.tokenizer();
  const int64_t B = visual.size(0);
  TeacherForcedBatch out;
  out.n_v = visual.size(1);
  out.reqs.resize(static_cast<size_t>(B));
  out.answer_pos.resize(static_cast<size_t>(B));
  out.object_words.resize(static_cast<size_t>(B));
  out.answer_rows.resize(static_cast<size_t>(B));
  out.glyph_rows.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    auto& ids = out.reqs[b].prompt_ids;
    auto& answer_pos = out.answer_pos[b];
    for (size_t t = 0; t < turns[b].size(); ++t) {
      const auto& [q, a] = turns[b][t];
      auto prompt = t == 0 ? llava_prompt_ids(tok, q, cfg.image_token_index) : llava_followup_ids(tok, q);
      if (options.object_words)
        for (auto i : object_word_ends(tok, prompt, 0, prompt.size()))
          out.object_words[b].push_back({static_cast<int64_t>(ids.size()) + i, t});
      ids.insert(ids.end(), prompt.begin(), prompt.end());
      auto ans = tok.encode(a, false);
      size_t first_glyph = 0;  // answer tokens before the first one that spells a character (a bare "▁")
      if (options.answer_row_at_first_glyph)
        while (first_glyph + 1 < ans.size() &&
               tok.decode(std::vector<int64_t>(ans.begin(), ans.begin() + static_cast<long>(first_glyph) + 1))
                   .empty())
          ++first_glyph;
      out.answer_rows[b].push_back(static_cast<int64_t>(ids.size() + first_glyph) - 1);
      if (options.turn_answers != nullptr && !(*options.turn_answers)[b][t].glyphs.empty()) {
        const size_t n_chars = (*options.turn_answers)[b][t].glyphs.size();
        size_t begin = 0;
        for (size_t j = 0; j < ans.size(); ++j) {  // token j spells the characters decode() adds
          const size_t end =
              std::min(n_chars, tok.decode(std::vector<int64_t>(ans.begin(), ans.begin() + j + 1)).size());
          if (end > begin)
            out.glyph_rows[b].push_back({static_cast<int64_t>(ids.size() + j) - 1, t, begin, end, ans[j]});
          begin = std::max(begin, end);
        }
      }
      ans.push_back(tok.eos_id());
      for (auto id : ans) {
        answer_pos.push_back(static_cast<int64_t>(ids.size()));
        ids.push_back(id);
      }
    }
    if (options.text_loss) {  // every text token after the image placeholder
      const auto p = std::find(ids.begin(), ids.end(), cfg.image_token_index) - ids.begin();
      answer_pos.clear();
      for (int64_t i = p + 1; i < static_cast<int64_t>(ids.size()); ++i) answer_pos.push_back(i);
    }
  }
  out.state = build_prefill_state(m, out.reqs, visual);
  out.T = out.state.hidden.size(1);
  out.target = answer_targets(out.reqs, out.answer_pos, cfg.image_token_index, out.n_v, out.T);
  for (int64_t b = 0; b < B; ++b) {
    const auto& ids = out.reqs[b].prompt_ids;
    SequenceMap map;
    map.image = std::find(ids.begin(), ids.end(), cfg.image_token_index) - ids.begin();
    map.n_v = out.n_v;
    map.pad = out.T - (static_cast<int64_t>(ids.size()) - 1 + out.n_v);
    map.patch_token = patch_to_visual(cfg.vision.grid(), options.pool,
                                      options.visual_keep.defined() ? options.visual_keep[b] : at::Tensor());
    out.maps.push_back(std::move(map));
  }
  return out;
}

QueryRows query_rows(const TeacherForcedBatch& batch, bool words, bool answers) {
  const int64_t B = batch.batch();
  QueryRows q;
  for (int64_t b = 0; b < B; ++b)
    q.R = std::max<int64_t>(
        q.R, static_cast<int64_t>((words ? batch.object_words[b].size() : 0) +
                                  (answers ? batch.answer_rows[b].size() + batch.glyph_rows[b].size() : 0)));
  q.rows = at::zeros({B, q.R}, at::kLong);
  auto ra = q.rows.accessor<int64_t, 2>();
  for (int64_t b = 0; b < B; ++b) {
    const auto& map = batch.maps[b];
    int64_t r = 0;
    if (words)
      for (const auto& [i, t] : batch.object_words[b]) ra[b][r++] = map.position(i);
    q.first_answer.push_back(r);
    if (answers)
      for (auto i : batch.answer_rows[b]) ra[b][r++] = map.position(i);
    q.first_glyph.push_back(r);
    if (answers)
      for (const auto& g : batch.glyph_rows[b]) ra[b][r++] = map.position(g.row);
  }
  return q;
}

}  // namespace vispco::train
