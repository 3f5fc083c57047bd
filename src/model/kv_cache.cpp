// Growing per-layer KV cache buffers.
#include "model/kv_cache.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/errors.h"

namespace vispco {

void LayerKvCache::append(const at::Tensor& k, const at::Tensor& v, const at::Tensor& valid) {
  const int64_t t = k.size(2);
  if (!k_.defined()) {
    // First append (prefill): keep the tensors themselves. No in-place copy, so autograd can flow through a
    // training forward; the first decode append grows a buffer.
    k_ = k;
    v_ = v;
    valid_ = valid;
    length_ = t;
    return;
  }
  const int64_t need = length_ + t;
  if (!k_.defined() || need > k_.size(2)) {
    const int64_t cap = std::max<int64_t>(need + 64, 2 * k_.size(2));
    auto grow = [&](const at::Tensor& old, const at::Tensor& like, int64_t dim) {
      auto sizes = like.sizes().vec();
      sizes[dim] = cap;
      auto buf = at::empty(sizes, like.options());
      if (old.defined() && length_ > 0) buf.narrow(dim, 0, length_).copy_(old.narrow(dim, 0, length_));
      return buf;
    };
    k_ = grow(k_, k, 2);
    v_ = grow(v_, v, 2);
    valid_ = grow(valid_, valid, 1);
  }
  k_.narrow(2, length_, t).copy_(k);
  v_.narrow(2, length_, t).copy_(v);
  valid_.narrow(1, length_, t).copy_(valid);
  length_ = need;
}

at::Tensor LayerKvCache::keys() const { return k_.narrow(2, 0, length_); }
at::Tensor LayerKvCache::values() const { return v_.narrow(2, 0, length_); }
at::Tensor LayerKvCache::valid() const { return valid_.narrow(1, 0, length_); }

int64_t LayerKvCache::bytes() const {
  if (!k_.defined()) return 0;
  return k_.numel() * k_.element_size() + v_.numel() * v_.element_size() + valid_.numel();
}

void LayerKvCache::select_rows(const at::Tensor& rows) {
  if (!k_.defined()) return;
  if (rows.numel() > 0 && (rows.min().item<int64_t>() < 0 || rows.max().item<int64_t>() >= k_.size(0)))
    throw InvalidArgument("KV cache: row index outside the batch of " + std::to_string(k_.size(0)));
  const auto idx = rows.to(k_.device());
  k_ = k_.index_select(0, idx);
  v_ = v_.index_select(0, idx);
  valid_ = valid_.index_select(0, idx.to(valid_.device()));
}

void LayerKvCache::concat_rows(const LayerKvCache& other) {
  if (!other.k_.defined()) return;
  if (!k_.defined()) {
    *this = other;
    return;
  }
  const auto a = keys(), b = other.keys();
  if (a.size(1) != b.size(1) || a.size(3) != b.size(3) || a.scalar_type() != b.scalar_type() ||
      a.device() != b.device())
    throw InvalidArgument("KV cache: cannot join caches of different heads, head size, dtype or device");
  const int64_t S = std::max(length_, other.length_);
  const auto pad_left = [S](const at::Tensor& t, int64_t dim) {
    const int64_t n = S - t.size(dim);
    if (n == 0) return t;
    auto sizes = t.sizes().vec();
    sizes[dim] = n;
    return at::cat({at::zeros(sizes, t.options()), t}, dim);
  };
  k_ = at::cat({pad_left(a, 2), pad_left(b, 2)}, 0);
  v_ = at::cat({pad_left(values(), 2), pad_left(other.values(), 2)}, 0);
  valid_ = at::cat({pad_left(valid(), 1), pad_left(other.valid(), 1)}, 0);
  length_ = S;
}

int64_t LayerKvCache::trim_padding() {
  if (!k_.defined() || length_ == 0 || k_.size(0) == 0) return 0;
  const auto used = valid().any(0).to(at::kCPU);  // [S] bool: some row holds a key here
  const auto acc = used.accessor<bool, 1>();
  int64_t first = 0;
  while (first < length_ && !acc[first]) ++first;
  if (first == 0) return 0;
  k_ = k_.narrow(2, first, k_.size(2) - first);
  v_ = v_.narrow(2, first, v_.size(2) - first);
  valid_ = valid_.narrow(1, first, valid_.size(1) - first);
  length_ -= first;
  return first;
}

void KvCache::select_rows(const at::Tensor& rows) {
  for (auto& l : layers) {
    l.select_rows(rows);
    l.trim_padding();
  }
}

void KvCache::concat_rows(const KvCache& other) {
  if (other.layers.size() != layers.size())
    throw InvalidArgument("KV cache: cannot join a cache of " + std::to_string(other.layers.size()) +
                          " layers to one of " + std::to_string(layers.size()));
  for (size_t l = 0; l < layers.size(); ++l) layers[l].concat_rows(other.layers[l]);
  joined_ = true;
}

int64_t KvCache::bytes() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.bytes();
  return n;
}

}  // namespace vispco
