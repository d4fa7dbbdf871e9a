// SPDX-License-Identifier: Apache-2.0
// ORCA response headers: the TEXT and BIN values round-trip to the same report,
// never carry what Envoy would reject, and the parsers reject what Envoy
// rejects. Examples marked "Envoy" are taken from the cases in Envoy's
// test/common/orca/orca_parser_test.cc.
#include "headroom/orca/load_header.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace headroom::orca {
namespace {

using google::protobuf::util::MessageDifferencer;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

::testing::AssertionResult same(const Report& want, const Report& got) {
  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  if (d.Compare(want, got)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diff;
}

Report node_report() {
  Report r;
  r.set_cpu_utilization(0.7312);
  r.set_mem_utilization(0.3);
  r.set_application_utilization(0.7312);
  auto& u = *r.mutable_utilization();
  u["cpu"] = 0.7312;
  u["memory"] = 0.3;
  u["cpu.pressure"] = 0.05;
  u["memory.pressure"] = 0;
  u["io.pressure"] = 0.0123;
  auto& nm = *r.mutable_named_metrics();
  nm["headroom.timestamp_ms"] = 1700000000123;
  nm["headroom.seq"] = 42;
  nm["headroom.interval_ms"] = 100;
  nm["headroom.cpu.busy"] = 0.61;
  nm["headroom.cpu.saturation"] = 0.1212;
  nm["headroom.cpu.capacity"] = 2;
  nm["headroom.memory.used_bytes"] = 2.5e9;
  return r;
}

// ---------------------------------------------------------------- base64

TEST(Base64, Rfc4648Vectors) {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},         {"f", "Zg=="},     {"fo", "Zm8="},
                                                        {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                                        {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain), encoded) << plain;
    auto d = base64_decode(encoded);
    ASSERT_TRUE(d) << encoded << ": " << d.error().message;
    EXPECT_EQ(*d, plain);
    // Unpadded, as grpc-go sends it.
    const std::string unpadded = encoded.substr(0, encoded.find('='));
    auto u = base64_decode(unpadded);
    ASSERT_TRUE(u) << unpadded << ": " << u.error().message;
    EXPECT_EQ(*u, plain);
  }
}

TEST(Base64, UsesTheStandardAlphabet) {
  EXPECT_EQ(base64_encode(std::string("\xfb\xff\xbf", 3)), "+/+/");
  EXPECT_EQ(*base64_decode("+/+/"), std::string("\xfb\xff\xbf", 3));
}

TEST(Base64, EveryByteAndLengthRoundTrips) {
  std::mt19937 rng(7);
  for (std::size_t len = 0; len < 300; ++len) {
    std::string bytes(len, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng() & 0xff);
    const std::string e = base64_encode(bytes);
    EXPECT_EQ(e.size() % 4, 0u);
    auto d = base64_decode(e);
    ASSERT_TRUE(d) << e;
    EXPECT_EQ(*d, bytes);
  }
}

TEST(Base64, RejectsMalformedInput) {
  for (const char* bad : {"Z", "Zg=", "Zm9vY", "Zh==", "Zm9=", "Zm9v!", "Zg==Zg==", "Zm 9v", "Zm9v\n", "===",
                          "Zm-_", "=Zm9"}) {
    auto d = base64_decode(bad);
    EXPECT_FALSE(d) << "accepted \"" << bad << "\"";
  }
}

// ---------------------------------------------------------------- TEXT

TEST(TextHeader, TypicalNodeReport) {
  EXPECT_EQ(text_header_value(node_report()),
            "TEXT cpu_utilization=0.7312,mem_utilization=0.3,application_utilization=0.7312,"
            "named_metrics.headroom.cpu.busy=0.61,named_metrics.headroom.cpu.capacity=2,"
            "named_metrics.headroom.cpu.saturation=0.1212,named_metrics.headroom.interval_ms=100,"
            "named_metrics.headroom.memory.used_bytes=2.5e+09,named_metrics.headroom.seq=42,"
            "named_metrics.headroom.timestamp_ms=1700000000123,"
            "utilization.cpu=0.7312,utilization.cpu.pressure=0.05,utilization.io.pressure=0.0123,"
            "utilization.memory=0.3,utilization.memory.pressure=0");
}

