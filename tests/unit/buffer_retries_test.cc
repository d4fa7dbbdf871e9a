// SPDX-License-Identifier: Apache-2.0
// `headroomctl buffer --retries` without a socket (agent/ctl/buffer_retries.h):
// each mode's schedule, the dials read from an answer, first attempts'
// outcomes, the counts and amplification per step, the client's hooks and
// the retries section of the outputs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "agent/ctl/buffer_render.h"
#include "agent/ctl/buffer_retries.h"
#include "agent/ctl/loadgen_plan.h"

namespace b = headroom::ctl::buffer;
namespace lg = headroom::ctl::loadgen;
namespace orca = headroom::orca;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kNow = 1792567680;  // Wed, 21 Oct 2026 07:28:00 GMT

lg::Record attempt(int64_t at_ms, uint16_t status, int64_t latency_ms, uint8_t k, uint32_t first, uint16_t phase = 0,
                   uint8_t cls = 0) {
  lg::Record r;
  r.scheduled_ns = at_ms * kMs;
  r.latency_ns = latency_ms * kMs;
  r.status = status;
  r.outcome = lg::Outcome::response;
  r.attempt = k;
  r.first = first;
  r.phase = phase;
  r.request_class = cls;
  return r;
}

const std::string kShed =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 2\r\n"
    "X-Headroom-Retry: {\"maxRetries\":1,\"retryAfterSeconds\":1.5}\r\n\r\n";

}  // namespace

TEST(BufferRetryMode, ParsesEveryModeAndNamesTheFlag) {
  for (auto name : {"none", "immediate", "backoff", "dials", "budget"}) {
    auto mode = b::parse_retry_mode(name);
    ASSERT_TRUE(mode) << name;
    EXPECT_EQ(b::retry_mode_name(*mode), name);
  }
  auto bad = b::parse_retry_mode("always");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("--retries always"), std::string::npos) << bad.error().message;
}

