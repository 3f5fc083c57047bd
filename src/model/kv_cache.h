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
  /// Appends `other`'s batch rows after this cache's (continuous batching: a newly prefilled group joins a
  /// running decode batch). The shorter of the two is left-padded to the longer length with masked (invalid)
  /// zero positions, so every row keeps its keys, values and validity. An empty side takes the other's rows.
  /// @throws InvalidArgument when heads, head size, dtype or device differ.
  void concat_rows(const LayerKvCache& other);
  /// Drops the leading positions that are padding in every row (left after rows left the batch); the cached
  /// keys of each row are unchanged, only fewer masked columns remain. @return positions dropped.
  int64_t trim_padding();

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
  /// LayerKvCache::select_rows then trim_padding() on every layer.
  void select_rows(const at::Tensor& rows);
  /// LayerKvCache::concat_rows layer by layer; marks the cache as joined. @throws InvalidArgument when the
  /// layer counts differ (the cache may then be partly joined: join into a copy for a strong guarantee).
  void concat_rows(const KvCache& other);
  /// True once groups were joined into this cache: layers of equal length may then differ in padding, so
  /// the decoder compares their validity before sharing an attention mask (only then: on CUDA the comparison
  /// waits for the device).
  bool joined() const { return joined_; }

 private:
  bool joined_ = false;
};

}  // namespace vispco
