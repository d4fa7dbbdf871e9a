// SPDX-License-Identifier: Apache-2.0
// Atomic publication of report files into one directory.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "headroom/orca/report.h"
#include "headroom/orca/result.h"

namespace headroom::orca {

struct WriterOptions {
  mode_t mode = 0644;  // applied with fchmod, independent of the umask
  bool fsync = false;  // fsync file and directory; buys nothing on tmpfs (/run)
};

// Whether `entry` is a temporary name this class makes for the file `name`,
// and so may leave behind when killed mid-write: ".<name>.<pid>.tmp" or
// ".<name>.<pid>.1.tmp".
bool is_temporary_name(std::string_view entry, std::string_view name);
// Whether `entry` is a temporary name this class makes for some file whose
// name ends with `suffix` (".orca": ".node.orca.<pid>.tmp",
// ".endpoint.api.orca.<pid>.1.tmp"). Other programs' ".*.tmp" never match.
bool is_temporary_name_with_suffix(std::string_view entry, std::string_view suffix);

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

  // Removes temporary files left by a writer that crashed mid-write: those
  // of the file `name` only, or of every file ending with `suffix`. Only
  // names this class makes (is_temporary_name): another program's
  // temporaries in a shared directory stay. Returns how many were removed.
  // Remove only while no other writer can be writing into the directory.
  int remove_stale_temporaries(std::string_view name);
  int remove_stale_temporaries_with_suffix(std::string_view suffix);

  // Called with a descriptor of the directory the path names now, when it
  // is no longer the one the writer had (removed and made again, renamed
  // away, replaced), before anything is written into it. An error keeps the
  // writer off the new directory: the write fails with it, and the next
  // write looks again. A new directory on a read-only mount is never taken
  // (EROFS, without calling the hook), nor is the writer's own directory
  // seen at the path through a read-only bind mount: writing on beneath it
  // would bypass it. Either clears by itself when the mount goes.
  using DirectoryHook = std::function<Result<void>(int dirfd)>;
  void on_new_directory(DirectoryHook hook) { on_new_directory_ = std::move(hook); }

  const std::string& dir() const { return dir_; }
  // The descriptor of the directory written into (owned by the writer).
  int directory_fd() const { return dirfd_; }

 private:
  ReportFileWriter(std::string dir, int dirfd, WriterOptions options);
  Result<void> ensure_directory_current();
  Result<void> adopt_directory();

  std::string dir_;
  int dirfd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::uint64_t mnt_id_ = 0;  // the mount dirfd_ is on, when the kernel says (statx STATX_MNT_ID)
  bool has_mnt_id_ = false;
  WriterOptions options_;
  std::string buffer_;    // reused serialization buffer: no allocation per publish
  std::string tmp_name_;    // reused name buffers
  std::string final_name_;
  std::string tmp_suffix_;  // ".<pid>.tmp", fixed at open: one writer per process
  DirectoryHook on_new_directory_;
  unsigned writes_ = 0;
  bool check_directory_ = false;  // verify the path still names our directory
  bool mode_known_ = false;       // whether the umask leaves options_.mode intact is known
  bool need_fchmod_ = true;
};

}  // namespace headroom::orca
