// SPDX-License-Identifier: Apache-2.0
// A reader re-reading node.orca in a tight loop while the publisher replaces it
// 100 000 times never sees a partial, empty or unparsable file, and never sees
// the sequence number go backwards.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "headroom/orca/report.h"
#include "publishers/orca_dir_publisher.h"
#include "temp_dir.h"

namespace headroom {
namespace {

constexpr uint64_t kPublishes = 100'000;

orca::Report report_with_seq(uint64_t seq) {
  orca::Report r;
  // Vary the size so a torn read would not line up by chance.
  r.set_cpu_utilization(static_cast<double>(seq % 400) / 100.0);
  r.set_mem_utilization(0.5);
  r.set_application_utilization(static_cast<double>(seq % 400) / 100.0);
  (*r.mutable_utilization())["cpu"] = static_cast<double>(seq % 100) / 100.0;
  if (seq % 2 == 0) (*r.mutable_utilization())["io.pressure"] = 0.25;
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(orca::kTimestampMsKey)] = 1.7e12 + static_cast<double>(seq);
  nm[std::string(orca::kSeqKey)] = static_cast<double>(seq);
  nm[std::string(orca::kIntervalMsKey)] = 100;
  return r;
}

TEST(ReaderHammer, NeverSeesAPartialFileDuring100000Publishes) {
  testing::TempDir dir(testing::tmpfs_base());
  auto pub = publishers::OrcaDirPublisher::open(dir / "orca");
  ASSERT_TRUE(pub) << pub.error().message;
  ASSERT_TRUE(pub->publish("node", report_with_seq(0)));

  const pid_t writer = ::fork();
  if (writer == 0) {
    for (uint64_t seq = 1; seq <= kPublishes; ++seq)
      if (!pub->publish("node", report_with_seq(seq))) ::_exit(1);
    ::_exit(0);
  }

  uint64_t reads = 0, failures = 0, backwards = 0, last_seq = 0, distinct = 0;
  std::string first_failure;
  int status = 0;
  for (;;) {
    const bool writer_done = ::waitpid(writer, &status, WNOHANG) == writer;
    auto r = orca::read_report_file(dir / "orca/node.orca");
    ++reads;
    if (!r) {
      if (failures++ == 0) first_failure = r.error().message;
    } else {
      const uint64_t seq = orca::metadata_of(*r)->seq;
      if (seq < last_seq) ++backwards;
      if (seq != last_seq) ++distinct;
      last_seq = seq;
    }
    if (writer_done) break;
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the writer failed";
  std::cout << "[ hammer ] " << kPublishes << " publishes, " << reads << " reads, " << distinct
            << " distinct reports seen\n";
  EXPECT_EQ(failures, 0u) << first_failure;
  EXPECT_EQ(backwards, 0u);
  EXPECT_EQ(last_seq, kPublishes);
  EXPECT_GT(reads, 1000u);
}

}  // namespace
}  // namespace headroom
