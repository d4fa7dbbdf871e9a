// SPDX-License-Identifier: Apache-2.0
// Retries through headroom_orca.h: the dials function, the wire form and its
// errors, Retry-After, gRPC's trailers, the budget's options and their
// errors, its decisions (budget, dials, the target's probabilities) and NULL
// arguments.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "headroom/orca/clock.h"
#include "headroom/orca/headroom_orca.h"
#include "headroom/orca/names.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_writer.h"
#include "temp_dir.h"

namespace headroom::orca {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kT0 = 50 * kS;

struct BudgetDeleter {
  void operator()(headroom_retry_budget* b) const { headroom_retry_budget_destroy(b); }
};
using BudgetPtr = std::unique_ptr<headroom_retry_budget, BudgetDeleter>;
struct ReaderDeleter {
  void operator()(headroom_reader* r) const { headroom_reader_close(r); }
};
using ReaderPtr = std::unique_ptr<headroom_reader, ReaderDeleter>;

TEST(CApiRetry, DialsPerPriority) {
  headroom_retry_dials d{};
  ASSERT_EQ(headroom_retry_dials_for(1, 0.0, &d), 0);
  EXPECT_EQ(d.max_retries, 2);
  EXPECT_DOUBLE_EQ(d.retry_after_seconds, 0.5);
  ASSERT_EQ(headroom_retry_dials_for(60, 0.5, &d), 0);
  EXPECT_EQ(d.max_retries, 1);
  EXPECT_DOUBLE_EQ(d.retry_after_seconds, 5.0);
  ASSERT_EQ(headroom_retry_dials_for(100, std::nan(""), &d), 0);
  EXPECT_EQ(d.max_retries, 0);
  EXPECT_DOUBLE_EQ(d.retry_after_seconds, 20.0);
  EXPECT_EQ(headroom_retry_dials_for(1, 0.0, nullptr), -EINVAL);
}

TEST(CApiRetry, FormatLikeSnprintf) {
  const headroom_retry_dials d{1, 0, 2.5};
  char buf[64];
  const std::string want = R"({"maxRetries":1,"retryAfterSeconds":2.5})";
  EXPECT_EQ(headroom_retry_dials_format(&d, buf, sizeof buf), static_cast<int>(want.size()));
  EXPECT_EQ(std::string(buf), want);
  char small[8];
  EXPECT_EQ(headroom_retry_dials_format(&d, small, sizeof small), static_cast<int>(want.size()));
  EXPECT_EQ(std::string(small), want.substr(0, 7));  // truncated, terminated
  EXPECT_EQ(headroom_retry_dials_format(&d, nullptr, 0), static_cast<int>(want.size()));  // just the length
  EXPECT_EQ(headroom_retry_dials_format(nullptr, buf, sizeof buf), -EINVAL);
  EXPECT_EQ(headroom_retry_dials_format(&d, nullptr, 5), -EINVAL);
}

TEST(CApiRetry, ParseAndItsErrors) {
  headroom_retry_dials d{};
  char err[256];
  const std::string ok = R"( {"retryAfterSeconds": 7.5, "maxRetries": 40} trailing)";
  // len bounds the text: the trailing word is not read.
  ASSERT_EQ(headroom_retry_dials_parse(ok.data(), ok.find('}') + 1, &d, err, sizeof err), 0) << err;
  EXPECT_EQ(d.max_retries, 10);  // clamped to the cap
  EXPECT_DOUBLE_EQ(d.retry_after_seconds, 7.5);
  EXPECT_STREQ(err, "");
  EXPECT_EQ(headroom_retry_dials_parse(ok.data(), ok.size(), &d, err, sizeof err), -EBADMSG);
  EXPECT_NE(std::strstr(err, "unexpected text after '}'"), nullptr) << err;
  const std::string neg = R"({"maxRetries":-2,"retryAfterSeconds":1})";
  EXPECT_EQ(headroom_retry_dials_parse(neg.data(), neg.size(), &d, err, sizeof err), -EBADMSG);
  EXPECT_NE(std::strstr(err, "\"maxRetries\" (-2) must not be negative"), nullptr) << err;
  EXPECT_EQ(headroom_retry_dials_parse(nullptr, 0, &d, err, sizeof err), -EINVAL);
  EXPECT_EQ(headroom_retry_dials_parse(neg.data(), neg.size(), nullptr, nullptr, 0), -EINVAL);
}

TEST(CApiRetry, RetryAfterHeader) {
  const headroom_retry_dials d{1, 0, 2.1};
  EXPECT_EQ(headroom_retry_after_header_seconds(&d), 3);
  const headroom_retry_dials tiny{1, 0, 0.01};
  EXPECT_EQ(headroom_retry_after_header_seconds(&tiny), 1);
  EXPECT_EQ(headroom_retry_after_header_seconds(nullptr), -EINVAL);
}

TEST(CApiRetry, GrpcTrailersTable) {
  struct Case {
    headroom_retry_dials dials;
    int pushback_ms;
    const char* pushback;
    const char* dials_json;
  };
  const Case cases[] = {
      {{1, 0, 2.5}, 2500, "2500", R"({"maxRetries":1,"retryAfterSeconds":2.5})"},
      {{0, 0, 20.0}, -1, "-1", R"({"maxRetries":0,"retryAfterSeconds":20})"},
      {{3, 0, 0.0}, 0, "0", R"({"maxRetries":3,"retryAfterSeconds":0})"},
      {{1, 0, 0.0001}, 1, "1", R"({"maxRetries":1,"retryAfterSeconds":1e-04})"},  // rounded up
      {{50, 0, 1e9}, 3600000, "3600000", R"({"maxRetries":10,"retryAfterSeconds":3600})"},
  };
  for (const Case& c : cases) {
    headroom_grpc_trailer t[HEADROOM_GRPC_SHED_TRAILER_COUNT];
    ASSERT_EQ(headroom_retry_grpc_trailers(&c.dials, t), 2);
    EXPECT_STREQ(t[0].key, HEADROOM_GRPC_PUSHBACK_TRAILER);
    EXPECT_STREQ(t[0].key, "grpc-retry-pushback-ms");
    EXPECT_STREQ(t[0].value, c.pushback);
    EXPECT_STREQ(t[1].key, HEADROOM_RETRY_DIALS_HEADER);
    EXPECT_STREQ(t[1].key, "x-headroom-retry");
    EXPECT_STREQ(t[1].value, c.dials_json);
    EXPECT_EQ(headroom_retry_grpc_pushback_ms(&c.dials), c.pushback_ms);
  }
  EXPECT_EQ(HEADROOM_GRPC_SHED_STATUS, 8);  // RESOURCE_EXHAUSTED
}

TEST(CApiRetry, GrpcTrailersHoldTheLongestDials) {
  // The longest wire form: ten retries and a wait of 17 significant digits
  // with an exponent.
  const headroom_retry_dials d{10, 0, 1.2345678901234567e-100};
  headroom_grpc_trailer t[HEADROOM_GRPC_SHED_TRAILER_COUNT];
  ASSERT_EQ(headroom_retry_grpc_trailers(&d, t), 2);
  EXPECT_STREQ(t[1].value, R"({"maxRetries":10,"retryAfterSeconds":1.2345678901234567e-100})");
  EXPECT_STREQ(t[0].value, "0");
  EXPECT_EQ(headroom_retry_grpc_trailers(nullptr, t), -EINVAL);
  EXPECT_EQ(headroom_retry_grpc_trailers(&d, nullptr), -EINVAL);
  EXPECT_EQ(headroom_retry_grpc_pushback_ms(nullptr), -EINVAL);
}

TEST(CApiRetry, CreateValidatesNamingTheField) {
  char err[256];
  headroom_retry_budget_options o{};
  o.struct_size = sizeof o;
  o.set_max_ratio = 1;
  o.max_ratio[0] = 0.1;
  o.max_ratio[1] = 0.1;
  o.max_ratio[2] = 0.05;
  o.max_ratio[3] = 0.2;
  EXPECT_EQ(headroom_retry_budget_create(&o, err, sizeof err), nullptr);
  EXPECT_NE(std::strstr(err, "max_ratio[BULK] (0.2) must be at most max_ratio[BEST_EFFORT] (0.05)"), nullptr) << err;
  o = headroom_retry_budget_options{};
  o.struct_size = sizeof o;
  o.slots = 65;
  EXPECT_EQ(headroom_retry_budget_create(&o, err, sizeof err), nullptr);
  EXPECT_NE(std::strstr(err, "slots (65)"), nullptr) << err;
  o.slots = 0;
  o.heavy_shed = std::nan("");
  EXPECT_EQ(headroom_retry_budget_create(&o, err, sizeof err), nullptr);
  EXPECT_NE(std::strstr(err, "heavy_shed (nan)"), nullptr) << err;
  o.heavy_shed = 0;
  o.struct_size = 8;
  EXPECT_EQ(headroom_retry_budget_create(&o, err, sizeof err), nullptr);
  EXPECT_NE(std::strstr(err, "struct_size is 8"), nullptr) << err;
  o.struct_size = sizeof o;
  BudgetPtr b(headroom_retry_budget_create(&o, err, sizeof err));  // all zero: the defaults
  ASSERT_NE(b, nullptr) << err;
  EXPECT_STREQ(err, "");
  BudgetPtr d(headroom_retry_budget_create(nullptr, err, sizeof err));
  ASSERT_NE(d, nullptr) << err;
}

TEST(CApiRetry, BudgetDialsAndTarget) {
  char err[256];
  BudgetPtr b(headroom_retry_budget_create(nullptr, err, sizeof err));
  ASSERT_NE(b, nullptr) << err;
  for (int i = 0; i < 1000; ++i) headroom_retry_budget_first_attempt(b.get(), kT0);
  // BULK: 0.025 x 1000 + 10 = 35 retries.
  int n = 0;
  while (headroom_retry_budget_may_retry(b.get(), 100, 1, kT0, kT0) == HEADROOM_RETRY && n < 1000) ++n;
  EXPECT_EQ(n, 35);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 100, 1, kT0, kT0), HEADROOM_RETRY_DENY_BUDGET);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 1, 1, kT0, kT0), HEADROOM_RETRY);
  int64_t firsts = 0, retries = 0;
  ASSERT_EQ(headroom_retry_budget_window(b.get(), kT0, &firsts, &retries), 0);
  EXPECT_EQ(firsts, 1000);
  EXPECT_EQ(retries, 36);

  const headroom_retry_dials dials{1, 0, 2.0};
  ASSERT_EQ(headroom_retry_budget_record_dials(b.get(), 30, &dials, kT0), 0);
  // The wait counts from the call's own failure (kT0 + kS here).
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 30, 1, kT0 + kS, kT0 + kS), HEADROOM_RETRY_DENY_DIALS_WAIT);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 30, 1, kT0 + 3 * kS - 1, kT0 + kS), HEADROOM_RETRY_DENY_DIALS_WAIT);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 30, 2, kT0 + 3 * kS, kT0 + kS), HEADROOM_RETRY_DENY_DIALS_COUNT);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 30, 1, kT0 + 3 * kS, kT0 + kS), HEADROOM_RETRY);

  const double heavy[4] = {0.0, 0.0, 0.0, 0.75};
  ASSERT_EQ(headroom_retry_budget_update_probabilities(b.get(), heavy, 0), 0);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 100, 1, kT0, kT0), HEADROOM_RETRY_DENY_TARGET_SHEDDING);
  ASSERT_EQ(headroom_retry_budget_update_probabilities(b.get(), heavy, 1), 0);  // stale: ignored
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 100, 1, kT0, kT0), HEADROOM_RETRY_DENY_BUDGET);
}

