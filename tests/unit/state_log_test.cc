// SPDX-License-Identifier: Apache-2.0
// FailureLatch: a failure that repeats is logged once, its end once.
#include "publishers/failure_latch.h"

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

namespace headroom::agent {
namespace {

class FailureLatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100);
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink_));
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }
  std::vector<std::string> lines() { return sink_->last_formatted(); }

  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(FailureLatchTest, LogsOnlyTheTransitions) {
  FailureLatch latch;
  EXPECT_FALSE(latch.ok("back")) << "nothing to recover from";
  for (int i = 0; i < 5; ++i) latch.fail(spdlog::level::err, "broken: {}", i);
  EXPECT_TRUE(latch.failing());
  for (int i = 0; i < 5; ++i) latch.ok("back after {}", i);
  EXPECT_FALSE(latch.failing());
  EXPECT_TRUE(latch.fail(spdlog::level::warn, "broken again"));
  const auto l = lines();
  ASSERT_EQ(l.size(), 3u);
  EXPECT_NE(l[0].find("broken: 0"), std::string::npos) << l[0];
  EXPECT_NE(l[1].find("back after 0"), std::string::npos) << l[1];
  EXPECT_NE(l[2].find("broken again"), std::string::npos) << l[2];
}

TEST_F(FailureLatchTest, QuietTransitionsAreRecordedWithoutALine) {
  FailureLatch latch;
  EXPECT_TRUE(latch.fail(spdlog::level::off, "not shown"));
  EXPECT_TRUE(latch.failing());
  EXPECT_TRUE(latch.ok_quietly());
  EXPECT_FALSE(latch.ok_quietly());
  EXPECT_TRUE(lines().empty());
}

}  // namespace
}  // namespace headroom::agent
