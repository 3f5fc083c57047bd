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

/// One JSON key of a config struct `S`, bound to a member. `{"lr", &Opts::lr}` reads with `get<T>()` and is
/// always written; see omitted_at_default(), converted() and ignored() for the other kinds.
template <class S>
struct JsonField {
  using Reader = std::function<void(const nlohmann::json&, S&)>;
  using Writer = std::function<void(const S&, nlohmann::json&, const std::string&)>;  // empty: never written

  template <class T>
  JsonField(std::string k, T S::*member)
      : key(std::move(k)),
        read([member](const nlohmann::json& v, S& s) { s.*member = v.template get<T>(); }),
        write([member](const S& s, nlohmann::json& j, const std::string& name) { j[name] = s.*member; }) {}
  JsonField(std::string k, Reader r, Writer w) : key(std::move(k)), read(std::move(r)), write(std::move(w)) {}

  std::string key;
  Reader read;
  Writer write;
};

/// A member read with `get<T>()` and written only when it differs from a default-constructed S's value
/// (keeps written files to the settings a user changed).
template <class S, class T>
JsonField<S> omitted_at_default(std::string key, T S::*member) {
  return {std::move(key), [member](const nlohmann::json& v, S& s) { s.*member = v.template get<T>(); },
          [member](const S& s, nlohmann::json& j, const std::string& k) {
            if (!(s.*member == S{}.*member)) j[k] = s.*member;
          }};
}

/// A member with its own conversions: `from(json) → T` (may throw InvalidArgument with its own message,
/// passed through) and `to(const T&) → json`.
template <class S, class T, class From, class To>
JsonField<S> converted(std::string key, T S::*member, From from, To to) {
  return {std::move(key), [member, from](const nlohmann::json& v, S& s) { s.*member = from(v); },
          [member, to](const S& s, nlohmann::json& j, const std::string& k) { j[k] = to(s.*member); }};
}

/// A member of a struct type with its own JSON form: read by `from(json)` (which validates), written by
/// `to_json(const T&)` (found by argument-dependent lookup).
template <class S, class T, class From>
JsonField<S> nested(std::string key, T S::*member, From from) {
  return converted(std::move(key), member, from, [](const T& v) { return to_json(v); });
}

/// A member written as a name: read by `parse(std::string)` (which throws InvalidArgument for an unknown
/// name), written by `name(T)`; for enums with a name table.
template <class S, class T, class Parse, class Name>
JsonField<S> named(std::string key, T S::*member, Parse parse, Name name) {
  return converted(
      std::move(key), member, [parse](const nlohmann::json& v) { return parse(v.get<std::string>()); }, name);
}

/// A key accepted and ignored on reading, never written (e.g. a free-text "comment").
template <class S>
JsonField<S> ignored(std::string key) {
  return {std::move(key), [](const nlohmann::json&, S&) {}, {}};
}

/// The JSON keys of a config struct `S` (default-constructible, copyable). Build it once (a function-local
/// static) and use it in the struct's from_json and to_json:
///
///     static const JsonFields<Opts> fields("optimize options", {{"keeps", &Opts::keeps},
///                                                               {"lr", &Opts::lr}});
///     Opts o = fields.read_valid(j);
///     nlohmann::json j = fields.write(o);
template <class S>
class JsonFields {
 public:
  /// @param owner how the struct is named in errors, e.g. "recipe" → "recipe: unknown key 'x' (valid: …)".
  /// @throws std::logic_error when a key is listed twice (a programming error).
  JsonFields(std::string owner, std::vector<JsonField<S>> fields)
      : owner_(std::move(owner)), fields_(std::move(fields)) {
    for (size_t i = 0; i < fields_.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (fields_[i].key == fields_[j].key)
          throw std::logic_error(owner_ + ": JSON key '" + fields_[i].key + "' listed twice");
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
      const JsonField<S>* f = find(key);
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

  /// As read(), for files written by other programs (Hugging Face config.json): keys this table does not
  /// list are ignored, a null value keeps the default, and errors are ConfigError.
  /// @param where the object's name in errors, e.g. "text_config" → "text_config.hidden_size has the wrong
  ///        type (got "x")". @throws ConfigError when `j` is not an object or a listed key has the wrong
  ///        type.
  void read_known(const nlohmann::json& j, S& s, const std::string& where) const {
    if (!j.is_object()) throw ConfigError(where + " must be a JSON object (got " + shown(j) + ")");
    for (const auto& f : fields_) {
      auto it = j.find(f.key);
      if (it == j.end() || it->is_null()) continue;
      try {
        f.read(*it, s);
      } catch (const nlohmann::json::exception&) {
        throw ConfigError(where + "." + f.key + " has the wrong type (got " + shown(*it) + ")");
      }
    }
  }

  /// A default-constructed S with `j` read into it (see read()).
  S read(const nlohmann::json& j, const std::string& prefix = "") const {
    S s;
    read(j, s, prefix);
    return s;
  }

  /// read() followed by S::validate() (which throws what it throws).
  S read_valid(const nlohmann::json& j) const {
    S s = read(j);
    s.validate();
    return s;
  }

  /// The JSON object of `s` (nlohmann sorts the keys on output).
  nlohmann::json write(const S& s) const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& f : fields_)
      if (f.write) f.write(s, j, f.key);
    return j;
  }

  /// These fields as fields of `D`, a struct with S as a base (a config assembled from sections): each reads
  /// and writes D's S part.
  template <class D>
  std::vector<JsonField<D>> fields_of() const {
    std::vector<JsonField<D>> out;
    for (const auto& f : fields_) {
      typename JsonField<D>::Writer w;
      if (f.write)
        w = [write = f.write](const D& d, nlohmann::json& j, const std::string& k) { write(d, j, k); };
      out.emplace_back(
          f.key, [read = f.read](const nlohmann::json& v, D& d) { read(v, d); }, std::move(w));
    }
    return out;
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

  const JsonField<S>* find(const std::string& key) const {
    for (const auto& f : fields_)
      if (f.key == key) return &f;
    return nullptr;
  }

  std::string owner_;
  std::vector<JsonField<S>> fields_;
};

}  // namespace vispco
