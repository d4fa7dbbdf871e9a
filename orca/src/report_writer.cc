#include "headroom/orca/report_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
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

std::string temporary_name(std::string_view name) {
  std::string tmp = ".";
  tmp += name;
  tmp += '.';
  tmp += std::to_string(::getpid());
  tmp += ".tmp";
  return tmp;
}

bool is_temporary_name(std::string_view n) {
  return n.size() > 5 && n.front() == '.' && n.ends_with(".tmp");
}

Result<void> write_all(int fd, std::string_view bytes, const std::string& what) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return system_error(errno, "write " + what);
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

}  // namespace

ReportFileWriter::ReportFileWriter(std::string dir, int dirfd, WriterOptions options)
    : dir_(std::move(dir)), dirfd_(dirfd), options_(options) {
  struct stat st{};
  if (::fstat(dirfd_, &st) == 0) {
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
}

Result<ReportFileWriter> ReportFileWriter::open(std::string dir, WriterOptions options) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return system_error(errno, "open directory " + dir);
  return ReportFileWriter(std::move(dir), fd, options);
}

ReportFileWriter::ReportFileWriter(ReportFileWriter&& o) noexcept
    : dir_(std::move(o.dir_)), dirfd_(o.dirfd_), dev_(o.dev_), ino_(o.ino_), options_(o.options_),
      buffer_(std::move(o.buffer_)) {
  o.dirfd_ = -1;
}

ReportFileWriter& ReportFileWriter::operator=(ReportFileWriter&& o) noexcept {
  if (this != &o) {
    if (dirfd_ >= 0) ::close(dirfd_);
    dir_ = std::move(o.dir_);
    dirfd_ = o.dirfd_;
    dev_ = o.dev_;
    ino_ = o.ino_;
    options_ = o.options_;
    buffer_ = std::move(o.buffer_);
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
  struct stat st{};
  if (::stat(dir_.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == dev_ && st.st_ino == ino_) return {};
  int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return system_error(errno, "open directory " + dir_);
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return system_error(e, "stat directory " + dir_);
  }
  ::close(dirfd_);
  dirfd_ = fd;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  return {};
}

Result<void> ReportFileWriter::write(std::string_view name, const Report& report) {
  buffer_.clear();
  if (!report.SerializeToString(&buffer_)) return logic_error("cannot serialize the report for " + std::string(name));
  return write_bytes(name, buffer_);
}

Result<void> ReportFileWriter::write_bytes(std::string_view name, std::string_view bytes) {
  if (!valid_name(name)) return logic_error("invalid report file name \"" + std::string(name) + "\"");
  if (auto d = ensure_directory_current(); !d) return d;
  const std::string final_name(name);
  const std::string tmp = temporary_name(name);
  const std::string where = dir_ + "/" + tmp;

  int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::openat(dirfd_, tmp.c_str(), flags, options_.mode);
  if (fd < 0 && errno == EEXIST) {
    // Left behind by a crash of a process that had our pid, or planted. Remove the
    // name itself (unlinkat never follows a symlink) and try once more.
    ::unlinkat(dirfd_, tmp.c_str(), 0);
    fd = ::openat(dirfd_, tmp.c_str(), flags, options_.mode);
  }
  if (fd < 0) return system_error(errno, "create " + where);

  auto fail = [&](Error e) -> Result<void> {
    if (fd >= 0) ::close(fd);
    ::unlinkat(dirfd_, tmp.c_str(), 0);
    return e;
  };
  if (::fchmod(fd, options_.mode) != 0) return fail(system_error(errno, "chmod " + where));
  if (auto w = write_all(fd, bytes, where); !w) return fail(w.error());
  if (options_.fsync && ::fsync(fd) != 0) return fail(system_error(errno, "fsync " + where));
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) return fail(system_error(errno, "close " + where));
  if (::renameat(dirfd_, tmp.c_str(), dirfd_, final_name.c_str()) != 0)
    return fail(system_error(errno, "rename " + where + " to " + final_name));
  if (options_.fsync && ::fsync(dirfd_) != 0) return system_error(errno, "fsync directory " + dir_);
  return {};
}

int ReportFileWriter::remove_stale_temporaries() {
  int fd = ::openat(dirfd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return 0;
  }
  int removed = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (is_temporary_name(n) && ::unlinkat(dirfd_, e->d_name, 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace headroom::orca
