// SPDX-License-Identifier: Apache-2.0
// Endpoint configuration: [[endpoint]] tables, --endpoint flags, the checks of
// the whole list (validate_endpoints), agent.ebpf and node.include_endpoints.
#include "agent/config/config.h"
#include "config_cases.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace headroom::agent {
namespace {

using namespace headroom::agent::config_cases;

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

EndpointConfig flag_ok(std::string_view text) {
  auto r = parse_endpoint_flag(text);
  if (!r) {
    ADD_FAILURE() << "unexpected error: " << r.error().to_string() << "\nfor: " << text;
    return EndpointConfig{};
  }
  return r.value();
}

std::string flag_error(std::string_view text) {
  auto r = parse_endpoint_flag(text);
  if (r) {
    ADD_FAILURE() << "parsed without error: " << text;
    return {};
  }
  return r.error().to_string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// An [[endpoint]] table with the required keys, plus `extra` lines.
std::string table(const std::string& name, int port, const std::string& extra = "") {
  return "[[endpoint]]\nname = \"" + name + "\"\nport = " + std::to_string(port) +
         "\ntarget = \"10ms\"\nmax = \"100ms\"\n" + extra;
}

EndpointConfig ep(std::string name, uint16_t port, std::string path = "") {
  EndpointConfig e;
  e.name = std::move(name);
  e.port = port;
  e.path = std::move(path);
  e.target = 10ms;
  e.max = 100ms;
  return e;
}

// ---------------------------------------------------------------------------
// Values

TEST(EndpointConfigDefaults, NoEndpointsEbpfAutoNotIncluded) {
  const Config c;
  EXPECT_TRUE(c.endpoints.empty());
  EXPECT_EQ(c.ebpf, EbpfMode::automatic);
  EXPECT_FALSE(c.include_endpoints);
  EXPECT_EQ(must_parse("endpoint = []\n[agent]\nebpf = \"auto\"\n[node]\ninclude_endpoints = false\n"), Config{});
}

TEST(EndpointConfigValues, AgentEbpfAndNodeIncludeEndpoints) {
  EXPECT_EQ(must_parse("[agent]\nebpf = \"off\"\n").ebpf, EbpfMode::off);
  EXPECT_EQ(must_parse("[agent]\nebpf = \"auto\"\n").ebpf, EbpfMode::automatic);
  EXPECT_TRUE(must_parse("[node]\ninclude_endpoints = true\n").include_endpoints);
  EXPECT_FALSE(must_parse("[node]\ninclude_endpoints = false\n").include_endpoints);
  // Allowed without endpoints in the file: --endpoint may add them.
  EXPECT_TRUE(must_parse("node.include_endpoints = true\n").endpoints.empty());
  // SIGHUP compares whole Configs.
  EXPECT_NE(must_parse("agent.ebpf = \"off\"\n"), Config{});
  EXPECT_NE(must_parse("node.include_endpoints = true\n"), Config{});
}

TEST(EndpointConfigValues, EveryKeySet) {
  const Config c = must_parse(R"(
[[endpoint]]
name = "api"
port = 8080
path = "/play"
target = "10ms"
max = "500ms"
max_concurrency = 64

[[endpoint]]
name = "grpc.v2-x_Y"
port = 65535
target = "1.5ms"
max = "1.5ms"
)");
  ASSERT_EQ(c.endpoints.size(), 2u);
  EXPECT_EQ(c.endpoints[0], (EndpointConfig{"api", 8080, "/play", 10ms, 500ms, 64}));
  // Optional keys left out: no path, no concurrency limit; max may equal target.
  EXPECT_EQ(c.endpoints[1], (EndpointConfig{"grpc.v2-x_Y", 65535, "", 1500us, 1500us, 0}));
}

TEST(EndpointConfigValues, InlineTablesAndBounds) {
  const Config c = must_parse(
      "endpoint = [{ name = \"a\", port = 1, target = \"1ns\", max = \"10m\", max_concurrency = 1000000 },\n"
      "            { name = \"b\", port = 1, path = \"/\", target = \"1s\", max = \"2s\", max_concurrency = 1 }]\n");
  ASSERT_EQ(c.endpoints.size(), 2u);
  EXPECT_EQ(c.endpoints[0], (EndpointConfig{"a", 1, "", 1ns, 10min, 1000000}));
  EXPECT_EQ(c.endpoints[1], (EndpointConfig{"b", 1, "/", 1s, 2s, 1}));
}

TEST(EndpointConfigValues, LongestNameAndPathAreAccepted) {
  const std::string name(kMaxEndpointNameBytes, 'n');
  const std::string path = "/" + std::string(kMaxEndpointPathBytes - 1, 'p');
  const Config c = must_parse(table(name, 80, "path = \"" + path + "\"\n"));
  ASSERT_EQ(c.endpoints.size(), 1u);
  EXPECT_EQ(c.endpoints[0].name, name);
  EXPECT_EQ(c.endpoints[0].path, path);
  // Printable ASCII other than spaces is fine in a path.
  EXPECT_EQ(must_parse(table("q", 80, "path = \"/a?b=%20&c~!*'()\"\n")).endpoints.at(0).path, "/a?b=%20&c~!*'()");
}

TEST(EndpointConfigValues, SamePortWithDifferentPathsAndOneWithoutPath) {
  const Config c = must_parse(table("root", 8080) + table("play", 8080, "path = \"/play\"\n") +
                              table("playlist", 8080, "path = \"/playlist\"\n") + table("other", 9090) +
                              table("other-play", 9090, "path = \"/play\"\n"));
  ASSERT_EQ(c.endpoints.size(), 5u);
  EXPECT_EQ(c.endpoints[2].path, "/playlist");
  EXPECT_EQ(c.endpoints[4].port, 9090);
}

TEST(EndpointConfigValues, ReloadSeesAChangedEndpoint) {
  EXPECT_NE(must_parse(table("a", 80)), must_parse(table("a", 81)));
  EXPECT_NE(must_parse(table("a", 80)), must_parse(table("a", 80, "max_concurrency = 2\n")));
}

// ---------------------------------------------------------------------------
// Errors in the file: key, place and message

class EndpointConfigErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(EndpointConfigErrors, ReportsKeyPlaceAndMessage) {
  const ErrorCase& c = GetParam();
  expect_error_case(c);
  const Error e = must_fail(c.text);
  EXPECT_THAT(e.to_string(), HasSubstr("test.toml:" + std::to_string(c.line) + ":" + std::to_string(c.column) + ": " +
                                       c.key + ": "));
}

// Lines 1-5 of table(): header, name, port, target, max; extra lines from 6.
const ErrorCase kErrorCases[] = {
    // agent.ebpf, node.include_endpoints
    {"EbpfUnknown", "[agent]\nebpf = \"sometimes\"\n", "agent.ebpf", 2, 8,
     {"unknown mode \"sometimes\"; valid modes are auto, off"}},
    {"EbpfNear", "[agent]\nebpf = \"Auto\"\n", "agent.ebpf", 2, 8, {"did you mean \"auto\"?"}},
    {"EbpfOnMeansAuto", "[agent]\nebpf = \"on\"\n", "agent.ebpf", 2, 8, {"unknown mode \"on\"; write \"auto\""}},
    {"EbpfBoolFalse", "[agent]\nebpf = false\n", "agent.ebpf", 2, 8,
     {"expected \"auto\" or \"off\", got boolean false; write ebpf = \"off\""}},
    {"EbpfBoolTrue", "[agent]\nebpf = true\n", "agent.ebpf", 2, 8, {"write ebpf = \"auto\""}},
    {"EbpfInNode", "[node]\nebpf = \"off\"\n", "node.ebpf", 2, 1, {"\"ebpf\" belongs in [agent]"}},
    {"IncludeEndpointsString", "[node]\ninclude_endpoints = \"yes\"\n", "node.include_endpoints", 2, 21,
     {"expected a boolean (true or false), got string \"yes\""}},
    {"IncludeEndpointsInAgent", "[agent]\ninclude_endpoints = true\n", "agent.include_endpoints", 2, 1,
     {"\"include_endpoints\" belongs in [node]"}},

    // Shape of [[endpoint]]
    {"SingleBrackets", "[endpoint]\nname = \"a\"\n", "endpoint", 1, 1,
     {"expected an array of tables", "write [[endpoint]] with two brackets"}},
    {"ElementNotTable", "endpoint = [\"api\"]\n", "endpoint[0]", 1, 13,
     {"expected a table with keys name, port, path, protocol, target, max, max_concurrency"}},
    {"TopLevelTypo", "[[endpoints]]\nname = \"a\"\n", "endpoints", 1, 3, {"did you mean \"endpoint\"?"}},
    {"UnknownKeyNear", table("a", 80, "targt = \"1ms\"\n"), "endpoint[0].targt", 6, 1,
     {"unknown key \"targt\" in [[endpoint]]; did you mean \"target\"?"}},
    {"UnknownKeyFar", table("a", 80, "colour = 1\n"), "endpoint[0].colour", 6, 1,
     {"valid keys in [[endpoint]] are name, port, path, protocol, target, max, max_concurrency"}},

    // Required keys, reported at the [[endpoint]] header.
    {"NameMissing", "[agent]\n[[endpoint]]\nport = 80\ntarget = \"1ms\"\nmax = \"2ms\"\n", "endpoint[0].name", 2, 1,
     {"is required", "name = \"api\""}},
    {"PortMissing", "[[endpoint]]\nname = \"a\"\ntarget = \"1ms\"\nmax = \"2ms\"\n", "endpoint[0].port", 1, 1,
     {"is required", "port = 8080"}},
    {"TargetMissing", "[[endpoint]]\nname = \"a\"\nport = 80\nmax = \"2ms\"\n", "endpoint[0].target", 1, 1,
     {"is required", "target = \"10ms\""}},
    {"MaxMissing", "[[endpoint]]\nname = \"a\"\nport = 80\ntarget = \"1ms\"\n", "endpoint[0].max", 1, 1,
     {"is required", "max = \"500ms\""}},
    {"EmptyTable", "[[endpoint]]\n", "endpoint[0].name", 1, 1, {"is required"}},

    // name
    {"NameEmpty", "[[endpoint]]\nname = \"\"\nport = 80\ntarget = \"1ms\"\nmax = \"2ms\"\n", "endpoint[0].name", 2, 8,
     {"must not be empty"}},
    {"NameSlash", table("a/b", 80), "endpoint[0].name", 2, 8,
     {"\"a/b\" contains \"/\"", "letters, digits, \"_\", \".\" and \"-\"", "endpoint.<name>.orca"}},
    {"NameSpace", table("my api", 80), "endpoint[0].name", 2, 8, {"contains a space"}},
    {"NameNonAscii", table("caf\xc3\xa9", 80), "endpoint[0].name", 2, 8, {"contains byte 0xC3"}},
    {"NameDot", table(".", 80), "endpoint[0].name", 2, 8, {"must not be \".\" or \"..\""}},
    {"NameDotDot", table("..", 80), "endpoint[0].name", 2, 8, {"must not be \".\" or \"..\""}},
    {"NameTooLong", table(std::string(65, 'x'), 80), "endpoint[0].name", 2, 8,
     {"is 65 bytes long; at most 64 are allowed"}},
    {"NameInteger", "[[endpoint]]\nname = 5\nport = 80\ntarget = \"1ms\"\nmax = \"2ms\"\n", "endpoint[0].name", 2, 8,
     {"expected a name string such as \"api\", got integer 5"}},

    // port
    {"PortZero", table("a", 0), "endpoint[0].port", 3, 8, {"must be a TCP port in 1..65535, got 0"}},
    {"PortTooLarge", table("a", 65536), "endpoint[0].port", 3, 8, {"got 65536"}},
    {"PortNegative", table("a", -1), "endpoint[0].port", 3, 8, {"got -1"}},
    {"PortString", "[[endpoint]]\nname = \"a\"\nport = \"8080\"\ntarget = \"1ms\"\nmax = \"2ms\"\n", "endpoint[0].port",
     3, 8, {"expected an integer TCP port such as 8080, got string \"8080\""}},
    {"PortFloat", "[[endpoint]]\nname = \"a\"\nport = 80.0\ntarget = \"1ms\"\nmax = \"2ms\"\n", "endpoint[0].port", 3, 8,
     {"got floating-point 80.0"}},

    // path
    {"PathRelative", table("a", 80, "path = \"play\"\n"), "endpoint[0].path", 6, 8,
     {"must start with \"/\", got \"play\"; write \"/play\""}},
    {"PathEmpty", table("a", 80, "path = \"\"\n"), "endpoint[0].path", 6, 8,
     {"must not be empty", "leave path out to count every request on the port"}},
    {"PathSpace", table("a", 80, "path = \"/a b\"\n"), "endpoint[0].path", 6, 8,
     {"printable ASCII without spaces", "a space at offset 2", "write \"/a%20b\""}},
    {"PathControl", table("a", 80, "path = \"/a\\tb\"\n"), "endpoint[0].path", 6, 8, {"byte 0x09 at offset 2"}},
    {"PathNonAscii", table("a", 80, "path = \"/caf\xc3\xa9\"\n"), "endpoint[0].path", 6, 8,
     {"byte 0xC3 at offset 4", "write \"/caf%C3%A9\""}},
    {"PathTooLong", table("a", 80, "path = \"/" + std::string(63, 'p') + "\"\n"), "endpoint[0].path", 6, 8,
     {"is 64 bytes long; a path prefix may be at most 63 bytes"}},
    {"PathArray", table("a", 80, "path = [\"/a\"]\n"), "endpoint[0].path", 6, 8,
     {"expected a path prefix string such as \"/api\", got array"}},

    // target, max
    {"TargetZero", "[[endpoint]]\nname = \"a\"\nport = 80\ntarget = \"0ms\"\nmax = \"2ms\"\n", "endpoint[0].target", 4,
     10, {"must be greater than 0, got \"0s\""}},
    {"TargetNoUnit", "[[endpoint]]\nname = \"a\"\nport = 80\ntarget = \"10\"\nmax = \"2ms\"\n", "endpoint[0].target", 4,
     10, {"invalid duration \"10\": has no unit", "e.g. \"100ms\""}},
    {"TargetInteger", "[[endpoint]]\nname = \"a\"\nport = 80\ntarget = 10\nmax = \"2ms\"\n", "endpoint[0].target", 4,
     10, {"expected a duration string such as \"100ms\", got integer 10"}},
    {"MaxBelowTarget", "[[endpoint]]\nname = \"a\"\nport = 80\ntarget = \"10ms\"\nmax = \"5ms\"\n", "endpoint[0].max", 5,
     7, {"must be at least target (\"10ms\"), got \"5ms\""}},
    {"MaxBelowTargetMaxFirst", "[[endpoint]]\nmax = \"1ms\"\ntarget = \"1s\"\nname = \"a\"\nport = 80\n",
     "endpoint[0].max", 2, 7, {"must be at least target (\"1s\"), got \"1ms\""}},
    {"MaxNegative", "[[endpoint]]\nname = \"a\"\nport = 80\ntarget = \"10ms\"\nmax = \"-5ms\"\n", "endpoint[0].max", 5,
     7, {"must not be negative"}},

    // max_concurrency
    {"MaxConcurrencyZero", table("a", 80, "max_concurrency = 0\n"), "endpoint[0].max_concurrency", 6, 19,
     {"must be in 1..1000000, got 0", "leave max_concurrency out"}},
    {"MaxConcurrencyTooLarge", table("a", 80, "max_concurrency = 1000001\n"), "endpoint[0].max_concurrency", 6, 19,
     {"got 1000001"}},
    {"MaxConcurrencyString", table("a", 80, "max_concurrency = \"64\"\n"), "endpoint[0].max_concurrency", 6, 19,
     {"expected an integer such as 64, got string \"64\""}},

    // Errors are numbered by entry and the first in the file wins.
    {"SecondEntryIndexed", table("a", 80) + table("b", 81, "max_concurrency = -3\n"), "endpoint[1].max_concurrency", 11,
     19, {"got -3"}},
    {"FirstErrorInFileOrder", table("a", 0) + table("b", 81, "path = \"x\"\n"), "endpoint[0].port", 3, 8, {"got 0"}},

    // The list as a whole
    {"DuplicateName", table("api", 80) + "\n" + table("api", 81), "endpoint[1].name", 8, 8,
     {"duplicate name \"api\" (already used by endpoint[0] at line 1)", "needs its own name"}},
    {"DuplicatePortWithoutPath", table("a", 80) + table("b", 80), "endpoint[1].port", 8, 8,
     {"port 80 already has an endpoint without a path (endpoint[0] at line 1)",
      "give one of them a path"}},
    // Bounds that would hurt: a threshold no request can be judged against.
    {"TargetAboveTenMinutes", "[[endpoint]]\nname = \"a\"\nport = 80\ntarget = \"11m\"\nmax = \"11m\"\n",
     "endpoint[0].target", 4, 10, {"must be at most \"10m\", got \"11m\"", "histogram"}},
    {"MaxAboveTenMinutes", "[[endpoint]]\nname = \"a\"\nport = 80\ntarget = \"1s\"\nmax = \"1h\"\n",
     "endpoint[0].max", 5, 7, {"must be at most \"10m\", got \"1h\""}},
    {"MaxHugeDuration", "[[endpoint]]\nname = \"a\"\nport = 80\ntarget = \"1s\"\nmax = \"2000000h\"\n",
     "endpoint[0].max", 5, 7, {"must be at most \"10m\""}},
    {"MaxConcurrencyHuge", table("a", 80, "max_concurrency = 4294967297\n"), "endpoint[0].max_concurrency", 6, 19,
     {"must be in 1..1000000, got 4294967297"}},
    {"DuplicatePortAndPath", table("a", 80, "path = \"/x\"\n") + table("b", 81, "path = \"/x\"\n") +
                                 table("c", 80, "path = \"/x\"\n"),
     "endpoint[2].path", 18, 8, {"duplicate port 80 and path \"/x\" (already used by endpoint[0] at line 1)"}},
};

INSTANTIATE_TEST_SUITE_P(Table, EndpointConfigErrors, ::testing::ValuesIn(kErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase>& p) { return std::string(p.param.name); });

TEST(EndpointConfigErrors, OnLaterEntryOnlyWhenEveryEntryIsValid) {
  // An invalid entry is reported rather than a duplicate among the others.
  const Error e = must_fail(table("a", 80) + table("a", 81) + table("c", 82, "path = \"x\"\n"));
  EXPECT_EQ(e.key, "endpoint[2].path") << e.to_string();
}

// ---------------------------------------------------------------------------
// Limits

TEST(EndpointConfigLimits, At256EndpointsAndNotAbove) {
  std::string text;
  for (int i = 0; i < 256; ++i) text += table("e" + std::to_string(i), 1000 + i);
  EXPECT_EQ(must_parse(text).endpoints.size(), kMaxEndpoints);

  text += table("e256", 2000);  // header on line 256 * 5 + 1
  const Error e = must_fail(text);
  EXPECT_EQ(e.key, "endpoint[256]");
  EXPECT_EQ(e.line, 256 * 5 + 1);
  EXPECT_EQ(e.column, 1);
  EXPECT_THAT(e.message, HasSubstr("is endpoint number 257; at most 256 endpoints are supported"));
  EXPECT_THAT(e.to_string(), HasSubstr("test.toml:1281:1: endpoint[256]: "));
}

TEST(EndpointConfigLimits, At16PathsPerPortAndNotAbove) {
  std::string text = table("generic", 8080);  // an endpoint without a path does not count
  for (int i = 0; i < 16; ++i) text += table("p" + std::to_string(i), 8080, "path = \"/p" + std::to_string(i) + "\"\n");
  text += table("elsewhere", 9090, "path = \"/p16\"\n");  // another port
  EXPECT_EQ(must_parse(text).endpoints.size(), 18u);

  const std::string over = text + table("p16", 8080, "path = \"/p16\"\n");
  const Error e = must_fail(over);
  EXPECT_EQ(e.key, "endpoint[18].path");
  EXPECT_EQ(e.line, 5 + 16 * 6 + 6 + 6);  // its path line
  EXPECT_EQ(e.column, 8);
  EXPECT_THAT(e.message, HasSubstr("is endpoint number 17 with a path on port 8080; at most 16"));
}

// ---------------------------------------------------------------------------
// --endpoint

TEST(EndpointFlag, ParsesEveryKey) {
  EXPECT_EQ(flag_ok("name=api,port=8080,path=/play,target=10ms,max=500ms,max_concurrency=64"),
            (EndpointConfig{"api", 8080, "/play", 10ms, 500ms, 64}));
  // Any order, optional keys left out, blanks around items ignored.
  EXPECT_EQ(flag_ok("max=1.5s, target=250us ,port=1,name=x"), (EndpointConfig{"x", 1, "", 250us, 1500ms, 0}));
  // '=' after the first belongs to the value.
  EXPECT_EQ(flag_ok("name=q,port=80,path=/a?b=c,target=1ms,max=1ms").path, "/a?b=c");
}

TEST(EndpointFlag, SameChecksAsTheTable) {
  // The required keys with good values: {key, flag value, TOML value}.
  const char* const required[][3] = {{"name", "a", "\"a\""}, {"port", "80", "80"}, {"target", "10ms", "\"10ms\""},
                                     {"max", "1s", "\"1s\""}};
  // One bad value each; the same reason must come from the flag and the file.
  const char* const bad[][2] = {{"name", "a/b"},           {"name", ".."},     {"port", "0"},   {"port", "65536"},
                                {"path", "play"},          {"path", ""},       {"path", "/a b"}, {"target", "0s"},
                                {"target", "10"},          {"max", "1us"},     {"max_concurrency", "0"},
                                {"max_concurrency", "1000001"}};
  for (const auto& [key, value] : bad) {
    const bool integer = std::string(key) == "port" || std::string(key) == "max_concurrency";
    std::string spec, toml = "[[endpoint]]\n";
    for (const auto& [k, flag_value, toml_value] : required) {
      if (std::string(k) == key) continue;
      spec += std::string(k) + "=" + flag_value + ",";
      toml += std::string(k) + " = " + toml_value + "\n";
    }
    spec += std::string(key) + "=" + value;
    toml += std::string(key) + " = " + (integer ? std::string(value) : "\"" + std::string(value) + "\"") + "\n";

    const std::string err = flag_error(spec);
    const Error e = must_fail(toml);
    EXPECT_EQ(e.key, "endpoint[0]." + std::string(key)) << toml;
    EXPECT_FALSE(e.message.empty());
    EXPECT_EQ(err, std::string(key) + ": " + e.message) << spec;
  }
}

struct FlagErrorCase {
  const char* name;
  const char* flag;
  std::vector<const char*> parts;
};

void PrintTo(const FlagErrorCase& c, std::ostream* os) { *os << c.name; }

class EndpointFlagErrors : public ::testing::TestWithParam<FlagErrorCase> {};

TEST_P(EndpointFlagErrors, NameTheKeyAndTheForm) {
  const FlagErrorCase& c = GetParam();
  const std::string err = flag_error(c.flag);
  for (const char* part : c.parts) EXPECT_THAT(err, HasSubstr(part)) << err;
}

constexpr const char* kForm = "name=NAME,port=PORT[,path=/PREFIX][,protocol=http2],target=DURATION,max=DURATION[,max_concurrency=N]";

const FlagErrorCase kFlagErrorCases[] = {
    {"Empty", "", {"is empty", kForm}},
    {"Blank", "  ", {"is empty", kForm}},
    {"UnknownKeyNear", "nmae=api,port=80,target=1ms,max=2ms", {"unknown key \"nmae\"; did you mean \"name\"?", kForm}},
    {"UnknownKeyFar", "name=api,port=80,target=1ms,max=2ms,colour=red",
     {"unknown key \"colour\"", "valid keys are name, port, path, protocol, target, max, max_concurrency", kForm}},
    {"DuplicateKey", "name=api,port=80,port=81,target=1ms,max=2ms", {"duplicate key \"port\"", kForm}},
    {"MissingOne", "name=api,port=80,target=1ms", {"missing key \"max\";", kForm}},
    {"MissingSeveral", "name=api", {"missing keys \"port\", \"target\", \"max\";", kForm}},
    {"NotKeyValue", "api,port=80,target=1ms,max=2ms", {"\"api\" is not key=value", kForm}},
    {"EmptyItem", "name=api,,port=80,target=1ms,max=2ms", {"empty item between two commas", kForm}},
    {"TrailingComma", "name=api,port=80,target=1ms,max=2ms,", {"ends with a comma", kForm}},
    {"PortNotNumber", "name=api,port=http,target=1ms,max=2ms",
     {"port: expected an integer TCP port such as 8080, got \"http\""}},
    {"PortHuge", "name=api,port=99999999999999999999999,target=1ms,max=2ms",
     {"port: must be a TCP port in 1..65535, got 99999999999999999999999"}},
    {"PortTrailingJunk", "name=api,port=80x,target=1ms,max=2ms", {"port: expected an integer", "\"80x\""}},
    {"PortPlusSign", "name=api,port=+80,target=1ms,max=2ms", {"port: expected an integer"}},
    {"MaxBelowTarget", "name=api,port=80,max=1ms,target=10ms", {"max: must be at least target (\"10ms\"), got \"1ms\""}},
    {"TargetAboveTenMinutes", "name=api,port=80,target=1h,max=1h", {"target: must be at most \"10m\", got \"1h\""}},
    {"MaxAboveTenMinutes", "name=api,port=80,target=1s,max=601s", {"max: must be at most \"10m\", got \"601s\""}},
    {"PortZero", "name=api,port=0,target=1ms,max=2ms", {"port: must be a TCP port in 1..65535, got 0"}},
    {"MaxConcurrencyZero", "name=api,port=80,target=1ms,max=2ms,max_concurrency=0", {"max_concurrency: must be in 1..1000000"}},
    {"TargetBadUnit", "name=api,port=80,target=10sec,max=1m", {"target: invalid duration \"10sec\"", "unknown unit"}},
    {"EmptyName", "name=,port=80,target=1ms,max=2ms", {"name: must not be empty"}},
    {"MaxConcurrencyNotNumber", "name=api,port=80,target=1ms,max=2ms,max_concurrency=many",
     {"max_concurrency: expected an integer such as 64, got \"many\""}},
};

INSTANTIATE_TEST_SUITE_P(Table, EndpointFlagErrors, ::testing::ValuesIn(kFlagErrorCases),
                         [](const ::testing::TestParamInfo<FlagErrorCase>& p) { return std::string(p.param.name); });

// ---------------------------------------------------------------------------
// validate_endpoints: the merged list (the file's entries, then the flags')

TEST(ValidateEndpoints, AcceptsAValidList) {
  EXPECT_TRUE(validate_endpoints({}, "f.toml").ok());
  EXPECT_TRUE(
      validate_endpoints({ep("a", 80), ep("b", 80, "/b"), ep("c", 80, "/c"), ep("d", 81)}, "f.toml").ok());
}

TEST(ValidateEndpoints, FlagDuplicatingAFileEntry) {
  const Config c = must_parse(table("api", 8080) + table("web", 8081));
  std::vector<EndpointConfig> merged = c.endpoints;
  merged.push_back(flag_ok("name=api,port=9000,target=1ms,max=2ms"));
  auto e = validate_endpoints(merged, "/etc/headroom/headroom.toml");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().file, "/etc/headroom/headroom.toml");
  EXPECT_EQ(e.error().line, 0);
  EXPECT_EQ(e.error().key, "endpoint[2].name");
  EXPECT_THAT(e.error().message, HasSubstr("duplicate name \"api\" (already used by endpoint[0], \"api\" on port 8080)"));
  EXPECT_THAT(e.error().to_string(), ::testing::StartsWith("/etc/headroom/headroom.toml: endpoint[2].name: duplicate name"));
}

TEST(ValidateEndpoints, PortAndPathClashes) {
  auto e = validate_endpoints({ep("a", 80), ep("b", 80, "/x"), ep("c", 80)}, "f");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().key, "endpoint[2].port");
  EXPECT_THAT(e.error().message, HasSubstr("port 80 already has an endpoint without a path"));

