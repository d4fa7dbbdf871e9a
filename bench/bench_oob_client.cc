// SPDX-License-Identifier: Apache-2.0
// The client of bench/bench_oob.sh (docs/benchmarks.md, "Out-of-band
// streams"): one process that opens N OpenRcaService/StreamCoreMetrics streams
// on headroomd's [oob] listener, spread over K channels (one HTTP/2 connection
// each), with gRPC's callback API so that 1000 streams need only gRPC's few
// threads. Every message is parsed by the typed stub as an OrcaLoadReport,
// then validated (orca::validate_report) and its headroom metadata read
// (orca::metadata_of); a message that fails either counts as bad.
//
//   bench_oob_client --target 127.0.0.1:9447 --streams 1000 --channels 1000
//                    --interval 100ms --duration 20s
//       prints one JSON object at the end: messages, messages/s, the gaps
//       between consecutive messages of a stream (pooled p50/p99/max, and the
//       worst stream's largest gap), the headroom.seq steps, statuses.
//   bench_oob_client ... --control
//       reads commands on stdin, one per line, and answers each with one JSON
//       line: "stat" (the counters), "mark" (the same, then starts a new
//       measurement window: the window figures are those since the previous
//       mark), "quit" or end of input (cancels every stream, prints a last
//       line, exits).
//   bench_oob_client --watch-ticks DIR --out FILE
//       the tick observer: inotify on DIR (IN_MOVED_TO of node.orca, i.e. its
//       rename), and on each one a line "t_ns seq timestamp_ms" in FILE
//       (CLOCK_MONOTONIC when the event was read; the report's headroom.seq
//       and headroom.timestamp_ms). Runs SCHED_FIFO when it may, until
//       SIGTERM or SIGINT.
//
// --bdp-probe 0 turns off the client's HTTP/2 BDP pings (gRPC clients send
// one after reading data, so the server reads a frame per message; Envoy's
// HTTP/2 client does not probe).
//
// Channels get distinct channel arguments ("headroom.bench.channel" = i) and
// a local subchannel pool, so no two share a connection: K = N is one
// connection per stream, as N Envoys (one stream per host each) would open.
#include <grpcpp/grpcpp.h>
#include <sched.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "headroom/orca/report.h"
#include "xds/service/orca/v3/orca.grpc.pb.h"

namespace {

using headroom::bench::monotonic_ns;
using headroom::bench::percentile_sorted;
namespace orca = headroom::orca;
using Request = xds::service::orca::v3::OrcaLoadReportRequest;

// "100ms", "10s", "1.5s", "2m": milliseconds; -1 when it is not a duration.
int64_t parse_ms(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return -1;
  const std::string unit(end);
  double ms;
  if (unit == "ms") ms = v;
  else if (unit == "s") ms = v * 1000;
  else if (unit == "m") ms = v * 60'000;
  else return -1;
  return static_cast<int64_t>(ms + 0.5);
}

int64_t process_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

const char* code_name(grpc::StatusCode c) {
  static constexpr const char* kCodes[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                           "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                           "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  const auto i = static_cast<std::size_t>(c);
  return i < std::size(kCodes) ? kCodes[i] : "?";
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\', out += ch;
    else if (static_cast<unsigned char>(ch) < 0x20) out += ' ';
    else out += ch;
  }
  return out + "\"";
}

class Client;

// One stream: at most one read outstanding, so its callbacks never overlap.
class Stream final : public grpc::ClientReadReactor<orca::Report> {
 public:
  Stream(Client* client, const Request& request) : client_(client), request_(request) {}

  void start(xds::service::orca::v3::OpenRcaService::Stub& stub) {
    stub.async()->StreamCoreMetrics(&context_, &request_, this);
    StartRead(&message_);
    StartCall();
  }
  void cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  // Guarded by m (the control thread reads them while callbacks write).
  std::mutex m;
  uint64_t count = 0, bad = 0;
  int64_t first_ns = 0, last_ns = 0;
  uint64_t last_seq = 0;
  std::vector<double> gaps_ms;      // since the last mark
  std::vector<double> seq_steps;    // since the last mark
  uint64_t window_count = 0;        // since the last mark
  bool done = false;
  grpc::Status status;
  std::string bad_reason;

