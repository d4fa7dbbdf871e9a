// SPDX-License-Identifier: Apache-2.0
// probes/own_pid.h: the self link's text, a kernel thread's stat line, the
// choice between them on literal readings, a fixture proc tree of symlinks,
// and the real /proc (headroomd in a PID namespace of its own against the
// real kernel is tests/pidns/pidns_test.py).
#include "probes/own_pid.h"

#include <unistd.h>

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace headroom::probes {
namespace {

using headroom::testing::TempDir;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

constexpr const char* kInitNs = "pid:[4026531836]";
constexpr const char* kKthreadd = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 27 0 0";
constexpr const char* kShell = "2 (sh) S 1 2 2 34816 2 4194560 120 0 0 0 0 0 0 0 20 0 1 0 900 0 0";

// ---------------------------------------------------------- parse_self_link

struct LinkCase {
  const char* name;
  const char* text;
  pid_t pid;  // 0: an error
};

const std::vector<LinkCase> kLinkCases = {
    {"plain", "4242", 4242},
    {"one", "1", 1},
    {"largest", "4194304", 4194304},
    {"empty", "", 0},
    {"zero", "0", 0},
    {"negative", "-5", 0},
    {"plus", "+5", 0},
    {"trailing", "42x", 0},
    {"space", " 42", 0},
    {"newline", "42\n", 0},
    {"self", "self", 0},
    {"namespace", "pid:[4026531836]", 0},
    {"overflow", "99999999999", 0},
};

void PrintTo(const LinkCase& c, std::ostream* os) { *os << c.name; }

class SelfLink : public ::testing::TestWithParam<LinkCase> {};

TEST_P(SelfLink, Parses) {
  const auto& c = GetParam();
  auto pid = parse_self_link(c.text);
  if (c.pid == 0) {
    ASSERT_FALSE(pid.ok()) << c.text;
    EXPECT_EQ(pid.error().message, "the link reads \"" + std::string(c.text) + "\", not a PID");
  } else {
    ASSERT_TRUE(pid.ok()) << pid.error().message;
    EXPECT_EQ(*pid, c.pid);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, SelfLink, ::testing::ValuesIn(kLinkCases),
                         [](const auto& row) { return std::string(row.param.name); });

// ---------------------------------------------------- is_kernel_thread_stat

TEST(KernelThreadStat, TheFlagsField) {
  EXPECT_TRUE(is_kernel_thread_stat(kKthreadd));
  EXPECT_FALSE(is_kernel_thread_stat(kShell));
  // The name may hold spaces and parentheses.
  EXPECT_TRUE(is_kernel_thread_stat("2 (a (b) c) S 0 0 0 0 -1 2097152 0"));
  EXPECT_FALSE(is_kernel_thread_stat("2 (a (b) 2097152) S 0 0 0 0 -1 64 0"));
  for (const char* bad : {"", "2 kthreadd S 0 0 0 0 -1 2129984", "2 (kthreadd) S 0 0 0 0 -1", "2 (k) S 0 0 0 0 -1 x"})
    EXPECT_FALSE(is_kernel_thread_stat(bad)) << bad;
}

// ---------------------------------------------------------- resolve_own_pid

Result<std::string> text(const char* s) { return std::string(s); }
Result<std::string> denied(const std::string& what) { return system_error(EACCES, what); }

struct ResolveCase {
  const char* name;
  Result<std::string> self_link, own_ns, pid2_stat;
  pid_t pid;
  const char* warning;  // "": none; else a part of it
};

const std::vector<ResolveCase> kResolveCases = {
    // The node's /proc, the agent on the node: its namespace is the initial one.
    {"host", text("4242"), text(kInitNs), text(kKthreadd), 4242, ""},
    // The node's /proc in a pod: the agent's namespace is the pod's, the
    // procfs shows kthreadd.
    {"pod_node_proc", text("4242"), text("pid:[4026532500]"), text(kKthreadd), 4242, ""},
    // Its own namespace is the initial one: no need for PID 2.
    {"host_no_pid2", text("4242"), text(kInitNs), denied("read /p/2/stat"), 4242, ""},
    // The pod's own /proc: PID 2 is one of the pod's processes.
    {"pod_own_proc", text("7"), text("pid:[4026532500]"), text(kShell), 7,
     "/p is the procfs of a PID namespace other than the kernel's initial one"},
    {"pod_no_pid2", text("7"), text("pid:[4026532500]"), denied("read /p/2/stat"), 7,
     "not the one the kernel sees"},
    {"ns_unreadable", text("7"), denied("readlink /p/self/ns/pid"), text(kShell), 7, "set agent.proc_root"},
    // No self link: a tree that is not a procfs, or one that does not show this process.
    {"no_self", denied("readlink /p/self"), text(kInitNs), text(kKthreadd), 99,
     "cannot take this process's PID from /p/self (readlink /p/self: Permission denied): getpid() (99)"},
    {"bad_self", text("self"), text(kInitNs), text(kKthreadd), 99,
     "/p/self: the link reads \"self\", not a PID (is /p a procfs?): getpid() (99) is taken instead"},
};

void PrintTo(const ResolveCase& c, std::ostream* os) { *os << c.name; }

class ResolveOwnPid : public ::testing::TestWithParam<ResolveCase> {};

TEST_P(ResolveOwnPid, Decides) {
  const auto& c = GetParam();
  const OwnPid own = resolve_own_pid("/p", {c.self_link, c.own_ns, c.pid2_stat}, 99);
  EXPECT_EQ(own.pid, c.pid);
  if (std::string(c.warning).empty()) {
    EXPECT_EQ(own.warning, "");
  } else {
    EXPECT_TRUE(contains(own.warning, c.warning)) << own.warning;
    EXPECT_TRUE(contains(own.warning, "set agent.proc_root (--proc-root) to a mount of the node's /proc"))
        << own.warning;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, ResolveOwnPid, ::testing::ValuesIn(kResolveCases),
                         [](const auto& row) { return std::string(row.param.name); });

// ------------------------------------------------------------------ own_pid

TEST(OwnPid, FixtureProcTree) {
  TempDir dir;
  dir.mkdir("4242/ns");
  dir.mkdir("2");
  std::filesystem::create_symlink("4242", dir / "self");
  std::filesystem::create_symlink("pid:[4026532500]", dir / "4242/ns/pid");
  dir.write("2/stat", std::string(kKthreadd) + "\n");
  OwnPid own = own_pid(dir.path());
  EXPECT_EQ(own.pid, 4242);
  EXPECT_EQ(own.warning, "");

  dir.write("2/stat", std::string(kShell) + "\n");
  own = own_pid(dir.path());
  EXPECT_EQ(own.pid, 4242);
  EXPECT_TRUE(contains(own.warning, dir.path() + " is the procfs of a PID namespace other than")) << own.warning;
}

TEST(OwnPid, FixtureWithoutSelfTakesGetpidAndSaysWhere) {
  TempDir dir;
  const OwnPid own = own_pid(dir.path());
  EXPECT_EQ(own.pid, ::getpid());
  EXPECT_TRUE(contains(own.warning, "readlink " + dir.path() + "/self: No such file or directory")) << own.warning;
}

TEST(OwnPid, RealProcIsGetpidOutsideAPidNamespace) {
  const OwnPid own = own_pid("/proc");
  std::error_code ec;
  const auto ns = std::filesystem::read_symlink("/proc/self/ns/pid", ec);
  ASSERT_FALSE(ec) << ec.message();
  // In a PID namespace of its own (unshare --pid) /proc may be the node's:
  // then it is the "Pid:" /proc numbers this process by, not getpid().
  const std::string status = testing::read_file("/proc/self/status");
  const size_t at = status.find("\nPid:\t");
  ASSERT_NE(at, std::string::npos) << status;
  EXPECT_EQ(own.pid, std::stoi(status.substr(at + 6)));
  if (ns == kInitNs) {
    EXPECT_EQ(own.pid, ::getpid());
    EXPECT_EQ(own.warning, "");
  }
}

}  // namespace
}  // namespace headroom::probes
