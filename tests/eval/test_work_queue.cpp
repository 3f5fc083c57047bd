// Work sharing through a store (eval/distributed/work_queue.h, issue 50) on the in-memory store with a
// hand-driven clock: fresh items go out once each, a dead rank's lease is handed out again only after its
// timeout and to one rank only, an item finished twice is collected once, and collected results leave the
// store.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "eval/distributed/kv_store.h"
#include "eval/distributed/shared_eval.h"
#include "eval/distributed/work_queue.h"

namespace vispco::eval {
namespace {

struct FakeClock {
  int64_t ms = 1'000'000;
  WorkQueue::Clock fn() {
    return [this] { return ms; };
  }
};

TEST(MemoryKvStore, FollowsC10dSemantics) {
  MemoryKvStore s;
  EXPECT_EQ(s.get("a"), std::nullopt);
  EXPECT_EQ(s.add("n", 2), 2);
  EXPECT_EQ(s.add("n", 0), 2);
  EXPECT_EQ(s.compare_set("a", "x", "y"), "x");  // absent, a value expected: unchanged, expected returned
  EXPECT_EQ(s.get("a"), std::nullopt);
  EXPECT_EQ(s.compare_set("a", "", "y"), "y");   // absent, "" expected: set
  EXPECT_EQ(s.compare_set("a", "z", "w"), "y");  // held value differs: unchanged
  EXPECT_EQ(s.compare_set("a", "y", "w"), "w");
  s.erase("a");
  EXPECT_EQ(s.get("a"), std::nullopt);
}

TEST(WorkQueue, EveryFreshItemGoesToOneRankOnce) {
  MemoryKvStore store;
  const int64_t n = 50;
  std::vector<std::vector<int64_t>> got(3);
  std::vector<std::thread> ranks;
  for (int64_t r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      WorkQueue q(store, "s/", r, n, 600);
      while (auto item = q.lease()) {
        got[static_cast<size_t>(r)].push_back(*item);
        q.complete(*item, "result of " + std::to_string(*item));
      }
    });
  for (auto& t : ranks) t.join();
  std::multiset<int64_t> all;
  for (const auto& g : got) all.insert(g.begin(), g.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(all.count(i), 1u) << "item " << i;
  WorkQueue main(store, "s/", 0, n, 600);
  const auto results = main.collect();
  ASSERT_EQ(results.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(results[static_cast<size_t>(i)].first, i);
    EXPECT_EQ(results[static_cast<size_t>(i)].second, "result of " + std::to_string(i));
  }
  EXPECT_TRUE(main.all_collected());
}

TEST(WorkQueue, ADeadRanksLeaseIsHandedOutAgainAfterTheTimeoutOnly) {
  MemoryKvStore store;
  FakeClock clock;
  WorkQueue dead(store, "s/", 2, 3, 10.0, clock.fn()), a(store, "s/", 0, 3, 10.0, clock.fn()),
      b(store, "s/", 1, 3, 10.0, clock.fn());
  ASSERT_EQ(dead.lease(), 0);  // rank 2 takes item 0 and never finishes it
  ASSERT_EQ(a.lease(), 1);
  a.complete(1, "one");
  ASSERT_EQ(b.lease(), 2);
  b.complete(2, "two");
  EXPECT_EQ(a.lease(), std::nullopt);  // item 0 is leased for 10 s
  clock.ms += 9'999;
  EXPECT_EQ(a.lease(), std::nullopt);
  EXPECT_EQ(b.lease(), std::nullopt);
  clock.ms += 2;                       // past the deadline
  EXPECT_EQ(b.lease(), 0);             // one rank takes it over
  EXPECT_EQ(a.lease(), std::nullopt);  // the other finds the new lease
  EXPECT_EQ(b.n_retaken(), 1);
  EXPECT_EQ(a.n_retaken(), 0);
  b.complete(0, "zero");
  WorkQueue main(store, "s/", 0, 3, 10.0, clock.fn());
  const auto r = main.collect();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].second, "zero");
  EXPECT_TRUE(main.all_collected());
}

