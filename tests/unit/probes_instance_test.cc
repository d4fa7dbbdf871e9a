// SPDX-License-Identifier: Apache-2.0
// probes/instance.h: /proc/PID/cgroup, the path per controller, the instance
// id rule, the network namespace of a process, the LISTEN sockets of
// /proc/net/tcp and the start-up scan, on literal texts and on a proc tree
// of symlinks (the scan against the real kernel is in
// tests/integration/instance_scan_test.cc).
#include "probes/instance.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace headroom::probes {

// Found by gtest through the argument's namespace.
std::ostream& operator<<(std::ostream& os, const ListeningServer& s) {
  return os << "{netns " << s.netns << ", port " << s.port << ", pid " << s.pid << ", listeners " << s.listeners
            << "}";
}

namespace {

using headroom::testing::TempDir;
using Controllers = std::map<std::string, std::string, std::less<>>;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ------------------------------------------------------- parse_proc_cgroup

struct CgroupCase {
  const char* name;
  const char* text;
  std::optional<std::string> unified;
  Controllers controllers;
};

const CgroupCase kCgroupCases[] = {
    {"V2", "0::/system.slice/nginx.service\n", "/system.slice/nginx.service", {}},
    {"V2Root", "0::/\n", "/", {}},
    {"V2NoTrailingNewline", "0::/user.slice", "/user.slice", {}},
    {"V2DeletedCgroup", "0::/system.slice/gone.service (deleted)\n", "/system.slice/gone.service", {}},
    {"V1Host",
     "12:pids:/system.slice/nginx.service\n11:memory:/system.slice/nginx.service\n"
     "10:cpu,cpuacct:/system.slice/nginx.service\n9:cpuset:/\n8:net_cls,net_prio:/\n"
     "1:name=systemd:/system.slice/nginx.service\n",
     std::nullopt,
     {{"pids", "/system.slice/nginx.service"},
      {"memory", "/system.slice/nginx.service"},
      {"cpu", "/system.slice/nginx.service"},
      {"cpuacct", "/system.slice/nginx.service"},
      {"cpuset", "/"},
      {"net_cls", "/"},
      {"net_prio", "/"},
      {"name=systemd", "/system.slice/nginx.service"}}},
    {"Hybrid",
     "5:memory:/user.slice/user-1000.slice\n4:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice/session-2.scope\n"
     "0::/user.slice/session-2.scope\n",
     "/user.slice/session-2.scope",
     {{"memory", "/user.slice/user-1000.slice"},
      {"cpu", "/user.slice"},
      {"cpuacct", "/user.slice"},
      {"name=systemd", "/user.slice/session-2.scope"}}},
    {"Docker",
     "4:memory:/docker/0123456789abcdef\n3:cpu,cpuacct:/docker/0123456789abcdef\n"
     "1:name=systemd:/docker/0123456789abcdef\n",
     std::nullopt,
     {{"memory", "/docker/0123456789abcdef"},
      {"cpu", "/docker/0123456789abcdef"},
      {"cpuacct", "/docker/0123456789abcdef"},
      {"name=systemd", "/docker/0123456789abcdef"}}},
    {"KubepodsCgroupfsV1",
     "7:memory:/kubepods/burstable/pod6f1c2d3e-aaaa-bbbb-cccc-1234567890ab/0123abcd\n"
     "3:cpu,cpuacct:/kubepods/burstable/pod6f1c2d3e-aaaa-bbbb-cccc-1234567890ab/0123abcd\n",
     std::nullopt,
     {{"memory", "/kubepods/burstable/pod6f1c2d3e-aaaa-bbbb-cccc-1234567890ab/0123abcd"},
      {"cpu", "/kubepods/burstable/pod6f1c2d3e-aaaa-bbbb-cccc-1234567890ab/0123abcd"},
      {"cpuacct", "/kubepods/burstable/pod6f1c2d3e-aaaa-bbbb-cccc-1234567890ab/0123abcd"}}},
    {"KubepodsSystemdV2",
     "0::/kubepods.slice/kubepods-burstable.slice/"
     "kubepods-burstable-pod6f1c2d3e_aaaa_bbbb_cccc_1234567890ab.slice/cri-containerd-0123.scope\n",
     "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c2d3e_aaaa_bbbb_cccc_1234567890ab.slice/"
     "cri-containerd-0123.scope",
     {}},
    {"HierarchyWithoutControllersIsSkipped", "3::/x\n", std::nullopt, {}},
    {"PathWithColon", "0::/machine.slice/a:b.scope\n", "/machine.slice/a:b.scope", {}},
    {"Empty", "", std::nullopt, {}},
};

class ParseProcCgroup : public ::testing::TestWithParam<CgroupCase> {};

TEST_P(ParseProcCgroup, Parses) {
  const CgroupCase& c = GetParam();
  auto r = parse_proc_cgroup(c.text);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->unified, c.unified);
  EXPECT_EQ(r->controllers, c.controllers);
}