TEST(BufferRetrySchedule, BackoffIsFullJitterBelowADoublingCeiling) {
  EXPECT_EQ(b::backoff_delay_ns(1, 0.0), 0);
  EXPECT_EQ(b::backoff_delay_ns(1, 0.5), 25 * kMs);
  EXPECT_EQ(b::backoff_delay_ns(2, 0.5), 50 * kMs);
  EXPECT_EQ(b::backoff_delay_ns(3, 0.25), 50 * kMs);
  EXPECT_LT(b::backoff_delay_ns(3, 0.9999999), 200 * kMs);
  EXPECT_GT(b::backoff_delay_ns(3, 0.9999999), 199 * kMs);
  // The exponent stops at 2^10: retry 30 waits at most 51.2 s.
  EXPECT_EQ(b::backoff_delay_ns(30, 0.5), b::backoff_delay_ns(11, 0.5));
  EXPECT_EQ(b::backoff_delay_ns(11, 0.5), 25'600 * kMs);
}

TEST(BufferRetrySchedule, EachModeRetriesOrSaysWhyNot) {
  const std::optional<orca::RetryDials> dials = orca::RetryDials{1, 1.5};
  using M = b::RetryMode;
  EXPECT_EQ(b::choose_retry(M::none, 1, 3, dials, 0.5).delay_ns, -1);
  EXPECT_EQ(b::choose_retry(M::immediate, 3, 3, std::nullopt, 0.5).delay_ns, 0);
  auto past = b::choose_retry(M::immediate, 4, 3, std::nullopt, 0.5);
  EXPECT_EQ(past.delay_ns, -1);
  EXPECT_EQ(past.reason, b::Suppressed::max_retries);
  EXPECT_EQ(b::choose_retry(M::backoff, 2, 3, dials, 0.5).delay_ns, 50 * kMs);
  // dials: the answer's wait, its count, and nothing without dials.
  EXPECT_EQ(b::choose_retry(M::dials, 1, 3, dials, 0.5).delay_ns, 1500 * kMs);
  auto over = b::choose_retry(M::dials, 2, 3, dials, 0.5);
  EXPECT_EQ(over.delay_ns, -1);
  EXPECT_EQ(over.reason, b::Suppressed::dials_count);
  auto none = b::choose_retry(M::dials, 1, 3, std::nullopt, 0.5);
  EXPECT_EQ(none.delay_ns, -1);
  EXPECT_EQ(none.reason, b::Suppressed::no_dials);
  // --max-retries still caps the dials.
  EXPECT_EQ(b::choose_retry(M::dials, 2, 1, orca::RetryDials{5, 0}, 0.5).reason, b::Suppressed::max_retries);
  // budget: the backoff, but not before the answer's wait.
  EXPECT_EQ(b::choose_retry(M::budget, 1, 3, std::nullopt, 0.5).delay_ns, 25 * kMs);
  EXPECT_EQ(b::choose_retry(M::budget, 1, 3, dials, 0.5).delay_ns, 1500 * kMs);
}

TEST(BufferRetryDials, ReadFromTheAnswersHeaders) {
  auto d = b::dials_of_response(kShed, 3, kNow);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->max_retries, 1);
  EXPECT_DOUBLE_EQ(d->retry_after_seconds, 1.5);
  // Retry-After alone: its seconds, with --max-retries retries.
  auto ra = b::dials_of_response("HTTP/1.1 503 x\r\nretry-after:  7 \r\nContent-Length: 0\r\n\r\n", 3, kNow);
  ASSERT_TRUE(ra);
  EXPECT_EQ(ra->max_retries, 3);
  EXPECT_DOUBLE_EQ(ra->retry_after_seconds, 7);
  // Neither, an unreadable Retry-After, malformed dials, or dials only in the body: none.
  EXPECT_FALSE(b::dials_of_response("HTTP/1.1 503 x\r\nContent-Length: 0\r\n\r\n", 3, kNow));
  EXPECT_FALSE(b::dials_of_response("HTTP/1.1 503 x\r\nRetry-After: soon\r\n\r\n", 3, kNow));
  EXPECT_FALSE(b::dials_of_response("HTTP/1.1 503 x\r\nRetry-After: -5\r\n\r\n", 3, kNow));
  EXPECT_FALSE(b::dials_of_response("HTTP/1.1 503 x\r\nRetry-After: Wed, 21 Oct 2026 07:28:00 GMT+1\r\n\r\n", 3, kNow));
  EXPECT_FALSE(b::dials_of_response("HTTP/1.1 503 x\r\nRetry-After: 2\r\nx-headroom-retry: {\"maxRetries\":-1}\r\n\r\n", 3, kNow));
  EXPECT_FALSE(b::dials_of_response(
      "HTTP/1.1 503 x\r\nContent-Length: 30\r\n\r\nx-headroom-retry: {\"maxRetries\":1", 3, kNow));
  // A 1xx before the final answer is skipped.
  auto after_interim = b::dials_of_response("HTTP/1.1 100 Continue\r\n\r\n" + kShed, 3, kNow);
  ASSERT_TRUE(after_interim);
  EXPECT_EQ(after_interim->max_retries, 1);
}

