// SPDX-License-Identifier: Apache-2.0
#include "publishers/oob_publisher.h"

#include "headroom/orca/signals_blocked.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "publishers/listen_socket.h"
#include "publishers/oob_gate.h"
#include "publishers/oob_instances.h"
#include "publishers/oob_module.h"

namespace headroom::publishers {

namespace {

using std::chrono::milliseconds;

// gRPC starts its threads from the thread that first needs them; they must
// not take the daemon's signals (AllSignalsBlocked).

}  // namespace

std::string why_not(const std::string& address) {
  if (address.starts_with("unix:")) {
    const std::filesystem::path path(address.substr(5));
    const auto dir = path.parent_path();
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return dir.string() + ": " + std::strerror(errno);
    if (::access(dir.c_str(), W_OK) != 0) return dir.string() + ": " + std::strerror(errno);
    return "cannot bind the socket " + path.string();
  }
  const auto colon = address.rfind(':');
  std::string host = address.substr(0, colon);
  const int port = std::atoi(address.c_str() + colon + 1);
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family = AF_INET;
  if (host.starts_with('[')) {
    host = host.substr(1, host.size() - 2);
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET6, host.c_str(), &a->sin6_addr) != 1) return "not an address";
    family = AF_INET6;
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &a->sin_addr) != 1) return "not an address";
    len = sizeof *a;
  }
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  std::string why = "gRPC could not listen (its log has the reason)";
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) why = std::strerror(errno);
  ::close(fd);
  return why;
}

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

orca::StreamOptions stream_options(const OobOptions& options) {
  orca::StreamOptions o;
  o.default_interval = std::chrono::duration_cast<milliseconds>(options.oob.default_interval);
  o.min_interval = std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(options.interval));
  o.max_streams = options.oob.max_streams;
  return o;
}

}  // namespace

orca::StreamHub::Resolver authority_resolver(const OobOptions& options) {
  std::vector<std::pair<uint16_t, std::string>> ports;  // first endpoint per port, in file order
  std::vector<std::pair<std::string, std::string>> names;  // endpoint name -> scope
  std::string known;
  for (const auto& e : options.endpoints) {
    names.emplace_back(e.name, e.scope);
    if (std::any_of(ports.begin(), ports.end(), [&](const auto& p) { return p.first == e.port; })) continue;
    ports.emplace_back(e.port, e.scope);
    known += (known.empty() ? "" : ", ") + std::to_string(e.port) + " (" + e.name + ")";
  }
  std::vector<std::pair<std::string, std::string>> dependencies;  // "dependency.<name>" -> scope
  for (const auto& d : options.dependencies) dependencies.emplace_back(d.scope, d.scope);
  const bool error = options.oob.unknown_authority_error;
  return [ports = std::move(ports), names = std::move(names), dependencies = std::move(dependencies),
          known = std::move(known), error](std::string_view authority) -> std::variant<std::string, grpc::Status> {
    // "dependency.<name>" first: its port, if any, says nothing (the stream
    // asks for a report of this node, not of the dependency's port).
    const auto host = orca::authority_host(authority);
    for (const auto& [written, scope] : dependencies)
      if (host == written) return scope;
    const auto port = orca::authority_port(authority);
    if (port)
      for (const auto& [p, scope] : ports)
        if (p == *port) return scope;
    // Envoy sends an endpoint's hostname when it has one: "checkout".
    for (const auto& [name, scope] : names)
      if (host == name) return scope;
    if (!error) return std::string(orca::kNodeScope);
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "no [[endpoint]] of this headroomd has the port or the name of authority \"" +
                            std::string(authority) + "\"; endpoint ports: " + (known.empty() ? std::string("none") : known) +
                            (dependencies.empty() ? std::string() : "; a dependency's report: authority dependency.<name>"));
  };
}


// ---------------------------------------------------------------------------
// OobListener, OobHub