TEST(CApiRetry, OptionsReachTheBudget) {
  char err[256];
  headroom_retry_budget_options o{};
  o.struct_size = sizeof o;
  o.window_ms = 2000;
  o.slots = 2;
  o.min_retries_per_second = -1;  // none
  o.set_max_ratio = 1;
  o.max_ratio[0] = 0.5;
  o.max_ratio[1] = 0.5;
  o.max_ratio[2] = 0.5;
  o.max_ratio[3] = 0.5;
  BudgetPtr b(headroom_retry_budget_create(&o, err, sizeof err));
  ASSERT_NE(b, nullptr) << err;
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 100, 1, kT0, kT0), HEADROOM_RETRY_DENY_BUDGET);
  for (int i = 0; i < 4; ++i) headroom_retry_budget_first_attempt(b.get(), kT0);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 100, 1, kT0, kT0), HEADROOM_RETRY);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 100, 1, kT0, kT0), HEADROOM_RETRY);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 100, 1, kT0, kT0), HEADROOM_RETRY_DENY_BUDGET);
  // The 2 s window has slid past them.
  int64_t firsts = -1, retries = -1;
  ASSERT_EQ(headroom_retry_budget_window(b.get(), kT0 + 2 * kS, &firsts, &retries), 0);
  EXPECT_EQ(firsts, 0);
  EXPECT_EQ(retries, 0);
}

