// SPDX-License-Identifier: Apache-2.0
// The configuration layer: defaults, every key, every class of error with its
// place in the file, the duration syntax, and the shipped example.
#include "agent/config/config.h"
#include "config_cases.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace headroom::agent {
namespace {

using namespace headroom::agent::config_cases;

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using std::chrono::nanoseconds;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// ---------------------------------------------------------------------------
// Defaults and values

TEST(ConfigDefaults, StructDefaultsAreTheDocumentedOnes) {
  const Config c;
  EXPECT_EQ(c.interval, 100ms);
  EXPECT_EQ(c.smoothing, 500ms);
  EXPECT_EQ(c.orca_dir, "/run/orca");
  EXPECT_EQ(c.proc_root, "/proc");
  EXPECT_EQ(c.sys_root, "/sys");
  EXPECT_EQ(c.log_level, LogLevel::info);
  EXPECT_FALSE(c.fsync);
  EXPECT_EQ(c.cgroup, "");
  EXPECT_EQ(c.cgroup_version, probes::CgroupVersion::automatic);
  EXPECT_EQ(c.signals, (std::vector<std::string>{"cpu", "memory", "cpu.pressure", "memory.pressure", "io.pressure"}));
  EXPECT_EQ(c.composite, CompositeMethod::max);
  EXPECT_TRUE(c.weights.empty());
}

TEST(ConfigDefaults, EmptyTextGivesDefaults) {
  EXPECT_EQ(must_parse(""), Config{});
  EXPECT_EQ(must_parse("# only a comment\n\n"), Config{});
  EXPECT_EQ(must_parse("[agent]\n[node]\n[node.weights]\n"), Config{});
}

TEST(ConfigValues, EveryKeySet) {
  const Config c = must_parse(R"(
[agent]
interval = "250ms"
smoothing = "0s"
orca_dir = "/var/run/orca-test"
proc_root = "/host/proc"
sys_root = "/host/sys"
log_level = "debug"
fsync = true

[node]
cgroup = "system.slice/api.service"
cgroup_version = 2
signals = ["memory", "cpu"]
composite = "mean"

[node.weights]
cpu = 0.5
memory = 0
"io.pressure" = 0.25
)");
  EXPECT_EQ(c.interval, 250ms);
  EXPECT_EQ(c.smoothing, 0s);
  EXPECT_EQ(c.orca_dir, "/var/run/orca-test");
  EXPECT_EQ(c.proc_root, "/host/proc");
  EXPECT_EQ(c.sys_root, "/host/sys");
  EXPECT_EQ(c.log_level, LogLevel::debug);
  EXPECT_TRUE(c.fsync);
  EXPECT_EQ(c.cgroup, "system.slice/api.service");
  EXPECT_EQ(c.cgroup_version, probes::CgroupVersion::v2);
  EXPECT_EQ(c.signals, (std::vector<std::string>{"memory", "cpu"}));
  EXPECT_EQ(c.composite, CompositeMethod::mean);
  EXPECT_EQ(c.weights, (std::map<std::string, double>{{"cpu", 0.5}, {"memory", 0.0}, {"io.pressure", 0.25}}));
}

TEST(ConfigValues, AlternativeSpellings) {
  EXPECT_EQ(must_parse("node.cgroup_version = 1").cgroup_version, probes::CgroupVersion::v1);
  EXPECT_EQ(must_parse("node.cgroup_version = \"auto\"").cgroup_version, probes::CgroupVersion::automatic);
  // Inline tables and dotted keys are the same tables.
  EXPECT_EQ(must_parse("agent = { interval = \"1s\" }").interval, 1s);
  EXPECT_EQ(must_parse("agent.interval = \"2s\"").interval, 2s);
  EXPECT_EQ(must_parse("[agent]\ninterval = \"1h\"").interval, 1h);
  EXPECT_EQ(must_parse("[agent]\ninterval = \"10ms\"").interval, 10ms);
}

TEST(ConfigValues, CgroupPathIsNormalized) {
  EXPECT_EQ(must_parse("[node]\ncgroup = \"/system.slice/a.service\"").cgroup, "system.slice/a.service");
  EXPECT_EQ(must_parse("[node]\ncgroup = \"system.slice/a.service/\"").cgroup, "system.slice/a.service");
  EXPECT_EQ(must_parse("[node]\ncgroup = \"/\"").cgroup, "");
  EXPECT_EQ(must_parse("[node]\ncgroup = \"a..b/c\"").cgroup, "a..b/c");  // only ".." components are refused
}

TEST(ConfigValues, WeightsAndSignals) {
  const Config c = must_parse("[node]\nsignals = [\"cpu\", \"io.pressure\"]\n[node.weights]\ncpu = 1\n\"io.pressure\" = 0.5\n");
  EXPECT_TRUE(c.signal_enabled("cpu"));
  EXPECT_TRUE(c.signal_enabled("io.pressure"));
  EXPECT_FALSE(c.signal_enabled("memory"));
  EXPECT_FALSE(c.signal_enabled("nonsense"));
  EXPECT_DOUBLE_EQ(c.weight("cpu"), 1.0);
  EXPECT_DOUBLE_EQ(c.weight("io.pressure"), 0.5);
  EXPECT_DOUBLE_EQ(c.weight("memory"), 1.0);  // missing = 1
  // Weight 1 is the default and is not stored, so equality stays semantic.
  EXPECT_EQ(c.weights.count("cpu"), 0u);
  EXPECT_EQ(must_parse("[node.weights]\ncpu = 1.0\nmemory = 1"), Config{});
  // A weight for a signal that is not enabled is allowed (toggling signals
  // should not force editing weights).
  EXPECT_DOUBLE_EQ(must_parse("[node]\nsignals = [\"cpu\"]\n[node.weights]\nmemory = 0.1").weight("memory"), 0.1);
}

TEST(ConfigEnvoy, ParsesEntriesWithDefaultsAndNormalizedFiles) {
  const Config c = must_parse(R"(
[[envoy]]
scope = "node"
value = "utilization.cpu.pressure"
file = "/run/orca/envoy/node.pressure"
neutral = 0.05

[[envoy]]
file = "/run//envoy/./other/../cpu"
neutral = 1
)");
  ASSERT_EQ(c.envoy.size(), 2u);
  EXPECT_EQ(c.envoy[0], (EnvoyBridgeConfig{"node", "utilization.cpu.pressure", "/run/orca/envoy/node.pressure", 0.05}));
  // Omitted keys take their defaults; the path is stored lexically normal.
  EXPECT_EQ(c.envoy[1], (EnvoyBridgeConfig{"node", "application_utilization", "/run/envoy/cpu", 1.0}));
  EXPECT_TRUE(Config{}.envoy.empty());
  EXPECT_EQ(must_parse("envoy = []\n"), Config{});
  // The inline form is the same array of tables.
  EXPECT_EQ(must_parse("envoy = [{ file = \"/run/e/p\", value = \"cpu_utilization\" }]\n").envoy,
            (std::vector<EnvoyBridgeConfig>{{"node", "cpu_utilization", "/run/e/p", 0.0}}));
}

TEST(ConfigEnvoy, EveryValueIsAccepted) {
  for (const char* value : {"application_utilization", "cpu_utilization", "mem_utilization", "utilization.cpu",
                            "utilization.memory", "utilization.cpu.pressure", "utilization.memory.pressure",
                            "utilization.io.pressure"}) {
    const Config c = must_parse(std::string("[[envoy]]\nfile = \"/run/e/p\"\nvalue = \"") + value + "\"\n");
    ASSERT_EQ(c.envoy.size(), 1u) << value;
    EXPECT_EQ(c.envoy[0].value, value);
  }
  // application_utilization needs no particular signal.
  EXPECT_EQ(must_parse("[node]\nsignals = [\"io.pressure\"]\n[[envoy]]\nfile = \"/run/e/p\"\n").envoy.size(), 1u);
}

TEST(ConfigEnvoy, ReloadSeesAChangedEntry) {
  // SIGHUP compares whole Configs; an [[envoy]] change must count.
  EXPECT_NE(must_parse("[[envoy]]\nfile = \"/run/e/p\"\n"), must_parse("[[envoy]]\nfile = \"/run/e/p\"\nneutral = 0.1\n"));
}

TEST(ConfigValues, LaterErrorsDoNotHideEarlierOnes) {
  // All errors are found; the first in file order is reported.
  const Error e = must_fail("[node]\ncomposite = \"median\"\n[agent]\ninterval = 5\n");
  EXPECT_EQ(e.key, "node.composite");
  EXPECT_EQ(e.line, 2);
}

// ---------------------------------------------------------------------------
// Errors: key, place and message

class ConfigErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ConfigErrors, ReportsKeyPlaceAndMessage) {
  const ErrorCase& c = GetParam();
  expect_error_case(c);
}

