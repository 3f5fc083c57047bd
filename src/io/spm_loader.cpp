// Loads the SentencePiece shim library (spm_backend.h) once per process with dlopen(RTLD_LOCAL |
// RTLD_DEEPBIND): its own bundled protobuf-lite then binds inside it and stays out of the global scope.
#include <dlfcn.h>

#include <filesystem>
#include <system_error>

#include "core/errors.h"
#include "io/spm_backend.h"

namespace vispco::io::detail {
namespace {

/// Candidate paths of the shim, most specific first.
std::vector<std::string> shim_candidates() {
  std::vector<std::string> paths;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) paths.push_back((exe.parent_path() / kSpmShimFile).string());
#ifdef VISPCO_SPM_SHIM_PATH
  paths.emplace_back(VISPCO_SPM_SHIM_PATH);
#endif
  paths.emplace_back(kSpmShimFile);  // LD_LIBRARY_PATH, ld.so.cache, system folders
  return paths;
}

SpmShim load_shim() {
  std::string tried;
  for (const std::string& path : shim_candidates()) {
    const bool is_path = path.find('/') != std::string::npos;
    std::error_code ec;
    if (is_path && !std::filesystem::exists(path, ec)) {
      tried += "\n  " + path + ": not found";
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!handle) {
      const char* err = dlerror();
      tried += "\n  " + path + ": " + (err ? err : "dlopen failed");
      continue;
    }
    // Kept loaded for the life of the process: processors created from it may outlive any scope here.
    SpmShim shim;
    shim.new_processor = reinterpret_cast<SpmNewProcessorFn>(dlsym(handle, kSpmNewProcessorSymbol));
    shim.train = reinterpret_cast<SpmTrainFn>(dlsym(handle, kSpmTrainSymbol));
    if (shim.new_processor && shim.train) return shim;
    tried += "\n  " + path + ": missing entry points (a stale or foreign " + kSpmShimFile + "?)";
    dlclose(handle);
  }
  throw Error(std::string("cannot load the SentencePiece shim ") + kSpmShimFile + "; tried:" + tried +
              "\n  hint: build the vispco_spm target; the library must sit next to the executable");
}

}  // namespace

const SpmShim& spm_shim() {
  static const SpmShim shim = load_shim();  // a failed load throws and is retried on the next call
  return shim;
}

}  // namespace vispco::io::detail
