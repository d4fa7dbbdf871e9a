// SPDX-License-Identifier: Apache-2.0
#include "publishers/prometheus_publisher.h"

#include "headroom/orca/report_writer.h"
#include "headroom/orca/signals_blocked.h"
#include "publishers/listen_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#ifndef HEADROOM_VERSION
#define HEADROOM_VERSION "unknown"
#endif

namespace headroom::publishers {

namespace {

constexpr const char* kVersion = HEADROOM_VERSION;

constexpr const char* kExpositionType = "text/plain; version=0.0.4; charset=utf-8";
// MHD's own inactivity timeout: a backstop behind the request deadline.
constexpr unsigned kConnectionTimeoutSeconds = 10;
// MHD's limit sits above the cap: a connection over the cap is accepted, and
// closes the oldest waiting one, rather than being refused.
constexpr unsigned kConnectionSlack = 64;
// The descriptors the listener may take: a quarter of RLIMIT_NOFILE.
constexpr double kDescriptorShare = 0.25;

// libmicrohttpd's request callback: one answer per request, queued at once
// (a request body, which nothing here wants, is discarded).
MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method,
                      const char* /*version*/, const char* /*upload_data*/, size_t* /*upload_data_size*/,
                      void** /*request_state*/) {
  auto* listener = static_cast<MetricsListener*>(cls);
  lower_listener_thread_priority();
  if (const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT))
    listener->requested(reinterpret_cast<uintptr_t>(info->socket_context));
  MetricsHub::Answer a = listener->hub().answer(method, url);
  MHD_Response* response =
      MHD_create_response_from_buffer(a.body.size(), a.body.data(), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, a.content_type);
  if (a.status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  const MHD_Result queued = MHD_queue_response(connection, a.status, response);
  MHD_destroy_response(response);
  return queued;
}

// Each connection gets an id (its socket context) when it opens, and the
// listener follows it until it closes.
void on_connection(void* cls, MHD_Connection* connection, void** socket_context,
                   enum MHD_ConnectionNotificationCode code) {
  auto* listener = static_cast<MetricsListener*>(cls);
  lower_listener_thread_priority();  // libmicrohttpd's thread
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    static std::atomic<uint64_t> next{1};
    const uint64_t id = next.fetch_add(1);
    *socket_context = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
    const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    listener->opened(id, info != nullptr ? info->connect_fd : -1);
  } else {
    listener->closed(reinterpret_cast<uintptr_t>(*socket_context));
  }
}

uint64_t nofile_soft_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  return r.rlim_cur == RLIM_INFINITY ? (1u << 20) : r.rlim_cur;
}

void on_server_error(void* /*cls*/, const char* fmt, va_list ap) {
  char line[256];
  std::vsnprintf(line, sizeof line, fmt, ap);
  std::string_view text(line);
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  spdlog::debug("prometheus.listen: {}", text);
}

}  // namespace

// ---------------------------------------------------------------------------
// MetricsHub

void MetricsHub::update(const Tick& tick) {
  std::lock_guard lock(mutex_);
  if (have_seq_ && tick.meta.seq == last_seq_) return;
  have_seq_ = true;
  last_seq_ = tick.meta.seq;
  state_.update(tick);
}

std::vector<prometheus::MetricFamily> MetricsHub::collect() const {
  prom::MetricsState copy;
  {
    std::lock_guard lock(mutex_);
    copy = state_;
  }
  return copy.families(kVersion);
}

std::string MetricsHub::text() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, collect());
  return std::move(out).str();
}

MetricsHub::Answer MetricsHub::answer(std::string_view method, std::string_view url) const {
  if (method != "GET" && method != "HEAD") return {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
  if (url == "/metrics") return {200, kExpositionType, text()};
  if (url == "/")
    return {200, "text/html; charset=utf-8",
            "<html><head><title>headroomd</title></head><body><a href=\"/metrics\">/metrics</a></body></html>\n"};
  return {404, "text/plain; charset=utf-8", "not found; the metrics are at /metrics\n"};
}

Result<std::shared_ptr<MetricsListener>> MetricsHub::listener(const std::string& address) {
  std::lock_guard lock(listeners_mutex_);
  if (auto it = listeners_.find(address); it != listeners_.end())
    if (auto running = it->second.lock()) return running;
  const std::size_t cap = connection_cap(nofile_soft_limit(), kMaxMetricsConnections, kDescriptorShare);
  std::shared_ptr<MetricsListener> l(new MetricsListener(this, cap));
  l->address_ = address;
  auto fd = listen_on(address, l->port_);
  if (!fd) return fd.error();
  {
    // One thread polling every connection (a slow client holds none of
    // it); each connection's memory is a small fixed pool, allocated when
    // it is accepted; ConnectionDeadlines bounds how many and for how long.
    AllSignalsBlocked blocked;  // its threads leave the daemon's signals alone
    l->daemon_ = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, &on_request,
        l.get(), MHD_OPTION_LISTEN_SOCKET, static_cast<MHD_socket>(fd.value()), MHD_OPTION_CONNECTION_LIMIT,
        static_cast<unsigned>(cap + kConnectionSlack), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        kMetricsConnectionMemory, MHD_OPTION_CONNECTION_TIMEOUT, kConnectionTimeoutSeconds,
        MHD_OPTION_NOTIFY_CONNECTION, &on_connection, l.get(), MHD_OPTION_EXTERNAL_LOGGER, &on_server_error,
        nullptr, MHD_OPTION_END);
  }
  if (l->daemon_ == nullptr) {
    ::close(fd.value());
    return logic_error("cannot start the HTTP server on " + address);
  }
  {
    AllSignalsBlocked blocked;
    l->sweeper_ = std::thread([raw = l.get()] { raw->sweep(); });
  }
  listeners_[address] = l;
  return l;
}

