// SPDX-License-Identifier: Apache-2.0
// The reference shedding server: an HTTP/1.1 service that drops requests on
// headroom's signal alone, with the reference shedder (headroom/orca/shedder.h).
// README.md explains how to run it next to headroomd.
//
//   headroom-example-shedding-server --port 8080 --scope endpoint.play
//
// How a request travels:
//
//   I/O thread (epoll)  --accepted-->  FIFO queue  -->  --workers threads
//     parse, priority,                                  burn --cost of CPU
//     ask the shedder                                        |
//     |  shed: answered here at once (--shed-status)         |
//     <------------------ eventfd: "response ready" ---------+
//
//   reader thread: follows the report directory (orca::ReportDirectory),
//   updates an orca::Shedder and publishes its drop probabilities through
//   atomics; the I/O thread only loads them. With --config it also follows
//   the file and replaces its Shedder when the thresholds change.
//
// What the server deliberately does NOT do: look at its own queue, latency or
// CPU to decide. The only input is the report headroomd writes for --scope,
// so the example shows the reference shedder, not a home-grown controller.
//
// The command line is options.{h,cc}, the HTTP/1.1 parsing http.{h,cc}, the
// shed answer's headers shed_answer.{h,cc}, the workers workers.{h,cc}, and
// --config's file, followed by the reader thread, shed_config_watch.{h,cc}.
//
// Build (README.md, Makefile):
//   c++ -std=c++20 -O2 server.cc options.cc http.cc dependency.cc shed_answer.cc workers.cc
//     shed_config_watch.cc $(pkg-config --cflags --libs headroom-orca) -pthread
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <headroom/orca/dependency_gate.h>
#include <headroom/orca/names.h>
#include <headroom/orca/priority.h>
#include <headroom/orca/report_reader.h>
#include <headroom/orca/result.h>
#include <headroom/orca/retry.h>
#include <headroom/orca/shedder.h>

#include "dependency.h"
#include "http.h"
#include "options.h"
#include "shed_answer.h"
#include "shed_config_watch.h"
#include "workers.h"

namespace {

using namespace shedding_server;  // this program's own parts: http.h, options.h
constexpr const char* kProgram = "headroom-example-shedding-server";
constexpr int kExitUsage = 64;                  // EX_USAGE, as headroomctl
constexpr int kReaderPollMs = 100;              // staleness judged again at least this often

// ------------------------------------------------- reader -> I/O publication

// The shedder's tables as the I/O thread sees them. One writer (the reader
// thread), one reader (the I/O thread), no lock: every entry is its own
// atomic, so a request drawn during an update may see a mix of the old and
// the new table for an instant, which is harmless.
struct Published {
  std::array<std::atomic<double>, orca::kBucketCount> bucket{};
  std::array<std::atomic<double>, orca::kLeastImportantPriority> level{};
  std::atomic<bool> have_report{false};  // a valid report for the scope exists
  std::atomic<bool> stale{false};
  std::atomic<uint64_t> seq{0};

  void store(const orca::Shedder* shedder, bool stale_now, uint64_t seq_now) {
    for (int b = 0; b < orca::kBucketCount; ++b)
      bucket[b].store(shedder ? shedder->probability(static_cast<orca::Bucket>(b)) : 0.0, std::memory_order_relaxed);
    for (int p = 1; p <= orca::kLeastImportantPriority; ++p)
      level[p - 1].store(shedder ? shedder->probability(p) : 0.0, std::memory_order_relaxed);
    stale.store(stale_now, std::memory_order_relaxed);
    seq.store(seq_now, std::memory_order_relaxed);
    have_report.store(shedder != nullptr, std::memory_order_relaxed);
  }
  double probability(const Priority& p) const {
    return p.level > 0 ? level[p.level - 1].load(std::memory_order_relaxed)
                       : bucket[static_cast<int>(p.bucket)].load(std::memory_order_relaxed);
  }

