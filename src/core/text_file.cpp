// Atomic whole-file writes (see text_file.h).
#include "core/text_file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/atomic_dir.h"
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
    out.close();
    if (!out) throw IoError("error while writing '" + tmp + "' (disk full?)");
  }
  fsync_path(tmp);  // the bytes are on disk before the name points at them
  fs::rename(tmp, path, ec);
  if (ec) throw IoError("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  const fs::path parent = fs::absolute(path).parent_path();
  fsync_path(parent.empty() ? fs::path(".") : parent);  // … and the rename is
}

void append_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  if (!out) throw IoError("cannot append to '" + path + "'");
  out << text;
  out.close();
  if (!out) throw IoError("error while appending to '" + path + "' (disk full?)");
}

}  // namespace vispco
