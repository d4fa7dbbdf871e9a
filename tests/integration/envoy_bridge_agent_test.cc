// SPDX-License-Identifier: Apache-2.0
// The Envoy bridge inside the real headroomd: the pressure file Envoy's
// injected resource monitor would read appears, always holds a number Envoy
// accepts, is replaced by rename on every publish, and holds the neutral
// value after a clean stop or after its entry is removed by a reload.
#include <pwd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "headroom/orca/report.h"
#include "process.h"
#include "publishers/envoy_bridge.h"
#include "temp_dir.h"

namespace headroom {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::Process;
using testing::TempDir;

// Envoy's reading of the file: absl::SimpleAtod (surrounding whitespace
// allowed, nothing else), then 0 <= p <= 1.
std::optional<double> envoy_parse(const std::string& text) {
  std::size_t b = text.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return std::nullopt;
  const std::size_t e = text.find_last_not_of(" \t\n\r\f\v") + 1;
  const std::string core = text.substr(b, e - b);
  char* end = nullptr;
  const double v = std::strtod(core.c_str(), &end);
  if (end != core.c_str() + core.size() || v < 0 || v > 1) return std::nullopt;
  return v;
}

// Counts inotify events on one name in a directory, as Envoy's watcher sees them.
class NameWatch {
 public:
  NameWatch(const std::string& dir, std::string name) : name_(std::move(name)) {
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ >= 0) ::inotify_add_watch(fd_, dir.c_str(), IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE);
  }
  ~NameWatch() {
    if (fd_ >= 0) ::close(fd_);
  }
  NameWatch(const NameWatch&) = delete;
  NameWatch& operator=(const NameWatch&) = delete;

  void poll() {
    alignas(inotify_event) char buf[16 * 1024];
    for (;;) {
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return;
      for (std::size_t off = 0; off < static_cast<std::size_t>(n);) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
        if (e->len > 0 && name_ == e->name) {
          if (e->mask & IN_MOVED_TO) ++moved_to;
          if (e->mask & (IN_MODIFY | IN_CLOSE_WRITE)) ++written_in_place;
        }
        off += sizeof(inotify_event) + e->len;
      }
    }
  }

  int moved_to = 0;
  int written_in_place = 0;

 private:
  int fd_ = -1;
  std::string name_;
};

std::optional<orca::Report> read_node(const TempDir& dir) {
  auto r = orca::read_report_file(dir / "orca/node.orca");
  if (!r) return std::nullopt;
  return *r;
}

uint64_t seq_of(const orca::Report& r) { return orca::metadata_of(r)->seq; }

std::string envoy_entry(const std::string& file, const std::string& value, const std::string& neutral) {
  return "[[envoy]]\nvalue = \"" + value + "\"\nfile = \"" + file + "\"\nneutral = " + neutral + "\n";
}

std::vector<std::string> daemon_args(const TempDir& dir, const std::string& config) {
  return {HEADROOMD_PATH, "--config", config, "--orca-dir", dir / "orca"};
}

TEST(EnvoyBridgeAgent, PressureFileIsReplacedEveryIntervalAndNeutralAfterStop) {
  TempDir dir(testing::tmpfs_base());
  const std::string envoy_dir = dir / "envoy";
  std::filesystem::create_directory(envoy_dir);  // to watch it from the start, as Envoy does
  const std::string file = envoy_dir + "/node.pressure";
  const auto config = dir.write(
      "headroom.toml", "[agent]\ninterval = \"50ms\"\n\n" + envoy_entry(file, "application_utilization", "0.05"));
  NameWatch watch(envoy_dir, "node.pressure");
  Process d(daemon_args(dir, config), dir);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(file) && read_node(dir).has_value(); })) << d.err();

  const uint64_t first_seq = seq_of(*read_node(dir));
  int reads = 0;
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < until) {
    const std::string text = testing::read_file(file);
    ASSERT_TRUE(envoy_parse(text).has_value()) << "Envoy would reject \"" << text << "\"";
    ++reads;
    watch.poll();
    std::this_thread::sleep_for(2ms);
  }
  const uint64_t last_seq = seq_of(*read_node(dir));
  EXPECT_GT(reads, 100);
  // Values may repeat; what Envoy needs is a rename for every publish.
  EXPECT_GE(last_seq - first_seq, 15u);
  EXPECT_GE(watch.moved_to, 15) << "node.orca advanced " << last_seq - first_seq;
  EXPECT_GE(static_cast<uint64_t>(watch.moved_to) + 2, last_seq - first_seq);
  EXPECT_EQ(watch.written_in_place, 0);

  const int before_stop = watch.moved_to;
  d.signal(SIGTERM);
  ASSERT_EQ(d.wait(), 0) << d.err();
  EXPECT_EQ(testing::read_file(file), "0.05\n");
  watch.poll();
  EXPECT_GT(watch.moved_to, before_stop);  // Envoy is told about the neutral value
  EXPECT_TRUE(orca::metadata_of(*read_node(dir))->stopped);
  for (const auto& e : std::filesystem::directory_iterator(envoy_dir))
    EXPECT_EQ(e.path().filename(), "node.pressure") << "temporary file left behind";
}

