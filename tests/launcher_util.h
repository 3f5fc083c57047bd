// Helpers of the tests that start several processes through PyTorch's launcher (issue 50):
// `/usr/bin/python3 -m torch.distributed.run` (Debian's python3-torch; the tests skip with a message without
// it), shell commands with stderr captured, a free loopback port.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "test_util.h"

namespace vispco::testing {

inline const std::string kLauncher = "/usr/bin/python3 -m torch.distributed.run";

/// Runs a shell command line, stdout captured, stderr into a file read back.
inline CommandResult run_shell(const std::string& cmd) {
  TempDir tmp;
  const std::string err_file = tmp.str("stderr.txt");
  CommandResult r;
  FILE* pipe = popen((cmd + " 2>" + err_file).c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(err_file);
  return r;
}

/// Why the launcher cannot run here ("" when it can).
inline const std::string& launcher_missing() {
  static const std::string why = [] {
    const CommandResult r = run_shell(kLauncher + " --help >/dev/null");
    return r.exit_code == 0 ? std::string()
                            : "python3-torch's launcher (" + kLauncher + ") is not available: " + r.err;
  }();
  return why;
}

/// A TCP port nobody listens on now (bound to port 0, then released).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

/// `vispco ARGS` under the launcher, `n` processes on loopback (--redirects 1 --tee 1: Debian 12's Python
/// 3.11 fails with the defaults); `env` is put before the launcher.
inline CommandResult launch(int n, const std::string& args, const std::string& env = "") {
  return run_shell(env + " " + kLauncher + " --no_python --nnodes 1 --nproc_per_node " + std::to_string(n) +
                   " --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:" + std::to_string(free_port()) +
                   " --redirects 1 --tee 1 " + cli_path() + " " + args);
}

}  // namespace vispco::testing