TEST(TextHeader, ZeroTopLevelFieldsAreOmittedButCpuUtilizationIsAlwaysThere) {
  EXPECT_EQ(text_header_value(Report()), "TEXT cpu_utilization=0");
  Report r;
  r.set_eps(2);
  EXPECT_EQ(text_header_value(r), "TEXT cpu_utilization=0,eps=2");
  r.set_cpu_utilization(-0.0);
  EXPECT_EQ(text_header_value(r), "TEXT cpu_utilization=0,eps=2");
}

TEST(TextHeader, EnvoysExampleParses) {
  Report want;  // Envoy
  want.set_cpu_utilization(0.7);
  want.set_application_utilization(0.8);
  want.set_mem_utilization(0.9);
  want.set_eps(2);
  want.set_rps_fractional(1000);
  (*want.mutable_named_metrics())["foo"] = 123;
  (*want.mutable_named_metrics())["bar"] = 0.2;
  (*want.mutable_utilization())["total"] = 0.5;
  for (const char* v :
       {"TEXT cpu_utilization=0.7,application_utilization=0.8,mem_utilization=0.9,rps_fractional=1000,eps=2,"
        "named_metrics.foo=123,named_metrics.bar=0.2,utilization.total=0.5",
        // The original colon syntax, still accepted.
        "TEXT cpu_utilization:0.7,application_utilization:0.8,mem_utilization:0.9,rps_fractional:1000,eps:2,"
        "named_metrics.foo:123,named_metrics.bar:0.2,utilization.total:0.5",
        // Whitespace around tokens and empty tokens are skipped; '+' and
        // exponents are numbers to absl::SimpleAtod.
        "TEXT  cpu_utilization=0.7 ,\tapplication_utilization=+0.8,, mem_utilization=9e-1,rps_fractional=1e3,"
        "eps=2.0,named_metrics.foo=123,named_metrics.bar=.2,utilization.total=0.50,"}) {
    auto r = parse_text_header_value(v);
    ASSERT_TRUE(r) << v << ": " << r.error().message;
    EXPECT_TRUE(same(want, *r)) << v;
  }
}

struct RejectCase {
  std::string value;
  std::string error_has;  // the offending key, or what is wrong
};

