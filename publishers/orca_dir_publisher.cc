// SPDX-License-Identifier: Apache-2.0
#include "publishers/orca_dir_publisher.h"

#include "headroom/orca/names.h"

#include <dirent.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>


namespace headroom::publishers {

Result<void> make_directories(const std::string& path, mode_t mode) {
  if (path.empty()) return logic_error("empty directory path");
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty() || partial == "/") continue;
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST)
      return system_error(errno, "cannot create directory " + partial);
    struct stat st{};
    if (::stat(partial.c_str(), &st) != 0) return system_error(errno, "cannot create directory " + partial);
    // ENOTDIR, as the kernel says it: whether a write or this finds the file
    // first depends on timing, and the two must read alike.
    if (!S_ISDIR(st.st_mode)) return system_error(ENOTDIR, "cannot create directory " + path + ": " + partial);
  }
  return {};
}

namespace {

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Locks this process holds, by lock file: a reload's publisher for the same
// directory shares the running one's instead of failing on it.
std::mutex g_locks_mutex;
std::vector<std::weak_ptr<DirectoryLock>>& held_locks() {
  static std::vector<std::weak_ptr<DirectoryLock>> locks;
  return locks;
}

// Who holds the flock on the file (dev, ino): /proc/locks, where the kernel
// lists every lock with its owner's pid; else the pid the holder wrote into
// the file. 0 when neither says.
long lock_holder(int fd, dev_t dev, ino_t ino) {
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF"; waiters have "->".
    std::istringstream in(line);
    std::string number, type, advisory, mode, pid, where;
    if (!(in >> number >> type) || type == "->" || type != "FLOCK") continue;
    if (!(in >> advisory >> mode >> pid >> where)) continue;
    unsigned major = 0, minor = 0;
    unsigned long long inode = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &major, &minor, &inode) != 3) continue;
    if (inode != ino || major != ::major(dev) || minor != ::minor(dev)) continue;
    try {
      const long p = std::stol(pid);
      if (p > 0) return p;
    } catch (...) {
    }
  }
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n > 0) {
    char* end = nullptr;
    const long p = std::strtol(buf, &end, 10);
    if (end != buf && p > 0) return p;
  }
  return 0;
}

}  // namespace

std::optional<std::string> unsafe_directory(const struct stat& st, uid_t euid) {
  if (st.st_uid != euid && st.st_uid != 0)
    return "is owned by uid " + std::to_string(st.st_uid) + ", not by this agent's user (uid " +
           std::to_string(euid) + ") or root, so that user can replace the reports";
  const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  const bool sticky_ours = (st.st_mode & S_ISVTX) != 0 && st.st_uid == euid;
  if (others_write && !sticky_ours)
    return std::string("is writable by ") + ((st.st_mode & S_IWOTH) != 0 ? "every user" : "its group (gid " + std::to_string(st.st_gid) + ")") +
           " (mode " + octal_mode(st.st_mode) + "), so they can replace or plant the reports proxies shed on";
  return std::nullopt;
}

