// The key-value operations a distributed sweep needs from rank 0's store: c10d's Store (TCPStore) in a
// launch (optimize/learned/ddp.h hands one out), an in-memory map in tests. Values are byte strings.
// Reference: torch/csrc/distributed/c10d/Store.hpp (set, get, add, compareSet, check, deleteKey).
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace vispco::eval {

/// A store shared by every rank of a launch. Each call is atomic; implementations may block on the network
/// and throw (Error) when the store is gone.
class KvStore {
 public:
  virtual ~KvStore() = default;
  /// Sets `key` to `value`.
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// The value of `key`, nullopt when it is absent (does not wait).
  virtual std::optional<std::string> get(const std::string& key) = 0;
  /// Adds `delta` to the integer at `key` (absent = 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  /// c10d's compareSet: when `key` holds `expected` (or is absent and `expected` is ""), sets it to
  /// `desired`. @return the value the key holds afterwards (== desired exactly when this call set it).
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
  /// Removes `key` (absent: nothing happens).
  virtual void erase(const std::string& key) = 0;
};

/// A KvStore in this process's memory (tests; threads may share it).
class MemoryKvStore final : public KvStore {
 public:
  void set(const std::string& key, const std::string& value) override;
  std::optional<std::string> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  void erase(const std::string& key) override;
  /// Keys held (tests check that collected results are dropped).
  size_t size();

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> map_;
};

}  // namespace vispco::eval