TEST(TextHeader, ParserRejectsTheWholeHeaderLikeEnvoy) {
  const RejectCase cases[] = {
      {"BAD random-value", "\"BAD\""},  // Envoy
      {"", "unsupported format"},
      {"TEXT", "\"TEXT\""},
      {"text cpu_utilization=1", "\"text\""},
      {"JSON {\"cpu_utilization\": 0.7}", "\"JSON\""},
      {"BIN CQAAAAAAAOA/", "\"BIN\""},
      {"TEXT cpu_utilization=-1", "cpu_utilization: value cannot be negative"},  // Envoy
      {"TEXT eps=-0.5", "eps: value cannot be negative"},
      {"TEXT named_metrics.foo=-3", "named_metrics.foo: value cannot be negative"},
      {"TEXT cpu_utilization=nan", "cpu_utilization: value cannot be NaN"},  // Envoy
      {"TEXT cpu_utilization=NaN", "NaN"},
      {"TEXT utilization.x=inf", "utilization.x: value cannot be infinite"},  // Envoy
      {"TEXT utilization.x=infinity", "utilization.x: value cannot be infinite"},
      {"TEXT rps_fractional=1e400", "rps_fractional"},
      {"TEXT cpu_utilization=0.7,cpu_utilization=0.8", "cpu_utilization: appears more than once"},  // Envoy
      {"TEXT named_metrics.foo=123,named_metrics.duplicate=123,named_metrics.duplicate=0.2",
       "named_metrics.duplicate: appears more than once"},  // Envoy
      {"TEXT utilization.a=0.1, utilization.a:0.2", "utilization.a: appears more than once"},
      {"TEXT cpu_utilization=0.7,unsupported_metric=0.8", "unsupported_metric: unsupported metric name"},  // Envoy
      {"TEXT request_cost.db=3", "request_cost.db: unsupported metric name"},
      {"TEXT rps=3", "rps: unsupported metric name"},
      {"TEXT cpu_utilization =0.7", "cpu_utilization : unsupported metric name"},
      {"TEXT named_metrics.=123", "named metric key is empty"},      // Envoy
      {"TEXT utilization.=0.9", "utilization metric key is empty"},  // Envoy
      {"TEXT not-a-list-of-key-value-pairs", "not-a-list-of-key-value-pairs: empty value"},  // Envoy
      {"TEXT eps=", "eps: empty value"},
      {"TEXT =0.5", "empty metric name"},
      {"TEXT cpu_utilization=\"0.7\"", "cpu_utilization: cannot parse"},  // Envoy
      {"TEXT cpu_utilization=+-1", "cpu_utilization: cannot parse"},
      {"TEXT cpu_utilization=0x10", "cpu_utilization: cannot parse"},
      {"TEXT cpu_utilization=1.5abc", "cpu_utilization: cannot parse"},
      {"TEXT cpu_utilization=1 2", "cpu_utilization: cannot parse"},
  };
  for (const auto& c : cases) {
    auto r = parse_text_header_value(c.value);
    ASSERT_FALSE(r) << "accepted \"" << c.value << "\"";
    EXPECT_NE(r.error().message.find(c.error_has), std::string::npos)
        << "\"" << c.value << "\" -> " << r.error().message << "\nexpected to contain: " << c.error_has;
    EXPECT_EQ(r.error().message.rfind("endpoint-load-metrics: ", 0), 0u) << r.error().message;
  }
}

// ---------------------------------------------------------------- BIN

TEST(BinHeader, ValueFromGrpcGoDecodesPaddedOrNot) {
  Report want;  // Envoy: a header captured from a grpc-go backend
  want.set_cpu_utilization(0.5);
  want.set_rps_fractional(100);
  want.set_eps(2);
  (*want.mutable_named_metrics())["rif"] = 4;
  for (const char* v : {"CQAAAAAAAOA/MQAAAAAAAFlAOQAAAAAAAABAQg4KA3JpZhEAAAAAAAAQQA",
                        "CQAAAAAAAOA/MQAAAAAAAFlAOQAAAAAAAABAQg4KA3JpZhEAAAAAAAAQQA=="}) {
    auto r = parse_bin_header_value(v);
    ASSERT_TRUE(r) << v << ": " << r.error().message;
    EXPECT_TRUE(same(want, *r));
  }
  // What we send is the padded form.
  EXPECT_EQ(bin_header_value(want), "CQAAAAAAAOA/MQAAAAAAAFlAOQAAAAAAAABAQg4KA3JpZhEAAAAAAAAQQA==");
}

TEST(BinHeader, AnEmptyReportIsNeverAnEmptyValue) {
  const std::string v = bin_header_value(Report());
  EXPECT_EQ(v, "CQAAAAAAAAAA");  // cpu_utilization = 0.0, written out
  auto r = parse_bin_header_value(v);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(same(Report(), *r));
}

