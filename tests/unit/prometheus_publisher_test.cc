// SPDX-License-Identifier: Apache-2.0
// The Prometheus publishers (publishers/prometheus_publisher.h) on loopback
// and a temporary directory: GET /metrics, a listener shared across a reload,
// a taken address, the textfile's atomic writes, its cadence, failures and
// removal.
#include "publishers/prometheus_publisher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/signals/report_builder.h"
#include "agent/daemon/pipeline.h"
#include "agent/daemon/publisher_registry.h"
#include "temp_dir.h"
#include "tick_builder.h"

namespace headroom::publishers {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::TempDir;

// One HTTP/1.0 request to 127.0.0.1:port; the whole answer.
std::string http(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "connect failed";
  }
  (void)::write(fd, request.data(), request.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

std::string get(int port, const std::string& path) { return http(port, "GET " + path + " HTTP/1.0\r\n\r\n"); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class PrometheusPublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Never the real /run/orca: its lock is one agent's (and one test's) at a time.
    config_.orca_dir = dir_ / "orca";
    config_.endpoints = {endpoint("api")};
    tick_.meta = {1'700'000'000'000, 1, 100, false};
    node_.signals = {{"cpu", 0.4}, {"memory", 0.5}};
    interval_.completed = 25;
    interval_.latencies = {{0.003, 25}};
    testing::fill_tick(tick_, node_, config_, {{&config_.endpoints[0], &signals_, interval_}});
  }
  static agent::EndpointConfig endpoint(const std::string& name) {
    agent::EndpointConfig e;
    e.name = name;
    e.port = 8080;
    e.target = 10ms;
    e.max = 100ms;
    return e;
  }
  void next_tick(int64_t after_ms = 100) {
    ++tick_.meta.seq;
    tick_.meta.timestamp_ms += after_ms;
  }

  TempDir dir_;
  agent::Config config_;
  agent::NodeSample node_;
  Tick tick_;
  agent::EndpointSignals signals_;
  EndpointCounts interval_;
};

