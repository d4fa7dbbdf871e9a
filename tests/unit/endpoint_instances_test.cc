// SPDX-License-Identifier: Apache-2.0
// The endpoint instances' table (agent/signals/endpoint_instances.h) over
// synthetic probe snapshots and a fixture /proc and cgroup tree: names, each
// instance's own counts and cgroup CPU, coming and going, the bound; and an
// instance's report (report_builder.h).
#include "agent/signals/endpoint_instances.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "agent/signals/report_builder.h"
#include "headroom/orca/names.h"
#include "tests/support/temp_dir.h"

namespace headroom::agent {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr int64_t kSec = 1'000'000'000;
constexpr uint32_t kNetA = 4026532001, kNetB = 4026532002;

struct Fixture {
  TempDir dir;
  Config config;
  ResourceRoots roots;

  Fixture() {
    pod(100, kNetA, "pod-a", "50000");  // half a CPU
    pod(200, kNetB, "pod-b", "-1");
    config.interval = 1s;
    config.smoothing = 0s;
    config.instance_grace = 2s;
    config.endpoints.push_back({"web", 8080, "", 20ms, 200ms, 0, EndpointProtocol::http1});
    roots.proc_root = dir / "proc";
    roots.sys_root = dir / "sys";
    roots.version = probes::CgroupVersion::v1;
    roots.host_ncpu = 2;
    roots.host_memory_bytes = 1 << 30;
    roots.alpha = 1;
  }
  void pod(int pid, uint32_t netns, const std::string& cg, const std::string& quota) {
    const std::string p = "proc/" + std::to_string(pid);
    dir.mkdir(p + "/ns");
    std::filesystem::create_symlink("net:[" + std::to_string(netns) + "]", dir / (p + "/ns/net"));
    dir.write(p + "/cgroup", "4:memory:/" + cg + "\n2:cpuacct:/" + cg + "\n1:cpu:/" + cg + "\n0::/\n");
    usage(cg, 0);
    dir.write("sys/fs/cgroup/cpu/" + cg + "/cpu.cfs_quota_us", quota + "\n");
    dir.write("sys/fs/cgroup/cpu/" + cg + "/cpu.cfs_period_us", "100000\n");
    dir.write("sys/fs/cgroup/memory/" + cg + "/memory.usage_in_bytes", "268435456\n");
    dir.write("sys/fs/cgroup/memory/" + cg + "/memory.limit_in_bytes", "536870912\n");
  }
  void usage(const std::string& cg, uint64_t ns) {
    dir.write("sys/fs/cgroup/cpuacct/" + cg + "/cpuacct.usage", std::to_string(ns) + "\n");
  }
};

probes::EndpointSnapshot snapshot(int64_t at_ns, std::vector<probes::ListenerState> listeners,
                                  std::vector<std::pair<uint32_t, uint64_t>> completed = {}) {
  probes::EndpointSnapshot s;
  s.at_ns = at_ns;
  s.endpoints.resize(1);
  s.listeners = std::move(listeners);
  for (const auto& [netns, n] : completed) {
    probes::InstanceTotals t;
    t.netns = netns;
    t.totals.stats.completed = n;
    s.instances.push_back(t);
  }
  return s;
}

const EndpointInstance* find(const InstanceTable& t, const std::string& id) {
  for (const auto& i : t.instances())
    if (i.id == id) return &i;
  return nullptr;
}

const auto kNoForget = [](uint32_t, uint32_t) { FAIL() << "nothing is forgotten here"; };

TEST(EndpointInstances, ListenersMakeInstancesNamedByTheirCgroups) {
  Fixture f;
  InstanceTable t(f.config, f.roots);
  t.sample(nullptr, snapshot(0, {{kNetA, 8080, 100, 1}, {kNetB, 8080, 200, 1}}), 0, kNoForget);
  ASSERT_EQ(t.instances().size(), 2u);
  EXPECT_EQ(t.instances()[0].id, "pod-a");
  EXPECT_EQ(t.instances()[0].netns, kNetA);
  EXPECT_EQ(t.instances()[1].id, "pod-b");
  EXPECT_TRUE(t.instances()[0].serving);
  EXPECT_EQ(t.instances()[0].resources.unavailable(), "");
  // A listener on another port is not this endpoint's.
  InstanceTable other(f.config, f.roots);
  other.sample(nullptr, snapshot(0, {{kNetA, 9090, 100, 1}}), 0, kNoForget);
  EXPECT_TRUE(other.instances().empty());
}

// roots.self is the agent's PID in proc_root (the kernel's, not getpid()):
// the namespace of that process is the "host" instance.
TEST(EndpointInstances, TheNamespaceOfRootsSelfIsHost) {
  Fixture f;
  f.roots.self = 300;
  f.pod(300, kNetA, "agent", "-1");
  InstanceTable t(f.config, f.roots);
  t.sample(nullptr, snapshot(0, {{kNetA, 8080, 100, 1}, {kNetB, 8080, 200, 1}}), 0, kNoForget);
  ASSERT_EQ(t.instances().size(), 2u);
  EXPECT_EQ(t.instances()[0].id, "host");
  EXPECT_EQ(t.instances()[0].netns, kNetA);
  EXPECT_EQ(t.instances()[1].id, "pod-b");
}

TEST(EndpointInstances, EachInstanceCountsItsOwnRequestsAndItsOwnCgroupsCpu) {
  Fixture f;
  InstanceTable t(f.config, f.roots);
  const std::vector<probes::ListenerState> both{{kNetA, 8080, 100, 1}, {kNetB, 8080, 200, 1}};
  auto s0 = snapshot(0, both, {{kNetA, 0}, {kNetB, 0}});
  t.sample(nullptr, s0, 0, kNoForget);
  f.usage("pod-a", 250'000'000);  // a quarter of a second over one second: half its quota
  f.usage("pod-b", 500'000'000);  // half a second of the host's two CPUs
  auto s1 = snapshot(kSec, both, {{kNetA, 300}, {kNetB, 30}});
  t.sample(&s0, s1, kSec, kNoForget);
  const auto* a = find(t, "pod-a");
  const auto* b = find(t, "pod-b");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->signals && b->signals);
  EXPECT_DOUBLE_EQ(a->signals->rps, 300.0);
  EXPECT_DOUBLE_EQ(b->signals->rps, 30.0);
  ASSERT_TRUE(a->resources.cpu() && b->resources.cpu());
  EXPECT_NEAR(*a->resources.cpu(), 0.5, 1e-9);
  EXPECT_NEAR(*b->resources.cpu(), 0.25, 1e-9);
  ASSERT_TRUE(a->resources.memory());
  EXPECT_NEAR(*a->resources.memory(), 0.5, 1e-9);
}

