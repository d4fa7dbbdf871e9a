// SPDX-License-Identifier: Apache-2.0
// headroomctl end to end: report files written with ReportFileWriter into a
// temporary directory, the built binary (HEADROOMCTL_PATH) run on them, its
// stdout, stderr and exit status checked.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "headroom/orca/clock.h"
#include "headroom/orca/report.h"
#include "headroom/orca/report_writer.h"

extern char** environ;

namespace headroom {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct CtlRun {
  int status = -1;  // exit code; 128 + signal when killed
  std::string out, err;
};

// Called while the child runs, after each read and at least every 50 ms, with
// its pid and the stdout so far: lets a test act between frames.
using OnOutput = std::function<void(pid_t, const std::string&)>;

CtlRun run_ctl(const std::vector<std::string>& args, const OnOutput& on_output = {}) {
  CtlRun r;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2 failed";
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], STDERR_FILENO);
  std::vector<std::string> argv_store = {HEADROOMCTL_PATH};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, HEADROOMCTL_PATH, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << HEADROOMCTL_PATH << ": " << rc;
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return r;
  }

  // A hung child fails the test instead of hanging ctest.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "headroomctl did not finish within 30 s; stdout so far:\n" << r.out;
      ::kill(pid, SIGKILL);
      break;
    }
    if (::poll(fds, 2, 50) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;  // poll ignores negative descriptors
        --open_fds;
      }
    }
    if (on_output) on_output(pid, r.out);
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return r;
}

// Frames of `watch` when stdout is not a terminal: each ends with a blank line.
std::vector<std::string> frames_of(const std::string& out) {
  std::vector<std::string> frames;
  std::size_t start = 0;
  for (auto end = out.find("\n\n"); end != std::string::npos; end = out.find("\n\n", start)) {
    frames.push_back(out.substr(start, end - start + 1));
    start = end + 2;
  }
  return frames;
}

bool has_row(const std::string& frame, const std::string& scope) {
  return frame.find("\n" + scope + " ") != std::string::npos;
}

using orca::unix_now_ms;

orca::Report report(uint64_t seq, double cpu) {
  orca::Report r;
  r.set_cpu_utilization(cpu);
  r.set_mem_utilization(0.41);
  r.set_application_utilization(cpu);
  (*r.mutable_utilization())["cpu"] = cpu;
  (*r.mutable_utilization())["memory"] = 0.41;
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(orca::kTimestampMsKey)] = static_cast<double>(unix_now_ms());
  nm[std::string(orca::kSeqKey)] = static_cast<double>(seq);
  // A long interval keeps the report fresh however slow the test machine is.
  nm[std::string(orca::kIntervalMsKey)] = 60'000;
  return r;
}

class HeadroomctlCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "headroomctl_cli.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void write_report(const std::string& dir, const std::string& name, const orca::Report& r) {
    auto w = orca::ReportFileWriter::open(dir);
    ASSERT_TRUE(w.ok()) << w.error().message;
    auto written = w->write(name, r);
    ASSERT_TRUE(written.ok()) << written.error().message;
  }
  void write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    ASSERT_TRUE(f.good()) << path;
  }

  std::string dir_;
};

// ---------------------------------------------------------------- cat