Result<std::shared_ptr<DirectoryLock>> DirectoryLock::acquire(int dirfd, const std::string& dir, bool* fresh) {
  if (fresh != nullptr) *fresh = false;
  const std::string path = dir + "/" + std::string(kFileName);
  const std::string name(kFileName);
  // O_NOFOLLOW: a planted symlink is refused, never followed; O_NONBLOCK: a
  // planted FIFO does not block the open. Read-only: flock needs no more, and
  // a file held open for writing would keep the file system from being
  // remounted read-only.
  constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  int fd = ::openat(dirfd, name.c_str(), kFlags | O_CREAT, 0644);
  if (fd < 0 && errno == EACCES) fd = ::openat(dirfd, name.c_str(), kFlags);
  if (fd < 0) {
    const int e = errno;
    if (e == ELOOP) return system_error(e, "the lock file " + path + " is a symbolic link: remove it");
    if (e == EISDIR) return system_error(e, "the lock file " + path + " is a directory: remove it");
    return system_error(e, "cannot open the lock file " + path);
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int e = errno;
    ::close(fd);
    return system_error(e != 0 ? e : EINVAL, "the lock file " + path + " is not a regular file: remove it");
  }
  {
    std::lock_guard<std::mutex> guard(g_locks_mutex);
    auto& locks = held_locks();
    std::erase_if(locks, [](const auto& w) { return w.expired(); });
    for (const auto& w : locks) {
      if (auto held = w.lock(); held && held->dev_ == st.st_dev && held->ino_ == st.st_ino) {
        ::close(fd);
        return held;
      }
    }
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EWOULDBLOCK) {
      const long pid = lock_holder(fd, st.st_dev, st.st_ino);
      ::close(fd);
      return Error{e, dir + " is in use by another headroomd (" +
                                 (pid > 0 ? "pid " + std::to_string(pid) : std::string("pid unknown")) +
                                 " holds the lock file " + path +
                                 "): two agents would overwrite each other's reports. Stop the other one, or "
                                 "give this one another agent.orca_dir (--orca-dir)"};
    }
    ::close(fd);
    return system_error(e, "cannot lock " + path);
  }
  // Our pid, for the message of the next agent that tries (best effort: a
  // full file system leaves the file empty; /proc/locks still tells).
  if (int w = ::openat(dirfd, name.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      w >= 0) {
    const std::string pid = std::to_string(::getpid()) + "\n";
    (void)!::write(w, pid.data(), pid.size());
    ::close(w);
  }
  std::shared_ptr<DirectoryLock> lock(new DirectoryLock(fd, st.st_dev, st.st_ino, path));
  {
    std::lock_guard<std::mutex> guard(g_locks_mutex);
    held_locks().push_back(lock);
  }
  if (fresh != nullptr) *fresh = true;
  return lock;
}

std::shared_ptr<DirectoryLock> DirectoryLock::held(int dirfd) {
  const std::string name(kFileName);
  struct stat st{};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  std::lock_guard<std::mutex> guard(g_locks_mutex);
  for (const auto& w : held_locks())
    if (auto lock = w.lock(); lock && lock->dev_ == st.st_dev && lock->ino_ == st.st_ino) return lock;
  return nullptr;
}

DirectoryLock::~DirectoryLock() {
  // The file stays (removing it would race with the next holder's open);
  // closing the descriptor releases the lock.
  if (fd_ >= 0) ::close(fd_);
}

Result<OrcaDirPublisher> OrcaDirPublisher::open(const std::string& dir, OrcaDirOptions options) {
  if (auto made = make_directories(dir); !made) return made.error();
  // access(2) also reports a read-only mount (EROFS) to root.
  const int unwritable = ::access(dir.c_str(), W_OK | X_OK) == 0 ? 0 : errno;
  auto writer = orca::ReportFileWriter::open(dir, options.writer);
  if (!writer) return writer.error();
  struct stat st{};
  if (::fstat(writer->directory_fd(), &st) != 0) return system_error(errno, "cannot stat " + dir);
  if (auto unsafe = unsafe_directory(st, ::geteuid())) {
    const std::string what = dir + " " + *unsafe;
    if (options.refuse_unsafe)
      return logic_error(what + ". Make it writable by this agent's user only (chown that user, chmod 0755 " + dir +
                         "), or set agent.unsafe_orca_dir = \"warn\" to publish there anyway");
    spdlog::warn("{} (agent.unsafe_orca_dir = \"warn\": publishing there anyway)", what);
  }

  std::shared_ptr<DirectoryLock> lock;
  if (unwritable != 0) {
    // A reload while the directory this process publishes into is failing
    // (read-only, not writable): the running publisher has said so and
    // recovers when it clears; the new one takes over from it the same way.
    // Any other directory that cannot be written into is an error.
    lock = DirectoryLock::held(writer->directory_fd());
    if (!lock) return system_error(unwritable, "cannot write report files into " + dir);
  } else {
    bool fresh = false;
    auto acquired = DirectoryLock::acquire(writer->directory_fd(), dir, &fresh);
    if (!acquired) return acquired.error();
    lock = std::move(acquired.value());
    // Only now, with the lock held, can no other agent be writing here: a
    // temporary of ours is a crash's leftover. Not on a reload (the lock was
    // already ours): nothing is being written meanwhile.
    if (fresh) writer->remove_stale_temporaries_with_suffix(orca::kReportSuffix);
  }

  auto state = std::make_shared<State>();
  state->dir = dir;
  state->refuse_unsafe = options.refuse_unsafe;
  state->lock = std::move(lock);
  watch_new_directories(*writer, state);
  return OrcaDirPublisher(std::move(writer.value()), std::move(state));
}

