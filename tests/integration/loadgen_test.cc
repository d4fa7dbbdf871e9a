// SPDX-License-Identifier: Apache-2.0
// The open-loop load engine (agent/ctl/loadgen.h) against real servers on the
// loopback: hr-test-server (delays, a known capacity, SIGSTOP) and small
// in-test servers that hold, close or count what they receive. Each case
// checks what an open-loop client must do whatever the target does: keep its
// schedule, count latency from the schedule, and return on time.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agent/ctl/loadgen.h"
#include "process.h"
#include "temp_dir.h"
#include "test_server.h"

namespace {

namespace lg = headroom::ctl::loadgen;
using headroom::testing::eventually;
using headroom::testing::Process;
using headroom::testing::TempDir;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

double ms_of(int64_t ns) { return static_cast<double>(ns) / 1e6; }
double since_ms(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// --- hr-test-server ---------------------------------------------------------

using headroom::testing::ContinueAtExit;
using headroom::testing::start_test_server;

// --- in-test servers ----------------------------------------------------------

// A listener on 127.0.0.1 that answers (after `delay`), holds every
// connection without reading, or closes each at once. It counts the
// connections open at once and the values of one request header. With a
// script, it answers each request with the script's pieces (`delay` between
// them), then closes the connection if told to.
struct Script {
  std::vector<std::string> pieces;
  bool close_after = false;
};

class TinyServer {
 public:
  enum class Mode { answer, hold, close };

  TinyServer(Script script, milliseconds gap) : TinyServer(Mode::answer, gap, "x-priority", std::move(script)) {}

  explicit TinyServer(Mode mode, milliseconds delay = milliseconds(0), std::string header = "x-priority",
                      Script script = {})
      : mode_(mode), delay_(delay), script_(std::move(script)), header_(lower(header)) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd_, 1024) != 0 ||
        ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("TinyServer: bind/listen");
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~TinyServer() {
    ::shutdown(lfd_, SHUT_RDWR);  // wakes accept()
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : workers_) t.join();
    for (int fd : fds_) ::close(fd);
    ::close(lfd_);
  }
  TinyServer(const TinyServer&) = delete;
  TinyServer& operator=(const TinyServer&) = delete;

  uint16_t port() const { return port_; }
  int max_open() const { return max_open_.load(); }
  int accepted() const { return accepted_.load(); }
  // Requests seen per value of the header ("" for requests without it).
  std::map<std::string, int> header_counts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
  }

 private:
  static std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  void accept_loop() {
    for (;;) {
      const int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // shut down
      }
      ++accepted_;
      const int one = 1;  // pieces of a script go out as written, not after the client's delayed ACK
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (mode_ == Mode::close) {
        ::close(fd);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(fd);
      if (mode_ == Mode::answer) {
        const int now_open = ++open_;
        int seen = max_open_.load();
        while (now_open > seen && !max_open_.compare_exchange_weak(seen, now_open)) {
        }
        workers_.emplace_back([this, fd] { serve(fd); });
      }
    }
  }

  void serve(int fd) {
    std::string buf;
    char chunk[4096];
    for (;;) {
      std::size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) {
          --open_;
          return;
        }
        buf.append(chunk, static_cast<std::size_t>(n));
      }
      std::string value;
      const std::string head = lower(buf.substr(0, end + 2));
      const auto at = head.find("\r\n" + header_ + ":");
      if (at != std::string::npos) {
        const auto from = at + 3 + header_.size();
        value = buf.substr(from, head.find("\r\n", from) - from);
        value.erase(0, value.find_first_not_of(' '));
      }
      buf.erase(0, end + 4);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++counts_[value];
      }
      if (!script_.pieces.empty()) {
        for (std::size_t i = 0; i < script_.pieces.size(); ++i) {
          if (i > 0) std::this_thread::sleep_for(delay_);
          const auto& piece = script_.pieces[i];
          if (::send(fd, piece.data(), piece.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(piece.size())) break;
        }
        if (!script_.close_after) continue;
        ::shutdown(fd, SHUT_RDWR);
        --open_;
        return;
      }
      if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
      static const std::string kResponse = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
      if (::send(fd, kResponse.data(), kResponse.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(kResponse.size())) {
        --open_;
        return;
      }
    }
  }

  Mode mode_;
  milliseconds delay_;
  Script script_;
  std::string header_;
  int lfd_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> workers_;
  std::map<std::string, int> counts_;
  std::atomic<int> open_{0}, max_open_{0}, accepted_{0};
};

