// SPDX-License-Identifier: Apache-2.0
// `headroomctl buffer` against several instances of one target, without a
// socket: where first attempts and retries go (agent/ctl/loadgen_plan.h),
// the instance a retry record carries, the engine's check of the instances,
// each instance's counts (agent/ctl/buffer_model.h) and the instances
// section of the outputs (agent/ctl/buffer_render.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/ctl/buffer_model.h"
#include "agent/ctl/buffer_render.h"
#include "agent/ctl/loadgen.h"
#include "agent/ctl/loadgen_plan.h"

namespace b = headroom::ctl::buffer;
namespace lg = headroom::ctl::loadgen;
using std::chrono::seconds;

namespace {

constexpr int64_t kMs = 1'000'000;

lg::Record attempt(uint8_t instance, uint16_t status, int64_t latency_ms, uint8_t k = 0,
                   lg::Outcome outcome = lg::Outcome::response) {
  lg::Record r;
  r.instance = instance;
  r.status = status;
  r.latency_ns = latency_ms * kMs;
  r.attempt = k;
  r.outcome = outcome;
  return r;
}

}  // namespace

TEST(BufferInstances, FirstAttemptsGoRoundRobinEveryClassToEveryInstance) {
  // Four classes taken in turn over four instances: one cursor for all
  // would send every request of a class to the same instance.
  constexpr std::size_t kInstances = 4, kClasses = 4;
  std::vector<std::vector<int>> seen(kInstances, std::vector<int>(kClasses, 0));
  std::vector<uint64_t> cursor(kClasses, 0);
  for (int i = 0; i < 400; ++i) {
    const auto cls = static_cast<uint8_t>(i % kClasses);
    const uint8_t instance = lg::first_instance(cursor[cls]++, cls, kInstances);
    ASSERT_LT(instance, kInstances);
    ++seen[instance][cls];
  }
  for (std::size_t n = 0; n < kInstances; ++n)
    for (std::size_t c = 0; c < kClasses; ++c) EXPECT_EQ(seen[n][c], 25) << "instance " << n << ", class " << c;

  // One class: plain round robin.
  for (uint64_t k = 0; k < 10; ++k) EXPECT_EQ(lg::first_instance(k, 0, 3), k % 3);
  // One instance: always it.
  for (uint64_t k = 0; k < 10; ++k) EXPECT_EQ(lg::first_instance(k, 2, 1), 0);
}

TEST(BufferInstances, ARetryGoesToTheNextInstanceNeverTheSame) {
  for (std::size_t n = 2; n <= lg::kMaxInstances; ++n)
    for (std::size_t i = 0; i < n; ++i) {
      const uint8_t next = lg::next_instance(static_cast<uint8_t>(i), n);
      EXPECT_NE(next, i) << n << " instances";
      EXPECT_EQ(next, (i + 1) % n) << n << " instances";
    }
  EXPECT_EQ(lg::next_instance(0, 1), 0);

  // The retry queue gives the retry record the next instance.
  lg::RetryQueue q;
  lg::Record failed = attempt(2, 503, 1);
  failed.first = 7;
  q.push(failed, 10 * kMs, 3);
  lg::Record again = q.pop(0);
  EXPECT_EQ(again.instance, 0) << "after the last instance, the first";
  EXPECT_EQ(again.attempt, 1);
  EXPECT_EQ(again.first, 7u);
  q.push(again, 20 * kMs, 3);
  EXPECT_EQ(q.pop(0).instance, 1);
  q.push(failed, 30 * kMs);  // one instance: stays on it
  EXPECT_EQ(q.pop(0).instance, 0);
}

TEST(BufferInstances, EachInstanceCountsTheAttemptsItGot) {
  const b::Criteria criteria;  // SLO 500 ms, 503/429 within 50 ms
  const std::vector<lg::Record> records = {
      attempt(0, 200, 10),                                 // served
      attempt(1, 503, 1),                                  // rejected
      attempt(2, 200, 10),                                 // served
      attempt(2, 200, 10, 1),                              // a retry, served where it went
      attempt(0, 200, 900),                                // over the SLO: failed
      attempt(1, 0, 0, 0, lg::Outcome::timeout),           // failed
      attempt(1, 0, 0, 0, lg::Outcome::cancelled),         // not counted
      attempt(9, 200, 1),                                  // no such instance: not counted
  };
  const auto counts = b::instance_counts({"a:1/", "b:1/", "c:1/"}, records, criteria);
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts[0].target, "a:1/");
  EXPECT_EQ(counts[0].attempts, 2);
  EXPECT_EQ(counts[0].served, 1);
  EXPECT_EQ(counts[0].failed, 1);
  EXPECT_EQ(counts[1].attempts, 2);
  EXPECT_EQ(counts[1].rejected, 1);
  EXPECT_EQ(counts[1].failed, 1);
  EXPECT_EQ(counts[2].attempts, 2);
  EXPECT_EQ(counts[2].served, 2);
  EXPECT_EQ(counts[2].rejected + counts[2].failed, 0);
}

TEST(BufferInstances, TheInstancesSectionOnlyWithSeveral) {
  b::RunReport report;
  report.target = "127.0.0.1:8001/";
  report.mix = {b::MixEntry{"CRITICAL", 1, 1}};
  b::StepResult step;
  step.step = b::Step{b::StepKind::ramp, 2, 20, seconds(1), seconds(0)};
  step.by_class.resize(1);
  report.steps = {step};
  report.instances = {b::InstanceCounts{"127.0.0.1:8001/", 5, 5, 0, 0}};
  EXPECT_FALSE(nlohmann::json::parse(b::render_json(report)).contains("instances")) << "one instance: as before";
  for (const auto& line : b::render_table(report)) EXPECT_EQ(line.find("INSTANCE"), std::string::npos) << line;

  report.instances.push_back(b::InstanceCounts{"127.0.0.1:8002/", 7, 3, 4, 0});
  const auto doc = nlohmann::json::parse(b::render_json(report));
  ASSERT_TRUE(doc.contains("instances"));
  ASSERT_EQ(doc["instances"].size(), 2u);
  EXPECT_EQ(doc["instances"][1]["target"], "127.0.0.1:8002/");
  EXPECT_EQ(doc["instances"][1]["attempts"], 7);
  EXPECT_EQ(doc["instances"][1]["served"], 3);
  EXPECT_EQ(doc["instances"][1]["rejected"], 4);
  EXPECT_EQ(doc["instances"][1]["failed"], 0);
  EXPECT_EQ(doc["target"], "127.0.0.1:8001/");
  std::string table;
  for (const auto& line : b::render_table(report)) table += line + "\n";
  EXPECT_NE(table.find("127.0.0.1:8001/ and 1 other instances"), std::string::npos) << table;
  EXPECT_NE(table.find("INSTANCE"), std::string::npos) << table;
  EXPECT_NE(table.find("127.0.0.1:8002/"), std::string::npos) << table;
}
