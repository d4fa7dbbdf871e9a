// SPDX-License-Identifier: Apache-2.0
// The report file library: atomic writer, validating reader, staleness.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include <gtest/gtest.h>

#include "headroom/orca/report.h"
#include "headroom/orca/report_writer.h"
#include "temp_dir.h"

namespace headroom::orca {
namespace {

using headroom::testing::TempDir;

Report sample_report(uint64_t seq = 7, int64_t ts = 1'700'000'000'000) {
  Report r;
  r.set_cpu_utilization(1.25);
  r.set_mem_utilization(0.4);
  r.set_application_utilization(1.25);
  (*r.mutable_utilization())["cpu"] = 1.0;
  (*r.mutable_utilization())["memory"] = 0.4;
  (*r.mutable_named_metrics())[std::string(kTimestampMsKey)] = static_cast<double>(ts);
  (*r.mutable_named_metrics())[std::string(kSeqKey)] = static_cast<double>(seq);
  (*r.mutable_named_metrics())[std::string(kIntervalMsKey)] = 100;
  return r;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(ReportFileWriter, RoundTripThroughTheReader) {
  TempDir dir;
  auto w = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(w) << w.error().message;
  ASSERT_TRUE(w->write("node.orca", sample_report()));
  auto r = read_report_file(dir / "node.orca");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->cpu_utilization(), 1.25);
  EXPECT_DOUBLE_EQ(r->utilization().at("memory"), 0.4);
  auto md = metadata_of(*r);
  ASSERT_TRUE(md);
  EXPECT_EQ(md->seq, 7u);
  EXPECT_EQ(md->interval_ms, 100);
  EXPECT_FALSE(md->stopped);
}

TEST(ReportFileWriter, FileMode0644RegardlessOfUmask) {
  TempDir dir;
  const mode_t old = ::umask(077);
  auto w = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write("node.orca", sample_report()));
  ::umask(old);
  struct stat st{};
  ASSERT_EQ(::stat((dir / "node.orca").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

TEST(ReportFileWriter, ReplacesAndLeavesNoTemporaryFile) {
  TempDir dir;
  auto w = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(w);
  for (uint64_t i = 1; i <= 50; ++i) ASSERT_TRUE(w->write("node.orca", sample_report(i)));
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"node.orca"});
  EXPECT_EQ(metadata_of(*read_report_file(dir / "node.orca"))->seq, 50u);
}

TEST(ReportFileWriter, NeverFollowsASymlinkPlantedAtTheTemporaryName) {
  TempDir dir, elsewhere;
  const std::string victim = elsewhere.write("victim", "precious");
  const std::string tmp = dir / (".node.orca." + std::to_string(::getpid()) + ".tmp");
  ASSERT_EQ(::symlink(victim.c_str(), tmp.c_str()), 0);
  auto w = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write("node.orca", sample_report()));
  EXPECT_EQ(headroom::testing::read_file(victim), "precious");
  EXPECT_TRUE(read_report_file(dir / "node.orca"));
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"node.orca"});
}

// A directory planted at the temporary name does not stop publishing: an
// empty one is removed; one with entries is left alone (it is not ours to
// empty) and the write goes through the second temporary name.
TEST(ReportFileWriter, ADirectoryPlantedAtTheTemporaryNameDoesNotStopPublishing) {
  TempDir dir;
  const std::string tmp = dir / (".node.orca." + std::to_string(::getpid()) + ".tmp");
  ASSERT_EQ(::mkdir(tmp.c_str(), 0755), 0);
  auto w = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write("node.orca", sample_report(1)));
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"node.orca"});  // the empty directory is gone
  ASSERT_EQ(::mkdir(tmp.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((tmp + "/inside").c_str(), 0755), 0);
  for (uint64_t seq = 2; seq <= 4; ++seq) {
    auto r = w->write("node.orca", sample_report(seq));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(metadata_of(*read_report_file(dir / "node.orca"))->seq, seq);
  }
  const std::string planted = ".node.orca." + std::to_string(::getpid()) + ".tmp";
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{planted, "node.orca"}));  // left alone, nothing else left
  EXPECT_TRUE(is_temporary_name(planted.substr(0, planted.size() - 4) + ".1.tmp", "node.orca"));
  EXPECT_FALSE(is_temporary_name(".node.orca.12.2.tmp", "node.orca"));
}

