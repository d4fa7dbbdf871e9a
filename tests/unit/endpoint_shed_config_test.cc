// SPDX-License-Identifier: Apache-2.0
// [[endpoint.shed]] in headroom.toml as headroomd reads it (--check-config and
// a reload run the same parse_config): accepted files give each endpoint its
// signals and thresholds in file order; refused files name the file, the
// line, the column and the key. The checks are orca::check_shed_entry's, the
// shedder's own (shedder_config_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/signals/endpoint_scopes.h"
#include "config_cases.h"

namespace headroom::agent {
namespace {

using namespace headroom::agent::config_cases;
using Signals = std::vector<std::pair<std::string, orca::SignalThresholds>>;

// Lines 1-5; the entries that follow start at line 6.
constexpr const char* kPlay = "[[endpoint]]\nname = \"play\"\nport = 8080\ntarget = \"37.9ms\"\nmax = \"64.1ms\"\n";

struct Accepted {
  const char* name;
  std::string text;
  std::vector<Signals> expected;  // per endpoint
};

void PrintTo(const Accepted& c, std::ostream* os) { *os << c.name; }

class EndpointShedAccepted : public ::testing::TestWithParam<Accepted> {};

TEST_P(EndpointShedAccepted, StoresTheSignalsPerEndpoint) {
  const Accepted& c = GetParam();
  const Config config = must_parse(c.text);
  ASSERT_EQ(config.endpoints.size(), c.expected.size());
  for (std::size_t i = 0; i < c.expected.size(); ++i) EXPECT_EQ(config.endpoints[i].shed, c.expected[i]) << i;
}

const Accepted kAccepted[] = {
    {"None", kPlay, {{}}},
    {"TheIssuesExample",
     std::string(kPlay) + "[[endpoint.shed]]\nsignal = \"utilization.latency.slo_target\"\nshed_start = 0.28\n"
                          "critical_start = 0.64\nall_shed = 1.0\n",
     {{{"utilization.latency.slo_target", {0.28, 0.64, 1.0}}}}},
    {"AllShedIsTheSignalsDefault",
     std::string(kPlay) + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.6\ncritical_start = 0.8\n"
                          "[[endpoint.shed]]\nsignal = \"utilization.latency.slo_max\"\nshed_start = 0\n"
                          "critical_start = 0.9\n",
     {{{"cpu_utilization", {0.6, 0.8, 1.5}}, {"utilization.latency.slo_max", {0.0, 0.9, 1.0}}}}},
    {"EachEndpointItsOwn",
     std::string(kPlay) + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.6\ncritical_start = 0.8\n" +
         "[[endpoint]]\nname = \"api\"\nport = 9090\ntarget = \"1ms\"\nmax = \"2ms\"\n"
         "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.5\ncritical_start = 0.7\n",
     {{{"cpu_utilization", {0.6, 0.8, 1.5}}}, {{"cpu_utilization", {0.5, 0.7, 1.5}}}}},
};

INSTANTIATE_TEST_SUITE_P(Table, EndpointShedAccepted, ::testing::ValuesIn(kAccepted),
                         [](const auto& p) { return std::string(p.param.name); });

class EndpointShedRefused : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(EndpointShedRefused, NamesTheKeyAndThePlace) { expect_error_case(GetParam()); }

const std::string kEntry = std::string(kPlay) + "[[endpoint.shed]]\n";

const ErrorCase kRefused[] = {
    {"UnknownSignal", kEntry + "signal = \"cpu\"\nshed_start = 0.5\ncritical_start = 0.7\n",
     "endpoint[0].shed[0].signal", 7, 10, {"unknown signal \"cpu\"", "utilization.<key>"}},
    {"CriticalNotAboveShedStart", kEntry + "signal = \"cpu_utilization\"\nshed_start = 0.7\ncritical_start = 0.7\n",
     "endpoint[0].shed[0].critical_start", 9, 18, {"critical_start (0.7) must be finite and greater than shed_start"}},
    {"NegativeShedStart", kEntry + "signal = \"cpu_utilization\"\nshed_start = -1\ncritical_start = 0.7\n",
     "endpoint[0].shed[0].shed_start", 8, 14, {"shed_start (-1) must be finite and >= 0"}},
    {"AllShedBelowTheDefault", kEntry + "signal = \"mem_utilization\"\nshed_start = 0.5\ncritical_start = 1.2\n",
     "endpoint[0].shed[0].all_shed", 6, 1, {"all_shed was not given: 1 is the default for mem_utilization"}},
    {"AllShedGiven",
     kEntry + "signal = \"mem_utilization\"\nshed_start = 0.5\ncritical_start = 0.9\nall_shed = 0.9\n",
     "endpoint[0].shed[0].all_shed", 10, 12, {"all_shed (0.9) must be finite and greater than critical_start (0.9)"}},
    {"MissingCriticalStart", kEntry + "signal = \"cpu_utilization\"\nshed_start = 0.5\n",
     "endpoint[0].shed[0].critical_start", 6, 1, {"is required", "critical_start = 0.8"}},
    {"ThresholdAsString", kEntry + "signal = \"cpu_utilization\"\nshed_start = \"0.5\"\ncritical_start = 0.7\n",
     "endpoint[0].shed[0].shed_start", 8, 14, {"expected a number"}},
    {"UnknownKey", kEntry + "signal = \"cpu_utilization\"\nshed_start = 0.5\ncritical_start = 0.7\nfull = 1\n",
     "endpoint[0].shed[0].full", 10, 1,
     {"unknown key \"full\" in [[endpoint.shed]]", "signal, shed_start, critical_start, all_shed"}},
    {"SignalTwice",
     kEntry + "signal = \"cpu_utilization\"\nshed_start = 0.5\ncritical_start = 0.7\n"
              "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.6\ncritical_start = 0.8\n",
     "endpoint[0].shed[1].signal", 11, 10, {"listed twice", "endpoint[0].shed[0] at line 6"}},
    {"ShedAsPlainTable", std::string(kPlay) + "[endpoint.shed]\nsignal = \"cpu_utilization\"\n",
     "endpoint[0].shed", 6, 1, {"an array of tables", "write [[endpoint.shed]] with two brackets"}},
    {"NestedSectionIsNotTopLevel", "[[\"endpoint.shed\"]]\nsignal = \"cpu_utilization\"\n", "\"endpoint.shed\"", 1, 3,
     {"unknown"}},
};

INSTANTIATE_TEST_SUITE_P(Table, EndpointShedRefused, ::testing::ValuesIn(kRefused),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(EndpointShed, AtMostSixteenPerEndpoint) {
  std::string text = kPlay;
  for (int i = 0; i <= 16; ++i)
    text += "[[endpoint.shed]]\nsignal = \"utilization.s" + std::to_string(i) + "\"\nshed_start = 0.5\ncritical_start = 0.7\n";
  const Error e = must_fail(text);
  EXPECT_EQ(e.key, "endpoint[0].shed");
  EXPECT_THAT(e.message, ::testing::HasSubstr("at most 16 [[endpoint.shed]] entries per endpoint"));
}

// The --endpoint flag has no nested entries: "shed" is not one of its keys.
TEST(EndpointShed, NotAFlagKey) {
  auto r = parse_endpoint_flag("name=a,port=1,target=1ms,max=2ms,shed=x");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, ::testing::HasSubstr("unknown key \"shed\""));
}

// A reload that changes [[endpoint.shed]] alone keeps the endpoint probe and
// its windows (headroomd does not use the entries); any sampled field does not.
TEST(EndpointShed, AChangeOfShedAloneKeepsTheRunningProbe) {
  const Config running =
      must_parse(std::string(kPlay) + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.6\ncritical_start = 0.8\n");
  Config next = must_parse(std::string(kPlay) +
                           "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.5\ncritical_start = 0.7\n");
  ASSERT_NE(running, next);
  EXPECT_TRUE(EndpointScopes::same(running, next));
  next.endpoints[0].max = running.endpoints[0].max * 2;
  EXPECT_FALSE(EndpointScopes::same(running, next));
}

}  // namespace
}  // namespace headroom::agent
