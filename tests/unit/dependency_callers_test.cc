// SPDX-License-Identifier: Apache-2.0
// Which processes are a dependency's callers: cgroup directories as
// configured, matched against /proc/PID/cgroup texts of v1 and v2 hosts.
#include "probes/dependency_callers.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace headroom::probes {
namespace {

constexpr const char* kV1 =
    "12:pids:/jobs/batch\n"
    "5:cpu,cpuacct:/system.slice/web.service\n"
    "1:name=systemd:/system.slice/web.service\n"
    "0::/\n";
constexpr const char* kV2 = "0::/system.slice/web.service\n";

CallerCgroup parsed(std::string_view dir, bool unified, std::string_view hierarchy = "") {
  auto c = parse_caller_cgroup(dir, "/sys/fs/cgroup", unified, hierarchy);
  EXPECT_TRUE(c) << c.error().message;
  return c ? *c : CallerCgroup{};
}

TEST(DependencyCallers, ParsesV1V2AndRelativeDirectories) {
  const auto v1 = parsed("/sys/fs/cgroup/cpu/system.slice//web.service/", false, "cpu,cpuacct");
  EXPECT_FALSE(v1.unified);
  EXPECT_FALSE(v1.any_hierarchy);
  EXPECT_EQ(v1.controllers, (std::vector<std::string>{"cpu", "cpuacct"}));
  EXPECT_EQ(v1.path, "/system.slice/web.service");
  EXPECT_EQ(parsed("/sys/fs/cgroup/systemd/a", false).controllers, (std::vector<std::string>{"name=systemd"}));
  EXPECT_TRUE(parsed("/sys/fs/cgroup/unified/a", false).unified);
  const auto v2 = parsed("/sys/fs/cgroup/system.slice/web.service", true);
  EXPECT_TRUE(v2.unified);
  EXPECT_EQ(v2.path, "/system.slice/web.service");
  const auto rel = parsed("/jobs", false);
  EXPECT_TRUE(rel.any_hierarchy);
  EXPECT_EQ(rel.path, "/jobs");
  EXPECT_FALSE(parse_caller_cgroup("/sys/fs/cgroup/pids/../x", "/sys/fs/cgroup", false, ""));
  EXPECT_FALSE(parse_caller_cgroup("/sys/fs/cgroup", "/sys/fs/cgroup", false, ""));
}

TEST(DependencyCallers, MatchesTheHierarchyAndEverythingBelowThePath) {
  struct Case {
    const char* dir;
    bool unified;
    const char* hierarchy;
    const char* text;
    bool want;
  } cases[] = {
      {"/sys/fs/cgroup/pids/jobs", false, "", kV1, true},              // below
      {"/sys/fs/cgroup/pids/jobs/batch", false, "", kV1, true},        // itself
      {"/sys/fs/cgroup/pids/jobs/bat", false, "", kV1, false},         // a prefix of a name is not a parent
      {"/sys/fs/cgroup/cpu/jobs", false, "cpu,cpuacct", kV1, false},   // another hierarchy's path
      {"/sys/fs/cgroup/cpu/system.slice", false, "cpu,cpuacct", kV1, true},
      {"/sys/fs/cgroup/cpuacct/system.slice", false, "cpu,cpuacct", kV1, true},
      {"/sys/fs/cgroup/memory/system.slice", false, "", kV1, false},  // not in that hierarchy's line
      {"/sys/fs/cgroup/systemd/system.slice", false, "", kV1, true},
      {"/sys/fs/cgroup/unified/system.slice", false, "", kV1, false},  // v1 host: the v2 line is "/"
      {"/sys/fs/cgroup/system.slice", true, "", kV2, true},
      {"/sys/fs/cgroup/system.slice/db.service", true, "", kV2, false},
      {"/jobs", false, "", kV1, true},  // relative: any hierarchy
      {"/jobs", false, "", kV2, false},
      {"/", false, "", kV2, true},
  };
  for (const auto& c : cases)
    EXPECT_EQ(in_caller_cgroup(c.text, parsed(c.dir, c.unified, c.hierarchy)), c.want) << c.dir << " in " << c.text;
}

TEST(DependencyCallers, AProcessMustMatchItsNameAndItsCgroupWhenBothAreGiven) {
  CallerRule name_only{"redis-cli", false, {}};
  EXPECT_TRUE(is_caller(name_only, "redis-cli\n", ""));
  EXPECT_FALSE(is_caller(name_only, "redis-server\n", ""));
  CallerRule both{"web", true, parsed("/sys/fs/cgroup/system.slice/web.service", true)};
  EXPECT_TRUE(is_caller(both, "web\n", kV2));
  EXPECT_FALSE(is_caller(both, "web\n", "0::/other\n"));
  EXPECT_FALSE(is_caller(both, "batch\n", kV2));
  CallerRule any{"", false, {}};
  EXPECT_TRUE(is_caller(any, "anything\n", ""));
}

// A /proc of a few processes, written by the test.
class FakeProc {
 public:
  FakeProc() {
    std::string tmpl = std::filesystem::temp_directory_path().string() + "/hr-callers-XXXXXX";
    root_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }
  FakeProc(const FakeProc&) = delete;
  FakeProc& operator=(const FakeProc&) = delete;
  void set(int pid, const std::string& comm) {
    std::filesystem::create_directories(root_ + "/" + std::to_string(pid));
    std::ofstream(root_ + "/" + std::to_string(pid) + "/comm") << comm << "\n";
  }
  void remove(int pid) { std::filesystem::remove_all(root_ + "/" + std::to_string(pid)); }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

using Takes = std::vector<std::pair<std::size_t, pid_t>>;

TEST(DependencyCallers, TheScanReadsNewAndYoungProcessesEachTimeAndAllOfThemOncePerRecheck) {
  FakeProc proc;
  ASSERT_FALSE(proc.root().empty());
  proc.set(10, "a");
  proc.set(20, "b");
  CallerScan scan(proc.root(), {CallerRule{"a", false, {}}}, 1000);
  EXPECT_EQ(scan.renew(0), (Takes{{0, 10}}));
  EXPECT_EQ(scan.reads(), 2u);
  EXPECT_EQ(scan.renew(500), (Takes{{0, 10}}));  // those of the first scan are not young
  EXPECT_EQ(scan.reads(), 2u);
  EXPECT_EQ(scan.renew(2000), (Takes{{0, 10}}));  // a full rescan
  EXPECT_EQ(scan.reads(), 4u);
  proc.set(30, "a");
  EXPECT_EQ(scan.renew(2500), (Takes{{0, 10}, {0, 30}}));  // only the new one is read
  EXPECT_EQ(scan.reads(), 5u);
  proc.set(10, "z");  // execs: seen at the next full rescan
  proc.set(30, "y");  // a young process is read each time
  EXPECT_EQ(scan.renew(2600), (Takes{{0, 10}}));
  EXPECT_EQ(scan.reads(), 6u);
  proc.set(30, "a");
  EXPECT_EQ(scan.renew(3100), (Takes{{0, 30}}));  // full again
  EXPECT_EQ(scan.reads(), 9u);
  proc.remove(30);
  EXPECT_EQ(scan.renew(3200), (Takes{}));
  EXPECT_EQ(find_callers(proc.root(), {CallerRule{"b", false, {}}}), (std::vector<std::vector<pid_t>>{{20}}));
}

}  // namespace
}  // namespace headroom::probes
