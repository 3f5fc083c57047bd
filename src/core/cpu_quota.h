// The CPUs this process may use, for the default thread count: its affinity mask (sched_getaffinity(2)) and
// its cgroup's CPU bandwidth limit (kernel Documentation/admin-guide/cgroup-v2.rst, "cpu.max"; cgroup v1:
// Documentation/scheduler/sched-bwc.rst, "cpu.cfs_quota_us" / "cpu.cfs_period_us"). The parsers are pure
// functions of the files' text, so tests feed hand-written files.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace vispco {

/// A cgroup CPU bandwidth limit: the group's threads together may run `quota_us` µs of CPU time in every
/// `period_us` µs of wall time (both > 0), i.e. quota / period CPUs' worth.
struct CpuQuota {
  int64_t quota_us = 0;   ///< CPU time per period, µs (> 0)
  int64_t period_us = 0;  ///< period, µs (> 0)
  /// quota / period, in CPUs (e.g. 1.5).
  double cpus() const;
  /// Threads that the quota keeps busy: ceil(quota / period), at least 1.
  int n_threads() const;
  bool operator==(const CpuQuota&) const = default;
};

/// Parses a cgroup v2 `cpu.max` file: "$MAX $PERIOD" (µs, e.g. "150000 100000" = 1.5 CPUs), where $MAX
/// "max" means no limit. @return the limit, or nullopt for "max" and for text that is not two positive
/// integers (a malformed file limits nothing).
std::optional<CpuQuota> parse_cpu_max(const std::string& text);

/// Parses the cgroup v1 pair `cpu.cfs_quota_us` / `cpu.cfs_period_us` (µs; a quota of -1 means no limit).
/// @return the limit, or nullopt for -1 and for text that is not a positive integer in either file.
std::optional<CpuQuota> parse_cfs_quota(const std::string& quota_text, const std::string& period_text);

/// The process's cgroup v2 path from /proc/self/cgroup (the line "0::PATH"; kernel cgroups(7),
/// "/proc/[pid]/cgroup"), or nullopt when there is none.
std::optional<std::string> cgroup_v2_path(const std::string& proc_self_cgroup);

/// The process's path in the cgroup v1 hierarchy that carries the "cpu" controller, from /proc/self/cgroup
/// (a line "ID:CONTROLLERS:PATH" whose comma-separated CONTROLLERS include "cpu", e.g. "4:cpu,cpuacct:/a"),
/// or nullopt when there is none.
std::optional<std::string> cgroup_v1_cpu_path(const std::string& proc_self_cgroup);

/// A mounted cgroup hierarchy (one line of /proc/self/mountinfo, proc(5)).
struct CgroupMount {
  std::string root;         ///< the hierarchy's directory shown at the mount point, e.g. "/" or "/docker/abc"
  std::string mount_point;  ///< where it is mounted, e.g. "/sys/fs/cgroup"
  bool operator==(const CgroupMount&) const = default;
};

/// The first cgroup2 mount (`v2`) or the first cgroup v1 mount with the "cpu" controller among its super
/// options (`!v2`) in /proc/self/mountinfo's text; nullopt when there is none.
std::optional<CgroupMount> find_cgroup_mount(const std::string& mountinfo, bool v2);

/// The directories of the process's cgroup `cgroup_path` and of its ancestors, innermost first, ending with
/// the mount point. When the mount shows a sub-tree (root "/docker/abc") that does not hold `cgroup_path`
/// (a container's cgroup namespace), only the mount point.
std::vector<std::string> cgroup_dirs(const CgroupMount& mount, const std::string& cgroup_path);

/// Reads a whole small file; nullopt when it is absent or unreadable.
using ReadTextFile = std::function<std::optional<std::string>(const std::string& path)>;

/// The tightest CPU bandwidth limit (fewest CPUs) over the process's cgroup and its ancestors, in cgroup v2
/// (`cpu.max`) and v1 (`cpu.cfs_quota_us`), with files read through `read` from /proc/self/cgroup,
/// /proc/self/mountinfo and the groups' directories. nullopt when no group limits the CPU or the files are
/// missing (not Linux, or no cgroup file system).
std::optional<CpuQuota> cgroup_cpu_quota(const ReadTextFile& read);

/// The thread count that fits: min(n_affinity, quota's ceil(quota / period)), at least 1. `n_affinity` ≤ 0
/// (unknown) counts as 1.
int fit_thread_count(int n_affinity, const std::optional<CpuQuota>& quota);

/// CPUs in this process's affinity mask (sched_getaffinity(2)); std::thread::hardware_concurrency() where
/// that fails; at least 1.
int affinity_cpu_count();

/// The CPUs this process may use and the thread count they give.
struct CpuBudget {
  int n_affinity = 1;             ///< CPUs in the affinity mask
  std::optional<CpuQuota> quota;  ///< tightest cgroup CPU limit, if any
  int n_threads = 1;              ///< fit_thread_count(n_affinity, quota)
  /// e.g. "2 threads (affinity 2 CPUs, cgroup quota 1.50 CPUs)".
  std::string describe() const;
};

/// This process's budget: affinity_cpu_count() and cgroup_cpu_quota() of the real files.
CpuBudget cpu_budget();

/// The default intra-op thread count (--threads 0): cpu_budget().n_threads.
int default_thread_count();

}  // namespace vispco