// "[[envoy]]" entries, n of them, two lines each.
std::string envoy_entries(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += "[[envoy]]\nfile = \"/run/e/p" + std::to_string(i) + "\"\n";
  return out;
}

// n "127.0.0.1:PPPP" addresses: 16 bytes each, 18 with the ", " between them.
std::string oob_addresses(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += (i ? ", " : "") + std::string("\"127.0.0.1:") + std::to_string(9000 + i) + "\"";
  return out;
}

// An absolute path of `bytes` bytes made of 100-byte components.
std::string long_path(std::size_t bytes) {
  std::string p;
  while (p.size() < bytes) p += "/" + std::string(99, 'd');
  return p.substr(0, bytes);
}

const ErrorCase kErrorCases[] = {
    // Bounds that would hurt: paths the files below them cannot fit in, too
    // many bridges to rewrite every interval.
    {"OrcaDirTooLong", "[agent]\norca_dir = \"" + long_path(3841) + "\"\n", "agent.orca_dir", 2, 12,
     {"3841 bytes long; at most 3840"}},
    {"OrcaDirComponentTooLong", "[agent]\norca_dir = \"/run/" + std::string(256, 'x') + "\"\n", "agent.orca_dir", 2, 12,
     {"a component of 256 bytes", "at most 255"}},
    {"ProcRootTooLong", "[agent]\nproc_root = \"" + long_path(5000) + "\"\n", "agent.proc_root", 2, 13,
     {"5000 bytes long"}},
    {"EnvoyFileDirComponentTooLong", "[[envoy]]\nfile = \"/" + std::string(300, 'e') + "/p\"\n", "envoy[0].file", 2, 8,
     {"a component of 300 bytes"}},
    {"TextfileTooLong", "[prometheus]\ntextfile = \"" + long_path(4000) + ".prom\"\n", "prometheus.textfile", 2, 12,
     {"bytes long; at most 3840"}},
    {"EnvoyTooManyEntries", envoy_entries(65), "envoy[64]", 129, 1, {"at most 64 [[envoy]] entries"}},
    {"OobMaxStreamsZero", "[oob]\nmax_streams = 0\n", "oob.max_streams", 2, 15, {"must be from 1 to 100000, got 0"}},
    {"OobMaxStreamsHuge", "[oob]\nmax_streams = 1000000000\n", "oob.max_streams", 2, 15, {"got 1000000000"}},
    {"TextfileIntervalTooShort", "[prometheus]\ntextfile_interval = \"1ms\"\n", "prometheus.textfile_interval", 2, 21,
     {"must be at least \"100ms\""}},
    {"PrometheusPortZero", "[prometheus]\nlisten = \"127.0.0.1:0\"\n", "prometheus.listen", 2, 10,
     {"must be a number from 1 to 65535"}},
    {"OobPortZero", "[oob]\nlisten = [\"127.0.0.1:0\"]\n", "oob.listen[0]", 2, 11, {"from 1 to 65535"}},
    {"OobInstanceListenUnix", "[oob]\ninstance_listen = \"unix:/run/orca/oob.sock\"\n", "oob.instance_listen", 2, 19,
     {"a unix socket's path is not in a network namespace", "\"0.0.0.0:9447\""}},
    {"OobInstanceListenNoPort", "[oob]\ninstance_listen = \"0.0.0.0\"\n", "oob.instance_listen", 2, 19,
     {"an IP address and a port", "9447"}},
    {"OobTooManyListeners", "[oob]\nlisten = [" + oob_addresses(17) + "]\n", "oob.listen[16]", 2, 11 + 16 * 18,
     {"is address number 17; at most 16 are supported"}},

    // Syntax: toml++'s description and place.
    {"SyntaxUnclosedHeader", "[agent\ninterval = \"1s\"\n", "", 1, 7, {"TOML syntax error", "]"}},
    {"SyntaxMissingValue", "[agent]\ninterval =\n", "", 2, 11, {"TOML syntax error"}},
    {"SyntaxDuplicateKey", "[agent]\nfsync = true\nfsync = false\n", "", 3, 9, {"TOML syntax error", "fsync"}},

    // Unknown keys and tables, with the nearest valid key.
    {"UnknownAgentKey", "[agent]\nintervall = \"1s\"\n", "agent.intervall", 2, 1,
     {"unknown key \"intervall\" in [agent]; did you mean \"interval\"?"}},
    {"UnknownNodeKey", "[node]\n  signal = [\"cpu\"]\n", "node.signal", 2, 3,
     {"unknown key \"signal\" in [node]; did you mean \"signals\"?"}},
    {"UnknownKeyCaseOnly", "[agent]\nFsync = true\n", "agent.Fsync", 2, 1, {"did you mean \"fsync\"?"}},
    {"UnknownKeyNothingClose", "[agent]\ncolour = \"red\"\n", "agent.colour", 2, 1,
     {"unknown key \"colour\" in [agent]", "valid keys in [agent] are interval, smoothing, orca_dir"}},
    {"UnknownTopTable", "[agnet]\ninterval = \"1s\"\n", "agnet", 1, 2, {"unknown table [agnet]; did you mean [agent]?"}},
    {"UnknownTopKey", "version = 3\n", "version", 1, 1, {"unknown key \"version\" at the top level", "agent, node"}},
    {"KeyAboveFirstHeader", "interval = \"1s\"\n[agent]\n", "interval", 1, 1,
     {"\"interval\" belongs in [agent]", "above the first [table] header"}},
    {"KeyInWrongTable", "[agent]\ncgroup = \"a.service\"\n", "agent.cgroup", 2, 1, {"\"cgroup\" belongs in [node]"}},
    {"UnknownSubtable", "[node.weight]\ncpu = 0.5\n", "node.weight", 1, 7,
     {"unknown table [node.weight]; did you mean [node.weights]?"}},
    {"WeightsTableAtTop", "[weights]\ncpu = 0.5\n", "weights", 1, 2, {"did you mean [node.weights]?"}},
    {"UnknownWeightKey", "[node.weights]\ncpu_pressure = 0.5\n", "node.weights.cpu_pressure", 2, 1,
     {"unknown key \"cpu_pressure\" in [node.weights]; did you mean \"cpu.pressure\"?"}},
    {"UnknownWeightKeyNothingClose", "[node.weights]\ndisk = 0.5\n", "node.weights.disk", 2, 1,
     {"valid keys in [node.weights] are cpu, memory, cpu.pressure"}},
    {"UnquotedDottedWeight", "[node.weights]\ncpu = 0.5\nio.pressure = 0.5\n", "node.weights.\"io.pressure\"", 3, 1,
     {"quote the key", "\"io.pressure\" = <weight>"}},

    // Wrong types, with toml++'s type names and the value.
    {"IntervalInteger", "[agent]\ninterval = 100\n", "agent.interval", 2, 12,
     {"expected a duration string such as \"100ms\", got integer 100"}},
    {"SmoothingFloat", "[agent]\nsmoothing = 1.5\n", "agent.smoothing", 2, 13, {"got floating-point 1.5"}},
    {"FsyncString", "[agent]\nfsync = \"yes\"\n", "agent.fsync", 2, 9,
     {"expected a boolean (true or false), got string \"yes\""}},
    {"OrcaDirInteger", "[agent]\norca_dir = 5\n", "agent.orca_dir", 2, 12, {"expected an absolute path string", "got integer 5"}},
    {"LogLevelArray", "[agent]\nlog_level = [\"info\"]\n", "agent.log_level", 2, 13, {"got array"}},
    {"AgentNotTable", "agent = 5\n", "agent", 1, 9, {"expected a table ([agent]), got integer 5"}},
    {"NodeArrayOfTables", "[[node]]\ncgroup = \"\"\n", "node", 1, 1, {"expected a table", "got array"}},
    {"SignalsString", "[node]\nsignals = \"cpu\"\n", "node.signals", 2, 11, {"expected an array of signal names", "got string \"cpu\""}},
    {"SignalElementInteger", "[node]\nsignals = [\"cpu\", 1]\n", "node.signals[1]", 2, 19,
     {"expected a signal name string", "got integer 1"}},
    {"WeightString", "[node.weights]\ncpu = \"0.5\"\n", "node.weights.cpu", 2, 7,
     {"expected a number (a fraction in [0, 1]), got string \"0.5\""}},
    {"WeightsNotTable", "[node]\nweights = 1\n", "node.weights", 2, 11, {"expected a table ([node.weights])"}},
    {"CgroupVersionFloat", "[node]\ncgroup_version = 2.0\n", "node.cgroup_version", 2, 18,
     {"expected \"auto\", 1 or 2, got floating-point 2.0"}},
    {"CgroupInteger", "[node]\ncgroup = 1\n", "node.cgroup", 2, 10, {"got integer 1"}},
    {"CompositeBool", "[node]\ncomposite = true\n", "node.composite", 2, 13, {"got boolean true"}},
    {"IntervalDate", "[agent]\ninterval = 2024-01-02\n", "agent.interval", 2, 12, {"got date 2024-01-02"}},

    // Out of range and invalid values.
    {"IntervalZero", "[agent]\ninterval = \"0s\"\n", "agent.interval", 2, 12, {"must be greater than 0", "\"0s\""}},
    {"IntervalTooLong", "[agent]\ninterval = \"61m\"\n", "agent.interval", 2, 12, {"must be at most \"1h\""}},
    {"IntervalNegative", "[agent]\ninterval = \"-1s\"\n", "agent.interval", 2, 12,
     {"invalid duration \"-1s\": must not be negative"}},
    {"IntervalSpace", "[agent]\ninterval = \"100 ms\"\n", "agent.interval", 2, 12, {"must not contain spaces", "e.g. \"100ms\""}},
    {"IntervalNoUnit", "[agent]\ninterval = \"100\"\n", "agent.interval", 2, 12, {"has no unit"}},
    {"IntervalBadUnit", "[agent]\ninterval = \"1sec\"\n", "agent.interval", 2, 12,
     {"unknown unit \"sec\"", "ns, us, ms, s, m, h"}},
    {"SmoothingEmpty", "[agent]\nsmoothing = \"\"\n", "agent.smoothing", 2, 13, {"invalid duration \"\": is empty"}},
    {"SmoothingOverflow", "[agent]\nsmoothing = \"9999999999h\"\n", "agent.smoothing", 2, 13, {"too large"}},
    {"OrcaDirEmpty", "[agent]\norca_dir = \"\"\n", "agent.orca_dir", 2, 12, {"must not be empty", "\"/run/orca\""}},
    {"OrcaDirRelative", "[agent]\norca_dir = \"run/orca\"\n", "agent.orca_dir", 2, 12,
     {"must be an absolute path, got \"run/orca\"; write \"/run/orca\""}},
    {"ProcRootRelative", "[agent]\nproc_root = \"proc\"\n", "agent.proc_root", 2, 13, {"must be an absolute path"}},
    {"SysRootEmpty", "[agent]\nsys_root = \"\"\n", "agent.sys_root", 2, 12, {"must not be empty"}},
    {"LogLevelUnknown", "[agent]\nlog_level = \"verbose\"\n", "agent.log_level", 2, 13,
     {"unknown log level \"verbose\"; valid levels are trace, debug, info, warn, error, critical, off"}},
    {"LogLevelUppercase", "[agent]\nlog_level = \"WARN\"\n", "agent.log_level", 2, 13,
     {"did you mean \"warn\"?", "Valid levels are trace"}},
    {"CgroupVersionThree", "[node]\ncgroup_version = 3\n", "node.cgroup_version", 2, 18, {"must be \"auto\", 1 or 2, got integer 3"}},
    {"CgroupVersionString", "[node]\ncgroup_version = \"2\"\n", "node.cgroup_version", 2, 18,
     {"got string \"2\"", "write cgroup_version = 2"}},
    {"CgroupVersionV1", "[node]\ncgroup_version = \"v1\"\n", "node.cgroup_version", 2, 18, {"write cgroup_version = 1"}},
    {"CgroupMountPath", "[node]\ncgroup = \"/sys/fs/cgroup/system.slice/a.service\"\n", "node.cgroup", 2, 10,
     {"is a filesystem path", "e.g. \"system.slice/a.service\""}},
    {"CgroupV1MountPath", "[node]\ncgroup = \"/sys/fs/cgroup/memory/system.slice/a.service\"\n", "node.cgroup", 2, 10,
     {"e.g. \"system.slice/a.service\""}},
    {"CgroupDotDot", "[node]\ncgroup = \"system.slice/../x\"\n", "node.cgroup", 2, 10, {"must not contain \"..\""}},
    {"SignalsEmpty", "[node]\nsignals = []\n", "node.signals", 2, 11, {"at least one signal", "cpu, memory, cpu.pressure"}},
    {"SignalUnknownNear", "[node]\nsignals = [\"cpu\", \"memory_pressure\"]\n", "node.signals[1]", 2, 19,
     {"unknown signal \"memory_pressure\"; did you mean \"memory.pressure\"?"}},
    {"SignalUnknownFar", "[node]\nsignals = [\"disk\"]\n", "node.signals[0]", 2, 12,
     {"unknown signal \"disk\"; valid signals are cpu, memory, cpu.pressure, memory.pressure, io.pressure"}},
    {"SignalDuplicate", "[node]\nsignals = [\"cpu\",\n  \"memory\",\n  \"cpu\"]\n", "node.signals[2]", 4, 3,
     {"duplicate signal \"cpu\" (first listed at line 2, column 12)"}},
    {"CompositeUnknown", "[node]\ncomposite = \"maxx\"\n", "node.composite", 2, 13,
     {"must be \"max\" or \"mean\", got \"maxx\"; did you mean \"max\"?"}},
    {"WeightAboveOne", "[node.weights]\ncpu = 1.5\n", "node.weights.cpu", 2, 7, {"must be a fraction in [0, 1], got 1.5"}},
    {"WeightNegative", "[node.weights]\nmemory = -0.1\n", "node.weights.memory", 2, 10, {"must be a fraction in [0, 1], got -0.1"}},
    {"WeightInteger", "[node.weights]\ncpu = 2\n", "node.weights.cpu", 2, 7, {"must be a fraction in [0, 1], got 2"}},
    {"WeightNan", "[node.weights]\n\"cpu.pressure\" = nan\n", "node.weights.\"cpu.pressure\"", 2, 18,
     {"must be a fraction in [0, 1], got nan"}},
    {"WeightInf", "[node.weights]\ncpu = inf\n", "node.weights.cpu", 2, 7, {"got inf"}},

    // [[envoy]]
    {"EnvoySingleBrackets", "[envoy]\nfile = \"/run/e/p\"\n", "envoy", 1, 1,
     {"expected an array of tables", "write [[envoy]] with two brackets", "got table"}},
    {"EnvoyElementNotTable", "envoy = [1]\n", "envoy[0]", 1, 10, {"expected a table with keys scope, value, file, neutral"}},
    {"EnvoyUnknownKeyNear", "[[envoy]]\nfile = \"/run/e/p\"\nvalu = \"cpu_utilization\"\n", "envoy[0].valu", 3, 1,
     {"unknown key \"valu\" in [[envoy]]; did you mean \"value\"?"}},
    {"EnvoyUnknownKeyFar", "[[envoy]]\nfile = \"/run/e/p\"\ncolour = 1\n", "envoy[0].colour", 3, 1,
     {"valid keys in [[envoy]] are scope, value, file, neutral"}},
    {"EnvoyTopLevelTypo", "[[envoi]]\nfile = \"/run/e/p\"\n", "envoi", 1, 3, {"did you mean \"envoy\"?"}},
    {"EnvoyScopeUnknown", "[[envoy]]\nscope = \"endpoint\"\nfile = \"/run/e/p\"\n", "envoy[0].scope", 2, 9,
     {"unknown scope \"endpoint\"; valid scopes are node", "later"}},
    {"EnvoyScopeNear", "[[envoy]]\nscope = \"nodes\"\nfile = \"/run/e/p\"\n", "envoy[0].scope", 2, 9,
     {"did you mean \"node\"?"}},
    {"EnvoyScopeInteger", "[[envoy]]\nscope = 1\nfile = \"/run/e/p\"\n", "envoy[0].scope", 2, 9,
     {"expected a scope name", "got integer 1"}},
    {"EnvoyValueNear", "[[envoy]]\nvalue = \"memory_utilization\"\nfile = \"/run/e/p\"\n", "envoy[0].value", 2, 9,
     {"unknown value \"memory_utilization\"; did you mean \"mem_utilization\"?"}},
    {"EnvoyValueFar", "[[envoy]]\nvalue = \"load\"\nfile = \"/run/e/p\"\n", "envoy[0].value", 2, 9,
     {"valid values are application_utilization, cpu_utilization, mem_utilization, utilization.cpu"}},
    {"EnvoyValueBareSignal", "[[envoy]]\nvalue = \"io.pressure\"\nfile = \"/run/e/p\"\n", "envoy[0].value", 2, 9,
     {"write \"utilization.io.pressure\""}},
    {"EnvoyValueUnknownSignal", "[[envoy]]\nvalue = \"utilization.io_pressure\"\nfile = \"/run/e/p\"\n",
     "envoy[0].value", 2, 9, {"\"io_pressure\" is not a signal; did you mean \"io.pressure\"?"}},
    {"EnvoyValueFloat", "[[envoy]]\nvalue = 0.5\nfile = \"/run/e/p\"\n", "envoy[0].value", 2, 9,
     {"expected a value name", "got floating-point 0.5"}},
    {"EnvoyValueDisabledSignal", "[node]\nsignals = [\"cpu\"]\n[[envoy]]\nvalue = \"utilization.memory\"\nfile = \"/run/e/p\"\n",
     "envoy[0].value", 4, 9, {"needs the signal \"memory\"", "node.signals does not enable", "neutral value"}},
    {"EnvoyValueDisabledSignalNodeAfter",
     "[[envoy]]\nvalue = \"mem_utilization\"\nfile = \"/run/e/p\"\n[node]\nsignals = [\"cpu\"]\n", "envoy[0].value", 2, 9,
     {"needs the signal \"memory\""}},
    {"EnvoyFileMissing", "[agent]\n[[envoy]]\nvalue = \"cpu_utilization\"\n", "envoy[0].file", 2, 1,
     {"is required", "\"/run/orca/envoy/node.pressure\""}},
    {"EnvoyFileRelative", "[[envoy]]\nfile = \"run/e/p\"\n", "envoy[0].file", 2, 8,
     {"must be an absolute path, got \"run/e/p\"; write \"/run/e/p\""}},
    {"EnvoyFileEmpty", "[[envoy]]\nfile = \"\"\n", "envoy[0].file", 2, 8, {"must not be empty"}},
    {"EnvoyFileInteger", "[[envoy]]\nfile = 3\n", "envoy[0].file", 2, 8, {"expected an absolute path string", "got integer 3"}},
    {"EnvoyFileDirectory", "[[envoy]]\nfile = \"/run/orca/envoy/\"\n", "envoy[0].file", 2, 8, {"must name a file, not a directory"}},
    {"EnvoyFileDotDot", "[[envoy]]\nfile = \"/run/orca/..\"\n", "envoy[0].file", 2, 8, {"must name a file"}},
    {"EnvoyFileHidden", "[[envoy]]\nfile = \"/run/e/.pressure\"\n", "envoy[0].file", 2, 8, {"must not start with \".\""}},
    {"EnvoyFileOrcaSuffix", "[[envoy]]\nfile = \"/run/orca/node.orca\"\n", "envoy[0].file", 2, 8,
     {"reserved for the ORCA report files"}},
    {"EnvoyFileDuplicate", "[[envoy]]\nfile = \"/run/e/p\"\n\n[[envoy]]\nvalue = \"cpu_utilization\"\nfile = \"/run//e/./p\"\n",
     "envoy[1].file", 6, 8, {"duplicate file \"/run/e/p\" (already used by envoy[0] at line 2)", "its own file"}},
    {"EnvoyNeutralAboveOne", "[[envoy]]\nfile = \"/run/e/p\"\nneutral = 1.5\n", "envoy[0].neutral", 3, 11,
     {"must be a fraction in [0, 1], got 1.5"}},
    {"EnvoyNeutralNegative", "[[envoy]]\nfile = \"/run/e/p\"\nneutral = -0.1\n", "envoy[0].neutral", 3, 11, {"got -0.1"}},
    {"EnvoyNeutralInteger", "[[envoy]]\nfile = \"/run/e/p\"\nneutral = 2\n", "envoy[0].neutral", 3, 11, {"got 2"}},
    {"EnvoyNeutralNan", "[[envoy]]\nfile = \"/run/e/p\"\nneutral = nan\n", "envoy[0].neutral", 3, 11, {"got nan"}},
    {"EnvoyNeutralString", "[[envoy]]\nfile = \"/run/e/p\"\nneutral = \"0\"\n", "envoy[0].neutral", 3, 11,
     {"expected a number (a fraction in [0, 1]), got string \"0\""}},
    {"EnvoySecondEntryIndexed", "[[envoy]]\nfile = \"/run/e/a\"\n[[envoy]]\nfile = \"/run/e/b\"\nneutral = 7\n",
     "envoy[1].neutral", 5, 11, {"must be a fraction in [0, 1]"}},
};

