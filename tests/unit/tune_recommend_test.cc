// SPDX-License-Identifier: Apache-2.0
// `headroomctl tune recommend` end to end: the built binary against an
// in-test HTTP server on the loopback that answers with a canned /metrics
// text or canned Prometheus API answers (no Prometheus, no headroomd, no
// root). Checks the target and max recommended, the file written (it reads
// back), the queries asked, and the exit status and message of bad input.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/ctl/tune_file.h"
#include "process.h"
#include "temp_dir.h"

namespace headroom {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// One GET per connection: the handler gets the path with its query (decoded)
// and returns the status and the body.
class CannedHttp {
 public:
  using Handler = std::function<std::pair<int, std::string>(const std::string&)>;
  explicit CannedHttp(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("cannot listen on the loopback");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~CannedHttp() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  static std::string decode(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%' && i + 2 < s.size()) {
        out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        out += s[i] == '+' ? ' ' : s[i];
      }
    }
    return out;
  }
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<std::size_t>(n));
      }
      const std::size_t sp = req.find(' ');
      const std::string path = decode(req.substr(sp + 1, req.find(' ', sp + 1) - sp - 1));
      {
        std::lock_guard<std::mutex> l(mu_);
        requests_.push_back(path);
      }
      const auto [status, body] = handler_(path);
      const std::string head = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: text/plain\r\n" +
                               "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
      const std::string all = head + body;
      for (std::size_t at = 0; at < all.size();) {
        const ssize_t n = ::write(c, all.data() + at, all.size() - at);
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
      }
      ::close(c);
    }
  }
  Handler handler_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

struct CtlRun {
  int status = -1;
  std::string out, err;
};