// --- the engine's options -------------------------------------------------------

lg::Options options(uint16_t port, std::vector<lg::Phase> phases, nanoseconds timeout) {
  lg::Options o;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::memcpy(&o.target.addr, &a, sizeof a);
  o.target.addr_len = sizeof a;
  o.target.host_header = "127.0.0.1:" + std::to_string(port);
  o.phases = std::move(phases);
  o.classes = {{"", 1}};
  o.timeout = timeout;
  o.start = Clock::now() + milliseconds(20);
  return o;
}

// A run whose options are valid: its records (the test fails if the engine refused).
lg::RunResult run_ok(const lg::Options& o) {
  auto r = lg::run(o);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? std::move(r).value() : lg::RunResult{};
}

std::map<lg::Outcome, int> outcomes(const lg::RunResult& r) {
  std::map<lg::Outcome, int> m;
  for (const auto& rec : r.records) ++m[rec.outcome];
  return m;
}

// Records are in schedule order, one per scheduled request.
void expect_schedule_order(const lg::RunResult& r) {
  for (std::size_t i = 1; i < r.records.size(); ++i)
    ASSERT_LE(r.records[i - 1].scheduled_ns, r.records[i].scheduled_ns) << "record " << i;
}

// 1. Latency is the server's: a 20 ms delay measures as 20 ms.
TEST(Loadgen, LatencyMatchesTheServersDelay) {
  TempDir dir;
  auto server = start_test_server(dir, {"--delay", "/=20ms"});
  ASSERT_NE(server.port, 0);
  const auto r = run_ok(options(server.port, {{seconds(2), 200}}, seconds(1)));
  ASSERT_NEAR(static_cast<double>(r.records.size()), 400, 1);
  expect_schedule_order(r);
  std::vector<int64_t> lat;
  for (const auto& rec : r.records) {
    ASSERT_EQ(rec.outcome, lg::Outcome::response);
    ASSERT_EQ(rec.status, 200);
    lat.push_back(rec.latency_ns);
  }
  std::sort(lat.begin(), lat.end());
  const double p50 = ms_of(lat[lat.size() / 2]);
  std::printf("p50 %.3f ms, min %.3f ms, max %.3f ms; send lag p50 %.3f p99 %.3f max %.3f ms; %d connections\n", p50,
              ms_of(lat.front()), ms_of(lat.back()), ms_of(r.send_lag_p50_ns), ms_of(r.send_lag_p99_ns),
              ms_of(r.send_lag_max_ns), r.peak_connections);
  EXPECT_GE(ms_of(lat.front()), 20.0) << "a response faster than the server's delay";
  EXPECT_LE(p50, 21.0) << "p50 more than 5 % above the 20 ms delay";
  EXPECT_TRUE(r.first_error.empty()) << r.first_error;
}

// 2. Open loop: a server stopped halfway gets the rest of its requests all
// the same, and they time out; the client keeps its schedule and returns on time.
TEST(Loadgen, OpenLoopAgainstAServerStoppedHalfway) {
  TempDir dir;
  auto server = start_test_server(dir, {});
  ASSERT_NE(server.port, 0);
  ContinueAtExit cont{server.proc->pid()};
  auto o = options(server.port, {{seconds(2), 200}}, milliseconds(500));
  const auto stop_at = o.start + seconds(1);
  std::thread stopper([&] {
    std::this_thread::sleep_until(stop_at);
    server.proc->signal(SIGSTOP);
  });
  const auto began = Clock::now();
  const auto r = run_ok(o);
  const double took = since_ms(began);
  stopper.join();
  server.proc->signal(SIGCONT);

  EXPECT_NEAR(static_cast<double>(r.records.size()), 400, 1);
  expect_schedule_order(r);
  EXPECT_LT(took, 20 + 2000 + 500 + 500) << "ms";
  const int64_t stop_ns = std::chrono::duration_cast<nanoseconds>(stop_at - o.start).count();
  int before = 0, after = 0;
  for (const auto& rec : r.records) {
    if (rec.scheduled_ns < stop_ns - 200'000'000) {
      EXPECT_EQ(rec.outcome, lg::Outcome::response) << "at " << ms_of(rec.scheduled_ns) << " ms";
      ++before;
    } else if (rec.scheduled_ns > stop_ns + 20'000'000) {
      EXPECT_EQ(rec.outcome, lg::Outcome::timeout) << "at " << ms_of(rec.scheduled_ns) << " ms";
      ++after;
    }
  }
  EXPECT_GT(before, 140);
  EXPECT_GT(after, 180);
}

