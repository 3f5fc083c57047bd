// Replacing a folder of files (a training checkpoint) so that a process killed at any instant leaves a
// complete one at its path: write into a staging folder, fsync, swap in one rename. Follows the write / fsync
// / rename discipline of LevelDB's and SQLite's journals; the swap is Linux renameat2(RENAME_EXCHANGE) (man 2
// rename).
#pragma once
#include <filesystem>
#include <functional>
#include <string_view>

namespace vispco {

/// How publish_directory runs; the defaults are what every caller wants, the fields exist for tests.
struct PublishOptions {
  /// Called with the step's name just before each filesystem step ("sync-staging", "swap", "sync-parent",
  /// "remove-old <file>", …); a test ends the process there to check what a kill leaves. Empty: no calls.
  std::function<void(std::string_view step)> before_step;
  /// Swap with renameat2(RENAME_EXCHANGE) where the file system supports it; false forces the rename-aside
  /// path that file systems without it (NFS, some FUSE) take.
  bool exchange = true;
};

/// The staging folder of `dest`: `dest` + ".tmp" (same parent, so the final rename stays on one file system).
std::filesystem::path staging_path(const std::filesystem::path& dest);

/// Recovers `dest` after a kill during publish_directory, then starts an empty staging folder for the next
/// version and returns it. Write every file of the new version into it, then call publish_directory(dest).
/// @throws IoError naming the path that cannot be removed or created.
std::filesystem::path begin_staging(const std::filesystem::path& dest);

/// Publishes the fully written staging_path(dest) as `dest`, so that at every instant `dest` holds either the
/// complete old version or the complete new one:
///  1. fsyncs every file and folder in the staging folder (the data is on disk before any name points at it);
///  2. `dest` absent: renames the staging folder to `dest`. `dest` present: swaps the two names atomically
///  with
///     renameat2(RENAME_EXCHANGE), so the old version now sits at the staging path;
///  3. fsyncs the parent folder (the rename is on disk);
///  4. removes the old version file by file.
/// Where the file system refuses the exchange (EINVAL, ENOSYS, ENOTSUP), step 2 becomes rename-aside: `dest`
/// → `dest.old`, fsync, staging → `dest`; between the two renames `dest` is briefly absent and
/// recover_directory() puts `dest.old` back. Why exchange first: with it no reader, recovery or not, ever
/// finds `dest` missing. @throws IoError naming the path and the system's reason; `dest` is then unchanged
/// or already the new version.
void publish_directory(const std::filesystem::path& dest, const PublishOptions& options = {});

/// Repairs what a kill inside publish_directory can leave, before `dest` is read: `dest` absent and
/// `dest.old` present (killed between the rename-aside renames) → `dest.old` is renamed back (it is complete:
/// only a published version is ever moved aside); `dest` present → leftover `dest.old` and staging folders (a
/// partial new version or a half-removed old one) are removed. `dest` absent and no `dest.old`: nothing was
/// ever published and a leftover staging folder is left for begin_staging to discard. A no-op when nothing is
/// left over. @throws IoError naming the path that cannot be renamed or removed.
void recover_directory(const std::filesystem::path& dest);

/// fsyncs the file or folder at `path` (flushes its data, or a folder's entries, to the device).
/// @throws IoError "cannot fsync '<path>': <reason>".
void fsync_path(const std::filesystem::path& path);

}  // namespace vispco