TEST(BinHeader, KeysThatAreNotUtf8AreDropped) {
  // proto3 string keys must be UTF-8: protobuf (and so Envoy) refuses to
  // parse a message with an invalid one.
  Report r;
  auto& nm = *r.mutable_named_metrics();
  for (const char* key : {"ok", "caf\xc3\xa9", "\xf0\x9f\x99\x82", "\xff", "\xc3", "\xc0\xaf", "\xed\xa0\x80",
                          "\xf4\x90\x80\x80", "a\x80"})
    nm[key] = 1;
  auto b = parse_bin_header_value(bin_header_value(r));
  ASSERT_TRUE(b) << b.error().message;
  std::set<std::string> keys;
  for (const auto& [k, v] : b->named_metrics()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"ok", "caf\xc3\xa9", "\xf0\x9f\x99\x82"}));
}

TEST(BinHeader, IsDeterministic) {
  Report a, b;
  for (int i = 0; i < 100; ++i) (*a.mutable_named_metrics())["k" + std::to_string(i)] = i;
  for (int i = 99; i >= 0; --i) (*b.mutable_named_metrics())["k" + std::to_string(i)] = i;
  EXPECT_EQ(bin_header_value(a), bin_header_value(b));
}

TEST(BinHeader, ParserRejectsBadValues) {
  auto with = [](auto set) {
    Report r;
    set(r);
    return base64_encode(r.SerializeAsString());
  };
  const RejectCase cases[] = {
      {"", "empty value"},  // Envoy
      {"not-a-valid-binary-proto", "base64"},  // Envoy
      {base64_encode("\xff\xff\xff"), "not a valid"},
      {"AA", "not a valid"},  // one zero byte: field number 0
      {with([](Report& r) { r.set_cpu_utilization(-1); }), "cpu_utilization is negative"},
      {with([](Report& r) { r.set_eps(kNaN); }), "eps is NaN"},
      {with([](Report& r) { (*r.mutable_utilization())["cpu"] = kInf; }), "utilization.cpu is infinite"},
      {with([](Report& r) { (*r.mutable_named_metrics())["x.y"] = -kInf; }), "named_metrics.x.y is infinite"},
      {with([](Report& r) { (*r.mutable_request_cost())["db"] = -2; }), "request_cost.db is negative"},
  };
  for (const auto& c : cases) {
    auto r = parse_bin_header_value(c.value);
    ASSERT_FALSE(r) << "accepted \"" << c.value << "\"";
    EXPECT_NE(r.error().message.find(c.error_has), std::string::npos)
        << "\"" << c.value << "\" -> " << r.error().message << "\nexpected to contain: " << c.error_has;
    EXPECT_EQ(r.error().message.rfind("endpoint-load-metrics-bin: ", 0), 0u) << r.error().message;
  }
}

// ---------------------------------------------------------------- round trips

struct RoundTrip {
  std::string name;
  Report report;
  Report text_expect;  // what TEXT can carry: the report minus skipped keys
};

