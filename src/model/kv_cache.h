// Per-layer key/value cache of the decoder. After a pruning stage at layer ℓ, layers ≥ ℓ hold survivors
// only, so layers differ in length: each layer keeps its own keys, values and key-validity mask.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

namespace vispco {

/// Keys and values of one decoder layer, stored in a growing buffer (amortised O(1) append).
class LayerKvCache {
 public:
  /// Appends T new positions. @param k,v [B, H_kv, T, D_h] @param valid [B, T] bool (false = padding).
  void append(const at::Tensor& k, const at::Tensor& v, const at::Tensor& valid);
  /// Cached keys [B, H_kv, S, D_h] (a view of the buffer).
  at::Tensor keys() const;
  /// Cached values [B, H_kv, S, D_h].
  at::Tensor values() const;
  /// Key validity [B, S] bool.
  at::Tensor valid() const;
  /// S, the number of cached positions.
  int64_t length() const { return length_; }
  /// Bytes held by the buffers (capacity, not length).
  int64_t bytes() const;
  /// Keeps only the batch rows `rows` ([B'] int64 indices into the batch, in the new order): how a finished
  /// request leaves a decode batch. @throws InvalidArgument for an index outside the batch.
  void select_rows(const at::Tensor& rows);

 private:
  at::Tensor k_, v_, valid_;  // [B, H_kv, capacity, D_h], same, [B, capacity]
  int64_t length_ = 0;
};

/// The whole decoder's cache: one LayerKvCache per layer.
struct KvCache {
  std::vector<LayerKvCache> layers;
  explicit KvCache(int64_t n_layers = 0) : layers(n_layers) {}
  /// Sum of the layers' buffer bytes.
  int64_t bytes() const;
  /// LayerKvCache::select_rows on every layer.
  void select_rows(const at::Tensor& rows);
};

}  // namespace vispco