TEST(BufferRetryDials, RetryAfterAsAnHttpDate) {
  // kNow is Wed, 21 Oct 2026 07:28:00 GMT.
  struct Row {
    const char* headers;
    double seconds;
  } rows[] = {
      {"Retry-After: Wed, 21 Oct 2026 07:28:30 GMT\r\n", 30},                                  // from the client's clock
      {"Retry-After: Wed, 21 Oct 2026 07:28:30 GMT\r\nDate: Wed, 21 Oct 2026 07:28:20 GMT\r\n", 10},  // from Date
      {"Date: Wed, 21 Oct 2026 09:00:00 GMT\r\nRetry-After: Wed, 21 Oct 2026 09:00:05 GMT\r\n", 5},   // skewed clocks
      {"Retry-After: Wednesday, 21-Oct-26 07:28:45 GMT\r\n", 45},                              // RFC 850
      {"Retry-After: Wed Oct 21 07:29:00 2026\r\n", 60},                                       // asctime
      {"Retry-After: Wed, 21 Oct 2026 07:27:00 GMT\r\n", 0},                                   // past: at once
      {"Retry-After: Wed, 21 Oct 2026 07:28:10 GMT\r\nDate: garbage\r\n", 10},               // bad Date: the clock
      {"Retry-After: Thu, 22 Oct 2026 07:28:00 GMT\r\n", 3600},                                // a day: the cap
  };
  for (const auto& row : rows) {
    auto d = b::dials_of_response(std::string("HTTP/1.1 503 x\r\n") + row.headers + "\r\n", 2, kNow);
    ASSERT_TRUE(d) << row.headers;
    EXPECT_EQ(d->max_retries, 2) << row.headers;
    EXPECT_DOUBLE_EQ(d->retry_after_seconds, row.seconds) << row.headers;
  }
  EXPECT_EQ(b::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
  EXPECT_EQ(b::parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777);
  EXPECT_EQ(b::parse_http_date("Sun Nov  6 08:49:37 1994"), 784111777);
  EXPECT_FALSE(b::parse_http_date("Sun, 06 Nov 1994 08:49:37"));
  EXPECT_FALSE(b::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT trailing"));
  EXPECT_FALSE(b::parse_http_date(""));
}

TEST(BufferRetryDials, OnlyUnansweredOrNon2xxAttemptsAskForARetry) {
  EXPECT_TRUE(b::wants_retry(attempt(0, 503, 1, 0, 0)));
  EXPECT_TRUE(b::wants_retry(attempt(0, 500, 1, 0, 0)));
  EXPECT_FALSE(b::wants_retry(attempt(0, 200, 900, 0, 0)));  // slow, but answered
  lg::Record timed_out = attempt(0, 0, 0, 0, 0);
  timed_out.outcome = lg::Outcome::timeout;
  EXPECT_TRUE(b::wants_retry(timed_out));
  timed_out.outcome = lg::Outcome::cancelled;
  EXPECT_FALSE(b::wants_retry(timed_out));
}

TEST(BufferRetryOutcome, AFirstAttemptEndsAsItsLastAttemptTimedFromTheFirst) {
  // Request 0: shed at 0 ms, retried at 100 ms and served in 20 ms: 120 ms
  // after it was first due. Request 1: shed twice. Request 2: served at once.
  std::vector<lg::Record> records = {
      attempt(0, 503, 1, 0, 0), attempt(10, 503, 1, 0, 1), attempt(50, 200, 5, 0, 2),
      attempt(60, 503, 1, 1, 1), attempt(100, 200, 20, 1, 0), attempt(300, 503, 2, 2, 1),
  };
  auto firsts = b::first_attempt_outcomes(records);
  ASSERT_EQ(firsts.size(), 3u);
  EXPECT_EQ(firsts[0].status, 200);
  EXPECT_EQ(firsts[0].latency_ns, 120 * kMs);
  EXPECT_EQ(firsts[0].scheduled_ns, 0);
  EXPECT_EQ(firsts[1].status, 503);
  EXPECT_EQ(firsts[1].attempt, 2);
  EXPECT_EQ(firsts[1].latency_ns, 292 * kMs);
  EXPECT_EQ(firsts[2].latency_ns, 5 * kMs);

  // Judged as a run without retries: the SLO counts from the first attempt,
  // so a retry served late is a failure, a slow final rejection too.
  b::Criteria criteria;
  criteria.slo = milliseconds(100);
  criteria.reject_within = milliseconds(50);
  const std::vector<b::Step> steps = {b::Step{b::StepKind::ramp, 1, 10, seconds(1), seconds(0)}};
  auto result = b::analyze(steps, 1, firsts, criteria);
  EXPECT_EQ(result[0].all.offered, 3);
  EXPECT_EQ(result[0].all.served, 1);
  EXPECT_EQ(result[0].all.failed, 2);
  EXPECT_EQ(result[0].all.failed_by[static_cast<std::size_t>(b::FailReason::over_slo)], 1);
  EXPECT_EQ(result[0].all.failed_by[static_cast<std::size_t>(b::FailReason::slow_reject)], 1);
}

TEST(BufferRetryCounts, AmplificationPerStepAndClassAfterSettle) {
  // Step 0 settles for 100 ms: its first request is not measured, nor its retry.
  const std::vector<b::Step> steps = {b::Step{b::StepKind::ramp, 1, 10, seconds(1), milliseconds(100)},
                                      b::Step{b::StepKind::ramp, 2, 20, seconds(1), seconds(0)}};
  std::vector<lg::Record> records = {
      attempt(0, 503, 1, 0, 0, 0, 0),    attempt(200, 503, 1, 0, 1, 0, 0), attempt(300, 200, 1, 0, 2, 0, 1),
      attempt(400, 503, 1, 1, 0, 0, 0),  attempt(500, 503, 1, 1, 1, 0, 0), attempt(600, 200, 1, 2, 1, 0, 0),
      attempt(1000, 503, 1, 0, 6, 1, 1), attempt(1100, 200, 1, 0, 7, 1, 1),
  };
  const std::vector<b::RetryClient::Held> held = {{0, b::Suppressed::budget}, {6, b::Suppressed::no_dials},
                                                  {6, b::Suppressed::no_dials}};
  auto counts = b::retry_counts(steps, 2, records, held);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].all.first_attempts, 2);
  EXPECT_EQ(counts[0].all.retries, 2);
  EXPECT_DOUBLE_EQ(counts[0].all.amplification(), 2.0);
  EXPECT_EQ(counts[0].by_class[0].first_attempts, 1);
  EXPECT_DOUBLE_EQ(counts[0].by_class[0].amplification(), 3.0);
  EXPECT_DOUBLE_EQ(counts[0].by_class[1].amplification(), 1.0);
  EXPECT_EQ(counts[0].all.suppressed_total(), 0);  // request 0 settled
  EXPECT_EQ(counts[1].all.first_attempts, 2);
  EXPECT_EQ(counts[1].all.retries, 0);
  EXPECT_EQ(counts[1].by_class[1].suppressed[static_cast<std::size_t>(b::Suppressed::no_dials)], 2);
  EXPECT_EQ(counts[1].all.suppressed_total(), 2);
  EXPECT_DOUBLE_EQ(b::RetryCounts{}.amplification(), 1.0);
}

