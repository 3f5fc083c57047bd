// The image KV cache (see image_cache.h).
#include "serve/image_cache.h"

#include <algorithm>

#include "core/errors.h"

namespace vispco::serve {

bool image_cacheable(const BoundPlan& plan) { return plan.question_independent(); }

std::string ImageCacheKey::str() const {
  std::string out;
  const auto field = [&](const std::string& s) { out += std::to_string(s.size()) + ":" + s + ";"; };
  field(model);
  field(dtype);
  field(device);
  field(plan);
  field(image_sha256);
  out += std::to_string(ids_before.size()) + ":";
  for (const auto id : ids_before) out += std::to_string(id) + ",";
  return out;
}

ImageCache::ImageCache(int64_t max_bytes, Metrics* metrics)
    : max_bytes_(std::max<int64_t>(0, max_bytes)), metrics_(metrics) {}

std::shared_ptr<const ImagePrefix> ImageCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    if (metrics_ != nullptr) metrics_->add("vispco_image_cache_misses_total", 1);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
  ++hits_;
  if (metrics_ != nullptr) metrics_->add("vispco_image_cache_hits_total", 1);
  return it->second->prefix;
}

bool ImageCache::insert(const std::string& key, std::shared_ptr<const ImagePrefix> prefix) {
  if (prefix == nullptr) return false;
  if (!prefix->exact_buffers())  // a shared prefix with spare capacity would be written in place
    throw InvalidArgument("image cache: a prefix whose KV buffers have spare capacity cannot be shared");
  const int64_t n = prefix->bytes();
  std::lock_guard<std::mutex> lock(mu_);
  if (const auto it = index_.find(key); it != index_.end()) {  // replace
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (n > max_bytes_) {
    publish();
    return false;
  }
  while (bytes_ + n > max_bytes_ && !lru_.empty()) {
    const Entry& last = lru_.back();
    bytes_ -= last.bytes;
    index_.erase(last.key);
    lru_.pop_back();
    ++evictions_;
    if (metrics_ != nullptr) metrics_->add("vispco_image_cache_evictions_total", 1);
  }
  lru_.push_front({key, std::move(prefix), n});
  index_[key] = lru_.begin();
  bytes_ += n;
  publish();
  return true;
}

void ImageCache::publish() {
  if (metrics_ == nullptr) return;
  metrics_->set("vispco_image_cache_bytes", static_cast<double>(bytes_));
  metrics_->set("vispco_image_cache_entries", static_cast<double>(lru_.size()));
}

int64_t ImageCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t ImageCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

int64_t ImageCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t ImageCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

int64_t ImageCache::evictions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evictions_;
}

void declare_image_cache_metrics(Metrics& m) {
  m.declare(
      "vispco_image_cache_hits_total", "counter",
      "Requests whose image KV prefix came from the image cache (vision tower and image prefill skipped)");
  m.declare("vispco_image_cache_misses_total", "counter",
            "Requests of a cacheable plan whose image KV prefix was computed (then stored)");
  m.declare("vispco_image_cache_evictions_total", "counter", "Image prefixes evicted (least recently used)");
  m.declare("vispco_image_cache_bytes", "gauge", "Bytes held by the image cache's KV prefixes");
  m.declare("vispco_image_cache_entries", "gauge", "Image prefixes held by the image cache");
}

}  // namespace vispco::serve