TEST(ReportFileWriter, ReplacesASymlinkAtTheFinalNameInsteadOfWritingThroughIt) {
  TempDir dir, elsewhere;
  const std::string victim = elsewhere.write("victim", "precious");
  ASSERT_EQ(::symlink(victim.c_str(), (dir / "node.orca").c_str()), 0);
  auto w = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write("node.orca", sample_report()));
  EXPECT_EQ(headroom::testing::read_file(victim), "precious");
  struct stat st{};
  ASSERT_EQ(::lstat((dir / "node.orca").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(ReportFileWriter, FailureKeepsThePreviousFileAndLeavesNoTemporary) {
  TempDir dir;
  auto w = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write("node.orca", sample_report(1)));
  // A directory at the final name makes the rename fail after the write.
  ASSERT_EQ(::mkdir((dir / "blocked.orca").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir / "blocked.orca/x").c_str(), 0755), 0);
  auto r = w->write("blocked.orca", sample_report(2));
  EXPECT_FALSE(r);
  EXPECT_NE(r.error().message.find("rename"), std::string::npos) << r.error().message;
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"blocked.orca", "node.orca"}));
  EXPECT_EQ(metadata_of(*read_report_file(dir / "node.orca"))->seq, 1u);
}

TEST(ReportFileWriter, RejectsNamesThatAreNotPlainFileNames) {
  TempDir dir;
  auto w = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(w);
  for (const char* bad : {"", "../x.orca", "a/b.orca", ".hidden.orca"}) EXPECT_FALSE(w->write(bad, sample_report())) << bad;
}

TEST(ReportFileWriter, FollowsADirectoryThatWasRemovedAndRecreated) {
  TempDir parent;
  const std::string d = parent / "orca";
  std::filesystem::create_directory(d);
  auto w = ReportFileWriter::open(d);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write("node.orca", sample_report(1)));
  std::filesystem::remove_all(d);
  std::filesystem::create_directory(d);
  ASSERT_TRUE(w->write("node.orca", sample_report(2)));
  EXPECT_EQ(metadata_of(*read_report_file(d + "/node.orca"))->seq, 2u);
}

TEST(ReportFileWriter, FollowsThePathWhenTheDirectoryIsRenamedAway) {
  TempDir parent;
  const std::string d = parent / "orca";
  std::filesystem::create_directory(d);
  auto w = ReportFileWriter::open(d);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write("node.orca", sample_report(1)));
  std::filesystem::rename(d, parent / "old");
  std::filesystem::create_directory(d);
  // The path is checked every few publishes, not on each (it costs a path walk).
  uint64_t seq = 2;
  for (; seq < 40 && !std::filesystem::exists(d + "/node.orca"); ++seq) ASSERT_TRUE(w->write("node.orca", sample_report(seq)));
  ASSERT_TRUE(std::filesystem::exists(d + "/node.orca")) << "never followed the path";
  EXPECT_LE(seq, 2u + 16u);
}

TEST(ReportFileWriter, RemovesOnlyItsOwnStaleTemporaries) {
  TempDir dir;
  dir.write(".node.orca.12345.tmp", "partial");
  dir.write(".endpoint.api.orca.7.1.tmp", "partial");
  dir.write(".envoy.12.tmp", "another writer's file");
  dir.write(".editor.tmp", "another program's");
  dir.write(".node.orca.tmp", "no pid: not a name this writer makes");
  dir.write("keep.orca", "x");
  auto w = ReportFileWriter::open(dir.path());
  ASSERT_TRUE(w);
  EXPECT_EQ(w->remove_stale_temporaries("node.orca"), 1);
  EXPECT_EQ(w->remove_stale_temporaries_with_suffix(".orca"), 1);
  EXPECT_EQ(entries(dir.path()),
            (std::vector<std::string>{".editor.tmp", ".envoy.12.tmp", ".node.orca.tmp", "keep.orca"}));
}

