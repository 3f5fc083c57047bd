// The default thread count's inputs: cgroup v1/v2 CPU quota files and /proc/self/{cgroup,mountinfo}, parsed
// from hand-written text (expected values worked by hand), and the affinity count against /proc/self/status.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "core/context.h"
#include "core/cpu_quota.h"

namespace vispco {
namespace {

// This machine's files (Linux 5.x, cgroup v1 with the v2 hierarchy beside it at /sys/fs/cgroup/unified).
const char* kHybridCgroup =
    "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/1865\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";
const char* kHybridMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
// A systemd machine with the unified hierarchy only (optional field "shared:4" before the separator).
const char* kV2Mountinfo =
    "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
    "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
// A Docker container on a cgroup v1 host without a cgroup namespace: the mount shows the container's group.
const char* kDockerV1Mountinfo =
    "1230 1220 0:31 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
    "1231 1220 0:32 /docker/abc /sys/fs/cgroup/cpuset ro,nosuid - cgroup cgroup rw,cpuset\n";

// A ReadTextFile over an in-memory file system.
ReadTextFile files(std::map<std::string, std::string> fs) {
  return [fs = std::move(fs)](const std::string& path) -> std::optional<std::string> {
    const auto it = fs.find(path);
    if (it == fs.end()) return std::nullopt;
    return it->second;
  };
}

TEST(CpuQuota, ParsesCgroupV2CpuMax) {
  EXPECT_EQ(parse_cpu_max("150000 100000\n"), (CpuQuota{150000, 100000}));
  EXPECT_DOUBLE_EQ(parse_cpu_max("150000 100000\n")->cpus(), 1.5);
  EXPECT_EQ(parse_cpu_max("150000 100000\n")->n_threads(), 2);  // ceil(1.5)
  EXPECT_EQ(parse_cpu_max("200000 100000")->n_threads(), 2);    // exactly 2
  EXPECT_EQ(parse_cpu_max("50000 100000")->n_threads(), 1);     // half a CPU still runs one thread
  EXPECT_EQ(parse_cpu_max("400000 50000")->n_threads(), 8);
  EXPECT_EQ(parse_cpu_max("max 100000\n"), std::nullopt);  // no limit
}

TEST(CpuQuota, MalformedCpuMaxLimitsNothing) {
  for (const char* bad : {"", "\n", "abc", "100000", "-5 100000", "150000 0", "1.5 100000", "150000 100000 7",
                          "150000us 100000", "0 100000", "99999999999999999999 100000"})
    EXPECT_EQ(parse_cpu_max(bad), std::nullopt) << "'" << bad << "'";
}

TEST(CpuQuota, ParsesCgroupV1CfsPair) {
  EXPECT_EQ(parse_cfs_quota("250000\n", "100000\n"), (CpuQuota{250000, 100000}));
  EXPECT_EQ(parse_cfs_quota("250000\n", "100000\n")->n_threads(), 3);  // ceil(2.5)
  EXPECT_EQ(parse_cfs_quota("-1\n", "100000\n"), std::nullopt);        // no limit
  EXPECT_EQ(parse_cfs_quota("garbage", "100000"), std::nullopt);
  EXPECT_EQ(parse_cfs_quota("100000", "0"), std::nullopt);
  EXPECT_EQ(parse_cfs_quota("100000", ""), std::nullopt);
}

TEST(CpuQuota, FindsTheProcessCgroupPaths) {
  EXPECT_EQ(cgroup_v2_path(kHybridCgroup), "/");
  EXPECT_EQ(cgroup_v1_cpu_path(kHybridCgroup), "/");  // "1:cpu:/", not cpuacct or cpuset
  EXPECT_EQ(cgroup_v2_path("0::/user.slice/user-1000.slice/session-3.scope\n"),
            "/user.slice/user-1000.slice/session-3.scope");
  EXPECT_EQ(cgroup_v1_cpu_path("0::/user.slice\n"), std::nullopt);
  EXPECT_EQ(cgroup_v1_cpu_path("5:cpuacct,cpu:/docker/abc\n3:cpuset:/x\n"), "/docker/abc");
  EXPECT_EQ(cgroup_v1_cpu_path("3:cpuset:/x\n2:cpuacct:/y\n"), std::nullopt);
  EXPECT_EQ(cgroup_v2_path("4:cpu,cpuacct:/a\n"), std::nullopt);
  EXPECT_EQ(cgroup_v2_path(""), std::nullopt);
}

TEST(CpuQuota, FindsCgroupMounts) {
  EXPECT_EQ(find_cgroup_mount(kHybridMountinfo, true), (CgroupMount{"/", "/sys/fs/cgroup/unified"}));
  EXPECT_EQ(find_cgroup_mount(kHybridMountinfo, false), (CgroupMount{"/", "/sys/fs/cgroup/cpu"}));
  EXPECT_EQ(find_cgroup_mount(kV2Mountinfo, true), (CgroupMount{"/", "/sys/fs/cgroup"}));
  EXPECT_EQ(find_cgroup_mount(kV2Mountinfo, false), std::nullopt);
  EXPECT_EQ(find_cgroup_mount(kDockerV1Mountinfo, false),
            (CgroupMount{"/docker/abc", "/sys/fs/cgroup/cpu,cpuacct"}));
  EXPECT_EQ(find_cgroup_mount("40 31 0:1 / /mnt/c\\040g rw - cgroup2 none rw\n", true),
            (CgroupMount{"/", "/mnt/c g"}));  // mountinfo writes a blank as \040
  EXPECT_EQ(find_cgroup_mount("not a mountinfo line\n- cgroup2\n", true), std::nullopt);
}

TEST(CpuQuota, ListsTheGroupAndItsAncestors) {
  const CgroupMount root{"/", "/sys/fs/cgroup"};
  EXPECT_EQ(cgroup_dirs(root, "/a/b"),
            (std::vector<std::string>{"/sys/fs/cgroup/a/b", "/sys/fs/cgroup/a", "/sys/fs/cgroup"}));
  EXPECT_EQ(cgroup_dirs(root, "/"), (std::vector<std::string>{"/sys/fs/cgroup"}));
  const CgroupMount docker{"/docker/abc", "/sys/fs/cgroup/cpu"};
  EXPECT_EQ(cgroup_dirs(docker, "/docker/abc"), (std::vector<std::string>{"/sys/fs/cgroup/cpu"}));
  EXPECT_EQ(cgroup_dirs(docker, "/docker/abc/job"),
            (std::vector<std::string>{"/sys/fs/cgroup/cpu/job", "/sys/fs/cgroup/cpu"}));
  // Another sub-tree than the mount's (a cgroup namespace, or "/docker/abcd" beside "/docker/abc").
  EXPECT_EQ(cgroup_dirs(docker, "/other"), (std::vector<std::string>{"/sys/fs/cgroup/cpu"}));
  EXPECT_EQ(cgroup_dirs(docker, "/docker/abcd"), (std::vector<std::string>{"/sys/fs/cgroup/cpu"}));
}

TEST(CpuQuota, TakesTheTightestLimitOverAncestorsV2) {
  const auto cgroup = "0::/a/b\n";
  // The group itself is unlimited, its parent allows 1.5 CPUs: 1.5 holds.
  auto quota = cgroup_cpu_quota(files({{"/proc/self/cgroup", cgroup},
                                       {"/proc/self/mountinfo", kV2Mountinfo},
                                       {"/sys/fs/cgroup/a/b/cpu.max", "max 100000\n"},
                                       {"/sys/fs/cgroup/a/cpu.max", "150000 100000\n"}}));
  EXPECT_EQ(quota, (CpuQuota{150000, 100000}));
  // The group allows 3 CPUs, its parent 0.5 (50000/100000 vs 300000/100000): the parent's is tighter.
  quota = cgroup_cpu_quota(files({{"/proc/self/cgroup", cgroup},
                                  {"/proc/self/mountinfo", kV2Mountinfo},
                                  {"/sys/fs/cgroup/a/b/cpu.max", "300000 100000\n"},
                                  {"/sys/fs/cgroup/a/cpu.max", "50000 100000\n"}}));
  EXPECT_EQ(quota, (CpuQuota{50000, 100000}));
  // A malformed file in the group is skipped; the parent's limit still counts.
  quota = cgroup_cpu_quota(files({{"/proc/self/cgroup", cgroup},
                                  {"/proc/self/mountinfo", kV2Mountinfo},
                                  {"/sys/fs/cgroup/a/b/cpu.max", "bogus\n"},
                                  {"/sys/fs/cgroup/a/cpu.max", "200000 100000\n"}}));
  EXPECT_EQ(quota, (CpuQuota{200000, 100000}));
  // No cpu.max anywhere (the root group has none): no limit.
  EXPECT_EQ(cgroup_cpu_quota(files({{"/proc/self/cgroup", cgroup}, {"/proc/self/mountinfo", kV2Mountinfo}})),
            std::nullopt);
}

TEST(CpuQuota, ReadsCgroupV1InAContainerAndOnAHybridHost) {
  // Docker on v1: /proc/self/cgroup names /docker/abc, the mount shows that group at its mount point.
  auto quota = cgroup_cpu_quota(files({{"/proc/self/cgroup", "5:cpu,cpuacct:/docker/abc\n0::/\n"},
                                       {"/proc/self/mountinfo", kDockerV1Mountinfo},
                                       {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000\n"},
                                       {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n"}}));
  EXPECT_EQ(quota, (CpuQuota{150000, 100000}));
  // This machine's layout with no limit (-1) in the v1 cpu group and no cpu.max in the v2 root.
  quota = cgroup_cpu_quota(files({{"/proc/self/cgroup", kHybridCgroup},
                                  {"/proc/self/mountinfo", kHybridMountinfo},
                                  {"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"},
                                  {"/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"}}));
  EXPECT_EQ(quota, std::nullopt);
  // Not Linux, or /proc not mounted: no limit known.
  EXPECT_EQ(cgroup_cpu_quota(files({})), std::nullopt);
}

TEST(CpuQuota, FitsTheThreadCountToAffinityAndQuota) {
  EXPECT_EQ(fit_thread_count(8, std::nullopt), 8);
  EXPECT_EQ(fit_thread_count(8, CpuQuota{150000, 100000}), 2);  // ceil(1.5) = 2 < 8
  EXPECT_EQ(fit_thread_count(2, CpuQuota{400000, 100000}), 2);  // affinity 2 < 4 CPUs of quota
  EXPECT_EQ(fit_thread_count(4, CpuQuota{50000, 100000}), 1);
  EXPECT_EQ(fit_thread_count(0, std::nullopt), 1);  // unknown affinity: one thread
  EXPECT_EQ((CpuBudget{8, CpuQuota{150000, 100000}, 2}.describe()),
            "2 threads (affinity 8 CPUs, cgroup quota 1.50 CPUs)");
  EXPECT_EQ((CpuBudget{1, std::nullopt, 1}.describe()), "1 thread (affinity 1 CPU, no cgroup CPU quota)");
}

// The CPUs of /proc/self/status's "Cpus_allowed_list: 0-3,8" (0 when absent).
int cpus_allowed_in_status() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Cpus_allowed_list:", 0) != 0) continue;
    std::istringstream ranges(line.substr(line.find(':') + 1));
    int n = 0;
    for (std::string r; std::getline(ranges, r, ',');) {
      const size_t dash = r.find('-');
      n += dash == std::string::npos ? 1 : std::stoi(r.substr(dash + 1)) - std::stoi(r.substr(0, dash)) + 1;
    }
    return n;
  }
  return 0;
}

TEST(CpuQuota, AffinityCountAgreesWithProcStatusAndBoundsTheDefault) {
  const int from_status = cpus_allowed_in_status();
  if (from_status == 0) GTEST_SKIP() << "no /proc/self/status Cpus_allowed_list here";
  EXPECT_EQ(affinity_cpu_count(), from_status);
  const CpuBudget b = cpu_budget();
  std::printf("this process: %s\n", b.describe().c_str());
  EXPECT_EQ(b.n_threads, default_thread_count());
  EXPECT_GE(b.n_threads, 1);
  EXPECT_LE(b.n_threads, from_status);
}

// --threads 0 gives LibTorch the fitted count, not the machine's core count.
TEST(CpuQuota, ZeroThreadsAppliesTheDefault) {
  const int saved = at::get_num_threads();
  RunContext ctx;
  ctx.n_threads = 0;
  apply_threads(ctx);
  EXPECT_EQ(at::get_num_threads(), default_thread_count());
  at::set_num_threads(saved);
}

}  // namespace
}  // namespace vispco