TEST(EndpointInstances, OneWhoseListenersCloseIsGoneAndForgottenAfterTheGrace) {
  Fixture f;
  InstanceTable t(f.config, f.roots);
  std::vector<std::pair<uint32_t, uint32_t>> forgotten;
  auto forget = [&](uint32_t e, uint32_t n) { forgotten.emplace_back(e, n); };
  auto s0 = snapshot(0, {{kNetA, 8080, 100, 1}, {kNetB, 8080, 200, 1}});
  t.sample(nullptr, s0, 0, forget);
  auto s1 = snapshot(kSec, {{kNetA, 8080, 100, 1}, {kNetB, 8080, 200, 0}});
  t.sample(&s0, s1, kSec, forget);
  ASSERT_NE(find(t, "pod-b"), nullptr);
  EXPECT_FALSE(find(t, "pod-b")->serving);
  EXPECT_TRUE(find(t, "pod-a")->serving);
  auto s2 = snapshot(2 * kSec, s1.listeners);
  t.sample(&s1, s2, 2 * kSec, forget);
  EXPECT_NE(find(t, "pod-b"), nullptr) << "1 s after: within the 2 s grace";
  EXPECT_TRUE(forgotten.empty());
  auto s3 = snapshot(3 * kSec, s1.listeners);
  t.sample(&s2, s3, 3 * kSec, forget);
  EXPECT_EQ(find(t, "pod-b"), nullptr);
  ASSERT_EQ(forgotten.size(), 1u);
  EXPECT_EQ(forgotten[0], std::make_pair(0u, kNetB));
  // It listens again: an instance again.
  auto s4 = snapshot(4 * kSec, {{kNetA, 8080, 100, 1}, {kNetB, 8080, 200, 1}});
  t.sample(&s3, s4, 4 * kSec, forget);
  ASSERT_NE(find(t, "pod-b"), nullptr);
  EXPECT_TRUE(find(t, "pod-b")->serving);
}

TEST(EndpointInstances, AGoneOneThatListensWithinTheGraceServesAgain) {
  Fixture f;
  InstanceTable t(f.config, f.roots);
  auto s0 = snapshot(0, {{kNetA, 8080, 100, 1}});
  t.sample(nullptr, s0, 0, kNoForget);
  auto s1 = snapshot(kSec, {{kNetA, 8080, 100, 0}});
  t.sample(&s0, s1, kSec, kNoForget);
  EXPECT_FALSE(t.instances().at(0).serving);
  auto s2 = snapshot(2 * kSec, {{kNetA, 8080, 100, 1}});
  t.sample(&s1, s2, 2 * kSec, kNoForget);
  EXPECT_TRUE(t.instances().at(0).serving);
  EXPECT_EQ(t.instances().at(0).gone_ns, 0);
}

