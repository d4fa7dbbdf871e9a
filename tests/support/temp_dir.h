// SPDX-License-Identifier: Apache-2.0
// A temporary directory removed with its contents at scope exit.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace headroom::testing {

class TempDir {
 public:
  // `base` defaults to $TMPDIR or /tmp; tests that publish at high rates pass
  // a tmpfs (see tmpfs_base()), as /run is in production.
  explicit TempDir(const std::string& base = std::filesystem::temp_directory_path().string()) {
    std::string tmpl = base + "/headroom-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

  // Writes `content` to a file below the directory, creating parent
  // directories. An existing file is rewritten in place (same inode), as the
  // kernel's files change under an open descriptor.
  std::string write(const std::string& name, std::string_view content) const {
    const std::string p = *this / name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
    return p;
  }
  void mkdir(const std::string& name) const { std::filesystem::create_directories(*this / name); }

 private:
  std::string path_;
};

// A tmpfs to publish into, like /run on a normal host: /dev/shm when present.
inline std::string tmpfs_base() {
  std::error_code ec;
  return std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm" : std::filesystem::temp_directory_path().string();
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace headroom::testing
