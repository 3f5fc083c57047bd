// Tests of `--dtype auto` by measurement (model/dtype_calibration.h): the choice from injected timings (no
// timing is asserted), the cache's reuse per CPU / thread count / gemv path, and its failure modes.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "model/dtype_calibration.h"
#include "model/gemv/gemv.h"
#include "test_util.h"

namespace vispco {
namespace {

// A calibration with the given timings under this machine's cache key.
DtypeCalibration calibration(DtypeTiming fp32, DtypeTiming bf16) {
  DtypeCalibration c;
  c.fp32 = fp32;
  c.bf16 = bf16;
  c.cpu = cpu_model_name();
  c.n_threads = at::get_num_threads();
  c.gemv_path = gemv_isa_name(gemv_best_isa());
  return c;
}

nlohmann::json read_json(const std::string& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

TEST(DtypeCalibration, ModelledRequestScalesPrefillAndAddsDecodeSteps) {
  // 616 / 128 = 4.8125 prefill products + 32 decode rows.
  EXPECT_DOUBLE_EQ(modelled_request_ms({10.0, 0.5}), 10.0 * 616 / 128 + 32 * 0.5);
}

TEST(DtypeCalibration, ChoosesTheFasterModelledRequest) {
  // AMX / AVX512-BF16: bf16 faster in both.
  EXPECT_EQ(choose_dtype_by_calibration(calibration({12, 1.0}, {4, 0.5}), "t").dtype, c10::kBFloat16);
  // AVX2 only: LibTorch's bf16 GEMM ~30× slower; decode's halved bytes do not make up for it.
  EXPECT_EQ(choose_dtype_by_calibration(calibration({12, 1.0}, {360, 0.5}), "t").dtype, c10::kFloat);
  // The AMD EPYC before gemv: bf16 prefill a little faster, bf16 decode 2.3× slower → fp32
  // (fp32 10 · 4.8125 + 32 · 1.0 = 80.1; bf16 9 · 4.8125 + 32 · 2.3 = 116.9).
  EXPECT_EQ(choose_dtype_by_calibration(calibration({10, 1.0}, {9, 2.3}), "t").dtype, c10::kFloat);
  // bf16 prefill 20 % slower but decode twice as fast → bf16 (fp32 80.1, bf16 73.75).
  EXPECT_EQ(choose_dtype_by_calibration(calibration({10, 1.0}, {12, 0.5}), "t").dtype, c10::kBFloat16);
  // A tie, or an unusable bf16 time, keeps fp32.
  EXPECT_EQ(choose_dtype_by_calibration(calibration({10, 1.0}, {10, 1.0}), "t").dtype, c10::kFloat);
  EXPECT_EQ(choose_dtype_by_calibration(calibration({10, 1.0}, {0, 0}), "t").dtype, c10::kFloat);
  const auto c = choose_dtype_by_calibration(calibration({12, 1.0}, {4, 0.5}), "measured");
  EXPECT_NE(c.reason.find("auto: measured"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("bf16 is faster"), std::string::npos) << c.reason;
}

TEST(DtypeCalibration, ASecondRunReadsTheCache) {
  testing::TempDir dir;
  const std::string file = dir / "sub/dtype-calibration.json";  // folders are created
  int measured = 0;
  const auto fake = [&] {
    ++measured;
    return calibration({12, 1.0}, {4, 0.5});
  };
  const auto first = calibrated_cpu_dtype(file, fake);
  EXPECT_EQ(measured, 1);
  EXPECT_EQ(first.dtype, c10::kBFloat16);
  EXPECT_NE(first.reason.find("measured, cached in " + file), std::string::npos) << first.reason;
  const auto j = read_json(file);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_DOUBLE_EQ(j.begin().value().at("bf16").at("prefill_ms").get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(j.begin().value().at("fp32").at("decode_ms").get<double>(), 1.0);

  const auto second = calibrated_cpu_dtype(file, fake);
  EXPECT_EQ(measured, 1);  // not measured again
  EXPECT_EQ(second.dtype, c10::kBFloat16);
  EXPECT_NE(second.reason.find("cached in " + file), std::string::npos) << second.reason;
}

TEST(DtypeCalibration, AnotherThreadCountIsMeasuredAndKeptBeside) {
  testing::TempDir dir;
  const std::string file = dir / "c.json";
  int measured = 0;
  const auto fake = [&] {
    ++measured;
    return calibration({12, 1.0}, {360, 0.5});
  };
  const int saved = at::get_num_threads();
  calibrated_cpu_dtype(file, fake);
  at::set_num_threads(saved == 1 ? 2 : 1);
  const auto other = calibrated_cpu_dtype(file, fake);
  at::set_num_threads(saved);
  EXPECT_EQ(measured, 2);
  EXPECT_EQ(other.dtype, c10::kFloat);
  EXPECT_EQ(read_json(file).size(), 2u);
}

TEST(DtypeCalibration, ABadOrUnwritableCacheIsMeasuredPast) {
  testing::TempDir dir;
  const std::string file = dir / "c.json";
  { std::ofstream(file) << "{ not json"; }
  int measured = 0;
  const auto fake = [&] {
    ++measured;
    return calibration({12, 1.0}, {4, 0.5});
  };
  const auto c = calibrated_cpu_dtype(file, fake);
  EXPECT_EQ(measured, 1);
  EXPECT_EQ(c.dtype, c10::kBFloat16);
  EXPECT_NE(c.reason.find("unreadable"), std::string::npos) << c.reason;
  EXPECT_EQ(read_json(file).size(), 1u);  // rewritten

  // A cache path below a regular file cannot be written: measured, said so, no error.
  const auto blocked = calibrated_cpu_dtype(file + "/inner.json", fake);
  EXPECT_EQ(measured, 2);
  EXPECT_NE(blocked.reason.find("not cached"), std::string::npos) << blocked.reason;
  // No cache file: measured every time.
  calibrated_cpu_dtype("", fake);
  calibrated_cpu_dtype("", fake);
  EXPECT_EQ(measured, 4);
}

}  // namespace
}  // namespace vispco