std::unique_ptr<grpc::Server> start_oob_server(const std::string& address, grpc::Service& service, int* port) {
  grpc::ServerBuilder builder;
  // A TCP listener's connections come through OobGate: the server has no port.
  if (!address.empty()) builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  builder.RegisterService(&service);
  // Two agents must not share a port without knowing it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(orca::kMaxRequestBytes);
  builder.SetMaxSendMessageSize(static_cast<int>(orca::kMaxReportBytes));
  // A connection that never completes its HTTP/2 handshake, or a peer that
  // vanished, does not hold its resources for long.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 5'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  // A connection with no call (a client that sent the preface, then
  // nothing) is closed after this long; a stream's connection is never idle.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, static_cast<int>(kOobIdleConnection.count()));
  grpc::ResourceQuota quota("headroom-oob");
  quota.Resize(64 << 20);
  builder.SetResourceQuota(quota);
  return builder.BuildAndStart();
}

OobListener::~OobListener() {
  gate_.reset();  // no new connection while the server shuts down
  if (!server_) return;
  AllSignalsBlocked blocked;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_.reset();
}

OobHub::OobHub() {
  AllSignalsBlocked blocked;
  streams_ = orca::StreamHub::create({}, [](std::string_view) -> std::variant<std::string, grpc::Status> {
    return std::string(orca::kNodeScope);
  });
}

Result<std::shared_ptr<OobListener>> OobHub::listener(const std::string& address) {
  std::lock_guard lock(listeners_mutex_);
  if (auto it = listeners_.find(address); it != listeners_.end())
    if (auto running = it->second.lock()) return running;
  if (address.starts_with("unix:")) {
    // gRPC replaces a socket left behind, not anything else.
    struct stat st {};
    const std::string path = address.substr(5);
    if (::lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))
      return logic_error(path + " exists and is not a socket; remove it or choose another path");
  }
  AllSignalsBlocked blocked;
  auto l = std::shared_ptr<OobListener>(new OobListener());
  l->address_ = address;
  l->service_ = std::make_unique<orca::StreamService>(streams_);
  int port = 0;
  const bool tcp = !address.starts_with("unix:");
  // Started from a thread of listener priority: the server's threads inherit it.
  std::thread([&] {
    lower_listener_thread_priority();
    l->server_ = start_oob_server(tcp ? std::string() : address, *l->service_, &port);
  }).join();
  if (!l->server_) {
    l->server_.reset();
    return logic_error("cannot listen on " + address + ": " + why_not(address));
  }
  if (tcp) {
    auto gate = OobGate::start(address, l->server_.get(), port);
    if (!gate) return gate.error();
    l->gate_ = std::move(gate.value());
  }
  if (address.starts_with("unix:")) {
    // Anyone on this machine may connect, as anyone may read the report
    // files (0644): the unit's UMask would leave the socket to its owner.
    if (::chmod(address.c_str() + 5, 0666) != 0)
      spdlog::warn("oob.listen: chmod 0666 {}: {}; only user {} can connect", address.substr(5), std::strerror(errno),
                   ::geteuid());
  }
  l->port_ = address.starts_with("unix:") ? 0 : port;
  listeners_[address] = l;
  return l;
}

std::shared_ptr<OobInstanceListeners> OobHub::instance_listeners(const std::string& address,
                                                                const std::string& proc_root) {
  std::lock_guard lock(listeners_mutex_);
  if (auto it = instance_listeners_.find(address); it != instance_listeners_.end())
    if (auto running = it->second.lock()) return running;
  auto set = std::make_shared<OobInstanceListeners>(streams_, address, proc_root);
  instance_listeners_[address] = set;
  return set;
}

void OobHub::configure(const OobOptions& options) {
  streams_->configure(stream_options(options), authority_resolver(options));
}