INSTANTIATE_TEST_SUITE_P(Table, ConfigErrors, ::testing::ValuesIn(kErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase>& p) { return std::string(p.param.name); });

TEST(ConfigBounds, AtTheLimitsIsAccepted) {
  const Config c = must_parse("[agent]\norca_dir = \"" + long_path(3840) + "\"\n" + envoy_entries(64));
  EXPECT_EQ(c.orca_dir.size(), 3840u);
  EXPECT_EQ(c.envoy.size(), 64u);
  EXPECT_EQ(must_parse("[oob]\nlisten = [" + oob_addresses(16) + "]\n").oob.listen.size(), 16u);
  EXPECT_EQ(must_parse("[oob]\ninstance_listen = \"[::]:9447\"\n").oob.instance_listen, "[::]:9447");
  EXPECT_EQ(must_parse("[oob]\ninstance_listen = \"\"\n").oob.instance_listen, "");
  const Config e = must_parse("[[endpoint]]\nname = \"a\"\nport = 1\ntarget = \"10m\"\nmax = \"10m\"\n");
  EXPECT_EQ(e.endpoints.at(0).max, std::chrono::minutes(10));
}

TEST(ConfigErrorFormat, ToString) {
  const Error e = must_fail("[agent]\ninterval = 100\n");
  EXPECT_EQ(e.to_string(),
            "test.toml:2:12: agent.interval: expected a duration string such as \"100ms\", got integer 100");
  EXPECT_EQ((Error{0, "bad.", "f.toml", 0, 0, "agent.fsync"}).to_string(), "f.toml: agent.fsync: bad.");
  EXPECT_EQ((Error{0, "syntax.", "f.toml", 3, 4, ""}).to_string(), "f.toml:3:4: syntax.");
}

