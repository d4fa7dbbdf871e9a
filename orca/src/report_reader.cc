// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/report_reader.h"

#include <dirent.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <set>

namespace headroom::orca {
namespace {

// Renames (the writer's publish), in-place writes, deletions, and creations
// (only so that a FIFO, device node, symlink or directory planted under a
// report name is noticed: none of them is followed by IN_CLOSE_WRITE).
constexpr uint32_t kDirMask = IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                              IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
// The nearest existing ancestor (normally the parent): our directory being
// created, removed or renamed, or that ancestor going away too. IN_DELETE_SELF
// on the directory is not enough: it fires only once the last descriptor of
// the removed directory is closed, and the agent keeps one open.
constexpr uint32_t kAncestorMask =
    IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
constexpr uint32_t kSelfEvents = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT;
// Bounds the ancestor walk against a tree being created under our feet.
constexpr int kMaxWatchAttempts = 16;

std::string base_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// "node.orca" -> "node"; "" for hidden files (the writer's temporaries) and
// for names that are not reports.
std::string scope_of(std::string_view name) {
  if (name.empty() || name.front() == '.' || !name.ends_with(kReportSuffix)) return {};
  name.remove_suffix(kReportSuffix.size());
  return std::string(name);
}

struct Entry {
  std::optional<Report> report;  // last valid
  std::string error;             // why the current file is rejected
  bool removed = false;
};

}  // namespace

class ReportDirectory::Impl {
 public:
  Impl(std::string dir, ReaderOptions options, int ifd)
      : dir_(std::move(dir)), parent_(parent_of(dir_)), base_(base_of(dir_)), options_(options), ifd_(ifd) {}
  ~Impl() {
    if (ifd_ >= 0) ::close(ifd_);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // The first watch and scan; an error only when the directory exists but
  // cannot be watched, or nothing up to the root can.
  Result<void> start() {
    bool attached = false;
    if (auto w = sync_watches(attached); !w) return w;
    std::set<std::string> dirty;
    if (dir_wd_ >= 0) collect_all(dirty);
    for (const auto& scope : dirty) reread(scope);
    return {};
  }

  std::vector<std::string> process_events() {
    std::map<std::string, bool> dirty;  // scope -> only a creation of a regular file was seen so far
    bool rescan = false;  // list the directory and re-read every known scope
    bool resync = false;  // check which directory the path now names
    alignas(inotify_event) char buf[16 * 1024];
    for (;;) {
      const ssize_t n = ::read(ifd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // EAGAIN: drained
      for (ssize_t off = 0; off < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        if ((ev->mask & IN_Q_OVERFLOW) != 0) {
          rescan = resync = true;  // events were lost: only a full listing is trustworthy
        } else if (dir_wd_ >= 0 && ev->wd == dir_wd_) {
          if ((ev->mask & kSelfEvents) != 0) {
            // Gone or renamed away: a watch that follows the moved inode would
            // report another directory, so drop it and go by the path again.
            if ((ev->mask & IN_MOVE_SELF) != 0) ::inotify_rm_watch(ifd_, dir_wd_);
            dir_wd_ = -1;
            rescan = resync = true;
          } else if (ev->len > 0) {
            std::string scope = scope_of(ev->name);
            if (scope.empty()) continue;
            const bool plain_create = ev->mask == IN_CREATE;  // no IN_ISDIR
            auto [it, inserted] = dirty.try_emplace(std::move(scope), plain_create);
            if (!inserted) it->second = it->second && plain_create;
          }
        } else if (anc_wd_ >= 0 && ev->wd == anc_wd_) {
          if ((ev->mask & kSelfEvents) != 0) {
            if ((ev->mask & IN_MOVE_SELF) != 0) ::inotify_rm_watch(ifd_, anc_wd_);
            anc_wd_ = -1;
            resync = true;
          } else if (anc_path_ != parent_ || (ev->len > 0 && base_ == ev->name)) {
            // Our directory (or a step towards it) appeared, went or was
            // replaced; the parent's other entries are none of our business.
            resync = true;
          }
        }
      }
    }
    if (resync || dir_wd_ < 0 || anc_wd_ < 0) (void)sync_watches(rescan);

    std::set<std::string> todo;
    if (rescan) collect_all(todo);
    for (const auto& [scope, plain_create] : dirty) {
      // A regular file that was only created is being written: its
      // IN_CLOSE_WRITE follows. Reading now would see it half-written.
      if (plain_create && !todo.contains(scope) && is_regular(scope)) continue;
      todo.insert(scope);
    }
    std::vector<std::string> changed;
    for (const auto& scope : todo)
      if (reread(scope)) changed.push_back(scope);
    if (callback_ && !changed.empty()) {
      const int64_t now = unix_now_ms();
      for (const auto& scope : changed) {
        auto st = get(scope, now);
        if (!st) {  // removed before it ever held a valid report
          st.emplace();
          st->scope = scope;
          st->removed = true;
          st->staleness = {true, 0, "the file was removed"};
        }
        callback_(*st);
      }
    }
    return changed;
  }

  bool wait(int timeout_ms) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      int wait_ms = -1;
      if (timeout_ms >= 0) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        wait_ms = static_cast<int>(std::max<int64_t>(left, 0));
      }
      pollfd p{ifd_, POLLIN, 0};
      const int n = ::poll(&p, 1, wait_ms);
      if (n < 0 && errno != EINTR) return false;
      if (n > 0 && !process_events().empty()) return true;
      if (timeout_ms >= 0 && Clock::now() >= deadline) return false;
    }
  }

