// Parsing of the run context's fields and thread set-up.
#include "core/context.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/cuda.h>

#include "core/auto_dtype.h"
#include "core/cpu_features.h"
#include "core/cpu_quota.h"
#include "core/errors.h"

namespace vispco {

c10::ScalarType parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "float32" || name == "float") return c10::kFloat;
  if (name == "bf16" || name == "bfloat16") return c10::kBFloat16;
  if (name == "fp16" || name == "float16" || name == "half") return c10::kHalf;
  throw InvalidArgument("unknown dtype '" + name + "' (valid: fp32, bf16, fp16)");
}

std::string DtypeChoice::describe() const { return dtype_name(dtype) + " (" + reason + ")"; }

DtypeChoice choose_dtype(const std::string& name, const c10::Device& device) {
  if (name != "auto") {
    try {
      return {parse_dtype(name), "asked"};
    } catch (const InvalidArgument&) {
      throw InvalidArgument("unknown dtype '" + name + "' (valid: auto, fp32, bf16, fp16)");
    }
  }
  if (device.is_cuda()) return {c10::kBFloat16, "auto: CUDA device"};
  if (const auto& measured = cpu_auto_dtype()) return measured();  // by measurement (core/auto_dtype.h)
  const CpuFeatures cpu = detect_cpu_features();
  if (cpu.native_bf16()) return {c10::kBFloat16, "auto: CPU has native bf16 (" + cpu.summary() + ")"};
  return {c10::kFloat, "auto: CPU has no AVX512-BF16/AMX-BF16 (" + cpu.summary() + "), where bf16 is slow"};
}

std::string dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat:
      return "fp32";
    case c10::kBFloat16:
      return "bf16";
    case c10::kHalf:
      return "fp16";
    default:
      return c10::toString(dtype);
  }
}

c10::Device parse_device(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available())
      throw InvalidArgument("device '" + name + "' asked for, but this LibTorch has no usable CUDA device");
    try {
      return c10::Device(name);
    } catch (const c10::Error&) {
      throw InvalidArgument("bad device '" + name + "' (valid: cpu, cuda, cuda:N)");
    }
  }
  throw InvalidArgument("unknown device '" + name + "' (valid: cpu, cuda, cuda:N)");
}

void apply_threads(const RunContext& ctx) {
  int n = ctx.n_threads;
  if (n <= 0) n = default_thread_count();  // affinity mask and cgroup CPU quota (core/cpu_quota.h)
  at::set_num_threads(n);
  // Debian's LibTorch hands fp32 GEMMs to OpenBLAS, whose thread count ignores at::set_num_threads: with
  // --threads 1 a second OpenBLAS worker still ran (and spun in sched_yield between calls). Give it the same
  // count when the process has OpenBLAS (looked up at run time: other LibTorch builds use MKL or none).
  // scripts/install-deps.sh selects OpenBLAS's OpenMP build, which shares LibTorch's OpenMP pool; the pthread
  // build keeps a second pool that fights it for the cores (docs/benchmarks.md, AVX2 decode).
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(n);
}

RunContext inference_context(const std::string& device, const std::string& dtype, int n_threads,
                             DtypeChoice* choice) {
  RunContext ctx;
  ctx.device = parse_device(device);
  ctx.n_threads = n_threads;
  apply_threads(ctx);  // first: a measured "auto" (core/auto_dtype.h) times the thread count in force
  const DtypeChoice c = choose_dtype(dtype, ctx.device);
  ctx.dtype = c.dtype;
  if (choice != nullptr) *choice = c;
  return ctx;
}

}  // namespace vispco
