// SPDX-License-Identifier: Apache-2.0
// [prometheus]: listen addresses, the textfile's name and interval, and the
// placed errors for each way of getting them wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/config/config.h"
#include "agent/config/config_checks.h"
#include "config_cases.h"

namespace headroom::agent {
namespace {

using namespace std::chrono_literals;
using config_cases::ErrorCase;
using config_cases::expect_error_case;
using config_cases::must_parse;

TEST(PrometheusConfig, OffByDefault) {
  const Config c = must_parse("");
  EXPECT_EQ(c.prometheus.listen, "");
  EXPECT_EQ(c.prometheus.textfile, "");
  EXPECT_EQ(c.prometheus.textfile_interval, 15s);
  EXPECT_EQ(must_parse("[prometheus]\nlisten = \"\"\ntextfile = \"\"\n"), Config{});
}

TEST(PrometheusConfig, EveryKeySet) {
  const Config c = must_parse(R"(
[prometheus]
listen = "[::1]:9446"
textfile = "/var/lib/prometheus/node-exporter/./headroom.prom"
textfile_interval = "30s"
)");
  EXPECT_EQ(c.prometheus.listen, "[::1]:9446");
  EXPECT_EQ(c.prometheus.textfile, "/var/lib/prometheus/node-exporter/headroom.prom");  // normalized
  EXPECT_EQ(c.prometheus.textfile_interval, 30s);
}

TEST(PrometheusConfig, ReloadSeesAChange) {
  EXPECT_NE(must_parse("prometheus.listen = \"127.0.0.1:9446\""), must_parse("prometheus.listen = \"127.0.0.1:9447\""));
  EXPECT_EQ(must_parse("prometheus.listen = \"127.0.0.1:9446\""), must_parse("prometheus.listen = \"127.0.0.1:9446\""));
}

struct ListenCase {
  const char* address;
  bool ok;
  const char* message_part;  // of the error, when !ok
};

class ListenAddresses : public ::testing::TestWithParam<ListenCase> {};

TEST_P(ListenAddresses, AcceptIpLiteralsAndPortsOnly) {
  const ListenCase& c = GetParam();
  const auto r = check_listen_address(c.address);
  if (c.ok) {
    EXPECT_TRUE(r.ok()) << c.address << ": " << r.error().message;
  } else {
    ASSERT_FALSE(r.ok()) << c.address << " was accepted";
    EXPECT_THAT(r.error().message, ::testing::HasSubstr(c.message_part)) << c.address;
  }
}

const ListenCase kListenCases[] = {
    {"127.0.0.1:9446", true, ""},
    {"0.0.0.0:1", true, ""},
    {"10.1.2.3:65535", true, ""},
    {"[::1]:9446", true, ""},
    {"[::]:9446", true, ""},
    {"[fe80::1]:80", true, ""},
    {"9446", false, "must be an IP address and a port"},
    {":9446", false, "\"127.0.0.1:9446\" for this machine only"},
    {"127.0.0.1:", false, "must be an IP address and a port"},
    {"127.0.0.1:0", false, "from 1 to 65535"},
    {"127.0.0.1:65536", false, "from 1 to 65535"},
    {"127.0.0.1:99999999999", false, "from 1 to 65535"},
    {"127.0.0.1:94x6", false, "from 1 to 65535"},
    {"::1:9446", false, "an IPv6 address goes in brackets: write \"[::1]:9446\""},
    {"[::1:9446", false, "an IPv6 address goes in brackets"},
    {"[not-v6]:9446", false, "is not an IPv6 address"},
    {"[]:9446", false, "is not an IPv4 address"},
    {"localhost:9446", false, "write the address, not a host name: \"127.0.0.1:9446\" or \"[::1]:9446\""},
    {"metrics.example:9446", false, "is not an IPv4 address (host names are not resolved)"},
    {"127.0.0.256:9446", false, "is not an IPv4 address"},
};

INSTANTIATE_TEST_SUITE_P(Table, ListenAddresses, ::testing::ValuesIn(kListenCases),
                         [](const ::testing::TestParamInfo<ListenCase>& p) { return "case" + std::to_string(p.index); });

class PrometheusConfigErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(PrometheusConfigErrors, ReportsKeyPlaceAndMessage) { expect_error_case(GetParam()); }

const ErrorCase kErrorCases[] = {
    {"ListenHostName", "[prometheus]\nlisten = \"localhost:9446\"\n", "prometheus.listen", 2, 10,
     {"write the address, not a host name"}},
    {"ListenNotAString", "[prometheus]\nlisten = 9446\n", "prometheus.listen", 2, 10,
     {"expected an address string such as \"127.0.0.1:9446\", got"}},
    {"TextfileRelative", "[prometheus]\ntextfile = \"headroom.prom\"\n", "prometheus.textfile", 2, 12, {"absolute"}},
    {"TextfileWrongSuffix", "[prometheus]\ntextfile = \"/var/lib/prometheus/node-exporter/headroom.txt\"\n",
     "prometheus.textfile", 2, 12, {"must end in \".prom\"", "node_exporter's textfile collector"}},
    {"TextfileIsADirectory", "[prometheus]\ntextfile = \"/var/lib/prometheus/node-exporter/\"\n",
     "prometheus.textfile", 2, 12, {"must name a file"}},
    {"TextfileHidden", "[prometheus]\ntextfile = \"/var/lib/x/.headroom.prom\"\n", "prometheus.textfile", 2, 12,
     {"must not start with \".\""}},
    {"TextfileIntervalTooShort", "[prometheus]\ntextfile_interval = \"10ms\"\n", "prometheus.textfile_interval", 2,
     21, {"must be at least \"100ms\", got \"10ms\""}},
    {"TextfileIntervalTooLong", "[prometheus]\ntextfile_interval = \"2h\"\n", "prometheus.textfile_interval", 2, 21,
     {"must be at most \"1h\""}},
    {"UnknownKey", "[prometheus]\nlisen = \"127.0.0.1:9446\"\n", "prometheus.lisen", 2, 1,
     {"unknown key \"lisen\" in [prometheus]; did you mean \"listen\"?"}},
    {"UnknownKeyNothingClose", "[prometheus]\nport = 9446\n", "prometheus.port", 2, 1,
     {"valid keys in [prometheus] are listen, textfile, textfile_interval"}},
    {"KeyInWrongTable", "[agent]\ntextfile = \"/x/h.prom\"\n", "agent.textfile", 2, 1,
     {"\"textfile\" belongs in [prometheus]"}},
    {"RepeatedTable", "[[prometheus]]\nlisten = \"127.0.0.1:9446\"\n", "prometheus", 1, 1,
     {"expected a table ([prometheus]), got array"}},
};

INSTANTIATE_TEST_SUITE_P(Table, PrometheusConfigErrors, ::testing::ValuesIn(kErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace headroom::agent
