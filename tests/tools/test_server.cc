// SPDX-License-Identifier: Apache-2.0
// hr-test-server: a real TCP server for the tests to trace. One blocking
// thread per connection, accept loop in the main thread.
//
//   http mode: HTTP/1.1 keep-alive. Per path (longest prefix wins):
//              --delay /slow=50ms, --status /err=500; ?delay_us=N overrides the
//              delay. --cpu /work=2ms burns that much CPU per request (the
//              serving thread's own CPU clock, CLOCK_THREAD_CPUTIME_ID, so on
//              a busy machine the request takes longer than that), after its
//              body is read and before the delay: more connections than CPUs
//              saturate the server and requests wait for a CPU. Every response
//              goes out in one send() call.
//              Known capacity (http): --capacity RPS serves at most RPS
//              requests a second (a token bucket holding RPS/20, at least 1,
//              shared by all connections); --reject-capacity RPS answers up
//              to that many more a second 503 at once; whatever exceeds both
//              is answered 500 after the path's delay. Served requests get
//              the path's delay and status as usual. Without --capacity
//              every request is served.
//   line mode: each request is a line; a leading integer is the delay in
//              microseconds; the answer is "ok\n".
//
// Prints "port=<n>" as its first stdout line once listening. SIGTERM/SIGINT
// exit 0 at once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools_common.h"

namespace {

using headroom::test_tools::parse_duration;
using headroom::test_tools::parse_int;
using std::chrono::microseconds;
using std::chrono::nanoseconds;

constexpr std::size_t kMaxHead = 64 * 1024;  // request line + headers, or one line-mode line

template <typename T>
struct PrefixRule {
  std::string prefix;
  T value;
};

// --capacity / --reject-capacity: two token buckets, refilled by the clock.
class Admission {
 public:
  enum class Verdict { serve, reject, fail };

  Admission(double capacity, double reject_capacity)
      : serve_(capacity), reject_(reject_capacity), last_(std::chrono::steady_clock::now()) {}

  Verdict admit() {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    serve_.refill(elapsed);
    reject_.refill(elapsed);
    if (serve_.take()) return Verdict::serve;
    if (reject_.take()) return Verdict::reject;
    return Verdict::fail;
  }

 private:
  struct Bucket {
    explicit Bucket(double r) : rate(r), burst(std::max(1.0, r / 20)), tokens(r > 0 ? burst : 0) {}
    void refill(double seconds) { tokens = rate > 0 ? std::min(burst, tokens + rate * seconds) : 0; }
    bool take() {
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    }
    double rate, burst, tokens;
  };
  std::mutex mu_;
  Bucket serve_, reject_;
  std::chrono::steady_clock::time_point last_;
};

struct Config {
  std::string mode = "http";
  std::vector<PrefixRule<nanoseconds>> delays;
  std::vector<PrefixRule<nanoseconds>> cpu;  // --cpu: CPU time burnt per request
  std::vector<PrefixRule<int>> statuses;
  Admission* admission = nullptr;  // --capacity; null: serve everything
};

// The value of the longest prefix of `path` among `rules`, if any.
template <typename T>
std::optional<T> longest_prefix(const std::vector<PrefixRule<T>>& rules, std::string_view path) {
  const PrefixRule<T>* best = nullptr;
  for (const auto& r : rules)
    if (path.starts_with(r.prefix) && (best == nullptr || r.prefix.size() > best->prefix.size())) best = &r;
  if (best == nullptr) return std::nullopt;
  return best->value;
}

// "/slow=50ms" -> {"/slow", "50ms"}.
std::optional<std::pair<std::string, std::string>> split_rule(const std::string& text) {
  const auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) return std::nullopt;
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
  }
}