 private:
  Client* client_;
  Request request_;
  grpc::ClientContext context_;
  orca::Report message_;
};

class Client {
 public:
  std::atomic<uint64_t> messages{0};
  std::atomic<std::size_t> done{0};
  std::mutex done_m;
  std::condition_variable done_cv;

  void stream_done() {
    {
      std::lock_guard lock(done_m);
      done.fetch_add(1);
    }
    done_cv.notify_all();
  }
};

void Stream::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows with the status
  const int64_t now = monotonic_ns();
  std::string why;
  uint64_t seq = 0;
  if (auto v = orca::validate_report(message_); !v) why = v.error().message;
  else if (auto meta = orca::metadata_of(message_); !meta) why = meta.error().message;
  else seq = meta->seq;
  {
    std::lock_guard lock(m);
    ++count;
    ++window_count;
    if (!why.empty()) {
      ++bad;
      if (bad_reason.empty()) bad_reason = why;
    } else {
      if (last_ns != 0) gaps_ms.push_back(static_cast<double>(now - last_ns) / 1e6);
      if (last_seq != 0) seq_steps.push_back(static_cast<double>(seq) - static_cast<double>(last_seq));
      last_seq = seq;
    }
    if (first_ns == 0) first_ns = now;
    last_ns = now;
  }
  client_->messages.fetch_add(1, std::memory_order_relaxed);
  message_.Clear();
  StartRead(&message_);
}

void Stream::OnDone(const grpc::Status& s) {
  {
    std::lock_guard lock(m);
    done = true;
    status = s;
  }
  client_->stream_done();
}

struct Options {
  std::string target;
  std::string authority;
  long streams = 1;
  long channels = 0;  // 0: one per stream
  int64_t interval_ms = 1000;
  int64_t duration_ms = 10'000;
  bool control = false;
  int bdp_probe = -1;  // -1: gRPC's default (on)
};

std::string summary(const std::string& target, const Options& o, std::vector<std::unique_ptr<Stream>>& streams,
                    int64_t window_start_ns, int64_t open_ns, bool reset) {
  const int64_t now = monotonic_ns();
  uint64_t total = 0, bad = 0, window = 0, first = 0;
  std::size_t done = 0, silent = 0;
  std::vector<double> gaps, steps;
  double worst_gap = 0;
  std::map<std::string, std::size_t> statuses;
  std::string first_error, bad_reason;
  for (auto& s : streams) {
    std::lock_guard lock(s->m);
    total += s->count;
    bad += s->bad;
    window += s->window_count;
    if (s->first_ns != 0) ++first;
    if (s->window_count == 0) ++silent;
    // The open gap since this stream's last message counts too: a stream
    // that went quiet shows up as a large gap, not as no gap.
    double stream_worst = s->last_ns != 0 && !s->done ? static_cast<double>(now - s->last_ns) / 1e6 : 0;
    for (double g : s->gaps_ms) stream_worst = std::max(stream_worst, g);
    worst_gap = std::max(worst_gap, stream_worst);
    gaps.insert(gaps.end(), s->gaps_ms.begin(), s->gaps_ms.end());
    steps.insert(steps.end(), s->seq_steps.begin(), s->seq_steps.end());
    if (s->done) {
      ++done;
      ++statuses[code_name(s->status.error_code())];
      if (first_error.empty() && !s->status.ok()) first_error = s->status.error_message();
    }
    if (bad_reason.empty()) bad_reason = s->bad_reason;
    if (reset) {
      s->gaps_ms.clear();
      s->seq_steps.clear();
      s->window_count = 0;
    }
  }
  std::sort(gaps.begin(), gaps.end());
  std::sort(steps.begin(), steps.end());
  const double window_s = static_cast<double>(now - window_start_ns) / 1e9;
  char buf[1024];
  std::string out;
  std::snprintf(buf, sizeof buf,
                "{\"t_ns\":%lld,\"target\":%s,\"streams\":%zu,\"channels\":%ld,\"interval_ms\":%lld,"
                "\"received_first\":%llu,\"open_s\":%.3f,\"ended\":%zu,\"messages\":%llu,\"bad\":%llu,",
                static_cast<long long>(now), json_string(target).c_str(), streams.size(), o.channels,
                static_cast<long long>(o.interval_ms), static_cast<unsigned long long>(first),
                open_ns > 0 ? static_cast<double>(open_ns) / 1e9 : -1.0, done,
                static_cast<unsigned long long>(total), static_cast<unsigned long long>(bad));
  out += buf;
  std::snprintf(buf, sizeof buf,
                "\"window\":{\"s\":%.3f,\"messages\":%llu,\"messages_per_s\":%.1f,\"silent_streams\":%zu,"
                "\"gap_ms\":{\"n\":%zu,\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f,\"worst_stream\":%.3f},"
                "\"seq_step\":{\"p50\":%.0f,\"max\":%.0f}},",
                window_s, static_cast<unsigned long long>(window), window_s > 0 ? static_cast<double>(window) / window_s : 0.0,
                silent, gaps.size(), percentile_sorted(gaps, 0.5), percentile_sorted(gaps, 0.99),
                gaps.empty() ? 0.0 : gaps.back(), worst_gap, percentile_sorted(steps, 0.5),
                steps.empty() ? 0.0 : steps.back());
  out += buf;
  out += "\"statuses\":{";
  bool comma = false;
  for (const auto& [k, v] : statuses) {
    out += (comma ? "," : "") + json_string(k) + ":" + std::to_string(v);
    comma = true;
  }
  out += "},\"first_error\":" + json_string(first_error) + ",\"bad_reason\":" + json_string(bad_reason);
  std::snprintf(buf, sizeof buf, ",\"cpu_ns\":%lld}", static_cast<long long>(process_cpu_ns()));
  out += buf;
  return out;
}

