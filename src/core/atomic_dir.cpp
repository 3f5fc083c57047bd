// Publishing a folder atomically (see atomic_dir.h).
#include "core/atomic_dir.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc ≥ 2.28)
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "core/errors.h"

namespace vispco {

namespace fs = std::filesystem;

namespace {

fs::path aside_path(const fs::path& dest) { return fs::path(dest.string() + ".old"); }

void step(const PublishOptions& o, std::string_view name) {
  if (o.before_step) o.before_step(name);
}

fs::path parent_of(const fs::path& p) {
  const fs::path parent = fs::absolute(p).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

[[noreturn]] void fail(const std::string& what, const fs::path& p, int err) {
  throw IoError(what + " '" + p.string() + "': " + std::strerror(err));
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw IoError("cannot rename '" + from.string() + "' to '" + to.string() + "': " + ec.message());
}

void remove_all_or_throw(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) throw IoError("cannot remove '" + p.string() + "': " + ec.message());
}

// fsyncs every file and folder under `dir`, deepest first, then `dir` itself.
void fsync_tree(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> folders;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory())
      folders.push_back(it->path());
    else if (it->is_regular_file())
      fsync_path(it->path());
  }
  if (ec) throw IoError("cannot list '" + dir.string() + "': " + ec.message());
  for (auto f = folders.rbegin(); f != folders.rend(); ++f) fsync_path(*f);
  fsync_path(dir);
}

// Removes the old version at `old` one entry at a time (a kill can stop it anywhere), then the folder.
void remove_old(const fs::path& old, const PublishOptions& o) {
  std::error_code ec;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(old, ec), end; !ec && it != end; it.increment(ec))
    entries.push_back(it->path());
  if (ec) throw IoError("cannot list '" + old.string() + "': " + ec.message());
  for (const auto& e : entries) {
    step(o, "remove-old " + e.filename().string());
    remove_all_or_throw(e);
  }
  step(o, "remove-old-folder");
  remove_all_or_throw(old);
}

}  // namespace

fs::path staging_path(const fs::path& dest) { return fs::path(dest.string() + ".tmp"); }

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open for fsync", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // EINVAL: the file system does not support syncing this kind of file (nothing to flush).
  if (rc != 0 && err != EINVAL) fail("cannot fsync", path, err);
}

void recover_directory(const fs::path& dest) {
  const fs::path old = aside_path(dest), staging = staging_path(dest);
  if (!fs::exists(dest)) {
    if (!fs::exists(old)) return;
    rename_or_throw(old, dest);
    fsync_path(parent_of(dest));
  }
  if (fs::exists(old)) remove_all_or_throw(old);
  if (fs::exists(staging)) remove_all_or_throw(staging);
}

fs::path begin_staging(const fs::path& dest) {
  recover_directory(dest);
  const fs::path staging = staging_path(dest);
  remove_all_or_throw(staging);
  std::error_code ec;
  fs::create_directories(staging, ec);
  if (ec) throw IoError("cannot create '" + staging.string() + "': " + ec.message());
  return staging;
}

void publish_directory(const fs::path& dest, const PublishOptions& o) {
  const fs::path staging = staging_path(dest), parent = parent_of(dest);
  if (!fs::is_directory(staging))
    throw IoError("cannot publish '" + dest.string() + "': its staging folder '" + staging.string() +
                  "' does not exist (call begin_staging first)");
  step(o, "sync-staging");
  fsync_tree(staging);
  if (!fs::exists(dest)) {
    step(o, "rename");
    rename_or_throw(staging, dest);
    step(o, "sync-parent");
    fsync_path(parent);
    return;
  }
  bool swapped = false;
  if (o.exchange) {
    step(o, "swap");
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, dest.c_str(), RENAME_EXCHANGE) == 0) {
      swapped = true;
    } else if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
      fail("cannot swap '" + staging.string() + "' with", dest, errno);
    }
  }
  if (swapped) {  // the old version sits at the staging path
    step(o, "sync-parent");
    fsync_path(parent);
    remove_old(staging, o);
  } else {  // rename-aside: `dest` is absent between the two renames; recover_directory() repairs that
    const fs::path old = aside_path(dest);
    step(o, "remove-stale-aside");
    remove_all_or_throw(old);
    step(o, "rename-aside");
    rename_or_throw(dest, old);
    step(o, "rename");
    std::error_code ec;
    fs::rename(staging, dest, ec);
    if (ec) {  // put the old version back before reporting
      std::error_code back;
      fs::rename(old, dest, back);
      throw IoError("cannot rename '" + staging.string() + "' to '" + dest.string() + "': " + ec.message());
    }
    step(o, "sync-parent");
    fsync_path(parent);
    remove_old(old, o);
  }
  step(o, "sync-parent-after-remove");
  fsync_path(parent);
}

}  // namespace vispco
