// SPDX-License-Identifier: Apache-2.0
// The ORCA directory's safety (publishers/orca_dir_publisher.h): one agent
// per directory (the lock, shared across a reload), no directory others can
// write into, and only the agent's own temporaries cleaned, once it holds
// the lock. Another process holding the lock is a real forked child.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent/config/config.h"
#include "headroom/orca/report.h"
#include "publishers/orca_dir_publisher.h"
#include "agent/daemon/pipeline.h"
#include "agent/daemon/publisher_registry.h"
#include "temp_dir.h"

namespace headroom::publishers {
namespace {

namespace fs = std::filesystem;

// The publishers a configuration asks for, as the daemon's table builds them.
Result<Publishers> build_publishers(const agent::Config& c) { return agent::build_publishers(c, agent::report_scopes(c)); }
using testing::TempDir;

orca::Report sample_report(uint64_t seq) {
  orca::Report r;
  r.set_cpu_utilization(0.5);
  (*r.mutable_named_metrics())[std::string(orca::kTimestampMsKey)] = 1'700'000'000'000.0;
  (*r.mutable_named_metrics())[std::string(orca::kSeqKey)] = static_cast<double>(seq);
  (*r.mutable_named_metrics())[std::string(orca::kIntervalMsKey)] = 100;
  return r;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Whether another open file description can take the lock now: false while
// this process (or any other) holds it.
bool lock_is_free(const std::string& dir) {
  const std::string path = dir + "/" + std::string(DirectoryLock::kFileName);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

// A child process that holds the directory's lock as another agent would
// (flock on .headroomd.lock, its pid in the file) until destroyed.
class OtherHolder {
 public:
  explicit OtherHolder(const std::string& dir) {
    int ready[2];
    if (::pipe(ready) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      const std::string path = dir + "/" + std::string(DirectoryLock::kFileName);
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) ::_exit(1);
      const std::string pid = std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd, 0) != 0 || ::write(fd, pid.data(), pid.size()) < 0) ::_exit(1);
      if (::write(ready[1], "x", 1) != 1) ::_exit(1);
      ::pause();
      ::_exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    ok_ = ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
  }
  ~OtherHolder() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool ok() const { return ok_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool ok_ = false;
};

TEST(OrcaDirLock, IsTakenOnOpenAndHeldForTheLifeOfThePublisher) {
  TempDir tmp;
  const std::string dir = tmp / "orca";
  {
    auto pub = OrcaDirPublisher::open(dir);
    ASSERT_TRUE(pub) << pub.error().message;
    EXPECT_EQ(pub->lock_path(), dir + "/.headroomd.lock");
    EXPECT_FALSE(lock_is_free(dir));
    EXPECT_EQ(testing::read_file(dir + "/.headroomd.lock"), std::to_string(::getpid()) + "\n");
    ASSERT_TRUE(pub->publish("node", sample_report(1)));
    // Not a report: readers list *.orca, and nothing else is left.
    EXPECT_EQ(entries(dir), (std::vector<std::string>{".headroomd.lock", "node.orca"}));
  }
  EXPECT_TRUE(lock_is_free(dir)) << "released with the publisher";
}

TEST(OrcaDirLock, AnotherProcessHoldingItIsABuildErrorNamingTheDirectoryTheFileAndThePid) {
  TempDir tmp;
  const std::string dir = tmp / "orca";
  fs::create_directory(dir);
  OtherHolder other(dir);
  ASSERT_TRUE(other.ok());
  agent::Config config;
  config.orca_dir = dir;
  auto built = build_publishers(config);
  ASSERT_FALSE(built) << "a second agent on the same directory must be refused";
  const Error* e = &built.error();
  EXPECT_EQ(agent::exit_status(*e), agent::kExitCantCreat) << "a place error: exit 73, not 78";
  EXPECT_NE(e->message.find("agent.orca_dir: " + dir + " is in use by another headroomd"), std::string::npos)
      << e->message;
  EXPECT_NE(e->message.find(dir + "/.headroomd.lock"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("pid " + std::to_string(other.pid())), std::string::npos) << e->message;
}

TEST(OrcaDirLock, AReloadOfTheSameDirectorySharesTheRunningOnesLock) {
  TempDir tmp;
  agent::Config config;
  config.orca_dir = tmp / "orca";
  auto running = build_publishers(config);
  ASSERT_TRUE(running);
  // The new pipeline is built while the running one still holds the lock.
  auto next = build_publishers(config);
  ASSERT_TRUE(next) << next.error().message;
  running.value().clear();  // Agent::replace drops the old pipeline
  EXPECT_FALSE(lock_is_free(config.orca_dir)) << "the lock must outlive the old pipeline while the new one runs";
  next.value().clear();
  EXPECT_TRUE(lock_is_free(config.orca_dir));
}

TEST(OrcaDirLock, APlantedSymlinkAtTheLockNameIsRefusedNotFollowed) {
  TempDir tmp, elsewhere;
  const std::string dir = tmp / "orca";
  fs::create_directory(dir);
  const std::string victim = elsewhere.write("victim", "precious");
  ASSERT_EQ(::symlink(victim.c_str(), (dir + "/.headroomd.lock").c_str()), 0);
  auto pub = OrcaDirPublisher::open(dir);
  ASSERT_FALSE(pub);
  EXPECT_NE(pub.error().message.find("is a symbolic link: remove it"), std::string::npos) << pub.error().message;
  EXPECT_EQ(testing::read_file(victim), "precious");
}

TEST(OrcaDirLock, ADirectoryThatReplacedOursIsLockedBeforeItIsWrittenInto) {
  TempDir tmp;
  const std::string dir = tmp / "orca";
  auto pub = OrcaDirPublisher::open(dir);
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub->publish("node", sample_report(1)));
  EXPECT_FALSE(pub->take_replaced());
  fs::remove_all(dir);  // someone cleaned the directory: the lock file went with it
  ASSERT_TRUE(pub->publish("node", sample_report(2)));
  EXPECT_TRUE(pub->take_replaced());
  EXPECT_FALSE(pub->take_replaced()) << "cleared by the call";
  EXPECT_FALSE(lock_is_free(dir)) << "the new directory is locked again";
  EXPECT_EQ(entries(dir), (std::vector<std::string>{".headroomd.lock", "node.orca"}));

  // Another agent got in first: nothing is written into its directory.
  fs::remove_all(dir);
  fs::create_directory(dir);
  OtherHolder other(dir);
  ASSERT_TRUE(other.ok());
  auto r = pub->publish("node", sample_report(3));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("is in use by another headroomd (pid " + std::to_string(other.pid())),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(entries(dir), std::vector<std::string>{".headroomd.lock"});
}

// A file where the directory was: whether the write or the attempt to make
// the directory again finds it first is a matter of timing, and both must
// say it the same way (ENOTDIR, "Not a directory"), since the failure is
// logged once, by its first message.
TEST(OrcaDirLock, AFileWhereTheDirectoryWasIsNotADirectoryWhicheverStepFindsIt) {
  TempDir tmp;
  const std::string dir = tmp / "orca";
  const auto put_a_file_there = [&] {
    fs::remove_all(dir);
    int fd = ::open(dir.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ::close(fd);
  };
  put_a_file_there();
  auto made = make_directories(dir);
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error().code, ENOTDIR);
  EXPECT_NE(made.error().message.find(dir + ": Not a directory"), std::string::npos) << made.error().message;

  fs::remove(dir);
  auto pub = OrcaDirPublisher::open(dir);
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub->publish("node", sample_report(1)));
  put_a_file_there();
  auto r = pub->publish("node", sample_report(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ENOTDIR) << r.error().message;
  EXPECT_NE(r.error().message.find("Not a directory"), std::string::npos) << r.error().message;
}

TEST(OrcaDirLock, ARemovedLockFileIsTakenAgainBeforeASecondAgentCanGetIn) {
  TempDir tmp;
  const std::string dir = tmp / "orca";
  auto pub = OrcaDirPublisher::open(dir);
  ASSERT_TRUE(pub);
  const std::string lock = dir + "/.headroomd.lock";
  ASSERT_EQ(::unlink(lock.c_str()), 0);  // someone cleaning the directory
  uint64_t seq = 1;
  for (; seq <= 16 && !fs::exists(lock); ++seq) ASSERT_TRUE(pub->publish("node", sample_report(seq)));
  ASSERT_TRUE(fs::exists(lock)) << "the lock file was not made again";
  EXPECT_FALSE(lock_is_free(dir));

  // Removed, and another agent took the new one first: we stop writing.
  ASSERT_EQ(::unlink(lock.c_str()), 0);
  OtherHolder other(dir);
  ASSERT_TRUE(other.ok());
  Result<void> r;
  for (int i = 0; i < 17 && r; ++i) r = pub->publish("node", sample_report(seq++));
  ASSERT_FALSE(r) << "publishing went on beside another agent";
  EXPECT_NE(r.error().message.find("in use by another headroomd (pid " + std::to_string(other.pid())),
            std::string::npos)
      << r.error().message;
  const auto frozen = orca::read_report_file(dir + "/node.orca");
  ASSERT_TRUE(frozen);
  EXPECT_FALSE(pub->publish("node", sample_report(seq++))) << "checked again before every publish until it clears";
}

TEST(OrcaDirSafety, OnlyTheAgentsUserAndRootMayWrite) {
  struct stat st{};
  st.st_mode = S_IFDIR | 0755;
  st.st_uid = 1000;
  EXPECT_FALSE(unsafe_directory(st, 1000));
  st.st_uid = 0;
  EXPECT_FALSE(unsafe_directory(st, 1000)) << "root owns it: root can write anyway";
  st.st_uid = 1001;
  ASSERT_TRUE(unsafe_directory(st, 1000));
  EXPECT_NE(unsafe_directory(st, 1000)->find("owned by uid 1001"), std::string::npos);
  st.st_uid = 1000;
  st.st_mode = S_IFDIR | 0775;
  ASSERT_TRUE(unsafe_directory(st, 1000));
  EXPECT_NE(unsafe_directory(st, 1000)->find("its group"), std::string::npos);
  st.st_mode = S_IFDIR | 0777;
  ASSERT_TRUE(unsafe_directory(st, 1000));
  EXPECT_NE(unsafe_directory(st, 1000)->find("every user (mode 0777)"), std::string::npos);
  st.st_mode = S_IFDIR | 01777;
  EXPECT_FALSE(unsafe_directory(st, 1000)) << "sticky, ours: others cannot replace our files";
  st.st_uid = 0;
  EXPECT_TRUE(unsafe_directory(st, 1000)) << "sticky but root's (like /tmp): others' files there are not ours to replace";
  EXPECT_FALSE(unsafe_directory(st, 0));
}

TEST(OrcaDirSafety, AWorldWritableDirectoryIsRefusedWithWhatToDoOrAcceptedWhenToldToWarn) {
  TempDir tmp;
  const std::string dir = tmp / "orca";
  fs::create_directory(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  agent::Config config;
  config.orca_dir = dir;
  auto built = build_publishers(config);
  ASSERT_FALSE(built);
  const Error* e = &built.error();
  EXPECT_EQ(agent::exit_status(*e), agent::kExitCantCreat);
  for (const std::string& want : std::vector<std::string>{"agent.orca_dir: " + dir, "writable by every user (mode 0777)",
                                                          "chmod 0755 " + dir, "agent.unsafe_orca_dir = \"warn\""})
    EXPECT_NE(e->message.find(want), std::string::npos) << "missing \"" << want << "\" in: " << e->message;
  EXPECT_FALSE(fs::exists(dir + "/.headroomd.lock")) << "nothing is created in a refused directory";

  config.unsafe_orca_dir = agent::UnsafeDirAction::warn;
  auto warned = build_publishers(config);
  ASSERT_TRUE(warned);

  ASSERT_EQ(::chmod(dir.c_str(), 01777), 0);  // sticky and ours: accepted as it is
  config.unsafe_orca_dir = agent::UnsafeDirAction::refuse;
  warned.value().clear();
  EXPECT_TRUE(build_publishers(config));
}

TEST(OrcaDirSafety, TheKeyTakesRefuseOrWarn) {
  auto warn = agent::parse_config("[agent]\nunsafe_orca_dir = \"warn\"\n", "t.toml");
  ASSERT_TRUE(warn.ok());
  EXPECT_EQ(warn.value().unsafe_orca_dir, agent::UnsafeDirAction::warn);
  EXPECT_EQ(agent::Config{}.unsafe_orca_dir, agent::UnsafeDirAction::refuse);
  auto bad = agent::parse_config("[agent]\nunsafe_orca_dir = \"refuze\"\n", "t.toml");
  ASSERT_TRUE(!bad.ok());
  const auto message = bad.error().to_string();
  EXPECT_NE(message.find("agent.unsafe_orca_dir"), std::string::npos) << message;
  EXPECT_NE(message.find("\"refuse\""), std::string::npos) << message;
}

TEST(OrcaDirCleanup, OnlyTheAgentsOwnTemporariesGoAndOnlyOnceTheLockIsHeld) {
  TempDir tmp;
  const std::string dir = tmp / "orca";
  fs::create_directory(dir);
  for (const char* name : {".node.orca.4242.tmp", ".endpoint.api.orca.17.1.tmp", ".something.tmp",
                           ".envoy.pressure.99.tmp", "notes.tmp"})
    tmp.write(std::string("orca/") + name, "x");
  {
    OtherHolder other(dir);  // a running agent: its temporaries may be mid-write
    ASSERT_TRUE(other.ok());
    EXPECT_FALSE(OrcaDirPublisher::open(dir));
    EXPECT_TRUE(fs::exists(dir + "/.node.orca.4242.tmp")) << "removed without holding the lock";
  }
  auto pub = OrcaDirPublisher::open(dir);
  ASSERT_TRUE(pub) << pub.error().message;
  EXPECT_EQ(entries(dir), (std::vector<std::string>{".envoy.pressure.99.tmp", ".headroomd.lock", ".something.tmp",
                                                    "notes.tmp"}));
}

}  // namespace
}  // namespace headroom::publishers
