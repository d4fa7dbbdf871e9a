// SPDX-License-Identifier: Apache-2.0
// [oob] instance_listen against the real kernel: network namespaces made
// here (ip netns), a process sleeping in each standing for an instance's
// server, the [oob] publisher fed ticks with those instances' reports, and
// a gRPC client that shares nothing with headroom (tests/oob/orca_oob.py,
// Python's gRPC) run inside each namespace; and the failures: a vanished
// namespace, a reused pid, no CAP_SYS_ADMIN. Needs root (ip netns, setns);
// skips loudly without it. The namespaces are removed at the end, also on
// failure.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "headroom/orca/names.h"
#include "publishers/oob_instances.h"
#include "publishers/oob_publisher.h"

namespace headroom::publishers {
namespace {

using namespace std::chrono_literals;

constexpr int kPort = 9447;

int run(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

uint32_t inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint32_t>(st.st_ino) : 0;
}

// A network namespace of the test's, with a process sleeping in it.
struct Namespace {
  std::string name;
  uint32_t inode = 0;
  pid_t pid = -1;

  explicit Namespace(std::string n) : name(std::move(n)) {
    run("ip netns del " + name + " 2>/dev/null");  // a previous run's
    if (run("ip netns add " + name) != 0 || run("ip -n " + name + " link set lo up") != 0) return;
    inode = inode_of("/run/netns/" + name);
    pid = ::fork();
    if (pid == 0) {
      ::execlp("ip", "ip", "netns", "exec", name.c_str(), "sleep", "600", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // `ip netns exec` enters the namespace, then becomes sleep (same pid).
    for (int i = 0; i < 200 && inode_of("/proc/" + std::to_string(pid) + "/ns/net") != inode; ++i)
      std::this_thread::sleep_for(10ms);
  }
  bool ready() const { return inode != 0 && pid > 0 && inode_of("/proc/" + std::to_string(pid) + "/ns/net") == inode; }
  void kill_process() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  void remove() {
    kill_process();
    if (!name.empty()) run("ip netns del " + name + " 2>/dev/null");
  }
  ~Namespace() { remove(); }
};

// What a client inside `ns` gets from 127.0.0.1:kPort: the first report's
// cpu_utilization, or -1 when the call failed.
double cpu_seen_inside(const Namespace& ns) {
  const std::string cmd = "ip netns exec " + ns.name + " /usr/bin/python3 " + std::string(HEADROOM_SOURCE_DIR) +
                          "/tests/oob/orca_oob.py 127.0.0.1:" + std::to_string(kPort) +
                          " --count 1 --timeout 3 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  if (::pclose(p) != 0) return -1;
  const auto at = out.find("\"cpu_utilization\": ");
  if (at == std::string::npos) return -1;
  return std::stod(out.substr(at + 19));
}

// CAP_SYS_ADMIN in the calling thread's effective set (capabilities are per
// thread; a thread it starts inherits them). Kept in the permitted set, so
// it can be raised again.
bool set_sys_admin(bool on) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  const uint32_t bit = 1u << (CAP_SYS_ADMIN % 32);
  if (on) data[CAP_SYS_ADMIN / 32].effective |= bit;
  else data[CAP_SYS_ADMIN / 32].effective &= ~bit;
  return ::syscall(SYS_capset, &header, data) == 0;
}

ScopeReport instance_report(const std::string& id, const Namespace& ns, double cpu) {
  ScopeReport r;
  r.scope = orca::instance_scope("api", id);
  r.instance = id;
  r.netns = ns.inode;
  r.server_pid = ns.pid;
  r.report.set_cpu_utilization(cpu);
  (*r.report.mutable_named_metrics())[std::string(orca::kMetricInstanceNetns)] = ns.inode;
  return r;
}

class OobNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "*** SKIPPED: needs root (ip netns add, setns into the namespaces) ***";
    if (run("command -v ip >/dev/null") != 0) GTEST_SKIP() << "*** SKIPPED: needs iproute2's ip ***";
    if (run("/usr/bin/python3 -c 'import grpc' 2>/dev/null") != 0)
      GTEST_SKIP() << "*** SKIPPED: needs python3-grpcio (the client run inside the namespaces) ***";
    const std::string tag = std::to_string(::getpid());
    a_ = std::make_unique<Namespace>("hr-oob-a-" + tag);
    b_ = std::make_unique<Namespace>("hr-oob-b-" + tag);
    ASSERT_TRUE(a_->ready() && b_->ready()) << "could not make the test's network namespaces";
    log_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
    spdlog::default_logger()->sinks().push_back(log_);
  }
  void TearDown() override {
    if (log_) std::erase(spdlog::default_logger()->sinks(), log_);
    publishers_.clear();
    a_.reset();
    b_.reset();
  }

  OobPublisher& build() {
    OobOptions options;
    options.oob.instance_listen = "0.0.0.0:" + std::to_string(kPort);
    options.interval = 100ms;
    auto built = OobPublisher::build(options);
    EXPECT_TRUE(built) << built.error().message;
    publishers_ = std::move(built.value());
    return dynamic_cast<OobPublisher&>(*publishers_.at(0));
  }

  void publish(OobPublisher& p, std::vector<ScopeReport> instances) {
    Tick tick;
    clock_ms_ += 100;
    tick.meta = {clock_ms_, seq_, 100, false};
    ++seq_;
    tick.reports.resize(1);
    tick.reports[0].scope = std::string(orca::kNodeScope);
    tick.reports[0].report.set_cpu_utilization(0.5);
    for (auto& r : instances) tick.reports.push_back(std::move(r));
    for (auto& r : tick.reports) r.report.SerializeToString(&r.bytes);
    ASSERT_TRUE(p.publish(tick));
  }

