// headroomctl: the operator's view of the report files headroomd publishes.
// Rendering is in ctl_render.{h,cc}; this file does the I/O.
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "agent/config.h"
#include "agent/ctl_commands.h"
#include "agent/ctl_render.h"
#include "headroom/orca/report.h"

namespace {

namespace ctl = headroom::ctl;
namespace orca = headroom::orca;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kExitUnreadable = 1;  // a report file cannot be read or parsed
constexpr int kExitUsage = 64;      // EX_USAGE
// Inotify bursts (the agent rewrites every file each interval) redraw at most
// this often.
constexpr milliseconds kCoalesce{100};

int64_t unix_now_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void write_all(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// ---------------------------------------------------------------- cat

int run_cat(const std::string& file, bool json) {
  auto report = orca::read_report_file(file);
  if (!report) {
    std::fprintf(stderr, "headroomctl: %s: %s\n", file.c_str(), ctl::without_path(report.error().message, file).c_str());
    return kExitUnreadable;
  }
  const int64_t now = unix_now_ms();
  std::string out;
  if (json) {
    out = ctl::render_report_json(file, *report, now) + "\n";
  } else {
    for (const auto& line : ctl::render_report(file, *report, now)) out += line + "\n";
  }
  write_all(out);
  return 0;
}

// ---------------------------------------------------------------- check-config

int run_check_config(const std::string& file) {
  auto loaded = headroom::agent::load_config(file);
  if (const auto* e = std::get_if<headroom::agent::ConfigError>(&loaded)) {
    std::fprintf(stderr, "%s\n", e->to_string().c_str());
    return headroom::agent::kExitConfig;
  }
  if (auto e = headroom::agent::check_config_on_this_machine(std::get<headroom::agent::Config>(loaded), file)) {
    std::fprintf(stderr, "%s\n", e->to_string().c_str());
    return headroom::agent::kExitConfig;
  }
  std::printf("%s: configuration is valid\n", file.c_str());
  return 0;
}

// ---------------------------------------------------------------- watch

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string parent_of(const std::string& dir) {
  const auto slash = dir.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return dir.substr(0, slash);
}

class Watcher {
 public:
  Watcher(std::string dir, milliseconds interval, uint64_t count)
      : dir_(std::move(dir)), interval_(interval), count_(count) {
    // "a/b/" would make the parent "a/b"; the trailing slash adds nothing.
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
    parent_ = parent_of(dir_);
  }

  int run() {
    // Signals arrive through a descriptor so poll() sees them with the
    // inotify events and the loop can end between frames.
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) return fail("sigprocmask");
    Fd sfd(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
    if (sfd.get() < 0) return fail("signalfd");
    Fd ifd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (ifd.get() < 0)  // still useful: frames follow the interval only
      std::fprintf(stderr, "headroomctl: inotify: %s; refreshing every %lld ms only\n", std::strerror(errno),
                   static_cast<long long>(interval_.count()));
    inotify_ = ifd.get();
    tty_ = ::isatty(STDOUT_FILENO) == 1;

    uint64_t frames = 0;
    Clock::time_point last_draw{};
    bool dirty = true;
    for (;;) {
      const auto now = Clock::now();
      if (frames == 0 || now >= last_draw + interval_ || (dirty && now >= last_draw + kCoalesce)) {
        draw();
        ++frames;
        last_draw = now;
        dirty = false;
        if (count_ != 0 && frames >= count_) return 0;
      }
      auto deadline = last_draw + interval_;
      if (dirty) deadline = std::min(deadline, last_draw + kCoalesce);
      const auto wait = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
      pollfd fds[2] = {{sfd.get(), POLLIN, 0}, {inotify_, POLLIN, 0}};
      const int n = ::poll(fds, inotify_ >= 0 ? 2 : 1, static_cast<int>(std::max<int64_t>(wait, 0)));
      if (n < 0 && errno != EINTR) return fail("poll");
      if (n <= 0) continue;
      if (fds[0].revents != 0) return 0;  // SIGINT or SIGTERM: a clean exit
      if (inotify_ >= 0 && fds[1].revents != 0 && drain_events()) dirty = true;
    }
  }

 private:
  static int fail(const char* what) {
    std::fprintf(stderr, "headroomctl: %s: %s\n", what, std::strerror(errno));
    return kExitUnreadable;
  }

  // Watches the directory, or, while it cannot, its parent so that its
  // creation is noticed at once. Returns the reason it is not watched, or "".
  std::string ensure_watch() {
    if (inotify_ < 0) {
      // Without inotify, only tell whether the directory is there.
      DIR* d = ::opendir(dir_.c_str());
      if (d == nullptr) return std::strerror(errno);
      ::closedir(d);
      return {};
    }
    if (dir_wd_ >= 0) return {};
    const int wd = ::inotify_add_watch(inotify_, dir_.c_str(),
                                       IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                           IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
    if (wd >= 0) {
      dir_wd_ = wd;
      if (parent_wd_ >= 0 && parent_wd_ != dir_wd_) ::inotify_rm_watch(inotify_, parent_wd_);
      parent_wd_ = -1;
      return {};
    }
    const std::string reason = errno == ENOTDIR ? "not a directory" : std::strerror(errno);
    if (parent_wd_ < 0) parent_wd_ = ::inotify_add_watch(inotify_, parent_.c_str(), IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
    return reason;
  }

  // Reads pending events; true when the table may have changed.
  bool drain_events() {
    alignas(inotify_event) char buf[8192];
    bool changed = false;
    for (;;) {
      const ssize_t n = ::read(inotify_, buf, sizeof buf);
      if (n <= 0) break;  // EAGAIN: drained
      for (ssize_t off = 0; off < n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        if ((ev->mask & IN_Q_OVERFLOW) != 0) {
          changed = true;
        } else if (ev->wd == dir_wd_ && dir_wd_ >= 0) {
          if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) {
            // Gone or renamed away: a watch on the moved directory would
            // report the wrong one, so drop it and wait for the path again.
            ::inotify_rm_watch(inotify_, dir_wd_);
            dir_wd_ = -1;
            changed = true;
          } else if (ev->len == 0 || ev->name[0] != '.') {
            // Hidden names are the writer's temporaries: the rename that
            // follows is what changes the table.
            changed = true;
          }
        } else if (ev->wd == parent_wd_ && parent_wd_ >= 0) {
          if ((ev->mask & IN_IGNORED) != 0) parent_wd_ = -1;  // the parent went away too
          changed = true;  // maybe our directory appeared; draw() re-adds the watch
        }
      }
    }
    return changed;
  }

  // Reads every report file; an ENOENT error means it vanished between the
  // listing and the read, which the next frame shows anyway.
  std::string scan(std::vector<ctl::WatchEntry>& entries) {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return errno == ENOTDIR ? "not a directory" : std::strerror(errno);
    std::vector<std::string> names;
    while (const dirent* de = ::readdir(d)) {
      std::string scope = ctl::scope_of_file_name(de->d_name);
      if (!scope.empty()) names.emplace_back(de->d_name);
    }
    ::closedir(d);
    for (const auto& name : names) {
      const std::string path = dir_ + "/" + name;
      auto report = orca::read_report_file(path);
      ctl::WatchEntry e;
      e.scope = ctl::scope_of_file_name(name);
      if (report) {
        e.report = std::move(*report);
      } else {
        if (report.error().code == ENOENT) continue;
        e.error = ctl::without_path(report.error().message, path);
      }
      entries.push_back(std::move(e));
    }
    return {};
  }

  void draw() {
    ctl::WatchFrame frame;
    frame.dir = dir_;
    frame.waiting_reason = ensure_watch();
    if (frame.waiting_reason.empty()) frame.waiting_reason = scan(frame.entries);
    frame.now_unix_ms = unix_now_ms();
    std::string out = tty_ ? "\x1b[H\x1b[2J" : "";
    for (const auto& line : ctl::render_watch_frame(frame)) out += line + "\n";
    if (!tty_) out += "\n";  // frames in a log are separated by a blank line
    write_all(out);
  }

  std::string dir_, parent_;
  milliseconds interval_;
  uint64_t count_;
  int inotify_ = -1;
  int dir_wd_ = -1, parent_wd_ = -1;
  bool tty_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"headroomctl: inspect the ORCA load reports that headroomd publishes", "headroomctl"};
  app.set_version_flag("--version", std::string("headroomctl ") + HEADROOM_VERSION);
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 success, 1 a report file cannot be read or parsed, 64 usage error,\n"
      "78 invalid configuration (check-config).");

  std::string cat_file;
  bool cat_json = false;
  auto* cat = app.add_subcommand("cat", "Print one report file in readable form, or as JSON");
  cat->add_option("FILE", cat_file, "Report file, e.g. /run/orca/node.orca")->required();
  cat->add_flag("--json", cat_json,
                "One JSON line: file, age_ms, stale, stale_reason, report (protobuf JSON, .proto field names)");

  std::string watch_dir = "/run/orca";
  int interval_ms = 1000;
  uint64_t count = 0;
  auto* watch = app.add_subcommand("watch", "Live table of every report file in a directory, like top");
  watch->footer(
      "Redraws when a report file changes (inotify) and at least every --interval-ms.\n"
      "Waits for DIR if it does not exist yet. Stop with Ctrl-C. When stdout is not a\n"
      "terminal, frames are printed one after another, each followed by a blank line.");
  watch->add_option("DIR", watch_dir, "Directory of report files (agent.orca_dir)")->capture_default_str();
  watch->add_option("--interval-ms", interval_ms, "Redraw at least this often, in milliseconds, to refresh ages")
      ->capture_default_str()
      ->check(CLI::Range(10, 3'600'000));
  // CLI11 would read "-1" as 2^64 - 1, i.e. forever.
  const CLI::Validator frames(
      [](std::string& text) -> std::string {
        return text.find('-') == std::string::npos ? "" : "must be 0 (run until stopped) or a number of frames";
      },
      "FRAMES");
  watch->add_option("--count", count, "Stop after this many frames; 0 runs until SIGINT/SIGTERM")
      ->capture_default_str()
      ->check(frames);

  std::string config_file;
  auto* check = app.add_subcommand("check-config",
                                   "Validate a headroomd configuration file (syntax, keys, values)");
  check->footer(
      "Exit status: 0 valid, 78 invalid (the error is printed as file:line:column: key: message).\n"
      "Like headroomd --check-config, it also checks that node.cgroup exists on this machine.");
  check->add_option("FILE", config_file, "Configuration file")->required();

  auto [shed, run_shed] = headroom::ctl::add_shed_command(app);
  auto [header, run_header] = headroom::ctl::add_header_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, the version or the error
    return rc == 0 ? 0 : kExitUsage;
  }

  if (cat->parsed()) return run_cat(cat_file, cat_json);
  if (watch->parsed()) return Watcher(watch_dir, milliseconds(interval_ms), count).run();
  if (check->parsed()) return run_check_config(config_file);
  if (shed->parsed()) return run_shed();
  if (header->parsed()) return run_header();
  return kExitUsage;  // unreachable: require_subcommand(1)
}
