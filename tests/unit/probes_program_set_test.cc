// SPDX-License-Identifier: Apache-2.0
// The eBPF program sets (probes/program_set.h): the names HEADROOM_EBPF_PROGRAMS
// and the probe's options accept, the rows, and the choice among them for
// each kind of kernel and endpoints, as a table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <bpf/btf.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "probes/endpoint_probe.h"
#include "probes/kernel_features.h"
#include "probes/program_set.h"

namespace headroom::probes {
namespace {

using ::testing::HasSubstr;

TEST(ProgramSet, EveryNameParsesBackToItsSet) {
  for (const ProgramSet set : {ProgramSet::automatic, ProgramSet::sockets, ProgramSet::syscalls, ProgramSet::raw,
                               ProgramSet::send_length, ProgramSet::socket_reads}) {
    const auto parsed = parse_program_set(program_set_name(set));
    ASSERT_TRUE(parsed.ok()) << program_set_name(set);
    EXPECT_EQ(*parsed, set);
  }
  EXPECT_EQ(program_set_name(ProgramSet::automatic), "auto");
  EXPECT_EQ(program_set_name(ProgramSet::sockets), "sockets");
  EXPECT_EQ(program_set_name(ProgramSet::syscalls), "syscalls");
  EXPECT_EQ(program_set_name(ProgramSet::raw), "raw");
  EXPECT_EQ(program_set_name(ProgramSet::send_length), "send-length");
  EXPECT_EQ(program_set_name(ProgramSet::socket_reads), "socket-reads");
}

TEST(ProgramSet, EmptyIsAutomatic) {
  const auto parsed = parse_program_set("");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, ProgramSet::automatic);
}

TEST(ProgramSet, UnknownNamesAreRefusedWithTheChoices) {
  for (const std::string_view name : {"Sockets", "syscall", "raw_tp", "tp_btf", " raw", "automatic"}) {
    const auto parsed = parse_program_set(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.error().code, EINVAL);
    EXPECT_THAT(parsed.error().message, HasSubstr(std::string(name)));
    EXPECT_THAT(parsed.error().message,
                HasSubstr("auto, sockets, syscalls, raw, or send-length or socket-reads for dependencies"));
  }
}

TEST(ProgramSet, OptionsDefaultToAutomatic) { EXPECT_EQ(EndpointProbeOptions{}.programs, ProgramSet::automatic); }

// {sk_data_ready, tcp_sendmsg_locked, sock_send_length, rdonly_cast, current_task_btf}
constexpr KernelFeatures kKernel611{true, true, true, true, true};     // every socket tracepoint
constexpr KernelFeatures kKernel66{true, false, true, true, true};     // sk_data_ready and sock_send_length
constexpr KernelFeatures kKernel63{false, false, true, true, true};    // sock_send_length only
constexpr KernelFeatures kKernel62{false, false, false, true, true};   // no socket tracepoint
constexpr KernelFeatures kKernel61{false, false, false, false, true};  // no bpf_rdonly_cast (5.11 to 6.1)
constexpr KernelFeatures kKernel510{false, false, false, false, false};  // neither (5.5 to 5.10)
constexpr PortNeeds kNoBytes{false, false};
constexpr PortNeeds kSomeBytes{true, false};
constexpr PortNeeds kAllBytes{true, true};

constexpr std::string_view kSockets = "tp_btf sockets";
constexpr std::string_view kBoth = "tp_btf sockets + syscalls";
constexpr std::string_view kBtf = "tp_btf syscalls";
constexpr std::string_view kRaw = "raw_tp syscalls";
constexpr std::string_view kSendLength = "tp_btf sockets, send length";
constexpr std::string_view kSocketReads = "tp_btf syscalls, socket reads";
constexpr std::string_view kSendLengthWhy = "needs sock:sk_data_ready and sock:sock_send_length (kernel 6.6+); ";
constexpr std::string_view kHttp2Why = "a dependency speaks HTTP/2, whose frames it does not see; ";
constexpr std::string_view kKernelWhy = "needs sock:sk_data_ready and tcp:tcp_sendmsg_locked (kernel 6.11+); ";
constexpr std::string_view kBytesWhy = "an endpoint has a path or protocol = \"http2\"; ";
constexpr std::string_view kBtfWhy = "needs the kfunc bpf_rdonly_cast (kernel 6.2+); ";
constexpr std::string_view kTaskWhy = "needs the helper bpf_get_current_task_btf (kernel 5.11+); ";

// One row of a plan table: Needs is what the probe's configuration asks of
// the programs (the endpoints' PortNeeds; for dependencies, whether one is
// HTTP/2).
template <class Needs>
struct PlanCaseOf {
  const char* what;
  ProgramSet choice;
  Needs needs;
  KernelFeatures kernel;
  std::vector<std::string_view> tries;
  std::string skipped;
};
using PlanCase = PlanCaseOf<PortNeeds>;

std::string why(std::string_view kind, std::string_view reason) {
  return std::string(kind) + ": " + std::string(reason);
}

// The plan tries `tries` in that order and says `skipped` of the others.
void expect_plan(const ProgramSetPlan& plan, const std::vector<std::string_view>& tries, const std::string& skipped,
                 const char* what) {
  std::vector<std::string_view> kinds;
  for (const ProgramSetRow* row : plan.tries) kinds.push_back(row->kind);
  EXPECT_EQ(kinds, tries) << what;
  EXPECT_EQ(plan.skipped, skipped) << what;
  EXPECT_EQ(plan.skipped_err, skipped.empty() ? 0 : ENOTSUP) << what;
}

TEST(ProgramSetPlan, TriesTheRowsThatFitBestFirst) {
  const std::vector<PlanCase> cases{
      {"auto, 6.11, no path: sockets alone, both sets are not needed", ProgramSet::automatic, kNoBytes, kKernel611,
       {kSockets, kBtf, kRaw}, ""},
      {"auto, 6.11, a path on one port: both sets", ProgramSet::automatic, kSomeBytes, kKernel611,
       {kBoth, kBtf, kRaw}, why(kSockets, kBytesWhy)},
      {"auto, 6.11, a path on every port: the syscall set alone", ProgramSet::automatic, kAllBytes, kKernel611,
       {kBtf, kRaw}, why(kSockets, kBytesWhy)},
      {"auto, 6.6: no socket set", ProgramSet::automatic, kNoBytes, kKernel66, {kBtf, kRaw},
       why(kSockets, kKernelWhy) + why(kBoth, kKernelWhy)},
      {"auto, 6.2, a path", ProgramSet::automatic, kSomeBytes, kKernel62, {kBtf, kRaw},
       why(kSockets, kKernelWhy) + why(kBoth, kKernelWhy)},
      {"auto, 6.1: the raw set, the BTF one skipped before loading", ProgramSet::automatic, kSomeBytes, kKernel61,
       {kRaw}, why(kSockets, kKernelWhy) + why(kBoth, kKernelWhy) + why(kBtf, kBtfWhy)},
      {"syscalls, 5.10, every port a path", ProgramSet::syscalls, kAllBytes, kKernel510, {kRaw}, why(kBtf, kBtfWhy)},
      {"sockets, 6.11", ProgramSet::sockets, kNoBytes, kKernel611, {kSockets}, ""},
      {"sockets, 6.11, a path: nothing fits", ProgramSet::sockets, kSomeBytes, kKernel611, {},
       why(kSockets, kBytesWhy)},
      {"sockets, 6.6: nothing fits", ProgramSet::sockets, kNoBytes, kKernel66, {}, why(kSockets, kKernelWhy)},
      {"syscalls, 6.11", ProgramSet::syscalls, kNoBytes, kKernel611, {kBtf, kRaw}, ""},
      {"syscalls, 6.2, every port a path", ProgramSet::syscalls, kAllBytes, kKernel62, {kBtf, kRaw}, ""},
      {"raw", ProgramSet::raw, kSomeBytes, kKernel611, {kRaw}, ""},
      {"send-length: a dependency set, none of the endpoints'", ProgramSet::send_length, kNoBytes, kKernel611, {},
       "send-length: a dependency program set, endpoints have none (auto, sockets, syscalls or raw); "},
      {"socket-reads: a dependency set, none of the endpoints'", ProgramSet::socket_reads, kNoBytes, kKernel62, {},
       "socket-reads: a dependency program set, endpoints have none (auto, sockets, syscalls or raw); "},
  };
  for (const auto& c : cases) expect_plan(plan_program_sets(c.choice, c.needs, c.kernel), c.tries, c.skipped, c.what);
}

TEST(ProgramSetPlan, EachPortGoesToTheSetThatCanMeasureIt) {
  struct Case {
    std::string_view kind;
    bool needs_bytes;
    uint32_t set;
  };
  const std::vector<Case> cases{
      {kSockets, false, HR_SET_SOCKETS}, {kBoth, false, HR_SET_SOCKETS}, {kBoth, true, HR_SET_SYSCALLS},
      {kBtf, false, HR_SET_SYSCALLS},    {kBtf, true, HR_SET_SYSCALLS},  {kRaw, false, HR_SET_SYSCALLS},
      {kRaw, true, HR_SET_SYSCALLS},
  };
  for (const auto& c : cases) {
    const auto& rows = program_set_rows();
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const ProgramSetRow& r) { return r.kind == c.kind; });
    ASSERT_NE(row, rows.end()) << c.kind;
    EXPECT_EQ(port_set(*row, c.needs_bytes), c.set) << c.kind << (c.needs_bytes ? ", a port with a path" : "");
  }
}

