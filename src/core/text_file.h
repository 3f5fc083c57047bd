// Writing a whole text file so that readers never see half of it.
#pragma once
#include <string>

namespace vispco {

/// Writes `text` to `path` through `path.tmp` and a rename over `path` (atomic on one file system), creating
/// the parent folder when missing; a reader sees the old file or the new one, never a partial one. Bytes are
/// written as given (no newline translation). @throws IoError "cannot write '<path>.tmp'", "error while
/// writing
/// '<path>.tmp' (disk full?)" or "cannot rename '<path>.tmp' to '<path>': <reason>".
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace vispco
