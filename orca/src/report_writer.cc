// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/report_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

namespace headroom::orca {
namespace {

bool valid_name(std::string_view name) {
  return !name.empty() && name.front() != '.' && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos && name.size() < 200;
}

// Checking that the directory path still names the directory we hold costs a
// path walk (statx, about as much as stat); a removed directory is noticed at
// once anyway (creating a file in it fails with ENOENT), so only a directory
// renamed away or a mount over it waits for this.
constexpr unsigned kDirectoryCheckEvery = 16;

// A directory as statx sees it, with the mount it is seen through when the
// kernel says (STATX_MNT_ID, Linux 5.8): a bind mount of the directory over
// itself keeps its device and inode, only the mount differs.
struct Seen {
  dev_t dev = 0;
  ino_t ino = 0;
  std::uint64_t mnt_id = 0;
  bool has_mnt_id = false;
  bool is_dir = false;
};

// statx of `path` (with AT_EMPTY_PATH and "": of `dirfd` itself).
bool look(int dirfd, const char* path, int flags, Seen& out) {
  struct statx sx{};
  if (::statx(dirfd, path, flags, STATX_TYPE | STATX_INO | STATX_MNT_ID, &sx) != 0) return false;
  out.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  out.ino = sx.stx_ino;
  out.is_dir = (sx.stx_mask & STATX_TYPE) != 0 && S_ISDIR(sx.stx_mode);
  out.has_mnt_id = (sx.stx_mask & STATX_MNT_ID) != 0;
  out.mnt_id = sx.stx_mnt_id;
  return true;
}

bool read_only_mount(int fd) {
  struct statvfs sv{};
  return ::fstatvfs(fd, &sv) == 0 && (sv.f_flag & ST_RDONLY) != 0;
}

// Returns 0 or the errno of the failed write.
int write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

}  // namespace

namespace {

// The file a temporary name ".<file>.<pid>.tmp" or ".<file>.<pid>.1.tmp" is
// for; empty when `entry` is not such a name.
std::string_view temporary_target(std::string_view entry) {
  if (entry.size() < 8 || entry.front() != '.' || !entry.ends_with(".tmp")) return {};
  const std::string_view body = entry.substr(1, entry.size() - 5);  // "<file>.<pid>[.1]"
  for (bool second : {true, false}) {
    std::string_view t = body;
    if (second) {
      if (!t.ends_with(".1")) continue;
      t.remove_suffix(2);
    }
    const auto dot = t.rfind('.');
    if (dot == std::string_view::npos || dot == 0) continue;
    const std::string_view pid = t.substr(dot + 1);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string_view::npos) continue;
    return t.substr(0, dot);
  }
  return {};
}

}  // namespace

bool is_temporary_name(std::string_view entry, std::string_view name) {
  return !name.empty() && temporary_target(entry) == name;
}

bool is_temporary_name_with_suffix(std::string_view entry, std::string_view suffix) {
  const std::string_view target = temporary_target(entry);
  return !suffix.empty() && target.size() > suffix.size() && target.ends_with(suffix);
}

ReportFileWriter::ReportFileWriter(std::string dir, int dirfd, WriterOptions options)
    : dir_(std::move(dir)), dirfd_(dirfd), options_(options), tmp_suffix_("." + std::to_string(::getpid()) + ".tmp") {
  if (Seen held; look(dirfd_, "", AT_EMPTY_PATH, held)) {
    dev_ = held.dev;
    ino_ = held.ino;
    mnt_id_ = held.mnt_id;
    has_mnt_id_ = held.has_mnt_id;
  }
}

Result<ReportFileWriter> ReportFileWriter::open(std::string dir, WriterOptions options) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return system_error(errno, "open directory " + dir);
  return ReportFileWriter(std::move(dir), fd, options);
}

ReportFileWriter::ReportFileWriter(ReportFileWriter&& o) noexcept
    : dir_(std::move(o.dir_)), dirfd_(o.dirfd_), dev_(o.dev_), ino_(o.ino_), mnt_id_(o.mnt_id_),
      has_mnt_id_(o.has_mnt_id_), options_(o.options_),
      buffer_(std::move(o.buffer_)), tmp_name_(std::move(o.tmp_name_)),
      final_name_(std::move(o.final_name_)), tmp_suffix_(std::move(o.tmp_suffix_)),
      on_new_directory_(std::move(o.on_new_directory_)), writes_(o.writes_),
      check_directory_(o.check_directory_), mode_known_(o.mode_known_), need_fchmod_(o.need_fchmod_) {
  o.dirfd_ = -1;
}

