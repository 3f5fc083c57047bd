// core/seed_guard.h: a scoped seed gives the draws at::manual_seed gives, and the caller's stream continues
// afterwards as if the scope had not run (reference: the same draws without the scope).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/seed_guard.h"

namespace vispco {
namespace {

TEST(SeedGuard, DrawsInsideEqualManualSeedAndTheCallersStreamContinues) {
  at::manual_seed(7);
  const auto ref_inside = at::rand({5});
  at::manual_seed(123);
  const auto ref_before = at::randn({3});  // odd-sized normals leave a cached sample in the generator
  const auto ref_after = at::randn({3});
  const auto ref_after2 = at::rand({4});

  at::manual_seed(123);
  const auto before = at::randn({3});
  at::Tensor inside;
  {
    SeedGuard g(7);
    inside = at::rand({5});
  }
  const auto after = at::randn({3});
  const auto after2 = at::rand({4});
  EXPECT_TRUE(at::equal(before, ref_before));
  EXPECT_TRUE(at::equal(inside, ref_inside));
  EXPECT_TRUE(at::equal(after, ref_after));
  EXPECT_TRUE(at::equal(after2, ref_after2));
}

TEST(SeedGuard, RestoresWhenAnExceptionUnwinds) {
  at::manual_seed(5);
  const auto ref = at::rand({4});
  at::manual_seed(5);
  try {
    SeedGuard g(99);
    (void)at::rand({10});
    throw std::runtime_error("x");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(at::equal(at::rand({4}), ref));
}

}  // namespace
}  // namespace vispco
