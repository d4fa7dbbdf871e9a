// SPDX-License-Identifier: Apache-2.0
// The shedder's function read from headroom.toml (headroom/orca/shedder_config.h):
// a table of accepted files with the thresholds they give, a table of refused
// files with the place, key and words of the error, the entry checker alone,
// and the file reader.
#include "headroom/orca/shedder_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "temp_dir.h"

namespace headroom::orca {
namespace {

using ::testing::HasSubstr;

constexpr const char* kEndpoints = R"([[endpoint]]
name = "other"
port = 9090
target = "10ms"
max = "50ms"

[[endpoint]]
name = "play"
port = 8080
target = "37.9ms"
max = "64.1ms"
)";

using Signals = std::vector<std::pair<std::string, SignalThresholds>>;

struct Accepted {
  const char* name;
  std::string shed;  // appended to kEndpoints
  Signals expected;
};

void PrintTo(const Accepted& c, std::ostream* os) { *os << c.name; }

class ShedderConfigAccepts : public ::testing::TestWithParam<Accepted> {};

TEST_P(ShedderConfigAccepts, GivesTheThresholdsInFileOrder) {
  const Accepted& c = GetParam();
  auto r = shedder_config_from_toml(std::string(kEndpoints) + c.shed, "play", "h.toml");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->signals, c.expected);
  EXPECT_EQ(r->stale, StalePolicy::fail_open);
  EXPECT_TRUE(validate_config(*r).ok());
}

const Accepted kAccepted[] = {
    {"AllFourKeys",
     "[[endpoint.shed]]\nsignal = \"utilization.latency.slo_target\"\nshed_start = 0.28\ncritical_start = 0.64\n"
     "all_shed = 1.0\n",
     {{"utilization.latency.slo_target", {0.28, 0.64, 1.0}}}},
    {"AllShedDefaultsPerSignalCpu", "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.6\ncritical_start = 0.8\n",
     {{"cpu_utilization", {0.6, 0.8, 1.5}}}},
    {"AllShedDefaultsPerSignalBounded",
     "[[endpoint.shed]]\nsignal = \"utilization.concurrency\"\nshed_start = 0.5\ncritical_start = 0.9\n",
     {{"utilization.concurrency", {0.5, 0.9, 1.0}}}},
    {"IntegersAreNumbers", "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0\ncritical_start = 1\nall_shed = 2\n",
     {{"cpu_utilization", {0.0, 1.0, 2.0}}}},
    {"SeveralSignalsInOrder",
     "[[endpoint.shed]]\nsignal = \"utilization.latency.slo_max\"\nshed_start = 0.3\ncritical_start = 0.7\n"
     "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.6\ncritical_start = 0.8\n",
     {{"utilization.latency.slo_max", {0.3, 0.7, 1.0}}, {"cpu_utilization", {0.6, 0.8, 1.5}}}},
};

INSTANTIATE_TEST_SUITE_P(Table, ShedderConfigAccepts, ::testing::ValuesIn(kAccepted),
                         [](const auto& p) { return std::string(p.param.name); });

// Another endpoint's entries are not this one's.
TEST(ShedderConfig, ReadsOnlyTheNamedEndpoint) {
  const std::string text = R"([[endpoint]]
name = "other"
port = 1
target = "1ms"
max = "2ms"
[[endpoint.shed]]
signal = "cpu_utilization"
shed_start = 0.1
critical_start = 0.2
[[endpoint]]
name = "play"
port = 2
target = "1ms"
max = "2ms"
[[endpoint.shed]]
signal = "cpu_utilization"
shed_start = 0.3
critical_start = 0.4
)";
  auto play = shedder_config_from_toml(text, "play", "h.toml");
  ASSERT_TRUE(play.ok()) << play.error().to_string();
  EXPECT_EQ(play->signals, (Signals{{"cpu_utilization", {0.3, 0.4, 1.5}}}));
  auto other = shedder_config_from_toml(text, "other", "h.toml");
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  EXPECT_EQ(other->signals, (Signals{{"cpu_utilization", {0.1, 0.2, 1.5}}}));
}

struct Refused {
  const char* name;
  std::string text;
  int line;           // 0: the error has no line
  std::string key;
  std::vector<std::string> words;
};

