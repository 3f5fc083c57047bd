// The coordination ceiling of shared sweeps (issue 50): how many work items per second rank 0's c10d
// TCPStore hands out and takes back when the items themselves cost nothing. Ranks are threads of this
// process, each joined through its own optimize::learned::DataParallel (a TCPStore client of its own, as a
// separate process would hold), world size 1 + W: rank 0 collects (eval::WorkQueue::collect(), what the
// shared eval loop does between its own items), ranks 1..W lease no-op items and complete them with a
// payload the size of a real item's result (one sample's JSON, ~400 bytes). Prints items/s per W.
// Usage: bench_work_queue [ITEMS (2000)] [PORT (29731)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "eval/distributed/kv_store.h"
#include "eval/distributed/work_queue.h"
#include "optimize/learned/ddp.h"

namespace {

double run(int64_t n_items, int n_workers, int port) {
  using vispco::optimize::learned::DataParallel;
  using vispco::optimize::learned::DdpOptions;
  const int world = 1 + n_workers;
  std::vector<std::unique_ptr<DataParallel>> groups(world);
  std::vector<std::thread> joiners;
  for (int r = 0; r < world; ++r)
    joiners.emplace_back([&, r] {
      DdpOptions o;
      o.world_size = world;
      o.rank = r;
      o.master_port = port;
      o.timeout_s = 60;
      groups[r] = std::make_unique<DataParallel>(o);
    });
  for (auto& t : joiners) t.join();
  std::vector<std::unique_ptr<vispco::eval::KvStore>> stores;
  for (auto& g : groups) stores.push_back(g->kv_store());
  const std::string payload(400, 'x');
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int r = 1; r < world; ++r)
    workers.emplace_back([&, r] {
      vispco::eval::WorkQueue q(*stores[r], "bench/", r, n_items, 600);
      while (auto item = q.lease()) q.complete(*item, payload);
    });
  vispco::eval::WorkQueue main(*stores[0], "bench/", 0, n_items, 600);
  while (!main.all_collected()) main.collect();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& t : workers) t.join();
  stores.clear();
  for (int r = world - 1; r >= 0; --r) groups[r].reset();  // clients before the server
  return static_cast<double>(n_items) / s;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n_items = argc > 1 ? std::atoll(argv[1]) : 2000;
  const int port = argc > 2 ? std::atoi(argv[2]) : 29731;
  std::printf("no-op items through rank 0's TCPStore (lease, 400-byte result, collect), %lld items\n",
              static_cast<long long>(n_items));
  int p = port;
  for (int w : {1, 2, 4}) std::printf("  %d worker rank(s): %8.0f items/s\n", w, run(n_items, w, p++));
  return 0;
}
