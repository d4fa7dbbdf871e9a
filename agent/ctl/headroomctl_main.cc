// SPDX-License-Identifier: Apache-2.0
// headroomctl: the operator's view of the report files headroomd publishes.
// Rendering is in render.{h,cc}; this file does the I/O.
#include <dirent.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "agent/config/config.h"
#include "agent/ctl/commands.h"
#include "agent/ctl/render.h"
#include "headroom/orca/clock.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/result.h"

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

void write_all(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// ---------------------------------------------------------------- cat

// --owner: a user name or a numeric uid; the error says which lookup failed.
headroom::Result<uid_t> resolve_owner(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() <= 10) {
    const unsigned long uid = std::stoul(text);
    if (uid > 0xFFFFFFFEUL) return headroom::logic_error("uid " + text + " is out of range");
    return static_cast<uid_t>(uid);
  }
  const passwd* pw = ::getpwnam(text.c_str());
  if (pw == nullptr)
    return headroom::logic_error("no user \"" + text + "\" on this machine (give a user name or a numeric uid)");
  return pw->pw_uid;
}

void add_owner_option(CLI::App* cmd, std::optional<uid_t>& owner) {
  cmd->add_option_function<std::string>(
         "--owner",
         [&owner](const std::string& text) {
           auto uid = resolve_owner(text);
           // CLI11's way to refuse a value: it prints the message and exits 64.
           if (!uid) throw CLI::ValidationError("--owner", uid.error().message);
           owner = *uid;
         },
         "Trust only files this user (name or uid; headroomd's user, e.g. headroom) owns and nobody else may "
         "write; others are rejected")
      ->type_name("USER");
}

// One report file, rendered; false (the error printed) when it cannot be read.
bool cat_one(const std::string& file, bool json, std::optional<uid_t> owner, int64_t now, std::string& out) {
  auto report = orca::read_report_file(file, orca::kMaxReportBytes, owner);
  if (!report) {
    std::fprintf(stderr, "headroomctl: %s: %s\n", file.c_str(), ctl::without_path(report.error().message, file).c_str());
    return false;
  }
  if (json) {
    out += ctl::render_report_json(file, *report, now) + "\n";
  } else {
    for (const auto& line : ctl::render_report(file, *report, now)) out += line + "\n";
  }
  return true;
}

// The instance files beside an endpoint's aggregate report FILE.
headroom::Result<std::vector<std::string>> instance_files_beside(const std::string& file) {
  const auto slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : file.substr(0, slash == 0 ? 1 : slash);
  const std::string base = slash == std::string::npos ? file : file.substr(slash + 1);
  const std::string scope = ctl::scope_of_file_name(base);
  if (!scope.starts_with(orca::kEndpointSignalPrefix) || !ctl::split_instance(scope).instance.empty())
    return headroom::logic_error("--instances needs an endpoint's aggregate report, endpoint.<name>.orca");
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return headroom::system_error(errno, "list " + dir);
  while (const dirent* de = ::readdir(d)) names.emplace_back(de->d_name);
  ::closedir(d);
  std::vector<std::string> paths;
  for (auto& name : ctl::instance_file_names(base, std::move(names)))
    paths.push_back((slash == std::string::npos ? "" : file.substr(0, slash + 1)) + name);
  return paths;
}

// cat FILE [--instances]: with --instances, FILE is an endpoint's aggregate
// and each of its instances' reports follows it (a blank line apart; one
// JSON line each). Exit 1 when any file cannot be read.
int run_cat(const std::string& file, bool json, std::optional<uid_t> owner, bool instances) {
  std::vector<std::string> files{file};
  if (instances) {
    auto more = instance_files_beside(file);
    if (!more) {
      std::fprintf(stderr, "headroomctl: %s: %s\n", file.c_str(), more.error().message.c_str());
      return more.error().code == 0 ? kExitUsage : kExitUnreadable;
    }
    files.insert(files.end(), more->begin(), more->end());
  }
  const int64_t now = orca::unix_now_ms();
  std::string out;
  bool all_read = true;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (i > 0 && !json && !out.empty()) out += "\n";
    all_read = cat_one(files[i], json, owner, now, out) && all_read;
  }
  write_all(out);
  return all_read ? 0 : kExitUnreadable;
}