TEST(ReportFileWriter, TemporaryNamesAreExactlyTheWritersOwn) {
  EXPECT_TRUE(is_temporary_name(".node.orca.1.tmp", "node.orca"));
  EXPECT_TRUE(is_temporary_name(".node.orca.4242.1.tmp", "node.orca"));
  EXPECT_FALSE(is_temporary_name(".node.orca.x1.tmp", "node.orca"));
  EXPECT_FALSE(is_temporary_name(".node.orca..tmp", "node.orca"));
  EXPECT_FALSE(is_temporary_name(".xnode.orca.1.tmp", "node.orca"));
  EXPECT_FALSE(is_temporary_name(".node.orca.1.tmp", ""));
  EXPECT_TRUE(is_temporary_name_with_suffix(".endpoint.web.orca.99.tmp", ".orca"));
  EXPECT_TRUE(is_temporary_name_with_suffix(".node.orca.99.1.tmp", ".orca"));
  EXPECT_FALSE(is_temporary_name_with_suffix("..orca.99.tmp", ".orca"));  // no file name before the suffix
  EXPECT_FALSE(is_temporary_name_with_suffix(".headroomd.lock", ".orca"));
  EXPECT_FALSE(is_temporary_name_with_suffix(".something.tmp", ".orca"));
  EXPECT_FALSE(is_temporary_name_with_suffix(".report.json.99.tmp", ".orca"));
  EXPECT_FALSE(is_temporary_name_with_suffix("node.orca.99.tmp", ".orca"));
}