TEST(ProgramSetRows, AreConsistent) {
  std::set<std::string_view> kinds;
  for (const auto& row : program_set_rows()) {
    EXPECT_TRUE(kinds.insert(row.kind).second) << "two rows named " << row.kind;
    EXPECT_TRUE(row.sockets || row.syscalls) << row.kind;
    EXPECT_NE(row.offered & (1u << static_cast<unsigned>(ProgramSet::automatic)), 0u) << row.kind << ": not in auto";
    // Which ports a row takes follows from its sets.
    const PortsTaken expected = row.sockets && row.syscalls ? PortsTaken::split
                                : row.sockets               ? PortsTaken::without_bytes
                                                            : PortsTaken::every;
    EXPECT_EQ(row.ports, expected) << row.kind;
    // The socket programs' requests are read after the refresh program runs.
    const bool refresh = std::find(row.programs.begin(), row.programs.end(), kSockRefresh) != row.programs.end();
    EXPECT_EQ(refresh, row.sockets) << row.kind;
    EXPECT_EQ(row.kernel_fits == nullptr, row.kernel_needs.empty()) << row.kind << ": a check says what it needs";
  }
  for (const ProgramSet set : {ProgramSet::automatic, ProgramSet::sockets, ProgramSet::syscalls, ProgramSet::raw})
    EXPECT_FALSE(plan_program_sets(set, kNoBytes, kKernel611).tries.empty()) << program_set_name(set);
}

