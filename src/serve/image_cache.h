// The server's image KV cache: the decoder's KV prefix of a prompt up to and including its (pruned) image
// (model/decode_batch.h ImagePrefix), kept for plans whose kept tokens do not depend on the question, so a
// later question on the same image skips the vision tower and that part of the prefill (as vLLM's and
// SGLang's prefix caches do for text). Keyed by everything the prefix depends on (image_cache_key()); bounded
// in bytes with least-recently-used eviction; hits, misses, evictions and bytes go to /metrics.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/decode_batch.h"
#include "prune/bound_plan.h"
#include "serve/metrics.h"

namespace vispco::serve {

/// Whether a plan's prefix may be cached: BoundPlan::question_independent() — decided by the bound plan's
/// scorers themselves (prune/question_independent.h; the gate from the use_question of the file it was bound
/// to), nothing read here. Cacheable: unpruned; stages at ℓ = 0 of divprune, visionzip, pool, uniform,
/// base_view, a gate without use_question. Not: keep=auto, random, stages at ℓ ≥ 1, text-guided scorers.
bool image_cacheable(const BoundPlan& plan);

/// What a cached prefix depends on. Every field is part of the key (docs/serving.md says why each is).
struct ImageCacheKey {
  std::string model;                ///< the model folder's hash + quantisation (cli quant_model_key)
  std::string dtype;                ///< compute dtype, e.g. "Float", "BFloat16"
  std::string device;               ///< e.g. "cpu", "cuda:0"
  std::string plan;                 ///< BoundPlan::key(): canonical plan + scorer resources (a gate's hash)
  std::string image_sha256;         ///< SHA-256 of the encoded image bytes as the client sent them
  std::vector<int64_t> ids_before;  ///< prompt ids before the image placeholder (system prompt, turns)
  /// One string holding every field, unambiguously (length-prefixed).
  std::string str() const;
};

/// An LRU cache of image prefixes bounded in bytes (ImagePrefix::bytes()). Thread-safe (one mutex); entries
/// are shared and immutable, so an entry evicted while a batch reads it stays alive until that batch is done.
class ImageCache {
 public:
  /// @param max_bytes capacity (0 disables: find() misses, insert() keeps nothing) @param metrics where the
  /// counters go (may be null); declare_image_cache_metrics() must have declared them.
  ImageCache(int64_t max_bytes, Metrics* metrics);
  /// The prefix stored under `key` (made most recent) or null; counts a hit or a miss.
  std::shared_ptr<const ImagePrefix> find(const std::string& key);
  /// Stores a prefix (replacing one under the same key), evicting the least recently used entries until it
  /// fits. A prefix larger than the capacity is not stored. @return whether it was stored. @throws
  /// InvalidArgument for a prefix without exact buffers (ImagePrefix::exact_buffers: hits share its tensors).
  bool insert(const std::string& key, std::shared_ptr<const ImagePrefix> prefix);
  int64_t max_bytes() const { return max_bytes_; }
  bool enabled() const { return max_bytes_ > 0; }
  /// Bytes held by the stored prefixes.
  int64_t bytes() const;
  /// Entries stored.
  size_t size() const;
  /// Counters since start.
  int64_t hits() const;
  int64_t misses() const;
  int64_t evictions() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const ImagePrefix> prefix;
    int64_t bytes = 0;
  };
  void publish();  // gauges (called with mu_ held)
  const int64_t max_bytes_;
  Metrics* metrics_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t bytes_ = 0, hits_ = 0, misses_ = 0, evictions_ = 0;
};

/// Declares the cache's metrics on `m`: vispco_image_cache_hits_total, _misses_total, _evictions_total
/// (counters), vispco_image_cache_bytes, vispco_image_cache_entries (gauges).
void declare_image_cache_metrics(Metrics& m);

}  // namespace vispco::serve
