// --dtype / --device / --threads, shared by every command that runs a model.
#include "cli/commands.h"

namespace vispco::cli {

void add_compute_flags(CLI::App* cmd, std::string* dtype, std::string* device, int* threads,
                       const char* dtype_help, const char* threads_help) {
  cmd->add_option("--dtype", *dtype, dtype_help)->capture_default_str();
  cmd->add_option("--device", *device, "cpu | cuda[:N]")->capture_default_str();
  cmd->add_option("--threads", *threads, threads_help)->capture_default_str();
}

}  // namespace vispco::cli
