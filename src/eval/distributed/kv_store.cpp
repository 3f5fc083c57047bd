// The in-memory KvStore (eval/distributed/kv_store.h), with c10d TCPStore's semantics.
#include "eval/distributed/kv_store.h"

namespace vispco::eval {

void MemoryKvStore::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  map_[key] = value;
}

std::optional<std::string> MemoryKvStore::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

int64_t MemoryKvStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& v = map_[key];
  const int64_t n = (v.empty() ? 0 : std::stoll(v)) + delta;
  v = std::to_string(n);
  return n;
}

std::string MemoryKvStore::compare_set(const std::string& key, const std::string& expected,
                                       const std::string& desired) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return expected;  // c10d: absent and a value expected → unchanged
    map_[key] = desired;
    return desired;
  }
  if (it->second == expected) it->second = desired;
  return it->second;
}

void MemoryKvStore::erase(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  map_.erase(key);
}

size_t MemoryKvStore::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return map_.size();
}

}  // namespace vispco::eval
