// `data:` URLs (RFC 2397) as OpenAI's image_url parts carry them: "data:image/png;base64,<base64>".
// Base64 decoding is OpenSSL's (EVP_DecodeBlock), not hand-written.
#pragma once
#include <string>

namespace vispco::serve {

/// The bytes of a base64 `data:` URL. @throws ApiError 400 for a remote http(s) URL (refused: the server
/// fetches nothing), another scheme, a URL without ";base64," or malformed base64 (param "messages").
std::string decode_data_url(const std::string& url);

/// Standard base64 (RFC 4648, with '=' padding) of bytes, by OpenSSL's EVP_EncodeBlock: what a data: URL
/// carries.
std::string encode_base64(const std::string& bytes);

}  // namespace vispco::serve
