// SPDX-License-Identifier: Apache-2.0
// loadgen::parse_response (agent/ctl/http_response.h): complete, incomplete and
// malformed HTTP/1.x responses, as tables; and every response fed in pieces,
// which must stay incomplete until its last byte.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <string>
#include <vector>

#include "agent/ctl/loadgen.h"
#include "agent/ctl/loadgen_plan.h"

namespace {

namespace lg = headroom::ctl::loadgen;

// Options the engine accepts: one IPv4 instance, one empty phase, one class.
lg::Options valid_options() {
  lg::Options o;
  o.target.addr.ss_family = AF_INET;
  o.target.addr_len = sizeof(sockaddr_in);
  o.phases = {{std::chrono::milliseconds(0), 10}};
  o.classes = {{"", 1}};
  return o;
}

struct Case {
  const char* name;
  std::string data;
  long consumed;  // expected: 0 incomplete, -1 malformed, else bytes
  int status = 0;
  bool close = false;
};

constexpr long kWhole = -2;  // complete_cases(): the response is all of `data`

lg::ParsedResponse parse(const std::string& s) { return lg::parse_response(s.data(), s.size()); }

const std::string kOk = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";
const std::string kChunked =
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    "4\r\nWiki\r\n"
    "6;name=value\r\npedia \r\n"
    "E\r\nin \r\n\r\nchunks.\r\n"
    "0\r\n"
    "Trailer: x\r\n"
    "\r\n";

std::vector<Case> complete_cases() {
  return {
      {"content-length", kOk, kWhole, 200, false},
      {"content-length zero", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", kWhole, 503, false},
      {"header names any case", "HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh:   2  \r\n\r\nhi", kWhole, 200, false},
      {"no reason phrase", "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", kWhole, 404, false},
      {"bare LF line ends", "HTTP/1.1 200 OK\nContent-Length: 2\n\nhi", kWhole, 200, false},
      {"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", kWhole, 200, true},
      {"connection token list", "HTTP/1.1 200 OK\r\nConnection: Upgrade, Close\r\nContent-Length: 0\r\n\r\n", kWhole,
       200, true},
      {"http/1.0 closes", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", kWhole, 200, true},
      {"http/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi", kWhole, 200,
       false},
      {"204 has no body", "HTTP/1.1 204 No Content\r\n\r\n", kWhole, 204, false},
      {"204 ignores content-length", "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", kWhole, 204, false},
      {"304 has no body", "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", kWhole, 304, false},
      {"100 continue skipped", "HTTP/1.1 100 Continue\r\n\r\n" + kOk, kWhole, 200, false},
      {"two 1xx skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + kOk, kWhole,
       200, false},
      {"chunked", kChunked, kWhole, 200, false},
      {"chunked, last chunk only", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", kWhole, 200,
       false},
      {"chunked with coding list", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
       kWhole, 200, false},
      {"chunk size in upper-case hex",
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n", kWhole, 200, false},
      // Only the first response: what follows is the next one's.
      {"stops at its end", kOk + kOk, static_cast<long>(kOk.size()), 200, false},
      {"folded header line ignored", "HTTP/1.1 200 OK\r\nX-A: 1\r\n  continued\r\nContent-Length: 0\r\n\r\n", kWhole,
       200, false},
      {"same content-length twice", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", kWhole, 200,
       false},
  };
}

std::vector<Case> incomplete_cases() {
  return {
      {"empty", "", 0},
      {"part of the version", "HTTP/1", 0},
      {"status line only", "HTTP/1.1 200 OK\r\n", 0},
      {"headers without blank line", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n", 0},
      {"half of the final CRLF", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r", 0},
      {"body short", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok", 0},
      {"1xx without the final response", "HTTP/1.1 100 Continue\r\n\r\n", 0},
      {"1xx and part of the final", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", 0},
      {"chunk data short", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWi", 0},
      {"chunk without its CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki", 0},
      {"no last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n", 0},
      {"last chunk without blank line", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", 0},
      {"in the trailers", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nTrailer: x\r\n", 0},
      // No length: the body runs to the end of the connection, which this
      // function does not see.
      {"body until close", "HTTP/1.1 200 OK\r\n\r\nsome bytes", 0},
      {"http/1.0 body until close", "HTTP/1.0 200 OK\r\n\r\nsome bytes", 0},
      {"other transfer coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx", 0},
  };
}

std::vector<Case> malformed_cases() {
  return {
      {"not http", "SSH-2.0-OpenSSH_9.2\r\n", -1},
      {"garbage start is seen at once", "<html>", -1},
      {"http/2 preface", "HTTP/2 200\r\n\r\n", -1},
      {"http/1.x only", "HTTP/1.x 200 OK\r\n\r\n", -1},
      {"status not digits", "HTTP/1.1 2O0 OK\r\n\r\n", -1},
      {"status with 4 digits", "HTTP/1.1 2000 OK\r\n\r\n", -1},
      {"status below 100", "HTTP/1.1 099 Odd\r\n\r\n", -1},
      {"status missing", "HTTP/1.1\r\n\r\n", -1},
      {"header without colon", "HTTP/1.1 200 OK\r\nContent-Length 3\r\n\r\nok\n", -1},
      {"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 3\r\n\r\nok\n", -1},
      {"content-length not a number", "HTTP/1.1 200 OK\r\nContent-Length: 3x\r\n\r\nok\n", -1},
      {"content-length negative", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", -1},
      {"content-length empty", "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", -1},
      {"content-lengths differ", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", -1},
      {"content-length huge", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", -1},
      {"chunked and content-length",
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", -1},
      {"chunk size not hex", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", -1},
      {"chunk size junk after", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4 x\r\nWiki\r\n0\r\n\r\n", -1},
      {"chunk data too long", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nWiki\r\n0\r\n\r\n", -1},
      {"switching protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", -1},
      {"interim then garbage", "HTTP/1.1 100 Continue\r\n\r\nnonsense", -1},
      {"endless headers", "HTTP/1.1 200 OK\r\n" + std::string(70 * 1024, 'a'), -1},
  };
}

long expected(const Case& c) { return c.consumed == kWhole ? static_cast<long>(c.data.size()) : c.consumed; }

void check(const Case& c) {
  SCOPED_TRACE(c.name);
  const auto r = parse(c.data);
  EXPECT_EQ(r.consumed, expected(c));
  if (expected(c) > 0) {
    EXPECT_EQ(r.status, c.status);
    EXPECT_EQ(r.close, c.close);
  }
}

TEST(LoadgenParse, CompleteResponses) {
  for (const auto& c : complete_cases()) check(c);
}

TEST(LoadgenParse, IncompleteResponses) {
  for (const auto& c : incomplete_cases()) check(c);
}

TEST(LoadgenParse, MalformedResponses) {
  for (const auto& c : malformed_cases()) check(c);
}

// Every proper prefix of a complete response is incomplete (or already seen
// as malformed, never complete); the whole is complete. This is what the
// engine sees when a response is split across reads at any byte.
TEST(LoadgenParse, EveryPrefixOfACompleteResponseIsIncomplete) {
  for (const auto& c : complete_cases()) {
    if (c.name == std::string("stops at its end")) continue;
    SCOPED_TRACE(c.name);
    for (std::size_t n = 0; n < static_cast<std::size_t>(expected(c)); ++n) {
      const auto r = lg::parse_response(c.data.data(), n);
      ASSERT_EQ(r.consumed, 0) << "prefix of " << n << " bytes";
    }
    EXPECT_EQ(lg::parse_response(c.data.data(), c.data.size()).consumed, expected(c));
  }
}

// A chunked body cut at every pair of points (three reads) parses the same
// once all of it is there; the chunk boundaries fall inside sizes, data and CRLFs.
TEST(LoadgenParse, ChunkedSplitAcrossReads) {
  std::string buffer;
  for (std::size_t a = 1; a < kChunked.size(); a += 3) {
    for (std::size_t b = a; b < kChunked.size(); b += 5) {
      buffer.assign(kChunked, 0, a);
      EXPECT_EQ(parse(buffer).consumed, 0) << a;
      buffer.append(kChunked, a, b - a);
      EXPECT_EQ(parse(buffer).consumed, 0) << a << "," << b;
      buffer.append(kChunked, b);
      const auto r = parse(buffer);
      ASSERT_EQ(r.consumed, static_cast<long>(kChunked.size())) << a << "," << b;
      EXPECT_EQ(r.status, 200);
    }
  }
}

// The engine validates its options before it opens anything: each bad one
// is an error (code 0, not a system error) that says what is wrong.
TEST(LoadgenOptions, BadOptionsAreErrors) {
  {
    const auto r = lg::run(valid_options());  // zero requests: returns at once
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->records.empty());
  }
  struct BadOption {
    const char* what;
    void (*spoil)(lg::Options&);
    const char* message;
  };
  const BadOption cases[] = {
      {"no classes", [](lg::Options& o) { o.classes.clear(); }, "loadgen: no request classes"},
      {"negative rate", [](lg::Options& o) { o.phases[0].rate = -1; }, "loadgen: a phase's rate must be >= 0"},
      {"no connections", [](lg::Options& o) { o.max_connections = 0; }, "loadgen: max_connections must be at least 1"},
      {"zero weight", [](lg::Options& o) { o.classes[0].weight = 0; },
       "loadgen: a request class's weight must be a positive number"},
      {"header injection", [](lg::Options& o) { o.classes = {{"bad\r\nInjected: yes", 1}}; },
       "loadgen: bad priority header value"},
      {"no address", [](lg::Options& o) { o.target.addr_len = 0; },
       "loadgen: the target address is not an IPv4 or IPv6 socket address"},
      {"bad stop_fd", [](lg::Options& o) { o.stop_fd = 1 << 20; }, "loadgen: stop_fd cannot be polled: Bad file descriptor"},
  };
  for (const auto& c : cases) {
    auto o = valid_options();
    c.spoil(o);
    const auto r = lg::run(o);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.error().message, c.message) << c.what;
    EXPECT_EQ(r.error().code, 0) << c.what;
  }
}

// Several instances: at most kMaxInstances, each address and path checked.
TEST(LoadgenOptions, EveryInstanceAndTheirNumberAreChecked) {
  auto o = valid_options();
  o.more_instances.assign(lg::kMaxInstances - 1, o.target);
  EXPECT_TRUE(lg::plan(o).ok()) << "64 instances";
  o.more_instances.push_back(o.target);
  auto r = lg::plan(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "loadgen: more than 64 instances of the target");

  o = valid_options();
  o.more_instances.push_back(o.target);
  o.more_instances.back().addr_len = 0;
  r = lg::plan(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "loadgen: the target address is not an IPv4 or IPv6 socket address");
  o.more_instances.back() = o.target;
  o.more_instances.back().path = "/a b";
  r = lg::plan(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "loadgen: bad request target '/a b'");
}

}  // namespace
