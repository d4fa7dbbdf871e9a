// SPDX-License-Identifier: Apache-2.0
// The consumer-side reader: inotify updates, staleness, a directory that comes
// and goes, and every kind of hostile file under a report name.
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "headroom/orca/report.h"
#include "headroom/orca/report_reader.h"
#include "headroom/orca/report_writer.h"
#include "temp_dir.h"

namespace headroom::orca {
namespace {

using headroom::testing::TempDir;
namespace fs = std::filesystem;

Report make_report(uint64_t seq, int64_t ts = unix_now_ms(), int64_t interval_ms = 100, bool stopped = false) {
  Report r;
  r.set_cpu_utilization(0.5);
  r.set_mem_utilization(0.25);
  r.set_application_utilization(0.5);
  (*r.mutable_utilization())["cpu"] = 0.5;
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(kTimestampMsKey)] = static_cast<double>(ts);
  nm[std::string(kSeqKey)] = static_cast<double>(seq);
  nm[std::string(kIntervalMsKey)] = static_cast<double>(interval_ms);
  if (stopped) nm[std::string(kStoppedKey)] = 1;
  return r;
}

uint64_t seq_of(const ScopeState& st) { return st.report ? metadata_of(*st.report)->seq : 0; }

// Processes changes until `pred` holds for the scope's state, up to 1 s.
template <class Pred>
bool wait_for(ReportDirectory& reader, const std::string& scope, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    auto st = reader.get(scope);
    if (st && pred(*st)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    (void)reader.wait(50);
  }
}

// A reader and a writer on one temporary directory.
class ReportReader : public ::testing::Test {
 public:  // the hostile-file table plants files through it
  void SetUp() override {
    ASSERT_TRUE(fs::create_directory(dir_path()));
    auto w = ReportFileWriter::open(dir_path());
    ASSERT_TRUE(w) << w.error().message;
    writer_.emplace(std::move(*w));
  }
  std::string dir_path() const { return tmp_ / "orca"; }
  ReportDirectory open_reader(ReaderOptions options = {}) {
    auto r = ReportDirectory::open(dir_path(), options);
    EXPECT_TRUE(r) << r.error().message;
    return std::move(r).value();
  }
  void publish(const std::string& scope, const Report& r) {
    ASSERT_TRUE(writer_->write(report_file_name(scope), r));
  }
  void publish_bytes(const std::string& scope, std::string_view bytes) {
    ASSERT_TRUE(writer_->write_bytes(report_file_name(scope), bytes));
  }

  TempDir tmp_;
  std::optional<ReportFileWriter> writer_;
};

TEST_F(ReportReader, SeesEachPublishThroughInotifyWithinOneInterval) {
  auto reader = open_reader();
  EXPECT_TRUE(reader.watching());
  EXPECT_TRUE(reader.scopes().empty());
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    publish("node", make_report(seq));
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(reader.wait(100)) << "seq " << seq;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
    auto st = reader.get("node");
    ASSERT_TRUE(st);
    EXPECT_EQ(seq_of(*st), seq);
    EXPECT_TRUE(st->error.empty()) << st->error;
    EXPECT_FALSE(st->staleness.stale) << st->staleness.reason;
  }
  EXPECT_EQ(reader.scopes(), std::vector<std::string>{"node"});
  EXPECT_FALSE(reader.wait(20)) << "nothing changed";
}

TEST_F(ReportReader, FdIsPollableAndProcessCoalescesABurst) {
  auto reader = open_reader();
  for (uint64_t seq = 1; seq <= 20; ++seq) publish("node", make_report(seq));
  publish("endpoint.api", make_report(3));
  pollfd p{reader.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 1000), 1);
  EXPECT_EQ(reader.process_events(), (std::vector<std::string>{"endpoint.api", "node"}));
  EXPECT_EQ(seq_of(*reader.get("node")), 20u);
  EXPECT_TRUE(reader.process_events().empty()) << "drained";
}

TEST_F(ReportReader, ReadsWhatIsAlreadyThereAtOpen) {
  publish("node", make_report(4));
  auto reader = open_reader();
  ASSERT_TRUE(reader.get("node"));
  EXPECT_EQ(seq_of(*reader.get("node")), 4u);
  EXPECT_FALSE(reader.get("missing"));
}