// 3. Nothing listens: every request is a connect error, named in first_error.
TEST(Loadgen, UnreachablePortIsConnectErrors) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const uint16_t port = ntohs(a.sin_port);
  ::close(s);

  const auto began = Clock::now();
  const auto r = run_ok(options(port, {{seconds(1), 100}}, milliseconds(500)));
  const double took = since_ms(began);
  EXPECT_NEAR(static_cast<double>(r.records.size()), 100, 1);
  for (const auto& rec : r.records) ASSERT_EQ(rec.outcome, lg::Outcome::connect_error);
  EXPECT_EQ(r.connect_errors, static_cast<int64_t>(r.records.size()));
  EXPECT_EQ(r.connections_opened, 0);
  EXPECT_NE(r.first_error.find("refused"), std::string::npos) << r.first_error;
  EXPECT_NE(r.first_error.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << r.first_error;
  EXPECT_LT(took, 20 + 1000 + 500 + 500) << "ms";
}

// 4. A server that accepts and never answers: every request times out, and
// the run ends at the last request's deadline.
TEST(Loadgen, ServerThatNeverAnswersIsTimeouts) {
  TinyServer server(TinyServer::Mode::hold);
  const auto began = Clock::now();
  const auto r = run_ok(options(server.port(), {{seconds(1), 100}}, milliseconds(300)));
  const double took = since_ms(began);
  EXPECT_NEAR(static_cast<double>(r.records.size()), 100, 1);
  for (const auto& rec : r.records) ASSERT_EQ(rec.outcome, lg::Outcome::timeout);
  EXPECT_GT(server.accepted(), 50);
  EXPECT_LT(took, 20 + 1000 + 300 + 500) << "ms";
  EXPECT_GT(took, 1000 + 300 - 50) << "ms: returned before the last deadline";
}

// 5. A server that closes every connection at once: `closed` (or, if the
// reset beats the handshake, connect errors), never a hang.
TEST(Loadgen, ServerThatClosesAtOnceIsClosed) {
  TinyServer server(TinyServer::Mode::close);
  const auto began = Clock::now();
  const auto r = run_ok(options(server.port(), {{seconds(1), 100}}, seconds(2)));
  const double took = since_ms(began);
  EXPECT_NEAR(static_cast<double>(r.records.size()), 100, 1);
  int closed = 0;
  for (const auto& rec : r.records) {
    ASSERT_TRUE(rec.outcome == lg::Outcome::closed || rec.outcome == lg::Outcome::connect_error)
        << static_cast<int>(rec.outcome);
    closed += rec.outcome == lg::Outcome::closed;
  }
  EXPECT_GT(closed, 0);
  EXPECT_FALSE(r.first_error.empty());
  EXPECT_LT(took, 20 + 1000 + 500) << "ms: waited for the timeout";
}

