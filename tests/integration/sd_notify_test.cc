// SPDX-License-Identifier: Apache-2.0
// headroomd's sd_notify protocol, as systemd sees it, against a socket the
// test owns (NOTIFY_SOCKET): READY=1 only once node.orca exists, WATCHDOG=1 on
// every tick and often enough whatever the interval, RELOADING=1 then READY=1
// on SIGHUP (also when the reload is rejected), STOPPING=1 on SIGTERM.
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "headroom/orca/report.h"
#include "process.h"
#include "temp_dir.h"

namespace headroom {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::Process;
using testing::TempDir;

constexpr auto kWatchdog = 2s;  // WATCHDOG_USEC given to the daemon

struct Message {
  Clock::time_point at;
  std::string text;
  bool node_orca_existed;  // at the moment the datagram was read
};

// The systemd side of the protocol: a datagram socket, and the environment
// that points a child at it. The environment is set before the daemon is
// forked and removed again when the test ends.
class NotifySocket {
 public:
  explicit NotifySocket(const TempDir& dir) : path_(dir / "notify.sock"), orca_(dir / "orca/node.orca") {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("cannot bind " + path_);
    ::setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~NotifySocket() {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
    ::unsetenv("WATCHDOG_PID");
    ::close(fd_);
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  // The next datagram, or nullopt after `timeout`.
  std::optional<Message> next(std::chrono::milliseconds timeout = 5s) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return std::nullopt;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0) return std::nullopt;
    struct stat st {};
    const bool existed = ::stat(orca_.c_str(), &st) == 0 && st.st_size > 0;
    Message m{Clock::now(), std::string(buf, static_cast<size_t>(n)), existed};
    log.push_back(m);
    return m;
  }
  // Reads until a datagram carries the line `line`; nullopt at the deadline.
  std::optional<Message> wait_for(const std::string& line, std::chrono::milliseconds timeout = 5s) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto m = next(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()) + 1ms);
      if (m && has_line(m->text, line)) return m;
    }
    return std::nullopt;
  }
  static bool has_line(const std::string& text, const std::string& line) {
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      if (text.compare(pos, end - pos, line) == 0) return true;
      pos = end + 1;
    }
    return false;
  }

  std::vector<Message> log;

 private:
  std::string path_, orca_;
  int fd_ = -1;
};

// The daemon with WATCHDOG_PID set to its own PID, as systemd sets it: a shell
// exports its $$ and execs the daemon, which keeps that PID.
std::vector<std::string> daemon_args(const TempDir& dir, const std::string& config, const std::string& watchdog_pid = "$$") {
  const std::string cmd = "WATCHDOG_PID=" + watchdog_pid + " exec \"$0\" --config \"$1\" --orca-dir \"$2\"";
  return {"/bin/sh", "-c", cmd, HEADROOMD_PATH, config, dir / "orca"};
}

std::string config_file(const TempDir& dir) {
  return dir.write("headroom.toml", "[agent]\ninterval = \"100ms\"\n");
}

TEST(SdNotify, ReadyOnlyAfterTheFirstReportThenWatchdogEveryTickAndStoppingOnSigterm) {
  TempDir dir;
  NotifySocket sock(dir);
  ::setenv("WATCHDOG_USEC", std::to_string(std::chrono::microseconds(kWatchdog).count()).c_str(), 1);
  Process d(daemon_args(dir, config_file(dir)), dir);

  auto ready = sock.wait_for("READY=1");
  ASSERT_TRUE(ready) << d.err();
  // Nothing said READY=1 before it, and node.orca was already there.
  EXPECT_TRUE(ready->node_orca_existed);
  for (const auto& m : sock.log) {
    if (m.at < ready->at) {
      EXPECT_FALSE(NotifySocket::has_line(m.text, "READY=1"));
    }
  }
  EXPECT_NE(ready->text.find("STATUS="), std::string::npos) << ready->text;
  ASSERT_TRUE(orca::read_report_file(dir / "orca/node.orca")) << "READY=1 before a valid node.orca";

  // WATCHDOG=1 on every 100 ms tick: the gaps sit near 100 ms and every one
  // stays far below WATCHDOG_USEC / 2, the most systemd recommends.
  std::vector<Clock::time_point> pings;
  while (pings.size() < 30) {
    auto m = sock.wait_for("WATCHDOG=1", 2s);
    ASSERT_TRUE(m) << "no WATCHDOG=1 after " << pings.size() << " pings";
    pings.push_back(m->at);
  }
  std::vector<double> gaps_ms;
  for (size_t i = 1; i < pings.size(); ++i)
    gaps_ms.push_back(std::chrono::duration<double, std::milli>(pings[i] - pings[i - 1]).count());
  std::sort(gaps_ms.begin(), gaps_ms.end());
  const double median = gaps_ms[gaps_ms.size() / 2];
  EXPECT_GT(median, 70.0);
  EXPECT_LT(median, 150.0);
  const double quarter_watchdog_ms = std::chrono::duration<double, std::milli>(kWatchdog).count() / 4;
  EXPECT_LT(gaps_ms.back(), quarter_watchdog_ms)
      << "a watchdog gap of " << gaps_ms.back() << " ms";

  d.signal(SIGTERM);
  ASSERT_TRUE(sock.wait_for("STOPPING=1")) << d.err();
  EXPECT_EQ(d.wait(10s), 0) << d.err();
}

