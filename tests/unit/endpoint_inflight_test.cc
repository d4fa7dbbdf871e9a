// SPDX-License-Identifier: Apache-2.0
// The arithmetic of a request in flight (probes/ebpf/endpoint_abi.h's
// hr_server_time, probes/endpoint_probe.h's account_inflight): its server
// time, with the client's pauses taken off, and which totals it counts in;
// and which first bytes are taken for an HTTP/1 request line.
// The kernel side keeps the fields; these tables say what they mean.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "probes/endpoint_probe.h"

namespace headroom::probes {
namespace {

constexpr uint64_t kMs = 1'000'000;

hr_inflight request(uint64_t start_ms, uint64_t paused_ms, uint64_t last_ms, uint16_t flags, uint32_t ep = 0,
                    uint16_t port = 8080) {
  hr_inflight r{};
  r.start_ns = start_ms * kMs;
  r.paused_ns = paused_ms * kMs;
  r.last_ns = last_ms * kMs;
  r.ep = ep;
  r.port = port;
  r.flags = flags;
  return r;
}

TEST(ServerTime, TheClientsPausesAreNotServerTime) {
  struct Case {
    const char* what;
    hr_inflight r;
    uint64_t now_ms;
    uint64_t want_ms;
  };
  const Case cases[] = {
      {"one piece, being worked on: its whole age", request(100, 0, 100, 0), 350, 250},
      {"one piece, read entirely: still its whole age (the server may be working)",
       request(100, 0, 100, HR_F_DRAINED), 350, 250},
      {"one piece, not read yet (a stopped server): its whole age", request(100, 0, 100, HR_F_WAITING), 5100,
       5000},
      {"in pieces, the last one unread: ages from it, pauses off", request(100, 1900, 2100, HR_F_PIECES), 2150, 150},
      {"in pieces, all read: waiting for the client, stopped at the last piece",
       request(100, 1900, 2100, HR_F_PIECES | HR_F_DRAINED), 9000, 100},
      {"slowloris, a header line every 2 s for a minute: no server time at all",
       request(0, 60000, 60000, HR_F_PIECES | HR_F_DRAINED), 61000, 0},
      {"HTTP/1, known unfinished from its first piece, read: the client's time from the start",
       request(100, 0, 100, HR_F_PIECES | HR_F_OPEN | HR_F_DRAINED), 60100, 0},
      {"HTTP/1, known unfinished, not read yet: still the client's (the server could not answer it)",
       request(100, 0, 100, HR_F_PIECES | HR_F_OPEN | HR_F_WAITING), 5100, 0},
      {"HTTP/1, unfinished after pieces: stopped at the last piece, pauses off",
       request(100, 1900, 2100, HR_F_PIECES | HR_F_OPEN), 9000, 100},
      {"not known unfinished, not read yet (a stopped server): ages from its arrival",
       request(100, 0, 100, HR_F_PIECES | HR_F_WAITING), 5100, 5000},
      {"HTTP/1, whole after being unfinished, not read: ages from its last piece",
       request(100, 2000, 2100, HR_F_PIECES | HR_F_OPEN | HR_F_WHOLE | HR_F_WAITING), 2600, 500},
      {"HTTP/1, whole after pieces, all read: the server works on it, ages from the last piece",
       request(100, 2000, 2100, HR_F_PIECES | HR_F_DRAINED | HR_F_WHOLE), 2600, 500},
      {"HTTP/1, whole in one piece, all read: its whole age", request(100, 0, 100, HR_F_DRAINED | HR_F_WHOLE),
       350, 250},
      {"clock read before the last piece's time: never negative", request(100, 0, 100, 0), 90, 0},
      {"pauses larger than the age (clock skew between CPUs): zero, not a wrap",
       request(100, 500, 400, HR_F_PIECES), 450, 0},
  };
  for (const auto& c : cases) EXPECT_EQ(hr_server_time(&c.r, c.now_ms * kMs), c.want_ms * kMs) << c.what;
}

TEST(Http1RequestLine, OnlyAMethodASpaceAndATargetLookLikeHttp1) {
  struct Case {
    const char* bytes;
    int want;
  };
  const Case cases[] = {
      {"GET / HTTP/1.1", 1},     {"POST /upload", 1},  {"OPTIONS * HTTP/1.1", 1}, {"GET http://x/ HTTP/1.1", 1},
      {"PROPFIND /d", 1},        {"GET", 0},           {"GE / HTTP/1.1", 0},      {"SET k v", 0},
      {"PING", 0},               {"get / HTTP/1.1", 0}, {"200", 0},               {"GET  /", 0},
      {"VERYLONGMETHOD /", 0},   {"", 0},
  };
  for (const auto& c : cases) {
    __u8 b[16] = {};
    std::memcpy(b, c.bytes, std::min<std::size_t>(std::strlen(c.bytes), 10));
    EXPECT_EQ(hr_http1_request_line(b), c.want) << '"' << c.bytes << '"';
  }
}

class AccountInflight : public ::testing::Test {
 protected:
  // Two endpoints on port 8080 (one with a path), one on 9090; target 100 ms, max 500 ms.
  std::vector<EndpointSpec> specs{{8080, "", 100 * kMs, 500 * kMs},
                                  {8080, "/api", 100 * kMs, 500 * kMs},
                                  {9090, "", 100 * kMs, 500 * kMs}};
  std::vector<EndpointTotals> totals = std::vector<EndpointTotals>(3);
  uint64_t unclaimed = 0;
  void add(const hr_inflight& r, uint64_t now_ms) { account_inflight(r, now_ms * kMs, specs, totals, unclaimed); }
};

TEST_F(AccountInflight, ARequestBeingServedCountsInFlightByItsServerTime) {
  add(request(0, 0, 0, 0, 1), 50);     // young
  add(request(0, 0, 0, 0, 1), 200);    // over the target
  add(request(0, 0, 0, 0, 1), 900);    // over the max
  EXPECT_EQ(totals[1].inflight, 3u);
  EXPECT_EQ(totals[1].inflight_over_target, 2u);
  EXPECT_EQ(totals[1].inflight_over_max, 1u);
  EXPECT_EQ(totals[1].inflight_age_ns, (50 + 200 + 900) * kMs);
  EXPECT_EQ(totals[0].inflight + totals[2].inflight + totals[1].pending, 0u);
}

TEST_F(AccountInflight, ARequestHeldByASlowClientIsNotLate) {
  // 10 s since its first byte, 9.9 s of it the client's pauses, now waiting for the next piece.
  add(request(0, 9900, 9950, HR_F_PIECES | HR_F_DRAINED, 0), 10000);
  EXPECT_EQ(totals[0].inflight, 1u) << "it is still in flight: concurrency counts it";
  EXPECT_EQ(totals[0].inflight_over_target, 0u);
  EXPECT_EQ(totals[0].inflight_age_ns, 50 * kMs);
}

TEST_F(AccountInflight, AnUnfinishedHttp1RequestIsNotLateReadOrNot) {
  // 5 s since its only piece, which did not end its head.
  add(request(0, 0, 0, HR_F_WAITING | HR_F_PIECES | HR_F_OPEN, 0), 5000);
  add(request(0, 0, 0, HR_F_DRAINED | HR_F_PIECES | HR_F_OPEN, 0), 5000);
  EXPECT_EQ(totals[0].pending, 1u) << "not read yet: pending, as any unread bytes";
  EXPECT_EQ(totals[0].inflight, 1u);
  EXPECT_EQ(totals[0].pending_over_target + totals[0].inflight_over_target, 0u);
  EXPECT_EQ(totals[0].inflight_age_ns, 0u);
}

TEST_F(AccountInflight, ARequestTheServerHasNotReadIsPendingForItsEndpoint) {
  add(request(0, 0, 0, HR_F_WAITING, 2, 9090), 700);
  EXPECT_EQ(totals[2].pending, 1u);
  EXPECT_EQ(totals[2].pending_over_target, 1u);
  EXPECT_EQ(totals[2].pending_over_max, 1u);
  EXPECT_EQ(totals[2].inflight, 0u);
}

TEST_F(AccountInflight, ARequestWhosePathIsNotReadYetIsPendingForEveryEndpointOfItsPort) {
  add(request(0, 0, 0, HR_F_WAITING, HR_PENDING, 8080), 200);
  EXPECT_EQ(totals[0].pending, 1u);
  EXPECT_EQ(totals[1].pending, 1u);
  EXPECT_EQ(totals[0].pending_over_target, 1u);
  EXPECT_EQ(totals[2].pending, 0u) << "another port's endpoint";
}

TEST_F(AccountInflight, ARequestNoEndpointClaimsIsUnclaimed) {
  add(request(0, 0, 0, 0, HR_NO_ENDPOINT, 9090), 200);
  add(request(0, 0, 0, 0, 7, 9090), 200);  // an index past the endpoints
  EXPECT_EQ(unclaimed, 2u);
  for (const auto& t : totals) EXPECT_EQ(t.inflight + t.pending, 0u);
}

}  // namespace
}  // namespace headroom::probes
