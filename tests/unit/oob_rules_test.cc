// SPDX-License-Identifier: Apache-2.0
// The out-of-band stream's rules (headroom/orca/oob_streams.h), by table:
// a request's interval, the :authority's port and host, and when a stream
// is sent a report; and [oob]'s configuration with its placed errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/config/config.h"
#include "agent/config/config_checks.h"
#include "config_cases.h"
#include "headroom/orca/oob_streams.h"

namespace headroom::orca {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// --- stream_interval ---------------------------------------------------------

struct IntervalCase {
  const char* name;
  bool has_interval;
  int64_t seconds;
  int32_t nanos;
  int64_t expect_ms;  // -1: INVALID_ARGUMENT
};

class StreamInterval : public ::testing::TestWithParam<IntervalCase> {};

TEST_P(StreamInterval, DefaultRaisedCappedOrRefused) {
  const auto& c = GetParam();
  StreamOptions o;
  o.default_interval = 1000ms;
  o.min_interval = 100ms;
  o.max_interval = 1h;
  xds::service::orca::v3::OrcaLoadReportRequest r;
  if (c.has_interval) {
    r.mutable_report_interval()->set_seconds(c.seconds);
    r.mutable_report_interval()->set_nanos(c.nanos);
  }
  const auto got = stream_interval(r, o);
  if (c.expect_ms < 0) {
    ASSERT_TRUE(std::holds_alternative<grpc::Status>(got)) << c.name;
    EXPECT_EQ(std::get<grpc::Status>(got).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
  } else {
    ASSERT_TRUE(std::holds_alternative<milliseconds>(got)) << c.name << ": " << std::get<grpc::Status>(got).error_message();
    EXPECT_EQ(std::get<milliseconds>(got).count(), c.expect_ms) << c.name;
  }
}

const IntervalCase kIntervalCases[] = {
    {"Missing", false, 0, 0, 1000},
    {"Zero", true, 0, 0, 1000},
    {"TwoSeconds", true, 2, 0, 2000},
    {"TenSecondsEnvoysDefault", true, 10, 0, 10'000},
    {"FractionRoundedUp", true, 0, 250'000'001, 251},
    {"BelowTheAgentInterval", true, 0, 10'000'000, 100},
    {"OneNanosecond", true, 0, 1, 100},
    {"OneHour", true, 3600, 0, 3'600'000},
    {"AboveAnHour", true, 3601, 0, 3'600'000},
    {"Huge", true, 315'576'000'000, 999'999'999, 3'600'000},
    {"NegativeSeconds", true, -1, 0, -1},
    {"NegativeNanos", true, 0, -5, -1},
    {"NanosOutOfRange", true, 1, 1'000'000'000, -1},
};
INSTANTIATE_TEST_SUITE_P(Table, StreamInterval, ::testing::ValuesIn(kIntervalCases),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(StreamInterval, DefaultBelowTheFloorIsRaisedToo) {
  StreamOptions o;
  o.default_interval = 10ms;
  o.min_interval = 250ms;
  const auto got = stream_interval({}, o);
  ASSERT_TRUE(std::holds_alternative<milliseconds>(got));
  EXPECT_EQ(std::get<milliseconds>(got), 250ms);
}

// --- authority ---------------------------------------------------------------

struct AuthorityCase {
  const char* authority;
  std::optional<uint16_t> port;
  const char* host;
};

class Authority : public ::testing::TestWithParam<AuthorityCase> {};

TEST_P(Authority, PortAndHost) {
  const auto& c = GetParam();
  EXPECT_EQ(authority_port(c.authority), c.port) << c.authority;
  EXPECT_EQ(authority_host(c.authority), c.host) << c.authority;
}

const AuthorityCase kAuthorityCases[] = {
    {"10.0.0.5:8080", 8080, "10.0.0.5"},
    {"127.0.0.1:1", 1, "127.0.0.1"},
    {"[::1]:9447", 9447, "::1"},
    {"[fe80::1%eth0]:443", 443, "fe80::1%eth0"},
    {"checkout:8080", 8080, "checkout"},
    {"checkout", std::nullopt, "checkout"},
    {"", std::nullopt, ""},
    {"host:", std::nullopt, "host"},
    {"host:0", std::nullopt, "host"},
    {"host:65535", 65535, "host"},
    {"host:65536", std::nullopt, "host"},
    {"host:123456", std::nullopt, "host"},
    {"host:80a", std::nullopt, "host"},
    {"host:-1", std::nullopt, "host"},
    {"::1", std::nullopt, "::1"},  // bare IPv6: no port
    {"[::1]", std::nullopt, "::1"},
    {"[::1]9447", std::nullopt, "::1"},
    {"[::1", std::nullopt, "[::1"},
};
INSTANTIATE_TEST_SUITE_P(Table, Authority, ::testing::ValuesIn(kAuthorityCases),
                         [](const auto& p) { return "case" + std::to_string(p.index); });

// --- due -------------------------------------------------------------------------

struct DueCase {
  const char* name;
  SnapshotInfo newest;
  StreamProgress sent;
  int64_t interval_ms;
  int64_t now_ms;
  bool due;
};

class Due : public ::testing::TestWithParam<DueCase> {};

TEST_P(Due, NewFreshAndOneIntervalOn) {
  const auto& c = GetParam();
  EXPECT_EQ(due(c.newest, c.sent, milliseconds(c.interval_ms), c.now_ms), c.due) << c.name;
}

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
const DueCase kDueCases[] = {
    {"NoReportYet", {0, 0, 100, kForever, false}, {0, 0}, 100, 1000, false},
    {"FirstAtOnce", {1, 1000, 100, kForever, false}, {0, 0}, 10'000, 1000, true},
    {"SameReportNotTwice", {1, 1000, 100, kForever, false}, {1, 1000}, 100, 5000, false},
    {"EveryTickAtTheAgentInterval", {2, 1100, 100, kForever, false}, {1, 1000}, 100, 1100, true},
    {"TickJitterTolerated", {2, 1080, 100, kForever, false}, {1, 1000}, 100, 1080, true},
    {"AShortTickAfterAReloadWaits", {2, 1053, 100, kForever, false}, {1, 1000}, 100, 1053, false},
    {"TooSoonForTheInterval", {2, 1100, 100, kForever, false}, {1, 1000}, 300, 1100, false},
    {"AQuarterTickEarly", {4, 1275, 100, kForever, false}, {1, 1000}, 300, 1275, true},
    {"MoreThanAQuarterTickEarly", {3, 1274, 100, kForever, false}, {1, 1000}, 300, 1274, false},
    {"BetweenTwoTicksRoundedUp", {3, 1200, 100, kForever, false}, {1, 1000}, 250, 1200, false},
    {"BetweenTwoTicksNextOne", {4, 1300, 100, kForever, false}, {1, 1000}, 250, 1300, true},
    {"IntervalReached", {4, 1300, 100, kForever, false}, {1, 1000}, 300, 1300, true},
    {"StaleNotSentFirst", {1, 1000, 100, 2000, false}, {0, 0}, 100, 2000, false},
    {"StaleNotSentLater", {2, 1100, 100, 1500, false}, {1, 1000}, 100, 1600, false},
    {"FreshUntilTheEdge", {2, 1100, 100, 1500, false}, {1, 1000}, 100, 1499, true},
    {"FinalAtOnceWhateverTheCadence", {2, 1010, 100, kForever, true}, {1, 1000}, 10'000, 1010, true},
    {"FinalNotTwice", {2, 1010, 100, kForever, true}, {2, 1010}, 100, 1010, false},
};
INSTANTIATE_TEST_SUITE_P(Table, Due, ::testing::ValuesIn(kDueCases),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace headroom::orca

// --- [oob] -------------------------------------------------------------------

namespace headroom::agent {
namespace {

using namespace std::chrono_literals;
using config_cases::ErrorCase;
using config_cases::expect_error_case;
using config_cases::must_parse;

TEST(OobConfig, OffByDefault) {
  const Config c = must_parse("");
  EXPECT_TRUE(c.oob.listen.empty());
  EXPECT_EQ(c.oob.max_streams, 1024u);
  EXPECT_FALSE(c.oob.unknown_authority_error);
  EXPECT_EQ(c.oob.default_interval, 1s);
  EXPECT_EQ(must_parse("[oob]\nlisten = []\n"), Config{});
}

TEST(OobConfig, EveryKeySet) {
  const Config c = must_parse(R"(
[oob]
listen = ["127.0.0.1:9447", "[::1]:9447", "unix:/run/orca/oob.sock"]
max_streams = 10
unknown_authority = "error"
default_interval = "10s"
)");
  EXPECT_THAT(c.oob.listen, ::testing::ElementsAre("127.0.0.1:9447", "[::1]:9447", "unix:/run/orca/oob.sock"));
  EXPECT_EQ(c.oob.max_streams, 10u);
  EXPECT_TRUE(c.oob.unknown_authority_error);
  EXPECT_EQ(c.oob.default_interval, 10s);
  EXPECT_NE(c, must_parse("[oob]\nlisten = [\"127.0.0.1:9447\"]\n"));
}

struct AddressCase {
  const char* address;
  const char* message_part;  // nullptr: accepted
};
class OobAddresses : public ::testing::TestWithParam<AddressCase> {};

TEST_P(OobAddresses, IpLiteralsPortsAndUnixPaths) {
  const auto& c = GetParam();
  const auto r = check_oob_address(c.address);
  if (c.message_part == nullptr) {
    EXPECT_TRUE(r.ok()) << c.address << ": " << r.error().message;
  } else {
    ASSERT_FALSE(r.ok()) << c.address << " was accepted";
    EXPECT_THAT(r.error().message, ::testing::HasSubstr(c.message_part)) << c.address;
  }
}

const AddressCase kAddressCases[] = {
    {"127.0.0.1:9447", nullptr},
    {"0.0.0.0:9447", nullptr},
    {"[::]:9447", nullptr},
    {"unix:/run/orca/oob.sock", nullptr},
    {"unix:run/oob.sock", "a unix socket needs an absolute path"},
    {"unix:/run/orca/", "names a directory"},
    {"unix:/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
     "a unix socket's path is at most 107"},
    {"unix-abstract:orca", "write an IP literal and a port"},
    {"dns:///localhost:9447", "write an IP literal and a port"},
    {"localhost:9447", "write the address, not a host name: \"127.0.0.1:9447\""},
    {"9447", "must be an IP address and a port"},
    {"::1:9447", "an IPv6 address goes in brackets"},
    {"127.0.0.1:0", "from 1 to 65535"},
};
INSTANTIATE_TEST_SUITE_P(Table, OobAddresses, ::testing::ValuesIn(kAddressCases),
                         [](const auto& p) { return "case" + std::to_string(p.index); });

class OobConfigErrors : public ::testing::TestWithParam<ErrorCase> {};
TEST_P(OobConfigErrors, ReportsKeyPlaceAndMessage) { expect_error_case(GetParam()); }

const ErrorCase kOobErrorCases[] = {
    {"ListenNotAnArray", "[oob]\nlisten = \"127.0.0.1:9447\"\n", "oob.listen", 2, 10,
     {"expected an array of address strings such as [\"127.0.0.1:9447\"]"}},
    {"ListenEntryNotAString", "[oob]\nlisten = [9447]\n", "oob.listen[0]", 2, 11,
     {"expected an address string such as \"127.0.0.1:9447\""}},
    {"ListenEntryHostName", "[oob]\nlisten = [\"127.0.0.1:9447\", \"localhost:9447\"]\n", "oob.listen[1]", 2, 29,
     {"not a host name"}},
    {"ListenDuplicate", "[oob]\nlisten = [\"127.0.0.1:9447\", \"127.0.0.1:9447\"]\n", "oob.listen[1]", 2, 29,
     {"duplicate address \"127.0.0.1:9447\""}},
    {"MaxStreamsZero", "[oob]\nmax_streams = 0\n", "oob.max_streams", 2, 15, {"must be from 1 to 100000, got 0"}},
    {"MaxStreamsHuge", "[oob]\nmax_streams = 1000000\n", "oob.max_streams", 2, 15, {"must be from 1 to 100000"}},
    {"UnknownAuthorityTypo", "[oob]\nunknown_authority = \"nodes\"\n", "oob.unknown_authority", 2, 21,
     {"expected \"node\" (the node report) or \"error\" (NOT_FOUND), got \"nodes\"", "did you mean \"node\"?"}},
    {"DefaultIntervalTooShort", "[oob]\ndefault_interval = \"1ms\"\n", "oob.default_interval", 2, 20,
     {"must be from 10ms to 1h, got \"1ms\""}},
    {"DefaultIntervalTooLong", "[oob]\ndefault_interval = \"2h\"\n", "oob.default_interval", 2, 20,
     {"must be from 10ms to 1h"}},
    {"UnknownKey", "[oob]\nlistem = []\n", "oob.listem", 2, 1, {"did you mean \"listen\"?"}},
    {"RepeatedTable", "[[oob]]\nlisten = []\n", "oob", 1, 1, {"expected a table ([oob]), got array"}},
};
INSTANTIATE_TEST_SUITE_P(Table, OobConfigErrors, ::testing::ValuesIn(kOobErrorCases),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace headroom::agent