void PrintTo(const Refused& c, std::ostream* os) { *os << c.name; }

class ShedderConfigRefuses : public ::testing::TestWithParam<Refused> {};

TEST_P(ShedderConfigRefuses, NamesTheFileTheLineAndTheKey) {
  const Refused& c = GetParam();
  auto r = shedder_config_from_toml(c.text, "play", "h.toml");
  ASSERT_FALSE(r.ok()) << c.text;
  const Error& e = r.error();
  EXPECT_EQ(e.file, "h.toml");
  EXPECT_EQ(e.line, c.line) << e.to_string();
  EXPECT_EQ(e.key, c.key) << e.to_string();
  EXPECT_TRUE(e.to_string().starts_with(c.line > 0 ? "h.toml:" + std::to_string(c.line) + ":" : "h.toml: "))
      << e.to_string();
  for (const std::string& w : c.words) EXPECT_THAT(e.to_string(), HasSubstr(w));
}

// Line numbers: kEndpoints has 11 lines; the shed entries start at line 12.
const Refused kRefused[] = {
    {"SyntaxError", "[[endpoint]]\nname = \"play\nport = 1\n", 2, "", {"TOML syntax error"}},
    {"NoEndpointOfThatName", "[[endpoint]]\nname = \"api\"\n", 0, "",
     {"h.toml: no [[endpoint]] named \"play\"", "\"api\""}},
    {"NoEndpointAtAll", "[agent]\ninterval = \"1s\"\n", 0, "", {"no [[endpoint]] named \"play\"", "declares no"}},
    {"EndpointWithoutShed", kEndpoints, 7, "endpoint[1]",
     {"has no [[endpoint.shed]]", "without --config to use its defaults"}},
    {"ShedNotAnArrayOfTables", std::string(kEndpoints) + "shed = 1\n", 12, "endpoint[1].shed", {"array of tables"}},
    {"ShedEmpty", std::string(kEndpoints) + "shed = []\n", 12, "endpoint[1].shed", {"is empty"}},
    {"MissingSignal", std::string(kEndpoints) + "[[endpoint.shed]]\nshed_start = 0.5\ncritical_start = 0.7\n", 12,
     "endpoint[1].shed[0].signal", {"is required"}},
    {"MissingShedStart", std::string(kEndpoints) + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\ncritical_start = 0.7\n",
     12, "endpoint[1].shed[0].shed_start", {"is required"}},
    {"MissingCriticalStart", std::string(kEndpoints) + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.5\n",
     12, "endpoint[1].shed[0].critical_start", {"is required"}},
    {"UnknownSignal",
     std::string(kEndpoints) + "[[endpoint.shed]]\nsignal = \"cpu\"\nshed_start = 0.5\ncritical_start = 0.7\n", 13,
     "endpoint[1].shed[0].signal", {"unknown signal \"cpu\"", "utilization.<key>"}},
    {"SignalNotAString",
     std::string(kEndpoints) + "[[endpoint.shed]]\nsignal = 3\nshed_start = 0.5\ncritical_start = 0.7\n", 13,
     "endpoint[1].shed[0].signal", {"expected a signal name string"}},
    {"ThresholdNotANumber",
     std::string(kEndpoints) + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = \"0.5\"\ncritical_start = 0.7\n",
     14, "endpoint[1].shed[0].shed_start", {"expected a number"}},
    {"UnknownKey",
     std::string(kEndpoints) +
         "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.5\ncritical_start = 0.7\nfull = 1.0\n",
     16, "endpoint[1].shed[0].full", {"unknown key \"full\"", "signal, shed_start, critical_start, all_shed"}},
    {"CriticalBelowShedStart",
     std::string(kEndpoints) + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.7\ncritical_start = 0.5\n",
     15, "endpoint[1].shed[0].critical_start", {"critical_start (0.5) must be finite and greater than shed_start (0.7)"}},
    {"NegativeShedStart",
     std::string(kEndpoints) + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = -0.1\ncritical_start = 0.5\n",
     14, "endpoint[1].shed[0].shed_start", {"shed_start (-0.1) must be finite and >= 0"}},
    {"AllShedGivenTooLow",
     std::string(kEndpoints) +
         "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.5\ncritical_start = 0.7\nall_shed = 0.7\n",
     16, "endpoint[1].shed[0].all_shed", {"all_shed (0.7) must be finite and greater than critical_start (0.7)"}},
    {"AllShedDefaultTooLow",
     std::string(kEndpoints) +
         "[[endpoint.shed]]\nsignal = \"utilization.latency.slo_target\"\nshed_start = 0.5\ncritical_start = 1.2\n",
     12, "endpoint[1].shed[0].all_shed", {"all_shed was not given: 1 is the default"}},
    {"SignalTwice",
     std::string(kEndpoints) + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.5\ncritical_start = 0.7\n"
                               "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.6\ncritical_start = 0.8\n",
     17, "endpoint[1].shed[1].signal", {"listed twice", "endpoint[1].shed[0] at line 12"}},
    {"InfinityIsNotAThreshold",
     std::string(kEndpoints) + "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\nshed_start = 0.5\ncritical_start = inf\n",
     15, "endpoint[1].shed[0].critical_start", {"must be finite"}},
};

