// Writing a whole text file so that readers never see half of it.
#pragma once
#include <string>

namespace vispco {

/// Writes `text` to `path` through `path.tmp`, an fsync and a rename over `path` (atomic on one file system),
/// then fsyncs the parent folder, creating it when missing; a reader, or a machine restarted after a crash,
/// sees the old file or the new one, never a partial one. Bytes are written as given (no newline
/// translation). @throws IoError "cannot write '<path>.tmp'", "error while writing '<path>.tmp' (disk
/// full?)", "cannot fsync '<path>.tmp': <reason>" or "cannot rename '<path>.tmp' to '<path>': <reason>".
void write_text_atomically(const std::string& path, const std::string& text);

/// Appends `text` to `path` (created when missing), as for a log of one JSON record per line. Not atomic: a
/// kill mid-write can leave a partial last line. @throws IoError "cannot
/// append to '<path>'" or "error while appending to '<path>' (disk full?)".
void append_text(const std::string& path, const std::string& text);

}  // namespace vispco
