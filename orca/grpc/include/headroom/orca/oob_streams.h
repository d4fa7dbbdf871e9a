// SPDX-License-Identifier: Apache-2.0
// The out-of-band ORCA stream, xds.service.orca.v3.OpenRcaService/
// StreamCoreMetrics (docs/oob.md), shared by headroomd's [oob] listeners and
// by OrcaService (orca_service.h), the class a gRPC server registers.
//
// StreamHub keeps, for every scope ("node", "endpoint.<name>"), the newest
// report serialized once (a Snapshot), and the open streams. One sender
// thread walks the streams and hands each the snapshot of its scope when it is
// due; gRPC shares the bytes between streams (a ByteBuffer copy only takes a
// reference). A stream has at most one message in flight: a client that does
// not read gets no backlog, only the newest report when it reads again, so a
// slow or stuck client costs neither memory nor the other streams' time, and
// never touches the thread that publishes.
//
// The rules a stream follows are pure functions (below), tested by table.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "xds/service/orca/v3/orca.grpc.pb.h"

namespace headroom::orca {

// --- the rules, pure -------------------------------------------------------

struct StreamOptions {
  // A request without report_interval, or with zero.
  std::chrono::milliseconds default_interval{1000};
  // No stream gets reports more often than this: headroomd's sampling
  // interval (a report is new only once per tick).
  std::chrono::milliseconds min_interval{100};
  // A longer request is served at this interval.
  std::chrono::milliseconds max_interval = std::chrono::hours(1);
  // More streams at once are refused with RESOURCE_EXHAUSTED.
  std::size_t max_streams = 1024;
};

// A request's report_interval as the stream will use it: the default when
// missing or zero, raised to min_interval, capped at max_interval; an
// INVALID_ARGUMENT status when negative or its nanos are out of range.
std::variant<std::chrono::milliseconds, grpc::Status> stream_interval(
    const xds::service::orca::v3::OrcaLoadReportRequest& request, const StreamOptions& options);

// The port of an :authority ("10.0.0.5:8080", "[::1]:8080", "host:8080");
// nullopt when it has none or it is not 1..65535.
std::optional<uint16_t> authority_port(std::string_view authority);
// The host part of an :authority: "10.0.0.5:8080" -> "10.0.0.5",
// "[::1]:8080" -> "::1", "checkout" -> "checkout".
std::string_view authority_host(std::string_view authority);

// What a scope's newest report says about itself (its headroom metadata).
struct SnapshotInfo {
  uint64_t version = 0;        // +1 for each new report of the scope; 0: none
  int64_t timestamp_ms = 0;    // headroom.timestamp_ms
  int64_t interval_ms = 0;     // headroom.interval_ms
  int64_t fresh_until_ms = std::numeric_limits<int64_t>::max();  // not sent after this (Unix ms)
  bool final = false;          // the agent's last report (headroom.stopped)
};

// What a stream has been sent so far.
struct StreamProgress {
  uint64_t version = 0;      // of the last report sent; 0: none yet
  int64_t timestamp_ms = 0;  // its headroom.timestamp_ms
};

// Whether a stream with `interval` is sent the scope's newest report now:
// it must be new to the stream and fresh; the first one goes at once, a
// final one too, and the others when their sample is at least one interval
// newer than the last one sent. A quarter of the sampling interval is
// tolerated, so that an interval equal to the agent's gets every tick despite
// jitter, while one between two multiples of it (250 ms at 100 ms ticks) is
// rounded up, never down: a client never gets reports faster than it asked.
bool due(const SnapshotInfo& newest, const StreamProgress& sent, std::chrono::milliseconds interval,
         int64_t now_unix_ms);

// --- the streams -------------------------------------------------------------

// One scope's newest report, serialized once.
struct Snapshot {
  grpc::ByteBuffer bytes;
  SnapshotInfo info;
};

class StreamHub : public std::enable_shared_from_this<StreamHub> {
 public:
  // The scope a stream reads, from its :authority; or the status it ends with.
  using Resolver = std::function<std::variant<std::string, grpc::Status>(std::string_view authority)>;

