// SPDX-License-Identifier: Apache-2.0
#include "probes/proc_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace headroom::probes {
namespace {

// One page holds most kernel text files; larger ones (a many-CPU /proc/stat)
// grow the buffer once and keep it.
constexpr size_t kInitialBuffer = 4096;
// A kernel text file this large means the path is wrong (a device, a huge
// regular file), not that the kernel has that much to say.
constexpr size_t kMaxBuffer = size_t{64} << 20;

}  // namespace

ProcFile::ProcFile(ProcFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), buffer_(std::move(other.buffer_)) {}

ProcFile& ProcFile::operator=(ProcFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

ProcFile::~ProcFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::string_view> ProcFile::read() {
  if (fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return system_error(errno, "open " + path_);
  }
  if (buffer_.size() < kInitialBuffer) buffer_.resize(kInitialBuffer);

  // One pread from offset 0 takes the whole file: procfs and cgroupfs build a
  // file's text on each read, so reading it in pieces could mix two
  // generations (and a second pread at an offset regenerates the whole text
  // just to skip it). A read that fills the buffer may have been cut: grow the
  // buffer and read the whole file again.
  size_t used = 0;
  for (;;) {
    const ssize_t n = ::pread(fd_, buffer_.data(), buffer_.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      // Close so the next call reopens: the file may belong to a cgroup that
      // was removed (ENODEV) and recreated under the same path.
      ::close(std::exchange(fd_, -1));
      return system_error(err, "read " + path_);
    }
    used = static_cast<size_t>(n);
    if (used < buffer_.size()) break;
    if (buffer_.size() >= kMaxBuffer) {
      ::close(std::exchange(fd_, -1));
      return system_error(EFBIG, "read " + path_);
    }
    buffer_.resize(buffer_.size() * 2);
  }
  return std::string_view(buffer_.data(), used);
}

}  // namespace headroom::probes