// Sends all of `data`. The responses are small, so on a blocking socket this
// is one send() call; the loop only guards against a short write.
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Appends whatever the peer sends next to `buf`; false on EOF or error.
bool read_more(int fd, std::string& buf) {
  char chunk[16 * 1024];
  for (;;) {
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
}

void sleep_for(nanoseconds d) {
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

nanoseconds thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + nanoseconds(ts.tv_nsec);
}

// Computes until this thread has used `d` of CPU time (not wall time).
void burn_cpu(nanoseconds d) {
  if (d.count() <= 0) return;
  const nanoseconds until = thread_cpu_time() + d;
  volatile uint64_t sink = 0;
  do {
    for (uint64_t i = 0; i < 4096; ++i) sink = sink + i * i;
  } while (thread_cpu_time() < until);
}

// ?a=b&delay_us=N -> N.
std::optional<nanoseconds> query_delay(std::string_view query) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    if (param.starts_with("delay_us="))
      if (auto us = parse_int(param.substr(9))) return microseconds(*us);
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

std::string http_response(int status, bool head, bool close) {
  const bool no_body = status == 204 || status == 304;
  const std::string body = status < 400 ? "ok\n" : "error\n";
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  if (!no_body) r += "Content-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (close) r += "Connection: close\r\n";
  r += "\r\n";
  if (!no_body && !head) r += body;
  return r;
}

void serve_http(int fd, const Config& cfg) {
  std::string buf;
  for (;;) {
    // Request line and headers.
    std::size_t head_end;
    while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
      if (buf.size() > kMaxHead) {
        send_all(fd, http_response(431, false, true));
        return;
      }
      if (!read_more(fd, buf)) return;
    }
    const std::string_view head(buf.data(), head_end);
    const auto line_end = head.find("\r\n");
    const std::string_view request_line = head.substr(0, line_end);
    const auto sp1 = request_line.find(' ');
    const auto sp2 = request_line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) {
      send_all(fd, http_response(400, false, true));
      return;
    }
    const std::string_view method = request_line.substr(0, sp1);
    const std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = request_line.substr(sp2 + 1);

    // Headers that matter: the body length and whether to keep the connection.
    bool close = version == "HTTP/1.0";
    std::size_t content_length = 0;
    std::string_view rest = line_end == std::string_view::npos ? std::string_view{} : head.substr(line_end + 2);
    while (!rest.empty()) {
      const auto eol = rest.find("\r\n");
      const std::string_view header = rest.substr(0, eol);
      rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 2);
      const auto colon = header.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string_view name = trim(header.substr(0, colon));
      const std::string_view value = trim(header.substr(colon + 1));
      if (iequals(name, "Content-Length")) {
        const auto n = parse_int(value);
        if (!n) {
          send_all(fd, http_response(400, false, true));
          return;
        }
        content_length = static_cast<std::size_t>(*n);
      } else if (iequals(name, "Connection")) {
        if (iequals(value, "close")) close = true;
        if (iequals(value, "keep-alive")) close = false;
      } else if (iequals(name, "Transfer-Encoding")) {
        send_all(fd, http_response(501, false, true));  // chunked bodies are not needed here
        return;
      }
    }

    const auto query_pos = target.find('?');
    const std::string_view path = target.substr(0, query_pos);
    std::optional<nanoseconds> delay;
    if (query_pos != std::string_view::npos) delay = query_delay(target.substr(query_pos + 1));
    if (!delay) delay = longest_prefix(cfg.delays, path);
    nanoseconds cpu = longest_prefix(cfg.cpu, path).value_or(nanoseconds{0});
    int status = longest_prefix(cfg.statuses, path).value_or(200);
    if (cfg.admission != nullptr) {
      switch (cfg.admission->admit()) {
        case Admission::Verdict::serve:
          break;
        case Admission::Verdict::reject:  // load shed: at once
          status = 503;
          delay = nanoseconds{0};
          cpu = nanoseconds{0};
          break;
        case Admission::Verdict::fail:  // beyond both: the work is done, and fails
          status = 500;
          break;
      }
    }
    const bool head_request = method == "HEAD";

    // Body: read it in full, then drop it together with the head.
    const std::size_t request_size = head_end + 4 + content_length;
    while (buf.size() < request_size)
      if (!read_more(fd, buf)) return;
    buf.erase(0, request_size);

    burn_cpu(cpu);
    sleep_for(delay.value_or(nanoseconds{0}));
    if (!send_all(fd, http_response(status, head_request, close)) || close) return;
  }
}

void serve_line(int fd) {
  std::string buf;
  for (;;) {
    std::size_t eol;
    while ((eol = buf.find('\n')) == std::string::npos) {
      if (buf.size() > kMaxHead || !read_more(fd, buf)) return;
    }
    // A leading integer (after blanks) is the delay in microseconds.
    std::size_t i = 0;
    while (i < eol && (buf[i] == ' ' || buf[i] == '\t')) ++i;
    int64_t delay_us = 0;
    for (; i < eol && buf[i] >= '0' && buf[i] <= '9' && delay_us < 1'000'000'000'000; ++i)
      delay_us = delay_us * 10 + (buf[i] - '0');
    buf.erase(0, eol + 1);
    sleep_for(microseconds(delay_us));
    if (!send_all(fd, "ok\n")) return;
  }
}