std::vector<RoundTrip> round_trips() {
  std::vector<RoundTrip> v;
  v.push_back({"node", node_report(), node_report()});
  v.push_back({"zero", Report(), Report()});
  {
    Report r;  // every field set to zero explicitly: the same as empty
    (*r.mutable_utilization())["cpu"] = 0;
    (*r.mutable_named_metrics())["headroom.stopped"] = 0;
    v.push_back({"zero_entries", r, r});
  }
  {
    Report r;
    r.set_cpu_utilization(std::numeric_limits<double>::max());
    r.set_application_utilization(1e300);
    r.set_rps_fractional(std::numeric_limits<double>::denorm_min());
    r.set_eps(std::numeric_limits<double>::min());
    r.set_mem_utilization(1.0);
    (*r.mutable_named_metrics())["pi"] = std::numbers::pi;
    (*r.mutable_named_metrics())["sum"] = 0.1 + 0.2;
    (*r.mutable_named_metrics())["big"] = 9007199254740993.0;
    (*r.mutable_named_metrics())["tiny"] = 1e-300;
    (*r.mutable_utilization())["almost_one"] = std::nextafter(1.0, 0.0);
    (*r.mutable_utilization())["smallest"] = std::numeric_limits<double>::denorm_min();
    v.push_back({"huge_and_tiny", r, r});
  }
  {
    Report r;
    r.set_cpu_utilization(3.5);  // oversubscribed: above 1 is fine here
    for (int i = 0; i < 500; ++i) {
      (*r.mutable_named_metrics())["metric." + std::to_string(i)] = i * 1.25;
      (*r.mutable_utilization())["u" + std::to_string(i)] = i / 500.0;
    }
    v.push_back({"many_entries", r, r});
  }
  {
    Report r;
    r.set_cpu_utilization(0.5);
    (*r.mutable_utilization())["cpu.pressure"] = 0.25;
    (*r.mutable_named_metrics())["a.b.c.d"] = 1;
    (*r.mutable_named_metrics())["named_metrics.x"] = 2;  // the prefix twice
    (*r.mutable_named_metrics())["utilization.y"] = 3;
    (*r.mutable_named_metrics())["!#$%&'*+-.^_`|~\"()/;<>?@[\\]{}"] = 4;
    v.push_back({"dotted_and_punctuated_keys", r, r});
  }
  {
    Report r;
    r.set_cpu_utilization(0.5);
    (*r.mutable_named_metrics())["ok"] = 1;
    Report text = r;
    for (const char* bad : {"a,b", "a=b", "a:b", "a b", "tab\there", "", "caf\xc3\xa9", "new\nline"}) {
      (*r.mutable_named_metrics())[bad] = 7;
      (*r.mutable_utilization())[bad] = 0.7;
    }
    r.mutable_utilization()->erase("");  // keep empty keys in named_metrics only
    (*r.mutable_request_cost())["db_ms"] = 12;  // not expressible in TEXT
    v.push_back({"unsafe_keys_skipped_in_text", r, text});
  }
  return v;
}

// The BIN header keeps keys TEXT cannot carry, but drops empty ones.
Report bin_expect(const RoundTrip& c) {
  Report r = c.report;
  r.mutable_named_metrics()->erase("");
  return r;
}

TEST(HeaderRoundTrip, TextAndBinRestoreTheReport) {
  for (const auto& c : round_trips()) {
    SCOPED_TRACE(c.name);
    const std::string text = text_header_value(c.report);
    auto t = parse_text_header_value(text);
    ASSERT_TRUE(t) << text << "\n" << t.error().message;
    EXPECT_TRUE(same(c.text_expect, *t)) << text;

    const std::string bin = bin_header_value(c.report);
    auto b = parse_bin_header_value(bin);
    ASSERT_TRUE(b) << bin << "\n" << b.error().message;
    EXPECT_TRUE(same(bin_expect(c), *b));
  }
}

// ---------------------------------------------------------------- property

// Random reports, about a third of their values ones Envoy would reject, and
// keys drawn partly from characters the TEXT syntax cannot carry.
class RandomReports {
 public:
  explicit RandomReports(uint32_t seed) : rng_(seed) {}

