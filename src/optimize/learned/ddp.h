// Data-parallel training of the VisPCO predictor with LibTorch's c10d (Gloo backend, TCPStore rendezvous):
// every process computes gradients on its slice of the global batch, then the gradients are really
// all-reduced (summed and divided by the world size), so each optimiser step equals one on the whole global
// batch. The c10d headers stay inside ddp.cpp (they need USE_C10D_GLOO and libgloo-dev's headers).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace vispco::eval {
class KvStore;
}

namespace vispco::optimize::learned {

/// Process-group settings (a plain value: defaults, validate(), JSON round trip, equality over all fields).
struct DdpOptions {
  /// Processes in the group, ≥ 1. 1 = no communication at all.
  int64_t world_size = 1;
  /// This process's rank in [0, world_size); rank 0 hosts the TCPStore and writes the outputs.
  int64_t rank = 0;
  /// Address of rank 0's TCPStore (and, when it is a loopback address, of every process's Gloo device).
  std::string master_addr = "127.0.0.1";
  /// TCP port of the TCPStore, in [1, 65535].
  int64_t master_port = 29500;
  /// Rendezvous and collective timeout, seconds, > 0.
  double timeout_s = 300;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const DdpOptions&) const = default;
};
nlohmann::json to_json(const DdpOptions& o);

/// A joined process group (or a single process).
class DataParallel {
 public:
  /// Joins the group: rank 0 starts the TCPStore and every rank waits for all. World size 1 joins nothing.
  /// @throws InvalidArgument (bad options), Error (rendezvous failure or timeout, with the address).
  explicit DataParallel(const DdpOptions& opts);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int64_t rank() const { return opts_.rank; }
  int64_t world_size() const { return opts_.world_size; }
  bool is_main() const { return opts_.rank == 0; }

  /// Replaces each parameter's gradient by its mean over the processes (one flattened fp32 all-reduce;
  /// a missing gradient counts as zeros and is created). @param params CPU tensors that may have .grad().
  void average_gradients(const std::vector<at::Tensor>& params);
  /// Copies rank `root`'s values of `tensors` into every process's tensors (in place, one flattened buffer).
  void broadcast(const std::vector<at::Tensor>& tensors, int64_t root = 0);
  /// Sums `t` (any dtype Gloo reduces, CPU) over the processes, in place.
  void all_reduce_sum(at::Tensor& t);
  /// Waits until every process arrives.
  void barrier();
  /// The group's c10d store (rank 0's TCPStore) as an eval::KvStore, for work sharing
  /// (eval/distributed/work_queue.h); valid while this object lives. @throws InvalidArgument at world size 1.
  std::unique_ptr<eval::KvStore> kv_store();

 private:
  struct Impl;
  DdpOptions opts_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vispco::optimize::learned
