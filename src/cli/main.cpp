// `vispco` command-line entry point: subcommands registered in cli/commands.h.
#include <CLI/CLI.hpp>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"vispco: visual-token pruning for vision-language models"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