TEST(SdNotify, AnIntervalLongerThanTheWatchdogStillPingsWithinHalfOfIt) {
  // interval 5 s, WATCHDOG_USEC 1 s: pinging only after ticks would let
  // systemd kill a healthy daemon.
  TempDir dir;
  NotifySocket sock(dir);
  ::setenv("WATCHDOG_USEC", "1000000", 1);
  const auto config = dir.write("headroom.toml", "[agent]\ninterval = \"5s\"\n");
  Process d(daemon_args(dir, config), dir);

  std::vector<Clock::time_point> pings;
  const auto started = Clock::now();
  while (pings.size() < 8) {
    auto m = sock.wait_for("WATCHDOG=1", 2s);
    ASSERT_TRUE(m) << "no WATCHDOG=1 after " << pings.size() << " pings; " << d.err();
    pings.push_back(m->at);
  }
  EXPECT_LT(pings.front() - started, 1s) << "the first ping waits for no tick";
  for (size_t i = 1; i < pings.size(); ++i) {
    const double gap_ms = std::chrono::duration<double, std::milli>(pings[i] - pings[i - 1]).count();
    EXPECT_LT(gap_ms, 500.0) << "ping " << i;
  }
  EXPECT_TRUE(d.running());

  d.signal(SIGTERM);
  ASSERT_TRUE(sock.wait_for("STOPPING=1")) << d.err();
  EXPECT_EQ(d.wait(10s), 0) << d.err();
}

TEST(SdNotify, SighupSendsReloadingThenReadyAlsoWhenTheReloadIsRejected) {
  TempDir dir;
  NotifySocket sock(dir);
  const auto config = config_file(dir);
  Process d(daemon_args(dir, config), dir);
  ASSERT_TRUE(sock.wait_for("READY=1")) << d.err();

  for (const bool broken : {false, true}) {
    if (broken) dir.write("headroom.toml", "[agent]\ninterval = \"soon\"\n");
    d.signal(SIGHUP);
    auto reloading = sock.wait_for("RELOADING=1");
    ASSERT_TRUE(reloading) << (broken ? "broken: " : "valid: ") << d.err();
    auto ready = sock.wait_for("READY=1");
    ASSERT_TRUE(ready) << d.err();
    EXPECT_LT(reloading->at, ready->at);
    EXPECT_TRUE(d.running());
  }
  EXPECT_NE(d.err().find("reload rejected"), std::string::npos) << d.err();

  d.signal(SIGTERM);
  ASSERT_TRUE(sock.wait_for("STOPPING=1"));
  EXPECT_EQ(d.wait(10s), 0) << d.err();
}