TEST(ConfigErrorFormat, ControlCharactersAreEscaped) {
  const Error e = must_fail("[agent]\nlog_level = \"a\\u0001\\n\"\n");
  EXPECT_THAT(e.message, HasSubstr("\"a\\u0001\\n\""));
}

// ---------------------------------------------------------------------------
// Files

class ConfigFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "headroom-config-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(ConfigFiles, LoadsAFile) {
  const std::string path = write("a.toml", "[agent]\ninterval = \"50ms\"\n");
  auto r = load_config(path);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r.value().interval, 50ms);
}

TEST_F(ConfigFiles, ErrorsNameTheFile) {
  const std::string path = write("bad.toml", "[agent]\nfsync = 1\n");
  auto r = load_config(path);
  ASSERT_TRUE(!r.ok());
  EXPECT_EQ(r.error().file, path);
  EXPECT_THAT(r.error().to_string(), ::testing::StartsWith(path + ":2:9: agent.fsync: "));
}

TEST_F(ConfigFiles, MissingFile) {
  const std::string path = (dir_ / "nope.toml").string();
  auto r = load_config(path);
  ASSERT_TRUE(!r.ok());
  const Error& e = r.error();
  EXPECT_EQ(e.file, path);
  EXPECT_EQ(e.line, 0);
  EXPECT_THAT(e.message, HasSubstr("No such file or directory"));
  EXPECT_THAT(e.message, HasSubstr("create it"));
  EXPECT_THAT(e.message, HasSubstr("--config"));
  EXPECT_THAT(e.to_string(), ::testing::StartsWith(path + ": cannot open configuration file: "));
}

