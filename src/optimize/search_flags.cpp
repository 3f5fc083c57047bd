// SearchFlags: one CLI11 option per flag name, shared by the search methods that declare it; see
// search_flags.h.
#include "optimize/search_flags.h"

#include <algorithm>
#include <stdexcept>

#include "core/named_table.h"

namespace vispco::optimize {

SearchFlags::SearchFlags(CLI::App& cmd) : cmd_(&cmd) {}

void SearchFlags::begin(const std::string& method) {
  method_ = method;
  methods_.push_back(method);
}

SearchFlags::Flag* SearchFlags::find(const std::string& names) {
  const auto wanted = split_names(names);
  for (auto& f : flags_) {
    if (f.names == names) return &f;
    for (const auto& n : split_names(f.names))
      if (std::find(wanted.begin(), wanted.end(), n) != wanted.end())
        throw std::logic_error("search flags: '" + names + "' (" + method_ + ") overlaps '" + f.names +
                               "' (" + f.first_method + ")");
  }
  return nullptr;
}

CLI::Option* SearchFlags::add(const std::string& names, const std::string& help, CLI::Option* option) {
  Flag f;
  f.names = names;
  f.option = option;
  f.first_method = method_;
  f.help = help;
  f.declared_by.insert(method_);
  flags_.push_back(std::move(f));
  return option;
}

CLI::Option* SearchFlags::share(Flag& f, const std::string& help,
                                std::function<void(const CLI::Option&)> load) {
  f.declared_by.insert(method_);
  f.loaders.emplace_back(method_, std::move(load));
  if (help != f.help && f.option->get_description().find(help) == std::string::npos) {
    const bool named = help.rfind(method_ + ":", 0) == 0;  // the text already says whose it is
    f.option->description(f.option->get_description() + "; " + (named ? "" : method_ + ": ") + help);
  }
  return f.option;
}

CLI::Option* SearchFlags::option_parsed(const std::string& names,
                                        std::function<void(const std::string&)> parse,
                                        const std::string& help) {
  if (Flag* f = find(names))
    return share(*f, help, [parse](const CLI::Option& o) { parse(o.as<std::string>()); });
  return add(names, help, cmd_->add_option_function<std::string>(names, parse, help));
}

CLI::Option* SearchFlags::flag(const std::string& names, bool* target, const std::string& help) {
  if (Flag* f = find(names))
    return share(*f, help, [target](const CLI::Option& o) { *target = o.count() > 0; });
  return add(names, help, cmd_->add_flag(names, *target, help));
}

void SearchFlags::require(const std::string& names) {
  for (auto& f : flags_)
    if (f.names == names && f.declared_by.count(method_)) {
      f.required_by.insert(method_);
      return;
    }
  throw std::logic_error("search flags: " + method_ + " requires '" + names + "', which it did not declare");
}

void SearchFlags::seal() {
  for (auto& f : flags_) {
    if (f.required_by.size() == methods_.size()) f.option->required();
    if (methods_.size() > 1 && f.declared_by.size() == 1) f.option->group(f.first_method);
  }
}

void SearchFlags::finish(const std::string& method) const {
  for (const auto& f : flags_) {
    if (f.option->count() == 0) {
      if (f.required_by.count(method)) throw CLI::RequiredError(f.option->get_name());
      continue;
    }
    for (const auto& [m, load] : f.loaders)
      if (m == method) load(*f.option);
  }
}

bool SearchFlags::given(const std::string& name) const { return cmd_->count(name) > 0; }

}  // namespace vispco::optimize