  // The thresholds in use, as /stats shows them (thresholds_json).
  void set_config(std::string json) {
    std::lock_guard lock(config_mu);
    config_json = std::move(json);
  }
  std::string config() const {
    std::lock_guard lock(config_mu);
    return config_json;
  }
  mutable std::mutex config_mu;
  std::string config_json = "[]";
};

// The reader thread: owns the ReportDirectory and the Shedder. It wakes on
// every inotify event and at least every kReaderPollMs, so a report that
// stops changing turns stale on time even though no event arrives.
int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The gate's side of the reader thread: the dependency's report, if any.
void update_gate(const Options& opt, orca::ReportDirectory& dir, orca::DependencyGate& gate) {
  const auto state = dir.get(opt.gate_scope);
  if (state && state->report) gate.update(*state->report, unix_ms(), monotonic_ns());
  else gate.mark_stale();  // no report: the gate calls everything (fail open)
}

// --config changed and is good: a Shedder with the new thresholds, updated
// by the report below in the same round.
void follow_config(ShedConfigWatch& watch, orca::Shedder& shedder, Published& out) {
  auto next = watch.poll();
  if (!next) return;
  auto replaced = orca::Shedder::create(*next);
  if (!replaced) return;  // poll() checked it with the same validate_config
  shedder = std::move(*replaced);
  out.set_config(thresholds_json(*next));
}

void reader_loop(const Options& opt, orca::Shedder shedder, Published& out, orca::DependencyGate* gate,
                 std::optional<ShedConfigWatch> watch, const std::atomic<bool>& stop) {
  std::optional<orca::ReportDirectory> dir;
  std::string said;  // the last condition reported on stderr: each is said once
  auto say = [&](const std::string& what) {
    if (what != said) std::fprintf(stderr, "%s: %s\n", kProgram, what.c_str());
    said = what;
  };
  auto next_open = std::chrono::steady_clock::now();
  while (!stop.load(std::memory_order_relaxed)) {
    if (watch) follow_config(*watch, shedder, out);
    if (!dir && std::chrono::steady_clock::now() >= next_open) {
      auto opened = orca::ReportDirectory::open(opt.orca_dir);
      if (opened) {
        dir.emplace(std::move(*opened));
      } else {  // tried again every second; shedding nothing meanwhile
        out.store(nullptr, true, 0);
        say("cannot watch the report directory: " + opened.error().message +
            "; shedding nothing (fail open) until it can be read");
        next_open = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      }
    }
    if (!dir) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kReaderPollMs));
      continue;
    }
    if (gate) update_gate(opt, *dir, *gate);
    const auto state = opt.no_shed ? std::nullopt : dir->get(opt.scope);  // staleness judged for "now"
    if (opt.no_shed) {
      out.store(nullptr, false, 0);
    } else if (!state || !state->report) {
      out.store(nullptr, true, 0);  // no report: shed nothing
      say("no report for " + opt.scope + " in " + opt.orca_dir + " yet; shedding nothing until one appears");
    } else {
      shedder.update(*state->report, state->staleness.stale);
      const auto md = orca::metadata_of(*state->report);
      out.store(&shedder, state->staleness.stale, md ? md->seq : 0);
      if (state->staleness.stale)
        say("the report for " + opt.scope + " is stale (" + state->staleness.reason + "): " +
            (opt.stale == orca::StalePolicy::fail_open ? "shedding nothing (fail_open)"
                                                       : "shedding on the last values, never CRITICAL (use_last)"));
      else
        say("following the report for " + opt.scope);
    }
    dir->wait(kReaderPollMs);  // a change, or 100 ms: then judge again
  }
}

// ------------------------------------------------------------ the I/O thread

struct Conn {
  uint64_t id = 0;
  int fd = -1;
  std::string in, out;
  bool busy = false;         // its request is with the workers: parse nothing more
  bool close_after = false;  // close once `out` is written
  bool peer_closed = false;  // read() returned 0
  bool sent_continue = false;
  uint32_t events = 0;       // what epoll watches now
};