void handle_connection(int fd, const Config& cfg) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (cfg.mode == "http")
    serve_http(fd, cfg);
  else
    serve_line(fd);
  ::close(fd);
}

extern "C" void on_terminate(int) { _exit(0); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hr-test-server: a TCP server (HTTP/1.1 or a line protocol) with configurable per-path delays"};
  int port = 0;
  std::string bind_addr = "127.0.0.1";
  Config cfg;
  std::vector<std::string> delay_rules;
  std::vector<std::string> cpu_rules;
  std::vector<std::string> status_rules;
  app.add_option("--port", port, "TCP port; 0 picks an ephemeral one")->check(CLI::Range(0, 65535));
  app.add_option("--bind", bind_addr, "IPv4 address to listen on")->capture_default_str();
  app.add_option("--mode", cfg.mode, "Protocol")->check(CLI::IsMember({"http", "line"}))->capture_default_str();
  app.add_option("--delay", delay_rules, "http: PREFIX=DURATION (us/ms/s), repeatable; longest prefix wins");
  app.add_option("--cpu", cpu_rules,
                 "http: PREFIX=DURATION of CPU time burnt per request (the thread's CPU clock), repeatable; "
                 "longest prefix wins");
  app.add_option("--status", status_rules, "http: PREFIX=CODE, repeatable; longest prefix wins (default 200)");
  double capacity = 0;
  double reject_capacity = 0;
  auto* capacity_opt = app.add_option("--capacity", capacity,
                                      "http: serve at most RPS requests/s (token bucket, burst RPS/20); "
                                      "the rest get 503 (--reject-capacity) or 500")
                           ->check(CLI::PositiveNumber);
  app.add_option("--reject-capacity", reject_capacity,
                 "http: beyond --capacity, answer up to RPS more requests/s 503 at once; beyond both, 500")
      ->check(CLI::PositiveNumber)
      ->needs(capacity_opt);
  CLI11_PARSE(app, argc, argv);

  for (const auto& text : delay_rules) {
    const auto rule = split_rule(text);
    const auto d = rule ? parse_duration(rule->second) : std::nullopt;
    if (!d) {
      std::fprintf(stderr, "hr-test-server: bad --delay '%s' (want PREFIX=DURATION, e.g. /slow=50ms)\n", text.c_str());
      return 2;
    }
    cfg.delays.push_back({rule->first, *d});
  }
  for (const auto& text : cpu_rules) {
    const auto rule = split_rule(text);
    const auto d = rule ? parse_duration(rule->second) : std::nullopt;
    if (!d) {
      std::fprintf(stderr, "hr-test-server: bad --cpu '%s' (want PREFIX=DURATION, e.g. /work=2ms)\n", text.c_str());
      return 2;
    }
    cfg.cpu.push_back({rule->first, *d});
  }
  for (const auto& text : status_rules) {
    const auto rule = split_rule(text);
    const auto code = rule ? parse_int(rule->second) : std::nullopt;
    if (!code || *code < 200 || *code > 599) {
      std::fprintf(stderr, "hr-test-server: bad --status '%s' (want PREFIX=CODE, 200..599)\n", text.c_str());
      return 2;
    }
    cfg.statuses.push_back({rule->first, static_cast<int>(*code)});
  }

  std::unique_ptr<Admission> admission;
  if (capacity > 0) {
    admission = std::make_unique<Admission>(capacity, reject_capacity);
    cfg.admission = admission.get();
  }

  struct sigaction sa{};
  sa.sa_handler = on_terminate;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  headroom::test_tools::raise_fd_limit();

  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) {
    std::perror("hr-test-server: socket");
    return 1;
  }
  const int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, bind_addr.c_str(), &addr.sin_addr) != 1) {
    std::fprintf(stderr, "hr-test-server: bad --bind address '%s'\n", bind_addr.c_str());
    return 2;
  }
  if (::bind(lfd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, SOMAXCONN) != 0) {
    std::perror("hr-test-server: bind/listen");
    return 1;
  }
  socklen_t len = sizeof addr;
  getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::printf("port=%u\n", static_cast<unsigned>(ntohs(addr.sin_port)));
  std::fflush(stdout);

  for (;;) {
    const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory: back off instead of spinning.
      std::perror("hr-test-server: accept");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    try {
      std::thread(handle_connection, fd, std::cref(cfg)).detach();
    } catch (const std::system_error& e) {  // out of threads: refuse this one connection
      std::fprintf(stderr, "hr-test-server: thread: %s\n", e.what());
      ::close(fd);
    }
  }
}