CtlRun recommend(const testing::TempDir& dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {HEADROOMCTL_PATH, "tune", "recommend"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = testing::run(argv, dir, std::chrono::seconds(30));
  if (r.code < 0) ADD_FAILURE() << "headroomctl did not finish within 30 s";
  return {r.code, r.out, r.err};
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

constexpr const char* kConfig = R"([agent]
interval = "100ms"

[[endpoint]]
name = "play"
port = 8080
target = "10ms"
max = "100ms"

[[endpoint]]
name = "quiet"
port = 8081
target = "10ms"
max = "100ms"
max_concurrency = 32

[[endpoint]]
name = "ghost"
port = 8082
target = "10ms"
max = "100ms"
)";

// 10 000 requests of play: p90 at 50 ms exactly, p99 900/950 into (50, 100] ms.
constexpr const char* kMetrics =
    "# HELP headroom_endpoint_request_duration_seconds Time to first byte.\n"
    "# TYPE headroom_endpoint_request_duration_seconds histogram\n"
    "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",le=\"0.005\"} 100\n"
    "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",le=\"0.01\"} 1000\n"
    "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",le=\"0.025\"} 5000\n"
    "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",le=\"0.05\"} 9000\n"
    "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",le=\"0.1\"} 9950\n"
    "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",le=\"+Inf\"} 10000\n"
    "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",endpoint_instance=\"pod-a\",le=\"0.005\"} 10000\n"
    "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"play\",endpoint_instance=\"pod-a\",le=\"+Inf\"} 10000\n"
    "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"quiet\",le=\"0.01\"} 10\n"
    "headroom_endpoint_request_duration_seconds_bucket{endpoint=\"quiet\",le=\"+Inf\"} 12\n"
    "headroom_utilization_ratio{endpoint=\"play\",scope=\"endpoint\",signal=\"latency.slo_target\"} 0.3\n"
    "headroom_cpu_utilization_ratio{scope=\"node\"} 0.42\n";

TEST(TuneRecommend, FromMetricsTheCumulativeHistogramGivesTargetAndMax) {
  testing::TempDir dir;
  const std::string config = dir.write("headroom.toml", kConfig);
  CannedHttp http([](const std::string& path) -> std::pair<int, std::string> {
    if (path == "/metrics") return {200, kMetrics};
    return {404, "not found"};
  });
  const std::string out = dir / "tuned.toml";
  const CtlRun r = recommend(dir, {"--metrics", http.url() + "/metrics", "--config", config, "--out", out, "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["endpoints"].size(), 3u);
  const json& play = doc["endpoints"][0];
  EXPECT_EQ(play["endpoint"], "play");
  EXPECT_EQ(play["recommended"], true);
  EXPECT_EQ(play["target"], "50ms");
  EXPECT_EQ(play["max"], "146ms");  // the p99, 97.4ms, x --max-margin 1.5
  EXPECT_EQ(play["method"], "histogram");
  EXPECT_EQ(play["requests_at_peak"], 10000);
  EXPECT_EQ(play["shed"][0]["signal"], "cpu_utilization");
  EXPECT_EQ(play["shed"][0]["shed_start"], 0.6);
  EXPECT_EQ(play["shed"][0]["critical_start"], 0.8);
  EXPECT_EQ(doc["out"], out);
  EXPECT_FALSE(doc.contains("file"));
  EXPECT_EQ(doc["endpoints"][1]["recommended"], false);
  EXPECT_EQ(doc["endpoints"][1]["note"], "12 requests at peak, fewer than --min-samples 1000: no recommendation");
  EXPECT_THAT(doc["endpoints"][2]["note"].get<std::string>(), HasSubstr("no history for endpoint ghost"));
  // The file: readable as headroomd and the shedder read it, with its header.
  const std::string text = read(out);
  EXPECT_TRUE(ctl::tune::check_tuned_file(text, out));
  EXPECT_THAT(text, HasSubstr("# Made by `headroomctl tune recommend` on "));
  EXPECT_THAT(text, HasSubstr("tune recommend --metrics " + http.url() + "/metrics --config " + config));
  EXPECT_THAT(text, HasSubstr("the cumulative latency histogram since headroomd started"));
  EXPECT_THAT(text, HasSubstr("#   utilization.latency.slo_target: expected now 0.300;"));
  EXPECT_THAT(text, HasSubstr("target = '50ms'"));
  EXPECT_THAT(text, HasSubstr("# endpoint \"ghost\": left as it was: no history for endpoint ghost"));
  EXPECT_EQ(http.requests(), std::vector<std::string>{"/metrics"});

  // The table, then the file when there is no --out.
  const CtlRun table = recommend(dir, {"--metrics", http.url() + "/metrics", "--config", config});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_THAT(table.out, ::testing::ContainsRegex("\nplay +10000 +50ms +146ms +histogram\n"));
  EXPECT_THAT(table.out, ::testing::ContainsRegex("\n +cpu_utilization +expected now 0.420 +L 0.500 +shed 0.6 +critical 0.8 +all 1.5\n"));
  EXPECT_THAT(table.out, ::testing::ContainsRegex("\nquiet +- +kept +kept +12 requests at peak"));
  EXPECT_THAT(table.out, HasSubstr("\n# Made by `headroomctl tune recommend` on "));
}

// 61 steps of 60 s ending at kUntil; play peaks at steps 30-32.
constexpr int64_t kUntil = 1'796'000'000;
constexpr int64_t kStart = kUntil - 3600;

std::string matrix(const std::vector<std::pair<json, std::function<double(int)>>>& series) {
  json result = json::array();
  for (const auto& [labels, value] : series) {
    json values = json::array();
    for (int i = 0; i <= 60; ++i) {
      const double v = value(i);
      values.push_back({kStart + 60 * i, std::isnan(v) ? std::string("NaN") : json(v).dump()});
    }
    result.push_back({{"metric", labels}, {"values", values}});
  }
  return json{{"status", "success"}, {"data", {{"resultType", "matrix"}, {"result", result}}}}.dump();
}

std::pair<int, std::string> prometheus(const std::string& path) {
  const auto peak = [](int i) { return i >= 30 && i <= 32; };
  if (path.find("headroom_endpoint_requests_total") != std::string::npos)
    return {200, matrix({{{{"endpoint", "play"}}, [&](int i) { return peak(i) ? 100.0 : 10.0; }}})};
  if (path.find("headroom_endpoint_latency_seconds") != std::string::npos)
    return {200, matrix({{{{"endpoint", "play"}, {"percentile", "90"}}, [&](int i) { return peak(i) ? 0.03 + 0.01 * (i - 30) : 0.001; }},
                         {{{"endpoint", "play"}, {"percentile", "99"}}, [&](int i) { return peak(i) ? 0.08 : 0.002; }},
                         {{{"endpoint", "play"}, {"percentile", "50"}}, [&](int) { return 0.001; }}})};
  if (path.find("headroom_endpoint_window_requests") != std::string::npos)
    return {200, matrix({{{{"endpoint", "play"}}, [&](int i) { return i == 31 ? 200.0 : 100.0; }}})};
  if (path.find("headroom_utilization_ratio") != std::string::npos)
    return {200, matrix({{{{"endpoint", "play"}, {"signal", "latency.slo_max"}}, [&](int i) { return peak(i) ? 0.05 : 0.0; }}})};
  if (path.find("headroom_cpu_utilization_ratio") != std::string::npos)
    return {200, matrix({{json::object(), [&](int i) { return peak(i) ? 0.5 : std::nan(""); }}})};
  return {400, R"({"status":"error","errorType":"bad_data","error":"unexpected query"})"};
}

TEST(TuneRecommend, FromPrometheusTheWindowPercentilesAtPeakWeightedByTheirRequests) {
  testing::TempDir dir;
  const std::string config = dir.write("headroom.toml", kConfig);
  CannedHttp http(prometheus);
  const CtlRun r = recommend(dir, {"--prometheus", http.url() + "/", "--since", "1h", "--step", "1m", "--until",
                                std::to_string(kUntil), "--config", config, "--endpoint", "play", "--json",
                                "--min-samples", "100"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["endpoints"].size(), 1u);
  const json& play = doc["endpoints"][0];
  ASSERT_EQ(play["recommended"], true) << play.dump();
  EXPECT_EQ(play["method"], "window percentiles");
  EXPECT_EQ(play["peak_steps"], 3);
  EXPECT_EQ(play["requests_at_peak"], 3 * 100 * 60);
  // p90: (0.03 x 100 + 0.04 x 200 + 0.05 x 100) / 400 = 0.04; p99: 0.08.
  EXPECT_NEAR(play["target_seconds"].get<double>(), 0.04, 1e-12);
  EXPECT_EQ(play["target"], "40ms");
  EXPECT_EQ(play["max"], "120ms");  // 80ms x 1.5
  // Without --out the file is in the JSON, and reads back.
  ASSERT_TRUE(doc["file"].is_string());
  EXPECT_TRUE(ctl::tune::check_tuned_file(doc["file"].get<std::string>(), "file"));
  EXPECT_THAT(doc["file"].get<std::string>(), HasSubstr("target = '40ms'"));
  EXPECT_THAT(doc["file"].get<std::string>(), HasSubstr("steps of 60 s"));
  // slo_max (observed at 0.05 under the old max): 1 - 0.99 and the spread of
  // windows of the peak's mean 133.3 requests.
  EXPECT_NEAR(play["shed"][2]["level"].get<double>(), 0.01 + 2.326 * std::sqrt(0.01 * 0.99 / (400.0 / 3)), 1e-12);
  // One query per quantity, each for the asked endpoints, with step windows;
  // no histogram: the window percentiles were there.
  const auto asked = http.requests();
  ASSERT_EQ(asked.size(), 5u);
  for (const auto& q : asked) {
    EXPECT_THAT(q, HasSubstr("/api/v1/query_range?query="));
    EXPECT_THAT(q, HasSubstr("&start=" + std::to_string(kStart) + "&end=" + std::to_string(kUntil) + "&step=60"));
    if (q.find("headroom_cpu_utilization_ratio") == std::string::npos) {
      EXPECT_THAT(q, HasSubstr("endpoint=~\"play\""));
    }
    EXPECT_THAT(q, ::testing::AnyOf(HasSubstr("[59999ms]"), HasSubstr("[120s]")));
  }
}

// An older headroomd without the window percentiles: a second query for the
// histogram of the endpoints without them, its increase at peak interpolated.
TEST(TuneRecommend, FromPrometheusTheHistogramWhenThereAreNoWindowPercentiles) {
  testing::TempDir dir;
  const std::string config = dir.write("headroom.toml", kConfig);
  CannedHttp http([](const std::string& path) -> std::pair<int, std::string> {
    const auto peak = [](int i) { return i >= 30 && i <= 32; };
    if (path.find("headroom_endpoint_latency_seconds") != std::string::npos ||
        path.find("headroom_endpoint_window_requests") != std::string::npos)
      return {200, matrix({})};
    if (path.find("headroom_endpoint_request_duration_seconds_bucket") != std::string::npos) {
      // Per peak step a third of the known histogram's 10 000 requests, elsewhere 1 under 5 ms.
      const std::vector<std::pair<const char*, double>> buckets = {
          {"0.005", 100}, {"0.01", 1000}, {"0.025", 5000}, {"0.05", 9000}, {"0.1", 9950}, {"+Inf", 10000}};
      std::vector<std::pair<json, std::function<double(int)>>> series;
      for (const auto& [le, n] : buckets)
        series.push_back({{{"endpoint", "play"}, {"le", le}}, [&, n = n](int i) { return peak(i) ? n / 3 : 1.0; }});
      return {200, matrix(series)};
    }
    return prometheus(path);
  });
  const CtlRun r = recommend(dir, {"--prometheus", http.url(), "--since", "1h", "--step", "60s", "--until",
                                   std::to_string(kUntil), "--config", config, "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(r.out);
  const json& play = doc["endpoints"][0];
  ASSERT_EQ(play["recommended"], true) << play.dump();
  EXPECT_EQ(play["method"], "histogram");
  EXPECT_NEAR(play["requests_at_peak"].get<double>(), 10000, 1e-6);
  EXPECT_EQ(play["target"], "50ms");
  EXPECT_EQ(play["max"], "146ms");  // the p99, 97.4ms, x --max-margin 1.5
  const auto asked = http.requests();
  ASSERT_EQ(asked.size(), 6u);
  EXPECT_THAT(asked.back(), HasSubstr("sum by (endpoint, le) (rate(headroom_endpoint_request_duration_seconds_bucket"
                                      "{endpoint_instance=\"\",endpoint=~\"play\"}[120s])) * 60"));
  EXPECT_THAT(doc["endpoints"][2]["note"].get<std::string>(), HasSubstr("no history for endpoint ghost"));
}

TEST(TuneRecommend, PrometheusErrorsAreExit69QuotingIt) {
  testing::TempDir dir;
  const std::string config = dir.write("headroom.toml", kConfig);
  CannedHttp http([](const std::string&) -> std::pair<int, std::string> {
    return {422, R"({"status":"error","errorType":"execution","error":"query processing would load too many samples"})"};
  });
  const CtlRun r = recommend(dir, {"--prometheus", http.url(), "--config", config});
  EXPECT_EQ(r.status, 69);
  EXPECT_THAT(r.err, HasSubstr("Prometheus answered execution: query processing would load too many samples"));
  EXPECT_THAT(r.err, HasSubstr("HTTP 422"));
}

TEST(TuneRecommend, UnreachableIsExit69NamingTheUrlAndTheFlag) {
  testing::TempDir dir;
  const std::string config = dir.write("headroom.toml", kConfig);
  std::string url;
  {
    CannedHttp closed([](const std::string&) { return std::pair<int, std::string>{200, ""}; });
    url = closed.url();  // nothing listens there once it is gone
  }
  const CtlRun r = recommend(dir, {"--prometheus", url, "--config", config});
  EXPECT_EQ(r.status, 69);
  EXPECT_THAT(r.err, HasSubstr("cannot reach Prometheus at " + url));
  EXPECT_THAT(r.err, HasSubstr("check --prometheus"));
  EXPECT_THAT(r.err, HasSubstr("onnect"));  // curl's reason: "Failed to connect ..." / "Couldn't connect ..."
}

TEST(TuneRecommend, UsageErrorsAreExit64NamingTheFlagOrThePlace) {
  testing::TempDir dir;
  const std::string config = dir.write("headroom.toml", kConfig);
  const CtlRun neither = recommend(dir, {"--config", config});
  EXPECT_EQ(neither.status, 64);
  EXPECT_THAT(neither.err, HasSubstr("give one of --prometheus URL"));
  const CtlRun both = recommend(dir, {"--config", config, "--prometheus", "http://a", "--metrics", "http://b/metrics"});
  EXPECT_EQ(both.status, 64);
  const CtlRun undeclared = recommend(dir, {"--config", config, "--metrics", "http://b/metrics", "--endpoint", "nope"});
  EXPECT_EQ(undeclared.status, 64);
  EXPECT_THAT(undeclared.err, HasSubstr("--endpoint nope: " + config + " declares no [[endpoint]] named nope"));
  const std::string bad = dir.write("bad.toml", "[[endpoint]]\nname = \"play\"\nport = 8080\ntarget = \"10ms\"\nmax = \"1ms\"\n");
  const CtlRun broken = recommend(dir, {"--config", bad, "--metrics", "http://b/metrics"});
  EXPECT_EQ(broken.status, 64);
  EXPECT_THAT(broken.err, HasSubstr(bad + ":5:"));
  const CtlRun quantiles = recommend(dir, {"--config", config, "--metrics", "http://b/metrics", "--target-quantile", "0.99",
                                        "--max-quantile", "0.9"});
  EXPECT_EQ(quantiles.status, 64);
  EXPECT_THAT(quantiles.err, HasSubstr("--max-quantile must be at least --target-quantile"));
  const CtlRun margin = recommend(dir, {"--config", config, "--metrics", "http://b/metrics", "--max-margin", "0.5"});
  EXPECT_EQ(margin.status, 64);
  EXPECT_THAT(margin.err, HasSubstr("--max-margin must be between 1 and 100"));
}

}  // namespace
}  // namespace headroom