TEST_F(ConfigFiles, UnreadableFile) {
  // A directory opens but cannot be read: EISDIR (works as root too, unlike chmod 000).
  auto r = load_config(dir_.string());
  ASSERT_TRUE(!r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("Is a directory"));
  EXPECT_THAT(r.error().message, HasSubstr("--config"));
}

TEST_F(ConfigFiles, SyntaxErrorInFile) {
  const std::string path = write("syntax.toml", "[node]\nsignals = [\"cpu\"\n");
  auto r = load_config(path);
  ASSERT_TRUE(!r.ok());
  EXPECT_EQ(r.error().file, path);
  EXPECT_GT(r.error().line, 0);
}

// ---------------------------------------------------------------------------
// The shipped example and the documentation

const char* const kAllKeys[] = {"interval",       "smoothing", "orca_dir",  "proc_root", "sys_root", "log_level",
                                "fsync",          "cgroup",    "cgroup_version", "signals", "composite"};

TEST(ConfigExample, ParsesAndEqualsDefaults) {
  const std::string path = std::string(HEADROOM_SOURCE_DIR) + "/examples/headroom.toml";
  auto r = load_config(path);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r.value(), Config{});
}

TEST(ConfigExample, ShowsEveryKey) {
  const std::string text = read_file(std::string(HEADROOM_SOURCE_DIR) + "/examples/headroom.toml");
  for (const char* key : kAllKeys) EXPECT_THAT(text, HasSubstr(std::string("\n") + key + " = ")) << key;
  EXPECT_THAT(text, HasSubstr("\n[node.weights]\n"));
  for (std::string_view signal : kNodeSignals) EXPECT_THAT(text, HasSubstr(std::string(signal))) << signal;
}

