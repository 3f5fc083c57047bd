// Whole-number CLI options bound to unsigned members (cli/commands.h).
#include <CLI/CLI.hpp>
#include <string>

#include "cli/commands.h"

namespace vispco::cli {

CLI::Option* add_count_option(CLI::App* cmd, const std::string& name, size_t* target,
                              const std::string& help) {
  const CLI::Validator whole_number(
      [](std::string& text) -> std::string {
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
          return "must be a whole number ≥ 0, got '" + text + "'";
        return "";
      },
      "COUNT");
  return cmd->add_option(name, *target, help)->check(whole_number)->capture_default_str();
}

}  // namespace vispco::cli
