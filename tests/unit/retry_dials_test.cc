// SPDX-License-Identifier: Apache-2.0
// Retry dials: the function per bucket and shed probability (table), its
// options and their errors, the wire form (round trips, hostile input),
// HTTP's Retry-After and gRPC's trailers.
#include "headroom/orca/retry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace headroom::orca {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------- the function

TEST(RetryDials, TablePerBucketAndProbability) {
  struct Case {
    Bucket bucket;
    double p;
    int max_retries;
    double retry_after;
  };
  // max_retries = ceil(base x (1 - p)); retry_after = base x (1 + 3p).
  const Case cases[] = {
      {Bucket::CRITICAL, 0.0, 2, 0.5},     {Bucket::CRITICAL, 0.5, 1, 1.25},   {Bucket::CRITICAL, 0.9, 1, 1.85},
      {Bucket::CRITICAL, 1.0, 0, 2.0},     {Bucket::CRITICAL, kNaN, 0, 2.0},   {Bucket::CRITICAL, -0.3, 2, 0.5},
      {Bucket::CRITICAL, 1.7, 0, 2.0},     {Bucket::CRITICAL, 0.25, 2, 0.875}, {Bucket::CRITICAL, 0.6, 1, 1.4},
      {Bucket::DEGRADED, 0.0, 1, 1.0},     {Bucket::DEGRADED, 0.5, 1, 2.5},    {Bucket::DEGRADED, 0.9, 1, 3.7},
      {Bucket::DEGRADED, 1.0, 0, 4.0},     {Bucket::DEGRADED, kNaN, 0, 4.0},   {Bucket::DEGRADED, -1.0, 1, 1.0},
      {Bucket::DEGRADED, 2.0, 0, 4.0},     {Bucket::BEST_EFFORT, 0.0, 1, 2.0}, {Bucket::BEST_EFFORT, 0.5, 1, 5.0},
      {Bucket::BEST_EFFORT, 0.9, 1, 7.4},  {Bucket::BEST_EFFORT, 1.0, 0, 8.0}, {Bucket::BEST_EFFORT, kNaN, 0, 8.0},
      {Bucket::BEST_EFFORT, -kInf, 1, 2.0}, {Bucket::BEST_EFFORT, kInf, 0, 8.0}, {Bucket::BULK, 0.0, 0, 5.0},
      {Bucket::BULK, 0.5, 0, 12.5},        {Bucket::BULK, 0.9, 0, 18.5},       {Bucket::BULK, 1.0, 0, 20.0},
      {Bucket::BULK, kNaN, 0, 20.0},       {Bucket::BULK, -0.5, 0, 5.0},       {Bucket::BULK, 3.0, 0, 20.0},
  };
  for (const Case& c : cases) {
    const RetryDials d = retry_dials(c.bucket, c.p);
    EXPECT_EQ(d.max_retries, c.max_retries) << bucket_name(c.bucket) << " p=" << c.p;
    EXPECT_NEAR(d.retry_after_seconds, c.retry_after, 1e-12) << bucket_name(c.bucket) << " p=" << c.p;
  }
}

TEST(RetryDials, PriorityPicksItsBucketAndClamps) {
  EXPECT_EQ(retry_dials(1, 0.0).max_retries, 2);
  EXPECT_EQ(retry_dials(25, 0.0).max_retries, 2);
  EXPECT_EQ(retry_dials(26, 0.0).max_retries, 1);
  EXPECT_DOUBLE_EQ(retry_dials(51, 0.0).retry_after_seconds, 2.0);
  EXPECT_DOUBLE_EQ(retry_dials(100, 0.0).retry_after_seconds, 5.0);
  EXPECT_DOUBLE_EQ(retry_dials(-7, 0.0).retry_after_seconds, 0.5);   // clamped to 1
  EXPECT_DOUBLE_EQ(retry_dials(1000, 0.0).retry_after_seconds, 5.0);  // clamped to 100
}