  e = validate_endpoints({ep("a", 80, "/x"), ep("b", 80, "/x")}, "f");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().key, "endpoint[1].path");
  EXPECT_THAT(e.error().message, HasSubstr("duplicate port 80 and path \"/x\""));

  // A prefix of another path is not a clash: the longest prefix wins.
  EXPECT_TRUE(validate_endpoints({ep("a", 80, "/x"), ep("b", 80, "/xy"), ep("c", 80, "/")}, "f").ok());
}

TEST(ValidateEndpoints, Limits) {
  std::vector<EndpointConfig> list;
  for (std::size_t i = 0; i < kMaxEndpoints; ++i) list.push_back(ep("e" + std::to_string(i), static_cast<uint16_t>(1 + i)));
  EXPECT_TRUE(validate_endpoints(list, "f").ok());
  list.push_back(ep("one-more", 5000));
  auto e = validate_endpoints(list, "f");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().key, "endpoint[256]");
  EXPECT_THAT(e.error().message, HasSubstr("at most 256 endpoints"));

  list.clear();
  for (std::size_t i = 0; i < kMaxPathsPerPort; ++i) list.push_back(ep("p" + std::to_string(i), 80, "/" + std::to_string(i)));
  EXPECT_TRUE(validate_endpoints(list, "f").ok());
  list.push_back(ep("p16", 80, "/16"));
  e = validate_endpoints(list, "f");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().key, "endpoint[16].path");
  EXPECT_THAT(e.error().message, HasSubstr("at most 16 endpoints with a path are supported per port"));
}

