// SPDX-License-Identifier: Apache-2.0
// Atomic publication of report files into one directory.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <string_view>

#include "headroom/orca/report.h"
#include "headroom/orca/result.h"

namespace headroom::orca {

struct WriterOptions {
  mode_t mode = 0644;  // applied with fchmod, independent of the umask
  bool fsync = false;  // fsync file and directory; buys nothing on tmpfs (/run)
};

// Whether `entry` is a temporary this class leaves behind when killed
// mid-write: any ".*.tmp", or with `name` only ".<name>.<pid>.tmp" and
// ".<name>.<pid>.1.tmp".
bool is_temporary_name(std::string_view entry, std::string_view name = {});

// Writes files so that a reader sees either the previous or the new content,
// never a mix: the bytes go to a temporary file in the same directory
// (".<name>.<pid>.tmp", created with O_EXCL|O_NOFOLLOW so a planted symlink is
// never followed), which is then renamed over the final name (rename replaces a
// symlink at the final name instead of following it). Whatever holds the
// temporary name is removed first (a file, a symlink, an empty directory); a
// directory with entries is left alone and a second temporary name used
// (".<name>.<pid>.1.tmp"). On any failure the
// temporary file is removed and the previous file stays as it was.
class ReportFileWriter {
 public:
  // Opens an existing directory. It does not create it: see publishers/.
  static Result<ReportFileWriter> open(std::string dir, WriterOptions options = {});

  ReportFileWriter(ReportFileWriter&& other) noexcept;
  ReportFileWriter& operator=(ReportFileWriter&& other) noexcept;
  ReportFileWriter(const ReportFileWriter&) = delete;
  ReportFileWriter& operator=(const ReportFileWriter&) = delete;
  ~ReportFileWriter();

  // Serializes and publishes one report under `name` (a plain file name).
  Result<void> write(std::string_view name, const Report& report);
  // Publishes raw bytes under `name`.
  Result<void> write_bytes(std::string_view name, std::string_view bytes);

  // Removes temporary files left by a writer that crashed mid-write: every
  // one in the directory, or with `name` only that file's (a directory shared
  // with other programs). Returns how many were removed.
  int remove_stale_temporaries(std::string_view name = {});

  const std::string& dir() const { return dir_; }

 private:
  ReportFileWriter(std::string dir, int dirfd, WriterOptions options);
  Result<void> ensure_directory_current();

  std::string dir_;
  int dirfd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  WriterOptions options_;
  std::string buffer_;    // reused serialization buffer: no allocation per publish
  std::string tmp_name_;    // reused name buffers
  std::string final_name_;
  std::string tmp_suffix_;  // ".<pid>.tmp", fixed at open: one writer per process
  unsigned writes_ = 0;
  bool check_directory_ = false;  // verify the path still names our directory
  bool mode_known_ = false;       // whether the umask leaves options_.mode intact is known
  bool need_fchmod_ = true;
};

}  // namespace headroom::orca
