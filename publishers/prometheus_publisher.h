// SPDX-License-Identifier: Apache-2.0
// The reports' figures for Prometheus (docs/metrics.md), two ways:
// PrometheusListener serves GET /metrics over HTTP (GNU libmicrohttpd; the
// text is prometheus-cpp's serializer's), PrometheusTextfile writes
// node_exporter's textfile. Both read one MetricsHub, the process's single
// set of figures: it survives a reload (the old and the new pipeline share it
// while both exist), so counters never restart and a listener whose address
// did not change keeps its socket. Scrapes read a copy of the figures taken
// under a short lock, so a scrape never holds up a tick.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "headroom/orca/result.h"
#include "publishers/connection_deadlines.h"
#include "publishers/failure_latch.h"
#include "publishers/process_shared.h"
#include "publishers/prometheus_metrics.h"
#include "publishers/prometheus_config.h"
#include "publishers/publisher.h"

struct MHD_Daemon;

namespace headroom::publishers {

class MetricsHub;

// One HTTP listener: a socket bound to the address and the server thread
// answering on it. Shared by the publishers of successive configurations
// that name the same address. Its connections are held to
// ConnectionDeadlines (a complete request within kRequestDeadline, at most
// cap() open, the oldest waiting one closed for a new one): a flood of idle,
// trickling or half-open clients neither fills it nor grows its memory
// (docs/metrics.md, "Under a connection flood").
inline constexpr std::chrono::milliseconds kRequestDeadline{5000};
inline constexpr std::size_t kMaxMetricsConnections = 512;
inline constexpr std::size_t kMetricsConnectionMemory = 8 * 1024;  // MHD's pool per connection: request, headers
class MetricsListener {
 public:
  ~MetricsListener();
  MetricsListener(const MetricsListener&) = delete;
  MetricsListener& operator=(const MetricsListener&) = delete;
  const std::string& address() const { return address_; }
  int port() const { return port_; }  // the bound port (the address's, or the one port 0 got)
  std::size_t cap() const { return deadlines_.cap(); }

  // libmicrohttpd's callbacks (prometheus_publisher.cc).
  void opened(uint64_t id, int fd);
  void requested(uint64_t id);
  void closed(uint64_t id);
  const MetricsHub& hub() const { return *hub_; }

 private:
  friend class MetricsHub;
  explicit MetricsListener(const MetricsHub* hub, std::size_t cap)
      : hub_(hub), deadlines_(cap, kRequestDeadline) {}
  void sweep();  // the thread closing connections past their deadline
  void close_locked(uint64_t id);

  const MetricsHub* hub_;
  std::string address_;
  int port_ = 0;
  MHD_Daemon* daemon_ = nullptr;
  std::mutex mutex_;
  ConnectionDeadlines deadlines_;
  std::unordered_map<uint64_t, int> fds_;
  bool stopping_ = false;
  std::condition_variable wake_;
  std::thread sweeper_;
};

class MetricsHub {
 public:
  // The process's hub, made when none is alive (process_shared.h).
  static std::shared_ptr<MetricsHub> shared() { return process_shared<MetricsHub>(); }

  // Takes a tick once: the second publisher to pass the same tick (same
  // sequence number) changes nothing.
  void update(const Tick& tick);
  // The exposition's families, from a copy of the figures.
  std::vector<prometheus::MetricFamily> collect() const;
  // The text exposition (format 0.0.4), as GET /metrics answers it.
  std::string text() const;

  // The listener on `address` ("127.0.0.1:9446", "[::1]:9446"; port 0 picks
  // one): the running one, or a new one bound now.
  Result<std::shared_ptr<MetricsListener>> listener(const std::string& address);

  // What the listener answers to one request: status, content type, body.
  struct Answer {
    unsigned status = 200;
    const char* content_type = "";
    std::string body;
  };
  Answer answer(std::string_view method, std::string_view url) const;

 private:
  mutable std::mutex mutex_;
  prom::MetricsState state_;
  uint64_t last_seq_ = 0;
  bool have_seq_ = false;

  std::mutex listeners_mutex_;
  std::map<std::string, std::weak_ptr<MetricsListener>> listeners_;
};

// [prometheus] listen: GET /metrics.
class PrometheusListener final : public Publisher {
 public:
  // Both of [prometheus]'s publishers, as the configuration asks.
  static Result<Publishers> build(const PrometheusConfig& config);

  Result<void> publish(const Tick& tick) override;
  void stop(const Tick& final) override { (void)publish(final); }
  void announce() const override;
  std::string_view name() const override { return "prometheus"; }
  const std::string& target() const override { return address_; }

 private:
  PrometheusListener(std::shared_ptr<MetricsHub> hub, std::shared_ptr<MetricsListener> listener);
  std::shared_ptr<MetricsHub> hub_;
  std::shared_ptr<MetricsListener> listener_;
  std::string address_;
};

// [prometheus] textfile: the exposition written atomically every
// textfile_interval (and on stop), for node_exporter's textfile collector.
class PrometheusTextfile final : public Publisher {
 public:
  PrometheusTextfile(std::shared_ptr<MetricsHub> hub, std::string file, std::chrono::nanoseconds every);

  Result<void> publish(const Tick& tick) override;
  // Writes the final figures; the file stays, and node_exporter's
  // node_textfile_mtime_seconds shows its age.
  void stop(const Tick& final) override;
  // No longer configured: the file is removed, so node_exporter stops
  // serving figures nobody updates.
  void retire() override;
  void announce() const override;
  std::string_view name() const override { return "prometheus_textfile"; }
  const std::string& target() const override { return file_; }

 private:
  Result<void> write();

  std::shared_ptr<MetricsHub> hub_;
  std::string file_, dir_, name_;
  int64_t every_ms_;
  int64_t last_write_ms_ = 0;
  bool written_ = false;
  FailureLatch failing_;
};

}  // namespace headroom::publishers
