// Leases and results of a sweep's items in rank 0's store (eval/distributed/work_queue.h).
// Keys under the prefix: next (counter), lease/<i> ("rank:deadline_ms:serial"), result/<i>, done/<i>,
// completions (counter of complete() calls, so rank 0 scans only when something arrived).
#include "eval/distributed/work_queue.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/errors.h"

namespace vispco::eval {

int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

WorkQueue::WorkQueue(KvStore& store, std::string prefix, int64_t rank, int64_t n_items,
                     double lease_timeout_s, Clock now_ms)
    : store_(store),
      prefix_(std::move(prefix)),
      rank_(rank),
      n_items_(n_items),
      lease_ms_(static_cast<int64_t>(std::llround(lease_timeout_s * 1000.0))),
      now_(std::move(now_ms)),
      absent_since_(static_cast<size_t>(std::max<int64_t>(n_items, 0)), -1) {
  if (n_items < 0)
    throw InvalidArgument("work queue: item count must be ≥ 0, got " + std::to_string(n_items));
  if (!(lease_timeout_s > 0))
    throw InvalidArgument("work queue: lease timeout must be > 0 s, got " + std::to_string(lease_timeout_s));
}

std::string WorkQueue::key(const char* what, int64_t item) const {
  return prefix_ + what + "/" + std::to_string(item);
}

std::string WorkQueue::lease_value() {
  return std::to_string(rank_) + ":" + std::to_string(now_() + lease_ms_) + ":" + std::to_string(serial_++);
}

std::optional<int64_t> WorkQueue::lease() {
  if (fresh_left_) {
    const int64_t n = store_.add(prefix_ + "next", 1) - 1;
    if (n < n_items_) {
      store_.set(key("lease", n), lease_value());
      return n;
    }
    fresh_left_ = false;
  }
  // Every item has been handed out once: take over one whose lease expired.
  for (int64_t i = 0; i < n_items_; ++i) {
    if (known_done_.count(i)) continue;
    if (store_.get(key("done", i))) {
      known_done_.insert(i);
      continue;
    }
    const std::string lk = key("lease", i);
    const std::optional<std::string> held = store_.get(lk);
    const int64_t now = now_();
    int64_t deadline;
    if (held) {
      const size_t a = held->find(':'), b = held->find(':', a + 1);
      deadline = std::stoll(held->substr(a + 1, b - a - 1));
    } else {  // taken from the counter but its lease not written (yet, or its worker died in between)
      int64_t& since = absent_since_[static_cast<size_t>(i)];
      if (since < 0) since = now;
      deadline = since + lease_ms_;
    }
    if (now < deadline) continue;
    const std::string mine = lease_value();
    if (store_.compare_set(lk, held.value_or(""), mine) == mine) {
      ++n_retaken_;
      return i;
    }
  }
  return std::nullopt;
}

void WorkQueue::complete(int64_t item, const std::string& payload) {
  store_.set(key("result", item), payload);
  store_.set(key("done", item), "1");  // after the result: whoever sees done finds a result
  store_.add(prefix_ + "completions", 1);
}

std::vector<std::pair<int64_t, std::string>> WorkQueue::collect() {
  std::vector<std::pair<int64_t, std::string>> out;
  const int64_t completions = store_.add(prefix_ + "completions", 0);
  if (completions == last_completions_) return out;
  last_completions_ = completions;
  // Only items handed out so far, from the first one not collected: about one per rank in flight, so a
  // collect costs O(ranks) store calls, not O(items).
  const int64_t handed = std::min(n_items_, store_.add(prefix_ + "next", 0));
  while (first_uncollected_ < n_items_ && collected_.count(first_uncollected_)) ++first_uncollected_;
  for (int64_t i = first_uncollected_; i < handed; ++i) {
    if (collected_.count(i) || !store_.get(key("done", i))) continue;
    std::optional<std::string> payload = store_.get(key("result", i));
    if (!payload) continue;  // cannot happen (result before done), but never collect nothing
    collected_.insert(i);
    known_done_.insert(i);
    store_.erase(key("result", i));
    out.emplace_back(i, std::move(*payload));
  }
  return out;
}

}  // namespace vispco::eval
