// The CPUs this process may use: affinity mask and cgroup v1/v2 CPU bandwidth limit (see cpu_quota.h for the
// kernel documents each parser follows).
#include "core/cpu_quota.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace vispco {
namespace {

// The whitespace-separated words of `text`.
std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A positive decimal integer with nothing else (no sign, no suffix), or nullopt.
std::optional<int64_t> positive_int(const std::string& word) {
  int64_t v = 0;
  const char* end = word.data() + word.size();
  const auto r = std::from_chars(word.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end || v <= 0) return std::nullopt;
  return v;
}

// The lines of `text`.
std::vector<std::string> lines(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// mountinfo escapes blanks and backslashes in paths as \ooo (octal).
std::string unescape_octal(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 2])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 3]))) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The fewer CPUs of two optional limits.
std::optional<CpuQuota> tighter(const std::optional<CpuQuota>& a, const std::optional<CpuQuota>& b) {
  if (!a) return b;
  if (!b) return a;
  return b->cpus() < a->cpus() ? b : a;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return s.str();
}

}  // namespace

double CpuQuota::cpus() const { return static_cast<double>(quota_us) / static_cast<double>(period_us); }

int CpuQuota::n_threads() const {
  if (quota_us <= 0 || period_us <= 0) return 1;
  const int64_t n = quota_us / period_us + (quota_us % period_us != 0 ? 1 : 0);
  return static_cast<int>(std::clamp<int64_t>(n, 1, 1 << 20));
}

std::optional<CpuQuota> parse_cpu_max(const std::string& text) {
  const auto w = words(text);
  if (w.size() != 2 || w[0] == "max") return std::nullopt;
  const auto quota = positive_int(w[0]);
  const auto period = positive_int(w[1]);
  if (!quota || !period) return std::nullopt;
  return CpuQuota{*quota, *period};
}

std::optional<CpuQuota> parse_cfs_quota(const std::string& quota_text, const std::string& period_text) {
  const auto q = words(quota_text);
  const auto p = words(period_text);
  if (q.size() != 1 || p.size() != 1) return std::nullopt;
  const auto quota = positive_int(q[0]);  // -1 (no limit) is not positive
  const auto period = positive_int(p[0]);
  if (!quota || !period) return std::nullopt;
  return CpuQuota{*quota, *period};
}

std::optional<std::string> cgroup_v2_path(const std::string& proc_self_cgroup) {
  for (const auto& l : lines(proc_self_cgroup))
    if (l.rfind("0::", 0) == 0 && l.size() > 3) return l.substr(3);
  return std::nullopt;
}

std::optional<std::string> cgroup_v1_cpu_path(const std::string& proc_self_cgroup) {
  for (const auto& l : lines(proc_self_cgroup)) {
    const size_t a = l.find(':');
    const size_t b = a == std::string::npos ? a : l.find(':', a + 1);
    if (b == std::string::npos || b + 1 >= l.size()) continue;
    std::istringstream controllers(l.substr(a + 1, b - a - 1));
    for (std::string c; std::getline(controllers, c, ',');)
      if (c == "cpu") return l.substr(b + 1);
  }
  return std::nullopt;
}

std::optional<CgroupMount> find_cgroup_mount(const std::string& mountinfo, bool v2) {
  // "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS" (proc(5)).
  for (const auto& l : lines(mountinfo)) {
    const auto w = words(l);
    const auto dash = std::find(w.begin(), w.end(), "-");
    if (w.size() < 5 || dash == w.end() || dash - w.begin() < 6 || w.end() - dash < 4) continue;
    const std::string& fstype = dash[1];
    bool match = false;
    if (v2) {
      match = fstype == "cgroup2";
    } else if (fstype == "cgroup") {
      std::istringstream options(dash[3]);
      for (std::string o; std::getline(options, o, ',');) match = match || o == "cpu";
    }
    if (match) return CgroupMount{unescape_octal(w[3]), unescape_octal(w[4])};
  }
  return std::nullopt;
}

std::vector<std::string> cgroup_dirs(const CgroupMount& mount, const std::string& cgroup_path) {
  std::string rel;  // the group's path below the mount's root, "" for the root itself
  if (mount.root == "/") {
    rel = cgroup_path;
  } else if (cgroup_path == mount.root) {
    rel = "";
  } else if (cgroup_path.rfind(mount.root + "/", 0) == 0) {
    rel = cgroup_path.substr(mount.root.size());
  }  // else: the mount shows another sub-tree (cgroup namespace): only the mount point is ours to read
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  std::string base = mount.mount_point;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::vector<std::string> dirs;
  for (;;) {
    dirs.push_back(rel.empty() ? base : base + rel);
    if (rel.empty()) break;
    rel.erase(rel.rfind('/'));
  }
  return dirs;
}

std::optional<CpuQuota> cgroup_cpu_quota(const ReadTextFile& read) {
  const auto cgroup = read("/proc/self/cgroup");
  const auto mountinfo = read("/proc/self/mountinfo");
  if (!cgroup || !mountinfo) return std::nullopt;
  std::optional<CpuQuota> best;
  const auto v2_path = cgroup_v2_path(*cgroup);
  const auto v2_mount = find_cgroup_mount(*mountinfo, true);
  if (v2_path && v2_mount)
    for (const auto& dir : cgroup_dirs(*v2_mount, *v2_path))
      if (const auto text = read(dir + "/cpu.max")) best = tighter(best, parse_cpu_max(*text));
  const auto v1_path = cgroup_v1_cpu_path(*cgroup);
  const auto v1_mount = find_cgroup_mount(*mountinfo, false);
  if (v1_path && v1_mount)
    for (const auto& dir : cgroup_dirs(*v1_mount, *v1_path)) {
      const auto quota = read(dir + "/cpu.cfs_quota_us");
      const auto period = read(dir + "/cpu.cfs_period_us");
      if (quota && period) best = tighter(best, parse_cfs_quota(*quota, *period));
    }
  return best;
}

int fit_thread_count(int n_affinity, const std::optional<CpuQuota>& quota) {
  int n = std::max(1, n_affinity);
  if (quota) n = std::min(n, quota->n_threads());
  return std::max(1, n);
}

int affinity_cpu_count() {
  // cpu_set_t holds 1024 CPUs; sched_getaffinity fails with EINVAL when the kernel's mask is larger.
  for (int n_cpus = 1024; n_cpus <= (1 << 16); n_cpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(n_cpus);
    if (set == nullptr) break;
    const size_t size = CPU_ALLOC_SIZE(n_cpus);
    CPU_ZERO_S(size, set);
    const bool ok = sched_getaffinity(0, size, set) == 0;
    const int count = ok ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (ok) return std::max(1, count);
    if (errno != EINVAL) break;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string CpuBudget::describe() const {
  std::string s = std::to_string(n_threads) + (n_threads == 1 ? " thread" : " threads") + " (affinity " +
                  std::to_string(n_affinity) + (n_affinity == 1 ? " CPU" : " CPUs");
  if (quota) {
    char buf[64];
    std::snprintf(buf, sizeof buf, ", cgroup quota %.2f CPUs", quota->cpus());
    s += buf;
  } else {
    s += ", no cgroup CPU quota";
  }
  return s + ")";
}

CpuBudget cpu_budget() {
  CpuBudget b;
  b.n_affinity = affinity_cpu_count();
  b.quota = cgroup_cpu_quota(read_file);
  b.n_threads = fit_thread_count(b.n_affinity, b.quota);
  return b;
}

int default_thread_count() { return cpu_budget().n_threads; }

}  // namespace vispco