TEST_F(HeadroomctlCli, CatHuman) {
  write_report(dir_, "node.orca", report(5, 0.632));
  const std::string path = dir_ + "/node.orca";
  const CtlRun r = run_ctl({"cat", path});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.rfind(path + ": seq 5, ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("s ago, interval 60000 ms\n"), std::string::npos) << "fresh, so no marker\n" << r.out;
  EXPECT_NE(r.out.find("cpu_utilization"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("63.2 %"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("headroom.timestamp_ms"), std::string::npos) << r.out;
}

TEST_F(HeadroomctlCli, CatJson) {
  write_report(dir_, "node.orca", report(5, 0.632));
  const CtlRun r = run_ctl({"cat", dir_ + "/node.orca", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line:\n" << r.out;
  EXPECT_EQ(r.out.front(), '{') << r.out;
  EXPECT_NE(r.out.find("\"file\":\"" + dir_ + "/node.orca\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"stale\":false"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"report\":{"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"cpu_utilization\":0.632"), std::string::npos) << r.out;
}

TEST_F(HeadroomctlCli, CatCorruptFile) {
  auto w = orca::ReportFileWriter::open(dir_);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->write_bytes("node.orca", "\xff\xff\xff").ok());  // a varint that never ends
  const std::string path = dir_ + "/node.orca";
  const CtlRun r = run_ctl({"cat", path});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("headroomctl: " + path + ": not a valid", 0), 0u) << r.err;
}

TEST_F(HeadroomctlCli, CatMissingFile) {
  const std::string path = dir_ + "/absent.orca";
  const CtlRun r = run_ctl({"cat", path});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "headroomctl: " + path + ": open: No such file or directory\n");
}

TEST_F(HeadroomctlCli, CatOwnerTrustsOnlyThatUsersFiles) {
  write_report(dir_, "node.orca", report(5, 0.632));
  const std::string path = dir_ + "/node.orca";
  const std::string me = std::to_string(::geteuid());
  const CtlRun mine = run_ctl({"cat", path, "--owner", me});
  EXPECT_EQ(mine.status, 0) << mine.err;
  const CtlRun theirs = run_ctl({"cat", path, "--owner", std::to_string(::geteuid() + 1)});
  EXPECT_EQ(theirs.status, 1);
  EXPECT_EQ(theirs.out, "");
  EXPECT_EQ(theirs.err.rfind("headroomctl: " + path + ": owned by uid " + me + ", not by uid", 0), 0u) << theirs.err;
  ASSERT_EQ(::chmod(path.c_str(), 0646), 0);
  const CtlRun loose = run_ctl({"cat", path, "--owner", me});
  EXPECT_EQ(loose.status, 1);
  EXPECT_NE(loose.err.find("mode 0646 lets other users write it"), std::string::npos) << loose.err;
  // A user name works like its uid ("root" exists on every machine).
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  const CtlRun by_name = run_ctl({"cat", path, "--owner", "root"});
  EXPECT_EQ(by_name.status, ::geteuid() == 0 ? 0 : 1) << by_name.err;
  const CtlRun unknown = run_ctl({"cat", path, "--owner", "no-such-user-here"});
  EXPECT_EQ(unknown.status, 64);
  EXPECT_NE(unknown.err.find("--owner: no user \"no-such-user-here\" on this machine"), std::string::npos)
      << unknown.err;
}

TEST_F(HeadroomctlCli, WatchOwnerShowsForeignFilesAsRejected) {
  write_report(dir_, "node.orca", report(5, 0.632));
  const CtlRun r = run_ctl({"watch", dir_, "--count", "1", "--interval-ms", "100", "--owner",
                            std::to_string(::geteuid() + 1)});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("owned by uid " + std::to_string(::geteuid())), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("63.2 %"), std::string::npos) << "an untrusted file's values are not shown\n" << r.out;
}

// ---------------------------------------------------------------- usage

TEST_F(HeadroomctlCli, UsageErrors) {
  EXPECT_EQ(run_ctl({}).status, 64);
  EXPECT_EQ(run_ctl({"cat"}).status, 64);
  EXPECT_EQ(run_ctl({"frobnicate"}).status, 64);
  EXPECT_EQ(run_ctl({"watch", dir_, "--interval-ms", "0"}).status, 64);
  EXPECT_EQ(run_ctl({"watch", dir_, "--count", "-1"}).status, 64);

  const CtlRun version = run_ctl({"--version"});
  EXPECT_EQ(version.status, 0);
  EXPECT_EQ(version.out.rfind("headroomctl ", 0), 0u) << version.out;
  const CtlRun help = run_ctl({"--help"});
  EXPECT_EQ(help.status, 0);
  for (const char* word : {"cat", "watch", "check-config"})
    EXPECT_NE(help.out.find(word), std::string::npos) << word << "\n" << help.out;
}

// An endpoint instance's report: its namespace, and gone when its servers stopped.
orca::Report instance(uint64_t seq, double cpu, uint64_t netns, bool gone = false) {
  orca::Report r = report(seq, cpu);
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(orca::kMetricInstanceNetns)] = static_cast<double>(netns);
  if (gone) {
    nm[std::string(orca::kStoppedKey)] = 1;
    nm[std::string(orca::kMetricInstanceGone)] = 1;
  }
  return r;
}

