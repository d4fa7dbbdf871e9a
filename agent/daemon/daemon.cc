// SPDX-License-Identifier: Apache-2.0
#include "agent/daemon/daemon.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "agent/daemon/logging.h"
#include "agent/daemon/pipeline.h"

namespace headroom::agent {
namespace {

constexpr int kExitIoErr = 74;  // EX_IOERR: could not publish in --once mode
constexpr int kExitOsErr = 71;  // EX_OSERR: timerfd/signalfd failed

void notify(const std::string& state) {
  // sd_notify is a no-op returning 0 when NOTIFY_SOCKET is unset.
  ::sd_notify(0, state.c_str());
}

// WATCHDOG=1 from the loop itself, so that only a stuck loop stops the pings:
// after every tick, and whenever a quarter of WATCHDOG_USEC passed without one
// (an interval longer than that must not starve systemd, which recommends
// pinging at half the timeout at the latest).
class Watchdog {
 public:
  Watchdog() {
    uint64_t usec = 0;
    if (::sd_watchdog_enabled(0, &usec) > 0 && usec > 0) every_ns_ = static_cast<int64_t>(usec) * 1000 / 4;
  }
  bool enabled() const { return every_ns_ > 0; }
  void start(int64_t now) { last_ = now; }
  void ping(int64_t now) {
    if (!enabled()) return;
    notify("WATCHDOG=1");
    last_ = now;
  }
  void ping_if_due(int64_t now) {
    if (enabled() && now - last_ >= every_ns_) ping(now);
  }
  // poll's timeout until the next ping is due; -1 without a watchdog.
  int timeout_ms(int64_t now) const {
    if (!enabled()) return -1;
    const int64_t left = last_ + every_ns_ - now;
    return left <= 0 ? 0 : static_cast<int>((left + 999'999) / 1'000'000);
  }

 private:
  int64_t every_ns_ = 0;
  int64_t last_ = 0;
};

bool arm_timer(int tfd, std::chrono::nanoseconds interval) {
  itimerspec its{};
  its.it_interval.tv_sec = static_cast<time_t>(interval.count() / 1'000'000'000);
  its.it_interval.tv_nsec = static_cast<long>(interval.count() % 1'000'000'000);
  its.it_value = its.it_interval;
  return ::timerfd_settime(tfd, 0, &its, nullptr) == 0;
}

int log_config_error(const Error& e) {
  spdlog::error("{}", e.to_string());
  return kExitConfig;
}

}  // namespace

void apply_overrides(Config& c, const Overrides& o) {
  if (o.orca_dir) c.orca_dir = *o.orca_dir;
  if (o.proc_root) c.proc_root = *o.proc_root;
  if (o.sys_root) c.sys_root = *o.sys_root;
  if (o.log_level) c.log_level = *o.log_level;
  c.endpoints.insert(c.endpoints.end(), o.endpoints.begin(), o.endpoints.end());
  c.dependencies.insert(c.dependencies.end(), o.dependencies.begin(), o.dependencies.end());
  if (o.no_ebpf) c.ebpf = EbpfMode::off;
}

Result<Config> load_effective_config(const DaemonOptions& options) {
  struct stat st{};
  const bool absent = !options.config_path_explicit && ::stat(options.config_path.c_str(), &st) != 0 && errno == ENOENT;
  Result<Config> loaded = absent ? Result<Config>(Config{}) : load_config(options.config_path);
  if (loaded) {
    apply_overrides(*loaded, options.overrides);
    // The file's endpoints were checked on their own; now with the flags'.
    if (!options.overrides.endpoints.empty())
      if (auto r = validate_endpoints(loaded->endpoints, "--endpoint"); !r) return std::move(r).error();
    if (!options.overrides.dependencies.empty())
      if (auto r = validate_dependencies(loaded->dependencies, "--dependency"); !r) return std::move(r).error();
  }
  return loaded;
}

namespace {

// --once: a baseline, one interval, one publish.
int run_once(Agent& agent, std::chrono::nanoseconds interval) {
  agent.tick(TickTime::now());  // baseline
  const auto ns = interval.count();
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (::clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
  }
  return agent.tick(TickTime::now()) ? 0 : kExitIoErr;
}

// The loop's state: the agent, its descriptors, what systemd was told.
class Loop {
 public:
  Loop(const DaemonOptions& options, Agent& agent) : options_(options), agent_(agent) {}
  ~Loop() {
    if (tfd_ >= 0) ::close(tfd_);
    if (sfd_ >= 0) ::close(sfd_);
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // SIGTERM, SIGINT and SIGHUP through a signalfd, the interval through a
  // timerfd. False (logged) when the kernel refuses either.
  bool open() {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) {
      spdlog::critical("sigprocmask: {}", std::strerror(errno));
      return false;
    }
    sfd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    tfd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (sfd_ < 0 || tfd_ < 0 || !arm_timer(tfd_, agent_.config().interval)) {
      spdlog::critical("cannot set up the sampling timer or signals: {}", std::strerror(errno));
      return false;
    }
    return true;
  }

  // Until a stop signal: the exit code.
  int run() {
    agent_.tick(TickTime::now());  // baseline for the rates
    pollfd fds[2] = {{tfd_, POLLIN, 0}, {sfd_, POLLIN, 0}};
    watchdog_.start(monotonic_ns());
    for (;;) {
      const int n = ::poll(fds, 2, watchdog_.timeout_ms(monotonic_ns()));
      if (n < 0 && errno != EINTR) {
        spdlog::critical("poll: {}", std::strerror(errno));
        return kExitOsErr;
      }
      watchdog_.ping_if_due(monotonic_ns());
      if (n <= 0) continue;
      if (fds[0].revents & POLLIN) on_timer();
      if (fds[1].revents & POLLIN) {
        signalfd_siginfo si{};
        while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
          if (si.ssi_signo == SIGHUP) {
            reload();
            continue;
          }
          spdlog::info("{}: publishing a final report and stopping", strsignal(static_cast<int>(si.ssi_signo)));
          notify("STOPPING=1");
          agent_.stop(TickTime::now());
          return 0;
        }
      }
    }
  }

 private:
  void on_timer() {
    uint64_t expirations = 0;
    // However many intervals passed (a stopped process, a slow tick), one
    // tick: no burst of catch-up reports.
    if (::read(tfd_, &expirations, sizeof expirations) <= 0) return;
    const bool published = agent_.tick(TickTime::now());
    if (published && !ready_) {
      ready_ = true;
      status_sent_ = status_line(agent_);
      notify("READY=1\n" + status_sent_);
    } else if (std::string s = status_line(agent_); s != status_sent_) {
      // A publisher that starts or stops failing, a probe whose reads
      // fail: said in STATUS= when it changes (not every tick).
      status_sent_ = std::move(s);
      notify(status_sent_);
    }
    watchdog_.ping(monotonic_ns());
  }

  // SIGHUP. Nothing changes until the whole new pipeline is built: the log
  // level, the timer and the running pipeline stay as they are when the
  // reload is rejected (an invalid file) or fails (a valid file that cannot
  // be put in place: an address taken, a probe that cannot attach).
  void reload() {
    notify("RELOADING=1");
    spdlog::info("SIGHUP: reloading {}", options_.config_path);
    auto next = load_effective_config(options_);
    if (!next) {
      spdlog::error("reload rejected, the running configuration stays in force: {}", next.error().to_string());
      agent_.reload_failed("rejected: " + next.error().to_string());
    } else if (auto rebuilt = build_reload(std::move(next).value(), agent_); !rebuilt) {
      spdlog::error("reload failed, the running configuration stays in force: {}", rebuilt.error().message);
      agent_.reload_failed(rebuilt.error().message);
    } else {
      Pipeline& p = rebuilt.value();
      announce(p);
      const bool interval_changed = p.config.interval != agent_.config().interval;
      set_log_level(p.config.log_level);
      agent_.replace(std::move(p), TickTime::now());
      if (interval_changed) arm_timer(tfd_, agent_.config().interval);
      spdlog::info("configuration reloaded");
    }
    status_sent_ = status_line(agent_);
    notify("READY=1\n" + status_sent_);
    watchdog_.ping_if_due(monotonic_ns());
  }

  const DaemonOptions& options_;
  Agent& agent_;
  int sfd_ = -1, tfd_ = -1;
  Watchdog watchdog_;
  bool ready_ = false;
  std::string status_sent_;  // STATUS= is sent again only when it changes
};

}  // namespace

int run_daemon(const DaemonOptions& options) {
  auto loaded = load_effective_config(options);
  if (!loaded) return log_config_error(loaded.error());
  Config config = std::move(loaded).value();
  set_log_level(config.log_level);
  if (!options.config_path_explicit && ::access(options.config_path.c_str(), F_OK) != 0)
    spdlog::info("no configuration file at {}; running with the defaults", options.config_path);

  auto built = build_pipeline(config);
  if (!built) {
    spdlog::error("{}", built.error().message);
    return exit_status(built.error());
  }
  announce(built.value());
  Agent agent(std::move(built.value()));
  if (options.once) return run_once(agent, config.interval);

  Loop loop(options, agent);
  if (!loop.open()) return kExitOsErr;
  spdlog::info("headroomd started: {} every {}, orca directory {}",
               config.cgroup.empty() ? std::string("host") : "cgroup " + config.cgroup,
               format_duration(config.interval), config.orca_dir);
  return loop.run();
}

}  // namespace headroom::agent