INSTANTIATE_TEST_SUITE_P(Table, ParseProcCgroup, ::testing::ValuesIn(kCgroupCases),
                         [](const auto& row) { return std::string(row.param.name); });

struct BadCgroupCase {
  const char* name;
  const char* text;
  const char* message;  // the whole message: it names the line
};

const BadCgroupCase kBadCgroupCases[] = {
    {"NoColons", "0::/\ngarbage\n", "line 2 \"garbage\": expected \"<hierarchy id>:<controllers>:<path>\""},
    {"OneColon", "4:memory\n", "line 1 \"4:memory\": expected \"<hierarchy id>:<controllers>:<path>\""},
    {"IdNotANumber", "x:cpu:/\n", "line 1 \"x:cpu:/\": the hierarchy id \"x\" is not a number"},
    {"NegativeId", "-1:cpu:/\n", "line 1 \"-1:cpu:/\": the hierarchy id \"-1\" is not a number"},
    {"RelativePath", "0::system.slice\n", "line 1 \"0::system.slice\": the cgroup path does not start with '/'"},
    {"EmptyPath", "2:cpu:\n", "line 1 \"2:cpu:\": the cgroup path does not start with '/'"},
    {"V2WithControllers", "0:cpu:/\n", "line 1 \"0:cpu:/\": hierarchy 0 (cgroup v2) lists controllers"},
    {"TwoV2Lines", "0::/a\n0::/b\n", "line 2 \"0::/b\": a second cgroup v2 (\"0::\") line"},
    {"EmptyControllerName", "3:cpu,,cpuacct:/\n", "line 1 \"3:cpu,,cpuacct:/\": an empty controller name"},
    {"ControllerTwice", "3:cpu:/a\n4:cpu:/b\n", "line 2 \"4:cpu:/b\": controller \"cpu\" appears twice"},
};

class ParseProcCgroupRejects : public ::testing::TestWithParam<BadCgroupCase> {};

TEST_P(ParseProcCgroupRejects, NamingTheLine) {
  const BadCgroupCase& c = GetParam();
  auto r = parse_proc_cgroup(c.text);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, c.message);
}

INSTANTIATE_TEST_SUITE_P(Table, ParseProcCgroupRejects, ::testing::ValuesIn(kBadCgroupCases),
                         [](const auto& row) { return std::string(row.param.name); });

// --------------------------------------------------------- controller_path

TEST(ControllerPath, PerVersionAndController) {
  ProcCgroups v1;
  v1.controllers = {{"cpuacct", "/acct"}, {"cpu", "/quota"}, {"memory", "/mem"}, {"name=systemd", "/sd"}};
  ProcCgroups split_cpu;  // cpu and cpuacct mounted apart, only cpu known
  split_cpu.controllers = {{"cpu", "/quota"}};
  ProcCgroups v2;
  v2.unified = "/system.slice/x.service";
  ProcCgroups hybrid = v1;
  hybrid.unified = "/unified";

  struct Row {
    const ProcCgroups* cgroups;
    CgroupVersion version;
    const char* controller;
    std::optional<std::string> path;
  };
  const Row rows[] = {
      {&v1, CgroupVersion::v1, "cpu", "/acct"},  // where the usage is
      {&split_cpu, CgroupVersion::v1, "cpu", "/quota"},
      {&v1, CgroupVersion::v1, "memory", "/mem"},
      {&v1, CgroupVersion::v1, "name=systemd", "/sd"},
      {&v1, CgroupVersion::v1, "pids", std::nullopt},
      {&split_cpu, CgroupVersion::v1, "memory", std::nullopt},
      {&v1, CgroupVersion::v2, "cpu", std::nullopt},
      {&v2, CgroupVersion::v2, "cpu", "/system.slice/x.service"},
      {&v2, CgroupVersion::v2, "memory", "/system.slice/x.service"},
      {&v2, CgroupVersion::v1, "memory", std::nullopt},
      {&v2, CgroupVersion::automatic, "memory", "/system.slice/x.service"},
      {&hybrid, CgroupVersion::automatic, "cpu", "/acct"},
      {&hybrid, CgroupVersion::automatic, "memory", "/mem"},
      {&hybrid, CgroupVersion::automatic, "io", "/unified"},
      {&hybrid, CgroupVersion::v2, "memory", "/unified"},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(controller_path(*row.cgroups, row.version, row.controller), row.path)
        << row.controller << " at version " << static_cast<int>(row.version);
  }
}

