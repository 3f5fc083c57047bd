// The errors a server request can earn, as HTTP status + OpenAI's error object
// ({"error": {"message", "type", "param", "code"}}, platform.openai.com/docs/guides/error-codes).
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/errors.h"

namespace vispco::serve {

/// A request the server refuses: its HTTP status (400, 404, 405, 413, 503, …) and OpenAI's error fields.
class ApiError : public Error {
 public:
  /// @param status HTTP status code @param type OpenAI error type ("invalid_request_error", "server_error",
  /// …)
  /// @param param the request field at fault, "" when none
  ApiError(int status, std::string message, std::string type = "invalid_request_error",
           std::string param = "");
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  /// {"error": {"message", "type", "param" (null when empty), "code" (null)}}.
  nlohmann::json to_json() const;

 private:
  int status_;
  std::string type_, param_;
};

/// A 400 invalid_request_error naming the field.
ApiError bad_request(const std::string& message, const std::string& param = "");

}  // namespace vispco::serve