MetricsListener::~MetricsListener() {
  if (sweeper_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    sweeper_.join();
  }
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);  // closes the listening socket too
}

// A connection is closed by shutting its socket down: libmicrohttpd sees the
// end, closes it and says so (closed()) before the descriptor is released,
// so the descriptor shut down is always the connection's own.
void MetricsListener::close_locked(uint64_t id) {
  if (auto it = fds_.find(id); it != fds_.end() && it->second >= 0) ::shutdown(it->second, SHUT_RDWR);
}

void MetricsListener::opened(uint64_t id, int fd) {
  std::lock_guard lock(mutex_);
  fds_[id] = fd;
  if (auto evicted = deadlines_.accepted(id, ConnectionDeadlines::Clock::now())) close_locked(*evicted);
}

void MetricsListener::requested(uint64_t id) {
  std::lock_guard lock(mutex_);
  deadlines_.requested(id, ConnectionDeadlines::Clock::now());
}

void MetricsListener::closed(uint64_t id) {
  std::lock_guard lock(mutex_);
  deadlines_.closed(id);
  fds_.erase(id);
}

void MetricsListener::sweep() {
  lower_listener_thread_priority();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(250));
    for (uint64_t id : deadlines_.expired(ConnectionDeadlines::Clock::now())) close_locked(id);
  }
}

// ---------------------------------------------------------------------------
// PrometheusListener

PrometheusListener::PrometheusListener(std::shared_ptr<MetricsHub> hub, std::shared_ptr<MetricsListener> listener)
    : hub_(std::move(hub)), listener_(std::move(listener)), address_(listener_->address()) {}

Result<Publishers> PrometheusListener::build(const PrometheusConfig& c) {
  Publishers out;
  if (c.listen.empty() && c.textfile.empty()) return out;
  auto hub = MetricsHub::shared();
  if (!c.listen.empty()) {
    auto listener = hub->listener(c.listen);
    if (!listener)
      return Error{listener.error().code != 0 ? listener.error().code : EADDRNOTAVAIL,
                   "prometheus.listen: " + listener.error().message +
                       "; choose a free port, or an address of this machine"};
    out.push_back(std::unique_ptr<Publisher>(new PrometheusListener(hub, std::move(listener.value()))));
  }
  if (!c.textfile.empty())
    out.push_back(std::make_unique<PrometheusTextfile>(hub, c.textfile, c.textfile_interval));
  return out;
}

Result<void> PrometheusListener::publish(const Tick& tick) {
  hub_->update(tick);
  return {};
}

void PrometheusListener::announce() const {
  spdlog::info("serving Prometheus metrics at http://{}/metrics", address_);
}

// ---------------------------------------------------------------------------
// PrometheusTextfile

PrometheusTextfile::PrometheusTextfile(std::shared_ptr<MetricsHub> hub, std::string file,
                                       std::chrono::nanoseconds every)
    : hub_(std::move(hub)),
      file_(std::move(file)),
      every_ms_(std::chrono::duration_cast<std::chrono::milliseconds>(every).count()) {
  const std::filesystem::path p(file_);
  dir_ = p.parent_path().string();
  name_ = p.filename().string();
}

Result<void> PrometheusTextfile::write() {
  // The directory is opened by its path at every write (at most once per
  // textfile_interval): it may appear later (node_exporter installed after
  // us), be replaced, or have a read-only mount put over it, and each write
  // must go to what the path names now, not to a directory held open.
  // node_exporter runs as its own user: the file must be readable whatever the umask.
  auto writer = orca::ReportFileWriter::open(dir_, orca::WriterOptions{0644, false});
  if (!writer) return Error{writer.error().code, "cannot write " + file_ + ": " + writer.error().message};
  if (auto r = writer->write_bytes(name_, hub_->text()); !r)
    return Error{r.error().code, "cannot write " + file_ + ": " + r.error().message};
  return {};
}

Result<void> PrometheusTextfile::publish(const Tick& tick) {
  hub_->update(tick);
  const int64_t now = tick.meta.timestamp_ms;
  // A clock set back does not stop the writes.
  if (written_ && now >= last_write_ms_ && now - last_write_ms_ < every_ms_) return {};
  written_ = true;
  last_write_ms_ = now;
  auto r = write();
  if (!r) {
    failing_.fail(spdlog::level::err, "prometheus.textfile: {}; retrying every {} ms", r.error().message, every_ms_);
    return r;
  }
  failing_.ok("prometheus.textfile: {} is written again", file_);
  return {};
}

void PrometheusTextfile::stop(const Tick& final) {
  hub_->update(final);
  if (auto r = write(); !r) spdlog::error("prometheus.textfile: final figures not written: {}", r.error().message);
}

void PrometheusTextfile::retire() {
  if (::unlink(file_.c_str()) != 0 && errno != ENOENT)
    spdlog::warn("prometheus.textfile: cannot remove {}, which is no longer configured: {}", file_,
                 std::strerror(errno));
}

void PrometheusTextfile::announce() const {
  spdlog::info("writing Prometheus metrics to {} every {} ms", file_, every_ms_);
  struct stat st{};
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    spdlog::warn("prometheus.textfile: the directory {} does not exist (yet); the file is written once it does "
                 "(is node_exporter installed? Debian: prometheus-node-exporter)",
                 dir_);
}

}  // namespace headroom::publishers
