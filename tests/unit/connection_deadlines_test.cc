// SPDX-License-Identifier: Apache-2.0
// ConnectionDeadlines: who is closed when a listener is full, who when a
// deadline passes, and the cap from the descriptor limit.
#include "publishers/connection_deadlines.h"

#include <gtest/gtest.h>

namespace headroom::publishers {
namespace {

using std::chrono::milliseconds;
using T = ConnectionDeadlines::Clock::time_point;

T at(int ms) { return T(milliseconds(ms)); }

TEST(ConnectionDeadlines, UnderTheCapNothingIsClosed) {
  ConnectionDeadlines d(3, milliseconds(5000));
  EXPECT_EQ(d.accepted(1, at(0)), std::nullopt);
  EXPECT_EQ(d.accepted(2, at(10)), std::nullopt);
  EXPECT_EQ(d.accepted(3, at(20)), std::nullopt);
  EXPECT_EQ(d.open(), 3u);
  EXPECT_TRUE(d.expired(at(4999)).empty());
}

TEST(ConnectionDeadlines, FullClosesTheOldestWaitingNotTheNewcomer) {
  ConnectionDeadlines d(3, milliseconds(5000));
  d.accepted(1, at(0));
  d.accepted(2, at(10));
  d.accepted(3, at(20));
  d.requested(1, at(30));  // 1 asked: now 2 waited longest
  EXPECT_EQ(d.accepted(4, at(40)), 2u);
  // 2 is closing but not closed yet: the next one takes 3, not 2 again.
  EXPECT_EQ(d.accepted(5, at(50)), 3u);
  d.closed(2);
  d.closed(3);
  EXPECT_EQ(d.open(), 3u);
  EXPECT_EQ(d.accepted(6, at(60)), 1u);
}

TEST(ConnectionDeadlines, ADeadlineCountsFromAcceptOrTheLastRequest) {
  ConnectionDeadlines d(10, milliseconds(5000));
  d.accepted(1, at(0));
  d.accepted(2, at(1000));
  d.accepted(3, at(2000));
  d.requested(1, at(3000));
  EXPECT_TRUE(d.expired(at(5999)).empty());
  EXPECT_EQ(d.expired(at(6000)), (std::vector<ConnectionDeadlines::Id>{2}));
  EXPECT_TRUE(d.expired(at(6500)).empty()) << "2 is returned once; 3 is due at 7000";
  EXPECT_EQ(d.expired(at(8000)), (std::vector<ConnectionDeadlines::Id>{3, 1}));
  d.requested(1, at(8000));  // too late: it is being closed
  d.closed(1);
  d.closed(2);
  d.closed(3);
  EXPECT_EQ(d.open(), 0u);
  EXPECT_TRUE(d.expired(at(100000)).empty());
}

TEST(ConnectionDeadlines, AReusedIdIsANewConnection) {
  ConnectionDeadlines d(2, milliseconds(5000));
  d.accepted(7, at(0));
  d.accepted(7, at(4000));  // the old 7's close was not seen
  EXPECT_EQ(d.open(), 1u);
  EXPECT_TRUE(d.expired(at(8999)).empty());
  EXPECT_EQ(d.expired(at(9000)), (std::vector<ConnectionDeadlines::Id>{7}));
}

TEST(ConnectionDeadlines, UnknownIdsChangeNothing) {
  ConnectionDeadlines d(2, milliseconds(100));
  d.requested(9, at(0));
  d.closed(9);
  EXPECT_EQ(d.open(), 0u);
}

TEST(ConnectionCap, FromTheDescriptorLimit) {
  struct Row {
    uint64_t nofile;
    std::size_t wanted;
    double share;
    std::size_t cap;
  };
  for (const Row& r : {Row{20000, 1024, 0.25, 1024}, Row{1024, 1024, 0.25, 256}, Row{524288, 1024, 0.25, 1024},
                       Row{32, 1024, 0.25, 16}, Row{0, 1024, 0.25, 16}})
    EXPECT_EQ(connection_cap(r.nofile, r.wanted, r.share), r.cap) << r.nofile << " " << r.wanted;
}

}  // namespace
}  // namespace headroom::publishers
