// SPDX-License-Identifier: Apache-2.0
// The key table (agent/config/config_keys.h) against the parser: every row is
// read by its setter, the parser knows no key beyond the table, and each
// row's default is the struct's; and the bounds on agent.interval and
// agent.smoothing, edge by edge.
#include "agent/config/config_keys.h"

#include "agent/config/config.h"
#include "config_cases.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace headroom::agent {
namespace {

using namespace headroom::agent::config_cases;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A valid entry of a repeated section, with `key` set to `value` instead; a
// nested section's entry comes inside a valid entry of its parent.
std::string entry_with(std::string_view section, std::string_view key, const std::string& value) {
  std::map<std::string, std::string, std::less<>> keys;
  std::string parent;
  if (section == "endpoint.shed") {
    parent = "[[endpoint]]\nname = \"a\"\nport = 80\ntarget = \"10ms\"\nmax = \"100ms\"\n";
    keys = {{"signal", "\"cpu_utilization\""}, {"shed_start", "0.6"}, {"critical_start", "0.8"}};
  } else if (section == "endpoint")
    keys = {{"name", "\"a\""}, {"port", "80"}, {"target", "\"10ms\""}, {"max", "\"100ms\""}};
  else if (section == "dependency" && key == "address")  // address takes port's place: one of the two
    keys = {{"name", "\"a\""}, {"target", "\"10ms\""}, {"max", "\"100ms\""}};
  else if (section == "dependency")
    keys = {{"name", "\"a\""}, {"port", "6379"}, {"target", "\"10ms\""}, {"max", "\"100ms\""}};
  else
    keys = {{"file", "\"/run/orca/envoy/node.pressure\""}};
  keys[std::string(key)] = value;
  std::string out = parent + "[[" + std::string(section) + "]]\n";
  for (const auto& [k, v] : keys) out += k + " = " + v + "\n";
  return out;
}

TEST(ConfigKeyTable, RowsAreUniqueAndInTheirSections) {
  std::vector<std::string> seen;
  for (const KeyRow& row : config_key_rows()) {
    const std::string dotted = std::string(row.section) + "." + std::string(row.key);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), dotted), 0) << dotted;
    seen.push_back(dotted);
    EXPECT_NE(find_section(row.section), nullptr) << dotted;
    EXPECT_EQ(find_key(row.section, row.key), &row) << dotted;
    EXPECT_FALSE(row.doc.empty()) << dotted;
    EXPECT_NE(row.set, nullptr) << dotted;
    EXPECT_TRUE(row.required.empty() || row.default_value.empty()) << dotted << ": required keys have no default";
  }
}

// Every row is read by the parser: a value of a type no key takes reaches
// the row (a type error under the row's key), not the unknown-key message.
TEST(ConfigKeyTable, EveryRowIsParsed) {
  for (const KeyRow& row : config_key_rows()) {
    const SectionRow& section = *find_section(row.section);
    const std::string text = section.repeated ? entry_with(row.section, row.key, "2024-01-02")
                                              : "[" + std::string(row.section) + "]\n" + std::string(row.key) +
                                                    " = 2024-01-02\n";
    const Error e = must_fail(text);
    // A nested section's key is inside its parent's entry: endpoint[0].shed[0].signal.
    const std::string entry = section.within.empty()
                                  ? std::string(row.section)
                                  : std::string(section.within) + "[0]" + std::string(row.section.substr(section.within.size()));
    const std::string key = entry + (section.repeated ? "[0]." : ".") + std::string(row.key);
    EXPECT_EQ(e.key, key) << e.to_string();
    EXPECT_THAT(e.message, HasSubstr("got date 2024-01-02")) << e.to_string();
    EXPECT_THAT(e.message, ::testing::Not(HasSubstr("unknown"))) << e.to_string();
  }
}

// The parser knows no key beyond the table: the unknown-key message of each
// section lists exactly the table's keys.
TEST(ConfigKeyTable, ParserKnowsNoKeyBeyondTheTable) {
  for (const SectionRow& section : config_sections()) {
    std::string list;
    for (std::string_view k : keys_in(section.name)) list += (list.empty() ? "" : ", ") + std::string(k);
    const std::string text = section.repeated ? entry_with(section.name, "zzzzzzzzzz", "1")
                                              : "[" + std::string(section.name) + "]\nzzzzzzzzzz = 1\n";
    const Error e = must_fail(text);
    EXPECT_THAT(e.message, HasSubstr("are " + list)) << e.to_string();
    EXPECT_TRUE(e.message.ends_with(list)) << e.to_string();
  }
}

// The default column is the struct's default: a file spelling out one key at
// its documented default equals an empty file.
TEST(ConfigKeyTable, DefaultsAreTheStructDefaults) {
  for (const KeyRow& row : config_key_rows()) {
    if (row.default_value.empty()) continue;
    const SectionRow& section = *find_section(row.section);
    if (section.repeated && row.section == "endpoint") {
      // An entry spelling out the key at its default equals one without it.
      const Config with = must_parse(entry_with(row.section, row.key, std::string(row.default_value)));
      const Config without = must_parse(entry_with(row.section, "name", "\"a\""));
      ASSERT_EQ(with.endpoints.size(), 1u) << row.key;
      ASSERT_EQ(without.endpoints.size(), 1u) << row.key;
      EXPECT_EQ(with.endpoints[0], without.endpoints[0]) << row.key;
    } else if (section.repeated && row.section == "dependency") {
      const Config with = must_parse(entry_with(row.section, row.key, std::string(row.default_value)));
      const Config without = must_parse(entry_with(row.section, "name", "\"a\""));
      ASSERT_EQ(with.dependencies.size(), 1u) << row.key;
      ASSERT_EQ(without.dependencies.size(), 1u) << row.key;
      EXPECT_EQ(with.dependencies[0], without.dependencies[0]) << row.key;
    } else if (section.repeated) {
      const Config c = must_parse(entry_with(row.section, row.key, std::string(row.default_value)));
      ASSERT_EQ(c.envoy.size(), 1u) << row.key;
      EnvoyBridgeConfig expected;
      expected.file = "/run/orca/envoy/node.pressure";
      EXPECT_EQ(c.envoy[0], expected) << row.key;
    } else {
      EXPECT_EQ(must_parse("[" + std::string(row.section) + "]\n" + std::string(row.key) + " = " +
                           std::string(row.default_value) + "\n"),
                Config{})
          << row.section << "." << row.key;
    }
  }
}