TEST_F(ReportReader, StaleAfterStaleIntervalsButNeverSoonerThanTheMinimum) {
  const int64_t t = 1'700'000'000'000;
  publish("node", make_report(1, t, 100));
  {
    auto reader = open_reader();  // defaults: 3 intervals, at least 1000 ms
    EXPECT_FALSE(reader.get("node", t + 1000)->staleness.stale);
    auto st = reader.get("node", t + 1001);
    EXPECT_TRUE(st->staleness.stale);
    EXPECT_EQ(st->staleness.age_ms, 1001);
    EXPECT_NE(st->staleness.reason.find("older than"), std::string::npos) << st->staleness.reason;
    EXPECT_TRUE(reader.get("node", t - 2000)->staleness.stale) << "from the future";
  }
  auto reader = open_reader({.stale_intervals = 3.0, .min_stale_ms = 0});
  EXPECT_FALSE(reader.get("node", t + 300)->staleness.stale);
  EXPECT_TRUE(reader.get("node", t + 301)->staleness.stale);
  publish("node", make_report(2, t, 1000));  // a slower agent: 3 s
  ASSERT_TRUE(reader.wait(1000));
  EXPECT_FALSE(reader.get("node", t + 3000)->staleness.stale);
  EXPECT_TRUE(reader.get("node", t + 3001)->staleness.stale);
}

TEST_F(ReportReader, StoppedIsStaleAtOnce) {
  auto reader = open_reader();
  const int64_t now = unix_now_ms();
  publish("node", make_report(9, now, 100, /*stopped=*/true));
  ASSERT_TRUE(reader.wait(1000));
  auto st = reader.get("node", now);
  ASSERT_TRUE(st && st->report);
  EXPECT_TRUE(st->staleness.stale);
  EXPECT_EQ(st->staleness.reason, "the agent stopped");
}

TEST_F(ReportReader, RemovedFileIsStaleAndKeepsTheLastReport) {
  auto reader = open_reader();
  publish("node", make_report(3));
  ASSERT_TRUE(reader.wait(1000));
  fs::remove(dir_path() + "/node.orca");
  ASSERT_TRUE(reader.wait(1000));
  auto st = reader.get("node");
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->removed);
  EXPECT_TRUE(st->staleness.stale);
  EXPECT_EQ(st->staleness.reason, "the file was removed");
  EXPECT_EQ(seq_of(*st), 3u);
  publish("node", make_report(4));
  ASSERT_TRUE(reader.wait(1000));
  st = reader.get("node");
  EXPECT_FALSE(st->removed);
  EXPECT_FALSE(st->staleness.stale);
  EXPECT_EQ(seq_of(*st), 4u);
}

// Two ways a removal shows: with a writer holding the directory open (as the
// agent does) the directory's own IN_DELETE_SELF waits for that descriptor to
// close, so only the parent tells; without one, both tell.
class ReportReaderDirectoryHeld : public ReportReader, public ::testing::WithParamInterface<bool> {};

TEST_P(ReportReaderDirectoryHeld, DirectoryDeletedAndRecreatedIsFollowedAgain) {
  if (!GetParam()) writer_.reset();
  auto reader = open_reader();
  {
    auto w0 = ReportFileWriter::open(dir_path());  // closed before the removal
    ASSERT_TRUE(w0 && w0->write("node.orca", make_report(7)));
  }
  ASSERT_TRUE(reader.wait(1000));
  fs::remove_all(dir_path());
  ASSERT_TRUE(reader.wait(1000));
  EXPECT_FALSE(reader.watching());
  auto st = reader.get("node");
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->removed);
  EXPECT_TRUE(st->staleness.stale);
  // The agent recreates it and starts again at seq 1.
  ASSERT_TRUE(fs::create_directory(dir_path()));
  auto w = ReportFileWriter::open(dir_path());
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write("node.orca", make_report(1)));
  ASSERT_TRUE(reader.wait(1000));
  EXPECT_TRUE(reader.watching());
  st = reader.get("node");
  EXPECT_FALSE(st->removed);
  EXPECT_FALSE(st->staleness.stale) << st->staleness.reason;
  EXPECT_EQ(seq_of(*st), 1u);
}
INSTANTIATE_TEST_SUITE_P(WriterHoldsIt, ReportReaderDirectoryHeld, ::testing::Bool());

