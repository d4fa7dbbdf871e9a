// SPDX-License-Identifier: Apache-2.0
#include "publishers/listen_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace headroom::publishers {

namespace {

// "127.0.0.1:9446" / "[::1]:9446" (checked by the configuration) -> a socket address.
bool socket_address(const std::string& address, sockaddr_storage& out, socklen_t& len, int& port) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  port = std::atoi(address.c_str() + colon + 1);
  out = {};
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    auto* a = reinterpret_cast<sockaddr_in6*>(&out);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof *a;
    return ::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a->sin6_addr) == 1;
  }
  auto* a = reinterpret_cast<sockaddr_in*>(&out);
  a->sin_family = AF_INET;
  a->sin_port = htons(static_cast<uint16_t>(port));
  len = sizeof *a;
  return ::inet_pton(AF_INET, host.c_str(), &a->sin_addr) == 1;
}

}  // namespace

Result<int> listen_on(const std::string& address, int& port) {
  sockaddr_storage sa{};
  socklen_t len = 0;
  if (!socket_address(address, sa, len, port)) return logic_error("not an IP address and port: " + address);
  const int fd = ::socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return system_error(errno, "cannot open a socket for " + address);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (sa.ss_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    ::close(fd);
    return system_error(err, "cannot listen on " + address);
  }
  len = sizeof sa;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
  return fd;
}

void lower_listener_thread_priority() {
  thread_local bool lowered = false;
  if (lowered) return;
  lowered = true;
  const auto tid = static_cast<id_t>(::gettid());
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, tid);
  if (errno == 0) ::setpriority(PRIO_PROCESS, tid, now + kListenerNiceness);
}

}  // namespace headroom::publishers
