// Work sharing through rank 0's store (kv_store.h): items 0..n−1 of one sweep are handed out by an atomic
// counter, each under a lease (rank, deadline) so that an item whose worker died is handed out again once
// its lease has expired; results travel back under per-item keys and rank 0 collects each item once, however
// many times it was finished. Keys live under a prefix (one per sweep). Follows the pattern of c10d's own
// rendezvous (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py: add counters, compare-set).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "eval/distributed/kv_store.h"

namespace vispco::eval {

/// Milliseconds on a clock every host shares (system_clock since the epoch, so NTP-synchronised hosts agree).
int64_t wall_clock_ms();

/// One process's view of one sweep's items.
class WorkQueue {
 public:
  using Clock = std::function<int64_t()>;  ///< milliseconds
  /// @param prefix key prefix of this sweep (e.g. "vispco/sweep/3/") @param n_items ≥ 0
  /// @param lease_timeout_s a leased item is handed out again this long after it was leased, > 0
  WorkQueue(KvStore& store, std::string prefix, int64_t rank, int64_t n_items, double lease_timeout_s,
            Clock now_ms = wall_clock_ms);

  /// The next item for this rank: a fresh one while the counter has some, else one whose lease expired
  /// (taken over atomically, compare-set: one rank wins). nullopt when none is available now.
  std::optional<int64_t> lease();
  /// Publishes `payload` as the result of `item` (a second completion of an item is harmless).
  void complete(int64_t item, const std::string& payload);
  /// Rank 0: results that arrived since the last call, each item once ever, in item order; their keys are
  /// removed from the store.
  std::vector<std::pair<int64_t, std::string>> collect();
  /// Items collected so far (rank 0).
  int64_t n_collected() const { return static_cast<int64_t>(collected_.size()); }
  bool all_collected() const { return n_collected() == n_items_; }
  /// Items this rank took over from an expired lease.
  int64_t n_retaken() const { return n_retaken_; }
  int64_t n_items() const { return n_items_; }

 private:
  std::string key(const char* what, int64_t item) const;
  std::string lease_value();

  KvStore& store_;
  std::string prefix_;
  int64_t rank_, n_items_;
  int64_t lease_ms_;
  Clock now_;
  bool fresh_left_ = true;
  int64_t serial_ = 0, n_retaken_ = 0, last_completions_ = -1, first_uncollected_ = 0;
  std::set<int64_t> known_done_, collected_;
  std::vector<int64_t> absent_since_;  // per item: when its lease key was first seen missing (−1: not)
};

}  // namespace vispco::eval
