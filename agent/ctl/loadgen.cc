// SPDX-License-Identifier: Apache-2.0
// The open-loop HTTP/1.1 load engine (agent/ctl/loadgen.h).
//
// One thread, one epoll set, non-blocking sockets. The bookkeeping leans on
// one fact: every request has the same timeout, so deadlines come in schedule
// order. Records are appended when a request falls due, and the requests
// waiting for a connection are always the newest ones, so the records vector
// itself is the client's FIFO:
//
//   [0, oldest_)         answered, failed or timed out
//   [oldest_, queue_)    each either finished or in flight on a connection
//   [queue_, size())     due, waiting for a connection (the FIFO)
//
// and the next deadline is always that of records_[oldest_]. No heap, no
// per-request allocation: a request's only state beside its Record is one
// uint32_t (its connection, or "queued", or "done"). Retries wait in a heap
// (RetryQueue) and join in time order, so deadlines stay in order.
//
// Each request goes to one instance of the target (Record::instance) and
// only takes a connection to it; the FIFO is shared, so requests leave in
// schedule order whichever instance they are for.
//
// The schedule itself (when each request is due) is loadgen_plan.h's, the
// response framing http_response.h's, the connections' books loadgen_pool.h's.
#include "agent/ctl/loadgen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "agent/ctl/http_response.h"
#include "agent/ctl/loadgen_plan.h"
#include "agent/ctl/loadgen_pool.h"
#include "headroom/orca/result.h"

namespace headroom::ctl::loadgen {
namespace {

std::string address_text(const sockaddr_storage& addr) {
  char ip[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    sockaddr_in a;
    std::memcpy(&a, &addr, sizeof a);
    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
  }
  sockaddr_in6 a;
  std::memcpy(&a, &addr, sizeof a);
  inet_ntop(AF_INET6, &a.sin6_addr, ip, sizeof ip);
  return "[" + std::string(ip) + "]:" + std::to_string(ntohs(a.sin6_port));
}

// ---------------------------------------------------------------------------
// The engine

constexpr uint32_t kQueued = 0;  // request_conn_ value: waiting in the FIFO
constexpr uint32_t kDone = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kStopId = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kTimerId = kStopId - 1;
constexpr std::size_t kScratch = 64 * 1024;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

class Engine {
 public:
  Engine(const Options& o, std::vector<PhasePlan> plans)
      : o_(o), plans_(std::move(plans)), pool_(o.more_instances.size() + 1) {
    targets_.push_back(&o.target);
    for (const auto& t : o.more_instances) targets_.push_back(&t);
    for (const Target* t : targets_) {
      texts_.push_back(address_text(t->addr));
      const std::string& host = t->host_header.empty() ? texts_.back() : t->host_header;
      for (const auto& c : o.classes) {
        std::string r = "GET " + t->path + " HTTP/1.1\r\nHost: " + host + "\r\n";
        if (!c.header_value.empty()) r += o.priority_header + ": " + c.header_value + "\r\n";
        r += "\r\n";
        requests_.push_back(std::move(r));
      }
    }
    for (const auto& c : o.classes) {
      weights_.push_back(c.weight);
      weight_total_ += c.weight;
    }
    current_.assign(weights_.size(), 0.0);
    class_firsts_.assign(weights_.size(), 0);
    for (const auto& p : plans_) total_ += p.count;
    for (const auto& ph : o.phases) end_ns_ += ph.duration.count();
    timeout_ns_ = o.timeout.count();
    const std::size_t reserve = static_cast<std::size_t>(std::min<uint64_t>(total_, uint64_t{1} << 22));
    result_.records.reserve(reserve);
    request_conn_.reserve(reserve);
    lags_.reserve(reserve);
    scratch_ = std::make_unique<char[]>(kScratch);
    while (phase_ < plans_.size() && plans_[phase_].count == 0) ++phase_;
  }

