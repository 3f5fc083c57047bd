// Atomic whole-file writes (see text_file.h).
#include "core/text_file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/errors.h"

namespace vispco {

void write_text_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const auto parent = fs::path(path).parent_path(); !parent.empty()) fs::create_directories(parent, ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw IoError("cannot write '" + tmp + "'");
    out << text;
    out.flush();
    if (!out) throw IoError("error while writing '" + tmp + "' (disk full?)");
  }
  fs::rename(tmp, path, ec);
  if (ec) throw IoError("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
}

}  // namespace vispco