TEST(RetryDials, LessImportantNeverRetriesMoreNorSooner) {
  for (double p = 0.0; p <= 1.0; p += 0.05)
    for (int b = 1; b < kBucketCount; ++b) {
      const RetryDials less = retry_dials(static_cast<Bucket>(b), p);
      const RetryDials more = retry_dials(static_cast<Bucket>(b - 1), p);
      EXPECT_LE(less.max_retries, more.max_retries) << "p=" << p << " bucket " << b;
      EXPECT_GE(less.retry_after_seconds, more.retry_after_seconds) << "p=" << p << " bucket " << b;
    }
}

TEST(RetryDials, CustomOptionsAndTheCaps) {
  RetryDialsOptions o;
  o.buckets = {RetryDialsBase{10, 1000}, RetryDialsBase{10, 1000}, RetryDialsBase{10, 1000},
               RetryDialsBase{10, 1000}};
  o.wait_growth = 100;
  ASSERT_TRUE(validate_retry_dials_options(o));
  EXPECT_EQ(retry_dials(Bucket::BULK, 0.0, o).max_retries, 10);
  EXPECT_EQ(retry_dials(Bucket::BULK, 0.95, o).max_retries, 1);  // ceil(0.5)
  EXPECT_DOUBLE_EQ(retry_dials(Bucket::BULK, 0.5, o).retry_after_seconds, kMaxRetryAfterSeconds);
  o.wait_growth = 0;
  EXPECT_DOUBLE_EQ(retry_dials(Bucket::BULK, 1.0, o).retry_after_seconds, 1000);
}

TEST(RetryDialsOptions, ErrorsNameTheField) {
  struct Case {
    void (*edit)(RetryDialsOptions&);
    const char* expect;
  };
  const Case cases[] = {
      {[](RetryDialsOptions& o) { o.buckets[3].max_retries = 2; },
       "buckets[BULK].max_retries (2) must be at most buckets[BEST_EFFORT].max_retries (1)"},
      {[](RetryDialsOptions& o) { o.buckets[1].retry_after_seconds = 0.25; },
       "buckets[DEGRADED].retry_after_seconds (0.25) must be at least buckets[CRITICAL].retry_after_seconds (0.5)"},
      {[](RetryDialsOptions& o) { o.buckets[0].max_retries = 11; },
       "buckets[CRITICAL].max_retries (11) must be 0 to 10"},
      {[](RetryDialsOptions& o) { o.buckets[2].max_retries = -1; }, "buckets[BEST_EFFORT].max_retries (-1)"},
      {[](RetryDialsOptions& o) { o.buckets[0].retry_after_seconds = 0; },
       "buckets[CRITICAL].retry_after_seconds (0) must be greater than 0"},
      {[](RetryDialsOptions& o) { o.buckets[3].retry_after_seconds = kNaN; },
       "buckets[BULK].retry_after_seconds (nan)"},
      {[](RetryDialsOptions& o) { o.buckets[3].retry_after_seconds = 4000; },
       "buckets[BULK].retry_after_seconds (4000)"},
      {[](RetryDialsOptions& o) { o.wait_growth = -1; }, "wait_growth (-1) must be 0 to 100"},
      {[](RetryDialsOptions& o) { o.wait_growth = kInf; }, "wait_growth (inf)"},
  };
  ASSERT_TRUE(validate_retry_dials_options(RetryDialsOptions{}));
  for (const Case& c : cases) {
    RetryDialsOptions o;
    c.edit(o);
    auto r = validate_retry_dials_options(o);
    ASSERT_FALSE(r) << c.expect;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << r.error().message;
  }
}

// ---------------------------------------------------------------- the wire form