TEST(BufferRetryClient, ImmediateRetriesUpToMaxThenHoldsBack) {
  b::RetryClient client({b::RetryMode::immediate, 2, {1}, 7});
  auto hooks = client.hooks();
  ASSERT_TRUE(hooks.after);
  lg::Record r = attempt(0, 503, 1, 0, 4);
  EXPECT_EQ(hooks.after(r, kShed, 1 * kMs), 0);
  r.attempt = 2;
  EXPECT_EQ(hooks.after(r, kShed, 2 * kMs), -1);
  r.status = 200;
  r.attempt = 0;
  EXPECT_EQ(hooks.after(r, "HTTP/1.1 200 OK\r\n\r\n", 3 * kMs), -1);  // served: nothing to retry
  ASSERT_EQ(client.suppressed().size(), 1u);
  EXPECT_EQ(client.suppressed()[0].first, 4u);
  EXPECT_EQ(client.suppressed()[0].reason, b::Suppressed::max_retries);
  EXPECT_FALSE(b::RetryClient({b::RetryMode::none, 2, {1}, 7}).hooks().after);
}

TEST(BufferRetryClient, DialsModeWaitsAsTheAnswerSays) {
  b::RetryClient client({b::RetryMode::dials, 3, {1}, 7});
  auto hooks = client.hooks();
  lg::Record r = attempt(0, 503, 1, 0, 0);
  EXPECT_EQ(hooks.after(r, kShed, 0), 1500 * kMs);
  r.attempt = 1;
  EXPECT_EQ(hooks.after(r, kShed, 0), -1);  // the dials allow one retry
  lg::Record timed_out = attempt(0, 0, 0, 0, 0);
  timed_out.outcome = lg::Outcome::timeout;
  EXPECT_EQ(hooks.after(timed_out, "", 0), -1);  // no answer, no dials
  ASSERT_EQ(client.suppressed().size(), 2u);
  EXPECT_EQ(client.suppressed()[0].reason, b::Suppressed::dials_count);
  EXPECT_EQ(client.suppressed()[1].reason, b::Suppressed::no_dials);
}

