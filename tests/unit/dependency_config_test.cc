// SPDX-License-Identifier: Apache-2.0
// Dependency configuration: [[dependency]] tables, --dependency flags and the
// checks of the whole list (validate_dependencies), good and bad.
#include "agent/config/config.h"
#include "agent/config/config_checks.h"
#include "config_cases.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace headroom::agent {
namespace {

using namespace headroom::agent::config_cases;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A [[dependency]] table with name, target and max, plus `remote` and `extra` lines.
std::string table(const std::string& name, const std::string& remote = "port = 6379\n",
                  const std::string& extra = "") {
  return "[[dependency]]\nname = \"" + name + "\"\n" + remote + "target = \"2ms\"\nmax = \"50ms\"\n" + extra;
}

DependencyConfig dep(std::string name, std::string host, uint16_t port) {
  DependencyConfig d;
  d.name = std::move(name);
  d.host = std::move(host);
  d.port = port;
  d.target = 2ms;
  d.max = 50ms;
  return d;
}

// ---------------------------------------------------------------------------
// Good tables

TEST(DependencyConfig, NoneByDefault) { EXPECT_TRUE(Config{}.dependencies.empty()); }

TEST(DependencyConfig, EveryKey) {
  const Config c = must_parse(table("cache", "address = \"10.0.0.5:6379\"\n",
                                    "callers_cgroup = \"/system.slice/api.service\"\ncallers_process = \"api\"\n"
                                    "protocol = \"generic\"\nmax_concurrency = 32\nerrors = \"connect+4xx\"\n"));
  ASSERT_EQ(c.dependencies.size(), 1u);
  DependencyConfig want = dep("cache", "10.0.0.5", 6379);
  want.callers_cgroup = "/system.slice/api.service";
  want.callers_process = "api";
  want.protocol = DependencyProtocol::generic;
  want.max_concurrency = 32;
  want.errors = kDependencyErrorConnect | kDependencyError4xx;
  EXPECT_EQ(c.dependencies[0], want);
}

TEST(DependencyConfig, DefaultsAreHttp1AnyCallerNoBulkhead) {
  const Config c = must_parse(table("a"));
  ASSERT_EQ(c.dependencies.size(), 1u);
  EXPECT_EQ(c.dependencies[0], dep("a", "", 6379));
  EXPECT_EQ(c.dependencies[0].protocol, DependencyProtocol::http1);
  EXPECT_EQ(c.dependencies[0].errors, kDependencyErrorConnect | kDependencyErrorReset | kDependencyError5xx);
}

// The error rule: kinds joined by +, each once, in any order; "none" alone.
struct ErrorRuleCase {
  const char* text;
  uint32_t bits;          // when accepted
  const char* written;    // format_dependency_errors(bits)
  const char* complaint;  // when refused: part of the message
};

TEST(DependencyConfig, ErrorRules) {
  const ErrorRuleCase cases[] = {
      {"connect+reset+5xx", kDependencyErrorsDefault, "connect+reset+5xx", nullptr},
      {"5xx+connect+reset", kDependencyErrorsDefault, "connect+reset+5xx", nullptr},
      {"4xx", kDependencyError4xx, "4xx", nullptr},
      {"reset+4xx+5xx+connect", 15, "connect+reset+5xx+4xx", nullptr},
      {"none", 0, "none", nullptr},
      {"", 0, nullptr, "is empty"},
      {"5XX", 0, nullptr, "grpc-status other than OK"},
      {"connect+connect", 0, nullptr, "\"connect\" twice"},
      {"connect+", 0, nullptr, "names \"\", not a kind"},
      {"none+5xx", 0, nullptr, "\"none\" stands alone"},
      {"timeout", 0, nullptr, "the kinds are \"connect\", \"reset\", \"5xx\", \"4xx\""},
  };
  for (const auto& c : cases) {
    auto r = parse_dependency_errors(c.text);
    if (c.complaint) {
      ASSERT_FALSE(r) << c.text;
      EXPECT_THAT(r.error().message, HasSubstr(c.complaint)) << c.text << ": " << r.error().message;
      continue;
    }
    ASSERT_TRUE(r) << c.text << ": " << r.error().message;
    EXPECT_EQ(*r, c.bits) << c.text;
    EXPECT_EQ(format_dependency_errors(*r), c.written) << c.text;
  }
}

struct AddressCase {
  const char* written;
  const char* host;
  uint16_t port;
};

TEST(DependencyConfig, AddressesAreNormalized) {
  const AddressCase cases[] = {
      {"10.0.0.5:6379", "10.0.0.5", 6379},
      {"[2001:db8::5]:443", "2001:db8::5", 443},
      {"[2001:0db8:0000::0005]:443", "2001:db8::5", 443},   // one address, one spelling
      {"[::ffff:10.0.0.5]:6379", "10.0.0.5", 6379},         // IPv4-mapped: the IPv4 address
      {"127.0.0.1:65535", "127.0.0.1", 65535},
      {"[::1]:1", "::1", 1},
  };
  for (const auto& c : cases) {
    const Config cfg = must_parse(table("a", "address = \"" + std::string(c.written) + "\"\n"));
    ASSERT_EQ(cfg.dependencies.size(), 1u) << c.written;
    EXPECT_EQ(cfg.dependencies[0].host, c.host) << c.written;
    EXPECT_EQ(cfg.dependencies[0].port, c.port) << c.written;
  }
}

TEST(DependencyConfig, ProtocolsAndSeveralEntries) {
  const Config c = must_parse(table("a", "port = 80\n", "protocol = \"http1\"\n") +
                              table("b", "port = 50051\n", "protocol = \"http2\"\n") +
                              table("c", "port = 5432\n", "protocol = \"generic\"\n"));
  ASSERT_EQ(c.dependencies.size(), 3u);
  EXPECT_EQ(c.dependencies[0].protocol, DependencyProtocol::http1);
  EXPECT_EQ(c.dependencies[1].protocol, DependencyProtocol::http2);
  EXPECT_EQ(c.dependencies[2].protocol, DependencyProtocol::generic);
  EXPECT_EQ(c.dependencies[2].name, "c");
}

TEST(DependencyConfig, AName15BytesLongIsAProcessName) {
  const Config c = must_parse(table("a", "port = 1\n", "callers_process = \"abcdefghijklmno\"\n"));
  EXPECT_EQ(c.dependencies.at(0).callers_process, "abcdefghijklmno");
}

// ---------------------------------------------------------------------------
// Bad tables: each names the file, line, column and key, and says what to do

class DependencyConfigErrors : public ::testing::TestWithParam<ErrorCase> {};
TEST_P(DependencyConfigErrors, NameThePlaceAndWhatToDo) { expect_error_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Table, DependencyConfigErrors,
    ::testing::Values(
        ErrorCase{"HostName", table("a", "address = \"redis.internal:6379\"\n"), "dependency[0].address", 3, 11,
                  {"host name", "give its IP address", "port = 6379"}},
        ErrorCase{"UnknownErrorKind", table("a", "port = 6379\nerrors = \"connect+timeout\"\n"),
                  "dependency[0].errors", 4, 10, {"\"timeout\", not a kind of failure", "joined by +"}},
        ErrorCase{"LocalhostIsAName", table("a", "address = \"localhost:6379\"\n"), "dependency[0].address", 3, 11,
                  {"host name"}},
        ErrorCase{"BadIpv4", table("a", "address = \"10.0.0.256:6379\"\n"), "dependency[0].address", 3, 11,
                  {"not an IPv4 address"}},
        ErrorCase{"Ipv6WithoutBrackets", table("a", "address = \"2001:db8::5:443\"\n"), "dependency[0].address", 3,
                  11, {"in brackets", "[2001:db8::5]:443"}},
        ErrorCase{"BadIpv6", table("a", "address = \"[2001:zz::5]:443\"\n"), "dependency[0].address", 3, 11,
                  {"not an IPv6 address"}},
        ErrorCase{"NoPort", table("a", "address = \"10.0.0.5\"\n"), "dependency[0].address", 3, 11,
                  {"an IP address and a port"}},
        ErrorCase{"PortZero", table("a", "address = \"10.0.0.5:0\"\n"), "dependency[0].address", 3, 11,
                  {"from 1 to 65535"}},
        ErrorCase{"PortTooBig", table("a", "address = \"10.0.0.5:65536\"\n"), "dependency[0].address", 3, 11,
                  {"from 1 to 65535"}},
        ErrorCase{"NoHost", table("a", "address = \":6379\"\n"), "dependency[0].address", 3, 11,
                  {"write port = 6379"}},
        ErrorCase{"UnspecifiedAddress", table("a", "address = \"0.0.0.0:6379\"\n"), "dependency[0].address", 3, 11,
                  {"no host's address", "port = 6379"}},
        ErrorCase{"AddressAndPort", table("a", "address = \"10.0.0.5:6379\"\nport = 6379\n"), "dependency[0].port", 4,
                  8, {"not both"}},
        ErrorCase{"NeitherAddressNorPort", table("a", ""), "dependency[0]", 1, 1,
                  {"names no remote side", "address = \"10.0.0.5:6379\"", "port = 6379"}},
        ErrorCase{"PortOutOfRange", table("a", "port = 70000\n"), "dependency[0].port", 3, 8, {"1..65535"}},
        ErrorCase{"PortNotAnInteger", table("a", "port = \"6379\"\n"), "dependency[0].port", 3, 8,
                  {"expected an integer TCP port"}},
        ErrorCase{"BadName", table("a/b"), "dependency[0].name", 2, 8, {"dependency.<name>.orca"}},
        ErrorCase{"NameMissing", "[[dependency]]\nport = 1\ntarget = \"1ms\"\nmax = \"2ms\"\n", "dependency[0].name",
                  1, 1, {"is required"}},
        ErrorCase{"TargetMissing", "[[dependency]]\nname = \"a\"\nport = 1\nmax = \"2ms\"\n",
                  "dependency[0].target", 1, 1, {"is required"}},
        ErrorCase{"MaxBelowTarget", "[[dependency]]\nname = \"a\"\nport = 1\ntarget = \"20ms\"\nmax = \"2ms\"\n",
                  "dependency[0].max", 5, 7, {"at least target"}},
        ErrorCase{"TargetZero", "[[dependency]]\nname = \"a\"\nport = 1\ntarget = \"0s\"\nmax = \"2ms\"\n",
                  "dependency[0].target", 4, 10, {"greater than 0"}},
        ErrorCase{"RelativeCgroup", table("a", "port = 1\n", "callers_cgroup = \"system.slice\"\n"),
                  "dependency[0].callers_cgroup", 6, 18, {"starting with \"/\"", "leave callers_cgroup out"}},
        ErrorCase{"DotDotCgroup", table("a", "port = 1\n", "callers_cgroup = \"/a/../b\"\n"),
                  "dependency[0].callers_cgroup", 6, 18, {"\"..\""}},
        ErrorCase{"LongProcessName", table("a", "port = 1\n", "callers_process = \"abcdefghijklmnop\"\n"),
                  "dependency[0].callers_process", 6, 19, {"first 15 bytes", "\"abcdefghijklmno\""}},
        ErrorCase{"EmptyProcessName", table("a", "port = 1\n", "callers_process = \"\"\n"),
                  "dependency[0].callers_process", 6, 19, {"must not be empty"}},
        ErrorCase{"GrpcIsHttp2", table("a", "port = 1\n", "protocol = \"grpc\"\n"), "dependency[0].protocol", 6, 12,
                  {"write \"http2\""}},
        ErrorCase{"RedisIsGeneric", table("a", "port = 1\n", "protocol = \"redis\"\n"), "dependency[0].protocol", 6,
                  12, {"write \"generic\""}},
        ErrorCase{"ZeroConcurrency", table("a", "port = 1\n", "max_concurrency = 0\n"),
                  "dependency[0].max_concurrency", 6, 19, {"1..1000000", "leave max_concurrency out"}},
        ErrorCase{"UnknownKey", table("a", "port = 1\n", "timeout = \"1s\"\n"), "dependency[0].timeout", 6, 1,
                  {"unknown key \"timeout\" in [[dependency]]"}},
        ErrorCase{"DuplicateName", table("a") + table("a", "port = 80\n"), "dependency[1].name", 7, 8,
                  {"duplicate name \"a\"", "dependency[0] at line 1", "dependency.a.orca"}},
        ErrorCase{"SingleBrackets", "[dependency]\nname = \"a\"\n", "dependency", 1, 1,
                  {"[[dependency]] with two brackets"}}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(DependencyConfig, AtMostTheLimit) {
  std::string text;
  for (std::size_t i = 0; i <= kMaxDependencies; ++i) text += table("d" + std::to_string(i));
  const Error e = must_fail(text);
  EXPECT_EQ(e.key, "dependency[" + std::to_string(kMaxDependencies) + "]");
  EXPECT_THAT(e.message, HasSubstr("at most " + std::to_string(kMaxDependencies)));
}

// A dependency is not an endpoint: the two may share a name (their reports
// are dependency.<name>.orca and endpoint.<name>.orca).
TEST(DependencyConfig, MayShareAnEndpointsName) {
  const Config c = must_parse(table("api") + "[[endpoint]]\nname = \"api\"\nport = 8080\ntarget = \"1ms\"\nmax = \"2ms\"\n");
  EXPECT_EQ(c.dependencies.size(), 1u);
  EXPECT_EQ(c.endpoints.size(), 1u);
}

// ---------------------------------------------------------------------------
// --dependency

TEST(DependencyFlag, EveryKey) {
  auto r = parse_dependency_flag(
      "name=db, address=[2001:db8::5]:5432, callers_cgroup=/kubepods/pod1, callers_process=worker, "
      "protocol=generic, target=5ms, max=1s, max_concurrency=10, errors=5xx+4xx");
  ASSERT_TRUE(r) << r.error().to_string();
  DependencyConfig want = dep("db", "2001:db8::5", 5432);
  want.callers_cgroup = "/kubepods/pod1";
  want.callers_process = "worker";
  want.protocol = DependencyProtocol::generic;
  want.target = 5ms;
  want.max = 1s;
  want.max_concurrency = 10;
  want.errors = kDependencyError5xx | kDependencyError4xx;
  EXPECT_EQ(*r, want);
}

TEST(DependencyFlag, PortAlone) {
  auto r = parse_dependency_flag("name=api,port=443,target=10ms,max=100ms");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->host, "");
  EXPECT_EQ(r->port, 443);
}

struct FlagCase {
  const char* text;
  const char* key;
  const char* part;
};

TEST(DependencyFlag, ErrorsNameTheKey) {
  const FlagCase cases[] = {
      {"name=a,address=db.local:5432,target=1ms,max=2ms", "address", "host name"},
      {"name=a,address=10.0.0.5:1,port=1,target=1ms,max=2ms", "port", "not both"},
      {"name=a,target=1ms,max=2ms", "", "names no remote side"},
      {"name=a,port=x,target=1ms,max=2ms", "port", "expected an integer TCP port"},
      {"name=a,port=1,target=5ms,max=2ms", "max", "at least target"},
      {"name=a,port=1,target=1ms", "", "missing key \"max\""},
      {"name=a,port=1,target=1ms,max=2ms,protocol=tcp", "protocol", "write \"generic\""},
      {"name=a,port=1,target=1ms,max=2ms,callers_process=abcdefghijklmnopq", "callers_process", "first 15 bytes"},
      {"name=a,port=1,target=1ms,max=2ms,adress=1", "", "did you mean"},
      {"name=a,port=1,port=2,target=1ms,max=2ms", "", "duplicate key \"port\""},
      {"", "", "is empty"},
      {"name=a,port=1,target=1ms,max=2ms,errors=5xx+oops", "errors", "\"oops\", not a kind of failure"},
  };
  for (const auto& c : cases) {
    auto r = parse_dependency_flag(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error().key, c.key) << c.text << ": " << r.error().to_string();
    EXPECT_THAT(r.error().message, HasSubstr(c.part)) << c.text;
  }
}

TEST(DependencyList, FileAndFlagsTogether) {
  std::vector<DependencyConfig> deps{dep("a", "", 1), dep("b", "10.0.0.1", 2)};
  EXPECT_TRUE(validate_dependencies(deps, "--dependency"));
  deps.push_back(dep("a", "", 3));
  auto r = validate_dependencies(deps, "--dependency");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().key, "dependency[2].name");
  EXPECT_EQ(r.error().file, "--dependency");
  EXPECT_THAT(r.error().message, HasSubstr("already used by dependency[0]"));
  deps.back().name = "c";
  deps.back().max = 1ms;  // below target
  r = validate_dependencies(deps, "--dependency");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().key, "dependency[2].max");
}