  std::string logged() const {
    std::string all;
    for (const auto& line : log_->last_formatted()) all += line;
    return all;
  }

  std::unique_ptr<Namespace> a_, b_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> log_;
  Publishers publishers_;
  uint64_t seq_ = 1;
  int64_t clock_ms_ = 1'700'000'000'000;
};

TEST_F(OobNetnsTest, EachInstanceIsServedInsideItsOwnNamespaceAndClosedWhenItGoes) {
  OobPublisher& p = build();
  publish(p, {instance_report("pod-a", *a_, 0.25), instance_report("pod-b", *b_, 0.75)});
  ASSERT_NE(p.instances(), nullptr);
  EXPECT_EQ(p.instances()->open().size(), 2u) << logged();
  EXPECT_EQ(cpu_seen_inside(*a_), 0.25);
  EXPECT_EQ(cpu_seen_inside(*b_), 0.75);

  // A new tick's values reach the streams opened after it.
  publish(p, {instance_report("pod-a", *a_, 0.3), instance_report("pod-b", *b_, 0.8)});
  EXPECT_EQ(cpu_seen_inside(*a_), 0.3);
  EXPECT_EQ(cpu_seen_inside(*b_), 0.8);

  // pod-b stops serving: its listener closes; pod-a's stays.
  auto stopped = instance_report("pod-b", *b_, 0.8);
  stopped.serving = false;
  publish(p, {instance_report("pod-a", *a_, 0.3), std::move(stopped)});
  EXPECT_EQ(p.instances()->open().count(orca::instance_scope("api", "pod-b")), 0u);
  EXPECT_EQ(cpu_seen_inside(*b_), -1) << "pod-b's listener should be closed";
  EXPECT_EQ(cpu_seen_inside(*a_), 0.3);

  // pod-a leaves the tick: closed too.
  publish(p, {});
  EXPECT_TRUE(p.instances()->open().empty());
  EXPECT_EQ(cpu_seen_inside(*a_), -1) << "pod-a's listener should be closed";
}

TEST_F(OobNetnsTest, AVanishedNamespaceOrAReusedPidIsLoggedOnceAndTheOthersKeepServing) {
  OobPublisher& p = build();
  Namespace c("hr-oob-c-" + std::to_string(::getpid()));
  ASSERT_TRUE(c.ready());
  auto vanished = instance_report("pod-c", c, 0.9);
  c.remove();  // its server exited and the namespace was deleted
  // pid of pod-a's server, inode of pod-b's: as if the pid had been reused.
  auto reused = instance_report("pod-d", *a_, 0.1);
  reused.netns = b_->inode;
  for (int i = 0; i < 3; ++i)
    publish(p, {instance_report("pod-a", *a_, 0.25), vanished, reused, instance_report("pod-b", *b_, 0.75)});
  const auto open = p.instances()->open();
  EXPECT_EQ(open.size(), 2u);
  EXPECT_TRUE(open.contains(orca::instance_scope("api", "pod-a")));
  EXPECT_TRUE(open.contains(orca::instance_scope("api", "pod-b")));
  EXPECT_EQ(cpu_seen_inside(*a_), 0.25);
  EXPECT_EQ(cpu_seen_inside(*b_), 0.75);
  const std::string log = logged();
  const auto count = [&](const std::string& s) {
    std::size_t n = 0;
    for (auto at = log.find(s); at != std::string::npos; at = log.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("for instance pod-c"), 1u) << log;
  EXPECT_NE(log.find("server pid " + std::to_string(vanished.server_pid)), std::string::npos) << log;
  EXPECT_EQ(count("for instance pod-d"), 1u) << log;
  EXPECT_NE(log.find("the pid was reused"), std::string::npos) << log;
}

TEST_F(OobNetnsTest, WithoutCapSysAdminItSaysWhatIsMissingOnceAndOpensWhenRetried) {
  OobPublisher& p = build();
  ASSERT_TRUE(set_sys_admin(false));
  for (int i = 0; i < 3; ++i) publish(p, {instance_report("pod-a", *a_, 0.25)});
  ASSERT_TRUE(set_sys_admin(true));
  EXPECT_TRUE(p.instances()->open().empty());
  std::string log = logged();
  EXPECT_NE(log.find("setns into /proc/" + std::to_string(a_->pid) + "/ns/net: Operation not permitted"),
            std::string::npos) << log;
  EXPECT_NE(log.find("needs CAP_SYS_ADMIN"), std::string::npos) << log;
  EXPECT_EQ(log.find("for instance pod-a"), log.rfind("for instance pod-a")) << "logged more than once:\n" << log;
  // Not tried again before the retry interval; then opened, and said so.
  publish(p, {instance_report("pod-a", *a_, 0.25)});
  EXPECT_TRUE(p.instances()->open().empty());
  clock_ms_ += OobInstanceListeners::kRetryMs;
  publish(p, {instance_report("pod-a", *a_, 0.25)});
  EXPECT_EQ(p.instances()->open().size(), 1u);
  EXPECT_EQ(cpu_seen_inside(*a_), 0.25);
  log = logged();
  EXPECT_NE(log.find("listening on 0.0.0.0:9447 inside instance pod-a's network namespace"), std::string::npos) << log;
}

}  // namespace
}  // namespace headroom::publishers
