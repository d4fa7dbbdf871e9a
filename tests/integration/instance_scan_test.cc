// SPDX-License-Identifier: Apache-2.0
// scan_listeners (probes/instance.h) against the real kernel: servers on the
// same port in two network namespaces of their own and in the host's are
// found apart, each with its namespace's inode and the process that holds its
// socket. Root: it makes network namespaces (ip netns add); skips loudly
// without it. The namespaces and the servers go away even when a check fails.
#include "probes/instance.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace headroom::probes {
namespace {

int run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

// A network namespace made with `ip netns add` (lo up), deleted at scope exit.
class NetworkNamespace {
 public:
  explicit NetworkNamespace(std::string name) : name_(std::move(name)) {
    run("ip netns del " + name_);  // a leftover of a killed run
    ok_ = run("ip netns add " + name_) == 0 && run("ip -n " + name_ + " link set lo up") == 0;
  }
  ~NetworkNamespace() { run("ip netns del " + name_); }
  NetworkNamespace(const NetworkNamespace&) = delete;
  NetworkNamespace& operator=(const NetworkNamespace&) = delete;

  bool ok() const { return ok_; }
  std::string path() const { return "/run/netns/" + name_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  bool ok_ = false;
};

int listen_on(uint16_t port) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(s, 16) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

// A child process listening on 127.0.0.1:port inside the namespace at
// `netns_path`; killed and reaped at scope exit. It closes its copy of the
// parent's socket `parent_socket`, which it would otherwise hold too.
class ServerInNamespace {
 public:
  ServerInNamespace(const std::string& netns_path, uint16_t port, int parent_socket) {
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only system calls between fork and _exit.
      ::close(ready[0]);
      ::close(parent_socket);
      const int ns = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(2);
      if (listen_on(port) < 0) ::_exit(3);
      const char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(4);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char byte = 0;
    listening_ = pid_ > 0 && ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
  }
  ~ServerInNamespace() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ServerInNamespace(const ServerInNamespace&) = delete;
  ServerInNamespace& operator=(const ServerInNamespace&) = delete;

  bool listening() const { return listening_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool listening_ = false;
};

const ListeningServer* find(const std::vector<ListeningServer>& servers, uint32_t netns) {
  for (const ListeningServer& s : servers) {
    if (s.netns == netns) return &s;
  }
  return nullptr;
}

TEST(InstanceScan, SamePortInTwoNamespacesAndTheHostFoundApart) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "SKIPPED: making network namespaces (ip netns add) needs root; run the integration tier as root "
                    "(CI does)";
  if (run("ip -V") != 0) GTEST_SKIP() << "SKIPPED: the ip command (iproute2) is not installed";

  // The host's server takes a free port; the namespaces' servers use the same one.
  const int host_socket = listen_on(0);
  ASSERT_GE(host_socket, 0) << "listen on 127.0.0.1: " << std::strerror(errno);
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(host_socket, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t port = ntohs(addr.sin_port);

  const std::string prefix = "hr-scan-" + std::to_string(::getpid());
  NetworkNamespace a(prefix + "-a"), b(prefix + "-b");
  ASSERT_TRUE(a.ok()) << "ip netns add " << a.name() << " failed";
  ASSERT_TRUE(b.ok()) << "ip netns add " << b.name() << " failed";
  std::optional<ServerInNamespace> server_a(std::in_place, a.path(), port, host_socket);
  ServerInNamespace server_b(b.path(), port, host_socket);
  ASSERT_TRUE(server_a->listening()) << "no server on port " << port << " in " << a.name();
  ASSERT_TRUE(server_b.listening()) << "no server on port " << port << " in " << b.name();

  auto ns_a = netns_of("/proc", server_a->pid());
  auto ns_b = netns_of("/proc", server_b.pid());
  auto ns_host = netns_of("/proc", ::getpid());
  ASSERT_TRUE(ns_a.ok()) << ns_a.error().message;
  ASSERT_TRUE(ns_b.ok()) << ns_b.error().message;
  ASSERT_TRUE(ns_host.ok()) << ns_host.error().message;
  EXPECT_NE(*ns_a, *ns_b);
  EXPECT_NE(*ns_a, *ns_host);
  EXPECT_NE(*ns_b, *ns_host);

  const auto servers = scan_listeners("/proc", {port});
  for (const ListeningServer& s : servers) EXPECT_EQ(s.port, port);
  const struct {
    uint32_t netns;
    pid_t pid;
    const char* where;
  } expected[] = {{*ns_a, server_a->pid(), "namespace a"},
                  {*ns_b, server_b.pid(), "namespace b"},
                  {*ns_host, ::getpid(), "the host namespace"}};
  for (const auto& e : expected) {
    const ListeningServer* s = find(servers, e.netns);
    ASSERT_NE(s, nullptr) << "no server found in " << e.where << " (net:[" << e.netns << "])";
    EXPECT_EQ(s->pid, e.pid) << e.where;
    EXPECT_EQ(s->listeners, 1) << e.where;
  }
  EXPECT_EQ(servers.size(), 3u);

  // The host's socket closed, the server of a gone: only b's remains.
  ::close(host_socket);
  server_a.reset();
  const auto after = scan_listeners("/proc", {port});
  EXPECT_EQ(find(after, *ns_host), nullptr) << "the host's socket is closed";
  EXPECT_EQ(find(after, *ns_a), nullptr) << "namespace a has no process any more";
  ASSERT_NE(find(after, *ns_b), nullptr);
  EXPECT_EQ(find(after, *ns_b)->pid, server_b.pid());
  EXPECT_EQ(after.size(), 1u);
}

}  // namespace
}  // namespace headroom::probes