// A directory that replaced ours (removed and made again, renamed away):
// checked and locked before the first report goes into it.
void OrcaDirPublisher::watch_new_directories(orca::ReportFileWriter& writer, const std::shared_ptr<State>& state) {
  writer.on_new_directory([s = state](int dirfd) -> Result<void> {
    struct stat now{};
    if (::fstat(dirfd, &now) != 0) return system_error(errno, "cannot stat " + s->dir);
    if (auto unsafe = unsafe_directory(now, ::geteuid()); unsafe && s->refuse_unsafe)
      return logic_error("the new " + s->dir + " " + *unsafe + "; not publishing into it until only this agent's "
                         "user can write there (or agent.unsafe_orca_dir = \"warn\")");
    auto relocked = DirectoryLock::acquire(dirfd, s->dir);
    if (!relocked) return relocked.error();
    s->lock = std::move(relocked.value());
    s->replaced = true;
    return {};
  });
}

namespace {
// A look at the lock file costs one fstatat; a removed lock file is found
// within this many publishes (1.6 s at the default interval).
constexpr unsigned kLockCheckEvery = 16;
}  // namespace

Result<void> OrcaDirPublisher::check_lock() {
  const int dirfd = writer_.directory_fd();
  const std::string name(DirectoryLock::kFileName);
  struct stat st{};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && state_->lock->is(st)) return {};
  struct stat dir{};
  // The directory itself was removed: the writer follows the path to the new
  // one, which is locked before anything is written into it.
  if (::fstat(dirfd, &dir) == 0 && dir.st_nlink == 0) return {};
  auto relocked = DirectoryLock::acquire(dirfd, state_->dir);
  if (!relocked) return relocked.error();
  state_->lock = std::move(relocked.value());
  spdlog::warn("the lock file {} was removed or replaced while running; took the lock again", state_->lock->path());
  return {};
}

Result<void> OrcaDirPublisher::publish(std::string_view scope, const orca::Report& report) {
  std::string bytes;
  if (!report.SerializeToString(&bytes)) return logic_error("cannot serialize the " + std::string(scope) + " report");
  return publish_bytes(scope, bytes);
}

Result<void> OrcaDirPublisher::publish_bytes(std::string_view scope, std::string_view bytes) {
  if (check_lock_ || ++publishes_ % kLockCheckEvery == 0) {
    if (auto locked = check_lock(); !locked) {
      check_lock_ = true;
      return locked;
    }
    check_lock_ = false;
  }
  name_.assign(scope);
  name_ += orca::kReportSuffix;
  auto r = writer_.write_bytes(name_, bytes);
  if (!r && r.error().code == ENOENT) {
    // Someone removed the directory: make it again and retry once.
    if (auto made = make_directories(writer_.dir()); !made) return made.error();
    r = writer_.write_bytes(name_, bytes);
  }
  return r;
}

Result<void> OrcaDirPublisher::remove(std::string_view scope) {
  const std::string path = writer_.dir() + "/" + std::string(scope) + std::string(orca::kReportSuffix);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return system_error(errno, "cannot remove " + path);
  return {};
}