TEST(CApiRetry, ShedProbabilitiesFromAReaderFeedTheBudget) {
  headroom::testing::TempDir tmp;
  auto w = ReportFileWriter::open(tmp.path());
  ASSERT_TRUE(w) << w.error().message;
  char err[256];
  ReaderPtr r(headroom_reader_open(tmp.path().c_str(), 0, err, sizeof err));
  ASSERT_TRUE(r) << err;
  double p[4] = {-1, -1, -1, -1};
  EXPECT_EQ(headroom_reader_shed_probabilities(r.get(), "endpoint.api", p, err, sizeof err), -ENOENT);
  EXPECT_NE(std::strstr(err, "endpoint.api"), nullptr) << err;

  Report rep;
  rep.set_application_utilization(0.78);  // BULK and BEST_EFFORT shed entirely, DEGRADED a third, CRITICAL not
  auto& nm = *rep.mutable_named_metrics();
  nm[std::string(kTimestampMsKey)] = static_cast<double>(unix_now_ms());
  nm[std::string(kSeqKey)] = 1;
  nm[std::string(kIntervalMsKey)] = 1000;
  ASSERT_TRUE(w->write("endpoint.api.orca", rep));
  ASSERT_EQ(headroom_reader_wait(r.get(), 2000), 1);
  ASSERT_EQ(headroom_reader_shed_probabilities(r.get(), "endpoint.api", p, err, sizeof err), 0) << err;
  EXPECT_EQ(p[0], 0.0);
  EXPECT_GT(p[1], 0.2);
  EXPECT_LT(p[1], 0.5);
  EXPECT_EQ(p[2], 1.0);
  EXPECT_EQ(p[3], 1.0);

  BudgetPtr b(headroom_retry_budget_create(nullptr, err, sizeof err));
  ASSERT_NE(b, nullptr) << err;
  ASSERT_EQ(headroom_retry_budget_update_probabilities(b.get(), p, 0), 0);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 51, 1, kT0, kT0), HEADROOM_RETRY_DENY_TARGET_SHEDDING);
  EXPECT_EQ(headroom_retry_budget_may_retry(b.get(), 50, 1, kT0, kT0), HEADROOM_RETRY);

  // The file goes away: stale, and the probabilities fail open.
  std::filesystem::remove(tmp / "endpoint.api.orca");
  ASSERT_EQ(headroom_reader_wait(r.get(), 2000), 1);
  EXPECT_EQ(headroom_reader_shed_probabilities(r.get(), "endpoint.api", p, err, sizeof err), 1);
  EXPECT_STRNE(err, "");
  EXPECT_EQ(p[3], 0.0);
  EXPECT_EQ(headroom_reader_shed_probabilities(nullptr, "endpoint.api", p, err, sizeof err), -EINVAL);
  EXPECT_EQ(headroom_reader_shed_probabilities(r.get(), "endpoint.api", nullptr, err, sizeof err), -EINVAL);
}