// 6. stop_fd: the run stops at once; what was outstanding is cancelled,
// nothing due after the stop is recorded.
TEST(Loadgen, StopFdStopsAtOnce) {
  TempDir dir;
  auto server = start_test_server(dir, {"--delay", "/=2s"});
  ASSERT_NE(server.port, 0);
  const int efd = ::eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  auto o = options(server.port, {{seconds(5), 100}}, seconds(3));
  o.stop_fd = efd;
  std::atomic<int64_t> before_ns{0}, after_ns{0};  // around the write
  std::thread stopper([&] {
    std::this_thread::sleep_until(o.start + milliseconds(300));
    before_ns = Clock::now().time_since_epoch().count();
    const uint64_t one = 1;
    EXPECT_EQ(::write(efd, &one, sizeof one), 8);
    after_ns = Clock::now().time_since_epoch().count();
  });
  const auto r = run_ok(o);
  const auto returned = Clock::now();
  stopper.join();
  ::close(efd);
  const Clock::time_point fired{Clock::duration(before_ns.load())};
  const Clock::time_point written{Clock::duration(after_ns.load())};
  const double after_ms = std::chrono::duration<double, std::milli>(returned - fired).count();
  EXPECT_LT(after_ms, 100) << "ms from the stop to the return";
  EXPECT_TRUE(r.stopped);
  const auto counts = outcomes(r);
  EXPECT_GT(counts.count(lg::Outcome::cancelled) ? counts.at(lg::Outcome::cancelled) : 0, 0);
  EXPECT_GE(r.records.size(), 20u);
  EXPECT_LE(r.records.size(), 45u);
  const int64_t written_rel = std::chrono::duration_cast<nanoseconds>(written - o.start).count();
  for (const auto& rec : r.records) {
    EXPECT_LE(rec.scheduled_ns, written_rel + 2'000'000) << "a request due after the stop was recorded";
    EXPECT_EQ(rec.outcome, lg::Outcome::cancelled);  // a 2 s server answered none of them
  }
}

// 7. Classes: smooth weighted round robin gives each class its share within
// 1 over every prefix of the run, and each request carries its header.
TEST(Loadgen, ClassSharesAndPriorityHeader) {
  TinyServer server(TinyServer::Mode::answer, milliseconds(0), "x-test-class");
  auto o = options(server.port(), {{milliseconds(500), 600}, {milliseconds(500), 1400}}, seconds(1));
  o.priority_header = "x-test-class";
  o.classes = {{"c1", 1}, {"c2", 2}, {"c3", 3}, {"c4", 4}};
  const auto r = run_ok(o);
  ASSERT_NEAR(static_cast<double>(r.records.size()), 1000, 1);
  std::vector<int> counts(4, 0);
  std::map<std::string, int> answered;
  for (std::size_t i = 0; i < r.records.size(); ++i) {
    const auto& rec = r.records[i];
    ASSERT_LT(rec.request_class, 4);
    ++counts[rec.request_class];
    if (rec.outcome == lg::Outcome::response) ++answered["c" + std::to_string(rec.request_class + 1)];
    for (int c = 0; c < 4; ++c)
      ASSERT_NEAR(counts[c], static_cast<double>(i + 1) * (c + 1) / 10.0, 1.0) << "class " << c << " after " << i + 1;
  }
  // The phases: 300 then 700 requests.
  const auto phase1 =
      std::count_if(r.records.begin(), r.records.end(), [](const lg::Record& x) { return x.phase == 1; });
  EXPECT_NEAR(static_cast<double>(phase1), 700, 1);
  EXPECT_GE(answered["c1"] + answered["c2"] + answered["c3"] + answered["c4"], 990);
  const auto seen = server.header_counts();
  for (const auto& [value, n] : answered) {
    EXPECT_EQ(seen.count(value) ? seen.at(value) : 0, n) << "header value " << value;
  }
  EXPECT_EQ(seen.count(""), 0u) << "requests without the header";

  // An empty value: no header at all.
  TinyServer bare(TinyServer::Mode::answer, milliseconds(0), "x-priority");
  const auto r2 = run_ok(options(bare.port(), {{milliseconds(100), 500}}, seconds(1)));
  const auto seen2 = bare.header_counts();
  EXPECT_EQ(seen2.size(), 1u);
  EXPECT_EQ(seen2.count("") ? seen2.at("") : 0, static_cast<int>(r2.records.size()));
}

