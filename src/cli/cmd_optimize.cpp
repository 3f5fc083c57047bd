// `vispco optimize --method NAME`: the front door of the search registry (optimize/search_method.h). Every
// registered method declares its flags on the command and the chosen one runs; `vispco vispco-search` is the
// vispco row alone on a command of its own (register_search_alias()).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/errors.h"
#include "optimize/search_flags.h"
#include "optimize/search_method.h"

namespace vispco::cli {
namespace {

// The search methods on one command: their flags, their instances (bound to the flags) and the chosen name.
struct SearchCommand {
  explicit SearchCommand(CLI::App& cmd) : flags(cmd) {}

  void declare(const optimize::SearchEntry& e) {
    flags.begin(e.name);
    methods.emplace_back(e.name, e.make());
    methods.back().second->add_flags(flags);
  }

  void run() const {
    const std::string& name = optimize::find_search(method).name;  // unknown: one line listing the valid ones
    flags.finish(name);
    for (const auto& [n, m] : methods)
      if (n == name) return m->run(flags, std::cout);
    throw InvalidArgument("optimize: method '" + name + "' is not part of this command");
  }

  optimize::SearchFlags flags;
  std::vector<std::pair<std::string, std::unique_ptr<optimize::SearchMethod>>> methods;
  std::string method;
};

}  // namespace

void register_optimize(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "optimize",
      "Choose a pruning plan under a constraint on a calibration split, then evaluate it on a test split");
  auto c = std::make_shared<SearchCommand>(*cmd);
  std::string methods;
  for (const auto& e : optimize::search_registry()) methods += "\n  " + e.name + ": " + e.description;
  cmd->add_option("--method", c->method, "Search:" + methods)->required();
  for (const auto& e : optimize::search_registry()) c->declare(e);
  c->flags.seal();
  cmd->callback([c] { c->run(); });
}

void register_search_alias(CLI::App& app, const std::string& command, const std::string& method,
                           const std::string& description) {
  CLI::App* cmd = app.add_subcommand(command, description);
  auto c = std::make_shared<SearchCommand>(*cmd);
  c->method = method;
  c->declare(optimize::find_search(method));
  c->flags.seal();
  cmd->callback([c] { c->run(); });
}

}  // namespace vispco::cli