TEST(CApiRetry, NullArguments) {
  const headroom_retry_dials dials{1, 0, 1.0};
  const double p[4] = {0, 0, 0, 0};
  int64_t x = 0;
  headroom_retry_budget_first_attempt(nullptr, kT0);  // ignored
  headroom_retry_budget_destroy(nullptr);
  EXPECT_EQ(headroom_retry_budget_may_retry(nullptr, 1, 1, kT0, kT0), -EINVAL);
  EXPECT_EQ(headroom_retry_budget_record_dials(nullptr, 1, &dials, kT0), -EINVAL);
  EXPECT_EQ(headroom_retry_budget_update_probabilities(nullptr, p, 0), -EINVAL);
  EXPECT_EQ(headroom_retry_budget_window(nullptr, kT0, &x, &x), -EINVAL);
  char err[64];
  BudgetPtr b(headroom_retry_budget_create(nullptr, err, sizeof err));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(headroom_retry_budget_record_dials(b.get(), 1, nullptr, kT0), -EINVAL);
  EXPECT_EQ(headroom_retry_budget_update_probabilities(b.get(), nullptr, 0), -EINVAL);
  EXPECT_EQ(headroom_retry_budget_window(b.get(), kT0, nullptr, &x), -EINVAL);
}

}  // namespace
}  // namespace headroom::orca
