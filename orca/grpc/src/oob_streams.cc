// SPDX-License-Identifier: Apache-2.0
#include "headroom/orca/oob_streams.h"

#include "headroom/orca/clock.h"
#include "headroom/orca/signals_blocked.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace headroom::orca {

namespace {

using std::chrono::milliseconds;

// A write outstanding this long means the client stopped reading: the
// stream is cancelled, which frees its place under max_streams.
milliseconds stall_limit(milliseconds interval) { return std::max(3 * interval, milliseconds(10'000)); }

}  // namespace

// --- the rules ----------------------------------------------------------------

std::variant<milliseconds, grpc::Status> stream_interval(const xds::service::orca::v3::OrcaLoadReportRequest& request,
                                                         const StreamOptions& options) {
  milliseconds interval = options.default_interval;
  if (request.has_report_interval()) {
    const auto& d = request.report_interval();
    if (d.seconds() < 0 || d.nanos() < 0)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "report_interval must not be negative");
    if (d.nanos() > 999'999'999)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "report_interval.nanos must be at most 999999999");
    const auto max_s = std::chrono::duration_cast<std::chrono::seconds>(options.max_interval).count();
    if (d.seconds() > max_s) {
      interval = options.max_interval;
    } else if (d.seconds() != 0 || d.nanos() != 0) {
      // Rounded up: a request for 1.5 ms is not served faster than asked.
      interval = milliseconds(d.seconds() * 1000 + (d.nanos() + 999'999) / 1'000'000);
    }
  }
  return std::clamp(interval, std::min(options.min_interval, options.max_interval), options.max_interval);
}

std::optional<uint16_t> authority_port(std::string_view authority) {
  std::string_view port;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos || close + 1 >= authority.size() || authority[close + 1] != ':')
      return std::nullopt;
    port = authority.substr(close + 2);
  } else {
    const auto colon = authority.rfind(':');
    if (colon == std::string_view::npos || authority.find(':') != colon) return std::nullopt;  // none, or bare IPv6
    port = authority.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5) return std::nullopt;
  uint32_t n = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  if (n < 1 || n > 65535) return std::nullopt;
  return static_cast<uint16_t>(n);
}

std::string_view authority_host(std::string_view authority) {
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    return close == std::string_view::npos ? authority : authority.substr(1, close - 1);
  }
  const auto colon = authority.rfind(':');
  if (colon == std::string_view::npos || authority.find(':') != colon) return authority;
  return authority.substr(0, colon);
}

bool due(const SnapshotInfo& newest, const StreamProgress& sent, milliseconds interval, int64_t now_unix_ms) {
  if (newest.version == 0 || newest.version == sent.version) return false;
  if (newest.final) return true;  // the last word goes out whatever the cadence
  if (now_unix_ms >= newest.fresh_until_ms) return false;
  if (sent.version == 0) return true;
  return newest.timestamp_ms - sent.timestamp_ms >= interval.count() - newest.interval_ms / 4;
}

// --- a stream -----------------------------------------------------------------

class StreamHub::Refusal final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit Refusal(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

class StreamHub::Stream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  Stream(StreamHub* hub, grpc::CallbackServerContext* context, std::string its_authority, std::string its_scope,
         milliseconds its_interval, uint64_t its_generation)
      : hub_(hub),
        context_(context),
        authority(std::move(its_authority)),
        scope(std::move(its_scope)),
        interval(its_interval),
        generation(its_generation) {}

  // Ends the stream: at once, or when the write in flight completes.
  void finish(const grpc::Status& status) {
    {
      std::lock_guard lock(m_);
      if (finished_ || finish_after_write_) return;
      if (writing_) {
        finish_after_write_ = status;
        return;
      }
      finished_ = true;
    }
    Finish(status);
  }

  // The sender thread's step for this stream (see StreamHub::serve).
  enum class Step { idle, busy, ended };
  Step begin_write(const grpc::ByteBuffer& bytes, bool and_finish, const grpc::Status& status) {
    {
      std::lock_guard lock(m_);
      if (finished_ || finish_after_write_) return Step::ended;
      if (writing_) {
        missed_ = true;
        return Step::busy;
      }
      writing_ = true;
      missed_ = false;
      if (and_finish) finished_ = true;
      message_ = bytes;
    }
    write_started = std::chrono::steady_clock::now();
    if (and_finish)
      StartWriteAndFinish(&message_, grpc::WriteOptions(), status);
    else
      StartWrite(&message_);
    return Step::idle;
  }
  // A report came due while a write was in flight: OnWriteDone wakes the
  // sender thread to send it.
  void mark_missed() {
    std::lock_guard lock(m_);
    missed_ = true;
  }
  bool writing(bool* ended) {
    std::lock_guard lock(m_);
    *ended = finished_ || finish_after_write_.has_value();
    return writing_;
  }
  void cancel() {
    if (!cancelled_) {
      cancelled_ = true;
      context_->TryCancel();
    }
  }

  void OnWriteDone(bool ok) override {
    std::optional<grpc::Status> finish_now;
    bool wake = false;
    {
      std::lock_guard lock(m_);
      writing_ = false;
      if (!ok && !finish_after_write_ && !finished_)
        finish_after_write_ = grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke");
      if (finish_after_write_ && !finished_) {
        finished_ = true;
        finish_now = std::move(finish_after_write_);
      }
      wake = missed_ && !finished_;
    }
    if (finish_now) Finish(*finish_now);
    if (wake) hub_->wake();
  }
  void OnCancel() override { finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")); }
  void OnDone() override { hub_->retire(this); }

 private:
  StreamHub* hub_;
  grpc::CallbackServerContext* context_;

 public:
  // The sender thread's own.
  std::string authority;
  std::string scope;
  milliseconds interval;
  uint64_t generation;  // of the rules the scope was resolved with
  bool fixed = false;   // its listener's scope: never resolved again
  StreamProgress progress;
  std::chrono::steady_clock::time_point write_started{};

 private:
  bool cancelled_ = false;  // the sender thread's
  std::mutex m_;            // the rest is shared with gRPC's callbacks
  bool writing_ = false;
  bool missed_ = false;  // a report came due while a write was in flight
  bool finished_ = false;
  std::optional<grpc::Status> finish_after_write_;
  grpc::ByteBuffer message_;
};

// --- the hub ------------------------------------------------------------------

std::shared_ptr<StreamHub> StreamHub::create(StreamOptions options, Resolver resolver,
                                             std::unique_ptr<Source> source) {
  return std::shared_ptr<StreamHub>(new StreamHub(std::move(options), std::move(resolver), std::move(source)));
}

StreamHub::StreamHub(StreamOptions options, Resolver resolver, std::unique_ptr<Source> source)
    : source_(std::move(source)), options_(std::move(options)), resolver_(std::move(resolver)) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  // The thread starts with every signal blocked: the daemon's signals belong
  // to its main loop.
  AllSignalsBlocked blocked;
  thread_ = std::thread([this] { run(); });
}

