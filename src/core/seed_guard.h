// A scoped seed of LibTorch's global CPU generator, so that code below main can ask for seeded default draws
// (module initialisers have no generator argument) without reseeding the caller's random stream.
#pragma once
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <mutex>

namespace vispco {

/// Seeds the global CPU generator (at::detail::getDefaultCPUGenerator(): what torch::nn initialisers,
/// torch::randn and randperm draw from without an explicit generator) with `seed` for its lifetime and puts
/// the generator's previous state back on destruction (also when an exception unwinds). Draws inside the
/// scope equal those after at::manual_seed(seed); draws after it continue the caller's stream as if the scope
/// had not run. CUDA generators are not touched. Process-global: use it where no other thread draws
/// meanwhile.
class SeedGuard {
 public:
  explicit SeedGuard(uint64_t seed) : gen_(at::detail::getDefaultCPUGenerator()) {
    std::lock_guard<std::mutex> lock(gen_.mutex());
    saved_ = gen_.get_state();
    gen_.set_current_seed(seed);
  }
  ~SeedGuard() {
    std::lock_guard<std::mutex> lock(gen_.mutex());
    gen_.set_state(saved_);
  }
  SeedGuard(const SeedGuard&) = delete;
  SeedGuard& operator=(const SeedGuard&) = delete;

 private:
  at::Generator gen_;
  at::Tensor saved_;  ///< uint8 state bytes of the generator before the scope
};

}  // namespace vispco