TEST(ValidateEndpoints, ChecksEachEntryToo) {
  // A list built in code gets the same field checks as the file and the flag.
  EndpointConfig bad = ep("a", 80);
  bad.port = 0;
  auto e = validate_endpoints({ep("ok", 81), bad}, "f");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().key, "endpoint[1].port");

  bad = ep("a", 80);
  bad.max = 1ms;  // below target
  e = validate_endpoints({bad}, "f");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().key, "endpoint[0].max");

  bad = ep("a b", 80);
  e = validate_endpoints({bad}, "f");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().key, "endpoint[0].name");
}

// ---------------------------------------------------------------------------
// The shipped example and the documentation

// The example shows [[endpoint]] commented out (the defaults declare none);
// uncommented, the block must parse and show every key.
TEST(EndpointConfigExample, BlockUncommentedParses) {
  const std::string text = read_file(std::string(HEADROOM_SOURCE_DIR) + "/examples/headroom.toml");
  EXPECT_THAT(text, HasSubstr("\nebpf = \"auto\"\n"));
  EXPECT_THAT(text, HasSubstr("\ninclude_endpoints = false\n"));
  const auto start = text.find("\n# [[endpoint]]\n");
  ASSERT_NE(start, std::string::npos) << "examples/headroom.toml should show a commented-out [[endpoint]] block";
  std::istringstream in(text.substr(start + 1));
  std::string block, line;
  while (std::getline(in, line) && line.starts_with("#")) block += line.substr(line.starts_with("# ") ? 2 : 1) + "\n";
  for (const char* key : {"name", "port", "path", "target", "max", "max_concurrency"})
    EXPECT_THAT(block, HasSubstr(std::string("\n") + key + " = ")) << key;
  const Config c = must_parse(block);
  ASSERT_EQ(c.endpoints.size(), 1u) << block;
  EXPECT_EQ(c.endpoints[0].name, "api");
  EXPECT_GT(c.endpoints[0].max, c.endpoints[0].target);
}