TEST(ProgramSetRows, NameOnlyProgramsOfTheObject) {
  const auto programs = EndpointProbe::object_programs();
  ASSERT_TRUE(programs.ok()) << programs.error().message;
  const std::set<std::string> in_object(programs->begin(), programs->end());
  EXPECT_GE(in_object.size(), 8u);
  std::set<std::string> named;
  for (const auto& row : program_set_rows()) {
    for (const std::string_view p : row.programs)
      if (!p.empty()) named.emplace(p);
    if (!row.arrival.empty()) named.emplace(row.arrival);
  }
  for (const auto& p : named) EXPECT_TRUE(in_object.count(p)) << p << " is in a row, not in endpoint.bpf.c";
  for (const auto& p : in_object) EXPECT_TRUE(named.count(p)) << p << " of endpoint.bpf.c is in no row";
}

// The dependency probe's rows: the socket set where the kernel has it, else
// the syscall set (BTF, socket reads, raw); HTTP/2 with each, the socket
// reads and raw programs of the HTTP/2 kind.
TEST(DependencySetPlan, TriesTheRowsThatFitBestFirst) {
  const std::vector<PlanCaseOf<bool>> cases{
      {"auto, 6.11", ProgramSet::automatic, false, kKernel611,
       {kSockets, kSendLength, kBtf, kSocketReads, kRaw}, ""},
      {"auto, 6.11, http2: not the send-length set", ProgramSet::automatic, true, kKernel611,
       {kSockets, kBtf, kSocketReads, kRaw}, why(kSendLength, kHttp2Why)},
      {"auto, 6.6: the send-length set", ProgramSet::automatic, false, kKernel66,
       {kSendLength, kBtf, kSocketReads, kRaw}, why(kSockets, kKernelWhy)},
      {"auto, 6.6, http2: the syscall set", ProgramSet::automatic, true, kKernel66, {kBtf, kSocketReads, kRaw},
       why(kSockets, kKernelWhy) + why(kSendLength, kHttp2Why)},
      {"auto, 6.3: the syscall set", ProgramSet::automatic, false, kKernel63, {kBtf, kSocketReads, kRaw},
       why(kSockets, kKernelWhy) + why(kSendLength, kSendLengthWhy)},
      {"auto, 6.2, http2: the syscall set", ProgramSet::automatic, true, kKernel62, {kBtf, kSocketReads, kRaw},
       why(kSockets, kKernelWhy) + why(kSendLength, kSendLengthWhy)},
      {"auto, 6.1: socket reads, then raw", ProgramSet::automatic, false, kKernel61, {kSocketReads, kRaw},
       why(kSockets, kKernelWhy) + why(kSendLength, kSendLengthWhy) + why(kBtf, kBtfWhy)},
      {"auto, 6.1, http2: socket reads, then raw, of the HTTP/2 kind", ProgramSet::automatic, true, kKernel61,
       {kSocketReads, kRaw}, why(kSockets, kKernelWhy) + why(kSendLength, kSendLengthWhy) + why(kBtf, kBtfWhy)},
      {"auto, 5.10: raw, the others skipped before loading, each said once", ProgramSet::automatic, true, kKernel510,
       {kRaw},
       why(kSockets, kKernelWhy) + why(kSendLength, kSendLengthWhy) + why(kBtf, kBtfWhy) +
           why(kSocketReads, kTaskWhy)},
      {"syscalls, 5.10", ProgramSet::syscalls, false, kKernel510, {kRaw},
       why(kBtf, kBtfWhy) + why(kSocketReads, kTaskWhy)},
      {"socket-reads, 5.10: nothing fits", ProgramSet::socket_reads, false, kKernel510, {},
       why(kSocketReads, kTaskWhy)},
      {"sockets, 6.11", ProgramSet::sockets, false, kKernel611, {kSockets, kSendLength}, ""},
      {"sockets, 6.6: the send-length set", ProgramSet::sockets, false, kKernel66, {kSendLength},
       why(kSockets, kKernelWhy)},
      {"sockets, 6.6, http2: nothing fits", ProgramSet::sockets, true, kKernel66, {},
       why(kSockets, kKernelWhy) + why(kSendLength, kHttp2Why)},
      {"send-length, 6.11", ProgramSet::send_length, false, kKernel611, {kSendLength}, ""},
      {"send-length, 6.3: nothing fits", ProgramSet::send_length, false, kKernel63, {},
       why(kSendLength, kSendLengthWhy)},
      {"syscalls, 6.11", ProgramSet::syscalls, false, kKernel611, {kBtf, kSocketReads, kRaw}, ""},
      {"syscalls, http2", ProgramSet::syscalls, true, kKernel611, {kBtf, kSocketReads, kRaw}, ""},
      {"socket-reads, 6.1", ProgramSet::socket_reads, false, kKernel61, {kSocketReads}, ""},
      {"socket-reads, http2", ProgramSet::socket_reads, true, kKernel611, {kSocketReads}, ""},
      {"raw, http2", ProgramSet::raw, true, kKernel611, {kRaw}, ""},
      {"raw, 5.10", ProgramSet::raw, false, kKernel510, {kRaw}, ""},
  };
  for (const auto& c : cases) expect_plan(plan_dependency_sets(c.choice, c.needs, c.kernel), c.tries, c.skipped, c.what);
}