TEST_F(HeadroomctlCli, CatInstancesPrintsTheAggregateThenEachInstance) {
  write_report(dir_, "endpoint.api.orca", report(5, 0.5));
  write_report(dir_, "endpoint.api@pod-b.orca", instance(5, 0.25, 4026532001, /*gone=*/true));
  write_report(dir_, "endpoint.api@pod-a.orca", instance(5, 0.125, 4026532000));
  write_report(dir_, "endpoint.api2@host.orca", instance(5, 0.75, 4026531840));
  const std::string path = dir_ + "/endpoint.api.orca";
  CtlRun r = run_ctl({"cat", path, "--instances"});
  EXPECT_EQ(r.status, 0) << r.err;
  const auto a = r.out.find(path + ": seq 5");
  const auto pod_a = r.out.find("\n\n" + dir_ + "/endpoint.api@pod-a.orca: seq 5");
  const auto pod_b = r.out.find("\n\n" + dir_ + "/endpoint.api@pod-b.orca: seq 5");
  EXPECT_EQ(a, 0u) << r.out;
  ASSERT_NE(pod_a, std::string::npos) << r.out;
  ASSERT_NE(pod_b, std::string::npos) << r.out;
  EXPECT_LT(pod_a, pod_b) << r.out;
  EXPECT_NE(r.out.find("4026532000 (net:[4026532000])"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GONE (the instance stopped serving"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("api2"), std::string::npos) << "another endpoint's instance\n" << r.out;

  // JSON: one line each.
  r = run_ctl({"cat", path, "--instances", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3) << r.out;
  EXPECT_NE(r.out.find("\"stale_reason\":\"the instance stopped serving\""), std::string::npos) << r.out;

  // Without the flag, only the file; with it, only an aggregate will do.
  r = run_ctl({"cat", path});
  EXPECT_EQ(r.out.find("pod-a"), std::string::npos) << r.out;
  r = run_ctl({"cat", dir_ + "/endpoint.api@pod-a.orca", "--instances"});
  EXPECT_EQ(r.status, 64);
  EXPECT_NE(r.err.find("--instances needs an endpoint's aggregate report"), std::string::npos) << r.err;
}

// ---------------------------------------------------------------- watch

TEST_F(HeadroomctlCli, WatchPrintsFrames) {
  write_report(dir_, "node.orca", report(5, 0.632));
  write_text(dir_ + "/endpoint.bad.orca", "\xff\xff\xff");
  write_text(dir_ + "/.node.orca.999.tmp", "half-written");  // a writer's temporary: not a row
  const CtlRun r = run_ctl({"watch", dir_, "--count", "2", "--interval-ms", "100"});
  EXPECT_EQ(r.status, 0) << r.err;
  const auto frames = frames_of(r.out);
  ASSERT_EQ(frames.size(), 2u) << r.out;
  for (const auto& f : frames) {
    EXPECT_NE(f.find(dir_), std::string::npos) << "title names the directory\n" << f;
    EXPECT_NE(f.find("\nSCOPE "), std::string::npos) << f;
    EXPECT_TRUE(has_row(f, "node")) << f;
    EXPECT_NE(f.find("63.2 %"), std::string::npos) << f;
    EXPECT_TRUE(has_row(f, "endpoint.bad")) << f;
    EXPECT_NE(f.find("ERROR: not a valid"), std::string::npos) << f;
    EXPECT_EQ(f.find(".node.orca.999"), std::string::npos) << f;
    EXPECT_EQ(f.find("\x1b["), std::string::npos) << "no escape codes when not a terminal\n" << f;
  }
}

TEST_F(HeadroomctlCli, WatchListsInstancesUnderTheirEndpoint) {
  write_report(dir_, "endpoint.api.orca", report(5, 0.5));
  write_report(dir_, "endpoint.api@pod-a.orca", instance(5, 0.125, 4026532000));
  write_report(dir_, "endpoint.api@pod-b.orca", instance(5, 0.25, 4026532001, /*gone=*/true));
  const CtlRun r = run_ctl({"watch", dir_, "--count", "1", "--interval-ms", "100"});
  EXPECT_EQ(r.status, 0) << r.err;
  const auto at = r.out.find("\nendpoint.api ");
  const auto pod_a = r.out.find("\n  @pod-a ");
  const auto pod_b = r.out.find("\n  @pod-b ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_NE(pod_a, std::string::npos) << r.out;
  ASSERT_NE(pod_b, std::string::npos) << r.out;
  EXPECT_LT(at, pod_a);
  EXPECT_LT(pod_a, pod_b);
  EXPECT_NE(r.out.find("GONE (stopped serving)", pod_b), std::string::npos) << r.out;
}

// watch takes the directory as DIR or, as headroomd and the other commands
// name it, --orca-dir; not both.
TEST_F(HeadroomctlCli, WatchTakesTheDirectoryAsOrcaDir) {
  write_report(dir_, "node.orca", report(5, 0.632));
  const CtlRun r = run_ctl({"watch", "--orca-dir", dir_, "--count", "1", "--interval-ms", "100"});
  EXPECT_EQ(r.status, 0) << r.err;
  const auto frames = frames_of(r.out);
  ASSERT_EQ(frames.size(), 1u) << r.out;
  EXPECT_NE(frames[0].find(dir_), std::string::npos) << frames[0];
  EXPECT_TRUE(has_row(frames[0], "node")) << frames[0];
  EXPECT_NE(frames[0].find("63.2 %"), std::string::npos) << frames[0];
  const CtlRun both = run_ctl({"watch", dir_, "--orca-dir", dir_, "--count", "1"});
  EXPECT_EQ(both.status, 64) << both.out;
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
}

TEST_F(HeadroomctlCli, WatchPicksUpNewFile) {
  write_report(dir_, "node.orca", report(5, 0.632));
  // The interval is long, so a second frame soon after the write can only
  // come from inotify.
  Clock::time_point written{}, second_frame{};
  const CtlRun r = run_ctl({"watch", dir_, "--count", "3", "--interval-ms", "2000"},
                        [&](pid_t, const std::string& out) {
                          const auto n = frames_of(out).size();
                          if (n >= 1 && written == Clock::time_point{}) {
                            write_report(dir_, "endpoint.late.orca", report(1, 0.25));
                            written = Clock::now();
                          }
                          if (n >= 2 && second_frame == Clock::time_point{}) second_frame = Clock::now();
                        });
  EXPECT_EQ(r.status, 0) << r.err;
  const auto frames = frames_of(r.out);
  ASSERT_EQ(frames.size(), 3u) << r.out;
  EXPECT_FALSE(has_row(frames[0], "endpoint.late")) << frames[0];
  EXPECT_TRUE(has_row(frames[1], "endpoint.late")) << frames[1];
  EXPECT_TRUE(has_row(frames[2], "endpoint.late")) << frames[2];
  EXPECT_LT(second_frame - written, milliseconds(1500)) << "the redraw came from the interval, not from inotify";
}

TEST_F(HeadroomctlCli, WatchWaitsForDirectory) {
  const std::string orca_dir = dir_ + "/orca";
  bool created = false;
  const CtlRun r = run_ctl({"watch", orca_dir, "--count", "3", "--interval-ms", "1000"},
                        [&](pid_t, const std::string& out) {
                          if (!created && !frames_of(out).empty()) {
                            fs::create_directory(orca_dir);
                            write_report(orca_dir, "node.orca", report(5, 0.632));
                            created = true;
                          }
                        });
  EXPECT_EQ(r.status, 0) << r.err;
  const auto frames = frames_of(r.out);
  ASSERT_EQ(frames.size(), 3u) << r.out;
  EXPECT_NE(frames[0].find("waiting for " + orca_dir), std::string::npos) << frames[0];
  EXPECT_TRUE(has_row(frames[2], "node")) << frames[2];
}

TEST_F(HeadroomctlCli, WatchExitsCleanlyOnSigterm) {
  write_report(dir_, "node.orca", report(5, 0.632));
  bool signalled = false;
  const CtlRun r = run_ctl({"watch", dir_, "--interval-ms", "100"}, [&](pid_t pid, const std::string& out) {
    if (!signalled && !frames_of(out).empty()) {
      ::kill(pid, SIGTERM);
      signalled = true;
    }
  });
  EXPECT_TRUE(signalled);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

// ---------------------------------------------------------------- check-config

TEST_F(HeadroomctlCli, CheckConfig) {
  const std::string good = dir_ + "/good.toml";
  write_text(good, "[agent]\ninterval = \"100ms\"\n");
  const CtlRun ok = run_ctl({"check-config", good});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out, good + ": configuration is valid\n");

  const std::string bad = dir_ + "/bad.toml";
  write_text(bad, "[agent]\nintervall = \"1s\"\n");
  const CtlRun invalid = run_ctl({"check-config", bad});
  EXPECT_EQ(invalid.status, 78);
  EXPECT_EQ(invalid.out, "");
  EXPECT_EQ(invalid.err.rfind(bad + ":", 0), 0u) << invalid.err;
  EXPECT_NE(invalid.err.find("intervall"), std::string::npos) << invalid.err;

  const CtlRun missing = run_ctl({"check-config", dir_ + "/absent.toml"});
  EXPECT_EQ(missing.status, 78);
  EXPECT_NE(missing.err.find("absent.toml"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace headroom
