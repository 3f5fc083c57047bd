// Process-wide allocator settings for tensor workloads, applied once at the top of main() (the CLI's and the
// test binary's), so both run with the same memory behaviour.
#pragma once

namespace vispco {

/// Keeps large freed buffers in glibc's heap instead of returning each to the kernel: by default every buffer
/// over 128 KiB is a fresh mmap(), and re-faulting hundreds of MB of activations per forward pass dominated
/// training time and, in the test binary, doubled the CPU time of model evaluations (36 M page faults and
/// 52 s of system time in the bundled model's accuracy test). Raises glibc's mmap and trim thresholds to
/// 1 GiB. Call once at the start of main(), before other threads start; never throws.
void keep_large_buffers_in_heap();

}  // namespace vispco
