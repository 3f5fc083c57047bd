// The size an encoded image declares, read from its header without decoding a pixel, so a server can refuse
// a decompression bomb (a 50 KB PNG declaring 65536 × 256) before OpenCV allocates it.
// Sources: PNG IHDR (ISO/IEC 15948 §11.2.2), JPEG SOFn marker segments (ITU-T T.81 §B.1.1.3, §B.2.2),
// WebP's RIFF "VP8 " / "VP8L" / "VP8X" chunks (RFC 9649 §2.5–2.7), BMP's BITMAPINFOHEADER.
#pragma once
#include <cstdint>
#include <string>

namespace vispco::io {

/// What an encoded image's header declares.
struct ImageHeader {
  std::string format;  ///< "png", "jpeg", "webp" or "bmp"
  int64_t width = 0;   ///< pixels, as stored (before any EXIF rotation)
  int64_t height = 0;  ///< pixels
};

/// Reads the declared width and height of a PNG, JPEG, WebP or BMP image from its first bytes.
/// @throws FormatError when the bytes are none of these formats, the header is truncated, or a side is 0.
ImageHeader read_image_header(const std::string& bytes);

}  // namespace vispco::io