TEST_F(ReportReader, DirectoryRenamedAwayAndReplacedIsFollowedByPath) {
  auto reader = open_reader();
  publish("node", make_report(2));
  ASSERT_TRUE(reader.wait(1000));
  fs::rename(dir_path(), tmp_ / "old");
  ASSERT_TRUE(reader.wait(1000));
  EXPECT_TRUE(reader.get("node")->removed);
  // Writes into the moved directory are not ours any more.
  auto old = ReportFileWriter::open(tmp_ / "old");
  ASSERT_TRUE(old && old->write("node.orca", make_report(50)));
  EXPECT_FALSE(reader.wait(50));
  // A directory prepared elsewhere and renamed into place.
  fs::create_directory(tmp_ / "new");
  auto w = ReportFileWriter::open(tmp_ / "new");
  ASSERT_TRUE(w && w->write("node.orca", make_report(1)));
  fs::rename(tmp_ / "new", dir_path());
  ASSERT_TRUE(reader.wait(1000));
  EXPECT_EQ(seq_of(*reader.get("node")), 1u);
  EXPECT_FALSE(reader.get("node")->removed);
}

TEST_F(ReportReader, DirectoryAbsentAtOpenIsPickedUpWhenCreated) {
  const std::string deep = tmp_ / "a/b/orca";
  auto r = ReportDirectory::open(deep + "/");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->watching());
  EXPECT_EQ(r->dir(), deep);
  EXPECT_FALSE(r->wait(20));
  fs::create_directories(deep);
  // Creating the directory changes no scope, but it is now watched.
  (void)r->wait(200);
  EXPECT_TRUE(r->watching());
  auto w = ReportFileWriter::open(deep);
  ASSERT_TRUE(w && w->write("node.orca", make_report(1)));
  ASSERT_TRUE(r->wait(1000));
  EXPECT_EQ(seq_of(*r->get("node")), 1u);
}

TEST_F(ReportReader, AFileInPlaceOfTheDirectoryIsWaitedOut) {
  const std::string path = tmp_ / "plain";
  tmp_.write("plain", "not a directory");
  auto r = ReportDirectory::open(path);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->watching());
  fs::remove(path);
  fs::create_directory(path);
  auto w = ReportFileWriter::open(path);
  ASSERT_TRUE(w && w->write("node.orca", make_report(5)));
  ASSERT_TRUE(r->wait(1000));
  EXPECT_EQ(seq_of(*r->get("node")), 5u);
}

TEST_F(ReportReader, RejectsBadOptions) {
  EXPECT_FALSE(ReportDirectory::open(dir_path(), {.stale_intervals = 0}));
  EXPECT_FALSE(ReportDirectory::open(dir_path(), {.stale_intervals = std::nan("")}));
  EXPECT_FALSE(ReportDirectory::open(dir_path(), {.min_stale_ms = -1}));
  EXPECT_FALSE(ReportDirectory::open("", {}));
}

TEST_F(ReportReader, IgnoresTemporaryAndForeignFiles) {
  auto reader = open_reader();
  tmp_.write("orca/.node.orca.1234.tmp", make_report(1).SerializeAsString());
  tmp_.write("orca/.orca", make_report(1).SerializeAsString());
  tmp_.write("orca/notes.txt", "hello");
  tmp_.write("orca/node.orca.bak", make_report(1).SerializeAsString());
  EXPECT_FALSE(reader.wait(50));
  EXPECT_TRUE(reader.scopes().empty());
}

TEST_F(ReportReader, CallbackRunsOncePerChangedScope) {
  auto reader = open_reader();
  std::vector<std::pair<std::string, uint64_t>> seen;
  reader.set_callback([&](const ScopeState& st) {
    seen.emplace_back(st.scope, seq_of(st));
    EXPECT_TRUE(reader.get(st.scope)) << "get() works inside the callback";
  });
  publish("node", make_report(1));
  publish("node", make_report(2));
  publish("endpoint.web", make_report(8));
  ASSERT_TRUE(reader.wait(1000));
  (void)reader.wait(20);
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, uint64_t>>{{"endpoint.web", 8}, {"node", 2}}));
}

// Each hostile content replaces a valid report; the reader rejects it with a
// reason naming the file, keeps the last valid report, marks the scope stale,
// and recovers at the next valid publish.
struct Hostile {
  const char* name;
  std::function<void(ReportReader&, const std::string& path)> plant;
  const char* reason;  // a substring of the error
};