ReportFileWriter& ReportFileWriter::operator=(ReportFileWriter&& o) noexcept {
  if (this != &o) {
    if (dirfd_ >= 0) ::close(dirfd_);
    dir_ = std::move(o.dir_);
    dirfd_ = o.dirfd_;
    dev_ = o.dev_;
    ino_ = o.ino_;
    mnt_id_ = o.mnt_id_;
    has_mnt_id_ = o.has_mnt_id_;
    options_ = o.options_;
    buffer_ = std::move(o.buffer_);
    tmp_name_ = std::move(o.tmp_name_);
    final_name_ = std::move(o.final_name_);
    tmp_suffix_ = std::move(o.tmp_suffix_);
    on_new_directory_ = std::move(o.on_new_directory_);
    writes_ = o.writes_;
    check_directory_ = o.check_directory_;
    mode_known_ = o.mode_known_;
    need_fchmod_ = o.need_fchmod_;
    o.dirfd_ = -1;
  }
  return *this;
}

ReportFileWriter::~ReportFileWriter() {
  if (dirfd_ >= 0) ::close(dirfd_);
}

// The directory may be deleted and recreated under us (someone cleaned /run/orca);
// a descriptor to the old one would publish into a directory nobody can see.
Result<void> ReportFileWriter::ensure_directory_current() {
  Seen now;
  if (look(AT_FDCWD, dir_.c_str(), 0, now) && now.is_dir && now.dev == dev_ && now.ino == ino_) {
    if (!now.has_mnt_id || !has_mnt_id_ || now.mnt_id == mnt_id_) return {};
    // Our own directory, through another mount: one bound over the path.
    // Read-only, it says nothing may be written there; our descriptor is on
    // the writable mount beneath and would write on regardless.
    struct statvfs seen{};
    if (::statvfs(dir_.c_str(), &seen) == 0 && (seen.f_flag & ST_RDONLY) != 0)
      return system_error(EROFS, dir_ + " is now a read-only mount (a bind mount over the report directory): "
                                        "not writing beneath it; unmount it or remount it read-write");
    // Read-write, readers see what we write through our own descriptor: keep
    // it, so as not to hold the other mount open (umount would fail with
    // EBUSY); unless ours is the read-only one.
    if (!read_only_mount(dirfd_)) return {};
  }
  return adopt_directory();
}

// Moves the writer to the directory the path names now.
Result<void> ReportFileWriter::adopt_directory() {
  int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return system_error(errno, "open directory " + dir_);
  Seen now;
  if (!look(fd, "", AT_EMPTY_PATH, now)) {
    int e = errno;
    ::close(fd);
    return system_error(e, "stat directory " + dir_);
  }
  // Held open, a read-only mount could not be unmounted; nothing could be
  // written into it anyway.
  if (read_only_mount(fd)) {
    ::close(fd);
    return system_error(EROFS, "the directory now at " + dir_ + " is on a read-only mount: not publishing into it "
                               "until it is unmounted or remounted read-write");
  }
  if (on_new_directory_) {
    if (auto hooked = on_new_directory_(fd); !hooked) {
      ::close(fd);
      return hooked;
    }
  }
  ::close(dirfd_);
  dirfd_ = fd;
  dev_ = now.dev;
  ino_ = now.ino;
  mnt_id_ = now.mnt_id;
  has_mnt_id_ = now.has_mnt_id;
  return {};
}

Result<void> ReportFileWriter::write(std::string_view name, const Report& report) {
  buffer_.clear();
  if (!report.SerializeToString(&buffer_)) return logic_error("cannot serialize the report for " + std::string(name));
  return write_bytes(name, buffer_);
}