class Server {
 public:
  Server(const Options& opt, int listen_fd, int signal_fd, int event_fd, WorkQueue& queue, const Published& pub,
         const orca::DependencyGate* gate)
      : opt_(opt), listen_fd_(listen_fd), signal_fd_(signal_fd), event_fd_(event_fd), queue_(queue), pub_(pub),
        rng_(std::random_device{}()), gate_(gate) {}

  // Runs until SIGINT or SIGTERM.
  void run() {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    add(listen_fd_, kListenId, EPOLLIN);
    add(signal_fd_, kSignalId, EPOLLIN);
    add(event_fd_, kEventId, EPOLLIN);
    std::array<epoll_event, 64> events{};
    for (;;) {
      const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), -1);
      if (n < 0 && errno == EINTR) continue;
      for (int i = 0; i < n; ++i) {
        const uint64_t id = events[i].data.u64;
        if (id == kSignalId) return;
        if (id == kListenId) accept_all();
        else if (id == kEventId) finish_jobs();
        else on_conn(id, events[i].events);
      }
    }
  }
  ~Server() {
    for (auto& [id, c] : conns_) ::close(c.fd);
    if (epoll_ >= 0) ::close(epoll_);
  }

 private:
  static constexpr uint64_t kListenId = 0, kSignalId = 1, kEventId = 2;

  void add(int fd, uint64_t id, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = id;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
  }

  void accept_all() {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or out of descriptors: try again on the next event
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      const uint64_t id = next_id_++;
      Conn& c = conns_[id];
      c.id = id;
      c.fd = fd;
      c.events = EPOLLIN;
      add(fd, id, c.events);
    }
  }

  void on_conn(uint64_t id, uint32_t events) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    if (events & (EPOLLERR | EPOLLHUP)) return close_conn(id);
    if (events & EPOLLIN) {
      char buf[64 * 1024];
      while (c.in.size() < kMaxHead + kMaxBody) {
        const ssize_t n = ::read(c.fd, buf, sizeof buf);
        if (n > 0) { c.in.append(buf, static_cast<std::size_t>(n)); continue; }
        if (n == 0) c.peer_closed = true;
        else if (errno != EAGAIN && errno != EINTR) return close_conn(id);
        break;
      }
      handle_input(c);
    }
    flush(id, c);
  }

  // Answers every complete request in the buffer, in order, until one goes
  // to the workers: its response must be written before the next is looked at.
  void handle_input(Conn& c) {
    while (!c.busy && !c.close_after) {
      Request r;
      const Parse parsed = parse_request(c.in, opt_.priority_header, r);
      if (parsed == Parse::incomplete) {
        if (r.expect_continue && !c.sent_continue) c.out += "HTTP/1.1 100 Continue\r\n\r\n";
        c.sent_continue = c.sent_continue || r.expect_continue;
        return;
      }
      if (parsed != Parse::ok) {  // answered, then the connection is closed
        ++bad_;
        const int status = parsed == Parse::too_large ? 413 : parsed == Parse::unsupported ? 501 : 400;
        respond(c, status, "malformed or unsupported request\n", false, false, {});
        c.in.clear();
        return;
      }
      c.in.erase(0, r.length);
      c.sent_continue = false;
      const bool head = r.method == "HEAD";
      if (r.path == "/stats" && (r.method == "GET" || head)) {
        respond(c, 200, stats_json(), r.keep_alive, head, "Content-Type: application/json\r\n");
        continue;
      }
      // The priority: the header's value, else --default-priority.
      const std::optional<Priority> given = r.priority ? parse_priority(*r.priority) : std::nullopt;
      const Priority prio = given.value_or(opt_.default_priority);
      const int b = static_cast<int>(prio.bucket);
      // The decision: one table lookup and one draw from our own generator;
      // a shed answer says how to retry (shed_answer.h). A bucket's name
      // stands for its least important level, as orca::parse_priority_value
      // reads it (the dials are the bucket's either way).
      const double p = opt_.no_shed ? 0.0 : pub_.probability(prio);
      const int level = prio.level > 0 ? prio.level : orca::priority_range(prio.bucket).last;
      const orca::ShedVerdict verdict = orca::shed_verdict(p, uniform_(rng_), level);
      if (verdict.drop) {
        ++shed_[b];
        respond(c, opt_.shed_status, "shed\n", r.keep_alive, head, shed_answer_headers(verdict.dials));
        continue;
      }
      const bool dependency = !opt_.dependency.empty() && r.path.starts_with(opt_.dependency_path);
      if (dependency && gate_) {  // the gate: a few atomic loads, no system call
        const orca::GateDecision d = prio.level > 0 ? gate_->decide(prio.level, monotonic_ns())
                                                    : gate_->decide(prio.bucket, monotonic_ns());
        if (!orca::should_call(d)) {
          ++fail_fast_;
          if (opt_.fallback) respond(c, 200, "fallback\n", r.keep_alive, head, "x-headroom-fail-fast: 1\r\n");
          else respond(c, opt_.shed_status, "failed fast\n", r.keep_alive, head, "x-headroom-fail-fast: 1\r\n");
          continue;
        }
      }
      c.busy = true;
      queue_.push(Job{c.id, b, level, head, r.keep_alive, dependency, dependency ? r.path : std::string()});
    }
  }

  // The workers finished these jobs: write their responses.
  void finish_jobs() {
    uint64_t count = 0;
    (void)!::read(event_fd_, &count, sizeof count);
    for (const Job& job : queue_.take_done()) {
      ++served_[job.bucket];
      auto it = conns_.find(job.conn);
      if (it == conns_.end()) continue;  // the client went away meanwhile
      Conn& c = it->second;
      c.busy = false;
      if (job.dependency) ++calls_[static_cast<int>(job.result)];
      if (job.dependency && job.result != CallResult::ok) {
        const int status = job.result == CallResult::timed_out ? 504 : 502;
        respond(c, status, "dependency " + std::string(call_result_name(job.result)) + "\n", job.keep_alive, job.head, {});
      } else {
        const std::string body = "served " + std::string(orca::bucket_name(static_cast<orca::Bucket>(job.bucket))) + "\n";
        respond(c, 200, body, job.keep_alive, job.head, {});
      }
      handle_input(c);  // pipelined requests, if any
      flush(job.conn, c);
    }
  }

  void respond(Conn& c, int status, std::string_view body, bool keep_alive, bool head, std::string_view headers) {
    char line[160];
    std::snprintf(line, sizeof line, "HTTP/1.1 %d %.*s\r\nContent-Length: %zu\r\n", status,
                  static_cast<int>(reason_phrase(status).size()), reason_phrase(status).data(), body.size());
    c.out += line;
    c.out += headers;
    if (!keep_alive) c.out += "Connection: close\r\n";
    c.out += "\r\n";
    if (!head) c.out += body;
    if (!keep_alive) c.close_after = true;
  }

  // Writes what it can; watches for writability when the socket is full and
  // for input only while the buffer has room. Closes when the exchange is over.
  void flush(uint64_t id, Conn& c) {
    while (!c.out.empty()) {
      const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n > 0) { c.out.erase(0, static_cast<std::size_t>(n)); continue; }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
      return close_conn(id);
    }
    if (c.out.empty() && !c.busy && (c.close_after || c.peer_closed)) return close_conn(id);
    uint32_t want = 0;
    if (!c.peer_closed && !c.close_after && c.in.size() < kMaxHead + kMaxBody) want |= EPOLLIN;
    if (!c.out.empty()) want |= EPOLLOUT;
    if (want != c.events) {
      epoll_event ev{};
      ev.events = want;
      ev.data.u64 = id;
      ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &ev);
      c.events = want;
    }
  }

  void close_conn(uint64_t id) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    ::close(it->second.fd);  // also removes it from the epoll set
    conns_.erase(it);
  }

  std::string stats_json() {
    std::string j = "{\"shedding\":";
    j += opt_.no_shed ? "false" : "true";
    j += ",\"shed_config\":" + pub_.config();
    j += ",\"buckets\":{";
    char buf[200];
    for (int b = 0; b < orca::kBucketCount; ++b) {
      const auto bucket = static_cast<orca::Bucket>(b);
      std::snprintf(buf, sizeof buf, "%s\"%s\":{\"served\":%llu,\"shed\":%llu,\"probability\":%.17g}", b ? "," : "",
                    std::string(orca::bucket_name(bucket)).c_str(), static_cast<unsigned long long>(served_[b]),
                    static_cast<unsigned long long>(shed_[b]), opt_.no_shed ? 0.0 : pub_.probability({bucket, 0}));
      j += buf;
    }
    std::snprintf(buf, sizeof buf,
                  "},\"queue\":%zu,\"in_progress\":%d,\"bad_requests\":%llu,\"report\":%s,\"stale\":%s,\"seq\":%llu}\n",
                  queue_.size(), queue_.in_progress(), static_cast<unsigned long long>(bad_),
                  pub_.have_report.load() ? "true" : "false", pub_.stale.load() ? "true" : "false",
                  static_cast<unsigned long long>(pub_.seq.load()));
    j += buf;
    if (!opt_.dependency.empty()) {
      j.pop_back();  // "}\n"
      j.pop_back();
      std::snprintf(buf, sizeof buf,
                    ",\"dependency\":{\"ok\":%llu,\"error_answer\":%llu,\"failed\":%llu,\"timed_out\":%llu,"
                    "\"fail_fast\":%llu,\"gate\":\"%s\"}}\n",
                    static_cast<unsigned long long>(calls_[0]), static_cast<unsigned long long>(calls_[1]),
                    static_cast<unsigned long long>(calls_[2]), static_cast<unsigned long long>(calls_[3]),
                    static_cast<unsigned long long>(fail_fast_),
                    gate_ ? std::string(orca::gate_state_name(gate_->state(orca::Bucket::CRITICAL, monotonic_ns()))).c_str()
                          : "none");
      j += buf;
    }
    return j;
  }

  const Options& opt_;
  int listen_fd_, signal_fd_, event_fd_, epoll_ = -1;
  WorkQueue& queue_;
  const Published& pub_;
  std::unordered_map<uint64_t, Conn> conns_;
  uint64_t next_id_ = 3;  // 0..2 are the listening socket, the signalfd and the eventfd
  std::mt19937_64 rng_;   // the I/O thread's own generator
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  std::array<uint64_t, orca::kBucketCount> served_{}, shed_{};
  uint64_t bad_ = 0;
  const orca::DependencyGate* gate_;
  std::array<uint64_t, 4> calls_{};  // dependency calls by CallResult
  uint64_t fail_fast_ = 0;
};

