// SPDX-License-Identifier: Apache-2.0
// hr-test-load: a closed-loop load client that records every request's
// latency. One thread and one keep-alive connection per --connections, at most
// one outstanding request per connection; --rate paces them evenly instead of
// back to back.
//
// Latency: from just before the request's send() to when the complete response
// has been read. Every wait is a poll() bounded by the end of --duration, so a
// server that stops answering (SIGSTOP) leaves requests "outstanding" and the
// tool still exits on time.
//
// Output: one JSON object on stdout (see print_report).
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools_common.h"

namespace {

using headroom::test_tools::parse_duration;
using headroom::test_tools::parse_int;
using Clock = std::chrono::steady_clock;
using std::chrono::nanoseconds;

constexpr std::size_t kMaxResponseHead = 64 * 1024;
constexpr auto kReconnectBackoff = std::chrono::milliseconds(20);

// What every connection thread shares; read-only except for `claimed`.
struct Plan {
  const addrinfo* addr = nullptr;
  bool http = true;
  std::vector<std::string> requests;  // complete wire requests, rotated over
  std::optional<Clock::time_point> deadline;
  int64_t total = -1;  // --requests; -1: no limit
  std::atomic<int64_t> claimed{0};
  nanoseconds interval{0};  // per connection, with --rate; 0: back to back
  Clock::time_point start;
};

struct Sample {
  int64_t done_ns;     // completion, since the start of the run
  int64_t latency_ns;
};

struct ConnStats {
  std::vector<Sample> samples;
  int64_t status_errors = 0;  // complete responses that were not 2xx (http) or not "ok" (line)
  int64_t io_errors = 0;      // failed connects, resets, malformed responses
  int64_t outstanding = 0;    // sent, unanswered when the run ended
};

enum class Io { ok, error, deadline };

// Waits for `events` on `fd` until the deadline (forever without one).
Io wait_fd(int fd, short events, const std::optional<Clock::time_point>& deadline) {
  for (;;) {
    int timeout_ms = -1;
    if (deadline) {
      const auto left = *deadline - Clock::now();
      if (left <= nanoseconds{0}) return Io::deadline;
      // Round up, so a wait never turns into a busy loop of zero timeouts.
      timeout_ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
    }
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return Io::ok;  // readable/writable, or an error the next call reports
    if (r < 0 && errno != EINTR) return Io::error;
  }
}

class Connection {
 public:
  explicit Connection(const Plan& plan) : plan_(plan) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() { close(); }

  bool is_open() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    buf_.clear();
  }