TEST(EndpointInstances, PastTheBoundNoMoreInstancesAreMade) {
  Fixture f;
  f.config.endpoint_instances = 1;
  InstanceTable t(f.config, f.roots);
  t.sample(nullptr, snapshot(0, {{kNetA, 8080, 100, 1}, {kNetB, 8080, 200, 1}}), 0, kNoForget);
  EXPECT_EQ(t.instances().size(), 1u);
  EXPECT_EQ(t.refused(), 1u);
}

TEST(EndpointInstances, ThoseCountedPastTheKernelsBoundHaveNoReport) {
  Fixture f;
  InstanceTable t(f.config, f.roots);
  t.sample(nullptr, snapshot(0, {}, {{HR_INSTANCE_OVERFLOW, 5}}), 0, kNoForget);
  EXPECT_TRUE(t.instances().empty());
}

TEST(EndpointInstances, AReusedPidInAnotherNamespaceLeavesTheCgroupUnread) {
  Fixture f;
  InstanceTable t(f.config, f.roots);
  // The listener says pid 200 listens in A's namespace: 200 is in B's.
  t.sample(nullptr, snapshot(0, {{kNetA, 8080, 200, 1}}), 0, kNoForget);
  ASSERT_EQ(t.instances().size(), 1u);
  const auto& why = t.instances()[0].resources.unavailable();
  EXPECT_NE(why.find("reused"), std::string::npos) << why;
  EXPECT_FALSE(t.instances()[0].resources.cpu());
}

TEST(EndpointInstances, ACgroupThatCannotBeReadIsSaidUntilTheServerIsFoundAgain) {
  Fixture f;
  InstanceTable t(f.config, f.roots);
  const std::vector<probes::ListenerState> a{{kNetA, 8080, 100, 1}};
  auto s0 = snapshot(0, a);
  t.sample(nullptr, s0, 0, kNoForget);
  // (A removed cgroup's files fail their reads; the fixture's, still open, are
  // moved away and garbled instead.)
  for (const char* h : {"cpu", "cpuacct", "memory"})
    std::filesystem::rename(f.dir / (std::string("sys/fs/cgroup/") + h + "/pod-a"), f.dir / (std::string("gone-") + h));
  f.dir.write("gone-cpuacct/cpuacct.usage", "removed\n");
  f.dir.write("gone-memory/memory.usage_in_bytes", "removed\n");
  auto s1 = snapshot(kSec, a);
  t.sample(&s0, s1, kSec, kNoForget);
  EXPECT_NE(t.instances()[0].resources.unavailable(), "");
  // The server now sits in another cgroup: followed there.
  f.dir.write("proc/100/cgroup", "4:memory:/pod-b\n2:cpuacct:/pod-b\n1:cpu:/pod-b\n");
  auto s2 = snapshot(2 * kSec, a);
  t.sample(&s1, s2, 2 * kSec, kNoForget);
  EXPECT_EQ(t.instances()[0].resources.unavailable(), "");
  EXPECT_EQ(t.instances()[0].resources.path(), "/pod-b");
}

TEST(EndpointInstances, ACgroupWhoseCpuCannotBeReadKeepsItsMemoryAndSaysWhy) {
  Fixture f;
  // pod-a is in the cpu and memory hierarchies, not in cpuacct's.
  std::filesystem::remove_all(f.dir / "sys/fs/cgroup/cpuacct/pod-a");
  InstanceTable t(f.config, f.roots);
  const std::vector<probes::ListenerState> a{{kNetA, 8080, 100, 1}};
  auto s0 = snapshot(0, a);
  t.sample(nullptr, s0, 0, kNoForget);
  auto s1 = snapshot(kSec, a);
  t.sample(&s0, s1, kSec, kNoForget);
  const InstanceResources& r = t.instances()[0].resources;
  EXPECT_EQ(r.unavailable(), "");
  EXPECT_NE(r.cpu_unavailable().find("not in the cpuacct hierarchy"), std::string::npos) << r.cpu_unavailable();
  EXPECT_FALSE(r.cpu().has_value());
  EXPECT_EQ(r.memory(), std::optional<double>(0.5)) << "its own memory all the same";

  // The cgroup made in the cpuacct hierarchy: its own CPU from the next pair of reads.
  f.usage("pod-a", 0);
  auto s2 = snapshot(2 * kSec, a);
  t.sample(&s1, s2, 2 * kSec, kNoForget);
  EXPECT_EQ(r.cpu_unavailable(), "");
  f.usage("pod-a", 250'000'000);  // a quarter of a second: half of its half CPU
  auto s3 = snapshot(3 * kSec, a);
  t.sample(&s2, s3, 3 * kSec, kNoForget);
  ASSERT_TRUE(r.cpu().has_value());
  EXPECT_DOUBLE_EQ(*r.cpu(), 0.5);
}