TEST_F(PrometheusPublisherTest, ServesTheExpositionOverHttp) {
  auto hub = MetricsHub::shared();
  auto listener = hub->listener("127.0.0.1:0");
  ASSERT_TRUE(listener) << listener.error().message;
  const int port = listener.value()->port();
  ASSERT_GT(port, 0);
  hub->update(tick_);
  const std::string answer = get(port, "/metrics");
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(answer, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(answer, HasSubstr("\r\n\r\n# HELP headroom_"));
  EXPECT_THAT(answer, HasSubstr("headroom_endpoint_requests_total{endpoint=\"api\"} 25\n"));
  EXPECT_THAT(answer, HasSubstr("headroom_utilization_ratio{scope=\"node\",signal=\"memory\"} 0.5\n"));
  EXPECT_THAT(get(port, "/nothing"), HasSubstr("HTTP/1.1 404"));
  EXPECT_THAT(http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc"), HasSubstr("HTTP/1.1 405"));
  EXPECT_THAT(http(port, "\x01\x02garbage\r\n\r\n"), ::testing::Not(HasSubstr(" 200 ")));  // dropped
  EXPECT_THAT(get(port, "/metrics"), HasSubstr("HTTP/1.1 200"));  // still serving after the garbage
}

TEST_F(PrometheusPublisherTest, OneTickIsCountedOnceWhoeverPassesIt) {
  auto hub = MetricsHub::shared();
  hub->update(tick_);
  hub->update(tick_);  // the textfile publisher passes the same tick
  EXPECT_THAT(hub->text(), HasSubstr("headroom_endpoint_requests_total{endpoint=\"api\"} 25\n"));
  next_tick();
  hub->update(tick_);
  EXPECT_THAT(hub->text(), HasSubstr("headroom_endpoint_requests_total{endpoint=\"api\"} 50\n"));
}

TEST_F(PrometheusPublisherTest, AReloadKeepsTheListenerAndTheCounters) {
  config_.prometheus.listen = "127.0.0.1:0";
  // Port 0 names no fixed socket, so take a free port first and name it.
  int port = 0;
  {
    auto probe = MetricsHub::shared()->listener("127.0.0.1:0");
    ASSERT_TRUE(probe);
    port = probe.value()->port();
  }
  config_.prometheus.listen = "127.0.0.1:" + std::to_string(port);
  auto first = agent::build_publishers(config_, agent::report_scopes(config_));
  ASSERT_TRUE(first) << first.error().message;
  auto& old_pipeline = first.value();
  for (auto& p : old_pipeline) ASSERT_TRUE(p->publish(tick_));
  // A reload builds the new publishers while the old ones still run.
  auto second = agent::build_publishers(config_, agent::report_scopes(config_));
  ASSERT_TRUE(second) << second.error().message;
  old_pipeline.clear();
  next_tick();
  for (auto& p : second.value()) ASSERT_TRUE(p->publish(tick_));
  EXPECT_THAT(get(port, "/metrics"), HasSubstr("headroom_endpoint_requests_total{endpoint=\"api\"} 50\n"));
}

TEST_F(PrometheusPublisherTest, ATakenAddressIsABuildErrorThatSaysWhy) {
  auto hub = MetricsHub::shared();
  auto taken = hub->listener("127.0.0.1:0");
  ASSERT_TRUE(taken);
  // Another process (here: a plain socket) holds a port.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  config_.prometheus.listen = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  auto built = agent::build_publishers(config_, agent::report_scopes(config_));
  ::close(fd);
  ASSERT_FALSE(built);
  const auto& e = built.error();
  EXPECT_EQ(agent::exit_status(e), agent::kExitCantCreat);
  EXPECT_THAT(e.message, HasSubstr("prometheus.listen: cannot listen on " + config_.prometheus.listen));
  EXPECT_THAT(e.message, HasSubstr("Address already in use"));
}

TEST_F(PrometheusPublisherTest, TextfileIsWrittenAtomicallyReadableByAllAtItsInterval) {
  const fs::path file = dir_ / "headroom.prom";
  PrometheusTextfile t(MetricsHub::shared(), file, 1s);
  ::umask(077);  // the file is 0644 whatever the umask
  ASSERT_TRUE(t.publish(tick_));
  ::umask(022);
  struct stat st{};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_THAT(slurp(file), HasSubstr("headroom_endpoint_requests_total{endpoint=\"api\"} 25\n"));
  // Within the interval: not rewritten; after it: rewritten.
  next_tick(500);
  ASSERT_TRUE(t.publish(tick_));
  EXPECT_THAT(slurp(file), HasSubstr("headroom_endpoint_requests_total{endpoint=\"api\"} 25\n"));
  next_tick(500);
  ASSERT_TRUE(t.publish(tick_));
  EXPECT_THAT(slurp(file), HasSubstr("headroom_endpoint_requests_total{endpoint=\"api\"} 75\n"));
  // A clock set back does not stop the writes.
  next_tick(-60'000);
  ASSERT_TRUE(t.publish(tick_));
  EXPECT_THAT(slurp(file), HasSubstr("headroom_endpoint_requests_total{endpoint=\"api\"} 100\n"));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_.path())) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"headroom.prom"});  // no temporary left
}

TEST_F(PrometheusPublisherTest, TextfileFailsWhileItsDirectoryIsGoneAndRecovers) {
  const fs::path sub = dir_ / "textfile";
  const fs::path file = sub / "headroom.prom";
  PrometheusTextfile t(MetricsHub::shared(), file, 100ms);
  auto r = t.publish(tick_);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("cannot write"));
  fs::create_directory(sub);
  next_tick(100);
  EXPECT_TRUE(t.publish(tick_));
  EXPECT_TRUE(fs::exists(file));
  fs::remove_all(sub);
  next_tick(100);
  EXPECT_FALSE(t.publish(tick_));
  EXPECT_FALSE(fs::exists(sub));  // not created by headroom: node_exporter's package owns it
}

TEST_F(PrometheusPublisherTest, StopWritesTheFinalFiguresAndRetireRemovesTheFile) {
  const fs::path file = dir_ / "headroom.prom";
  PrometheusTextfile t(MetricsHub::shared(), file, 1h);
  ASSERT_TRUE(t.publish(tick_));
  next_tick();
  tick_.meta.stopped = true;
  tick_.endpoints[0].counted = false;
  tick_.health.ticks = 99;
  t.stop(tick_);
  EXPECT_THAT(slurp(file), HasSubstr("headroom_ticks_total 99\n"));
  t.retire();
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(PrometheusPublisherTest, NothingConfiguredBuildsNothing) {
  auto built = PrometheusListener::build(config_.prometheus);
  ASSERT_TRUE(built);
  EXPECT_TRUE(built->empty());
  config_.prometheus.textfile = dir_ / "h.prom";
  built = PrometheusListener::build(config_.prometheus);
  ASSERT_TRUE(built);
  ASSERT_EQ(built->size(), 1u);
  EXPECT_EQ(built.value()[0]->name(), "prometheus_textfile");
  EXPECT_EQ(built.value()[0]->target(), config_.prometheus.textfile);
}

}  // namespace
}  // namespace headroom::publishers