int run_streams(const Options& o) {
  Request request;
  request.mutable_report_interval()->set_seconds(o.interval_ms / 1000);
  request.mutable_report_interval()->set_nanos(static_cast<int32_t>(o.interval_ms % 1000) * 1'000'000);

  const long k = o.channels > 0 ? std::min(o.channels, o.streams) : o.streams;
  std::vector<std::unique_ptr<xds::service::orca::v3::OpenRcaService::Stub>> stubs;
  for (long i = 0; i < k; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("headroom.bench.channel", static_cast<int>(i));
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    if (!o.authority.empty()) args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, o.authority);
    if (o.bdp_probe >= 0) args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, o.bdp_probe);
    stubs.push_back(xds::service::orca::v3::OpenRcaService::NewStub(
        grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args)));
  }
  Client client;
  std::vector<std::unique_ptr<Stream>> streams;
  for (long i = 0; i < o.streams; ++i) streams.push_back(std::make_unique<Stream>(&client, request));
  const int64_t t0 = monotonic_ns();
  for (long i = 0; i < o.streams; ++i) streams[static_cast<std::size_t>(i)]->start(*stubs[static_cast<std::size_t>(i % k)]);

  Options shown = o;
  shown.channels = k;
  // Open: until every stream has its first message (or ended), at most 30 s.
  int64_t open_ns = 0;
  auto all_first = [&] {
    for (auto& s : streams) {
      std::lock_guard lock(s->m);
      if (s->first_ns == 0 && !s->done) return false;
    }
    return true;
  };
  int64_t window_start = t0;
  if (!o.control) {
    while (!all_first() && monotonic_ns() - t0 < 30'000'000'000) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    open_ns = monotonic_ns() - t0;
    // The first messages arrive at once, not at the cadence: the window starts now.
    (void)summary(o.target, shown, streams, window_start, open_ns, true);
    window_start = monotonic_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(o.duration_ms));
    std::printf("%s\n", summary(o.target, shown, streams, window_start, open_ns, true).c_str());
  } else {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (open_ns == 0 && all_first()) open_ns = monotonic_ns() - t0;
      if (line == "stat") {
        std::printf("%s\n", summary(o.target, shown, streams, window_start, open_ns, false).c_str());
      } else if (line == "mark") {
        std::printf("%s\n", summary(o.target, shown, streams, window_start, open_ns, true).c_str());
        window_start = monotonic_ns();
      } else if (line == "quit") {
        break;
      } else {
        std::printf("{\"error\":%s}\n", json_string("unknown command " + line).c_str());
      }
      std::fflush(stdout);
    }
  }
  for (auto& s : streams) s->cancel();
  {
    std::unique_lock lock(client.done_m);
    client.done_cv.wait_for(lock, std::chrono::seconds(10), [&] { return client.done.load() == streams.size(); });
  }
  if (o.control) {
    std::printf("%s\n", summary(o.target, shown, streams, window_start, open_ns, false).c_str());
    std::fflush(stdout);
  }
  if (client.done.load() != streams.size()) {
    std::fprintf(stderr, "bench_oob_client: %zu stream(s) did not end within 10 s of the cancel\n",
                 streams.size() - client.done.load());
    std::fflush(nullptr);
    _exit(1);  // their reactors are still gRPC's: do not destroy them
  }
  streams.clear();
  stubs.clear();
  return 0;
}

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

