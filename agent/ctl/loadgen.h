// SPDX-License-Identifier: Apache-2.0
// The open-loop HTTP/1.1 load engine behind `headroomctl buffer`
// (docs/buffers.md). Requests leave on a schedule, whatever the answers do,
// so an overloaded target cannot slow the client down and hide its overload:
// a request that finds no idle keep-alive connection opens a new one (up to
// max_connections) or waits in the client, and its latency is counted from
// the moment it was *scheduled*, not from when it could be sent.
//
// One thread, epoll, non-blocking sockets. The engine records one Record per
// scheduled request and computes nothing else; buffer_model.h turns records
// into steps, buffers and a verdict. The schedule is loadgen_plan.h's, the
// response framing http_response.h's.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/ctl/http_response.h"  // parse_response, for the engine's users and tests
#include "headroom/orca/result.h"

namespace headroom::ctl::loadgen {

using Clock = std::chrono::steady_clock;

// Where to send: an address already resolved, the Host header and the
// request target ("/play?x=1").
struct Target {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string host_header;  // "127.0.0.1:8080"
  std::string path = "/";
};

// A stretch of constant offered rate.
struct Phase {
  std::chrono::nanoseconds duration{0};
  double rate = 0;  // requests per second, >= 0; 0 sends nothing for `duration`
};

// A class of requests in the mix: the value of the priority header and its
// share of the requests. Classes are assigned by smooth weighted round robin,
// so over any run of requests each class's count is within 1 of its share.
struct RequestClass {
  std::string header_value;  // "CRITICAL", "7"; empty: no priority header
  double weight = 1;         // > 0
};

struct Record;

// Retries (`headroomctl buffer --retries`): the engine schedules them, its
// caller decides them. A retry is one more request, open loop like the
// others: it leaves at its own time whatever the answers meanwhile.
struct RetryHooks {
  // A request has ended (any outcome but `cancelled`): the delay in ns
  // before its next attempt, or -1 for none. `response`: the answer's bytes
  // (outcome `response`), empty otherwise. `now_ns` since Options::start.
  // A retry due after the last phase ends is not sent (the run keeps its
  // bound), only counted (RunResult::retries_past_end).
  std::function<int64_t(const Record& ended, std::string_view response, int64_t now_ns)> after;
  // A request falls due, a first attempt or a retry: false keeps a retry
  // from leaving (it is not recorded); a first attempt always leaves.
  // Empty: every retry leaves.
  std::function<bool(const Record& retry, int64_t now_ns)> admit;
};

// At most this many instances of the target (Record::instance is 8-bit).
inline constexpr std::size_t kMaxInstances = 64;

struct Options {
  Target target;  // instance 0 of the target service
  // Its other instances, 1, 2, ... (at most kMaxInstances in all), as a
  // client-side balancer sees them: first attempts go round robin over all
  // instances, each class on its own cursor, a retry to the instance after
  // the failed attempt's (loadgen_plan.h's first_instance, next_instance).
  // Each instance has its own connections.
  std::vector<Target> more_instances;
  std::vector<Phase> phases;          // run back to back from `start`
  std::vector<RequestClass> classes;  // at least one
  std::string priority_header = "x-priority";
  int max_connections = 512;           // keep-alive connections, opened on demand
  std::chrono::nanoseconds timeout{std::chrono::seconds(2)};  // from the scheduled time
  // Phase 0 begins here (steady clock). Callers that sample something else
  // over the same steps (report files) use it as their time origin.
  Clock::time_point start;
  // When this descriptor becomes readable (a signalfd for SIGINT, an
  // eventfd) the run stops at once: requests not yet answered are recorded as
  // `cancelled`, those not yet due are not recorded. -1: none.
  int stop_fd = -1;
  RetryHooks retry;  // no `after`: no retries
};

enum class Outcome : uint8_t {
  response,       // a complete response was read; see status and latency
  timeout,        // no complete response within `timeout` of the scheduled time
  connect_error,  // the connection for it could not be established
  closed,         // the connection closed or reset before the response was complete
  bad_response,   // the bytes received are not an HTTP/1.x response
  cancelled,      // the run was stopped (stop_fd) before it was answered
};

struct Record {
  int64_t scheduled_ns = 0;  // since Options::start
  int64_t latency_ns = 0;    // scheduled time to the response's last byte (response only)
  uint16_t status = 0;       // response only
  uint16_t phase = 0;        // index into Options::phases
  uint8_t request_class = 0; // index into Options::classes
  Outcome outcome = Outcome::response;
  uint8_t attempt = 0;       // 0: a first attempt; k: its k-th retry (phase and class are the first's)
  uint8_t instance = 0;      // where it went: 0 Options::target, i Options::more_instances[i - 1]
  uint32_t first = 0;        // the index of the first attempt's record (its own for a first attempt)
};

struct RunResult {
  std::vector<Record> records;  // one per scheduled request and retry, in schedule order
  bool stopped = false;         // stop_fd fired
  int64_t connections_opened = 0;
  int64_t connect_errors = 0;
  std::string first_error;      // e.g. "connect 127.0.0.1:9: Connection refused", empty if none (any instance)
  // How late requests actually left against their schedule (ns): a client
  // that cannot keep up shows here, not as server latency.
  int64_t send_lag_p50_ns = 0;
  int64_t send_lag_p99_ns = 0;
  int64_t send_lag_max_ns = 0;
  int peak_connections = 0;
  int64_t retries_past_end = 0;  // retries asked for that were due after the last phase
};

// Runs the phases and returns every request's record. Returns within the
// phases' total duration plus `timeout` (plus a few ms), whatever the target
// does. An error with code 0 is options that cannot run (no classes, negative
// rate, max_connections < 1, a stop_fd that cannot be polled); one with an
// errno is a system call that failed.
headroom::Result<RunResult> run(const Options& options);

}  // namespace headroom::ctl::loadgen