TEST(EndpointConfigDocs, DocumentKeysAndFlags) {
  for (const char* doc : {"/docs/configuration.md", "/packaging/man/headroom.toml.5"}) {
    const std::string text = read_file(std::string(HEADROOM_SOURCE_DIR) + doc);
    ASSERT_FALSE(text.empty()) << doc;
    for (const char* word : {"endpoint", "include_endpoints", "ebpf", "max_concurrency", "target"})
      EXPECT_THAT(text, HasSubstr(word)) << doc << ": " << word;
  }
  const std::string md = read_file(std::string(HEADROOM_SOURCE_DIR) + "/docs/configuration.md");
  for (const char* word : {"[[endpoint]]", "`--endpoint SPEC`", "`--no-ebpf`", "endpoint.<name>.orca", "endpoints.md"})
    EXPECT_THAT(md, HasSubstr(word)) << word;
  const std::string man8 = read_file(std::string(HEADROOM_SOURCE_DIR) + "/packaging/man/headroomd.8");
  EXPECT_THAT(man8, HasSubstr("\\-\\-endpoint"));
  EXPECT_THAT(man8, HasSubstr("\\-\\-no\\-ebpf"));
  EXPECT_THAT(man8, Not(HasSubstr("--endpoint")));  // roff needs \- for a real hyphen
}