  Io connect() {
    const addrinfo* ai = plan_.addr;
    fd_ = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd_ < 0) return Io::error;
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_, ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) return fail();
      if (const Io w = wait_fd(fd_, POLLOUT, plan_.deadline); w != Io::ok) return w == Io::deadline ? w : fail();
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return fail();
    }
    return Io::ok;
  }

  Io send_all(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<std::size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (const Io w = wait_fd(fd_, POLLOUT, plan_.deadline); w != Io::ok) return w;
      } else {
        return Io::error;
      }
    }
    return Io::ok;
  }

  // Reads one complete response. `good` tells whether it was a success.
  Io read_response(bool& good) { return plan_.http ? read_http(good) : read_line(good); }

 private:
  Io fail() {
    close();
    return Io::error;
  }

  // Appends the next bytes to buf_. EOF is Io::error unless `eof_ok`, where it
  // sets `eof` instead.
  Io read_more(bool eof_ok = false, bool* eof = nullptr) {
    char chunk[16 * 1024];
    for (;;) {
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n > 0) {
        buf_.append(chunk, static_cast<std::size_t>(n));
        return Io::ok;
      }
      if (n == 0) {
        if (!eof_ok) return Io::error;
        *eof = true;
        return Io::ok;
      }
      if (errno != EAGAIN && errno != EINTR) return Io::error;
      if (const Io w = wait_fd(fd_, POLLIN, plan_.deadline); w != Io::ok) return w;
    }
  }

  Io read_line(bool& good) {
    std::size_t eol;
    while ((eol = buf_.find('\n')) == std::string::npos)
      if (const Io r = read_more(); r != Io::ok) return r;
    std::string_view line(buf_.data(), eol);
    if (line.ends_with('\r')) line.remove_suffix(1);
    good = line == "ok";
    buf_.erase(0, eol + 1);
    return Io::ok;
  }

  static bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  }

  Io read_http(bool& good) {
    std::size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (buf_.size() > kMaxResponseHead) return Io::error;
      if (const Io r = read_more(); r != Io::ok) return r;
    }
    // "HTTP/1.1 200 OK"
    const std::string_view head(buf_.data(), head_end);
    if (!head.starts_with("HTTP/1.") || head.size() < 12) return Io::error;
    const auto status = parse_int(head.substr(9, 3));
    if (!status) return Io::error;
    std::optional<std::size_t> content_length;
    bool server_closes = false;
    for (std::size_t pos = head.find("\r\n"); pos != std::string_view::npos;) {
      const auto next = head.find("\r\n", pos + 2);
      const std::string_view header = head.substr(pos + 2, next == std::string_view::npos ? next : next - pos - 2);
      pos = next;
      const auto colon = header.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view value = header.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
      if (iequals(header.substr(0, colon), "Content-Length")) {
        const auto n = parse_int(value);
        if (!n) return Io::error;
        content_length = static_cast<std::size_t>(*n);
      } else if (iequals(header.substr(0, colon), "Connection") && iequals(value, "close")) {
        server_closes = true;
      } else if (iequals(header.substr(0, colon), "Transfer-Encoding")) {
        return Io::error;  // not needed against hr-test-server
      }
    }
    const std::size_t body_start = head_end + 4;
    if (*status == 204 || *status == 304 || (*status >= 100 && *status < 200)) content_length = 0;
    if (content_length) {
      while (buf_.size() < body_start + *content_length)
        if (const Io r = read_more(); r != Io::ok) return r;
      buf_.erase(0, body_start + *content_length);
    } else {
      // No length: the body runs to the end of the connection.
      server_closes = true;
      for (bool eof = false; !eof;)
        if (const Io r = read_more(true, &eof); r != Io::ok) return r;
    }
    good = *status >= 200 && *status < 300;
    if (server_closes) close();
    return Io::ok;
  }

  const Plan& plan_;
  int fd_ = -1;
  std::string buf_;
};

bool past(const std::optional<Clock::time_point>& deadline) { return deadline && Clock::now() >= *deadline; }

// One connection's closed loop, until the deadline or the request budget runs out.
void run_connection(Plan& plan, std::size_t index, std::size_t connections, ConnStats& stats) {
  Connection conn(plan);
  std::size_t next_request = index;  // connections start at different requests of the rotation
  // With --rate, connection i sends at start + i/rate + k * interval.
  auto next_send = plan.start + plan.interval * static_cast<int64_t>(index) / static_cast<int64_t>(connections);

  while (!past(plan.deadline)) {
    if (!conn.is_open()) {
      const Io c = conn.connect();
      if (c == Io::deadline) break;
      if (c == Io::error) {
        ++stats.io_errors;
        const auto wake = Clock::now() + kReconnectBackoff;
        std::this_thread::sleep_until(plan.deadline ? std::min(wake, *plan.deadline) : wake);
        continue;
      }
    }
    if (plan.interval.count() > 0) {
      std::this_thread::sleep_until(plan.deadline ? std::min(next_send, *plan.deadline) : next_send);
      if (past(plan.deadline)) break;
    }
    if (plan.total >= 0 && plan.claimed.fetch_add(1) >= plan.total) break;

    const std::string& request = plan.requests[next_request++ % plan.requests.size()];
    const auto sent = Clock::now();
    bool good = false;
    Io r = conn.send_all(request);
    if (r == Io::ok) r = conn.read_response(good);
    const auto done = Clock::now();
    if (r == Io::deadline) {
      ++stats.outstanding;
      break;
    }
    if (r == Io::error) {
      ++stats.io_errors;
      conn.close();
    } else {
      stats.samples.push_back({(done - plan.start).count(), (done - sent).count()});
      if (!good) ++stats.status_errors;
    }
    if (plan.interval.count() > 0) {
      // Keep to the schedule, but after a late response send at once rather
      // than in a burst that catches up.
      next_send += plan.interval;
      if (next_send < done) next_send = done;
    }
  }
}