TEST(BufferRetryClient, BudgetModeStopsRetriesPastTheBudget) {
  // The default budget: 1 retry per second of a 10 s window besides 10 % of
  // the first attempts (CRITICAL's share). With no first attempts, the
  // 11th retry is refused.
  b::RetryClient client({b::RetryMode::budget, 3, {1}, 7});
  auto hooks = client.hooks();
  ASSERT_TRUE(hooks.admit);
  int admitted = 0;
  for (int i = 0; i < 11; ++i) admitted += hooks.admit(attempt(i, 0, 0, 1, static_cast<uint32_t>(i)), i * kMs) ? 1 : 0;
  EXPECT_EQ(admitted, 10);
  ASSERT_EQ(client.suppressed().size(), 1u);
  EXPECT_EQ(client.suppressed()[0].reason, b::Suppressed::budget);
  EXPECT_EQ(client.suppressed()[0].first, 10u);
  // First attempts always leave, and widen the budget: 10 % of 20 is 2 more.
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(hooks.admit(attempt(20, 0, 0, 0, 20), 20 * kMs));
  EXPECT_TRUE(hooks.admit(attempt(21, 0, 0, 1, 20), 21 * kMs));
  EXPECT_TRUE(hooks.admit(attempt(22, 0, 0, 1, 20), 22 * kMs));
  EXPECT_FALSE(hooks.admit(attempt(23, 0, 0, 1, 20), 23 * kMs));
}

TEST(BufferRetryClient, BudgetModeObeysTheDialsItWasGiven) {
  b::RetryClient client({b::RetryMode::budget, 3, {60}, 7});
  auto hooks = client.hooks();
  // An answer's dials (1 retry, 1.5 s) are recorded for the bucket; the
  // retry it schedules leaves no sooner than they ask.
  const int64_t delay = hooks.after(attempt(0, 503, 1, 0, 0), kShed, 0);
  EXPECT_EQ(delay, 1500 * kMs);
  EXPECT_FALSE(hooks.admit(attempt(1, 0, 0, 1, 0), 1 * kMs));  // too soon for the dials
  // Another request shed at 10 ms: its retry goes 1.5 s after its own
  // failure, though another answer came later (at 900 ms).
  EXPECT_EQ(hooks.after(attempt(10, 503, 1, 0, 1), kShed, 10 * kMs), 1500 * kMs);
  EXPECT_EQ(hooks.after(attempt(900, 503, 1, 0, 2), kShed, 900 * kMs), 1500 * kMs);
  EXPECT_TRUE(hooks.admit(attempt(1510, 0, 0, 1, 1), 1510 * kMs));
  EXPECT_FALSE(hooks.admit(attempt(1600, 0, 0, 2, 1), 1600 * kMs));  // past their count
  ASSERT_EQ(client.suppressed().size(), 2u);
  EXPECT_EQ(client.suppressed()[0].reason, b::Suppressed::dials_wait);
  EXPECT_EQ(client.suppressed()[1].reason, b::Suppressed::dials_count);
}

