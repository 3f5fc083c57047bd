// c10d Gloo process group over a TCPStore rendezvous, and the collectives VisPCO training needs.
// Compiled with USE_C10D_GLOO (CMakeLists.txt), under which c10d declares ProcessGroupGloo.
#include "optimize/learned/ddp.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <glog/logging.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "core/errors.h"
#include "eval/distributed/kv_store.h"

namespace vispco::optimize::learned {

void DdpOptions::validate() const {
  if (world_size < 1) throw InvalidArgument("--world-size must be ≥ 1, got " + std::to_string(world_size));
  if (rank < 0 || rank >= world_size)
    throw InvalidArgument("--rank must be in [0, " + std::to_string(world_size) + "), got " +
                          std::to_string(rank));
  if (master_addr.empty()) throw InvalidArgument("--master-addr must not be empty");
  if (master_port < 1 || master_port > 65535)
    throw InvalidArgument("--master-port must be in [1, 65535], got " + std::to_string(master_port));
  if (!(timeout_s > 0)) throw InvalidArgument("DDP timeout must be > 0 s, got " + std::to_string(timeout_s));
}

nlohmann::json to_json(const DdpOptions& o) {
  return {{"world_size", o.world_size},
          {"rank", o.rank},
          {"master_addr", o.master_addr},
          {"master_port", o.master_port},
          {"timeout_s", o.timeout_s}};
}

struct DataParallel::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
};

namespace {
// Silences c10d's own glog lines (connect retries, "timed out") while it lives: a failed rendezvous then
// ends in the one error line DataParallel throws, which carries c10d's message.
class QuietGlog {
 public:
  QuietGlog() : saved_(FLAGS_minloglevel) { FLAGS_minloglevel = google::GLOG_FATAL; }
  ~QuietGlog() { FLAGS_minloglevel = saved_; }

 private:
  int saved_;
};

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

// Flattens tensors into one contiguous fp32 buffer, and back.
at::Tensor flatten(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  for (const auto& t : ts) flat.push_back(t.detach().to(at::kCPU, at::kFloat).reshape({-1}));
  return at::cat(flat);
}
void unflatten_into(const at::Tensor& buf, const std::vector<at::Tensor>& ts) {
  int64_t off = 0;
  at::NoGradGuard no_grad;
  for (const auto& t : ts) {
    const int64_t n = t.numel();
    t.copy_(buf.narrow(0, off, n).view(t.sizes()));
    off += n;
  }
}
}  // namespace

DataParallel::DataParallel(const DdpOptions& opts) : opts_(opts), impl_(std::make_unique<Impl>()) {
  opts_.validate();
  if (opts_.world_size == 1) return;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(opts_.timeout_s * 1000));
  const std::string where = opts_.master_addr + ":" + std::to_string(opts_.master_port);
  const QuietGlog quiet;
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(opts_.master_port);
    so.isServer = opts_.rank == 0;
    so.numWorkers = static_cast<std::size_t>(opts_.world_size);
    so.waitWorkers = true;
    so.timeout = timeout;
    impl_->store = c10::make_intrusive<c10d::TCPStore>(opts_.master_addr, so);
    auto go = c10d::ProcessGroupGloo::Options::create(timeout);
    go->devices.push_back(is_loopback(opts_.master_addr)
                              ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                              : c10d::ProcessGroupGloo::createDefaultDevice());
    go->threads = 1;
    impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, static_cast<int>(opts_.rank),
                                                            static_cast<int>(opts_.world_size), go);
  } catch (const c10::Error& e) {
    throw Error("c10d rendezvous at " + where + " failed for rank " + std::to_string(opts_.rank) + " of " +
                std::to_string(opts_.world_size) + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw Error("c10d rendezvous at " + where + " failed for rank " + std::to_string(opts_.rank) + " of " +
                std::to_string(opts_.world_size) + ": " + e.what());
  }
}

DataParallel::~DataParallel() = default;

void DataParallel::average_gradients(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    grads.push_back(p.grad());
  }
  if (opts_.world_size == 1 || grads.empty()) return;
  auto buf = flatten(grads);
  std::vector<at::Tensor> v{buf};
  impl_->pg->allreduce(v)->wait();
  buf.div_(double(opts_.world_size));
  unflatten_into(buf, grads);
}

void DataParallel::broadcast(const std::vector<at::Tensor>& tensors, int64_t root) {
  if (opts_.world_size == 1 || tensors.empty()) return;
  auto buf = flatten(tensors);
  std::vector<at::Tensor> v{buf};
  c10d::BroadcastOptions bo;
  bo.rootRank = root;
  impl_->pg->broadcast(v, bo)->wait();
  unflatten_into(buf, tensors);
}

void DataParallel::all_reduce_sum(at::Tensor& t) {
  if (opts_.world_size == 1) return;
  std::vector<at::Tensor> v{t};
  impl_->pg->allreduce(v)->wait();
}

namespace {

// c10d's Store behind eval::KvStore; c10::Error (a lost connection, a timeout) becomes one-line
// vispco::Error.
class C10dKvStore final : public eval::KvStore {
 public:
  explicit C10dKvStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::string& value) override {
    guarded([&] { store_->set(key, bytes(value)); });
  }
  std::optional<std::string> get(const std::string& key) override {
    std::optional<std::string> out;
    guarded([&] {
      if (store_->check({key})) out = text(store_->get(key));
    });
    return out;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t n = 0;
    guarded([&] { n = store_->add(key, delta); });
    return n;
  }
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override {
    std::string out;
    guarded([&] { out = text(store_->compareSet(key, bytes(expected), bytes(desired))); });
    return out;
  }
  void erase(const std::string& key) override {
    guarded([&] { store_->deleteKey(key); });
  }

 private:
  static std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
  static std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }
  template <class F>
  static void guarded(F&& f) {
    try {
      f();
    } catch (const c10::Error& e) {
      throw Error(std::string("c10d store: ") + e.what_without_backtrace() +
                  " (has rank 0, which holds the store, ended?)");
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(std::string("c10d store: ") + e.what() + " (has rank 0, which holds the store, ended?)");
    }
  }
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

std::unique_ptr<eval::KvStore> DataParallel::kv_store() {
  if (!impl_->store) throw InvalidArgument("DataParallel: a single process has no store");
  return std::make_unique<C10dKvStore>(impl_->store);
}

void DataParallel::barrier() {
  if (opts_.world_size == 1) return;
  impl_->pg->barrier()->wait();
}

}  // namespace vispco::optimize::learned