Result<void> ReportFileWriter::write_bytes(std::string_view name, std::string_view bytes) {
  if (!valid_name(name)) return logic_error("invalid report file name \"" + std::string(name) + "\"");
  if (check_directory_ || ++writes_ % kDirectoryCheckEvery == 0) {
    if (auto d = ensure_directory_current(); !d) {
      check_directory_ = true;  // the caller may recreate it; look again next time
      return d;
    }
    check_directory_ = false;
  }
  tmp_name_.assign(".");
  tmp_name_.append(name);
  tmp_name_.append(tmp_suffix_);
  const char* tmp = tmp_name_.c_str();

  constexpr int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::openat(dirfd_, tmp, flags, options_.mode);
  if (fd < 0 && errno == ENOENT) {
    // Our directory was removed: follow the path to whatever is there now.
    if (auto d = ensure_directory_current(); !d) {
      check_directory_ = true;
      return d;
    }
    fd = ::openat(dirfd_, tmp, flags, options_.mode);
  }
  if (fd < 0 && errno == EEXIST) {
    // Left behind by a crash of a process that had our pid, or planted. Remove the
    // name itself (unlinkat never follows a symlink; an empty directory goes
    // too) and try once more.
    if (::unlinkat(dirfd_, tmp, 0) != 0 && errno == EISDIR) ::unlinkat(dirfd_, tmp, AT_REMOVEDIR);
    fd = ::openat(dirfd_, tmp, flags, options_.mode);
  }
  if (fd < 0 && errno == EEXIST) {
    // A directory with entries holds the name: not ours to empty. This write
    // goes through a second temporary name, ".<name>.<pid>.1.tmp".
    tmp_name_.resize(tmp_name_.size() - 4);
    tmp_name_.append(".1.tmp");
    tmp = tmp_name_.c_str();
    fd = ::openat(dirfd_, tmp, flags, options_.mode);
    if (fd < 0 && errno == EEXIST) {
      ::unlinkat(dirfd_, tmp, 0);
      fd = ::openat(dirfd_, tmp, flags, options_.mode);
    }
  }
  if (fd < 0) return system_error(errno, "create " + dir_ + "/" + tmp_name_);

  auto fail = [&](Error e) -> Result<void> {
    if (fd >= 0) ::close(fd);
    ::unlinkat(dirfd_, tmp, 0);
    return e;
  };
  const auto where = [&] { return dir_ + "/" + tmp_name_; };
  // The umask may strip bits from the mode given to openat; look once whether
  // it does, and pay for fchmod on every publish only if so.
  if (!mode_known_) {
    struct stat st{};
    if (::fstat(fd, &st) != 0) return fail(system_error(errno, "stat " + where()));
    need_fchmod_ = (st.st_mode & 07777) != options_.mode;
    mode_known_ = true;
  }
  if (need_fchmod_ && ::fchmod(fd, options_.mode) != 0) return fail(system_error(errno, "chmod " + where()));
  if (int err = write_all(fd, bytes); err != 0) return fail(system_error(err, "write " + where()));
  if (options_.fsync && ::fsync(fd) != 0) return fail(system_error(errno, "fsync " + where()));
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) return fail(system_error(errno, "close " + where()));
  final_name_.assign(name);  // NUL-terminated for renameat, without allocating
  if (::renameat(dirfd_, tmp, dirfd_, final_name_.c_str()) != 0)
    return fail(system_error(errno, "rename " + where() + " to " + final_name_));
  if (options_.fsync && ::fsync(dirfd_) != 0) return system_error(errno, "fsync directory " + dir_);
  return {};
}

namespace {

template <class Match>
int remove_matching(int dirfd, Match match) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return 0;
  }
  int removed = 0;
  while (struct dirent* e = ::readdir(d)) {
    // unlinkat without AT_REMOVEDIR removes a file or a symlink, never a
    // directory (nor follows a symlink to one).
    if (match(std::string_view(e->d_name)) && ::unlinkat(dirfd, e->d_name, 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace

int ReportFileWriter::remove_stale_temporaries(std::string_view name) {
  return remove_matching(dirfd_, [name](std::string_view n) { return is_temporary_name(n, name); });
}

int ReportFileWriter::remove_stale_temporaries_with_suffix(std::string_view suffix) {
  return remove_matching(dirfd_, [suffix](std::string_view n) { return is_temporary_name_with_suffix(n, suffix); });
}

}  // namespace headroom::orca