namespace {

// endpoint.<name>@<instance>.orca files in dir, as scopes.
std::vector<std::string> instance_reports_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (!name.starts_with(orca::kEndpointSignalPrefix) || !name.ends_with(orca::kReportSuffix)) continue;
    if (name.find(orca::kInstanceSeparator) == std::string_view::npos) continue;
    out.emplace_back(name.substr(0, name.size() - orca::kReportSuffix.size()));
  }
  ::closedir(d);
  return out;
}

}  // namespace

Result<Publishers> OrcaReportsPublisher::build(const OrcaReportsOptions& options) {
  auto files = OrcaDirPublisher::open(options.dir, options.files);
  if (!files) {
    Error e = files.error();
    e.message = "agent.orca_dir: " + e.message;
    if (e.code == 0) e.code = EPERM;  // the directory is there but unsafe: not a configuration error
    return e;
  }
  std::unique_ptr<OrcaReportsPublisher> p(new OrcaReportsPublisher(std::move(files.value()), options.scopes));
  p->instances_ = instance_reports_in(p->files_.dir());
  Publishers out;
  out.push_back(std::move(p));
  return out;
}

void OrcaReportsPublisher::remove_forgotten_instances(const Tick& tick) {
  std::vector<std::string> now;
  for (const auto& r : tick.reports)
    if (!r.instance.empty()) now.push_back(r.scope);
  for (const auto& old : instances_) {
    if (std::find(now.begin(), now.end(), old) != now.end()) continue;
    if (auto r = files_.remove(old); !r) {
      spdlog::warn("{}: its instance is forgotten, but the report stays: {}", old, r.error().message);
      now.push_back(old);  // tried again next tick
    }
  }
  instances_ = std::move(now);
}

Result<void> OrcaReportsPublisher::publish(const Tick& tick) {
  const ScopeReport& node = tick.node();
  if (auto r = files_.publish_bytes(node.scope, node.bytes); !r) {
    node_failing_.fail(spdlog::level::err, "cannot publish {}/{}{}: {}; the previous report stays in place",
                       files_.dir(), node.scope, orca::kReportSuffix, r.error().message);
    return r;
  }
  const bool replaced = files_.take_replaced();
  if (!node_failing_.ok("publishing {}/{}{} again{}", files_.dir(), node.scope, orca::kReportSuffix,
                        replaced ? " (into a new directory, holding " + files_.lock_path() + ")" : "") &&
      replaced)
    spdlog::warn("{} was replaced while running (removed, or renamed away): publishing into the new one, holding {}",
                 files_.dir(), files_.lock_path());

  // Each report's failure never holds up the others.
  std::string first_error;
  bool failing = false;
  for (std::size_t i = 1; i < tick.reports.size(); ++i) {
    const ScopeReport& r = tick.reports[i];
    if (auto written = files_.publish_bytes(r.scope, r.bytes); !written) {
      if (!failing) first_error = written.error().message;
      failing = true;
    }
  }
  remove_forgotten_instances(tick);
  if (failing)
    others_failing_.fail(spdlog::level::err,
                         "cannot publish endpoint reports into {}: {}; the previous reports stay in place",
                         files_.dir(), first_error);
  else
    others_failing_.ok("publishing endpoint reports again");
  return {};
}

void OrcaReportsPublisher::take_over(const std::vector<std::string>& previous_scopes) {
  for (const auto& old : previous_scopes) {
    if (std::find(scopes_.begin(), scopes_.end(), old) != scopes_.end()) continue;
    if (old.find(orca::kInstanceSeparator) != std::string::npos) continue;  // the next tick's to remove
    if (auto r = files_.remove(old); !r)
      spdlog::warn("{} removed from the configuration, but its report stays: {}", old, r.error().message);
    else
      spdlog::info("{} removed from the configuration; removed its report", old);
  }
}

}  // namespace headroom::publishers