// ---------------------------------------------------------------------------
// protocol = "http1" | "http2"

TEST(EndpointProtocol, DefaultsToHttp1AndTakesHttp2) {
  EXPECT_EQ(must_parse(table("a", 80)).endpoints.at(0).protocol, EndpointProtocol::http1);
  EXPECT_EQ(must_parse(table("a", 80, "protocol = \"http1\"\n")).endpoints.at(0).protocol, EndpointProtocol::http1);
  EXPECT_EQ(must_parse(table("a", 80, "protocol = \"http2\"\n")).endpoints.at(0).protocol, EndpointProtocol::http2);
  EXPECT_EQ(flag_ok("name=rpc,port=50051,protocol=http2,target=20ms,max=200ms").protocol, EndpointProtocol::http2);
}

TEST(EndpointProtocol, UnknownNamesSayWhatToWrite) {
  Error e = must_fail(table("a", 80, "protocol = \"grpc\"\n"));
  EXPECT_EQ(e.key, "endpoint[0].protocol") << e.to_string();
  EXPECT_THAT(e.message, HasSubstr("must be \"http1\" or \"http2\", got \"grpc\"; write \"http2\""));
  EXPECT_GT(e.line, 0) << e.to_string();
  e = must_fail(table("a", 80, "protocol = \"HTTP/1.1\"\n"));
  EXPECT_THAT(e.message, HasSubstr("write \"http1\""));
  e = must_fail(table("a", 80, "protocol = \"quic\"\n"));
  EXPECT_THAT(e.message, ::testing::EndsWith("got \"quic\""));
  EXPECT_THAT(flag_error("name=rpc,port=1,protocol=h2c,target=1ms,max=2ms"),
              HasSubstr("protocol: must be \"http1\" or \"http2\", got \"h2c\"; write \"http2\""));
}