void OobHub::update(const Tick& tick) {
  std::lock_guard lock(reports_mutex_);
  if (have_seq_ && tick.meta.seq == last_seq_ && !tick.meta.stopped) return;
  have_seq_ = true;
  last_seq_ = tick.meta.seq;
  std::vector<std::string> scopes;
  scopes.reserve(tick.reports.size());
  for (const ScopeReport& r : tick.reports) {
    grpc::Slice slice(r.bytes);
    orca::Snapshot s{grpc::ByteBuffer(&slice, 1), {}};
    s.info.version = ++version_;
    s.info.timestamp_ms = tick.meta.timestamp_ms;
    s.info.interval_ms = tick.meta.interval_ms;
    s.info.final = tick.meta.stopped;
    streams_->set(r.scope, std::move(s));
    scopes.push_back(r.scope);
  }
  for (const auto& old : scopes_)
    if (std::find(scopes.begin(), scopes.end(), old) == scopes.end()) streams_->clear(old);
  scopes_ = std::move(scopes);
}

// ---------------------------------------------------------------------------
// OobPublisher

Result<Publishers> OobPublisher::build(const OobOptions& options) {
  Publishers out;
  if (options.oob.listen.empty() && options.oob.instance_listen.empty()) return out;
  auto hub = OobHub::shared();
  std::vector<std::shared_ptr<OobListener>> listeners;
  for (const auto& address : options.oob.listen) {
    auto l = hub->listener(address);
    if (!l)
      return Error{l.error().code != 0 ? l.error().code : EADDRNOTAVAIL,
                   "oob.listen: " + l.error().message +
                       "; choose a free port, an address of this machine, or a writable directory"};
    listeners.push_back(std::move(l.value()));
  }
  std::shared_ptr<OobInstanceListeners> instances;
  if (!options.oob.instance_listen.empty())
    instances = hub->instance_listeners(options.oob.instance_listen, options.proc_root);
  out.push_back(std::unique_ptr<Publisher>(
      new OobPublisher(std::move(hub), std::move(listeners), std::move(instances), options)));
  return out;
}

OobPublisher::OobPublisher(std::shared_ptr<OobHub> hub, std::vector<std::shared_ptr<OobListener>> listeners,
                           std::shared_ptr<OobInstanceListeners> instances, OobOptions options)
    : hub_(std::move(hub)),
      listeners_(std::move(listeners)),
      instances_(std::move(instances)),
      options_(std::move(options)),
      target_(joined(options_.oob.listen)) {
  if (instances_)
    target_ += (target_.empty() ? "" : ", ") + options_.oob.instance_listen + " in each instance's network namespace";
}

Result<void> OobPublisher::publish(const Tick& tick) {
  if (!configured_) {  // the first tick of this configuration: its rules apply from now on
    hub_->configure(options_);
    configured_ = true;
  }
  hub_->update(tick);
  if (instances_) instances_->sync(tick);
  return {};
}

void OobPublisher::stop(const Tick& final) {
  // The instances' listeners stay open until their streams had the final
  // report; they close with the publisher.
  if (!configured_) {
    hub_->configure(options_);
    configured_ = true;
  }
  hub_->update(final);
  hub_->streams().finish_all(grpc::Status(grpc::StatusCode::UNAVAILABLE, "headroomd is stopping"),
                             std::chrono::seconds(2));
}

void OobPublisher::announce() const {
  for (const auto& l : listeners_)
    spdlog::info("serving ORCA streams (OpenRcaService) on {}{}", l->address(),
                 l->port() != 0 && l->address().ends_with(":0") ? " (port " + std::to_string(l->port()) + ")" : "");
  if (instances_)
    spdlog::info("serving each endpoint instance's ORCA stream on {} inside its network namespace",
                 instances_->address());
}

}  // namespace headroom::publishers

void headroom_oob_build(const headroom::publishers::OobOptions* options,
                        headroom::Result<headroom::publishers::Publishers>* out) {
  *out = headroom::publishers::OobPublisher::build(*options);
}