// Nearest-rank percentile of sorted values: the ceil(p/100 * n)-th smallest.
int64_t percentile(const std::vector<int64_t>& sorted, int64_t p) {
  const auto n = static_cast<int64_t>(sorted.size());
  const int64_t rank = std::max<int64_t>(1, (p * n + 99) / 100);
  return sorted[static_cast<std::size_t>(rank - 1)];
}

std::string us(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(ns) / 1e3);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hr-test-load: closed-loop load over keep-alive connections; prints latency percentiles as JSON"};
  int port = 0;
  std::string host = "127.0.0.1";
  std::string mode = "http";
  std::size_t connections = 1;
  std::string duration_text;
  int64_t total = -1;
  std::vector<std::string> paths;
  std::vector<std::string> lines;
  double rate = 0;
  std::vector<std::string> over_texts;
  std::string latencies_file, completions_file;
  app.add_option("--port", port, "Server port")->required()->check(CLI::Range(1, 65535));
  app.add_option("--host", host, "Server host")->capture_default_str();
  app.add_option("--mode", mode, "Protocol")->check(CLI::IsMember({"http", "line"}))->capture_default_str();
  app.add_option("--connections", connections, "Concurrent keep-alive connections, one thread each")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  auto* duration_opt = app.add_option("--duration", duration_text, "Run time, e.g. 5s (default 5s without --requests)");
  auto* requests_opt =
      app.add_option("--requests", total, "Total requests to send (with --duration too: whichever ends first)")
          ->check(CLI::Range(int64_t{1}, INT64_MAX));
  app.add_option("--path", paths, "http: request path, repeatable; requests rotate over them (default /)");
  app.add_option("--line", lines, "line: request line, repeatable; e.g. \"200\" asks for a 200 us delay (default 0)");
  app.add_option("--rate", rate, "Total requests per second, paced evenly over the connections (default: no pacing)")
      ->check(CLI::PositiveNumber);
  app.add_option("--over", over_texts, "Latency threshold, repeatable, e.g. 10ms: reports the share of requests above");
  app.add_option("--latencies-file", latencies_file, "Write every latency (us) to this file, one per line");
  app.add_option("--completions-file", completions_file,
                 "Write every completion to this file, one per line: its CLOCK_MONOTONIC time (ns) and its latency (us), "
                 "so that a test can take the share of any window");
  CLI11_PARSE(app, argc, argv);

  Plan plan;
  plan.http = mode == "http";
  if (!(plan.http ? lines : paths).empty()) {
    std::fprintf(stderr, "hr-test-load: %s does not apply to --mode %s\n", plan.http ? "--line" : "--path", mode.c_str());
    return 2;
  }
  plan.total = total;
  std::optional<nanoseconds> duration;
  if (duration_opt->count() > 0) {
    duration = parse_duration(duration_text);
    if (!duration || duration->count() == 0) {
      std::fprintf(stderr, "hr-test-load: bad --duration '%s' (e.g. 500ms, 5s)\n", duration_text.c_str());
      return 2;
    }
  } else if (requests_opt->count() == 0) {
    duration = std::chrono::seconds(5);
  }
  std::vector<std::pair<std::string, nanoseconds>> over;
  for (const auto& text : over_texts) {
    const auto d = parse_duration(text);
    if (!d) {
      std::fprintf(stderr, "hr-test-load: bad --over '%s' (e.g. 10ms)\n", text.c_str());
      return 2;
    }
    over.emplace_back(text, *d);
  }

  if (plan.http) {
    if (paths.empty()) paths.emplace_back("/");
    for (const auto& p : paths)
      plan.requests.push_back("GET " + p + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
                              "\r\nUser-Agent: hr-test-load\r\n\r\n");
  } else {
    if (lines.empty()) lines.emplace_back("0");
    for (const auto& l : lines) plan.requests.push_back(l + "\n");
  }
  if (rate > 0)
    plan.interval = nanoseconds(static_cast<int64_t>(std::llround(1e9 * static_cast<double>(connections) / rate)));

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addrs); rc != 0) {
    std::fprintf(stderr, "hr-test-load: %s: %s\n", host.c_str(), gai_strerror(rc));
    return 2;
  }
  plan.addr = addrs;
  signal(SIGPIPE, SIG_IGN);
  headroom::test_tools::raise_fd_limit();

  // Run.
  std::vector<ConnStats> stats(connections);
  std::vector<std::thread> threads;
  threads.reserve(connections);
  plan.start = Clock::now();
  if (duration) plan.deadline = plan.start + *duration;
  for (std::size_t i = 0; i < connections; ++i)
    threads.emplace_back(run_connection, std::ref(plan), i, connections, std::ref(stats[i]));
  for (auto& t : threads) t.join();
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - plan.start).count();
  freeaddrinfo(addrs);

  // Merge, in completion order.
  std::vector<Sample> samples;
  int64_t errors = 0, io_errors = 0, outstanding = 0;
  for (auto& s : stats) {
    samples.insert(samples.end(), s.samples.begin(), s.samples.end());
    errors += s.status_errors + s.io_errors;
    io_errors += s.io_errors;
    outstanding += s.outstanding;
  }
  std::sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.done_ns < b.done_ns; });

  if (!latencies_file.empty()) {
    std::FILE* f = std::fopen(latencies_file.c_str(), "w");
    if (f == nullptr) {
      std::perror(("hr-test-load: " + latencies_file).c_str());
      return 1;
    }
    for (const auto& s : samples) std::fprintf(f, "%s\n", us(s.latency_ns).c_str());
    std::fclose(f);
  }
  if (!completions_file.empty()) {
    std::FILE* f = std::fopen(completions_file.c_str(), "w");
    if (f == nullptr) {
      std::perror(("hr-test-load: " + completions_file).c_str());
      return 1;
    }
    // steady_clock is CLOCK_MONOTONIC: the same clock as every other process's.
    const int64_t start_ns = std::chrono::duration_cast<nanoseconds>(plan.start.time_since_epoch()).count();
    for (const auto& s : samples)
      std::fprintf(f, "%lld %s\n", static_cast<long long>(start_ns + s.done_ns), us(s.latency_ns).c_str());
    std::fclose(f);
  }

  std::vector<int64_t> sorted;
  sorted.reserve(samples.size());
  double sum_ns = 0;
  for (const auto& s : samples) {
    sorted.push_back(s.latency_ns);
    sum_ns += static_cast<double>(s.latency_ns);
  }
  std::sort(sorted.begin(), sorted.end());
  const auto n = static_cast<int64_t>(sorted.size());

  // requests: complete responses (every latency is one of them). errors:
  // non-2xx (or non-"ok") responses plus I/O errors (io_errors, which have no
  // latency). outstanding: sent but unanswered at the end of --duration.
  std::string json = "{\"requests\":" + std::to_string(n) + ",\"errors\":" + std::to_string(errors);
  char num[64];
  std::snprintf(num, sizeof num, "%.3f", elapsed_s);
  json += ",\"duration_s\":" + std::string(num);
  std::snprintf(num, sizeof num, "%.1f", elapsed_s > 0 ? static_cast<double>(n) / elapsed_s : 0.0);
  json += ",\"rps\":" + std::string(num);
  for (const int64_t p : {50, 90, 99})
    json += ",\"p" + std::to_string(p) + "_us\":" + (n > 0 ? us(percentile(sorted, p)) : "null");
  std::snprintf(num, sizeof num, "%.1f", n > 0 ? sum_ns / static_cast<double>(n) / 1e3 : 0.0);
  json += ",\"mean_us\":" + (n > 0 ? std::string(num) : "null");
  json += ",\"over\":{";
  for (std::size_t i = 0; i < over.size(); ++i) {
    // Share of complete responses slower than the threshold.
    const auto above = sorted.end() - std::upper_bound(sorted.begin(), sorted.end(), over[i].second.count());
    std::snprintf(num, sizeof num, "%.6f", n > 0 ? static_cast<double>(above) / static_cast<double>(n) : 0.0);
    json += (i > 0 ? ",\"" : "\"") + over[i].first + "\":" + num;
  }
  json += "},\"outstanding\":" + std::to_string(outstanding) + ",\"io_errors\":" + std::to_string(io_errors) +
          ",\"connections\":" + std::to_string(connections) + "}";
  std::printf("%s\n", json.c_str());
  std::fflush(stdout);
  return 0;
}