  ~Engine() {
    if (timerfd_ >= 0) ::close(timerfd_);
    if (epfd_ >= 0) ::close(epfd_);
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  headroom::Result<RunResult> run() {
    if (auto opened = open_descriptors(); !opened) return std::move(opened).error();
    start_ = o_.start == Clock::time_point{} ? Clock::now() : o_.start;

    epoll_event events[256];
    for (;;) {
      const int64_t now = since_start(Clock::now());
      take_due(now);
      expire(now);
      pump();
      if (next_seq_ == total_ && retries_.empty() && oldest_ == result_.records.size()) break;

      // Sleep until the next request or retry is due or the oldest
      // outstanding one times out, whichever is first.
      int64_t wake = next_due();
      if (oldest_ < result_.records.size()) wake = std::min(wake, result_.records[oldest_].scheduled_ns + timeout_ns_);
      auto n = wait(events, 256, wake);
      if (!n) return std::move(n).error();
      for (int i = 0; i < *n; ++i) {
        const uint64_t id = events[i].data.u64;
        if (id == kStopId) {
          stop();
          return finish_result();
        }
        if (id == kTimerId) {
          uint64_t ticks;
          static_cast<void>(::read(timerfd_, &ticks, sizeof ticks));  // clears it
          armed_ = kUnarmed;
          continue;
        }
        on_event(static_cast<uint32_t>(id), static_cast<uint32_t>(id >> 32), events[i].events);
      }
    }
    return finish_result();
  }

 private:
  // The epoll set with the schedule's timer and the stop descriptor in it.
  headroom::Result<void> open_descriptors() {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) return system_error(errno, "loadgen: epoll_create1");
    // The schedule's clock: a timerfd on CLOCK_MONOTONIC (steady_clock's),
    // set to the next wake-up only when that changes. Waking for a response
    // then arms no timer, and timerfds have no timer slack (poll timeouts
    // get 50 us), which is send lag.
    timerfd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timerfd_ < 0) return system_error(errno, "loadgen: timerfd_create");
    {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kTimerId;
      if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, timerfd_, &ev) != 0) return system_error(errno, "loadgen: epoll_ctl");
    }
    if (o_.stop_fd >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kStopId;
      // A descriptor the caller chose: a bad option, not a system failure.
      if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, o_.stop_fd, &ev) != 0)
        return logic_error(std::string("loadgen: stop_fd cannot be polled: ") + std::strerror(errno));
    }
    return {};
  }

  int64_t since_start(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - start_).count();
  }

  int64_t next_time() const { return plans_[phase_].start_ns + offset_ns(phase_k_, plans_[phase_].interval_ns); }

  // Smooth weighted round robin (nginx): each class gains its weight, the
  // richest is picked and pays the total.
  uint8_t pick_class() {
    std::size_t best = 0;
    for (std::size_t i = 0; i < current_.size(); ++i) {
      current_[i] += weights_[i];
      if (current_[i] > current_[best]) best = i;
    }
    current_[best] -= weight_total_;
    return static_cast<uint8_t>(best);
  }

  // When the next request of the schedule or retry is due (kNever: none).
  int64_t next_due() const {
    const int64_t t = next_seq_ < total_ ? next_time() : kNever;
    return retries_.empty() ? t : std::min(t, retries_.next_due());
  }

  // Asks the caller whether a request that ended is tried again.
  void schedule_retry(std::size_t seq) {
    const Record& r = result_.records[seq];
    if (r.attempt == std::numeric_limits<uint8_t>::max()) return;
    const int64_t now = since_start(Clock::now());
    const int64_t delay = o_.retry.after(r, response_, now);
    if (delay >= 0 && now + delay >= end_ns_) ++result_.retries_past_end;
    else if (delay >= 0) retries_.push(r, now + delay, targets_.size());
  }

  // Appends a record for every request and retry due by `now`, the back of
  // the FIFO; a retry only when the caller's admit lets it leave.
  void take_due(int64_t now) {
    auto& recs = result_.records;
    for (;;) {
      const int64_t t = next_seq_ < total_ ? next_time() : kNever;
      Record r;
      if (!retries_.empty() && retries_.next_due() < t && retries_.next_due() <= now) {
        r = retries_.pop(recs.empty() ? 0 : recs.back().scheduled_ns);
        if (recs.size() >= kMaxRequests || (o_.retry.admit && !o_.retry.admit(r, now))) continue;
      } else {
        if (t > now) break;
        r.scheduled_ns = t;
        r.phase = static_cast<uint16_t>(phase_);
        r.request_class = pick_class();
        r.instance = first_instance(class_firsts_[r.request_class]++, r.request_class, targets_.size());
        r.first = static_cast<uint32_t>(recs.size());
        if (o_.retry.admit) o_.retry.admit(r, now);
        ++next_seq_;
        if (++phase_k_ == plans_[phase_].count) {
          phase_k_ = 0;
          do ++phase_;
          while (phase_ < plans_.size() && plans_[phase_].count == 0);
        }
      }
      recs.push_back(r);
      request_conn_.push_back(kQueued);
      lags_.push_back(now - r.scheduled_ns);
    }
  }

  // Requests whose deadline has passed, queued or in flight, time out.
  void expire(int64_t now) {
    auto& recs = result_.records;
    while (oldest_ < recs.size()) {
      const uint32_t at = request_conn_[oldest_];
      if (at != kDone) {
        if (recs[oldest_].scheduled_ns + timeout_ns_ > now) break;
        if (oldest_ >= queue_) {
          queue_ = oldest_ + 1;
        } else {
          close_conn(at - 1);
        }
        finish(oldest_, Outcome::timeout);
      }
      ++oldest_;
    }
  }

  // Hands the FIFO's requests to idle connections, or to new ones up to the cap.
  void pump() {
    auto& recs = result_.records;
    while (queue_ < recs.size()) {
      const std::size_t seq = queue_;
      const uint8_t instance = recs[seq].instance;
      if (const auto idle = pool_.take_idle(instance)) {
        const uint32_t slot = *idle;
        ++queue_;
        Conn& c = pool_[slot];
        c.state = ConnState::busy;
        c.seq = seq;
        c.write_off = 0;
        c.got_bytes = false;
        request_conn_[seq] = slot + 1;
        send_request(slot);
      } else if (pool_.open() < o_.max_connections || pool_.close_idle_elsewhere(instance)) {
        ++queue_;
        open_for(seq);
      } else {
        break;
      }
    }
  }

  void note_error(const std::string& text) {
    if (result_.first_error.empty()) result_.first_error = text;
  }

  void finish(std::size_t seq, Outcome outcome) {
    result_.records[seq].outcome = outcome;
    request_conn_[seq] = kDone;
    if (o_.retry.after && outcome != Outcome::cancelled) schedule_retry(seq);
  }

  bool epoll_set(uint32_t slot, int op, uint32_t events) {
    const Conn& c = pool_[slot];
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = (uint64_t{c.gen} << 32) | slot;
    return ::epoll_ctl(epfd_, op, c.fd, &ev) == 0;
  }

  void connect_failed(std::size_t seq, int err) {
    ++result_.connect_errors;
    note_error("connect " + texts_[result_.records[seq].instance] + ": " + std::strerror(err));
    finish(seq, Outcome::connect_error);
  }

  // Opens a connection for request `seq` (the caller checked the cap).
  void open_for(std::size_t seq) {
    const uint8_t instance = result_.records[seq].instance;
    const Target& target = *targets_[instance];
    const int fd = ::socket(target.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      connect_failed(seq, errno);
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc;
    do rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&target.addr), target.addr_len);
    while (rc != 0 && errno == EINTR);
    if (rc != 0 && errno != EINPROGRESS) {
      const int err = errno;
      ::close(fd);
      connect_failed(seq, err);
      return;
    }
    const uint32_t slot = pool_.add(fd, instance);
    Conn& c = pool_[slot];
    c.seq = seq;
    request_conn_[seq] = slot + 1;
    result_.peak_connections = std::max(result_.peak_connections, pool_.open());
    if (rc == 0) {
      c.state = ConnState::busy;
      ++result_.connections_opened;
      if (!epoll_set(slot, EPOLL_CTL_ADD, EPOLLIN)) return lost(slot, errno, "epoll_ctl");
      send_request(slot);
    } else {
      c.state = ConnState::connecting;
      c.want_out = true;
      if (!epoll_set(slot, EPOLL_CTL_ADD, EPOLLOUT)) return lost(slot, errno, "epoll_ctl");
    }
  }

  // Closes a connection; its request (if any) is the caller's business.
  void close_conn(uint32_t slot) { pool_.close(slot); }

  // The connection broke (closed, reset, a failed send) with its request
  // outstanding. A keep-alive connection that the server closed while idle
  // can take a request before the close arrives: then, if nothing of the
  // answer came, the request gets one fresh connection.
  void lost(uint32_t slot, int err, const char* what) {
    Conn& c = pool_[slot];
    const std::size_t seq = c.seq;
    const std::string& text = texts_[c.instance];
    const bool retry = c.served > 0 && !c.got_bytes;
    close_conn(slot);
    if (retry) {
      open_for(seq);  // closing freed a slot under the cap
      return;
    }
    if (err == 0)
      note_error(text + " closed the connection before the response was complete");
    else
      note_error(std::string(what) + " " + text + ": " + std::strerror(err));
    finish(seq, Outcome::closed);
  }

  void send_request(uint32_t slot) {
    Conn& c = pool_[slot];
    const std::string& r = request_of(result_.records[c.seq]);
    while (c.write_off < r.size()) {
      const ssize_t n = ::send(c.fd, r.data() + c.write_off, r.size() - c.write_off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          if (!c.want_out) {
            c.want_out = true;
            if (!epoll_set(slot, EPOLL_CTL_MOD, EPOLLIN | EPOLLOUT)) return lost(slot, errno, "epoll_ctl");
          }
          return;
        }
        return lost(slot, errno, "send");
      }
      c.write_off += static_cast<uint32_t>(n);
    }
    if (c.want_out) {
      c.want_out = false;
      if (!epoll_set(slot, EPOLL_CTL_MOD, EPOLLIN)) return lost(slot, errno, "epoll_ctl");
    }
  }

  void on_event(uint32_t slot, uint32_t gen, uint32_t events) {
    if (slot >= pool_.slots()) return;
    Conn& c = pool_[slot];
    if (c.gen != gen) return;  // the descriptor this event was for is closed
    switch (c.state) {
      case ConnState::free:
        return;
      case ConnState::idle:
        // An idle connection has nothing to say: the server closed it (or
        // sent what we did not ask for). Either way, drop it.
        close_conn(slot);
        return;
      case ConnState::connecting: {
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err == 0 && (events & (EPOLLERR | EPOLLHUP)) != 0) err = ECONNREFUSED;
        if (err != 0) {
          const std::size_t seq = c.seq;
          close_conn(slot);
          connect_failed(seq, err);
          return;
        }
        ++result_.connections_opened;
        c.state = ConnState::busy;
        c.want_out = false;
        if (!epoll_set(slot, EPOLL_CTL_MOD, EPOLLIN)) return lost(slot, errno, "epoll_ctl");
        send_request(slot);
        return;
      }
      case ConnState::busy:
        if ((events & EPOLLOUT) != 0 && c.want_out) {
          send_request(slot);
          if (c.gen != gen || c.state != ConnState::busy) return;
        }
        if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) read_response(slot);
        return;
    }
  }

  // The bytes of a request: its instance's Host header, its class's priority.
  const std::string& request_of(const Record& r) const {
    return requests_[r.instance * o_.classes.size() + r.request_class];
  }

  void read_response(uint32_t slot) {
    Conn& c = pool_[slot];
    ssize_t n;
    do n = ::recv(c.fd, scratch_.get(), kScratch, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      return lost(slot, errno, "recv");
    }
    if (n == 0) {
      // The end of the connection completes a body without a length.
      if (c.len > 0) {
        const ResponseFrame p = frame_response(c.buf.get(), c.len, true);
        if (p.consumed > 0) return answered(slot, p, true, c.buf.get());
        if (p.consumed < 0) return bad(slot);
      }
      return lost(slot, 0, "recv");
    }
    c.got_bytes = true;
    const auto got = static_cast<std::size_t>(n);
    if (c.len == 0) {
      // The usual case: the whole response in one read, parsed in place.
      const ResponseFrame p = frame_response(scratch_.get(), got, false);
      if (p.consumed > 0) return answered(slot, p, static_cast<std::size_t>(p.consumed) != got, scratch_.get());
      if (p.consumed < 0) return bad(slot);
      c.append(scratch_.get(), got);
      c.need = p.need;
      return;
    }
    c.append(scratch_.get(), got);
    if (c.len < c.need) return;
    const ResponseFrame p = frame_response(c.buf.get(), c.len, false);
    if (p.consumed > 0) return answered(slot, p, static_cast<std::size_t>(p.consumed) != c.len, c.buf.get());
    if (p.consumed < 0) return bad(slot);
    c.need = p.need;
  }

  // A complete response. `extra`: bytes beyond it, which no request asked
  // for, so the connection is not reused; nor is one whose request the
  // server answered before taking all of it. `data`: the response's bytes.
  void answered(uint32_t slot, const ResponseFrame& p, bool extra, const char* data) {
    Conn& c = pool_[slot];
    Record& r = result_.records[c.seq];
    extra = extra || c.write_off < request_of(r).size();
    r.status = static_cast<uint16_t>(std::min(p.status, 65535));
    r.latency_ns = since_start(Clock::now()) - r.scheduled_ns;
    response_ = std::string_view(data, static_cast<std::size_t>(p.consumed));
    finish(c.seq, Outcome::response);
    response_ = {};
    ++c.served;
    c.len = 0;
    if (p.close || extra) {
      close_conn(slot);
      return;
    }
    pool_.park(slot);
  }

  void bad(uint32_t slot) {
    const std::size_t seq = pool_[slot].seq;
    note_error("bad response from " + texts_[pool_[slot].instance] + " (not HTTP/1.x)");
    close_conn(slot);
    finish(seq, Outcome::bad_response);
  }

  // stop_fd: every request not yet answered is cancelled.
  void stop() {
    result_.stopped = true;
    for (std::size_t seq = oldest_; seq < result_.records.size(); ++seq)
      if (request_conn_[seq] != kDone) finish(seq, Outcome::cancelled);
    oldest_ = queue_ = result_.records.size();
    retries_.clear();  // not yet due: not recorded
  }

  // Waits for I/O or until `wake` (ns since start).
  headroom::Result<int> wait(epoll_event* events, int max, int64_t wake) {
    if (wake != armed_) {
      const auto at = std::chrono::duration_cast<std::chrono::nanoseconds>(start_.time_since_epoch()).count() + wake;
      itimerspec its{};
      // 0 would disarm: a wake-up at the clock's origin is long past anyway.
      its.it_value.tv_sec = static_cast<time_t>(std::max<int64_t>(at, 1) / 1'000'000'000);
      its.it_value.tv_nsec = static_cast<long>(std::max<int64_t>(at, 1) % 1'000'000'000);
      if (::timerfd_settime(timerfd_, TFD_TIMER_ABSTIME, &its, nullptr) != 0)
        return system_error(errno, "loadgen: timerfd_settime");
      armed_ = wake;
    }
    const int n = ::epoll_wait(epfd_, events, max, -1);
    if (n >= 0) return n;
    if (errno == EINTR) return 0;
    return system_error(errno, "loadgen: epoll_wait");
  }

  RunResult finish_result() {
    for (uint32_t slot = 0; slot < pool_.slots(); ++slot) close_conn(slot);
    if (!lags_.empty()) {
      auto rank = [&](double q) {
        const auto n = static_cast<double>(lags_.size());
        const auto i = static_cast<std::size_t>(std::max(0.0, std::ceil(q * n) - 1));
        std::nth_element(lags_.begin(), lags_.begin() + static_cast<std::ptrdiff_t>(i), lags_.end());
        return lags_[i];
      };
      result_.send_lag_max_ns = *std::max_element(lags_.begin(), lags_.end());
      result_.send_lag_p99_ns = rank(0.99);
      result_.send_lag_p50_ns = rank(0.50);
    }
    return std::move(result_);
  }

  const Options& o_;
  std::vector<PhasePlan> plans_;
  std::vector<const Target*> targets_;  // the instances: o_.target, then o_.more_instances
  std::vector<std::string> texts_;      // per instance: its address, "127.0.0.1:8080"
  std::vector<std::string> requests_;   // per instance and class (request_of): the bytes of its request
  std::vector<double> weights_, current_;
  double weight_total_ = 0;
  std::vector<uint64_t> class_firsts_;  // per class: its first attempts so far (first_instance)
  uint64_t total_ = 0;
  int64_t timeout_ns_ = 0;
  int64_t end_ns_ = 0;  // the last phase's end
  Clock::time_point start_;

  // The schedule's cursor: the next request is phase_'s phase_k_-th.
  std::size_t phase_ = 0;
  uint64_t phase_k_ = 0;
  uint64_t next_seq_ = 0;

  RunResult result_;
  std::vector<uint32_t> request_conn_;  // per record: kQueued, kDone, or its connection's slot + 1
  std::vector<int64_t> lags_;
  std::size_t oldest_ = 0;  // records before it are all finished
  std::size_t queue_ = 0;   // records from it on wait for a connection
  RetryQueue retries_;
  std::string_view response_;  // while finish() runs for an answer: its bytes

  static constexpr int64_t kUnarmed = std::numeric_limits<int64_t>::min();
  int epfd_ = -1;
  int timerfd_ = -1;
  int64_t armed_ = kUnarmed;  // the timerfd's wake-up (ns since start)
  ConnPool pool_;
  std::unique_ptr<char[]> scratch_;
};

}  // namespace

headroom::Result<RunResult> run(const Options& options) {
  auto plans = plan(options);
  if (!plans) return std::move(plans).error();
  Engine engine(options, std::move(plans).value());
  return engine.run();
}

}  // namespace headroom::ctl::loadgen