TEST(EnvoyBridgeAgent, OnceWritesTheReportsValueAndCreatesTheDirectory) {
  TempDir dir(testing::tmpfs_base());
  const std::string file = dir / "run/envoy/mem.pressure";  // directory does not exist yet
  const auto config = dir.write("headroom.toml", envoy_entry(file, "mem_utilization", "0.05"));
  auto r = testing::run({HEADROOMD_PATH, "--config", config, "--once", "--orca-dir", dir / "orca"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto report = read_node(dir);
  ASSERT_TRUE(report);
  ASSERT_TRUE(report->utilization().contains("memory"));
  // Exactly the report's number, as formatted for Envoy.
  const auto value = publishers::parse_envoy_value("mem_utilization");
  EXPECT_EQ(testing::read_file(file), publishers::format_envoy_pressure(publishers::envoy_pressure(
                                          publishers::select_envoy_value(*report, *value), 0.05)));
  EXPECT_NE(testing::read_file(file), "0.05\n");  // memory in use is never exactly that
  EXPECT_NE(r.err.find("Envoy bridge: node mem_utilization -> " + file), std::string::npos) << r.err;
}

TEST(EnvoyBridgeAgent, ReloadRebuildsBridgesAndNeutralizesRemovedOnes) {
  TempDir dir(testing::tmpfs_base());
  const std::string a = dir / "envoy/a.pressure", b = dir / "envoy/b.pressure", c = dir / "envoy/c.pressure";
  const auto config = dir.write("headroom.toml", "[agent]\ninterval = \"50ms\"\n\n" +
                                                     envoy_entry(a, "application_utilization", "0.05") + "\n" +
                                                     envoy_entry(b, "utilization.memory", "0.1"));
  Process d(daemon_args(dir, config), dir);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(a) && std::filesystem::exists(b); })) << d.err();

  // a goes, b stays (with another neutral), c is new.
  dir.write("headroom.toml", "[agent]\ninterval = \"50ms\"\n\n" + envoy_entry(b, "utilization.memory", "0.2") +
                                 "\n" + envoy_entry(c, "cpu_utilization", "0.3"));
  d.signal(SIGHUP);
  ASSERT_TRUE(eventually([&] { return d.err().find("configuration reloaded") != std::string::npos; })) << d.err();
  EXPECT_EQ(testing::read_file(a), "0.05\n");
  EXPECT_NE(d.err().find(a + " removed from the configuration"), std::string::npos) << d.err();
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(c); })) << d.err();

  // a is no longer written; b and c are.
  NameWatch watch_a(dir / "envoy", "a.pressure"), watch_b(dir / "envoy", "b.pressure"),
      watch_c(dir / "envoy", "c.pressure");
  std::this_thread::sleep_for(500ms);
  watch_a.poll();
  watch_b.poll();
  watch_c.poll();
  EXPECT_EQ(watch_a.moved_to, 0);
  EXPECT_GE(watch_b.moved_to, 3);
  EXPECT_GE(watch_c.moved_to, 3);
  EXPECT_EQ(testing::read_file(a), "0.05\n");

  d.signal(SIGTERM);
  ASSERT_EQ(d.wait(), 0) << d.err();
  EXPECT_EQ(testing::read_file(b), "0.2\n");  // the neutral of the running configuration
  EXPECT_EQ(testing::read_file(c), "0.3\n");
  EXPECT_EQ(testing::read_file(a), "0.05\n");
}

