// OpenAI-style error objects (see api_error.h).
#include "serve/api_error.h"

#include <nlohmann/json.hpp>

namespace vispco::serve {

ApiError::ApiError(int status, std::string message, std::string type, std::string param)
    : Error(std::move(message)), status_(status), type_(std::move(type)), param_(std::move(param)) {}

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) e["param"] = param_;
  return {{"error", e}};
}

ApiError bad_request(const std::string& message, const std::string& param) {
  return ApiError(400, message, "invalid_request_error", param);
}

}  // namespace vispco::serve
