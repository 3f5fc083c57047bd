// Declared image sizes from PNG / JPEG / WebP / BMP headers (see image_header.h for the sources).
#include "io/image_header.h"

#include "core/errors.h"

namespace vispco::io {
namespace {

uint32_t be16(const std::string& b, size_t i) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(b[i])) << 8) | static_cast<uint8_t>(b[i + 1]);
}
uint32_t be32(const std::string& b, size_t i) { return (be16(b, i) << 16) | be16(b, i + 2); }
uint32_t le16(const std::string& b, size_t i) {
  return static_cast<uint8_t>(b[i]) | (static_cast<uint32_t>(static_cast<uint8_t>(b[i + 1])) << 8);
}
uint32_t le24(const std::string& b, size_t i) {
  return le16(b, i) | (static_cast<uint32_t>(static_cast<uint8_t>(b[i + 2])) << 16);
}
uint32_t le32(const std::string& b, size_t i) { return le16(b, i) | (le16(b, i + 2) << 16); }

[[noreturn]] void truncated(const char* format) {
  throw FormatError(std::string("image: the ") + format + " header is truncated or malformed");
}

ImageHeader png(const std::string& b) {
  // Signature (8) + IHDR chunk: length (4), "IHDR" (4), width (4, BE), height (4, BE).
  if (b.size() < 24 || b.compare(12, 4, "IHDR") != 0) truncated("PNG");
  return {"png", be32(b, 16), be32(b, 20)};
}

ImageHeader jpeg(const std::string& b) {
  size_t i = 2;  // after SOI
  while (i + 4 <= b.size()) {
    if (static_cast<uint8_t>(b[i]) != 0xFF) truncated("JPEG");
    const uint8_t marker = static_cast<uint8_t>(b[i + 1]);
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // TEM, RSTn: no length
      i += 2;
      continue;
    }
    if (marker == 0xD9 || marker == 0xDA) break;  // EOI or SOS before any frame header
    const size_t len = be16(b, i + 2);
    if (len < 2) truncated("JPEG");
    // SOF0–SOF15 except DHT (C4), JPG (C8), DAC (CC): P (1), Y = height (2), X = width (2).
    if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
      if (i + 9 > b.size()) truncated("JPEG");
      return {"jpeg", be16(b, i + 7), be16(b, i + 5)};
    }
    i += 2 + len;
  }
  truncated("JPEG");
}

ImageHeader webp(const std::string& b) {
  if (b.size() < 30) truncated("WebP");
  const std::string chunk = b.substr(12, 4);
  if (chunk == "VP8 ") {  // lossy: frame tag (3), start code 9D 01 2A (3), then 14-bit width and height
    if (static_cast<uint8_t>(b[23]) != 0x9D || static_cast<uint8_t>(b[24]) != 0x01 ||
        static_cast<uint8_t>(b[25]) != 0x2A)
      truncated("WebP");
    return {"webp", le16(b, 26) & 0x3FFF, le16(b, 28) & 0x3FFF};
  }
  if (chunk == "VP8L") {  // lossless: signature 0x2F, then 14 bits width − 1, 14 bits height − 1
    if (static_cast<uint8_t>(b[20]) != 0x2F) truncated("WebP");
    const uint32_t v = le32(b, 21);
    return {"webp", (v & 0x3FFF) + 1, ((v >> 14) & 0x3FFF) + 1};
  }
  if (chunk == "VP8X") return {"webp", le24(b, 24) + 1, le24(b, 27) + 1};  // canvas width − 1, height − 1
  truncated("WebP");
}

ImageHeader bmp(const std::string& b) {
  if (b.size() < 26) truncated("BMP");
  const uint32_t header_size = le32(b, 14);
  if (header_size == 12) return {"bmp", le16(b, 18), le16(b, 20)};  // BITMAPCOREHEADER: 16-bit sides
  const auto w = static_cast<int32_t>(le32(b, 18)), h = static_cast<int32_t>(le32(b, 22));
  return {"bmp", w < 0 ? -static_cast<int64_t>(w) : w,
          h < 0 ? -static_cast<int64_t>(h) : h};  // h < 0: top-down
}

}  // namespace

ImageHeader read_image_header(const std::string& b) {
  ImageHeader h;
  if (b.size() >= 8 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) {
    h = png(b);
  } else if (b.size() >= 3 && static_cast<uint8_t>(b[0]) == 0xFF && static_cast<uint8_t>(b[1]) == 0xD8 &&
             static_cast<uint8_t>(b[2]) == 0xFF) {
    h = jpeg(b);
  } else if (b.size() >= 12 && b.compare(0, 4, "RIFF") == 0 && b.compare(8, 4, "WEBP") == 0) {
    h = webp(b);
  } else if (b.size() >= 2 && b.compare(0, 2, "BM") == 0) {
    h = bmp(b);
  } else {
    throw FormatError("image: not a PNG, JPEG, WebP or BMP file (" + std::to_string(b.size()) + " bytes)");
  }
  if (h.width <= 0 || h.height <= 0)
    throw FormatError("image: the " + h.format + " header declares a " + std::to_string(h.width) + "x" +
                      std::to_string(h.height) + " image");
  return h;
}

}  // namespace vispco::io