TEST(EnvoyBridgeAgent, InvalidEntryIsAConfigErrorWithTheKeyPath) {
  TempDir dir;
  const auto config = dir.write("headroom.toml", "[[envoy]]\nfile = \"/run/e/p\"\n\n[[envoy]]\nfile = \"" +
                                                     (dir / "q") + "\"\nneutral = 2\n");
  for (const char* mode : {"--check-config", "--once"}) {
    std::vector<std::string> args = daemon_args(dir, config);
    args.push_back(mode);
    auto r = testing::run(args, dir);
    EXPECT_EQ(r.code, 78) << mode << ": " << r.err;
    EXPECT_NE(r.err.find("headroom.toml:6:11: envoy[1].neutral: must be a fraction in [0, 1], got 2"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "q"));
  }
}

TEST(EnvoyBridgeAgent, DirectoryThatCannotBeCreatedExits73) {
  TempDir dir;
  dir.write("file", "not a directory");
  const auto config = dir.write("headroom.toml", envoy_entry(dir / "file/envoy/p", "application_utilization", "0"));
  auto r = testing::run({HEADROOMD_PATH, "--config", config, "--once", "--orca-dir", dir / "orca"}, dir);
  EXPECT_EQ(r.code, 73) << r.err;
  EXPECT_NE(r.err.find("envoy[0].file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(dir / "file"), std::string::npos) << r.err;
}

TEST(EnvoyBridgeAgent, WriteFailuresAreLoggedOncePerChange) {
  TempDir dir;
  const std::string envoy_dir = dir / "envoy";
  std::filesystem::create_directory(envoy_dir);
  const std::string file = envoy_dir + "/node.pressure";
  const auto config = dir.write("headroom.toml", "[agent]\ninterval = \"50ms\"\n\n" +
                                                     envoy_entry(file, "application_utilization", "0"));
  Process::Options who;
  if (::geteuid() == 0) {
    // root writes into any directory whatever its mode.
    struct passwd* pw = ::getpwnam("nobody");
    if (pw == nullptr) GTEST_SKIP() << "running as root without a 'nobody' user";
    who.uid = pw->pw_uid;
    who.gid = pw->pw_gid;
    ::chmod(dir.path().c_str(), 0755);
    ASSERT_EQ(::chown(envoy_dir.c_str(), pw->pw_uid, pw->pw_gid), 0);
    std::filesystem::create_directory(dir / "orca");
    ASSERT_EQ(::chown((dir / "orca").c_str(), pw->pw_uid, pw->pw_gid), 0);
  }
  Process d(daemon_args(dir, config), dir, who);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(file); })) << d.err();

  ::chmod(envoy_dir.c_str(), 0555);
  const std::string failing = "cannot publish Envoy pressure to " + file;
  ASSERT_TRUE(eventually([&] { return d.err().find(failing) != std::string::npos; })) << d.err();
  const uint64_t seq = seq_of(*read_node(dir));
  ASSERT_TRUE(eventually([&] { return seq_of(*read_node(dir)) >= seq + 5; })) << "node.orca must go on";
  ASSERT_TRUE(envoy_parse(testing::read_file(file)).has_value()) << "the last value stays readable";

  ::chmod(envoy_dir.c_str(), 0755);
  ASSERT_TRUE(eventually([&] { return d.err().find("publishing Envoy pressure to " + file + " again") != std::string::npos; }))
      << d.err();
  const std::string log = d.err();
  std::size_t n = 0;
  for (auto pos = log.find(failing); pos != std::string::npos; pos = log.find(failing, pos + 1)) ++n;
  EXPECT_EQ(n, 1u) << log;
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait(), 0);
}

}  // namespace
}  // namespace headroom
