// SPDX-License-Identifier: Apache-2.0
#include "publishers/oob_gate.h"

#include "headroom/orca/signals_blocked.h"
#include "publishers/listen_socket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with tcpi_bytes_received
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

namespace headroom::publishers {

namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::size_t kPrefaceBytes = sizeof kPreface - 1;  // 24
// The descriptors waiting connections may take: a quarter of RLIMIT_NOFILE.
constexpr double kDescriptorShare = 0.25;
// Out of descriptors: accept() pauses this long (the listener is not polled
// meanwhile, so it does not spin).
constexpr std::chrono::milliseconds kAcceptPause{100};

uint64_t nofile_soft_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  return r.rlim_cur == RLIM_INFINITY ? (1u << 20) : r.rlim_cur;
}

}  // namespace

Result<std::unique_ptr<OobGate>> OobGate::start(const std::string& address, grpc::Server* server, int& port) {
  auto fd = listen_on(address, port);
  if (!fd) return fd.error();
  ::fcntl(fd.value(), F_SETFL, O_NONBLOCK);
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ep < 0 || wake < 0) {
    const int err = errno;
    ::close(fd.value());
    if (ep >= 0) ::close(ep);
    if (wake >= 0) ::close(wake);
    return system_error(err, "cannot poll " + address);
  }
  const std::size_t cap = connection_cap(nofile_soft_limit(), kMaxPendingOobConnections, kDescriptorShare);
  std::unique_ptr<OobGate> gate(new OobGate(fd.value(), ep, wake, server, cap));
  AllSignalsBlocked blocked;
  gate->thread_ = std::thread([g = gate.get()] { g->run(); });
  return gate;
}

OobGate::OobGate(int listen_fd, int epoll_fd, int wake_fd, grpc::Server* server, std::size_t cap)
    : listen_fd_(listen_fd),
      epoll_fd_(epoll_fd),
      wake_fd_(wake_fd),
      server_(server),
      pending_(cap, kPrefaceDeadline),
      // A served connection takes two descriptors: gRPC's and the duplicate followed here.
      max_handed_(connection_cap(nofile_soft_limit(), kMaxOobConnections, kDescriptorShare / 2)) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = static_cast<uint64_t>(listen_fd_);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = static_cast<uint64_t>(wake_fd_);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
}

OobGate::~OobGate() {
  stop_ = true;
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) < 0) spdlog::debug("oob.listen: cannot wake the accept thread");
  if (thread_.joinable()) thread_.join();
  for (ConnectionDeadlines::Id id : pending_.expired(ConnectionDeadlines::Clock::time_point::max()))
    ::close(static_cast<int>(id));
  for (const auto& [keep, serial] : live_handed_) ::close(keep);
  ::close(listen_fd_);
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void OobGate::drop(int fd) {
  pending_.closed(static_cast<ConnectionDeadlines::Id>(fd));
  ::close(fd);  // leaves the epoll with it
}

void OobGate::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        spdlog::debug("oob.listen: accept: {}; pausing {} ms", std::strerror(errno), kAcceptPause.count());
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accepting_ = false;
        resume_accept_ = ConnectionDeadlines::Clock::now() + kAcceptPause;
      }
      return;  // EAGAIN, or a connection that went away before accept()
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;  // each new byte once, not while it waits
    ev.data.u64 = static_cast<uint64_t>(fd);
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    if (auto evicted = pending_.accepted(static_cast<ConnectionDeadlines::Id>(fd), ConnectionDeadlines::Clock::now()))
      drop(static_cast<int>(*evicted));
  }
}

void OobGate::examine(int fd, uint32_t events) {
  char head[kPrefaceBytes];
  const ssize_t n = ::recv(fd, head, sizeof head, MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0 || std::memcmp(head, kPreface, static_cast<std::size_t>(n)) != 0) return drop(fd);
  if (static_cast<std::size_t>(n) < kPrefaceBytes) {
    if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) drop(fd);  // it will send no more
    return;
  }
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  pending_.closed(static_cast<ConnectionDeadlines::Id>(fd));
  handed(fd);
  grpc::AddInsecureChannelFromFd(server_, fd);  // gRPC's from here on, the preface still unread
}

namespace {

// Epoll data: a waiting connection's descriptor, or a handed one's duplicate with this bit.
constexpr uint64_t kHandedTag = uint64_t{1} << 63;

uint64_t bytes_received(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  return info.tcpi_bytes_received;
}

}  // namespace

void OobGate::forget_handed(int keep) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, keep, nullptr);  // gRPC's descriptor shares the registration's file
  ::close(keep);
  live_handed_.erase(keep);
}

void OobGate::handed(int fd) {
  const int keep = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (keep < 0) return;  // out of descriptors: this one is not counted, the next ones will be
  epoll_event ev{};
  ev.events = EPOLLRDHUP | EPOLLET;  // its end only (hang-ups are always reported)
  ev.data.u64 = kHandedTag | static_cast<uint64_t>(keep);
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, keep, &ev) != 0) {
    ::close(keep);
    return;
  }
  live_handed_[keep] = ++next_serial_;
  handed_.push_back(Handed{keep, next_serial_});
  // Over the cap: the oldest one without a call is shut down (gRPC sees the
  // end and closes it; its hang-up then closes the duplicate).
  const auto followed = [this](const Handed& h) {
    auto it = live_handed_.find(h.keep);
    return it != live_handed_.end() && it->second == h.serial;
  };
  for (auto it = handed_.begin(); live_handed_.size() > max_handed_ && it != std::prev(handed_.end());) {
    if (!followed(*it)) {
      it = handed_.erase(it);
      continue;
    }
    if (bytes_received(it->keep) >= kCallBytes) {  // a client with a call
      ++it;
      continue;
    }
    ::shutdown(it->keep, SHUT_RDWR);
    forget_handed(it->keep);
    handed_.erase(it);
    return;
  }
  while (!handed_.empty() && !followed(handed_.front())) handed_.pop_front();
}

void OobGate::run() {
  lower_listener_thread_priority();
  epoll_event events[256];
  while (!stop_) {
    const int n = ::epoll_wait(epoll_fd_, events, 256, 250);
    for (int i = 0; i < n; ++i) {
      if ((events[i].data.u64 & kHandedTag) != 0) {  // gRPC shut it down, or the peer ended it
        forget_handed(static_cast<int>(events[i].data.u64 & ~kHandedTag));
        continue;
      }
      const int fd = static_cast<int>(events[i].data.u64);
      if (fd == wake_fd_) continue;
      if (fd == listen_fd_) {
        accept_all();
        continue;
      }
      examine(fd, events[i].events);
    }
    const auto now = ConnectionDeadlines::Clock::now();
    for (ConnectionDeadlines::Id id : pending_.expired(now)) drop(static_cast<int>(id));
    if (!accepting_ && now >= resume_accept_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = static_cast<uint64_t>(listen_fd_);
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
      accepting_ = true;
    }
  }
}

}  // namespace headroom::publishers