void expect_rejected_then_recovers(ReportReader& t, ReportDirectory& reader, const std::string& reason) {
  ASSERT_TRUE(wait_for(reader, "x", [](const ScopeState& s) { return !s.error.empty(); }));
  auto st = reader.get("x");
  EXPECT_NE(st->error.find("x.orca"), std::string::npos) << st->error;
  EXPECT_NE(st->error.find(reason), std::string::npos) << st->error;
  EXPECT_EQ(seq_of(*st), 1u) << "the last valid report is kept";
  EXPECT_FALSE(st->removed);
  EXPECT_TRUE(st->staleness.stale);
  EXPECT_NE(st->staleness.reason.find("rejected"), std::string::npos) << st->staleness.reason;
  std::error_code ec;
  fs::remove_all(t.dir_path() + "/x.orca", ec);  // a directory is not replaced by rename
  t.publish("x", make_report(2));
  ASSERT_TRUE(wait_for(reader, "x", [](const ScopeState& s) { return seq_of(s) == 2; }));
  st = reader.get("x");
  EXPECT_TRUE(st->error.empty()) << st->error;
  EXPECT_FALSE(st->staleness.stale) << st->staleness.reason;
}

TEST_F(ReportReader, RejectsHostileFilesKeepsTheLastValidReport) {
  const std::string full = make_report(5).SerializeAsString();
  Report out_of_range = make_report(5);
  (*out_of_range.mutable_utilization())["cpu"] = 1.5;
  Report nan_cpu = make_report(5);
  nan_cpu.set_cpu_utilization(std::numeric_limits<double>::quiet_NaN());
  Report foreign;  // a valid ORCA report, but not headroom's: no metadata
  foreign.set_cpu_utilization(0.3);

  auto bytes = [](std::string b) {
    return [b](ReportReader& t, const std::string&) { t.publish_bytes("x", b); };
  };
  auto swap_in = [](auto make) {  // build at a temporary name, rename over x.orca
    return [make](ReportReader& t, const std::string& path) {
      const std::string tmp = t.dir_path() + "/.x.planted";
      make(tmp);
      fs::rename(tmp, path);
    };
  };
  const std::vector<Hostile> cases = {
      {"truncated", bytes(full.substr(0, full.size() - 1)), "not a valid"},
      {"oversized", bytes(std::string(kMaxReportBytes + 1, 'x')), "exceeds the limit"},
      {"utilization 1.5", bytes(out_of_range.SerializeAsString()), "utilization[\"cpu\"] = 1.5"},
      {"NaN cpu", bytes(nan_cpu.SerializeAsString()), "cpu_utilization = NaN"},
      {"garbage", bytes("\xff\xff\xff\xff\xff\xff garbage"), "not a valid"},
      {"empty", bytes(""), "empty file"},
      {"no metadata", bytes(foreign.SerializeAsString()), "not a headroom report"},
      {"fifo renamed in", swap_in([](const std::string& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0644), 0); }),
       "not a regular file"},
      {"symlink to /dev/zero renamed in",
       swap_in([](const std::string& p) { ASSERT_EQ(::symlink("/dev/zero", p.c_str()), 0); }), "not a regular file"},
      {"fifo created in place",
       [](ReportReader&, const std::string& p) {
         fs::remove(p);
         ASSERT_EQ(::mkfifo(p.c_str(), 0644), 0);
       },
       "not a regular file"},
      {"directory created in place",
       [](ReportReader&, const std::string& p) {
         fs::remove(p);
         fs::create_directory(p);
       },
       "not a regular file"},
      {"symlink to /dev/zero created in place",
       [](ReportReader&, const std::string& p) {
         fs::remove(p);
         ASSERT_EQ(::symlink("/dev/zero", p.c_str()), 0);
       },
       "not a regular file"},
      {"in-place write of garbage",
       [](ReportReader& t, const std::string&) { t.tmp_.write("orca/x.orca", "\xff\xff\xff"); }, "not a valid"},
  };
  auto reader = open_reader();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    publish("x", make_report(1));
    ASSERT_TRUE(wait_for(reader, "x", [](const ScopeState& s) { return seq_of(s) == 1 && s.error.empty(); }));
    const std::string path = dir_path() + "/x.orca";
    c.plant(*this, path);
    expect_rejected_then_recovers(*this, reader, c.reason);
  }
}

TEST_F(ReportReader, OversizedAgainstASmallerLimit) {
  publish("node", make_report(1));
  auto reader = open_reader({.max_bytes = 16});
  auto st = reader.get("node");
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->report);
  EXPECT_NE(st->error.find("exceeds the limit of 16"), std::string::npos) << st->error;
  EXPECT_TRUE(st->staleness.stale);
}

