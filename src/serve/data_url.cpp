// data: URL decoding (see data_url.h).
#include "serve/data_url.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

#include "serve/api_error.h"

namespace vispco::serve {

std::string decode_data_url(const std::string& url) {
  const auto starts = [&](const char* p) { return url.rfind(p, 0) == 0; };
  if (starts("http://") || starts("https://"))
    throw bad_request(
        "image_url: remote URLs are not fetched by this server; send the image inline as "
        "data:image/<type>;base64,<bytes>",
        "messages");
  if (!starts("data:"))
    throw bad_request("image_url: expected a data: URL (data:image/png;base64,...)", "messages");
  const auto comma = url.find(',');
  if (comma == std::string::npos || url.substr(0, comma).find(";base64") == std::string::npos)
    throw bad_request("image_url: only base64 data: URLs are supported (data:image/png;base64,...)",
                      "messages");
  std::string b64;
  b64.reserve(url.size() - comma);
  for (size_t i = comma + 1; i < url.size(); ++i)
    if (!std::isspace(static_cast<unsigned char>(url[i]))) b64 += url[i];
  if (b64.empty() || b64.size() % 4 != 0)
    throw bad_request(
        "image_url: malformed base64 (length " + std::to_string(b64.size()) + " is not a multiple of 4)",
        "messages");
  std::string out(b64.size() / 4 * 3, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(b64.data()), static_cast<int>(b64.size()));
  if (n < 0) throw bad_request("image_url: malformed base64", "messages");
  // EVP_DecodeBlock keeps the bytes '=' padding stands for; drop them.
  const size_t pad = (b64.back() == '=') + (b64.size() > 1 && b64[b64.size() - 2] == '=');
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string encode_base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace vispco::serve
