#include "agent/daemon.h"

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

#include "agent/endpoint_sampler.h"
#include "agent/logging.h"
#include "agent/normalize.h"
#include "agent/report_builder.h"
#include "agent/sampler.h"
#include "publishers/envoy_bridge.h"
#include "publishers/orca_dir_publisher.h"

namespace headroom::agent {
namespace {

constexpr int kExitIoErr = 74;  // EX_IOERR: could not publish in --once mode
constexpr int kExitOsErr = 71;  // EX_OSERR: timerfd/signalfd failed

int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t unix_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

int64_t to_ms(std::chrono::nanoseconds d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

// One [[envoy]] entry's bridge, and whether its last write failed (errors
// are logged once per change, like node.orca's).
struct Bridge {
  std::unique_ptr<publishers::EnvoyBridge> bridge;
  bool failing = false;
};

// Everything that a configuration determines. A reload builds a new one next to
// the running one and swaps only when all of it could be built.
struct Pipeline {
  Config config;
  std::unique_ptr<NodeSampler> sampler;
  std::unique_ptr<EndpointSampler> endpoints;  // [[endpoint]]s, eBPF
  std::unique_ptr<publishers::OrcaDirPublisher> publisher;
  std::vector<Bridge> bridges;  // the node-scope [[envoy]] entries, in file order
  Smoother smoother{1.0};
};

enum class BuildFailure { config, orca_dir, envoy_file };
struct BuildError {
  BuildFailure kind;
  std::string message;
};

std::variant<Pipeline, BuildError> build_pipeline(Config config) {
  Pipeline p;
  auto sampler = NodeSampler::create(config);
  if (!sampler) return BuildError{BuildFailure::config, "node.cgroup: " + sampler.error().message};
  p.sampler = std::move(sampler.value());
  p.endpoints = std::make_unique<EndpointSampler>(config);
  const auto alpha = ewma_alpha(config.interval.count(), config.smoothing.count());
  p.smoother = Smoother(alpha);
  auto pub = publishers::OrcaDirPublisher::open(config.orca_dir, orca::WriterOptions{0644, config.fsync});
  if (!pub) return BuildError{BuildFailure::orca_dir, "agent.orca_dir: " + pub.error().message};
  p.publisher = std::make_unique<publishers::OrcaDirPublisher>(std::move(pub.value()));
  for (std::size_t i = 0; i < config.envoy.size(); ++i) {
    const auto& e = config.envoy[i];
    const std::string key = "envoy[" + std::to_string(i) + "]";
    auto value = publishers::parse_envoy_value(e.value);  // the configuration validated it
    if (!value) return BuildError{BuildFailure::config, key + ".value: unknown value \"" + e.value + "\""};
    auto bridge = publishers::EnvoyBridge::open({e.file, *value, e.neutral, config.fsync});
    if (!bridge) return BuildError{BuildFailure::envoy_file, key + ".file: " + bridge.error().message};
    p.bridges.push_back({std::make_unique<publishers::EnvoyBridge>(std::move(bridge.value())), false});
  }
  p.config = std::move(config);
  return p;
}

// Writes each bridge's pressure (its neutral value when `neutral`); a failing
// bridge never holds up the others or node.orca.
void publish_bridges(std::vector<Bridge>& bridges, const orca::Report* report, bool neutral) {
  for (auto& b : bridges) {
    auto r = neutral || report == nullptr ? b.bridge->publish_neutral() : b.bridge->publish(*report);
    if (!r) {
      if (!b.failing)
        spdlog::error("cannot publish Envoy pressure to {}: {}; Envoy keeps the previous value", b.bridge->file(),
                      r.error().message);
      b.failing = true;
    } else {
      if (b.failing) spdlog::info("publishing Envoy pressure to {} again", b.bridge->file());
      b.failing = false;
    }
  }
}

void log_bridges(const std::vector<Bridge>& bridges) {
  for (const auto& b : bridges) {
    const auto& o = b.bridge->options();
    std::string neutral = publishers::format_envoy_pressure(o.neutral);
    neutral.pop_back();  // the newline
    spdlog::info("Envoy bridge: node {} -> {} (neutral {})", publishers::envoy_value_name(o.value), o.file, neutral);
  }
}

void notify(const std::string& state) {
  // sd_notify is a no-op returning 0 when NOTIFY_SOCKET is unset.
  ::sd_notify(0, state.c_str());
}

class Agent {
 public:
  explicit Agent(Pipeline p) : p_(std::move(p)) {}

  // One sampling step; publishes when the sample is complete enough.
  bool tick(bool stopped = false) {
    const int64_t now = monotonic_ns();
    if (!stopped) {
      last_ = p_.sampler->sample(now);
      smooth(p_.smoother, last_);
      p_.endpoints->sample(now);
      if (p_.config.include_endpoints) add_endpoint_signals();
    }
    if (!have_baseline_) {
      have_baseline_ = true;
      return false;
    }
    ReportMeta meta{unix_ms(), ++seq_, to_ms(p_.config.interval), stopped};
    const auto report = build_node_report(last_, p_.config, meta);
    auto r = p_.publisher->publish(orca::kNodeScope, report);
    // Right after node.orca, whether or not it could be written. On stop,
    // stop() writes the neutral values instead.
    if (!stopped) publish_bridges(p_.bridges, &report, false);
    if (!r) {
      if (!publish_failing_) spdlog::error("cannot publish {}/node.orca: {}; the previous report stays in place",
                                           p_.publisher->dir(), r.error().message);
      publish_failing_ = true;
      return false;
    }
    if (publish_failing_) spdlog::info("publishing {}/node.orca again", p_.publisher->dir());
    publish_failing_ = false;
    publish_endpoints(meta);
    ++published_;
    return true;
  }

  // endpoint.<name>.orca for each endpoint; a failure is logged once per
  // change, like node.orca's, and never holds up the others.
  void publish_endpoints(const ReportMeta& meta) {
    bool failing = false;
    std::string first_error;
    for (const auto& e : p_.endpoints->endpoints()) {
      const EndpointSignals* signals = p_.endpoints->running() && e.signals ? &*e.signals : nullptr;
      const auto report = build_endpoint_report(e.config, signals, meta);
      if (auto r = p_.publisher->publish(endpoint_scope(e.config.name), report); !r) {
        if (!failing) first_error = r.error().message;
        failing = true;
      }
    }
    if (failing && !endpoints_failing_)
      spdlog::error("cannot publish endpoint reports into {}: {}; the previous reports stay in place",
                    p_.publisher->dir(), first_error);
    if (!failing && endpoints_failing_) spdlog::info("publishing endpoint reports again");
    endpoints_failing_ = failing;
  }

  // node.include_endpoints: each endpoint's composite as "endpoint.<name>".
  void add_endpoint_signals() {
    if (!p_.endpoints->running()) return;
    for (const auto& e : p_.endpoints->endpoints()) {
      if (!e.signals) continue;
      if (auto v = endpoint_composite(*e.signals)) last_.signals["endpoint." + e.config.name] = *v;
    }
  }

  static std::string endpoint_scope(const std::string& name) { return "endpoint." + name; }

  // Clean stop: the final report marked stopped, then every bridge's neutral
  // value, since Envoy would otherwise keep the last pressure for ever.
  void stop() {
    tick(/*stopped=*/true);
    publish_bridges(p_.bridges, nullptr, true);
  }

  // Takes the new pipeline's parts. The sampler starts from a fresh baseline
  // taken now, so the next tick publishes a complete report. A bridge whose
  // file is no longer configured gets its neutral value once, so Envoy is not
  // left with a pressure nobody updates.
  void replace(Pipeline next) {
    std::vector<Bridge> removed;
    for (auto& b : p_.bridges) {
      const bool kept = std::any_of(next.bridges.begin(), next.bridges.end(),
                                    [&](const Bridge& n) { return n.bridge->file() == b.bridge->file(); });
      if (!kept) removed.push_back(std::move(b));
    }
    for (const auto& b : removed)
      spdlog::info("Envoy bridge {} removed from the configuration; writing its neutral value", b.bridge->file());
    publish_bridges(removed, nullptr, true);
    // Endpoint reports whose endpoint is gone would only go stale: remove them.
    for (const auto& old : p_.config.endpoints) {
      const bool kept = std::any_of(next.config.endpoints.begin(), next.config.endpoints.end(),
                                    [&](const EndpointConfig& n) { return n.name == old.name; });
      if (kept) continue;
      if (auto r = next.publisher->remove(endpoint_scope(old.name)); !r)
        spdlog::warn("endpoint {} removed from the configuration, but its report stays: {}", old.name,
                     r.error().message);
      else
        spdlog::info("endpoint {} removed from the configuration; removed its report", old.name);
    }
    next.sampler->sample(monotonic_ns());
    next.endpoints->sample(monotonic_ns());
    const bool same_smoothing =
        next.config.interval == p_.config.interval && next.config.smoothing == p_.config.smoothing;
    if (same_smoothing) next.smoother = std::move(p_.smoother);
    p_ = std::move(next);
  }

  const Config& config() const { return p_.config; }
  const EndpointSampler& endpoints() const { return *p_.endpoints; }
  uint64_t published() const { return published_; }

 private:
  Pipeline p_;
  NodeSample last_;
  bool have_baseline_ = false;
  bool publish_failing_ = false;
  bool endpoints_failing_ = false;
  uint64_t seq_ = 0;
  uint64_t published_ = 0;
};

std::string status_line(const Agent& a) {
  const auto& c = a.config();
  std::string s = "STATUS=publishing node.orca";
  if (!c.endpoints.empty())
    s += " and " + std::to_string(c.endpoints.size()) + " endpoint report(s) (" + a.endpoints().status() + ")";
  return s + " to " + c.orca_dir + " every " + format_duration(c.interval) +
         (c.cgroup.empty() ? std::string(" (host)") : " (cgroup " + c.cgroup + ")");
}

bool arm_timer(int tfd, std::chrono::nanoseconds interval) {
  itimerspec its{};
  its.it_interval.tv_sec = static_cast<time_t>(interval.count() / 1'000'000'000);
  its.it_interval.tv_nsec = static_cast<long>(interval.count() % 1'000'000'000);
  its.it_value = its.it_interval;
  return ::timerfd_settime(tfd, 0, &its, nullptr) == 0;
}

int log_config_error(const ConfigError& e) {
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
  if (o.no_ebpf) c.ebpf = EbpfMode::off;
}

std::variant<Config, ConfigError> load_effective_config(const DaemonOptions& options) {
  std::variant<Config, ConfigError> loaded;
  struct stat st{};
  if (!options.config_path_explicit && ::stat(options.config_path.c_str(), &st) != 0 && errno == ENOENT) {
    loaded = Config{};
  } else {
    loaded = load_config(options.config_path);
  }
  if (auto* c = std::get_if<Config>(&loaded)) {
    apply_overrides(*c, options.overrides);
    // The file's endpoints were checked on their own; now with the flags'.
    if (!options.overrides.endpoints.empty())
      if (auto e = validate_endpoints(c->endpoints, "--endpoint")) return *e;
  }
  return loaded;
}

int run_daemon(const DaemonOptions& options) {
  auto loaded = load_effective_config(options);
  if (auto* e = std::get_if<ConfigError>(&loaded)) return log_config_error(*e);
  Config config = std::get<Config>(std::move(loaded));
  set_log_level(config.log_level);
  if (!options.config_path_explicit && ::access(options.config_path.c_str(), F_OK) != 0)
    spdlog::info("no configuration file at {}; running with the defaults", options.config_path);

  auto built = build_pipeline(config);
  if (auto* e = std::get_if<BuildError>(&built)) {
    spdlog::error("{}", e->message);
    return e->kind == BuildFailure::config ? kExitConfig : kExitCantCreat;
  }
  log_bridges(std::get<Pipeline>(built).bridges);
  Agent agent(std::get<Pipeline>(std::move(built)));

  if (options.once) {
    agent.tick();  // baseline
    const auto ns = config.interval.count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    while (::clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
    }
    return agent.tick() ? 0 : kExitIoErr;
  }

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) {
    spdlog::critical("sigprocmask: {}", std::strerror(errno));
    return kExitOsErr;
  }
  const int sfd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  const int tfd = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (sfd < 0 || tfd < 0 || !arm_timer(tfd, config.interval)) {
    spdlog::critical("cannot set up the sampling timer or signals: {}", std::strerror(errno));
    return kExitOsErr;
  }

  int watchdog = ::sd_watchdog_enabled(0, nullptr) > 0;
  spdlog::info("headroomd started: {} every {}, orca directory {}",
               config.cgroup.empty() ? std::string("host") : "cgroup " + config.cgroup,
               format_duration(config.interval), config.orca_dir);
  agent.tick();  // baseline for the rates
  bool ready = false;
  pollfd fds[2] = {{tfd, POLLIN, 0}, {sfd, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::critical("poll: {}", std::strerror(errno));
      return kExitOsErr;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t expirations = 0;
      if (::read(tfd, &expirations, sizeof expirations) > 0) {
        const bool published = agent.tick();
        if (published && !ready) {
          ready = true;
          notify("READY=1\n" + status_line(agent));
        }
        if (watchdog) notify("WATCHDOG=1");
      }
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si{};
      while (::read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo == SIGHUP) {
          notify("RELOADING=1");
          spdlog::info("SIGHUP: reloading {}", options.config_path);
          auto next = load_effective_config(options);
          if (auto* e = std::get_if<ConfigError>(&next)) {
            spdlog::error("reload rejected, the running configuration stays in force: {}", e->to_string());
          } else {
            auto rebuilt = build_pipeline(std::get<Config>(std::move(next)));
            if (auto* be = std::get_if<BuildError>(&rebuilt)) {
              spdlog::error("reload rejected, the running configuration stays in force: {}", be->message);
            } else {
              auto& p = std::get<Pipeline>(rebuilt);
              log_bridges(p.bridges);
              const bool interval_changed = p.config.interval != agent.config().interval;
              set_log_level(p.config.log_level);
              agent.replace(std::move(p));
              if (interval_changed) arm_timer(tfd, agent.config().interval);
              spdlog::info("configuration reloaded");
            }
          }
          notify("READY=1\n" + status_line(agent));
        } else {
          spdlog::info("{}: publishing a final report and stopping", strsignal(static_cast<int>(si.ssi_signo)));
          notify("STOPPING=1");
          agent.stop();
          ::close(tfd);
          ::close(sfd);
          return 0;
        }
      }
    }
  }
}

}  // namespace headroom::agent