// ---------------------------------------------------------------- check-config

int run_check_config(const std::string& file) {
  auto loaded = headroom::agent::load_config(file);
  if (!loaded) {
    std::fprintf(stderr, "%s\n", loaded.error().to_string().c_str());
    return headroom::agent::kExitConfig;
  }
  if (auto r = headroom::agent::check_config_on_this_machine(*loaded, file); !r) {
    std::fprintf(stderr, "%s\n", r.error().to_string().c_str());
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

// The table follows the directory through the reader library's
// orca::ReportDirectory: the same inotify handling, validation and
// "directory not there yet" logic that consumers get.
class Watcher {
 public:
  Watcher(std::string dir, milliseconds interval, uint64_t count, std::optional<uid_t> owner)
      : dir_(std::move(dir)), interval_(interval), count_(count), owner_(owner) {
    // "a/b/" names the same directory as "a/b"; the title shows the latter.
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  }

  int run() {
    // Signals arrive through a descriptor so poll() sees them with the
    // directory's events and the loop can end between frames.
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) return fail("sigprocmask");
    Fd sfd(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
    if (sfd.get() < 0) return fail("signalfd");
    orca::ReaderOptions options;
    options.owner = owner_;
    auto reports = orca::ReportDirectory::open(dir_, options);
    if (!reports) {
      std::fprintf(stderr, "headroomctl: %s\n", reports.error().message.c_str());
      return kExitUnreadable;
    }
    tty_ = ::isatty(STDOUT_FILENO) == 1;

    uint64_t frames = 0;
    Clock::time_point last_draw{};
    bool dirty = true;
    for (;;) {
      const auto now = Clock::now();
      if (frames == 0 || now >= last_draw + interval_ || (dirty && now >= last_draw + kCoalesce)) {
        draw(*reports);
        ++frames;
        last_draw = now;
        dirty = false;
        if (count_ != 0 && frames >= count_) return 0;
      }
      auto deadline = last_draw + interval_;
      if (dirty) deadline = std::min(deadline, last_draw + kCoalesce);
      const auto wait = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
      pollfd fds[2] = {{sfd.get(), POLLIN, 0}, {reports->fd(), POLLIN, 0}};
      const int n = ::poll(fds, 2, static_cast<int>(std::max<int64_t>(wait, 0)));
      if (n < 0 && errno != EINTR) return fail("poll");
      if (n <= 0) continue;
      if (fds[0].revents != 0) return 0;  // SIGINT or SIGTERM: a clean exit
      if (fds[1].revents != 0 && !reports->process_events().empty()) dirty = true;
    }
  }

 private:
  static int fail(const char* what) {
    std::fprintf(stderr, "headroomctl: %s: %s\n", what, std::strerror(errno));
    return kExitUnreadable;
  }

  // Why the directory is not being followed, for the "waiting for" notice.
  std::string waiting_reason(const orca::ReportDirectory& reports) const {
    if (reports.watching()) return {};
    struct stat st {};
    if (::stat(dir_.c_str(), &st) != 0) return std::strerror(errno);
    if (!S_ISDIR(st.st_mode)) return "not a directory";
    return "cannot watch it";
  }

  // One row per report file on disk: the reader also remembers scopes whose
  // file went away (as stale), which a table of the directory leaves out.
  void draw(const orca::ReportDirectory& reports) {
    ctl::WatchFrame frame;
    frame.dir = dir_;
    frame.now_unix_ms = orca::unix_now_ms();
    frame.waiting_reason = waiting_reason(reports);
    if (frame.waiting_reason.empty()) {
      for (const auto& scope : reports.scopes()) {
        auto state = reports.get(scope, frame.now_unix_ms);
        if (!state || state->removed) continue;
        ctl::WatchEntry e;
        e.scope = scope;
        if (state->error.empty())
          e.report = std::move(state->report);
        else
          e.error = ctl::without_path(state->error, dir_ + "/" + orca::report_file_name(scope));
        frame.entries.push_back(std::move(e));
      }
    }
    std::string out = tty_ ? "\x1b[H\x1b[2J" : "";
    for (const auto& line : ctl::render_watch_frame(frame)) out += line + "\n";
    if (!tty_) out += "\n";  // frames in a log are separated by a blank line
    write_all(out);
  }

  std::string dir_;
  milliseconds interval_;
  uint64_t count_;
  std::optional<uid_t> owner_;
  bool tty_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"headroomctl: inspect the ORCA load reports that headroomd publishes", "headroomctl"};
  app.set_version_flag("--version", std::string("headroomctl ") + HEADROOM_VERSION);
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 success, 1 a report file cannot be read or parsed (buffer: the verdict\n"
      "failed), 64 usage error, 69 a service to read is unavailable (tune: Prometheus, /metrics),\n"
      "78 invalid configuration (check-config), 130 buffer interrupted.");

  std::string cat_file;
  bool cat_json = false, cat_instances = false;
  auto* cat = app.add_subcommand("cat", "Print one report file in readable form, or as JSON");
  cat->add_option("FILE", cat_file, "Report file, e.g. /run/orca/node.orca")->required();
  std::optional<uid_t> cat_owner, watch_owner;
  add_owner_option(cat, cat_owner);
  cat->add_flag("--json", cat_json,
                "One JSON line: file, age_ms, stale, stale_reason, report (protobuf JSON, .proto field names)");
  cat->add_flag("--instances", cat_instances,
                "FILE is an endpoint's aggregate (endpoint.NAME.orca): print each of its instances' reports "
                "(endpoint.NAME@INSTANCE.orca, one per network namespace serving it) after it");

  std::string watch_dir = "/run/orca";
  int interval_ms = 1000;
  uint64_t count = 0;
  auto* watch = app.add_subcommand("watch", "Live table of every report file in a directory, like top");
  watch->footer(
      "Redraws when a report file changes (inotify) and at least every --interval-ms.\n"
      "DIR may also be given as --orca-dir DIR. Waits for it if it does not exist yet.\n"
      "An endpoint's instances (its servers of one network namespace: a pod, or the host)\n"
      "are listed under its row as @INSTANCE; GONE marks one whose servers stopped.\n"
      "Stop with Ctrl-C. When stdout is not a terminal, frames are printed one after\n"
      "another, each followed by a blank line.");
  auto* watch_dir_arg =
      watch->add_option("DIR", watch_dir, "Directory of report files (agent.orca_dir)")->capture_default_str();
  watch->add_option("--orca-dir", watch_dir, "The same directory, named as headroomd and the other commands name it")
      ->type_name("DIR")
      ->excludes(watch_dir_arg);
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
  add_owner_option(watch, watch_owner);

  std::string config_file;
  auto* check = app.add_subcommand("check-config",
                                   "Validate a headroomd configuration file (syntax, keys, values)");
  check->footer(
      "Exit status: 0 valid, 78 invalid (the error is printed as file:line:column: key: message).\n"
      "Like headroomd --check-config, it also checks that node.cgroup exists on this machine.");
  check->add_option("FILE", config_file, "Configuration file")->required();

  auto [shed, run_shed] = headroom::ctl::add_shed_command(app);
  auto [header, run_header] = headroom::ctl::add_header_command(app);
  auto [oob, run_oob] = headroom::ctl::add_oob_command(app);
  auto [buffer, run_buffer] = headroom::ctl::add_buffer_command(app);
  auto [tune, run_tune] = headroom::ctl::add_tune_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, the version or the error
    return rc == 0 ? 0 : kExitUsage;
  }

  if (cat->parsed()) return run_cat(cat_file, cat_json, cat_owner, cat_instances);
  if (watch->parsed()) return Watcher(watch_dir, milliseconds(interval_ms), count, watch_owner).run();
  if (check->parsed()) return run_check_config(config_file);
  if (shed->parsed()) return run_shed();
  if (header->parsed()) return run_header();
  if (oob->parsed()) return run_oob();
  if (buffer->parsed()) return run_buffer();
  if (tune->parsed()) return run_tune();
  return kExitUsage;  // unreachable: require_subcommand(1)
}