// The socket reads and raw tracepoint programs come twice: the plan holds
// those with the HTTP/2 walk (bpf_loop, 5.17+) only when a dependency speaks
// HTTP/2, so that the others still load from 5.11 and 5.5.
TEST(DependencySetPlan, TakesTheProgramsWithTheHttp2WalkOnlyForHttp2) {
  for (const bool http2 : {false, true}) {
    auto plan = plan_dependency_sets(ProgramSet::raw, http2, kKernel510);
    ASSERT_EQ(plan.tries.size(), 1u) << http2;
    EXPECT_EQ(plan.tries[0]->programs[0], http2 ? "hr_dep_raw_h2_sys_exit" : "hr_dep_raw_sys_exit");
    EXPECT_EQ(plan.tries[0]->programs[1], http2 ? "hr_dep_raw_h2_sys_state" : "hr_dep_raw_sys_state");
    plan = plan_dependency_sets(ProgramSet::socket_reads, http2, kKernel61);
    ASSERT_EQ(plan.tries.size(), 1u) << http2;
    EXPECT_EQ(plan.tries[0]->programs[0], http2 ? "hr_dep_task_h2_sys_exit" : "hr_dep_task_sys_exit");
    EXPECT_EQ(plan.tries[0]->programs[1], http2 ? "hr_dep_raw_h2_sys_state" : "hr_dep_raw_sys_state");
  }
}