StreamHub::~StreamHub() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake();
  thread_.join();
  // Every server using the hub has shut down by now (its reactors are done).
  for (Stream* s : dead_) delete s;
  for (Stream* s : incoming_) delete s;
  for (Stream* s : streams_)
    if (std::find(dead_.begin(), dead_.end(), s) == dead_.end()) delete s;
  ::close(wake_fd_);
}

void StreamHub::wake() {
  const uint64_t one = 1;
  // A full counter is still readable: the thread wakes either way.
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamHub::open(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request) {
  return open_stream(context, request, std::nullopt);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamHub::open(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request, std::string scope) {
  return open_stream(context, request, std::move(scope));
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamHub::open_stream(grpc::CallbackServerContext* context,
                                                                    const grpc::ByteBuffer* request,
                                                                    std::optional<std::string> fixed_scope) {
  xds::service::orca::v3::OrcaLoadReportRequest parsed;
  {
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (request != nullptr && request->Dump(&slices).ok())
      for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    if (!parsed.ParseFromString(bytes))
      return new Refusal(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the request is not an OrcaLoadReportRequest"));
  }
  StreamOptions options;
  Resolver resolver;
  uint64_t generation;
  {
    std::lock_guard lock(mutex_);
    if (finishing_ || stopping_) return new Refusal(finish_status_.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopping") : finish_status_);
    options = options_;
    resolver = resolver_;
    generation = generation_;
  }
  auto interval = stream_interval(parsed, options);
  if (auto* status = std::get_if<grpc::Status>(&interval)) return new Refusal(*status);
  const grpc::string_ref a = context->ExperimentalGetAuthority();
  std::string authority(a.data(), a.size());
  auto scope = fixed_scope ? std::variant<std::string, grpc::Status>(*fixed_scope) : resolver(authority);
  if (auto* status = std::get_if<grpc::Status>(&scope)) return new Refusal(*status);

  // Counted before it exists, so that concurrent opens cannot pass the limit.
  if (open_.fetch_add(1, std::memory_order_relaxed) >= options.max_streams) {
    open_.fetch_sub(1, std::memory_order_relaxed);
    return new Refusal(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                    "this server takes at most " + std::to_string(options.max_streams) +
                                        " ORCA streams at once (max_streams)"));
  }
  auto* stream = new Stream(this, context, std::move(authority), std::move(std::get<std::string>(scope)),
                            std::get<milliseconds>(interval), generation);
  stream->fixed = fixed_scope.has_value();
  {
    std::lock_guard lock(mutex_);
    incoming_.push_back(stream);
  }
  wake();
  return stream;
}

void StreamHub::retire(Stream* stream) {
  {
    std::lock_guard lock(mutex_);
    dead_.push_back(stream);
  }
  open_.fetch_sub(1, std::memory_order_relaxed);
  done_cv_.notify_all();
  wake();
}

void StreamHub::set(const std::string& scope, Snapshot snapshot) {
  {
    std::lock_guard lock(mutex_);
    auto it = snapshots_.find(scope);
    if (it == snapshots_.end())
      snapshots_.emplace(scope, std::move(snapshot));
    else
      it->second = std::move(snapshot);
  }
  wake();
}

void StreamHub::clear(const std::string& scope) {
  std::lock_guard lock(mutex_);
  snapshots_.erase(scope);
}

void StreamHub::configure(StreamOptions options, Resolver resolver) {
  {
    std::lock_guard lock(mutex_);
    options_ = std::move(options);
    resolver_ = std::move(resolver);
    ++generation_;
  }
  wake();
}

void StreamHub::finish_all(const grpc::Status& status, milliseconds timeout) {
  std::unique_lock lock(mutex_);
  finishing_ = true;
  finish_status_ = status;
  finish_deadline_ = std::chrono::steady_clock::now() + timeout;
  lock.unlock();
  wake();
  lock.lock();
  // The sender thread cancels what is left at the deadline; a cancelled
  // stream is done soon after.
  done_cv_.wait_until(lock, finish_deadline_ + milliseconds(500),
                      [this] { return open_.load(std::memory_order_relaxed) == 0; });
}

bool StreamHub::wait() {
  // For a wake-up, the source's descriptor or its poll period, or the next
  // stall check while writes are in flight.
  bool any_writing = false;
  for (Stream* s : streams_) {
    bool ended = false;
    if (s->writing(&ended)) any_writing = true;
  }
  int timeout = -1;
  if (source_) timeout = source_->poll_ms();
  if (any_writing) timeout = timeout < 0 ? 1000 : std::min(timeout, 1000);
  {
    std::lock_guard lock(mutex_);
    if (finishing_) timeout = 50;
  }
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {source_ ? source_->fd() : -1, POLLIN, 0}};
  const int n = ::poll(fds, fds[1].fd >= 0 ? 2 : 1, timeout);
  if (n < 0 && errno != EINTR) return false;
  uint64_t drained;
  [[maybe_unused]] auto r = ::read(wake_fd_, &drained, sizeof drained);
  if (source_) source_->update(*this);
  return true;
}

void StreamHub::run() {
  std::map<std::string, Snapshot, std::less<>> snapshots;
  std::vector<Stream*> reap;
  Resolver resolver;
  uint64_t resolved_generation = 0;
  for (;;) {
    if (!wait()) break;
    bool finishing;
    grpc::Status finish_status;
    std::chrono::steady_clock::time_point finish_deadline;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      streams_.insert(streams_.end(), incoming_.begin(), incoming_.end());
      incoming_.clear();
      reap.swap(dead_);
      snapshots = snapshots_;  // copies share the bytes
      if (resolved_generation != generation_) {
        resolver = resolver_;
        resolved_generation = generation_;
      }
      finishing = finishing_;
      finish_status = finish_status_;
      finish_deadline = finish_deadline_;
    }
    if (!reap.empty()) {
      std::erase_if(streams_, [&](Stream* s) { return std::find(reap.begin(), reap.end(), s) != reap.end(); });
      for (Stream* s : reap) delete s;
      reap.clear();
    }

    const int64_t now_ms = unix_now_ms();
    const auto now = std::chrono::steady_clock::now();
    for (Stream* s : streams_) {
      bool ended = false;
      const bool busy = s->writing(&ended);
      if (ended) {
        if (busy && finishing && now >= finish_deadline) s->cancel();
        continue;
      }
      if (!s->fixed && s->generation != resolved_generation) {
        s->generation = resolved_generation;
        auto scope = resolver(s->authority);
        if (auto* status = std::get_if<grpc::Status>(&scope)) {
          s->finish(*status);
          continue;
        }
        s->scope = std::move(std::get<std::string>(scope));
      }
      auto it = snapshots.find(s->scope);
      const Snapshot* snap = it == snapshots.end() ? nullptr : &it->second;
      if (finishing) {
        if (busy) {  // the final report follows the write in flight
          if (now >= finish_deadline) s->cancel();
          continue;
        }
        if (snap != nullptr && snap->info.final && snap->info.version != s->progress.version) {
          s->progress = {snap->info.version, snap->info.timestamp_ms};
          if (s->begin_write(snap->bytes, true, finish_status) == Stream::Step::idle)
            sent_.fetch_add(1, std::memory_order_relaxed);
        } else {
          s->finish(finish_status);
        }
        continue;
      }
      if (busy) {
        if (now - s->write_started > stall_limit(s->interval)) s->cancel();
        else if (snap != nullptr && due(snap->info, s->progress, s->interval, now_ms))
          s->mark_missed();
        continue;
      }
      if (snap == nullptr || !due(snap->info, s->progress, s->interval, now_ms)) continue;
      const StreamProgress before = s->progress;
      s->progress = {snap->info.version, snap->info.timestamp_ms};
      const auto step = s->begin_write(snap->bytes, false, finish_status);
      if (step == Stream::Step::idle)
        sent_.fetch_add(1, std::memory_order_relaxed);
      else
        s->progress = before;
    }
  }
}

}  // namespace headroom::orca
