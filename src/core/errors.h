// Typed exceptions of vispco. Every message names what failed (file, tensor, field), expected vs got, and
// a hint where one helps; the CLI prints `error: <message>` on one line and exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace vispco {

/// Base of every error vispco throws on purpose. The CLI maps it to exit code 2.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// A file is missing, unreadable or unwritable.
class IoError : public Error {
 public:
  using Error::Error;
};

/// A file exists but its content is malformed (safetensors header, JSON, image bytes, jsonl line).
class FormatError : public Error {
 public:
  using Error::Error;
};

/// A configuration is inconsistent: bad field value, config/weight shape mismatch, missing tensor,
/// unknown architecture.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// A user-supplied argument is out of range or unknown (K out of range, unknown method name, bad flag).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

}  // namespace vispco
