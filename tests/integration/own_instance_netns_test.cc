// SPDX-License-Identifier: Apache-2.0
// A reader in a real network namespace of its own (ip netns add) finds its
// own instance among report files that name namespaces by inode: the C
// example under `ip netns exec` (the C ABI), and a forked child that enters
// the namespace with setns() (the C++ library, a follower that sees the file
// appear). Root; skips loudly without it or without ip(8). The namespace is
// deleted whatever happens.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "headroom/orca/own_instance.h"
#include "headroom/orca/report_writer.h"
#include "temp_dir.h"

namespace headroom::orca {
namespace {

using headroom::testing::TempDir;

struct Output {
  int status = -1;
  std::string text;
};

Output run(const std::string& command) {
  Output out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.text.append(buf, n);
  const int st = ::pclose(p);
  out.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

uint64_t inode_of(const std::string& path) {
  struct stat st{};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return static_cast<uint64_t>(st.st_ino);
}

Report instance_report(uint64_t netns, double cpu) {
  Report r;
  r.set_cpu_utilization(cpu);
  r.set_application_utilization(cpu);
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(kTimestampMsKey)] = static_cast<double>(unix_now_ms());
  nm[std::string(kSeqKey)] = 1;
  nm[std::string(kIntervalMsKey)] = 60'000;  // fresh however slow the machine
  nm[std::string(kMetricInstanceNetns)] = static_cast<double>(netns);
  return r;
}

// A network namespace made with ip netns add, deleted at scope exit.
class OwnInstanceInNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "SKIPPED: needs root, to make a network namespace (ip netns add)";
    if (run("ip -V").status != 0) GTEST_SKIP() << "SKIPPED: no ip(8) (iproute2)";
    name_ = "hr-own-" + std::to_string(::getpid());
    (void)run("ip netns delete " + name_);  // a leftover of a killed run
    const Output added = run("ip netns add " + name_);
    ASSERT_EQ(added.status, 0) << "ip netns add " << name_ << ": " << added.text;
    created_ = true;
    netns_ = inode_of("/run/netns/" + name_);
    host_ = inode_of("/proc/self/ns/net");
    ASSERT_NE(netns_, host_);
  }
  void TearDown() override {
    if (!created_) return;
    const Output deleted = run("ip netns delete " + name_);
    EXPECT_EQ(deleted.status, 0) << "ip netns delete " << name_ << ": " << deleted.text;
  }
  void publish(const std::string& scope, const Report& r) {
    auto w = ReportFileWriter::open(tmp_.path());
    ASSERT_TRUE(w) << w.error().message;
    ASSERT_TRUE(w->write(report_file_name(scope), r));
  }

  TempDir tmp_;
  std::string name_;
  bool created_ = false;
  uint64_t netns_ = 0, host_ = 0;
};

TEST_F(OwnInstanceInNetns, TheCExampleUnderIpNetnsExecReadsItsOwnInstance) {
  publish("endpoint.api@host", instance_report(host_, 0.25));
  publish("endpoint.api@pod-in", instance_report(netns_, 0.75));
  publish("endpoint.api@pod-other", instance_report(netns_ + 1000, 0.5));

  const Output inside = run("ip netns exec " + name_ + " " + C_EXAMPLE_PATH + " -e api " + tmp_.path());
  EXPECT_EQ(inside.status, 0) << inside.text;
  EXPECT_NE(inside.text.find("\nendpoint.api@pod-in "), std::string::npos) << inside.text;
  EXPECT_NE(inside.text.find("cpu=0.750"), std::string::npos) << inside.text;
  EXPECT_EQ(inside.text.find("endpoint.api@host"), std::string::npos) << inside.text;

  const Output outside = run(std::string(C_EXAMPLE_PATH) + " -e api " + tmp_.path());
  EXPECT_EQ(outside.status, 0) << outside.text;
  EXPECT_NE(outside.text.find("\nendpoint.api@host "), std::string::npos) << outside.text;

  // Another namespace with no instance file: the line says which it is.
  std::filesystem::remove(tmp_ / "endpoint.api@pod-in.orca");
  const Output none = run("ip netns exec " + name_ + " " + C_EXAMPLE_PATH + " -e api " + tmp_.path());
  EXPECT_EQ(none.status, 1) << none.text;
  EXPECT_NE(none.text.find("net:[" + std::to_string(netns_) + "]"), std::string::npos) << none.text;
  EXPECT_NE(none.text.find("endpoint.api@host.orca (net:[" + std::to_string(host_) + "])"), std::string::npos)
      << none.text;
}

TEST_F(OwnInstanceInNetns, AChildThatEntersTheNamespaceFollowsItsInstanceWhenItAppears) {
  publish("endpoint.api@host", instance_report(host_, 0.25));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: only async-signal-safe calls until setns, then the library.
    const int ns = ::open(("/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(10);
    auto reader = OwnInstanceReader::open(tmp_.path(), "api");
    if (!reader) ::_exit(11);
    if (reader->netns() != netns_) ::_exit(12);
    if (!reader->scope().empty()) ::_exit(13);  // the host's instance is not ours
    (void)!::write(ready[1], "r", 1);
    for (int i = 0; i < 100 && reader->scope().empty(); ++i) (void)reader->wait(50);
    if (reader->scope() != "endpoint.api@pod-in") ::_exit(14);
    auto st = reader->get();
    if (!st || !st->report || st->report->cpu_utilization() != 0.75) ::_exit(15);
    auto once = own_instance_scope(tmp_.path(), "api");
    if (!once || *once != "endpoint.api@pod-in") ::_exit(16);
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the child did not get ready";
  publish("endpoint.api@pod-in", instance_report(netns_, 0.75));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  // 10: setns; 11: open; 12: another namespace; 13: took the host's; 14: did
  // not follow the new file; 15: its report; 16: the one-shot lookup.
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ::close(ready[0]);
}

}  // namespace
}  // namespace headroom::orca