TEST(DependencySetRows, AreConsistent) {
  for (const auto& row : dependency_set_rows()) {
    EXPECT_NE(row.sockets, row.syscalls) << row.kind << ": one set per row";
    EXPECT_EQ(row.kernel_fits == nullptr, row.kernel_needs.empty()) << row.kind << ": a check says what it needs";
    EXPECT_NE(row.offered & (1u << static_cast<unsigned>(ProgramSet::automatic)), 0u) << row.kind << ": not in auto";
    for (const std::string_view p : row.programs) {
      if (!p.empty()) {
        EXPECT_TRUE(p.starts_with("hr_dep_")) << p << ": not a dependency program";
      }
    }
    // The syscall rows: those with bpf_rdonly_cast share the socket set's
    // arrival program, the others have none (kernels < 6.2 lack it, and
    // sk_data_ready with it).
    EXPECT_EQ(row.arrival.empty(), row.sockets || row.kind != kBtf) << row.kind;
  }
}

// kernel_features_of: the tracepoints by their btf_trace_ typedefs, the
// kfunc by its FUNC, the helper by its name in enum bpf_func_id, on BTF
// built here: each feature there or not, and a name elsewhere not taken
// for it.
TEST(KernelFeatures, AreReadFromTheKernelsBtf) {
  const auto make = [] { return std::unique_ptr<btf, decltype(&btf__free)>(btf__new_empty(), btf__free); };
  const auto int_type = [](btf* b) { return btf__add_int(b, "int", 4, BTF_INT_SIGNED); };

  auto b = make();
  ASSERT_NE(b, nullptr);
  const int i = int_type(b.get());
  ASSERT_GT(btf__add_typedef(b.get(), "btf_trace_sk_data_ready", i), 0);
  ASSERT_GT(btf__add_typedef(b.get(), "btf_trace_sock_send_length", i), 0);
  ASSERT_GT(btf__add_enum(b.get(), "bpf_func_id", 4), 0);
  ASSERT_EQ(btf__add_enum_value(b.get(), "BPF_FUNC_unspec", 0), 0);
  ASSERT_EQ(btf__add_enum_value(b.get(), "BPF_FUNC_get_current_task_btf", 158), 0);
  // Another kfunc, and bpf_rdonly_cast's name as a typedef, not a function.
  const int proto = btf__add_func_proto(b.get(), i);
  ASSERT_GT(btf__add_func(b.get(), "bpf_cast_to_kern_ctx", BTF_FUNC_STATIC, proto), 0);
  ASSERT_GT(btf__add_typedef(b.get(), "bpf_rdonly_cast", i), 0);
  KernelFeatures k = kernel_features_of(b.get());
  EXPECT_TRUE(k.sk_data_ready);
  EXPECT_FALSE(k.tcp_sendmsg_locked);
  EXPECT_TRUE(k.sock_send_length);
  EXPECT_FALSE(k.rdonly_cast);
  EXPECT_TRUE(k.current_task_btf);

  b = make();
  const int j = int_type(b.get());
  ASSERT_GT(btf__add_typedef(b.get(), "btf_trace_tcp_sendmsg_locked", j), 0);
  ASSERT_GT(btf__add_func(b.get(), "bpf_rdonly_cast", BTF_FUNC_STATIC, btf__add_func_proto(b.get(), j)), 0);
  // The helper's name in another enum.
  ASSERT_GT(btf__add_enum(b.get(), "bpf_cmd", 4), 0);
  ASSERT_EQ(btf__add_enum_value(b.get(), "BPF_FUNC_get_current_task_btf", 158), 0);
  ASSERT_GT(btf__add_enum(b.get(), "bpf_func_id", 4), 0);
  ASSERT_EQ(btf__add_enum_value(b.get(), "BPF_FUNC_get_current_task", 35), 0);
  k = kernel_features_of(b.get());
  EXPECT_FALSE(k.sk_data_ready);
  EXPECT_TRUE(k.tcp_sendmsg_locked);
  EXPECT_FALSE(k.sock_send_length);
  EXPECT_TRUE(k.rdonly_cast);
  EXPECT_FALSE(k.current_task_btf);
}