// The listening socket, non-blocking.
headroom::Result<int> listen_on(const std::string& bind, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, bind.c_str(), &addr.sin_addr) != 1)
    return headroom::logic_error("--bind " + bind + " is not an IPv4 address");
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    auto error = headroom::system_error(errno, "cannot listen on " + bind + ":" + std::to_string(port));
    if (fd >= 0) ::close(fd);
    return error;
  }
  return fd;
}

// The port on stdout (for scripts and tests), what the server does on stderr.
void announce(const Options& opt, const orca::ShedderConfig& config, int port) {
  std::printf("port=%d\n", port);
  std::fflush(stdout);
  std::string signals;
  for (const auto& [name, t] : config.signals) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " (from %g, CRITICAL from %g, all at %g)", t.shed_start, t.critical_start, t.all_shed);
    signals += (signals.empty() ? "" : ", ") + name + buf;
  }
  if (!opt.dependency.empty())
    std::fprintf(stderr, "%s: requests under %s call %s%s%s\n", kProgram, opt.dependency_path.c_str(),
                 opt.dependency.c_str(), opt.gate_scope.empty() ? "" : ", through the gate on ",
                 opt.gate_scope.c_str());
  if (opt.no_shed)
    std::fprintf(stderr, "%s: listening on %s:%d; --no-shed: serving everything\n", kProgram, opt.bind.c_str(), port);
  else
    std::fprintf(stderr, "%s: listening on %s:%d; shedding on %s of %s in %s, stale: %s%s%s\n", kProgram,
                 opt.bind.c_str(), port, signals.c_str(), opt.scope.c_str(), opt.orca_dir.c_str(),
                 std::string(orca::stale_policy_name(opt.stale)).c_str(),
                 opt.config_file.empty() ? "" : "; thresholds from ", opt.config_file.c_str());
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kProgram, message.c_str());
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"The reference shedding server: an HTTP/1.1 service that sheds on headroom's report "
               "(examples/shedding-server/README.md).", kProgram};
  add_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the error
    return rc == 0 ? 0 : kExitUsage;
  }
  for (const char* flag : kThresholdFlags)
    if (app.count(flag) > 0) flags.threshold_flags.emplace_back(flag);
  auto options = options_of(flags);
  if (!options) return usage_error(options.error().message);
  const Options& opt = *options;
  std::optional<ShedConfigWatch> watch;
  if (!opt.config_file.empty()) {
    auto opened = ShedConfigWatch::open(opt.config_file, endpoint_of_scope(opt.scope), opt.stale);
    if (!opened) return usage_error("--config: " + opened.error().to_string());
    watch.emplace(std::move(*opened));
  }
  const orca::ShedderConfig config = watch ? watch->config() : shedder_config(opt);
  auto shedder = orca::Shedder::create(config);
  if (!shedder) return usage_error((watch ? "--config: " : "--signal: ") + shedder.error().message);

  // SIGINT and SIGTERM arrive through a signalfd in the I/O loop: blocked
  // here, before any thread starts, so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  const int signal_fd = ::signalfd(-1, &stop_signals, SFD_NONBLOCK | SFD_CLOEXEC);
  const int event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

  const auto listening = listen_on(opt.bind, opt.port);
  if (!listening) {
    std::fprintf(stderr, "%s: %s\n", kProgram, listening.error().message.c_str());
    return 1;
  }
  const int listen_fd = *listening;
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);

  std::atomic<bool> stop{false};
  Published published;
  published.set_config(thresholds_json(config));
  WorkQueue queue(event_fd);
  std::vector<std::thread> threads;
  std::unique_ptr<orca::DependencyGate> gate;
  if (!opt.gate_scope.empty()) gate = std::make_unique<orca::DependencyGate>();  // the default options
  const auto dependency = parse_ipv4_endpoint(opt.dependency);
  const auto timeout = std::chrono::milliseconds(opt.dependency_timeout_ns / 1'000'000);
  const WorkerSettings settings{opt.cost_ns, opt.delay};
  for (int i = 0; i < opt.workers; ++i)
    threads.emplace_back([&] {
      std::optional<DependencyClient> client;
      if (dependency) client.emplace(*dependency, timeout);
      queue.work(settings, client ? &*client : nullptr, stop);
    });
  if (!opt.no_shed || gate)
    threads.emplace_back([&, s = std::move(*shedder), w = std::move(watch)]() mutable {
      reader_loop(opt, std::move(s), published, gate.get(), std::move(w), stop);
    });
  announce(opt, config, ntohs(bound.sin_port));

  {
    Server server(opt, listen_fd, signal_fd, event_fd, queue, published, gate.get());
    server.run();  // until SIGINT or SIGTERM
  }
  stop.store(true);
  queue.stop();
  for (auto& t : threads) t.join();
  ::close(listen_fd);
  std::fprintf(stderr, "%s: stopped\n", kProgram);
  return 0;
}
