// OpenMP threads wait passively unless the user says otherwise. LibTorch's libgomp reads OMP_WAIT_POLICY and
// GOMP_SPINCOUNT once, in its ELF constructor, before main(), so a setenv() in main() is too late; and a
// setenv() in the executable's .preinit_array (which runs before any library constructor, System V ABI,
// "Initialization and Termination Functions") is lost too, because libc's own initialiser, which runs after
// it, resets `environ` to the kernel's array. So the .preinit_array function re-executes the program once
// with OMP_WAIT_POLICY=PASSIVE added: the libraries are mapped and relocated then (~30 ms) but no constructor
// has run yet. Measured effect: docs/threads.md.
#include <unistd.h>

#include <cstring>

namespace {

// libgomp's default (no variable) spins ~300,000 rounds (a few ms) at every barrier before it sleeps; with a
// busy neighbour process on the cores that spinning takes the CPU from the one thread the team waits for.
// PASSIVE sleeps at once.
constexpr const char* kPassive = "OMP_WAIT_POLICY=PASSIVE";
// The most environment entries copied (a static array: no heap and no large stack frame this early).
constexpr int kMaxEnv = 8192;
char* g_env[kMaxEnv + 2];

bool starts_with(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// Runs before every library constructor (and before libc's: only syscalls and plain memory here). An
// OMP_WAIT_POLICY or GOMP_SPINCOUNT of the user's is left as it is, which also ends the re-execution: the
// second image finds OMP_WAIT_POLICY set. If execve fails (no /proc), the program goes on with libgomp's
// default.
void passive_omp_wait_unless_set(int, char** argv, char** envp) {
  if (argv == nullptr || envp == nullptr) return;
  int n = 0;
  for (; envp[n] != nullptr; ++n) {
    if (starts_with(envp[n], "OMP_WAIT_POLICY=") || starts_with(envp[n], "GOMP_SPINCOUNT=")) return;
    if (n >= kMaxEnv) return;
    g_env[n] = envp[n];
  }
  g_env[n] = const_cast<char*>(kPassive);
  g_env[n + 1] = nullptr;
  execve("/proc/self/exe", argv, g_env);  // returns only on failure
}

}  // namespace

// Only an executable's .preinit_array runs before the libraries' constructors, so this file belongs to the
// `vispco` executable (src/cli/), not to vispco_lib.
__attribute__((section(".preinit_array"),
               used)) void (*const vispco_preinit_omp_wait)(int, char**,
                                                            char**) = &passive_omp_wait_unless_set;
