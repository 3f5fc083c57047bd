// The run context: device, compute dtype, thread count and seed travel here, never in globals or
// environment variables read below main().
#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

namespace vispco {

/// Where and how tensors are computed. Built once in main() (or a test) and passed down.
struct RunContext {
  /// Device for weights and activations: CPU, or CUDA when built against a CUDA LibTorch.
  c10::Device device = c10::Device(c10::kCPU);
  /// Compute dtype of weights and activations: kFloat (fp32) or kBFloat16. Checkpoint tensors of any
  /// stored dtype (fp32/fp16/bf16) are converted to it at load.
  c10::ScalarType dtype = c10::kFloat;
  /// Intra-op threads; 0 = all cores of the machine.
  int n_threads = 0;
  /// Seed of every random draw (sampling, random scorer, init-random).
  uint64_t seed = 0;
};

/// A compute dtype and why it was chosen.
struct DtypeChoice {
  c10::ScalarType dtype = c10::kFloat;
  std::string reason;  ///< e.g. "auto: CPU has avx512_bf16" or "asked"
  /// "bf16 (auto: CPU has avx512_bf16)".
  std::string describe() const;
};

/// The compute dtype for a --dtype value. "auto": bf16 on a CUDA device; on the CPU bf16 where it is native
/// (AVX512-BF16 or AMX-BF16, core/cpu_features.h), fp32 elsewhere (LibTorch's bf16 is ~30× slower than fp32
/// there). Any other name as parse_dtype(). @throws InvalidArgument for an unknown name.
DtypeChoice choose_dtype(const std::string& name, const c10::Device& device);

/// Parses "fp32" | "float32" | "bf16" | "bfloat16" | "fp16" | "float16" into a dtype.
/// @throws InvalidArgument naming the valid names.
c10::ScalarType parse_dtype(const std::string& name);
/// The short name ("fp32", "bf16", "fp16") of a floating dtype.
std::string dtype_name(c10::ScalarType dtype);
/// Parses "cpu" | "cuda" | "cuda:N". @throws InvalidArgument, also when CUDA is asked for and unavailable.
c10::Device parse_device(const std::string& name);
/// Applies the context's thread count to LibTorch (all hardware cores when n_threads == 0).
void apply_threads(const RunContext& ctx);

/// The context of an inference command's flags: device from `device` (parse_device), compute dtype from
/// `dtype` (choose_dtype, reported through `choice` when given), `n_threads` intra-op threads, applied
/// (apply_threads). @throws InvalidArgument for a bad device or dtype name.
RunContext inference_context(const std::string& device, const std::string& dtype, int n_threads,
                             DtypeChoice* choice = nullptr);

}  // namespace vispco