TEST(ControllerPath, FromAParsedFile) {
  auto r = parse_proc_cgroup("11:memory:/system.slice/a.service\n10:cpu,cpuacct:/system.slice/b.service\n0::/c\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(controller_path(*r, CgroupVersion::v1, "cpu"), "/system.slice/b.service");
  EXPECT_EQ(controller_path(*r, CgroupVersion::v1, "memory"), "/system.slice/a.service");
  EXPECT_EQ(controller_path(*r, CgroupVersion::v2, "cpu"), "/c");
}

// ------------------------------------------------------------- instance_id

struct IdCase {
  const char* name;
  const char* cgroup;
  uint32_t netns;
  bool host;
  const char* id;
};

const IdCase kIdCases[] = {
    {"KubepodsCgroupfs", "/kubepods/burstable/pod6f1c2d3e-aaaa-bbbb-cccc-1234567890ab/0123abcd4567", 4026532500, false,
     "6f1c2d3e-aaaa-bbbb-cccc-1234567890ab"},
    {"KubepodsCgroupfsGuaranteed", "/kubepods/pod6f1c2d3e-aaaa-bbbb-cccc-1234567890ab/0123abcd", 4026532500, false,
     "6f1c2d3e-aaaa-bbbb-cccc-1234567890ab"},
    {"KubepodsCgroupfsPodCgroupItself", "/kubepods/besteffort/pod6f1c2d3e-aaaa-bbbb-cccc-1234567890ab", 1, false,
     "6f1c2d3e-aaaa-bbbb-cccc-1234567890ab"},
    {"KubepodsSystemd",
     "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c2d3e_aaaa_bbbb_cccc_1234567890ab.slice/"
     "cri-containerd-0123.scope",
     4026532500, false, "6f1c2d3e-aaaa-bbbb-cccc-1234567890ab"},
    {"KubepodsSystemdGuaranteed",
     "/kubepods.slice/kubepods-pod6f1c2d3e_aaaa_bbbb_cccc_1234567890ab.slice/cri-containerd-0123.scope", 7, false,
     "6f1c2d3e-aaaa-bbbb-cccc-1234567890ab"},
    {"StaticPodHashUid", "/kubepods/burstable/pod0a1b2c3d4e5f60718293a4b5c6d7e8f9/abc", 7, false,
     "0a1b2c3d4e5f60718293a4b5c6d7e8f9"},
    {"HostNetworkPodKeepsItsUid", "/kubepods/burstable/pod6f1c2d3e-aaaa-bbbb-cccc-1234567890ab/0123", 4026531840, true,
     "6f1c2d3e-aaaa-bbbb-cccc-1234567890ab"},
    {"PodWithoutKubepodsIsALeaf", "/machine.slice/pod6f1c2d3e", 9, false, "pod6f1c2d3e"},
    {"PodComponentNotHex", "/kubepods/burstable/podcast/abc", 9, false, "abc"},
    {"SystemdPodNotHex", "/kubepods.slice/kubepods-podzz.slice", 9, false, "kubepods-podzz.slice"},
    {"Docker", "/system.slice/docker-4f2a9c.scope", 4026532600, false, "docker-4f2a9c.scope"},
    {"DockerCgroupfs", "/docker/4f2a9c0123", 4026532600, false, "4f2a9c0123"},
    {"HostNetns", "/system.slice/nginx.service", 4026531840, true, "host"},
    {"HostNetnsRootCgroup", "/", 4026531840, true, "host"},
    {"RootCgroupInANetns", "/", 4026532001, false, "netns-4026532001"},
    {"EmptyCgroupInANetns", "", 4026532001, false, "netns-4026532001"},
    {"ParentOutsideTheCgroupNamespace", "/..", 4026532001, false, "netns-4026532001"},
    {"TrailingSlash", "/system.slice/app.service/", 5, false, "app.service"},
    {"OddCharacters", "/machine.slice/systemd-nspawn@web x\\x2d1:ü.service", 5, false,
     "systemd-nspawn_web_x_x2d1___.service"},
};

class InstanceId : public ::testing::TestWithParam<IdCase> {};

TEST_P(InstanceId, FollowsTheRule) {
  const IdCase& c = GetParam();
  EXPECT_EQ(instance_id(c.cgroup, c.netns, c.host), c.id) << c.cgroup;
}

INSTANTIATE_TEST_SUITE_P(Table, InstanceId, ::testing::ValuesIn(kIdCases),
                         [](const auto& row) { return std::string(row.param.name); });

// ---------------------------------------------------------------- netns_of

TEST(NetnsOf, RealProcSelfMatchesTheNamespaceInode) {
  auto ns = netns_of("/proc", ::getpid());
  ASSERT_TRUE(ns.ok()) << ns.error().message;
  struct stat st {};
  ASSERT_EQ(::stat("/proc/self/ns/net", &st), 0);
  EXPECT_EQ(*ns, st.st_ino);
}

TEST(NetnsOf, FixtureSymlink) {
  TempDir dir;
  dir.mkdir("42/ns");
  std::filesystem::create_symlink("net:[4026532001]", dir / "42/ns/net");
  auto ns = netns_of(dir.path(), 42);
  ASSERT_TRUE(ns.ok()) << ns.error().message;
  EXPECT_EQ(*ns, 4026532001u);
}

TEST(NetnsOf, ErrorsNameThePath) {
  TempDir dir;
  auto missing = netns_of(dir.path(), 7);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_TRUE(contains(missing.error().message, "readlink " + dir.path() + "/7/ns/net")) << missing.error().message;

  for (const char* link : {"mnt:[4026531840]", "net:[]", "net:[12x]", "net:4026531840", "net:[99999999999]"}) {
    std::filesystem::remove_all(dir / "8");
    dir.mkdir("8/ns");
    std::filesystem::create_symlink(link, dir / "8/ns/net");
    auto bad = netns_of(dir.path(), 8);
    ASSERT_FALSE(bad.ok()) << link;
    EXPECT_TRUE(contains(bad.error().message, dir.path() + "/8/ns/net: the link reads \"" + link + "\""))
        << bad.error().message;
  }
}

// ----------------------------------------------------- parse_tcp_listeners

constexpr const char* kTcp =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31001 1 "
    "0000000000000000 100 0 0 10 0\n"
    "   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31002 1 "
    "0000000000000000 100 0 0 10 0\n"
    "   2: 0100007F:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31003 1 "
    "0000000000000000 100 0 0 10 0\n"
    "   3: 0100007F:1F90 0100007F:A2C4 01 00000000:00000000 00:00000000 00000000  1000        0 31004 1 "
    "0000000000000000 20 4 30 10 -1\n"
    "   4: 00000000:01BB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31005 1 "
    "0000000000000000 100 0 0 10 0\n";

constexpr const char* kTcp6 =
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
    "tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000     0        0 31006 1 0000000000000000 100 0 0 10 0\n";

TEST(ParseTcpListeners, ListenSocketsOnThePortsOnly) {
  auto r = parse_tcp_listeners(kTcp, {8080, 443});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 3u);  // not port 22, not the established connection on 8080
  EXPECT_EQ((*r)[0].port, 8080);
  EXPECT_EQ((*r)[0].inode, 31001u);
  EXPECT_EQ((*r)[1].port, 8080);
  EXPECT_EQ((*r)[1].inode, 31002u);
  EXPECT_EQ((*r)[2].port, 443);
  EXPECT_EQ((*r)[2].inode, 31005u);

  auto v6 = parse_tcp_listeners(kTcp6, {8080});
  ASSERT_TRUE(v6.ok()) << v6.error().message;
  ASSERT_EQ(v6->size(), 1u);
  EXPECT_EQ((*v6)[0].inode, 31006u);

  auto none = parse_tcp_listeners(kTcp, {9});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(ParseTcpListeners, MalformedLinesAreNamed) {
  const struct {
    const char* text;
    const char* message;
  } rows[] = {
      {"   0: 00000000:1F90 00000000:0000 0A\n", "line 1 \"   0: 00000000:1F90 00000000:0000 0A\": fewer than 10 fields"},
      {"   0: 000000001F90 00000000:0000 0A 0:0 0:0 0 0 0 5\n",
       "line 1 \"   0: 000000001F90 00000000:0000 0A 0:0 0:0 0 0 0 5\": the local address is not "
       "\"<hex address>:<hex port>\""},
      {"   0: 00000000:1FZ0 00000000:0000 0A 0:0 0:0 0 0 0 5\n",
       "line 1 \"   0: 00000000:1FZ0 00000000:0000 0A 0:0 0:0 0 0 0 5\": the local address is not "
       "\"<hex address>:<hex port>\""},
      {"   0: 00000000:1F90 00000000:0000 0A 0:0 0:0 0 0 0 x5\n",
       "line 1 \"   0: 00000000:1F90 00000000:0000 0A 0:0 0:0 0 0 0 x5\": the inode is not a number"},
  };
  for (const auto& row : rows) {
    auto r = parse_tcp_listeners(row.text, {8080});
    ASSERT_FALSE(r.ok()) << row.text;
    EXPECT_EQ(r.error().message, row.message);
  }
}

// ----------------------------------------------------------- scan_listeners

// A proc tree: <pid>/ns/net, <pid>/net/tcp{,6} and <pid>/fd/<n> as the kernel
// shows them, the links pointing nowhere.
class ScanFixture {
 public:
  void process(pid_t pid, uint32_t netns, const std::vector<uint64_t>& sockets, const char* tcp = nullptr,
               const char* tcp6 = nullptr) {
    const std::string p = std::to_string(pid);
    dir_.mkdir(p + "/ns");
    dir_.mkdir(p + "/fd");
    std::filesystem::create_symlink("net:[" + std::to_string(netns) + "]", dir_ / (p + "/ns/net"));
    int fd = 0;
    std::filesystem::create_symlink("/dev/null", dir_ / (p + "/fd/" + std::to_string(fd++)));
    std::filesystem::create_symlink("pipe:[777]", dir_ / (p + "/fd/" + std::to_string(fd++)));
    for (uint64_t s : sockets)
      std::filesystem::create_symlink("socket:[" + std::to_string(s) + "]", dir_ / (p + "/fd/" + std::to_string(fd++)));
    if (tcp != nullptr) dir_.write(p + "/net/tcp", tcp);
    if (tcp6 != nullptr) dir_.write(p + "/net/tcp6", tcp6);
  }
  const std::string& root() const { return dir_.path(); }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
};

TEST(ScanListeners, EveryNamespaceItsOwnServersAndHolders) {
  ScanFixture f;
  // Namespace 100: pid 10 reads the namespace's tcp; 11 holds the 8080 sockets, 12 the 443 one.
  f.process(10, 100, {}, kTcp, kTcp6);
  f.process(11, 100, {31001, 31002, 31006});
  f.process(12, 100, {31005});
  // Namespace 200: one server on 8080, IPv4 only (no tcp6: IPv6 off).
  const std::string tcp200 = std::string(kTcp).substr(0, std::string(kTcp).find("   1:"));
  f.process(20, 200, {31001}, tcp200.c_str());
  // Namespace 300: nothing on the ports.
  f.process(30, 300, {5}, "  sl  local_address rem_address   st\n");
  // Not processes, or not readable: skipped.
  f.dir().mkdir("self");
  f.dir().mkdir("40");  // no ns/net (gone)

  const auto servers = scan_listeners(f.root(), {8080, 443});
  const std::vector<ListeningServer> expected = {
      {100, 443, 12, 1},
      {100, 8080, 11, 3},  // two IPv4 and one IPv6 LISTEN socket
      {200, 8080, 20, 1},  // the same inode number in another namespace's file is its own socket
  };
  EXPECT_EQ(servers, expected);
}

TEST(ScanListeners, ANamespaceIsReadThroughAnyOfItsProcesses) {
  ScanFixture f;
  f.process(10, 100, {});               // its net/tcp unreadable (absent)
  f.process(11, 100, {31005}, kTcp);    // read through this one
  const auto servers = scan_listeners(f.root(), {443});
  ASSERT_EQ(servers.size(), 1u);
  EXPECT_EQ(servers[0], (ListeningServer{100, 443, 11, 1}));
}

TEST(ScanListeners, ASocketWhoseHolderCannotBeReadHasPidZero) {
  ScanFixture f;
  f.process(10, 100, {}, kTcp);  // nobody holds 31005 that the scan can read
  const auto servers = scan_listeners(f.root(), {443});
  ASSERT_EQ(servers.size(), 1u);
  EXPECT_EQ(servers[0], (ListeningServer{100, 443, 0, 1}));
}

TEST(ScanListeners, NothingWithoutPortsOrProcesses) {
  ScanFixture f;
  f.process(10, 100, {31001}, kTcp);
  EXPECT_TRUE(scan_listeners(f.root(), {}).empty());
  EXPECT_TRUE(scan_listeners(f.root() + "/nope", {8080}).empty());
}

}  // namespace
}  // namespace headroom::probes