TEST(WorkQueue, AnItemFinishedTwiceIsCollectedOnce) {
  MemoryKvStore store;
  FakeClock clock;
  WorkQueue slow(store, "s/", 1, 1, 1.0, clock.fn()), fast(store, "s/", 2, 1, 1.0, clock.fn()),
      main(store, "s/", 0, 1, 1.0, clock.fn());
  ASSERT_EQ(slow.lease(), 0);
  clock.ms += 1'001;
  ASSERT_EQ(fast.lease(), 0);  // the lease expired: handed out again
  fast.complete(0, "fast");
  const auto first = main.collect();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].second, "fast");
  slow.complete(0, "slow");  // the first worker finishes anyway
  EXPECT_TRUE(main.collect().empty());
  EXPECT_EQ(main.n_collected(), 1);
}

TEST(WorkQueue, CollectedResultsLeaveTheStore) {
  MemoryKvStore store;
  WorkQueue q(store, "s/", 0, 2, 60);
  for (int k = 0; k < 2; ++k) q.complete(*q.lease(), std::string(1000, 'x'));
  ASSERT_EQ(q.collect().size(), 2u);
  for (int64_t i = 0; i < 2; ++i) EXPECT_EQ(store.get("s/result/" + std::to_string(i)), std::nullopt);
}

TEST(WorkQueue, ALeaseNeverWrittenExpiresToo) {
  // A rank that died between taking an item from the counter and writing its lease.
  MemoryKvStore store;
  FakeClock clock;
  store.add("s/next", 1);  // item 0 taken, no lease
  WorkQueue q(store, "s/", 1, 1, 5.0, clock.fn());
  EXPECT_EQ(q.lease(), std::nullopt);  // first seen without a lease now
  clock.ms += 4'000;
  EXPECT_EQ(q.lease(), std::nullopt);
  clock.ms += 1'001;
  EXPECT_EQ(q.lease(), 0);
}

TEST(WorkQueue, BadSettingsAreErrors) {
  MemoryKvStore store;
  EXPECT_THROW(WorkQueue(store, "s/", 0, -1, 1.0), InvalidArgument);
  EXPECT_THROW(WorkQueue(store, "s/", 0, 1, 0.0), InvalidArgument);
  SharingOptions o;
  o.world_size = 2;
  o.rank = 2;
  EXPECT_THROW(o.validate(), InvalidArgument);
  o.rank = 1;
  o.chunk = 0;
  EXPECT_THROW(o.validate(), InvalidArgument);
  o.chunk = 1;
  EXPECT_NO_THROW(o.validate());
}

TEST(WorkSharing, BroadcastGivesRankZerosValueAndSweepsGetFreshPrefixes) {
  MemoryKvStore store;
  SharingOptions o0, o1;
  o0.world_size = o1.world_size = 2;
  o1.rank = 1;
  o1.wait_timeout_s = 0.2;
  o1.poll_s = 0.01;
  WorkSharing r0(store, o0), r1(store, o1);
  EXPECT_THROW(r1.broadcast("never published"), Error);  // rank 0 has not published broadcast 0
  WorkSharing late(store, o1);
  EXPECT_EQ(r0.broadcast("from rank 0"), "from rank 0");
  EXPECT_EQ(late.broadcast("ignored"), "from rank 0");
  EXPECT_EQ(r0.next_prefix(), "vispco/0/");
  EXPECT_EQ(r0.next_prefix(), "vispco/1/");
  EXPECT_EQ(r0.log_prefix(), "[rank 0/2] ");
}

TEST(WorkSharing, APublishedSweepLeavesTheStoreOnceEveryWorkerReadIt) {
  MemoryKvStore store;
  SharingOptions o;
  o.world_size = 3;
  WorkSharing main(store, o);
  store.set("vispco/0/final", "results of sweep 0");
  store.set("vispco/0/plan", "items of sweep 0");
  main.retire("vispco/0/");
  main.read_final("vispco/0/");  // as worker 1 (the calls are the workers'; one store here)
  store.set("vispco/1/final", "results of sweep 1");
  main.retire("vispco/1/");  // only one of two workers read sweep 0: kept
  EXPECT_EQ(store.get("vispco/0/final"), "results of sweep 0");
  main.read_final("vispco/0/");  // worker 2
  main.retire("vispco/2/");
  EXPECT_EQ(store.get("vispco/0/final"), std::nullopt);
  EXPECT_EQ(store.get("vispco/0/plan"), std::nullopt);
  EXPECT_EQ(store.get("vispco/1/final"), "results of sweep 1");  // nobody has read sweep 1
}

}  // namespace
}  // namespace vispco::eval
