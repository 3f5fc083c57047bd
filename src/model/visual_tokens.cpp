// Rows of a batch of visual tokens: cutting one image out, joining images of different N_v.
#include "model/visual_tokens.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "core/errors.h"

namespace vispco {

VisualLayout VisualTokens::layout(int64_t b, const ModelShape& shape) const {
  return layouts.empty() ? shape.default_layout() : layouts.at(static_cast<size_t>(b));
}

VisualTokens VisualTokens::row(int64_t b, const ModelShape& shape) const {
  const auto l = layout(b, shape);
  VisualTokens r;
  r.embeds = embeds.narrow(0, b, 1).narrow(1, 0, l.n_tokens);
  if (cls_attention.defined()) r.cls_attention = cls_attention.narrow(0, b, 1).narrow(1, 0, l.n_tokens);
  if (keys.defined()) r.keys = keys.narrow(0, b, 1).narrow(1, 0, l.n_tokens);
  r.layouts = {l};
  return r;
}

bool VisualTokens::ragged() const {
  for (const auto& l : layouts)
    if (!(l == layouts.front())) return true;
  return false;
}

VisualTokens stack_visual_tokens(const std::vector<VisualTokens>& rows, const ModelShape& shape) {
  if (rows.empty()) throw InvalidArgument("stack_visual_tokens: no rows");
  int64_t n_max = 0;
  for (const auto& r : rows) n_max = std::max(n_max, r.embeds.size(1));
  // Pads [1, N_b, …] to [1, N_max, …] with zeros after the row's tokens.
  auto padded = [&](const at::Tensor& t) {
    if (t.size(1) == n_max) return t;
    auto sizes = t.sizes().vec();
    sizes[1] = n_max - t.size(1);
    return at::cat({t, at::zeros(sizes, t.options())}, 1);
  };
  std::vector<at::Tensor> e, a, k;
  VisualTokens out;
  bool all_default = true;
  for (size_t b = 0; b < rows.size(); ++b) {
    const auto& r = rows[b];
    if (r.embeds.dim() != 3 || r.embeds.size(0) != 1)
      throw InvalidArgument("stack_visual_tokens: row " + std::to_string(b) + " is not one image's tokens");
    if (r.embeds.size(2) != rows[0].embeds.size(2))
      throw InvalidArgument("stack_visual_tokens: rows of widths " + std::to_string(rows[0].embeds.size(2)) +
                            " and " + std::to_string(r.embeds.size(2)));
    e.push_back(padded(r.embeds));
    if (r.cls_attention.defined()) a.push_back(padded(r.cls_attention));
    if (r.keys.defined()) k.push_back(padded(r.keys));
    out.layouts.push_back(r.layout(0, shape));
    all_default = all_default && out.layouts.back() == shape.default_layout();
  }
  out.embeds = at::cat(e, 0);
  if (a.size() == rows.size()) out.cls_attention = at::cat(a, 0);
  if (k.size() == rows.size()) out.keys = at::cat(k, 0);
  if (all_default) out.layouts.clear();
  return out;
}

}  // namespace vispco