  double value() {
    switch (pick(12)) {
      case 0: return kNaN;
      case 1: return kInf;
      case 2: return -kInf;
      case 3: return -uniform(0, 10);
      case 4: return 0.0;
      case 5: return -0.0;
      case 6: return std::numeric_limits<double>::max();
      case 7: return uniform(1, 5);  // above 1
      case 8: return std::numeric_limits<double>::denorm_min();
      default: return uniform(0, 1);
    }
  }
  // "\xc3\xa9" is UTF-8 for U+00E9; a lone "\xff" makes the key invalid UTF-8.
  std::string key() {
    static const std::vector<std::string> units = {"a", "b", "x", "0", "9", ".", "_", "-", ",", "=",  ":",
                                                   " ", "\t", "\x01", "\x7f", "/", "+", "\xc3\xa9", "\xff"};
    std::string k;
    const int len = pick(6);
    for (int i = 0; i < len; ++i) k += units[static_cast<std::size_t>(pick(static_cast<int>(units.size())))];
    return k;
  }
  Report report() {
    Report r;
    r.set_cpu_utilization(value());
    r.set_mem_utilization(value());
    r.set_application_utilization(value());
    r.set_rps_fractional(value());
    r.set_eps(value());
    for (int i = pick(8); i > 0; --i) (*r.mutable_named_metrics())[key()] = value();
    for (int i = pick(8); i > 0; --i) (*r.mutable_utilization())[key()] = value();
    for (int i = pick(3); i > 0; --i) (*r.mutable_request_cost())[key()] = value();
    return r;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  std::mt19937 rng_;
};

bool usable(double v) { return std::isfinite(v) && v >= 0; }

void expect_all_usable(const Report& r, const std::string& context) {
  for (double v : {r.cpu_utilization(), r.mem_utilization(), r.application_utilization(), r.rps_fractional(), r.eps()})
    EXPECT_TRUE(usable(v) && !std::signbit(v)) << context;
  for (const auto* m : {&r.named_metrics(), &r.utilization(), &r.request_cost()})
    for (const auto& [k, v] : *m) {
      EXPECT_TRUE(usable(v) && !std::signbit(v)) << context << " key " << k;
      EXPECT_FALSE(k.empty()) << context;
    }
  EXPECT_LE(r.mem_utilization(), 1.0) << context;
  for (const auto& [k, v] : r.utilization()) EXPECT_LE(v, 1.0) << context << " key " << k;
}

TEST(HeaderProperty, RandomReportsNeverYieldAHeaderEnvoyWouldReject) {
  RandomReports gen(20240601);
  for (int i = 0; i < 3000; ++i) {
    const Report in = gen.report();
    const std::string text = text_header_value(in);
    const std::string context = "report #" + std::to_string(i) + ": " + text;

    // The syntax: prefix, then visible ASCII only, never ending in a space.
    ASSERT_EQ(text.rfind("TEXT ", 0), 0u) << context;
    ASSERT_GT(text.size(), 5u) << context;
    for (std::size_t k = 5; k < text.size(); ++k)
      ASSERT_TRUE(text[k] > 0x20 && text[k] < 0x7f) << context;

    // No key twice, checked on the raw text rather than through the parser.
    std::set<std::string> keys;
    for (std::size_t pos = 5; pos <= text.size();) {
      const auto comma = std::min(text.find(',', pos), text.size());
      const std::string token = text.substr(pos, comma - pos);
      ASSERT_TRUE(keys.insert(token.substr(0, token.find('='))).second) << context;
      pos = comma + 1;
    }

    auto t = parse_text_header_value(text);
    ASSERT_TRUE(t) << context << "\n" << t.error().message;
    expect_all_usable(*t, context);

    // Nothing usable and expressible was lost.
    for (const auto& [k, v] : in.named_metrics()) {
      const bool expressible = usable(v) && !k.empty() && k.find_first_of(",=: \t\x01\x7f\xc3\xa9\xff") == std::string::npos;
      EXPECT_EQ(t->named_metrics().contains(k), expressible) << context << " key " << k;
      if (expressible) {
        EXPECT_EQ(t->named_metrics().at(k), v) << context;
      }
    }
    if (usable(in.cpu_utilization())) {
      EXPECT_EQ(t->cpu_utilization(), in.cpu_utilization()) << context;
    }

    const std::string bin = bin_header_value(in);
    auto b = parse_bin_header_value(bin);
    ASSERT_TRUE(b) << context << "\nbin " << bin << "\n" << b.error().message;
    expect_all_usable(*b, context);
    const auto usable_costs = std::count_if(in.request_cost().begin(), in.request_cost().end(),
                                            [](const auto& e) {
                                              return !e.first.empty() && e.first.find('\xff') == std::string::npos &&
                                                     usable(e.second);
                                            });
    EXPECT_EQ(b->request_cost().size(), static_cast<std::size_t>(usable_costs)) << context;
  }
}

}  // namespace
}  // namespace headroom::orca