TEST(ShedVerdict, DropsAsTheShedderDoesWithTheDialsOfItsProbability) {
  struct Row {
    double p, random01;
    int priority;
    bool drop;
    RetryDials dials;
  } rows[] = {
      {0.0, 0.0, 1, false, {0, 0.0}},     // nothing shed
      {0.5, 0.49, 1, true, {1, 1.25}},     // CRITICAL at 0.5: one retry after 0.5 x 2.5
      {0.5, 0.5, 1, false, {0, 0.0}},      // random01 not below p
      {1.0, 0.999, 100, true, {0, 20.0}},  // BULK at 1: no retry, 5 s x 4
      {0.9, 0.1, 60, true, {1, 7.4}},      // BEST_EFFORT at 0.9
      {kNaN, 0.0, 1, false, {0, 0.0}},     // NaN never drops
  };
  for (const auto& r : rows) {
    const ShedVerdict v = shed_verdict(r.p, r.random01, r.priority);
    EXPECT_EQ(v.drop, r.drop) << r.p << " " << r.random01;
    EXPECT_EQ(v.dials.max_retries, r.dials.max_retries) << r.p;
    EXPECT_NEAR(v.dials.retry_after_seconds, r.dials.retry_after_seconds, 1e-9) << r.p;
  }
  // From a shedder: its probability for the priority, and the same dials.
  Shedder shedder;
  Report report;
  report.set_application_utilization(0.95);
  shedder.update(report, false);
  int partly = 0;  // a priority the shedder drops some of at 0.95
  for (int q = 1; q <= 100 && partly == 0; ++q)
    if (shedder.probability(q) > 0.0 && shedder.probability(q) < 1.0) partly = q;
  ASSERT_NE(partly, 0);
  const double p = shedder.probability(partly);
  const ShedVerdict v = shed_verdict(shedder, p / 2, partly);
  EXPECT_TRUE(v.drop);
  EXPECT_EQ(v.dials.max_retries, retry_dials(partly, p).max_retries);
  EXPECT_DOUBLE_EQ(v.dials.retry_after_seconds, retry_dials(partly, p).retry_after_seconds);
  EXPECT_FALSE(shed_verdict(shedder, p, partly).drop);
  for (const double draw : {0.0, p / 2, p, 0.999})
    for (const int q : {1, partly, 60, 100}) EXPECT_EQ(shed_verdict(shedder, draw, q).drop, shedder.should_drop(draw, q));
}

TEST(RetryDialsWire, FormatsTheObject) {
  EXPECT_EQ(format_retry_dials({1, 2.5}), R"({"maxRetries":1,"retryAfterSeconds":2.5})");
  EXPECT_EQ(format_retry_dials({0, 20}), R"({"maxRetries":0,"retryAfterSeconds":20})");
  EXPECT_EQ(format_retry_dials({2, 1.85}), R"({"maxRetries":2,"retryAfterSeconds":1.85})");
  // Clamped to the caps before it goes out.
  EXPECT_EQ(format_retry_dials({-3, -1}), R"({"maxRetries":0,"retryAfterSeconds":0})");
  EXPECT_EQ(format_retry_dials({99, 1e9}), R"({"maxRetries":10,"retryAfterSeconds":3600})");
  EXPECT_EQ(format_retry_dials({1, kNaN}), R"({"maxRetries":1,"retryAfterSeconds":3600})");
}

TEST(RetryDialsWire, RoundTripsEveryDefault) {
  for (int b = 0; b < kBucketCount; ++b)
    for (double p : {0.0, 0.1, 0.33, 0.5, 0.9, 1.0}) {
      const RetryDials d = retry_dials(static_cast<Bucket>(b), p);
      const auto back = parse_retry_dials(format_retry_dials(d));
      ASSERT_TRUE(back) << back.error().message;
      EXPECT_EQ(back->max_retries, d.max_retries);
      EXPECT_EQ(back->retry_after_seconds, d.retry_after_seconds);  // exact: shortest round-trip form
    }
}

TEST(RetryDialsWire, ParsesWhitespaceAndAnyOrder) {
  struct Case {
    const char* text;
    int max_retries;
    double retry_after;
  };
  const Case cases[] = {
      {R"({"maxRetries":1,"retryAfterSeconds":2.5})", 1, 2.5},
      {R"({"retryAfterSeconds":0.5,"maxRetries":2})", 2, 0.5},
      {" \t{ \"maxRetries\" : 0 ,\r\n \"retryAfterSeconds\" : 5 } \n", 0, 5},
      {R"({"maxRetries":3,"retryAfterSeconds":1e1})", 3, 10},
      {R"({"maxRetries":2.0,"retryAfterSeconds":0})", 2, 0},
      {R"({"maxRetries":-0,"retryAfterSeconds":1E-400})", 0, 0},  // underflow reads 0
      // Past the caps: clamped, never a storm nor an endless wait.
      {R"({"maxRetries":1000000,"retryAfterSeconds":86400})", 10, 3600},
      {R"({"maxRetries":1e308,"retryAfterSeconds":1e308})", 10, 3600},
  };
  for (const Case& c : cases) {
    const auto d = parse_retry_dials(c.text);
    ASSERT_TRUE(d) << c.text << ": " << d.error().message;
    EXPECT_EQ(d->max_retries, c.max_retries) << c.text;
    EXPECT_DOUBLE_EQ(d->retry_after_seconds, c.retry_after) << c.text;
  }
}