TEST(EndpointProtocol, Http2TakesNoPathAndAPortSpeaksOneProtocol) {
  EndpointConfig h2 = ep("rpc", 80);
  h2.protocol = EndpointProtocol::http2;
  EndpointConfig h2_path = ep("rpc2", 80, "/x");
  h2_path.protocol = EndpointProtocol::http2;
  auto e = validate_endpoints({h2_path}, "f");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().key, "endpoint[0].path");
  EXPECT_THAT(e.error().message, HasSubstr("cannot be used with protocol = \"http2\""));

  e = validate_endpoints({h2, ep("web", 80, "/x")}, "f");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().key, "endpoint[1].protocol");
  EXPECT_THAT(e.error().message, HasSubstr("is \"http1\" on port 80, which endpoint[0]"));
  EXPECT_THAT(e.error().message, HasSubstr("says is \"http2\"; every endpoint of a port speaks the same protocol"));

  EndpointConfig other_port = ep("web", 81);
  EXPECT_TRUE(validate_endpoints({h2, other_port}, "f").ok());
  const Error f = must_fail(table("a", 80, "protocol = \"http2\"\npath = \"/x\"\n"));
  EXPECT_EQ(f.key, "endpoint[0].path") << f.to_string();
}

}  // namespace
}  // namespace headroom::agent