  std::optional<ScopeState> get(std::string_view scope, int64_t now) const {
    auto it = scopes_.find(scope);
    if (it == scopes_.end()) return std::nullopt;
    const Entry& e = it->second;
    ScopeState st;
    st.scope = it->first;
    st.report = e.report;
    st.error = e.error;
    st.removed = e.removed;
    if (e.report) st.staleness = check_staleness(*e.report, now, options_.stale_intervals, options_.min_stale_ms);
    // The rule of docs/orca-files.md covers the file as published; a file
    // that is gone or broken says nothing about the current load either.
    if (e.removed) {
      st.staleness.stale = true;
      st.staleness.reason = "the file was removed";
    } else if (!e.error.empty()) {
      st.staleness.stale = true;
      st.staleness.reason = "the current file is rejected: " + e.error;
    } else if (!e.report) {
      st.staleness.stale = true;
      st.staleness.reason = "no valid report";
    }
    return st;
  }

  std::vector<std::string> scopes() const {
    std::vector<std::string> out;
    out.reserve(scopes_.size());
    for (const auto& [scope, e] : scopes_) out.push_back(scope);
    return out;
  }

  const std::string& dir() const { return dir_; }
  int fd() const { return ifd_; }
  bool watching() const { return dir_wd_ >= 0; }
  void set_callback(std::function<void(const ScopeState&)> cb) { callback_ = std::move(cb); }

 private:
  std::string path_of(std::string_view scope) const { return dir_ + "/" + report_file_name(scope); }

  bool is_regular(const std::string& scope) const {
    struct stat st{};
    return ::lstat(path_of(scope).c_str(), &st) == 0 && S_ISREG(st.st_mode);
  }