  // Where snapshots come from when nobody pushes them: the hub calls update()
  // on its thread whenever fd() is readable and at least every poll_ms.
  class Source {
   public:
    virtual ~Source() = default;
    virtual int fd() const { return -1; }
    virtual int poll_ms() const { return 1000; }
    virtual void update(StreamHub& hub) = 0;
  };

  static std::shared_ptr<StreamHub> create(StreamOptions options, Resolver resolver,
                                           std::unique_ptr<Source> source = nullptr);
  ~StreamHub();
  StreamHub(const StreamHub&) = delete;
  StreamHub& operator=(const StreamHub&) = delete;

  // The method's body: a stream for this call (gRPC owns it until OnDone).
  grpc::ServerWriteReactor<grpc::ByteBuffer>* open(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request);
  // The same for a listener that serves one scope whatever the authority
  // (headroomd's listener inside an endpoint instance's network namespace):
  // the stream reads `scope`, and no resolver, a reload's included, changes it.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* open(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request, std::string scope);

  // A scope's newest report. Its version must grow; streams of the scope are
  // woken. clear() forgets a scope (its streams wait for a report again).
  void set(const std::string& scope, Snapshot snapshot);
  void clear(const std::string& scope);
  // New rules for streams opened from now on and for the resolution of every
  // open stream's scope (a reload): a stream whose authority now resolves to
  // a status ends with it.
  void configure(StreamOptions options, Resolver resolver);

  // The final act: every stream is sent the newest report of its scope if it
  // is marked final and not yet sent, then ends with `status`. Waits until
  // every stream is done or `timeout` passed (a client that does not read is
  // cancelled then).
  void finish_all(const grpc::Status& status, std::chrono::milliseconds timeout);

  std::size_t open_streams() const { return open_.load(std::memory_order_relaxed); }
  uint64_t messages_sent() const { return sent_.load(std::memory_order_relaxed); }

 private:
  class Stream;
  class Refusal;
  friend class Stream;
  StreamHub(StreamOptions options, Resolver resolver, std::unique_ptr<Source> source);
  void run();
  // The sender thread's wait for work; false when it cannot poll.
  bool wait();
  void wake();
  void retire(Stream* stream);  // from Stream::OnDone: reaped by the thread
  grpc::ServerWriteReactor<grpc::ByteBuffer>* open_stream(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           std::optional<std::string> fixed_scope);
  void serve(Stream& stream, int64_t now_ms, std::chrono::steady_clock::time_point now);

  std::unique_ptr<Source> source_;
  int wake_fd_ = -1;
  std::atomic<std::size_t> open_{0};
  std::atomic<uint64_t> sent_{0};

  // Guarded by mutex_: what the callbacks and the publisher hand over.
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  StreamOptions options_;
  Resolver resolver_;
  uint64_t generation_ = 1;  // of options_ and resolver_
  std::map<std::string, Snapshot, std::less<>> snapshots_;
  std::vector<Stream*> incoming_, dead_;
  bool finishing_ = false;
  grpc::Status finish_status_;
  std::chrono::steady_clock::time_point finish_deadline_{};
  bool stopping_ = false;

  // The sender thread's own.
  std::vector<Stream*> streams_;
  std::thread thread_;
};

// The service registered on a grpc::ServerBuilder: StreamCoreMetrics with
// raw bytes both ways (the report is serialized once per scope, not per
// stream), handing each call to the hub. The hub outlives it.
class StreamService final
    : public xds::service::orca::v3::OpenRcaService::WithRawCallbackMethod_StreamCoreMetrics<
          xds::service::orca::v3::OpenRcaService::Service> {
 public:
  // The synchronous form stays the base's (it is never called).
  using xds::service::orca::v3::OpenRcaService::WithRawCallbackMethod_StreamCoreMetrics<
      xds::service::orca::v3::OpenRcaService::Service>::StreamCoreMetrics;
  explicit StreamService(std::shared_ptr<StreamHub> hub) : hub_(std::move(hub)) {}
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamCoreMetrics(grpc::CallbackServerContext* context,
                                                                const grpc::ByteBuffer* request) override {
    return hub_->open(context, request);
  }

 private:
  std::shared_ptr<StreamHub> hub_;
};

// The largest request a listener accepts (10 000 request_cost_names fit).
inline constexpr int kMaxRequestBytes = 256 * 1024;

}  // namespace headroom::orca
