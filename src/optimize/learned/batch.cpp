// SynthVQA prompt samples and teacher-forced batches for VisPCO (layout as model/generate.h).
#include "optimize/learned/batch.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "core/errors.h"
#include "eval/synthvqa/generator.h"
#include "model/generate.h"

namespace vispco::optimize::learned {

PromptSample synthvqa_prompt_sample(VisionLanguageModel& m, uint64_t seed, uint64_t index, bool with_answer) {
  auto s = eval::synthvqa::make_sample(seed, index);
  PromptSample p;
  p.pixels = m.preprocess(s.rgb);
  p.prompt_ids = m.prompt_ids(s.question);
  if (with_answer) {
    p.answer_ids = m.tokenizer().encode(s.answer, false);
    p.answer_ids.push_back(m.tokenizer().eos_id());
  }
  p.family = s.family;
  return p;
}

namespace {
// Vision tower + projector of a stack of pixels, frozen. @return [B, N_v, D].
// The VLM is frozen: encode_images runs in inference mode; the clone is an ordinary tensor autograd may save.
at::Tensor encode(VisionLanguageModel& m, const std::vector<at::Tensor>& px) {
  auto vt = m.encode_image_list(px);
  if (vt.ragged())
    throw InvalidArgument(
        "VisPCO's learned search needs images of one visual-token layout (N_v); this model gives these "
        "images "
        "different N_v (tiling or dynamic resolution) — not supported yet");
  return vt.embeds.clone();
}
}  // namespace

std::vector<PromptSample>& encode_visual(VisionLanguageModel& m, std::vector<PromptSample>& samples) {
  std::vector<at::Tensor> px;
  std::vector<size_t> idx;
  for (size_t i = 0; i < samples.size(); ++i)
    if (!samples[i].visual.defined()) {
      px.push_back(samples[i].pixels);
      idx.push_back(i);
    }
  if (px.empty()) return samples;
  auto v = encode(m, px);
  for (size_t j = 0; j < idx.size(); ++j) {
    samples[idx[j]].visual = v[int64_t(j)];
    samples[idx[j]].pixels = at::Tensor();
  }
  return samples;
}

PromptBatch make_prompt_batch(VisionLanguageModel& m, const std::vector<PromptSample>& samples) {
  if (samples.empty()) throw InvalidArgument("VisPCO: empty batch");
  const auto dev = m.context().device;
  std::vector<PromptSample> local = samples;
  encode_visual(m, local);
  std::vector<at::Tensor> vis;
  for (const auto& s : local) vis.push_back(s.visual);
  auto visual = at::stack(vis);  // [B, N_v, D]
  const int64_t B = static_cast<int64_t>(samples.size()), n_v = visual.size(1);
  std::vector<VlmRequest> reqs(B);
  for (int64_t b = 0; b < B; ++b) {
    reqs[b].prompt_ids = samples[b].prompt_ids;
    reqs[b].prompt_ids.insert(reqs[b].prompt_ids.end(), samples[b].answer_ids.begin(),
                              samples[b].answer_ids.end());
  }
  PromptBatch out;
  {
    at::NoGradGuard no_grad;
    out.state = build_prefill_state(m, reqs, visual);
  }
  const int64_t T = out.state.hidden.size(1);
  auto pool = at::zeros({B, T}, at::kBool);
  auto visual_pos = at::zeros({B, n_v}, at::kLong);
  auto query_pos = at::zeros({B}, at::kLong);
  auto n_text = at::zeros({B}, at::kLong);
  for (int64_t b = 0; b < B; ++b) {
    const auto& ids = reqs[b].prompt_ids;
    const int64_t P = static_cast<int64_t>(samples[b].prompt_ids.size());
    const int64_t p = std::find(ids.begin(), ids.end(), m.shape().image_token_id) - ids.begin();
    const int64_t len = static_cast<int64_t>(ids.size()) - 1 + n_v, pad = T - len;
    auto expanded = [&](int64_t i) { return pad + (i < p ? i : i + n_v - 1); };
    const int64_t q = expanded(P - 1);
    query_pos[b] = q;
    pool[b].narrow(0, pad, q - pad + 1).fill_(true);
    visual_pos[b].copy_(at::arange(n_v, at::kLong) + pad + p);
    n_text[b] = P - 1;
    std::vector<int64_t> pred, ans;
    for (int64_t i = P; i < static_cast<int64_t>(ids.size()); ++i) {
      pred.push_back(expanded(i) - 1);
      ans.push_back(ids[i]);
    }
    out.predict_pos.push_back(at::tensor(pred, at::kLong).to(dev));
    out.answer_ids.push_back(at::tensor(ans, at::kLong).to(dev));
  }
  out.pool = pool.to(dev);
  out.visual_pos = visual_pos.to(dev);
  out.query_pos = query_pos.to(dev);
  out.n_text = n_text;
  return out;
}

}  // namespace vispco::optimize::learned