  // Makes the watches match what the path names now: the directory itself
  // when it exists (re-attached when the path names another directory than
  // the one watched), and always its nearest existing ancestor. Repeats until
  // stable, because the tree may change while watches are added and an event
  // that fired before a watch existed is never delivered. Sets `attached`
  // when a directory was newly attached or detached (its files need a
  // rescan). Fails when the directory exists but cannot be watched.
  Result<void> sync_watches(bool& attached) {
    Result<void> status;
    for (int attempt = 0; attempt < kMaxWatchAttempts; ++attempt) {
      struct stat st{};
      const bool is_dir = ::stat(dir_.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      if (dir_wd_ >= 0 && (!is_dir || st.st_dev != dev_ || st.st_ino != ino_)) {
        ::inotify_rm_watch(ifd_, dir_wd_);
        dir_wd_ = -1;
        attached = true;
      }
      status = {};
      if (dir_wd_ < 0 && is_dir) {
        const int wd = ::inotify_add_watch(ifd_, dir_.c_str(), kDirMask);
        struct stat again{};
        if (wd < 0 && errno != ENOENT && errno != ENOTDIR) {
          status = system_error(errno, "watch report directory " + dir_);
        } else if (wd >= 0 && ::stat(dir_.c_str(), &again) == 0 && again.st_dev == st.st_dev &&
                   again.st_ino == st.st_ino) {
          dir_wd_ = wd;
          dev_ = st.st_dev;
          ino_ = st.st_ino;
          attached = true;
        } else {
          if (wd >= 0) ::inotify_rm_watch(ifd_, wd);
          continue;  // replaced or removed meanwhile: look again
        }
      }
      const std::string before = anc_path_;
      const int before_wd = anc_wd_;
      if (auto a = watch_ancestor(); !a) return a;
      if (anc_path_ == before && anc_wd_ == before_wd) break;  // stable: events will tell us
    }
    return status;
  }

  Result<void> watch_ancestor() {
    for (std::string p = parent_of(dir_);; p = parent_of(p)) {
      const int wd = ::inotify_add_watch(ifd_, p.c_str(), kAncestorMask);
      if (wd >= 0) {  // the same wd again when it is already watched
        if (anc_wd_ >= 0 && anc_wd_ != wd) ::inotify_rm_watch(ifd_, anc_wd_);
        anc_wd_ = wd;
        anc_path_ = p;
        return {};
      }
      const int e = errno;
      // A parent we may not watch is skipped: its own parent still sees the
      // tree change, if less precisely.
      if (e != ENOENT && e != ENOTDIR && e != EACCES)
        return system_error(e, "watch " + p + " for report directory " + dir_);
      if (parent_of(p) == p) return system_error(e, "watch any ancestor of report directory " + dir_);
    }
  }

  // Every scope listed in the directory plus every scope we know (their files
  // may be gone).
  void collect_all(std::set<std::string>& out) const {
    for (const auto& [scope, e] : scopes_) out.insert(scope);
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return;
    while (const dirent* de = ::readdir(d)) {
      std::string scope = scope_of(de->d_name);
      if (!scope.empty()) out.insert(std::move(scope));
    }
    ::closedir(d);
  }

  // Reads one scope's file and updates its entry. True when the state changed.
  bool reread(const std::string& scope) {
    const std::string path = path_of(scope);
    auto r = read_report_file(path, options_.max_bytes, options_.owner);
    std::string error;
    if (r) {
      if (r->ByteSizeLong() == 0) {
        // Parses as an empty message; the writer never publishes one.
        error = path + ": empty file";
      } else if (auto md = metadata_of(*r); !md) {
        error = path + ": not a headroom report: " + md.error().message;
      }
    } else if (r.error().code == ENOENT || r.error().code == ENOTDIR) {
      auto it = scopes_.find(scope);
      if (it == scopes_.end()) return false;
      Entry& e = it->second;
      if (!e.report) {
        scopes_.erase(it);  // nothing left worth serving
        return true;
      }
      const bool changed = !e.removed || !e.error.empty();
      e.removed = true;
      e.error.clear();
      return changed;
    } else {
      error = r.error().message;
    }

    auto [it, inserted] = scopes_.try_emplace(scope);
    Entry& e = it->second;
    if (error.empty()) {
      e.report = std::move(*r);
      e.error.clear();
      e.removed = false;
      return true;
    }
    const bool changed = inserted || e.removed || e.error != error;
    e.error = std::move(error);
    e.removed = false;
    return changed;
  }

  std::string dir_;
  std::string parent_;  // parent_of(dir_)
  std::string base_;    // dir_'s last component, as the parent's events name it
  ReaderOptions options_;
  int ifd_ = -1;
  int dir_wd_ = -1;
  dev_t dev_ = 0;  // the directory dir_wd_ watches
  ino_t ino_ = 0;
  int anc_wd_ = -1;
  std::string anc_path_;
  std::map<std::string, Entry, std::less<>> scopes_;
  std::function<void(const ScopeState&)> callback_;
};

Result<ReportDirectory> ReportDirectory::open(std::string dir, ReaderOptions options) {
  // "a/b/" would make the parent "a/b"; the trailing slash adds nothing.
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) return logic_error("report directory: empty path");
  if (!(options.stale_intervals > 0) || options.min_stale_ms < 0 || options.max_bytes == 0)
    return logic_error("report directory " + dir +
                       ": stale_intervals must be > 0, min_stale_ms >= 0 and max_bytes > 0");
  const int ifd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (ifd < 0) return system_error(errno, "inotify for report directory " + dir);
  auto impl = std::make_unique<Impl>(std::move(dir), options, ifd);
  if (auto s = impl->start(); !s) return s.error();
  return ReportDirectory(std::move(impl));
}

ReportDirectory::ReportDirectory(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ReportDirectory::ReportDirectory(ReportDirectory&&) noexcept = default;
ReportDirectory& ReportDirectory::operator=(ReportDirectory&&) noexcept = default;
ReportDirectory::~ReportDirectory() = default;

int ReportDirectory::fd() const { return impl_->fd(); }
std::vector<std::string> ReportDirectory::process_events() { return impl_->process_events(); }
bool ReportDirectory::wait(int timeout_ms) { return impl_->wait(timeout_ms); }
std::optional<ScopeState> ReportDirectory::get(std::string_view scope, int64_t now_unix_ms) const {
  return impl_->get(scope, now_unix_ms);
}
std::optional<ScopeState> ReportDirectory::get(std::string_view scope) const {
  return impl_->get(scope, unix_now_ms());
}
std::vector<std::string> ReportDirectory::scopes() const { return impl_->scopes(); }
void ReportDirectory::set_callback(std::function<void(const ScopeState&)> callback) {
  impl_->set_callback(std::move(callback));
}
const std::string& ReportDirectory::dir() const { return impl_->dir(); }
bool ReportDirectory::watching() const { return impl_->watching(); }

}  // namespace headroom::orca