TEST(SdNotify, AFailingPublishShowsInStatusOnceAndTheWatchdogKeepsComing) {
  // A publisher that fails is said in STATUS= when it starts and when it
  // ends, not every tick, and is no reason to stop pinging: systemd would
  // restart a daemon that is doing what it can.
  TempDir dir;
  NotifySocket sock(dir);
  ::setenv("WATCHDOG_USEC", std::to_string(std::chrono::microseconds(kWatchdog).count()).c_str(), 1);
  const auto config = dir.write("headroom.toml", "[agent]\ninterval = \"100ms\"\n[[envoy]]\nfile = \"" +
                                                      (dir / "envoy/node.pressure") + "\"\n");
  Process d(daemon_args(dir, config), dir);
  ASSERT_TRUE(sock.wait_for("READY=1")) << d.err();
  ASSERT_TRUE(sock.wait_for("WATCHDOG=1", 2s)) << d.err();

  // The bridge's directory becomes a file: every write of the bridge fails.
  std::filesystem::remove_all(dir / "envoy");
  dir.write("envoy", "not a directory");
  const auto failed_at = Clock::now();
  std::optional<Message> failing;
  while (!failing && Clock::now() - failed_at < 5s) {
    auto m = sock.next(1s);
    if (m && m->text.find("STATUS=") != std::string::npos && m->text.find("failing since") != std::string::npos)
      failing = m;
  }
  ASSERT_TRUE(failing) << d.err();
  EXPECT_NE(failing->text.find("envoy " + (dir / "envoy/node.pressure") + " failing since"), std::string::npos)
      << failing->text;
  EXPECT_EQ(failing->text.find("READY=1"), std::string::npos) << "a status change is not a new READY=1";
  // For 1.5 s of the failure: pings on every tick, STATUS= not again.
  int pings = 0, statuses = 0;
  const auto until = Clock::now() + 1500ms;
  while (Clock::now() < until) {
    auto m = sock.next(200ms);
    if (!m) continue;
    if (NotifySocket::has_line(m->text, "WATCHDOG=1")) ++pings;
    if (m->text.find("STATUS=") != std::string::npos) ++statuses;
  }
  EXPECT_GE(pings, 10) << "the watchdog kept coming while a publisher failed";
  EXPECT_EQ(statuses, 0) << "STATUS= is sent when the state changes, not every tick";
  EXPECT_TRUE(d.running());

  // Repaired: STATUS= says so once.
  std::filesystem::remove(dir / "envoy");
  std::filesystem::create_directory(dir / "envoy");
  std::optional<Message> repaired;
  const auto fixed_at = Clock::now();
  while (!repaired && Clock::now() - fixed_at < 5s) {
    auto m = sock.next(1s);
    if (m && m->text.find("STATUS=") != std::string::npos) repaired = m;
  }
  ASSERT_TRUE(repaired) << d.err();
  EXPECT_EQ(repaired->text.find("failing"), std::string::npos) << repaired->text;
  const std::string log = d.err();
  EXPECT_LT(std::count(log.begin(), log.end(), '\n'), 10) << "no log flood:\n" << log;

  d.signal(SIGTERM);
  ASSERT_TRUE(sock.wait_for("STOPPING=1"));
  EXPECT_EQ(d.wait(10s), 0) << d.err();
}

TEST(SdNotify, NoWatchdogPingsWhenWatchdogPidNamesAnotherProcess) {
  // systemd's rule: WATCHDOG_USEC applies only to the process WATCHDOG_PID names.
  TempDir dir;
  NotifySocket sock(dir);
  ::setenv("WATCHDOG_USEC", std::to_string(std::chrono::microseconds(kWatchdog).count()).c_str(), 1);
  Process d(daemon_args(dir, config_file(dir), "1"), dir);
  ASSERT_TRUE(sock.wait_for("READY=1")) << d.err();
  EXPECT_FALSE(sock.wait_for("WATCHDOG=1", 1s));
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait(10s), 0) << d.err();
}

TEST(SdNotify, SilentAndHealthyWithoutNotifySocket) {
  // Outside systemd (no NOTIFY_SOCKET) the daemon runs and publishes as usual.
  TempDir dir;
  ::unsetenv("NOTIFY_SOCKET");
  Process d({HEADROOMD_PATH, "--config", config_file(dir), "--orca-dir", dir / "orca"}, dir);
  EXPECT_TRUE(testing::eventually([&] { return static_cast<bool>(orca::read_report_file(dir / "orca/node.orca")); }))
      << d.err();
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait(10s), 0) << d.err();
}

}  // namespace
}  // namespace headroom