TEST(LoadgenRetryQueue, RetriesLeaveInTimeOrderNeverBeforeTheLastRecord) {
  lg::RetryQueue q;
  EXPECT_TRUE(q.empty());
  lg::Record a = attempt(0, 503, 1, 0, 3, 2, 1);
  lg::Record b2 = attempt(5, 503, 1, 1, 1, 0, 0);
  q.push(a, 300 * kMs);
  q.push(b2, 100 * kMs);
  EXPECT_EQ(q.next_due(), 100 * kMs);
  const lg::Record first = q.pop(150 * kMs);
  EXPECT_EQ(first.scheduled_ns, 150 * kMs);  // due at 100, but a record at 150 came first
  EXPECT_EQ(first.attempt, 2);
  EXPECT_EQ(first.first, 1u);
  const lg::Record second = q.pop(150 * kMs);
  EXPECT_EQ(second.scheduled_ns, 300 * kMs);
  EXPECT_EQ(second.attempt, 1);
  EXPECT_EQ(second.first, 3u);
  EXPECT_EQ(second.phase, 2);
  EXPECT_EQ(second.request_class, 1);
  EXPECT_TRUE(q.empty());
}

TEST(BufferRetryRender, TheRetriesSectionOnlyWithRetries) {
  b::RunReport report;
  report.mix = {b::MixEntry{"CRITICAL", 1, 1}};
  b::StepResult step;
  step.step = b::Step{b::StepKind::ramp, 2, 20, seconds(1), seconds(0)};
  step.by_class.resize(1);
  report.steps = {step};
  EXPECT_FALSE(nlohmann::json::parse(b::render_json(report)).contains("retries"));
  for (const auto& line : b::render_table(report)) EXPECT_EQ(line.find("AMPLIFICATION"), std::string::npos) << line;
  EXPECT_EQ(b::render_svg(report).find("with retries"), std::string::npos);

  b::StepRetries retries;
  retries.all.first_attempts = 4;
  retries.all.retries = 6;
  retries.all.suppressed[static_cast<std::size_t>(b::Suppressed::budget)] = 3;
  retries.by_class = {retries.all};
  report.retry_mode = b::RetryMode::budget;
  report.max_retries = 3;
  report.retries = {retries};
  const auto doc = nlohmann::json::parse(b::render_json(report));
  ASSERT_TRUE(doc.contains("retries"));
  EXPECT_EQ(doc["retries"]["mode"], "budget");
  EXPECT_EQ(doc["retries"]["max_retries"], 3);
  const auto& all = doc["retries"]["steps"][0]["all"];
  EXPECT_EQ(all["first_attempts"], 4);
  EXPECT_EQ(all["retries"], 6);
  EXPECT_DOUBLE_EQ(all["amplification"].get<double>(), 2.5);
  EXPECT_EQ(all["suppressed"], 3);
  EXPECT_EQ(all["suppressed_by"]["budget"], 3);
  EXPECT_EQ(doc["retries"]["steps"][0]["classes"]["CRITICAL"]["retries"], 6);
  std::string table;
  for (const auto& line : b::render_table(report)) table += line + "\n";
  EXPECT_NE(table.find("AMPLIFICATION"), std::string::npos) << table;
  EXPECT_NE(table.find("2.50x"), std::string::npos) << table;
  EXPECT_NE(table.find("budget 3"), std::string::npos) << table;
  // The chart: the step's offered rate (20/s) times 2.5 as a dotted outline, its scale raised to show it.
  report.steps[0].offered_rps = 20;
  const std::string svg = b::render_svg(report);
  EXPECT_NE(svg.find("<title>offered with retries 50 req/s (2.50x)</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">2.50x</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("dotted: offered with retries (--retries budget)"), std::string::npos) << svg;
  // The left axis tops at 100 req/s to show 50; without the retries 20 req/s needs less.
  EXPECT_NE(svg.find("text-anchor=\"end\">100</text>"), std::string::npos) << svg;
  report.retries.clear();
  EXPECT_EQ(b::render_svg(report).find("text-anchor=\"end\">100</text>"), std::string::npos);
}
