// SPDX-License-Identifier: Apache-2.0
// [oob] instance_listen: which of a tick's reports get a listener inside
// their instance's network namespace (publishers/oob_instances.h).
#include "publishers/oob_instances.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace headroom::publishers {
namespace {

constexpr uint32_t kOwn = 4026531840;  // headroomd's own network namespace

ScopeReport report(std::string scope, std::string instance, uint32_t netns, int32_t pid, bool serving = true) {
  ScopeReport r;
  r.scope = std::move(scope);
  r.instance = std::move(instance);
  r.netns = netns;
  r.server_pid = pid;
  r.serving = serving;
  return r;
}

struct PlanCase {
  const char* what;
  ScopeReport report;
  bool served;
};

class InstancesToServe : public ::testing::TestWithParam<PlanCase> {};

TEST_P(InstancesToServe, OnlyServingInstancesInAnotherNamespaceWithAServerProcess) {
  const PlanCase& c = GetParam();
  Tick tick;
  tick.reports = {report("node", "", 0, 0), c.report};
  const auto got = instances_to_serve(tick, kOwn);
  if (!c.served) {
    EXPECT_TRUE(got.empty()) << c.what;
    return;
  }
  ASSERT_EQ(got.size(), 1u) << c.what;
  EXPECT_EQ(got[0], (InstanceToServe{c.report.scope, c.report.instance, c.report.netns, c.report.server_pid}))
      << c.what;
}

const PlanCase kPlanCases[] = {
    {"a pod's instance", report("endpoint.api@pod-1", "pod-1", 4026532300, 812), true},
    {"an endpoint's aggregate", report("endpoint.api", "", 4026532300, 812), false},
    {"an instance that stopped serving", report("endpoint.api@pod-1", "pod-1", 4026532300, 812, false), false},
    {"no server process known", report("endpoint.api@pod-1", "pod-1", 4026532300, 0), false},
    {"no namespace known", report("endpoint.api@pod-1", "pod-1", 0, 812), false},
    {"the host's instance: served by listen", report("endpoint.api@host", "host", kOwn, 812), false},
};
INSTANTIATE_TEST_SUITE_P(Table, InstancesToServe, ::testing::ValuesIn(kPlanCases));

TEST(InstancesToServe, InTheTicksOrderAndNoneOnTheFinalTick) {
  Tick tick;
  tick.reports = {report("node", "", 0, 0), report("endpoint.api", "", 0, 0),
                  report("endpoint.api@pod-2", "pod-2", 4026532302, 902),
                  report("endpoint.api@pod-1", "pod-1", 4026532301, 901)};
  const auto got = instances_to_serve(tick, kOwn);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].instance, "pod-2");
  EXPECT_EQ(got[1].instance, "pod-1");
  tick.meta.stopped = true;
  EXPECT_TRUE(instances_to_serve(tick, kOwn).empty());
}

}  // namespace
}  // namespace headroom::publishers