// The example shows [[envoy]] commented out (the defaults have no bridge);
// uncommented, the block must parse and show every key with its default.
TEST(ConfigExample, EnvoyBlockUncommentedParses) {
  const std::string text = read_file(std::string(HEADROOM_SOURCE_DIR) + "/examples/headroom.toml");
  const auto start = text.find("\n# [[envoy]]\n");
  ASSERT_NE(start, std::string::npos) << "examples/headroom.toml should show a commented-out [[envoy]] block";
  std::istringstream in(text.substr(start + 1));
  std::string block, line;
  // "# key = ..." becomes "key = ..."; "## note" stays a comment ("# note").
  while (std::getline(in, line) && line.starts_with("#")) block += line.substr(line.starts_with("# ") ? 2 : 1) + "\n";
  for (const char* key : {"scope", "value", "file", "neutral"})
    EXPECT_THAT(block, HasSubstr(std::string("\n") + key + " = ")) << key;
  const Config c = must_parse(block);
  ASSERT_EQ(c.envoy.size(), 1u) << block;
  const EnvoyBridgeConfig defaults;
  EXPECT_EQ(c.envoy[0].scope, defaults.scope);
  EXPECT_EQ(c.envoy[0].value, defaults.value);
  EXPECT_EQ(c.envoy[0].neutral, defaults.neutral);
  EXPECT_EQ(c.envoy[0].file, "/run/orca/envoy/node.pressure");
}