// 8. Against a server of known capacity (hr-test-server --capacity 200
// --reject-capacity 200): 200s up to 200/s, 503s for the next 200/s, 500s beyond.
TEST(Loadgen, KnownCapacityServer) {
  TempDir dir;
  auto server = start_test_server(dir, {"--capacity", "200", "--reject-capacity", "200"});
  ASSERT_NE(server.port, 0);
  const std::vector<double> offered = {100, 300, 500};
  std::vector<lg::Phase> phases;
  for (double rate : offered) phases.push_back({seconds(2), rate});
  const auto r = run_ok(options(server.port, phases, seconds(1)));
  for (std::size_t p = 0; p < offered.size(); ++p) {
    std::map<int, int> status;
    int other = 0;
    for (const auto& rec : r.records) {
      if (rec.phase != p) continue;
      if (rec.outcome == lg::Outcome::response)
        ++status[rec.status];
      else
        ++other;
    }
    const double off = offered[p];
    const double want_ok = std::min(off, 200.0);
    const double want_503 = std::min(std::max(off - 200, 0.0), 200.0);
    const double want_500 = std::max(off - 400, 0.0);
    std::printf("offered %.0f/s: 200 %.1f/s, 503 %.1f/s, 500 %.1f/s, other %d\n", off, status[200] / 2.0,
                status[503] / 2.0, status[500] / 2.0, other);
    // Within 10 %; where none are expected, at most 5 % of the offered rate
    // (a stall of the loaded machine bunches requests beyond the burst).
    auto tolerance = [&](double want) { return want > 0 ? 0.1 * want : 0.05 * off; };
    EXPECT_NEAR(status[200] / 2.0, want_ok, tolerance(want_ok)) << "offered " << off;
    EXPECT_NEAR(status[503] / 2.0, want_503, tolerance(want_503)) << "offered " << off;
    EXPECT_NEAR(status[500] / 2.0, want_500, tolerance(want_500)) << "offered " << off;
    EXPECT_EQ(other, 0) << "offered " << off;
  }
}

// 9. max_connections holds with a slow server; requests beyond it wait in
// the client, and their latency counts from their schedule.
TEST(Loadgen, MaxConnectionsCapHolds) {
  TinyServer server(TinyServer::Mode::answer, milliseconds(100));
  // A timeout none reaches: the run ends with the last answer.
  auto o = options(server.port(), {{seconds(1), 100}}, seconds(10));
  o.max_connections = 4;
  const auto r = run_ok(o);
  ASSERT_NEAR(static_cast<double>(r.records.size()), 100, 1);
  int64_t max_latency = 0;
  for (const auto& rec : r.records) {
    ASSERT_EQ(rec.outcome, lg::Outcome::response);
    max_latency = std::max(max_latency, rec.latency_ns);
  }
  EXPECT_LE(server.max_open(), 4) << "connections open at once, seen by the server";
  EXPECT_EQ(r.peak_connections, 4);
  EXPECT_EQ(r.connections_opened, 4) << "keep-alive: no connection opened twice";
  // 100 requests through 4 connections at 100 ms each take 2.5 s; the last
  // was scheduled at 1 s, so it waited about 1.5 s.
  EXPECT_GT(ms_of(max_latency), 1000);
}

