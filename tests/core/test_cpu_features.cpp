// CPU feature detection against the kernel's view (/proc/cpuinfo flags) and the dtype choice it drives.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/context.h"
#include "core/cpu_features.h"
#include "core/errors.h"

namespace vispco {
namespace {

// The flags of the first processor in /proc/cpuinfo (empty when there is none, e.g. not Linux).
std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::set<std::string> flags;
      for (std::string w; words >> w;) flags.insert(w);
      return flags;
    }
  return {};
}

TEST(CpuFeatures, AgreeWithProcCpuinfo) {
  const auto flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags here";
  const auto f = detect_cpu_features();
  std::printf("CPUID: %s\n", f.summary().c_str());
  EXPECT_EQ(f.avx2, flags.count("avx2") > 0);
  EXPECT_EQ(f.avx512f, flags.count("avx512f") > 0);
  EXPECT_EQ(f.avx512_bf16, flags.count("avx512_bf16") > 0);
  EXPECT_EQ(f.amx_bf16, flags.count("amx_bf16") > 0);
  EXPECT_EQ(f.avx512_vnni, flags.count("avx512_vnni") > 0);
  EXPECT_EQ(f.avx_vnni, flags.count("avx_vnni") > 0);
}

TEST(ChooseDtype, AutoFollowsNativeBf16AndNamesAreHonoured) {
  const auto flags = proc_cpuinfo_flags();
  const bool native = flags.count("avx512_bf16") > 0 || flags.count("amx_bf16") > 0;
  const auto cpu = choose_dtype("auto", c10::Device(c10::kCPU));
  EXPECT_EQ(cpu.dtype, native ? c10::kBFloat16 : c10::kFloat) << cpu.describe();
  EXPECT_EQ(cpu.reason.rfind("auto: ", 0), 0u);
  EXPECT_EQ(choose_dtype("auto", c10::Device(c10::kCUDA, 0)).dtype, c10::kBFloat16);
  EXPECT_EQ(choose_dtype("fp32", c10::Device(c10::kCPU)).dtype, c10::kFloat);
  EXPECT_EQ(choose_dtype("bf16", c10::Device(c10::kCPU)).describe(), "bf16 (asked)");
  try {
    choose_dtype("int4", c10::Device(c10::kCPU));
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("auto, fp32, bf16, fp16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vispco