TEST(EndpointInstances, AServerMovedToAnotherCgroupIsFollowedThereWithinTheRecheck) {
  Fixture f;
  InstanceTable t(f.config, f.roots);
  const std::vector<probes::ListenerState> a{{kNetA, 8080, 100, 1}};
  auto s0 = snapshot(0, a);
  t.sample(nullptr, s0, 0, kNoForget);
  EXPECT_EQ(t.instances()[0].resources.path(), "/pod-a");
  f.dir.write("proc/100/cgroup", "4:memory:/pod-b\n2:cpuacct:/pod-b\n1:cpu:/pod-b\n");
  auto s1 = snapshot(kSec, a);
  t.sample(&s0, s1, kSec, kNoForget);
  EXPECT_EQ(t.instances()[0].resources.path(), "/pod-a") << "not looked at again before the recheck";
  const int64_t later = InstanceResources::kRecheckNs + kSec;
  auto s2 = snapshot(later, a);
  t.sample(&s1, s2, later, kNoForget);
  EXPECT_EQ(t.instances()[0].resources.path(), "/pod-b");
  EXPECT_EQ(t.instances()[0].resources.unavailable(), "");
}

TEST(InstanceReport, ItsOwnCpuTheFloorItsNamespaceAndWhenItIsGone) {
  const EndpointConfig e{"web", 8080, "", 20ms, 200ms, 0, EndpointProtocol::http1};
  EndpointSignals s;
  s.rps = 10;
  s.share_over_target = 0.0;
  s.share_over_max = 0.0;
  InstanceFigures f;
  f.netns = kNetA;
  f.cpu = 0.3;
  f.memory = 0.5;
  orca::Report r;
  build_instance_report_into(e, &s, f, ReportMeta{1, 1, 100, false}, r);
  EXPECT_DOUBLE_EQ(r.cpu_utilization(), 0.3);
  EXPECT_DOUBLE_EQ(r.application_utilization(), 0.3);
  EXPECT_DOUBLE_EQ(r.mem_utilization(), 0.5);
  EXPECT_EQ(r.named_metrics().at(std::string(orca::kMetricInstanceNetns)), static_cast<double>(kNetA));
  EXPECT_EQ(r.named_metrics().count(std::string(orca::kMetricInstanceGone)), 0u);
  // Idle: never 0 while it serves.
  f.cpu = 0.0;
  build_instance_report_into(e, &s, f, ReportMeta{2, 2, 100, false}, r);
  EXPECT_DOUBLE_EQ(r.application_utilization(), kInstanceUtilizationFloor);
  EXPECT_DOUBLE_EQ(r.cpu_utilization(), kInstanceUtilizationFloor);
  // An SLO share above its CPU decides.
  s.share_over_target = 0.6;
  f.cpu = 0.2;
  build_instance_report_into(e, &s, f, ReportMeta{3, 3, 100, false}, r);
  EXPECT_DOUBLE_EQ(r.application_utilization(), 0.6);
  // Gone: said, stopped, no floor.
  f.serving = false;
  f.cpu = 0.0;
  s.share_over_target = 0.0;
  build_instance_report_into(e, &s, f, ReportMeta{4, 4, 100, false}, r);
  EXPECT_EQ(r.named_metrics().at(std::string(orca::kMetricInstanceGone)), 1.0);
  EXPECT_EQ(r.named_metrics().at(std::string(orca::kStoppedKey)), 1.0);
  EXPECT_DOUBLE_EQ(r.application_utilization(), 0.0);
  // Its cgroup unread: said.
  f.serving = true;
  f.cgroup_unavailable = true;
  f.memory.reset();
  build_instance_report_into(e, &s, f, ReportMeta{5, 5, 100, false}, r);
  EXPECT_EQ(r.named_metrics().at(std::string(orca::kMetricInstanceCgroupUnavailable)), 1.0);
  EXPECT_EQ(r.named_metrics().count(std::string(orca::kMetricInstanceGone)), 0u);
  EXPECT_DOUBLE_EQ(r.mem_utilization(), 0.0);
}

}  // namespace
}  // namespace headroom::agent
