// LLaVA-NeXT's feature packing; see pack.h.
#include "model/llava_next/pack.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "core/errors.h"

namespace vispco {

at::Tensor anyres_pack_index(const AnyresGeometry& g) {
  const int64_t n = g.grid, n2 = n * n, newline = (1 + g.n_tiles()) * n2;
  std::vector<int64_t> idx;
  idx.reserve(size_t(g.n_tokens()));
  for (int64_t i = 0; i < n2; ++i) idx.push_back(i);  // the base image, as the tower made it
  const auto& u = g.unpad;
  for (int64_t y = u.row0; y < u.row0 + u.n_rows; ++y) {
    for (int64_t x = u.col0; x < u.col0 + u.n_cols; ++x) {
      const int64_t tile = (y / n) * g.tile_cols + x / n;
      idx.push_back((1 + tile) * n2 + (y % n) * n + x % n);
    }
    idx.push_back(newline);
  }
  return at::tensor(idx, at::kLong);
}

at::Tensor pack_image_features(const at::Tensor& features, const at::Tensor& newline,
                               const AnyresGeometry& g) {
  const int64_t n2 = g.grid * g.grid;
  if (features.dim() != 3 || features.size(0) != 1 + g.n_tiles() || features.size(1) != n2 ||
      newline.dim() != 1 || newline.size(0) != features.size(2))
    throw InvalidArgument("pack_image_features: expected features [" + std::to_string(1 + g.n_tiles()) +
                          ", " + std::to_string(n2) + ", C] and image_newline [C], got " +
                          std::to_string(features.dim()) + "-d features and a " +
                          std::to_string(newline.dim()) + "-d newline");
  const auto rows = at::cat({features.flatten(0, 1), newline.to(features.options()).unsqueeze(0)}, 0);
  return rows.index_select(0, anyres_pack_index(g).to(features.device()));
}

}  // namespace vispco