TEST(RetryDialsWire, RefusesHostileInputSayingWhy) {
  struct Case {
    std::string text;
    const char* expect;
  };
  const Case cases[] = {
      {"", "expected '{' at the end"},
      {"garbage", "expected '{' at offset 0"},
      {"{}", "expected a key in double quotes"},
      {R"({"maxRetries":1})", "\"retryAfterSeconds\" is missing"},
      {R"({"retryAfterSeconds":1})", "\"maxRetries\" is missing"},
      {R"({"maxRetries":1,"maxRetries":2,"retryAfterSeconds":1})", "\"maxRetries\" appears twice"},
      {R"({"maxRetries":1,"retryAfterSeconds":1,"retryAfterSeconds":1})", "\"retryAfterSeconds\" appears twice"},
      {R"({"maxRetries":1,"retryAfterSeconds":1,"extra":1})", "unknown key \"extra\""},
      {R"({"maxRetries":-1,"retryAfterSeconds":1})", "\"maxRetries\" (-1) must not be negative"},
      {R"({"maxRetries":1,"retryAfterSeconds":-0.5})", "\"retryAfterSeconds\" (-0.5) must not be negative"},
      {R"({"maxRetries":1.5,"retryAfterSeconds":1})", "\"maxRetries\" (1.5) must be a whole number"},
      {R"({"maxRetries":NaN,"retryAfterSeconds":1})", "\"maxRetries\" must be a number"},
      {R"({"maxRetries":1,"retryAfterSeconds":Infinity})", "\"retryAfterSeconds\" must be a number"},
      {R"({"maxRetries":1,"retryAfterSeconds":1e999})", "\"retryAfterSeconds\" (1e999) is too large"},
      {R"({"maxRetries":"1","retryAfterSeconds":1})", "\"maxRetries\" must be a number"},
      {R"({"maxRetries":01,"retryAfterSeconds":1})", "expected ',' or '}'"},
      {R"({"maxRetries":1.,"retryAfterSeconds":1})", "\"maxRetries\" must be a number"},
      {R"({"maxRetries":+1,"retryAfterSeconds":1})", "\"maxRetries\" must be a number"},
      {R"({"maxRetries":1 "retryAfterSeconds":1})", "expected ',' or '}'"},
      {R"({"maxRetries":1,"retryAfterSeconds":1,})", "expected a key in double quotes"},
      {R"({"maxRetries":1,"retryAfterSeconds":1}})", "unexpected text after '}'"},
      {R"({"maxRetries" 1,"retryAfterSeconds":1})", "expected ':' after \"maxRetries\""},
      {R"({"max\u0052etries":1,"retryAfterSeconds":1})", "expected a key in double quotes"},
      {R"({maxRetries:1,retryAfterSeconds:1})", "expected a key in double quotes"},
      {R"([{"maxRetries":1,"retryAfterSeconds":1}])", "expected '{'"},
      {R"({"maxRetries":1,"retryAfterSeconds":1)", "expected ',' or '}' at the end"},
      {std::string("{\"maxRetries\":1,\"retryAfterSeconds\":1}\0", 39), "unexpected text after '}'"},
      {"{\"maxRetries\":1,\"retryAfterSeconds\":1" + std::string(300, ' ') + "}", "more than 256"},
  };
  for (const Case& c : cases) {
    const auto d = parse_retry_dials(c.text);
    ASSERT_FALSE(d) << c.text;
    EXPECT_NE(d.error().message.find(c.expect), std::string::npos) << c.text << ": " << d.error().message;
    EXPECT_EQ(d.error().message.rfind("retry dials: ", 0), 0u) << d.error().message;
  }
}

