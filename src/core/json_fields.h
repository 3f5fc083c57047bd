// One field list per config struct drives both directions of its JSON form: reading (unknown keys and wrong
// types rejected with the key's name) and writing. Replaces the per-struct `else if (key == …)` chains.
// Format: nlohmann-json objects; a value is converted with `get<T>()` / `json(T)` unless the field names
// its own conversion.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/named_table.h"

namespace vispco {

/// The JSON keys of a config struct `S` (default-constructible, copyable), each bound to one member.
/// Build it once (a function-local static) and use it in the struct's from_json and to_json:
///
///     static const auto fields = JsonFields<Opts>("optimize options")
///         .field("keeps", &Opts::keeps).omitted_at_default("confidence", &Opts::confidence);
///     Opts o; fields.read(j, o);   nlohmann::json j = fields.write(o);
template <class S>
class JsonFields {
 public:
  /// @param owner how the struct is named in errors, e.g. "recipe" → "recipe: unknown key 'x' (valid: …)".
  explicit JsonFields(std::string owner) : owner_(std::move(owner)) {}

  /// A member read with `get<T>()` and always written.
  template <class T>
  JsonFields field(std::string key, T S::*member) const {
    return with(
        std::move(key), [member](const nlohmann::json& v, S& s) { s.*member = v.template get<T>(); },
        [member](const S& s, nlohmann::json& j, const std::string& k) { j[k] = s.*member; });
  }

  /// A member read with `get<T>()` and written only when it differs from a default-constructed S's value
  /// (keeps the written files to the settings a user changed).
  template <class T>
  JsonFields omitted_at_default(std::string key, T S::*member) const {
    return with(
        std::move(key), [member](const nlohmann::json& v, S& s) { s.*member = v.template get<T>(); },
        [member](const S& s, nlohmann::json& j, const std::string& k) {
          if (!(s.*member == S{}.*member)) j[k] = s.*member;
        });
  }

  /// A member with its own conversions: `from(json) → T` (may throw InvalidArgument with its own message,
  /// passed through) and `to(const T&) → json`.
  template <class T, class From, class To>
  JsonFields converted(std::string key, T S::*member, From from, To to) const {
    return with(
        std::move(key), [member, from](const nlohmann::json& v, S& s) { s.*member = from(v); },
        [member, to](const S& s, nlohmann::json& j, const std::string& k) { j[k] = to(s.*member); });
  }

  /// A key accepted and ignored on reading, never written (e.g. a free-text "comment").
  JsonFields ignored(std::string key) const {
    return with(std::move(key), [](const nlohmann::json&, S&) {}, {});
  }

  /// Overwrites the members of `s` whose keys `j` holds; absent keys keep `s`'s values.
  /// @param prefix prepended to key names in errors, e.g. "decoder." for a nested stage.
  /// @throws InvalidArgument when `j` is not an object, "<owner>: unknown key '<prefix><key>' (valid: …)",
  ///         or "<owner>: '<prefix><key>' has the wrong type (got <value>)".
  void read(const nlohmann::json& j, S& s, const std::string& prefix = "") const {
    if (!j.is_object())
      throw InvalidArgument(owner_ + ": " + (prefix.empty() ? "settings" : "'" + prefix + "'") +
                            " must be a JSON object (got " + shown(j) + ")");
    for (const auto& [key, value] : j.items()) {
      const Field* f = find(key);
      if (f == nullptr)
        throw InvalidArgument(owner_ + ": unknown key '" + prefix + key + "' (valid: " + join_names(keys()) +
                              ")");
      try {
        f->read(value, s);
      } catch (const nlohmann::json::exception&) {
        throw InvalidArgument(owner_ + ": '" + prefix + key + "' has the wrong type (got " + shown(value) +
                              ")");
      }
    }
  }

  /// A default-constructed S with `j` read into it (see read()).
  S read(const nlohmann::json& j, const std::string& prefix = "") const {
    S s;
    read(j, s, prefix);
    return s;
  }

  /// The JSON object of `s`: every field's key in list order (nlohmann sorts them on output).
  nlohmann::json write(const S& s) const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& f : fields_)
      if (f.write) f.write(s, j, f.key);
    return j;
  }

  /// The keys in list order (the "valid:" list of errors).
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& f : fields_) out.push_back(f.key);
    return out;
  }

 private:
  // A value as errors show it: its JSON text, cut at 80 characters.
  static std::string shown(const nlohmann::json& v) {
    auto text = v.dump();
    return text.size() <= 80 ? text : text.substr(0, 77) + "...";
  }

  struct Field {
    std::string key;
    std::function<void(const nlohmann::json&, S&)> read;
    std::function<void(const S&, nlohmann::json&, const std::string&)> write;  // empty: never written
  };

  const Field* find(const std::string& key) const {
    for (const auto& f : fields_)
      if (f.key == key) return &f;
    return nullptr;
  }

  JsonFields with(std::string key, std::function<void(const nlohmann::json&, S&)> read,
                  std::function<void(const S&, nlohmann::json&, const std::string&)> write) const {
    if (find(key) != nullptr) throw std::logic_error(owner_ + ": JSON key '" + key + "' listed twice");
    JsonFields out = *this;
    out.fields_.push_back({std::move(key), std::move(read), std::move(write)});
    return out;
  }

  std::string owner_;
  std::vector<Field> fields_;
};

}  // namespace vispco
