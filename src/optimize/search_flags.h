// The command-line flags of search methods that share one command (`vispco optimize --method NAME`, or one
// method alone as in `vispco vispco-search`): each method declares the flags it reads, bound to its own
// settings; a flag several methods declare is one CLI11 option whose value, when given, reaches each of them.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace vispco::optimize {

/// Help text of every command's --model (model/model_source.h resolves it).
inline constexpr const char* kModelFlagHelp =
    "Model: a Hugging Face LLaVA folder, or a llama.cpp GGUF pair (TEXT.gguf,MMPROJ.gguf; a folder holding "
    "one of each; or the text .gguf with its mmproj beside it)";
/// Help text of --dtype for the commands that resolve it with choose_dtype() (core/context.h).
inline constexpr const char* kDtypeFlagHelp =
    "Compute dtype: auto | fp32 | bf16 (auto: bf16 on CUDA; on the CPU the faster of fp32 and bf16 as timed "
    "once per CPU model and thread count, cached in ~/.cache/vispco)";

/// The flags of the search methods on one command. Declarations belong to the method named by the last
/// begin(). A flag declared again (same names) by another method is the same option: CLI11 writes the first
/// declarer's target while parsing, finish() loads the others' from the parsed text, so every method keeps
/// its own default when the flag is absent. Its help is the first text, then "; METHOD: text" for each
/// different one. After seal(), a flag only one method declares (on a command of several) is listed under
/// that method's name in --help, and a flag every method requires is required by CLI11 itself.
class SearchFlags {
 public:
  /// @param cmd the command the flags go on; it must outlive this object.
  explicit SearchFlags(CLI::App& cmd);

  /// Declarations from here on are `method`'s.
  void begin(const std::string& method);

  /// Declares option `names` (CLI11 form: "--k-min", "--no-plots,--no-plot") bound to `*target`.
  /// @return the option, for CLI11 modifiers (capture_default_str(), check()); shared by every declarer.
  /// @throws std::logic_error when `names` overlaps another flag's names without being equal to them.
  template <class T>
  CLI::Option* option(const std::string& names, T* target, const std::string& help) {
    if (Flag* f = find(names)) return share(*f, help, [target](const CLI::Option& o) { o.results(*target); });
    return add(names, help, cmd_->add_option(names, *target, help));
  }
  /// Declares option `names` whose text goes to `parse` (which may throw InvalidArgument with its own
  /// message).
  CLI::Option* option_parsed(const std::string& names, std::function<void(const std::string&)> parse,
                             const std::string& help);
  /// Declares flag `names` (no value) setting `*target` to true when given.
  CLI::Option* flag(const std::string& names, bool* target, const std::string& help);
  /// The current method needs flag `names` (one it declared): finish() throws CLI::RequiredError without it.
  void require(const std::string& names);
  /// Ends the declarations (see the class comment). Call once, after the last method's.
  void seal();

  /// After parsing, for the method that runs: loads the values given to the flags it shares into its targets,
  /// then checks its required flags. @throws CLI::RequiredError "NAME is required" (as CLI11's own check),
  /// CLI::ConversionError (a value its target's type rejects), what a parse function throws.
  void finish(const std::string& method) const;
  /// Whether flag `name` (any of its names) was given on the command line.
  bool given(const std::string& name) const;

 private:
  struct Flag {
    std::string names;
    CLI::Option* option = nullptr;
    std::string first_method, help;
    std::set<std::string> declared_by, required_by;
    /// The later declarers' loaders, by method: the given text into their target.
    std::vector<std::pair<std::string, std::function<void(const CLI::Option&)>>> loaders;
  };

  Flag* find(const std::string& names);
  CLI::Option* add(const std::string& names, const std::string& help, CLI::Option* option);
  CLI::Option* share(Flag& f, const std::string& help, std::function<void(const CLI::Option&)> load);

  CLI::App* cmd_;
  std::string method_;
  std::vector<std::string> methods_;
  std::vector<Flag> flags_;  // in declaration order
};

}  // namespace vispco::optimize
