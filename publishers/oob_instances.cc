// SPDX-License-Identifier: Apache-2.0
#include "publishers/oob_instances.h"

#include "headroom/orca/signals_blocked.h"

#include <fcntl.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "headroom/orca/oob_streams.h"
#include "publishers/oob_publisher.h"

namespace headroom::publishers {

namespace {

using xds::service::orca::v3::OpenRcaService;

// StreamCoreMetrics for one scope: every stream on the listener reads it,
// whatever its :authority.
class InstanceStreamService final
    : public OpenRcaService::WithRawCallbackMethod_StreamCoreMetrics<OpenRcaService::Service> {
 public:
  using OpenRcaService::WithRawCallbackMethod_StreamCoreMetrics<OpenRcaService::Service>::StreamCoreMetrics;
  InstanceStreamService(std::shared_ptr<orca::StreamHub> hub, std::string scope)
      : hub_(std::move(hub)), scope_(std::move(scope)) {}
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamCoreMetrics(grpc::CallbackServerContext* context,
                                                                const grpc::ByteBuffer* request) override {
    return hub_->open(context, request, scope_);
  }

 private:
  std::shared_ptr<orca::StreamHub> hub_;
  std::string scope_;
};

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

}  // namespace

struct OobInstanceListeners::Listener {
  InstanceToServe instance;
  int port = 0;
  std::unique_ptr<InstanceStreamService> service;
  std::unique_ptr<grpc::Server> server;
  ~Listener() {
    if (!server) return;
    AllSignalsBlocked blocked;
    // Its instance is gone: its streams are cancelled at once.
    server->Shutdown(std::chrono::system_clock::now());
    server.reset();
  }
};

OobInstanceListeners::OobInstanceListeners(std::shared_ptr<orca::StreamHub> streams, std::string address,
                                           std::string proc_root)
    : streams_(std::move(streams)), address_(std::move(address)), proc_root_(std::move(proc_root)) {
  own_netns_fd_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (own_netns_fd_ >= 0 && ::fstat(own_netns_fd_, &st) == 0) own_netns_ = static_cast<uint32_t>(st.st_ino);
  else
    spdlog::warn("oob.instance_listen: cannot open headroomd's own network namespace (/proc/thread-self/ns/net): "
                 "{}; no instance listener will be opened", std::strerror(errno));
  // gRPC starts its threads (pollers, timers) with the first server; they
  // must start here, in headroomd's namespace, not in the first instance's.
  AllSignalsBlocked blocked;
  InstanceStreamService warm(streams_, "");
  grpc::ServerBuilder builder;
  builder.RegisterService(&warm);
  if (auto server = builder.BuildAndStart()) server->Shutdown(std::chrono::system_clock::now());
}

OobInstanceListeners::~OobInstanceListeners() {
  {
    std::lock_guard lock(mutex_);
    listeners_.clear();
  }
  if (own_netns_fd_ >= 0) ::close(own_netns_fd_);
}

std::map<std::string, int> OobInstanceListeners::open() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, int> out;
  for (const auto& [scope, l] : listeners_) out.emplace(scope, l->port);
  return out;
}

Result<std::unique_ptr<OobInstanceListeners::Listener>> OobInstanceListeners::open_in(const InstanceToServe& want) {
  if (own_netns_fd_ < 0) return logic_error("headroomd's own network namespace could not be opened at start");
  const std::string ns_path = proc_root_ + "/" + std::to_string(want.server_pid) + "/ns/net";
  Fd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (ns.fd < 0) {
    const int e = errno;
    return Error{e, ns_path + ": " + std::strerror(e) +
                        (e == ENOENT ? " (the server process has exited; its namespace may be gone)" : "")};
  }
  struct stat st {};
  if (::fstat(ns.fd, &st) != 0) return Error{errno, ns_path + ": " + std::strerror(errno)};
  if (static_cast<uint32_t>(st.st_ino) != want.netns)
    return logic_error(ns_path + " is network namespace " + std::to_string(st.st_ino) + ", not the instance's " +
                       std::to_string(want.netns) + " (the pid was reused); not opened there");

  auto l = std::make_unique<Listener>();
  l->instance = want;
  l->service = std::make_unique<InstanceStreamService>(streams_, want.scope);
  // A thread of its own enters the namespace: the others stay in headroomd's.
  int entered = 0, returned = 0;
  std::string why;
  {
    AllSignalsBlocked blocked;
    std::thread t([&] {
      if (::setns(ns.fd, CLONE_NEWNET) != 0) {
        entered = errno;
        return;
      }
      l->server = start_oob_server(address_, *l->service, &l->port);
      if (!l->server || l->port == 0) why = why_not(address_);  // tried in the instance's namespace too
      if (::setns(own_netns_fd_, CLONE_NEWNET) != 0) returned = errno;
    });
    t.join();
  }
  if (entered != 0)
    return Error{entered, "setns into " + ns_path + ": " + std::strerror(entered) +
                              (entered == EPERM ? " (headroomd needs CAP_SYS_ADMIN for instance_listen: under the packaged unit, "
                                                   "the drop-in oob-instances.conf; docs/oob.md)"
                                                : "")};
  if (returned != 0)  // the thread has ended: nothing else runs in the instance's namespace
    spdlog::warn("oob.instance_listen: returning from {}'s network namespace: {}", want.scope, std::strerror(returned));
  if (!l->server || l->port == 0) {
    l->server.reset();
    return Error{EADDRINUSE, "cannot listen on " + address_ + " inside it: " + why +
                                 " (choose an instance_listen port that no server of the pod uses)"};
  }
  return l;
}

void OobInstanceListeners::sync(const Tick& tick) {
  std::lock_guard lock(mutex_);
  if (have_seq_ && tick.meta.seq == last_seq_) return;
  have_seq_ = true;
  last_seq_ = tick.meta.seq;
  const auto wanted = instances_to_serve(tick, own_netns_);
  const auto find = [&](const std::string& scope) {
    return std::find_if(wanted.begin(), wanted.end(), [&](const auto& w) { return w.scope == scope; });
  };
  // Gone, stopped serving, or now another process or namespace: closed.
  std::erase_if(listeners_, [&](const auto& kv) {
    const auto it = find(kv.first);
    return it == wanted.end() || *it != kv.second->instance;
  });
  std::erase_if(failures_, [&](const auto& kv) { return find(kv.first) == wanted.end(); });
  for (const InstanceToServe& w : wanted) {
    if (listeners_.contains(w.scope)) continue;
    Failure& f = failures_[w.scope];
    const bool same = f.latch.failing() && f.netns == w.netns && f.pid == w.server_pid;
    if (same && tick.meta.timestamp_ms < f.retry_ms) continue;
    auto l = open_in(w);
    if (!l) {
      f.netns = w.netns;
      f.pid = w.server_pid;
      f.retry_ms = tick.meta.timestamp_ms + kRetryMs;
      f.latch.fail(spdlog::level::warn,
                   "oob.instance_listen: no listener on {} for instance {} ({}, server pid {}, netns {}): {}; "
                   "tried again every {} s while the instance serves",
                   address_, w.instance, w.scope, w.server_pid, w.netns, l.error().message, kRetryMs / 1000);
      continue;
    }
    f.latch.ok("oob.instance_listen: listening on {} inside instance {}'s network namespace ({})", address_,
               w.instance, w.scope);
    failures_.erase(w.scope);
    listeners_.emplace(w.scope, std::move(l.value()));
  }
}

}  // namespace headroom::publishers