TEST_F(ReportReader, ABrokenFileThatNeverHeldAReportIsForgottenWhenRemoved) {
  auto reader = open_reader();
  ASSERT_EQ(::symlink("/dev/zero", (dir_path() + "/z.orca").c_str()), 0);
  ASSERT_TRUE(reader.wait(1000));
  auto st = reader.get("z");
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->report);
  EXPECT_NE(st->error.find("not a regular file"), std::string::npos) << st->error;
  EXPECT_EQ(st->staleness.reason.find("the current file is rejected"), 0u) << st->staleness.reason;
  fs::remove(dir_path() + "/z.orca");
  ASSERT_TRUE(reader.wait(1000));
  EXPECT_FALSE(reader.get("z"));
  EXPECT_TRUE(reader.scopes().empty());
}

// ReaderOptions::owner: a consumer that trusts only the agent's user.
TEST(CheckFileOwner, OwnedByTheUserAndWritableByNobodyElse) {
  struct Case {
    uid_t file_uid;
    mode_t mode;
    uid_t owner;
    const char* error;  // nullptr: trusted
  } cases[] = {
      {998, 0644, 998, nullptr},
      {998, 0600, 998, nullptr},
      {998, 0444, 998, nullptr},
      {998, 0755, 998, nullptr},
      {0, 0644, 998, "owned by uid 0, not by uid 998"},
      {1000, 0644, 998, "owned by uid 1000, not by uid 998"},
      {998, 0664, 998, "mode 0664 lets its group write it"},
      {998, 0646, 998, "mode 0646 lets other users write it"},
      {998, 0666, 998, "mode 0666 lets other users write it"},
      {998, 01666, 998, "mode 1666 lets other users write it"},
  };
  for (const auto& c : cases) {
    auto r = check_file_owner(c.file_uid, c.mode, c.owner);
    if (c.error == nullptr) {
      EXPECT_TRUE(r) << c.file_uid << " " << std::oct << c.mode << ": " << r.error().message;
    } else {
      ASSERT_FALSE(r) << c.file_uid << " " << std::oct << c.mode;
      EXPECT_NE(r.error().message.find(c.error), std::string::npos) << r.error().message;
      EXPECT_EQ(r.error().code, EPERM);
    }
  }
}

TEST_F(ReportReader, WithAnOwnerTrustsOnlyThatUsersFiles) {
  const uid_t me = ::geteuid();
  publish("node", make_report(1));
  auto trusting = open_reader({.owner = me});
  auto st = trusting.get("node");
  ASSERT_TRUE(st);
  EXPECT_EQ(seq_of(*st), 1u);
  EXPECT_TRUE(st->error.empty()) << st->error;

  // The same file read by a consumer that trusts another user only.
  auto other = open_reader({.owner = me + 1});
  st = other.get("node");
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->report);
  EXPECT_NE(st->error.find("node.orca: owned by uid " + std::to_string(me)), std::string::npos) << st->error;
  EXPECT_TRUE(st->staleness.stale);

  // A file others may write is not trusted either, even if ours: the last
  // trusted report stays, stale, until a trusted file replaces it.
  auto loose = ReportFileWriter::open(dir_path(), WriterOptions{.mode = 0666});
  ASSERT_TRUE(loose) << loose.error().message;
  ASSERT_TRUE(loose->write("node.orca", make_report(2)));
  ASSERT_TRUE(wait_for(trusting, "node", [](const ScopeState& s) { return !s.error.empty(); }));
  st = trusting.get("node");
  EXPECT_EQ(seq_of(*st), 1u) << "the last trusted report";
  EXPECT_NE(st->error.find("mode 0666 lets other users write it"), std::string::npos) << st->error;
  EXPECT_TRUE(st->staleness.stale);
  publish("node", make_report(3));
  ASSERT_TRUE(wait_for(trusting, "node", [](const ScopeState& s) { return s.error.empty(); }));
  EXPECT_EQ(seq_of(*trusting.get("node")), 3u);
  EXPECT_FALSE(trusting.get("node")->staleness.stale);

  // Without the option the same loose file is accepted, as before.
  ASSERT_TRUE(loose->write("node.orca", make_report(4)));
  auto any = open_reader();
  EXPECT_EQ(seq_of(*any.get("node")), 4u);
}

}  // namespace
}  // namespace headroom::orca