int watch_ticks(const std::string& dir, const std::string& out_path) {
  sched_param p{};
  p.sched_priority = 10;
  if (::sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &p) != 0)
    std::fprintf(stderr, "bench_oob_client: not SCHED_FIFO (%s): the observer's own wake-ups are in the figures\n",
                 std::strerror(errno));
  FILE* out = std::fopen(out_path.c_str(), "w");
  if (out == nullptr) {
    std::fprintf(stderr, "bench_oob_client: %s: %s\n", out_path.c_str(), std::strerror(errno));
    return 2;
  }
  const int fd = ::inotify_init1(IN_CLOEXEC);
  if (fd < 0 || ::inotify_add_watch(fd, dir.c_str(), IN_MOVED_TO) < 0) {
    std::fprintf(stderr, "bench_oob_client: inotify on %s: %s\n", dir.c_str(), std::strerror(errno));
    return 2;
  }
  struct sigaction sa{};
  sa.sa_handler = on_stop;  // no SA_RESTART: read() returns EINTR
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  const std::string node = dir + "/node.orca";
  alignas(inotify_event) char buf[4096];
  while (!g_stop) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    const int64_t t = monotonic_ns();
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      if (ev->len == 0 || std::strcmp(ev->name, "node.orca") != 0) continue;
      long long seq = -1, ts = -1;
      if (auto r = orca::read_report_file(node); r)
        if (auto m = orca::metadata_of(*r); m) seq = static_cast<long long>(m->seq), ts = m->timestamp_ms;
      std::fprintf(out, "%lld %lld %lld\n", static_cast<long long>(t), seq, ts);
      std::fflush(out);
    }
  }
  std::fclose(out);
  return 0;
}

void usage() {
  std::fprintf(stderr,
               "usage: bench_oob_client --target ADDR [--streams N] [--channels K] [--interval 100ms]\n"
               "                        [--duration 10s] [--authority A] [--control] [--bdp-probe 0|1]\n"
               "       bench_oob_client --watch-ticks DIR --out FILE\n");
}

}  // namespace

int main(int argc, char** argv) {
  headroom::bench::Flags flags(argc, argv);
  if (flags.has("--help") || flags.has("-h")) {
    usage();
    return 0;
  }
  if (flags.has("--watch-ticks")) {
    const std::string out = flags.get("--out", "");
    if (out.empty()) {
      usage();
      return 2;
    }
    return watch_ticks(flags.get("--watch-ticks", ""), out);
  }
  Options o;
  o.target = flags.get("--target", "");
  o.authority = flags.get("--authority", "");
  o.streams = flags.get_long("--streams", 1);
  o.channels = flags.get_long("--channels", o.streams);
  o.control = flags.has("--control");
  if (flags.has("--bdp-probe")) o.bdp_probe = flags.get("--bdp-probe", "1") == "0" ? 0 : 1;
  o.interval_ms = parse_ms(flags.get("--interval", "1s"));
  o.duration_ms = parse_ms(flags.get("--duration", "10s"));
  if (o.target.empty() || o.interval_ms < 0 || o.duration_ms < 0) {
    usage();
    return 2;
  }
  // One descriptor per connection, and a few more.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
  }
  return run_streams(o);
}