// The keys and the flag are documented where the endpoints' are, and the
// example in docs/dependencies.md parses.
TEST(DependencyConfigDocs, DocumentKeysAndFlags) {
  const auto read = [](const char* path) {
    std::ifstream in(std::string(HEADROOM_SOURCE_DIR) + path);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  };
  const std::string md = read("/docs/configuration.md");
  for (const char* word : {"[[dependency]]", "`--dependency SPEC`", "`callers_cgroup`", "`callers_process`",
                           "`address`", "dependency.<name>.orca", "dependencies.md"})
    EXPECT_THAT(md, HasSubstr(word)) << word;
  const std::string man8 = read("/packaging/man/headroomd.8");
  EXPECT_THAT(man8, HasSubstr("\\-\\-dependency"));
  EXPECT_THAT(man8, ::testing::Not(HasSubstr("--dependency")));  // roff needs \- for a real hyphen
  const std::string guide = read("/docs/dependencies.md");
  const auto begin = guide.find("```toml\n");
  ASSERT_NE(begin, std::string::npos);
  const auto end = guide.find("```\n", begin + 8);
  const Config c = must_parse(guide.substr(begin + 8, end - begin - 8));
  ASSERT_EQ(c.dependencies.size(), 2u);
  EXPECT_EQ(c.dependencies[0].host, "10.0.0.5");
  EXPECT_EQ(c.dependencies[1].protocol, DependencyProtocol::http2);
}

}  // namespace
}  // namespace headroom::agent
