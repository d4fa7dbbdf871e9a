// SPDX-License-Identifier: Apache-2.0
// Priority through headroom_orca.h: the header's parser (table), the default
// for a missing or unreadable header, the format, the thread's scope as a
// begin/end pair (nesting, misuse refused, other threads, beside C++'s
// PriorityScope), the outgoing priority (a downgrade passes, an upgrade is
// refused and counted) and the same calls from a C11 translation unit.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "headroom/orca/headroom_orca.h"
#include "headroom/orca/priority.h"

extern "C" int headroom_c11_priority_calls(void);  // c_api_c11.c

namespace headroom::orca {
namespace {

int parse(const std::string& text, int* bucket_name = nullptr) {
  return headroom_priority_parse(text.data(), text.size(), bucket_name);
}

TEST(CApiPriority, ParseTable) {
  struct Case {
    std::string text;
    int result;  // a level, or a negative errno
    int bucket_name;
  };
  const Case cases[] = {
      {"1", 1, 0},
      {"40", 40, 0},
      {"100", 100, 0},
      {"007", 7, 0},
      {" \t25\r\n", 25, 0},
      {"CRITICAL", 25, 1},
      {"degraded", 50, 1},
      {"best-effort", 75, 1},
      {" Bulk ", 100, 1},
      {"0", -EBADMSG, -1},
      {"101", -EBADMSG, -1},
      {"-1", -EBADMSG, -1},
      {"+5", -EBADMSG, -1},
      {"2.5", -EBADMSG, -1},
      {"1e2", -EBADMSG, -1},
      {"99999999999999999999", -EBADMSG, -1},
      {"", -EBADMSG, -1},
      {"  ", -EBADMSG, -1},
      {"urgent", -EBADMSG, -1},
  };
  for (const Case& c : cases) {
    int named = -1;
    EXPECT_EQ(parse(c.text, &named), c.result) << "'" << c.text << "'";
    EXPECT_EQ(named, c.bucket_name) << "'" << c.text << "'";  // untouched on an error
    EXPECT_EQ(parse(c.text), c.result) << "'" << c.text << "' without bucket_name";
  }
}

TEST(CApiPriority, ParseReadsLenBytesAndTellsMissingFromNull) {
  const char text[] = "30garbage";
  EXPECT_EQ(headroom_priority_parse(text, 2, nullptr), 30);
  EXPECT_EQ(headroom_priority_parse(text, sizeof text - 1, nullptr), -EBADMSG);
  EXPECT_EQ(headroom_priority_parse(text, 0, nullptr), -EBADMSG);  // present but empty
  EXPECT_EQ(headroom_priority_parse(nullptr, 0, nullptr), -ENODATA);  // missing
  EXPECT_EQ(headroom_priority_parse(nullptr, 3, nullptr), -EINVAL);
}

TEST(CApiPriority, MissingOrGarbageHeaderGetsTheDefault) {
  struct Case {
    int parsed;
    int default_priority;
    int want;
  };
  const Case cases[] = {
      {-ENODATA, 40, 40},   // missing
      {-EBADMSG, 40, 40},   // garbage
      {-EINVAL, 40, 40},    //
      {-EBADMSG, 0, 1},     // the default is clamped
      {-EBADMSG, 500, 100}, //
      {75, 40, 75},         // a level wins
      {0, 40, 1},           // a level is clamped, as in C++
      {250, 40, 100},       //
  };
  for (const Case& c : cases)
    EXPECT_EQ(headroom_priority_or_default(c.parsed, c.default_priority), c.want)
        << c.parsed << " default " << c.default_priority;
  EXPECT_EQ(headroom_priority_or_default(parse("garbage"), 50), 50);
  EXPECT_EQ(headroom_priority_or_default(headroom_priority_parse(nullptr, 0, nullptr), 50), 50);
  EXPECT_EQ(headroom_priority_or_default(parse("bulk"), 50), 100);
}

TEST(CApiPriority, FormatLikeSnprintf) {
  char buf[8];
  EXPECT_EQ(headroom_priority_format(40, buf, sizeof buf), 2);
  EXPECT_STREQ(buf, "40");
  EXPECT_EQ(headroom_priority_format(0, buf, sizeof buf), 1);
  EXPECT_STREQ(buf, "1");
  EXPECT_EQ(headroom_priority_format(1000, buf, sizeof buf), 3);
  EXPECT_STREQ(buf, "100");
  char small[2];
  EXPECT_EQ(headroom_priority_format(100, small, sizeof small), 3);
  EXPECT_STREQ(small, "1");  // truncated, terminated
  EXPECT_EQ(headroom_priority_format(55, nullptr, 0), 2);
  EXPECT_EQ(headroom_priority_format(55, nullptr, 4), -EINVAL);
  // What the parser reads back.
  for (int p = 1; p <= 100; ++p) {
    ASSERT_GT(headroom_priority_format(p, buf, sizeof buf), 0);
    EXPECT_EQ(headroom_priority_parse(buf, std::strlen(buf), nullptr), p);
  }
}

TEST(CApiPriority, ScopesNestAndRestore) {
  EXPECT_EQ(headroom_priority_current(-1), -1);
  const int outer = headroom_priority_scope_begin(30);
  ASSERT_GT(outer, 0);
  EXPECT_EQ(headroom_priority_current(-1), 30);
  const int inner = headroom_priority_scope_begin(80);
  ASSERT_GT(inner, 0);
  EXPECT_EQ(headroom_priority_current(-1), 80);
  const int innermost = headroom_priority_scope_begin(0);  // clamped
  EXPECT_EQ(headroom_priority_current(-1), 1);
  EXPECT_EQ(headroom_priority_scope_end(innermost), 0);
  EXPECT_EQ(headroom_priority_current(-1), 80);
  EXPECT_EQ(headroom_priority_scope_end(inner), 0);
  EXPECT_EQ(headroom_priority_current(-1), 30);
  EXPECT_EQ(headroom_priority_scope_end(outer), 0);
  EXPECT_EQ(headroom_priority_current(-1), -1);
  // The same priority begun twice still gives two tokens.
  const int a = headroom_priority_scope_begin(50);
  const int b = headroom_priority_scope_begin(50);
  EXPECT_NE(a, b);
  EXPECT_EQ(headroom_priority_scope_end(b), 0);
  EXPECT_EQ(headroom_priority_scope_end(a), 0);
  EXPECT_EQ(headroom_priority_current(-1), -1);
}

TEST(CApiPriority, MisuseIsRefusedAndChangesNothing) {
  EXPECT_EQ(headroom_priority_scope_end(0), -EINVAL);  // nothing open
  const int outer = headroom_priority_scope_begin(20);
  const int inner = headroom_priority_scope_begin(60);
  EXPECT_EQ(headroom_priority_scope_end(outer), -EINVAL);  // out of order
  EXPECT_EQ(headroom_priority_current(-1), 60);
  EXPECT_EQ(headroom_priority_scope_end(inner + 1), -EINVAL);  // made up
  EXPECT_EQ(headroom_priority_scope_end(-EOVERFLOW), -EINVAL);
  EXPECT_EQ(headroom_priority_current(-1), 60);
  EXPECT_EQ(headroom_priority_scope_end(inner), 0);
  EXPECT_EQ(headroom_priority_scope_end(inner), -EINVAL);  // twice
  EXPECT_EQ(headroom_priority_current(-1), 20);
  // A token from another thread.
  int other = 0;
  std::thread([&] { other = headroom_priority_scope_begin(90); }).join();
  EXPECT_EQ(headroom_priority_scope_end(other), -EINVAL);
  EXPECT_EQ(headroom_priority_current(-1), 20);
  EXPECT_EQ(headroom_priority_scope_end(outer), 0);
  EXPECT_EQ(headroom_priority_current(-1), -1);
}

TEST(CApiPriority, SixtyFourScopesThenOverflow) {
  std::vector<int> tokens;
  for (int i = 0; i < 64; ++i) {
    tokens.push_back(headroom_priority_scope_begin(i + 1));
    ASSERT_GT(tokens.back(), 0) << i;
  }
  EXPECT_EQ(headroom_priority_scope_begin(99), -EOVERFLOW);
  EXPECT_EQ(headroom_priority_current(-1), 64);  // nothing opened
  for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) ASSERT_EQ(headroom_priority_scope_end(*it), 0);
  EXPECT_EQ(headroom_priority_current(-1), -1);
}

TEST(CApiPriority, NestsWithCppScopes) {
  PriorityScope cpp(40);
  const int token = headroom_priority_scope_begin(70);
  EXPECT_EQ(current_priority(-1), 70);
  {
    PriorityScope inner(90);
    EXPECT_EQ(headroom_priority_current(-1), 90);
  }
  EXPECT_EQ(headroom_priority_current(-1), 70);
  EXPECT_EQ(headroom_priority_scope_end(token), 0);
  EXPECT_EQ(current_priority(-1), 40);
}

TEST(CApiPriority, DowngradePassesUpgradeIsRefusedAndCounted) {
  const uint64_t before = headroom_priority_upgrades_refused();
  const int token = headroom_priority_scope_begin(40);
  EXPECT_EQ(headroom_priority_outgoing(HEADROOM_PRIORITY_NO_REQUEST), 40);
  EXPECT_EQ(headroom_priority_outgoing(-EBADMSG), 40);  // <= 0: no request
  EXPECT_EQ(headroom_priority_outgoing(40), 40);
  EXPECT_EQ(headroom_priority_outgoing(90), 90);  // a downgrade
  EXPECT_EQ(headroom_priority_outgoing(500), 100);
  EXPECT_EQ(headroom_priority_upgrades_refused(), before);
  EXPECT_EQ(headroom_priority_outgoing(10), 40);  // an upgrade: refused
  EXPECT_EQ(headroom_priority_upgrades_refused(), before + 1);
  EXPECT_EQ(priority_upgrades_refused(), before + 1);  // the C++ counter is the same
  EXPECT_EQ(headroom_priority_scope_end(token), 0);
  // Without a scope the current priority is 100: anything more important is an upgrade.
  EXPECT_EQ(headroom_priority_outgoing(HEADROOM_PRIORITY_NO_REQUEST), 100);
  EXPECT_EQ(headroom_priority_outgoing(100), 100);
  EXPECT_EQ(headroom_priority_outgoing(99), 100);
  EXPECT_EQ(headroom_priority_upgrades_refused(), before + 2);
}

TEST(CApiPriority, ThreadsDoNotSeeEachOthersScope) {
  const int token = headroom_priority_scope_begin(10);
  constexpr int kThreads = 4;
  std::vector<int> seen_before(kThreads), seen_inside(kThreads), seen_outgoing(kThreads), ended(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      seen_before[i] = headroom_priority_current(-1);
      const int t = headroom_priority_scope_begin(60 + i);
      for (int k = 0; k < 1000; ++k) {
        seen_inside[i] = headroom_priority_current(-1);
        if (seen_inside[i] != 60 + i) break;
      }
      seen_outgoing[i] = headroom_priority_outgoing(HEADROOM_PRIORITY_NO_REQUEST);
      ended[i] = headroom_priority_scope_end(t);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(seen_before[i], -1) << i;  // the main thread's scope is not theirs
    EXPECT_EQ(seen_inside[i], 60 + i) << i;
    EXPECT_EQ(seen_outgoing[i], 60 + i) << i;
    EXPECT_EQ(ended[i], 0) << i;
  }
  EXPECT_EQ(headroom_priority_current(-1), 10);  // nor theirs the main thread's
  EXPECT_EQ(headroom_priority_scope_end(token), 0);
}

TEST(CApiPriority, FromC11) { EXPECT_EQ(headroom_c11_priority_calls(), 0); }

}  // namespace
}  // namespace headroom::orca