TEST(ReportFileWriter, ANewDirectoryIsHandedToTheHookBeforeAnythingIsWrittenIntoIt) {
  TempDir parent;
  const std::string d = parent / "orca";
  std::filesystem::create_directory(d);
  auto w = ReportFileWriter::open(d);
  ASSERT_TRUE(w);
  int calls = 0;
  bool refuse = true;
  w->on_new_directory([&](int dirfd) -> Result<void> {
    ++calls;
    struct stat st{};
    EXPECT_EQ(::fstat(dirfd, &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    if (refuse) return logic_error("not this one");
    return {};
  });
  ASSERT_TRUE(w->write("node.orca", sample_report(1)));
  EXPECT_EQ(calls, 0);
  std::filesystem::remove_all(d);
  std::filesystem::create_directory(d);
  auto r = w->write("node.orca", sample_report(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "not this one");
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(entries(d).empty()) << "written into a directory the hook refused";
  refuse = false;
  ASSERT_TRUE(w->write("node.orca", sample_report(3)));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(metadata_of(*read_report_file(d + "/node.orca"))->seq, 3u);
}

TEST(ReportReader, RejectsOversizedTruncatedAndGarbageFiles) {
  TempDir dir;
  std::string good;
  ASSERT_TRUE(sample_report().SerializeToString(&good));

  auto big = read_report_file(dir.write("big.orca", std::string(kMaxReportBytes + 1, '\x08')));
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("exceeds the limit"), std::string::npos) << big.error().message;

  auto truncated = read_report_file(dir.write("trunc.orca", good.substr(0, good.size() - 3)));
  ASSERT_FALSE(truncated);
  EXPECT_NE(truncated.error().message.find("trunc.orca"), std::string::npos);

  EXPECT_FALSE(read_report_file(dir.write("garbage.orca", "\xff\xff\xff\xff not protobuf")));
  auto missing = read_report_file(dir / "missing.orca");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_FALSE(read_report_file(dir.path()));  // a directory is not a report
}

struct RangeCase {
  const char* name;
  void (*mutate)(Report&);
  const char* field;  // expected in the error, nullptr when valid
};

TEST(ValidateReport, RangeTable) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  static double bad_value;
  const RangeCase cases[] = {
      {"valid", [](Report&) {}, nullptr},
      {"cpu above 1 is allowed", [](Report& r) { r.set_cpu_utilization(3.5); }, nullptr},
      {"application above 1 is allowed", [](Report& r) { r.set_application_utilization(2); }, nullptr},
      {"negative cpu", [](Report& r) { r.set_cpu_utilization(-0.1); }, "cpu_utilization"},
      {"NaN cpu", [](Report& r) { r.set_cpu_utilization(bad_value); }, "cpu_utilization"},
      {"mem above 1", [](Report& r) { r.set_mem_utilization(1.01); }, "mem_utilization"},
      {"utilization above 1", [](Report& r) { (*r.mutable_utilization())["cpu"] = 1.5; }, "utilization[\"cpu\"]"},
      {"utilization negative", [](Report& r) { (*r.mutable_utilization())["io.pressure"] = -1; },
       "utilization[\"io.pressure\"]"},
      {"utilization infinite", [](Report& r) { (*r.mutable_utilization())["x"] = bad_value; }, "utilization[\"x\"]"},
      {"negative eps", [](Report& r) { r.set_eps(-1); }, "eps"},
      {"negative rps", [](Report& r) { r.set_rps_fractional(-1); }, "rps_fractional"},
      {"negative application", [](Report& r) { r.set_application_utilization(-2); }, "application_utilization"},
      {"named metric NaN", [](Report& r) { (*r.mutable_named_metrics())["k"] = bad_value; }, "named_metrics[\"k\"]"},
      {"named metric negative is fine", [](Report& r) { (*r.mutable_named_metrics())["k"] = -4; }, nullptr},
  };
  for (const auto& c : cases) {
    for (double bad : {nan, inf}) {
      bad_value = bad;
      Report r = sample_report();
      c.mutate(r);
      auto v = validate_report(r);
      if (c.field == nullptr) {
        EXPECT_TRUE(v) << c.name << ": " << v.error().message;
      } else {
        ASSERT_FALSE(v) << c.name;
        EXPECT_NE(v.error().message.find(c.field), std::string::npos) << c.name << ": " << v.error().message;
      }
    }
  }
}

TEST(Staleness, Table) {
  struct Case {
    int64_t now;
    bool stopped;
    bool stale;
  } cases[] = {
      {1'700'000'000'000, false, false},        // same instant
      {1'700'000'000'900, false, false},        // 900 ms: below the 1 s floor
      {1'700'000'001'001, false, true},         // 1001 ms > max(3 * 100 ms, 1 s)
      {1'700'000'000'000, true, true},          // the agent said it stopped
      {1'699'999'998'000, false, true},         // 2 s in the future
  };
  for (const auto& c : cases) {
    Report r = sample_report();
    if (c.stopped) (*r.mutable_named_metrics())[std::string(kStoppedKey)] = 1;
    auto s = check_staleness(r, c.now);
    EXPECT_EQ(s.stale, c.stale) << "now=" << c.now << " reason=" << s.reason;
    EXPECT_EQ(s.stale, !s.reason.empty());
  }
  Report r = sample_report();
  EXPECT_FALSE(check_staleness(r, 1'700'000'000'000 + 2500, 30.0).stale);  // 30 intervals = 3 s
  r.mutable_named_metrics()->erase(std::string(kSeqKey));
  auto s = check_staleness(r, 1'700'000'000'000);
  EXPECT_TRUE(s.stale);
  EXPECT_NE(s.reason.find("headroom.seq"), std::string::npos);
}

// Metadata that would overflow its integer (undefined behaviour in the cast)
// or declare an interval no agent runs with is an error, so such a report
// reads as stale instead of fresh for ever.
TEST(Metadata, OutOfRangeValuesAreErrors) {
  struct Case {
    std::string_view key;
    double value;
    bool ok;
  } cases[] = {
      {kTimestampMsKey, 1e19, false},
      {kTimestampMsKey, 9'007'199'254'740'994.0, false},  // 2^53 + 2, the next double
      {kTimestampMsKey, 9'007'199'254'740'992.0, true},   // 2^53
      {kSeqKey, 1e300, false},
      {kSeqKey, 1e15, true},
      {kIntervalMsKey, 1e15, false},
      {kIntervalMsKey, 3'600'001, false},
      {kIntervalMsKey, 3'600'000, true},
  };
  for (const auto& c : cases) {
    Report r = sample_report();
    (*r.mutable_named_metrics())[std::string(c.key)] = c.value;
    auto md = metadata_of(r);
    EXPECT_EQ(static_cast<bool>(md), c.ok) << c.key << " = " << c.value;
    if (!c.ok) {
      EXPECT_NE(md.error().message.find(std::string(c.key)), std::string::npos) << md.error().message;
      EXPECT_TRUE(check_staleness(r, 1'700'000'000'000).stale) << c.key;
    }
  }
  // A report from 10 s ago that declares a huge interval is stale, not fresh.
  Report r = sample_report();
  (*r.mutable_named_metrics())[std::string(kIntervalMsKey)] = 1e15;
  EXPECT_TRUE(check_staleness(r, 1'700'000'010'000).stale);
}

}  // namespace
}  // namespace headroom::orca
