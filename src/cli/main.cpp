// `vispco` command-line entry point: registers the subcommands of cli/commands.h and turns every error into
// one line on stderr and a non-zero exit code (2 for vispco errors, 3 for LibTorch errors, 1 otherwise).
#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "core/allocator.h"
#include "core/auto_dtype.h"
#include "core/errors.h"
#include "model/dtype_calibration.h"

namespace {
// First line of a LibTorch message, without its C++ backtrace.
std::string first_line(const std::string& what) { return what.substr(0, what.find('\n')); }

// Where `--dtype auto` keeps its calibration (model/dtype_calibration.h): $XDG_CACHE_HOME/vispco, else
// ~/.cache/vispco; "" (measure every run) when neither variable is set.
std::string dtype_cache_file() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/vispco/dtype-calibration.json";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return std::string(home) + "/.cache/vispco/dtype-calibration.json";
  return "";
}
}  // namespace

int main(int argc, char** argv) {
  vispco::keep_large_buffers_in_heap();  // large tensor buffers stay in the heap (core/allocator.h)
  // --dtype auto on the CPU: by a cached measurement of this machine (issue 51), not by CPU flags alone.
  vispco::set_cpu_auto_dtype([file = dtype_cache_file()] { return vispco::calibrated_cpu_dtype(file); });
  CLI::App app{"vispco: visual-token pruning for vision-language models"};
  app.require_subcommand(1);
  vispco::cli::register_bench(app);
  vispco::cli::register_data(app);
  vispco::cli::register_eval(app);
  vispco::cli::register_finetune(app);
  vispco::cli::register_generate(app);
  vispco::cli::register_hostile_load(app);
  vispco::cli::register_init_random(app);
  vispco::cli::register_loadtest(app);
  vispco::cli::register_optimize(app);
  vispco::cli::register_scorer_table(app);
  vispco::cli::register_serve(app);
  vispco::cli::register_train(app);
  vispco::cli::register_train_gate(app);
  vispco::cli::register_train_hr(app);
  vispco::cli::register_vispco(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ValidationError& e) {  // a value the option refuses: one line, as other bad input
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const CLI::ConversionError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const CLI::ExtrasError& e) {  // an option the command does not have
    std::cerr << "error: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const vispco::Error& e) {
    std::cerr << "error: " << first_line(e.what()) << "\n";
    return 2;
  } catch (const c10::Error& e) {
    std::cerr << "error: " << first_line(e.what_without_backtrace()) << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "error: " << first_line(e.what()) << "\n";
    return 1;
  }
  return 0;
}