INSTANTIATE_TEST_SUITE_P(Table, ShedderConfigRefuses, ::testing::ValuesIn(kRefused),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(ShedderConfig, AtMostSixteenEntries) {
  std::string text = kEndpoints;
  for (std::size_t i = 0; i <= kMaxShedEntries; ++i)
    text += "[[endpoint.shed]]\nsignal = \"utilization.s" + std::to_string(i) +
            "\"\nshed_start = 0.5\ncritical_start = 0.7\n";
  auto r = shedder_config_from_toml(text, "play", "h.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().key, "endpoint[1].shed[16]");
  EXPECT_THAT(r.error().message, HasSubstr("at most 16"));
}

// The checker headroomd shares: the key names the field, no place.
TEST(ShedEntryCheck, NamesTheFieldAtFault) {
  struct Case {
    ShedEntry entry;
    const char* key;  // "" when accepted
  };
  const Case cases[] = {
      {{"cpu_utilization", 0.6, 0.8, std::nullopt}, ""},
      {{std::nullopt, 0.6, 0.8, 1.0}, "signal"},
      {{"nope", 0.6, 0.8, 1.0}, "signal"},
      {{"cpu_utilization", std::nullopt, 0.8, 1.0}, "shed_start"},
      {{"cpu_utilization", 0.6, std::nullopt, 1.0}, "critical_start"},
      {{"cpu_utilization", 0.9, 0.8, 1.0}, "critical_start"},
      {{"cpu_utilization", 0.6, 0.8, 0.8}, "all_shed"},
      {{"mem_utilization", -1.0, 0.8, 1.0}, "shed_start"},
  };
  for (const Case& c : cases) {
    auto r = check_shed_entry(c.entry);
    if (std::string_view(c.key).empty()) {
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      EXPECT_EQ(r->second, (SignalThresholds{0.6, 0.8, 1.5}));
      continue;
    }
    ASSERT_FALSE(r.ok()) << c.key;
    EXPECT_EQ(r.error().key, c.key) << r.error().message;
    EXPECT_TRUE(r.error().file.empty());
    EXPECT_EQ(r.error().line, 0);
  }
}

TEST(ShedderConfigFile, ReadsTheFileAndNamesItInErrors) {
  const testing::TempDir dir;
  const std::string path = dir.write("headroom.toml", std::string(kEndpoints) +
                                                          "[[endpoint.shed]]\nsignal = \"cpu_utilization\"\n"
                                                          "shed_start = 0.5\ncritical_start = 0.7\n");
  auto r = read_shedder_config_file(path, "play");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->signals, (Signals{{"cpu_utilization", {0.5, 0.7, 1.5}}}));

  auto missing = read_shedder_config_file(dir / "absent.toml", "play");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_EQ(missing.error().file, dir / "absent.toml");

  auto other = read_shedder_config_file(path, "api");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().to_string().rfind(path + ": no [[endpoint]] named \"api\"", 0), 0u)
      << other.error().to_string();
}

}  // namespace
}  // namespace headroom::orca