TEST(RetryDialsWire, RetryAfterHeaderRoundsUp) {
  struct Case {
    double seconds;
    int header;
  };
  const Case cases[] = {{0, 0},   {-1, 0},   {0.001, 1},  {0.5, 1},     {1.0, 1},
                        {1.01, 2}, {2.5, 3}, {20, 20},    {1e9, 3600},  {kNaN, 3600}};
  for (const Case& c : cases) EXPECT_EQ(retry_after_header_seconds({1, c.seconds}), c.header) << c.seconds;
}

// ---------------------------------------------------------------- gRPC

TEST(RetryDialsGrpc, PushbackTable) {
  struct Case {
    int max_retries;
    double seconds;
    int pushback_ms;
  };
  const Case cases[] = {
      {0, 5.0, -1},       // no retry: gRPC's "do not retry"
      {0, 0.0, -1},       //
      {-3, 1.0, -1},      // clamped to 0 retries first
      {1, 0.0, 0},        // retry at once
      {1, -2.0, 0},       // a negative wait is clamped to 0
      {1, 2.5, 2500},     //
      {2, 0.5, 500},      //
      {1, 0.3, 300},      // 0.3 x 1000 is 300 ms, not 301
      {1, 1.1, 1100},     //
      {1, 0.0001, 1},     // rounded up: never sooner than the dials say
      {1, 0.0025, 3},     //
      {1, 1.0004, 1001},  //
      {40, 20.0, 20000},  // retries clamped to 10; the pushback is the wait
      {1, 1e9, 3600000},  // the cap, an hour, fits gRPC's signed 32 bits
      {1, kInf, 3600000}, //
      {1, kNaN, 3600000}, // NaN reads as the cap
  };
  for (const Case& c : cases)
    EXPECT_EQ(grpc_retry_pushback_ms({c.max_retries, c.seconds}), c.pushback_ms)
        << c.max_retries << " retries, " << c.seconds << " s";
}

TEST(RetryDialsGrpc, ShedTrailersArePushbackThenDials) {
  struct Case {
    RetryDials dials;
    std::string pushback;
    std::string dials_json;
  };
  const Case cases[] = {
      {{1, 2.5}, "2500", R"({"maxRetries":1,"retryAfterSeconds":2.5})"},
      {{0, 20.0}, "-1", R"({"maxRetries":0,"retryAfterSeconds":20})"},
      {{2, 0.5}, "500", R"({"maxRetries":2,"retryAfterSeconds":0.5})"},
      {{99, 0.0}, "0", R"({"maxRetries":10,"retryAfterSeconds":0})"},
      {{1, kNaN}, "3600000", R"({"maxRetries":1,"retryAfterSeconds":3600})"},
  };
  for (const Case& c : cases) {
    const auto t = grpc_shed_trailers(c.dials);
    EXPECT_EQ(t[0].key, "grpc-retry-pushback-ms");
    EXPECT_EQ(t[0].value, c.pushback);
    EXPECT_EQ(t[1].key, "x-headroom-retry");
    EXPECT_EQ(t[1].value, c.dials_json);
    // What the client reads back is what was sent, within the caps.
    const auto back = parse_retry_dials(t[1].value);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->max_retries, clamp_retry_dials(c.dials).max_retries);
  }
  EXPECT_EQ(kShedGrpcStatus, 8);  // RESOURCE_EXHAUSTED
}

TEST(RetryDialsGrpc, EveryDefaultDialAgreesWithItsPushback) {
  // Over each bucket and shed probability: "do not retry" exactly when the
  // dials invite no retry, else the wait in milliseconds.
  for (int priority = 1; priority <= 100; priority += 11)
    for (const double p : {0.0, 0.25, 0.5, 0.9, 1.0}) {
      const RetryDials d = retry_dials(priority, p);
      const int ms = grpc_retry_pushback_ms(d);
      if (d.max_retries == 0) {
        EXPECT_EQ(ms, -1) << priority << " " << p;
      } else {
        EXPECT_GE(ms / 1000.0, d.retry_after_seconds - 1e-9) << priority << " " << p;
        EXPECT_LT(ms / 1000.0, d.retry_after_seconds + 0.001) << priority << " " << p;
      }
    }
}

}  // namespace
}  // namespace headroom::orca
