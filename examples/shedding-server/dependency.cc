// SPDX-License-Identifier: Apache-2.0
// The shedding server's dependency client (dependency.h).
#include "dependency.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <string>
#include <system_error>

#include <headroom/orca/priority.h>

namespace shedding_server {

namespace orca = headroom::orca;

std::optional<sockaddr_in> parse_ipv4_endpoint(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  const std::string host(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port == 0 || port > 65535) return std::nullopt;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) return std::nullopt;
  return a;
}

namespace {
bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}
}  // namespace

std::optional<int> parse_answer(std::string_view buf, std::size_t& consumed) {
  const std::size_t end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) return buf.size() > 64 * 1024 ? std::optional<int>(-1) : std::nullopt;
  // "HTTP/1.x NNN ..."
  if (buf.size() < 12 || buf.substr(0, 7) != "HTTP/1.") return -1;
  int status = 0;
  const auto [p, ec] = std::from_chars(buf.data() + 9, buf.data() + 12, status);
  if (ec != std::errc{} || p != buf.data() + 12) return -1;
  std::size_t length = 0;
  std::string_view head = buf.substr(0, end + 2);
  for (std::size_t at = head.find("\r\n"); at != std::string_view::npos && at + 2 < head.size();) {
    const std::size_t next = head.find("\r\n", at + 2);
    const std::string_view line = head.substr(at + 2, next - at - 2);
    if (starts_with_ci(line, "content-length:")) {
      std::string_view v = line.substr(15);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      const auto [q, e2] = std::from_chars(v.data(), v.data() + v.size(), length);
      if (e2 != std::errc{}) return -1;
    }
    at = next;
  }
  if (buf.size() < end + 4 + length) return std::nullopt;
  consumed = end + 4 + length;
  return status;
}

std::string_view call_result_name(CallResult r) {
  switch (r) {
    case CallResult::ok: return "ok";
    case CallResult::error_answer: return "error_answer";
    case CallResult::failed: return "failed";
    case CallResult::timed_out: return "timed_out";
  }
  return "?";
}

DependencyClient::~DependencyClient() { drop(); }

void DependencyClient::drop() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  in_.clear();
}

bool DependencyClient::connect_once() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return false;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout_.count() % 1000) * 1000);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // bounds connect() too
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&to_), sizeof to_) != 0) {
    drop();
    return false;
  }
  return true;
}

CallResult DependencyClient::call(std::string_view path) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  if (fd_ < 0 && !connect_once()) return CallResult::failed;
  std::string request = "GET ";
  request += path;
  request += " HTTP/1.1\r\nHost: dependency\r\n";
  request += orca::kPriorityHeader;  // the caller's PriorityScope, or a downgrade of it
  request += ": ";
  request += orca::format_priority_header(orca::outgoing_priority());
  request += "\r\n\r\n";
  if (::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    drop();
    return CallResult::failed;
  }
  for (;;) {
    std::size_t consumed = 0;
    if (const auto status = parse_answer(in_, consumed)) {
      if (*status < 0) {
        drop();
        return CallResult::failed;
      }
      in_.erase(0, consumed);
      return *status >= 500 ? CallResult::error_answer : CallResult::ok;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
      drop();  // the answer may still come: this connection cannot be reused
      return CallResult::timed_out;
    }
    char buf[16 * 1024];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      drop();
      return CallResult::failed;
    }
    in_.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace shedding_server