// The documents that list the keys (docs/configuration.md, the man page,
// examples/headroom.toml, the fuzz dictionary) are generated from the rows:
// config_reference_test.cc and the ctest config_reference.up_to_date.

// ---------------------------------------------------------------------------
// The bounds of agent.interval and agent.smoothing

struct BoundCase {
  const char* name;
  std::string text;
  bool accepted;
  std::vector<const char*> message_parts;  // when rejected; the key is agent.<key>
  const char* key = "";
};

void PrintTo(const BoundCase& c, std::ostream* os) { *os << c.name; }

class ConfigBounds : public ::testing::TestWithParam<BoundCase> {};

TEST_P(ConfigBounds, AcceptOrNameTheKey) {
  const BoundCase& c = GetParam();
  auto r = parse_config(c.text, "test.toml");
  if (c.accepted) {
    EXPECT_TRUE(r.ok()) << r.error().to_string();
    return;
  }
  ASSERT_TRUE(!r.ok()) << c.text;
  const Error& e = r.error();
  EXPECT_EQ(e.key, c.key) << e.to_string();
  EXPECT_GT(e.line, 0) << e.to_string();
  EXPECT_THAT(e.to_string(), ::testing::StartsWith("test.toml:" + std::to_string(e.line) + ":")) << e.to_string();
  for (const char* part : c.message_parts) EXPECT_THAT(e.message, HasSubstr(part)) << e.to_string();
}

const BoundCase kBoundCases[] = {
    {"IntervalAtMinimum", "[agent]\ninterval = \"10ms\"\n", true, {}},
    {"IntervalJustBelowMinimum", "[agent]\ninterval = \"9999999ns\"\n", false,
     {"must be at least \"10ms\", got \"9999999ns\"", "CPU"}, "agent.interval"},
    {"IntervalOneNanosecond", "[agent]\ninterval = \"1ns\"\n", false, {"must be at least \"10ms\""}, "agent.interval"},
    {"IntervalZero", "[agent]\ninterval = \"0ms\"\n", false, {"must be greater than 0", "\"10ms\""}, "agent.interval"},
    {"IntervalAtMaximum", "[agent]\ninterval = \"1h\"\n", true, {}},
    {"IntervalJustAboveMaximum", "[agent]\ninterval = \"3600000000001ns\"\n", false, {"must be at most \"1h\""},
     "agent.interval"},
    {"SmoothingZero", "[agent]\nsmoothing = \"0s\"\n", true, {}},
    {"SmoothingAtMaximum", "[agent]\nsmoothing = \"10m\"\n", true, {}},
    {"SmoothingJustAboveMaximum", "[agent]\nsmoothing = \"600000000001ns\"\n", false,
     {"must be at most \"10m\", got \"600000000001ns\""}, "agent.smoothing"},
    {"SmoothingAnHour", "[agent]\ninterval = \"1s\"\nsmoothing = \"1h\"\n", false, {"must be at most \"10m\""},
     "agent.smoothing"},
    {"WindowAtMaximum", "[agent]\ninterval = \"10ms\"\nsmoothing = \"100s\"\n", true, {}},
    {"WindowJustAboveMaximum", "[agent]\ninterval = \"10ms\"\nsmoothing = \"100000000001ns\"\n", false,
     {"more than 10000 intervals of \"10ms\"", "agent.interval"}, "agent.smoothing"},
    {"WindowSaysWhatFits", "[agent]\ninterval = \"10ms\"\nsmoothing = \"101s\"\n", false,
     {"smoothing at most \"100s\"", "agent.interval at least \"10.1ms\""}, "agent.smoothing"},
    {"WindowSmoothingFirst", "[agent]\nsmoothing = \"5m\"\ninterval = \"20ms\"\n", false,
     {"more than 10000 intervals of \"20ms\""}, "agent.smoothing"},
    {"WindowLongestAtLongerInterval", "[agent]\ninterval = \"60ms\"\nsmoothing = \"10m\"\n", true, {}},
};

INSTANTIATE_TEST_SUITE_P(Table, ConfigBounds, ::testing::ValuesIn(kBoundCases),
                         [](const ::testing::TestParamInfo<BoundCase>& p) { return std::string(p.param.name); });

TEST(ConfigBounds, WindowErrorIsAtTheSmoothingKey) {
  const Error e = must_fail("[agent]\nsmoothing = \"5m\"\ninterval = \"20ms\"\n");
  EXPECT_EQ(e.to_string().substr(0, std::string("test.toml:2:13: agent.smoothing: ").size()),
            "test.toml:2:13: agent.smoothing: ");
}

TEST(ConfigBounds, ConstantsAgreeWithTheTable) {
  EXPECT_EQ(kMinInterval, 10ms);
  EXPECT_EQ(kMaxInterval, 1h);
  EXPECT_EQ(kMaxSmoothing, 10min);
  EXPECT_EQ(kMaxWindowSlots, 10'000u);
  EXPECT_EQ(find_key("agent", "interval")->allowed, "10ms to 1h");
}

}  // namespace
}  // namespace headroom::agent