TEST(ConfigDocs, DocumentEveryKeyAndFlag) {
  const std::string text = read_file(std::string(HEADROOM_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_FALSE(text.empty());
  for (const char* key : kAllKeys) EXPECT_THAT(text, HasSubstr(std::string("`") + key + "`")) << key;
  for (std::string_view signal : kNodeSignals) EXPECT_THAT(text, HasSubstr("`" + std::string(signal) + "`")) << signal;
  for (const char* flag : {"--config", "--check-config", "--once", "--orca-dir", "--proc-root", "--sys-root",
                           "--log-level", "SIGHUP", "78", "73"})
    EXPECT_THAT(text, HasSubstr(flag)) << flag;
  EXPECT_THAT(text, HasSubstr("[[envoy]]"));
  for (const char* key : {"scope", "value", "file", "neutral"}) EXPECT_THAT(text, HasSubstr(std::string("`") + key + "`")) << key;
  for (const char* value : {"application_utilization", "cpu_utilization", "mem_utilization", "utilization."})
    EXPECT_THAT(text, HasSubstr(value)) << value;
}

// ---------------------------------------------------------------------------
// Durations

struct GoodDuration {
  const char* text;
  std::int64_t ns;
};

TEST(ConfigDuration, ParsesGoodSyntax) {
  const GoodDuration cases[] = {
      {"0s", 0},
      {"0ns", 0},
      {"1ns", 1},
      {"250us", 250'000},
      {"100ms", 100'000'000},
      {"1s", 1'000'000'000},
      {"1.5s", 1'500'000'000},
      {"0.5ms", 500'000},
      {"1.000s", 1'000'000'000},
      {"007s", 7'000'000'000},
      {"2m", 120'000'000'000},
      {"1.5m", 90'000'000'000},
      {"1h", 3'600'000'000'000},
      {"0.25h", 900'000'000'000},
      {"1.5us", 1'500},
      {"0.000000001s", 1},
      {"9223372036854775807ns", std::numeric_limits<std::int64_t>::max()},
      {"2562047h", 2'562'047LL * 3'600'000'000'000LL},
  };
  for (const auto& c : cases) {
    auto d = parse_duration(c.text);
    ASSERT_TRUE(d.has_value()) << c.text;
    EXPECT_EQ(d->count(), c.ns) << c.text;
  }
}

TEST(ConfigDuration, RejectsBadSyntax) {
  const char* const cases[] = {
      "",        "s",       "ms",     "-1s",  "+1s",    "1",     "100",     "1 s",   " 1s",  "1s ",
      "1.s",     ".5s",     "1x",     "1S",   "1MS",    "1sec",  "1m30s",   "1e3ms", "1.5.5s", "0.1ns",
      "1.5ns",   "0.0000000001s",     "9223372036854775808ns", "2562048h", "99999999999999999999999s",
      "1,5s",    "1_000ms", "infs",   "nans", "1µs",
  };
  for (const char* c : cases) EXPECT_FALSE(parse_duration(c).has_value()) << '"' << c << '"';
}

TEST(ConfigDuration, FormatsShortestExactForm) {
  const std::pair<nanoseconds, const char*> cases[] = {
      {0ns, "0s"},       {1ns, "1ns"},        {250us, "250us"}, {100ms, "100ms"}, {1s, "1s"},
      {1500ms, "1.5s"},  {1250ms, "1.25s"},   {90s, "90s"},     {2min, "2m"},     {1h, "1h"},
      {90min, "90m"},    {1001ms, "1001ms"},  {1500us, "1.5ms"}, {1s + 1ns, "1000000001ns"}, {1s + 10ns, "1.00000001s"},
      {-2s, "-2s"},
  };
  for (const auto& [d, text] : cases) EXPECT_EQ(format_duration(d), text) << d.count();
}

TEST(ConfigDuration, FormatRoundTrips) {
  std::vector<nanoseconds> values = {1ns, 999ns, 1us, 10ms, 100ms, 1s, 1500ms, 59s, 1min, 61min, 1h, 24h,
                                     nanoseconds(std::numeric_limits<std::int64_t>::max())};
  // Plus a deterministic spread of awkward values.
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < 2000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values.emplace_back(static_cast<std::int64_t>(x >> (1 + i % 60)));
  }
  for (nanoseconds d : values) {
    const std::string text = format_duration(d);
    auto back = parse_duration(text);
    ASSERT_TRUE(back.has_value()) << text;
    EXPECT_EQ(*back, d) << text;
  }
}

// ---------------------------------------------------------------------------
// Log levels

TEST(ConfigLogLevel, NamesRoundTrip) {
  for (LogLevel l : {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error,
                     LogLevel::critical, LogLevel::off}) {
    auto back = parse_log_level(log_level_name(l));
    ASSERT_TRUE(back.has_value()) << log_level_name(l);
    EXPECT_EQ(*back, l);
  }
  EXPECT_STREQ(log_level_name(LogLevel::warn), "warn");
  EXPECT_FALSE(parse_log_level("warning").has_value());
  EXPECT_FALSE(parse_log_level("INFO").has_value());
  EXPECT_FALSE(parse_log_level("").has_value());
}

}  // namespace
}  // namespace headroom::agent