// 10. Framing over the wire: bodies split across reads, chunked, 1xx,
// Connection: close, a body that ends with the connection, garbage.
TEST(Loadgen, ResponseFramingOverTheWire) {
  struct Case {
    const char* name;
    Script script;
    lg::Outcome outcome;
    int status;
    bool new_connection_each;  // the server closes, so each request opens one
  };
  const std::vector<Case> cases = {
      {"content-length split",
       {{"HTTP/1.1 200 OK\r\nContent-Le", "ngth: 5\r\n\r\nhel", "lo"}},
       lg::Outcome::response,
       200,
       false},
      {"chunked split",
       {{"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhe", "llo\r\n0", "\r\n\r\n"}},
       lg::Outcome::response,
       201,
       false},
      {"100 continue first",
       {{"HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 204 No Content\r\n\r\n"}},
       lg::Outcome::response,
       204,
       false},
      {"connection close",
       {{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"}, true},
       lg::Outcome::response,
       200,
       true},
      {"closed after the response without saying so",
       {{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"}, true},
       lg::Outcome::response,
       200,
       true},
      {"body until close (HTTP/1.0)",
       {{"HTTP/1.0 200 OK\r\n\r\nsome", " body"}, true},
       lg::Outcome::response,
       200,
       true},
      {"closed mid-body", {{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"}, true}, lg::Outcome::closed, 0, true},
      {"garbage", {{"SSH-2.0-OpenSSH_9.2\r\n"}}, lg::Outcome::bad_response, 0, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TinyServer server(c.script, milliseconds(1));
    const auto r = run_ok(options(server.port(), {{milliseconds(300), 50}}, seconds(1)));
    ASSERT_NEAR(static_cast<double>(r.records.size()), 15, 1);
    for (const auto& rec : r.records) {
      ASSERT_EQ(rec.outcome, c.outcome) << static_cast<int>(rec.outcome);
      if (c.outcome == lg::Outcome::response) {
        EXPECT_EQ(rec.status, c.status);
      }
    }
    if (c.new_connection_each) {
      EXPECT_EQ(r.connections_opened, static_cast<int64_t>(r.records.size()));
    } else {
      // Keep-alive: one connection for requests 20 ms apart, answered in
      // about 2 ms (one more if a stall of the machine overlaps two).
      EXPECT_LE(r.connections_opened, 2);
    }
    if (c.outcome != lg::Outcome::response) {
      EXPECT_FALSE(r.first_error.empty());
    }
  }
}


// 11. Several instances of one target: first attempts go round robin, each
// record says which instance it went to, each instance's server saw just
// those requests (its own Host header), and a retry of an attempt that one
// instance rejected goes to the next instance, where it is served.
TEST(Loadgen, InstancesRoundRobinAndARetryGoesToTheNext) {
  TinyServer good_a(TinyServer::Mode::answer, milliseconds(0), "host");
  TinyServer bad(Script{{"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"}, false}, milliseconds(0));
  TinyServer good_b(TinyServer::Mode::answer, milliseconds(0), "host");
  // The quiet phase at the end: the last retries fall due within the run.
  auto o = options(good_a.port(), {{milliseconds(500), 120}, {milliseconds(200), 0}}, seconds(1));
  for (const uint16_t port : {bad.port(), good_b.port()}) o.more_instances.push_back(options(port, {}, seconds(1)).target);
  o.retry.after = [](const lg::Record& r, std::string_view, int64_t) -> int64_t {
    return r.status == 200 ? -1 : 0;  // again at once, whatever failed
  };
  const auto r = run_ok(o);
  ASSERT_EQ(r.records.size(), 60u + 20u) << "60 first attempts, the bad instance's 20 retried once";
  std::vector<int> attempts(3, 0);
  int firsts = 0;
  for (const auto& rec : r.records) {
    ASSERT_LT(rec.instance, 3);
    ++attempts[rec.instance];
    if (rec.attempt == 0) {
      EXPECT_EQ(rec.instance, firsts++ % 3) << "first attempts round robin";
      EXPECT_EQ(rec.status, rec.instance == 1 ? 503 : 200);
    } else {
      const lg::Record& failed = r.records[rec.first];
      EXPECT_EQ(failed.instance, 1);
      EXPECT_EQ(rec.instance, 2) << "a retry goes to the instance after the failed one";
      EXPECT_EQ(rec.status, 200);
    }
  }
  EXPECT_EQ(attempts, (std::vector<int>{20, 20, 40}));
  const auto seen_a = good_a.header_counts(), seen_b = good_b.header_counts();
  EXPECT_EQ(seen_a.count("127.0.0.1:" + std::to_string(good_a.port())) ? seen_a.at("127.0.0.1:" + std::to_string(good_a.port())) : 0, 20);
  EXPECT_EQ(seen_b.count("127.0.0.1:" + std::to_string(good_b.port())) ? seen_b.at("127.0.0.1:" + std::to_string(good_b.port())) : 0, 40);
  EXPECT_EQ(bad.header_counts().at(""), 20) << "the bad instance saw only its first attempts";
}

}  // namespace
