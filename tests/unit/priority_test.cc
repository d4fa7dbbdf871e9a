// SPDX-License-Identifier: Apache-2.0
// Priority travels with the call: the header's parser (table), the default
// for a missing or unreadable header, the thread's scope (nesting, other
// threads, the exchange under the C interface) and the outgoing priority (a
// downgrade passes, an upgrade is refused and counted).
#include "headroom/orca/priority.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>

namespace headroom::orca {
namespace {

TEST(PriorityHeader, Table) {
  struct Case {
    std::string text;
    std::optional<int> priority;
  };
  const Case cases[] = {
      {"1", 1},
      {"40", 40},
      {"100", 100},
      {"007", 7},
      {"  25\t", 25},
      {"\r\n75 ", 75},
      {"CRITICAL", 25},
      {"critical", 25},
      {"Degraded", 50},
      {"BEST_EFFORT", 75},
      {"best-effort", 75},
      {" bulk ", 100},
      {"0", std::nullopt},
      {"101", std::nullopt},
      {"-1", std::nullopt},
      {"+5", std::nullopt},
      {"1e2", std::nullopt},
      {"2.5", std::nullopt},
      {"4 0", std::nullopt},
      {"99999999999999999999", std::nullopt},
      {"", std::nullopt},
      {"   ", std::nullopt},
      {"urgent", std::nullopt},
      {"CRITICAL!", std::nullopt},
      {"0x10", std::nullopt},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_priority_header(c.text), c.priority) << "'" << c.text << "'";
  }
}

TEST(PriorityHeader, BucketNameIsSaid) {
  const auto named = parse_priority_value("BULK");
  ASSERT_TRUE(named);
  EXPECT_TRUE(named->bucket_name);
  EXPECT_EQ(named->priority, 100);
  const auto level = parse_priority_value("80");
  ASSERT_TRUE(level);
  EXPECT_FALSE(level->bucket_name);
  EXPECT_EQ(level->priority, 80);
}

TEST(PriorityHeader, MissingOrGarbageGetsTheDefault) {
  EXPECT_EQ(priority_or_default(std::nullopt, 40), 40);
  EXPECT_EQ(priority_or_default(parse_priority_header("garbage"), 40), 40);
  EXPECT_EQ(priority_or_default(parse_priority_header(""), 40), 40);
  EXPECT_EQ(priority_or_default(parse_priority_header("101"), 40), 40);
  EXPECT_EQ(priority_or_default(parse_priority_header("12"), 40), 12);
  EXPECT_EQ(priority_or_default(std::nullopt, 0), 1);      // the default clamped too
  EXPECT_EQ(priority_or_default(std::nullopt, 500), 100);
}

TEST(PriorityHeader, FormatReadsBack) {
  EXPECT_EQ(kPriorityHeader, "x-priority");
  for (int p = 1; p <= 100; ++p) EXPECT_EQ(parse_priority_header(format_priority_header(p)), p);
  EXPECT_EQ(format_priority_header(0), "1");
  EXPECT_EQ(format_priority_header(1000), "100");
}

TEST(PriorityScope, NestsAndRestores) {
  EXPECT_EQ(current_priority(60), 60);  // no scope: the fallback
  {
    PriorityScope outer(10);
    EXPECT_EQ(current_priority(60), 10);
    {
      PriorityScope inner(80);
      EXPECT_EQ(current_priority(60), 80);
    }
    EXPECT_EQ(current_priority(60), 10);
  }
  EXPECT_EQ(current_priority(60), 60);
  {
    PriorityScope clamped(0);
    EXPECT_EQ(current_priority(60), 1);
  }
}

TEST(PriorityScope, ExchangeIsTheScopeAsAValue) {
  EXPECT_EQ(exchange_current_priority(30), 0);  // none before
  EXPECT_EQ(current_priority(-1), 30);
  {
    PriorityScope inner(70);
    EXPECT_EQ(exchange_current_priority(500), 70);  // clamped
    EXPECT_EQ(current_priority(-1), 100);
  }
  EXPECT_EQ(current_priority(-1), 30);  // the scope restored what it found
  EXPECT_EQ(exchange_current_priority(-4), 30);  // 0 or less: none
  EXPECT_EQ(current_priority(-1), -1);
  EXPECT_EQ(exchange_current_priority(0), 0);
}

TEST(PriorityScope, OtherThreadsDoNotSeeIt) {
  PriorityScope scope(5);
  int seen = -1, seen_inside = -1;
  std::thread t([&] {
    seen = current_priority(77);
    PriorityScope own(90);
    seen_inside = current_priority(77);
  });
  t.join();
  EXPECT_EQ(seen, 77);
  EXPECT_EQ(seen_inside, 90);
  EXPECT_EQ(current_priority(77), 5);  // the other thread's scope left ours alone
}

TEST(OutgoingPriority, DowngradePassesUpgradeIsRefusedAndCounted) {
  PriorityScope scope(20);
  const uint64_t before = priority_upgrades_refused();
  EXPECT_EQ(outgoing_priority(), 20);     // no request: the request's own
  EXPECT_EQ(outgoing_priority(20), 20);   // the same
  EXPECT_EQ(outgoing_priority(80), 80);   // a downgrade
  EXPECT_EQ(outgoing_priority(500), 100);  // clamped, still a downgrade
  EXPECT_EQ(priority_upgrades_refused(), before);
  EXPECT_EQ(outgoing_priority(5), 20);    // an upgrade: refused
  EXPECT_EQ(priority_upgrades_refused(), before + 1);
  EXPECT_EQ(outgoing_priority(0), 20);    // clamped to 1: refused too
  EXPECT_EQ(priority_upgrades_refused(), before + 2);
}

TEST(OutgoingPriority, WithoutScopeClaimsNothing) {
  const uint64_t before = priority_upgrades_refused();
  EXPECT_EQ(outgoing_priority(), 100);
  EXPECT_EQ(outgoing_priority(100), 100);
  EXPECT_EQ(priority_upgrades_refused(), before);
  EXPECT_EQ(outgoing_priority(30), 100);
  EXPECT_EQ(priority_upgrades_refused(), before + 1);
}

TEST(OutgoingPriority, RefusalsCountAcrossThreads) {
  const uint64_t before = priority_upgrades_refused();
  constexpr int kThreads = 4, kEach = 1000;
  std::thread threads[kThreads];
  for (auto& t : threads)
    t = std::thread([] {
      PriorityScope scope(50);
      for (int i = 0; i < kEach; ++i) (void)outgoing_priority(10);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(priority_upgrades_refused(), before + kThreads * kEach);
}

}  // namespace
}  // namespace headroom::orca