// The running kernel's, against bpftool's dump of the same BTF (an
// independent reader of it).
TEST(KernelFeatures, OfTheRunningKernelAreWhatBpftoolSees) {
  const char* vmlinux = "/sys/kernel/btf/vmlinux";
  const char* bpftool = ::access("/usr/sbin/bpftool", X_OK) == 0 ? "/usr/sbin/bpftool" : "/sbin/bpftool";
  if (::access(vmlinux, R_OK) != 0 || ::access(bpftool, X_OK) != 0) {
    if (std::getenv("CI") != nullptr) FAIL() << vmlinux << " or bpftool is missing";
    GTEST_SKIP() << "SKIPPED: needs " << vmlinux << " (a kernel with BTF) and bpftool";
  }
  std::string dump;
  const std::string cmd = std::string(bpftool) + " btf dump file " + vmlinux;
  FILE* f = ::popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) dump.append(buf, n);
  ASSERT_EQ(::pclose(f), 0) << cmd;
  ASSERT_GT(dump.size(), 100000u);
  const auto has = [&](const std::string& text) { return dump.find(text) != std::string::npos; };
  const auto k = running_kernel_features();
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_EQ(k->sk_data_ready, has("TYPEDEF 'btf_trace_sk_data_ready'"));
  EXPECT_EQ(k->tcp_sendmsg_locked, has("TYPEDEF 'btf_trace_tcp_sendmsg_locked'"));
  EXPECT_EQ(k->sock_send_length, has("TYPEDEF 'btf_trace_sock_send_length'"));
  EXPECT_EQ(k->rdonly_cast, has("FUNC 'bpf_rdonly_cast'"));
  EXPECT_EQ(k->current_task_btf, has("'BPF_FUNC_get_current_task_btf'"));
}

}  // namespace
}  // namespace headroom::probes
