// SPDX-License-Identifier: Apache-2.0
// The Envoy overload-manager bridge: which number is published, how it is
// clamped and formatted, and that every update reaches Envoy the one way it
// listens for (IN_MOVED_TO on the file's name in the parent directory).
#include "publishers/envoy_bridge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "temp_dir.h"

namespace headroom::publishers {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

orca::Report make_report(double app, double cpu, double mem, const std::map<std::string, double>& utilization) {
  orca::Report r;
  r.set_application_utilization(app);
  r.set_cpu_utilization(cpu);
  r.set_mem_utilization(mem);
  for (const auto& [k, v] : utilization) (*r.mutable_utilization())[k] = v;
  return r;
}

// What Envoy does with the file's bytes (absl::SimpleAtod: surrounding ASCII
// whitespace stripped, the rest must be one number), then its range check.
std::optional<double> envoy_parse(const std::string& text) {
  std::size_t b = 0, e = text.size();
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (b < e && space(text[b])) ++b;
  while (e > b && space(text[e - 1])) --e;
  if (b == e) return std::nullopt;
  const std::string core = text.substr(b, e - b);
  char* end = nullptr;
  const double v = std::strtod(core.c_str(), &end);
  if (end != core.c_str() + core.size()) return std::nullopt;
  if (v < 0 || v > 1) return std::nullopt;  // "pressure out of range"
  return v;
}

// ---------------------------------------------------------------------------
// Value names

TEST(EnvoyValue, EveryConfigValueParsesAndRoundTrips) {
  for (const char* name : {"application_utilization", "cpu_utilization", "mem_utilization", "utilization.cpu",
                           "utilization.memory", "utilization.cpu.pressure", "utilization.memory.pressure",
                           "utilization.io.pressure"}) {
    // What the configuration accepts, the bridge understands.
    auto parsed = agent::parse_config(std::string("[[envoy]]\nfile = \"/run/e/p\"\nvalue = \"") + name + "\"\n", "t");
    ASSERT_TRUE(parsed.ok()) << name;
    auto v = parse_envoy_value(parsed.value().envoy.at(0).value);
    ASSERT_TRUE(v.has_value()) << name;
    EXPECT_EQ(envoy_value_name(*v), name);
  }
  EXPECT_EQ(parse_envoy_value("utilization.cpu.pressure"),
            (EnvoyValue{EnvoyValue::Kind::utilization, "cpu.pressure"}));
  for (const char* bad : {"", "utilization", "utilization.", "cpu", "Application_utilization", " cpu_utilization"})
    EXPECT_FALSE(parse_envoy_value(bad).has_value()) << '"' << bad << '"';
}

// ---------------------------------------------------------------------------
// Selection and clamping

struct SelectCase {
  const char* name;
  orca::Report report;
  const char* value;
  double neutral;
  double expected;
};

void PrintTo(const SelectCase& c, std::ostream* os) { *os << c.name; }

class EnvoySelect : public ::testing::TestWithParam<SelectCase> {};

TEST_P(EnvoySelect, PublishesTheClampedValueOrTheNeutralOne) {
  const SelectCase& c = GetParam();
  const auto value = parse_envoy_value(c.value);
  ASSERT_TRUE(value);
  const double p = envoy_pressure(select_envoy_value(c.report, *value), c.neutral);
  EXPECT_EQ(p, c.expected);
  EXPECT_FALSE(std::signbit(p));
}

const orca::Report kFull = make_report(0.42, 0.3, 0.6, {{"cpu", 0.3}, {"memory", 0.6}, {"cpu.pressure", 0.1}, {"io.pressure", 0.0}});
const orca::Report kOverloaded = make_report(1.7, 2.5, 0.2, {{"cpu", 1.0}, {"memory", 0.2}});
const orca::Report kEmpty;
const orca::Report kNanReport = make_report(kNan, kNan, kNan, {{"cpu", kNan}, {"memory", kNan}});
const orca::Report kNegative = make_report(-0.5, -0.2, -0.0, {{"cpu", -0.2}, {"memory", -0.0}});
const orca::Report kInfinite = make_report(kInf, kInf, 0.5, {{"cpu", kInf}, {"memory", 0.5}, {"io.pressure", -kInf}});
// Fields set without their utilization entries: headroom never writes such a
// report, and the bridge treats the numbers as absent (proto3 has no presence).
const orca::Report kNoSignals = make_report(0.9, 0.8, 0.7, {});

const SelectCase kSelectCases[] = {
    {"App", kFull, "application_utilization", 0.3, 0.42},
    {"Cpu", kFull, "cpu_utilization", 0.3, 0.3},
    {"Mem", kFull, "mem_utilization", 0.3, 0.6},
    {"UtilizationKey", kFull, "utilization.cpu.pressure", 0.3, 0.1},
    {"UtilizationZeroIsNotAbsent", kFull, "utilization.io.pressure", 0.3, 0.0},
    {"UtilizationMissingKey", kFull, "utilization.memory.pressure", 0.3, 0.3},
    {"AppAboveOne", kOverloaded, "application_utilization", 0.0, 1.0},
    {"CpuAboveOne", kOverloaded, "cpu_utilization", 0.0, 1.0},
    {"UtilizationCpuAtOne", kOverloaded, "utilization.cpu", 0.0, 1.0},
    {"MemBelowOne", kOverloaded, "mem_utilization", 0.0, 0.2},
    {"EmptyApp", kEmpty, "application_utilization", 0.25, 0.25},
    {"EmptyCpu", kEmpty, "cpu_utilization", 0.25, 0.25},
    {"EmptyMem", kEmpty, "mem_utilization", 0.25, 0.25},
    {"EmptyUtilization", kEmpty, "utilization.cpu", 0.25, 0.25},
    {"NanApp", kNanReport, "application_utilization", 0.05, 0.05},
    {"NanCpu", kNanReport, "cpu_utilization", 0.05, 0.05},
    {"NanMem", kNanReport, "mem_utilization", 0.05, 0.05},
    {"NanUtilization", kNanReport, "utilization.memory", 0.05, 0.05},
    {"NegativeApp", kNegative, "application_utilization", 0.5, 0.0},
    {"NegativeCpu", kNegative, "cpu_utilization", 0.5, 0.0},
    {"NegativeZeroMem", kNegative, "mem_utilization", 0.5, 0.0},
    {"NegativeUtilization", kNegative, "utilization.cpu", 0.5, 0.0},
    {"InfApp", kInfinite, "application_utilization", 0.0, 1.0},
    {"InfCpu", kInfinite, "cpu_utilization", 0.0, 1.0},
    {"MinusInfUtilization", kInfinite, "utilization.io.pressure", 0.5, 0.0},
    {"NoSignalsApp", kNoSignals, "application_utilization", 0.1, 0.1},
    {"NoSignalsCpu", kNoSignals, "cpu_utilization", 0.1, 0.1},
    {"NoSignalsMem", kNoSignals, "mem_utilization", 0.1, 0.1},
};

INSTANTIATE_TEST_SUITE_P(Table, EnvoySelect, ::testing::ValuesIn(kSelectCases),
                         [](const ::testing::TestParamInfo<SelectCase>& p) { return std::string(p.param.name); });

// ---------------------------------------------------------------------------
// Formatting

TEST(EnvoyFormat, Examples) {
  EXPECT_EQ(format_envoy_pressure(0.734512), "0.734512\n");
  EXPECT_EQ(format_envoy_pressure(0.05), "0.05\n");
  EXPECT_EQ(format_envoy_pressure(0.5), "0.5\n");
  EXPECT_EQ(format_envoy_pressure(0.0), "0\n");
  EXPECT_EQ(format_envoy_pressure(-0.0), "0\n");
  EXPECT_EQ(format_envoy_pressure(1.0), "1\n");
  EXPECT_EQ(format_envoy_pressure(0.1234567), "0.123457\n");  // rounded to 6 decimals
  EXPECT_EQ(format_envoy_pressure(0.9999996), "1\n");
  EXPECT_EQ(format_envoy_pressure(1e-300), "0\n");             // no exponent, ever
  EXPECT_EQ(format_envoy_pressure(4.9e-324), "0\n");
  EXPECT_EQ(format_envoy_pressure(1e-6), "0.000001\n");
  // Outside the contract, still a valid file for Envoy.
  EXPECT_EQ(format_envoy_pressure(7.0), "1\n");
  EXPECT_EQ(format_envoy_pressure(-3.0), "0\n");
  EXPECT_EQ(format_envoy_pressure(kNan), "0\n");
}

TEST(EnvoyFormat, AlwaysAPlainDecimalEnvoyAccepts) {
  std::vector<double> values = {0.0, -0.0, 1.0, 1e-7, 4e-7, 5e-7, 6e-7, 0.9999994, 0.9999995, 0.9999999,
                                std::nextafter(1.0, 0.0), std::nextafter(0.0, 1.0), std::numeric_limits<double>::min(),
                                0.1, 0.2, 0.3, 1.0 / 3.0, 2.0 / 3.0};
  for (int i = 0; i <= 1000; ++i) values.push_back(i / 1000.0);
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < 5000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values.push_back(static_cast<double>(x >> 11) / 9007199254740992.0);  // [0, 1)
  }
  for (double v : values) {
    const std::string s = format_envoy_pressure(v);
    SCOPED_TRACE(::testing::Message() << "value " << v << " -> \"" << s << "\"");
    ASSERT_TRUE(s.ends_with('\n'));
    const std::string core = s.substr(0, s.size() - 1);
    ASSERT_FALSE(core.empty());
    EXPECT_EQ(core.find_first_not_of("0123456789."), std::string::npos);  // no exponent, sign or space
    if (const auto dot = core.find('.'); dot != std::string::npos) {
      EXPECT_LE(core.size() - dot - 1, 6u);
      EXPECT_NE(core.back(), '0');
    }
    char* end = nullptr;
    const double back = std::strtod(s.c_str(), &end);
    EXPECT_EQ(end, s.c_str() + core.size());  // strtod takes all but the newline
    EXPECT_GE(back, 0.0);
    EXPECT_LE(back, 1.0);
    EXPECT_NEAR(back, v, 5e-7 + 1e-12);
    const auto envoy = envoy_parse(s);
    ASSERT_TRUE(envoy.has_value());
    EXPECT_EQ(*envoy, back);
  }
}

// ---------------------------------------------------------------------------
// The file: replaced by rename, seen by inotify exactly as Envoy watches it

struct DirEvent {
  std::uint32_t mask;
  std::string name;
};

class DirWatch {
 public:
  explicit DirWatch(const std::string& dir) {
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    // Everything, like Envoy's watcher once did, so a stray in-place write shows.
    if (fd_ >= 0) wd_ = ::inotify_add_watch(fd_, dir.c_str(), IN_ALL_EVENTS);
  }
  ~DirWatch() {
    if (fd_ >= 0) ::close(fd_);
  }
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;
  bool ok() const { return fd_ >= 0 && wd_ >= 0; }

  // The events queued so far (inotify queues them during the system call).
  std::vector<DirEvent> drain() {
    std::vector<DirEvent> out;
    alignas(inotify_event) char buf[64 * 1024];
    for (;;) {
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      for (std::size_t off = 0; off < static_cast<std::size_t>(n);) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
        out.push_back({e->mask, e->len > 0 ? std::string(e->name) : std::string()});
        off += sizeof(inotify_event) + e->len;
      }
    }
    return out;
  }

 private:
  int fd_ = -1;
  int wd_ = -1;
};

int count(const std::vector<DirEvent>& events, std::uint32_t mask, const std::string& name) {
  int n = 0;
  for (const auto& e : events)
    if ((e.mask & mask) != 0 && e.name == name) ++n;
  return n;
}

EnvoyBridge must_open(EnvoyBridgeOptions options) {
  auto b = EnvoyBridge::open(std::move(options));
  if (!b) throw std::runtime_error(b.error().message);
  return std::move(b.value());
}

TEST(EnvoyBridgeFile, EveryUpdateIsARenameOntoTheName) {
  TempDir tmp(testing::tmpfs_base());
  const std::string dir = tmp / "run/envoy";  // missing: open creates it
  const std::string file = dir + "/node.pressure";
  EnvoyBridge bridge = must_open({file, *parse_envoy_value("application_utilization"), 0.05, false});
  ASSERT_TRUE(std::filesystem::is_directory(dir));

  DirWatch watch(dir);
  ASSERT_TRUE(watch.ok());
  ino_t previous_inode = 0;
  for (int i = 0; i < 25; ++i) {
    const double app = i * 0.07;  // crosses 1.0 on the way
    ASSERT_TRUE(bridge.publish(make_report(app, 0.1, 0.2, {{"cpu", 0.1}})));
    const auto events = watch.drain();
    EXPECT_EQ(count(events, IN_MOVED_TO, "node.pressure"), 1) << "update " << i;
    // Never written in place: Envoy would not notice, and a reader could see a torn value.
    EXPECT_EQ(count(events, IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_OPEN, "node.pressure"), 0) << "update " << i;
    EXPECT_EQ(testing::read_file(file), format_envoy_pressure(std::min(app, 1.0)));
    struct stat st{};
    ASSERT_EQ(::stat(file.c_str(), &st), 0);
    EXPECT_NE(st.st_ino, previous_inode);  // a new file each time
    EXPECT_EQ(st.st_mode & 0777, 0644u);
    previous_inode = st.st_ino;
    watch.drain();  // our own read (IN_OPEN, IN_CLOSE_NOWRITE) is not the writer's doing
  }
  // Nothing but the file is left behind.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"node.pressure"});
}

TEST(EnvoyBridgeFile, NeutralIsWrittenOnStop) {
  TempDir tmp(testing::tmpfs_base());
  const std::string file = tmp / "node.pressure";
  EnvoyBridge bridge = must_open({file, *parse_envoy_value("utilization.cpu"), 0.05, false});
  DirWatch watch(tmp.path());
  ASSERT_TRUE(bridge.publish(make_report(0.9, 0.9, 0.1, {{"cpu", 0.93}})));
  EXPECT_EQ(testing::read_file(file), "0.93\n");
  ASSERT_TRUE(bridge.publish_neutral());
  EXPECT_EQ(testing::read_file(file), "0.05\n");
  EXPECT_EQ(envoy_parse(testing::read_file(file)), 0.05);
  EXPECT_EQ(count(watch.drain(), IN_MOVED_TO, "node.pressure"), 2);
  // An absent value is the neutral one too.
  ASSERT_TRUE(bridge.publish(make_report(0.9, 0.9, 0.1, {{"memory", 0.1}})));
  EXPECT_EQ(testing::read_file(file), "0.05\n");
}

TEST(EnvoyBridgeFile, RecreatesARemovedDirectory) {
  TempDir tmp(testing::tmpfs_base());
  const std::string dir = tmp / "envoy";
  EnvoyBridge bridge = must_open({dir + "/p", {}, 0.0, false});
  ASSERT_TRUE(bridge.write_pressure(0.5));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(bridge.write_pressure(0.25));
  EXPECT_EQ(testing::read_file(dir + "/p"), "0.25\n");
}

TEST(EnvoyBridgeFile, RemovesOnlyItsOwnStaleTemporaries) {
  TempDir tmp;
  for (const char* name : {".node.pressure.12345.tmp", ".node.pressure.x.tmp", ".other.1.tmp", "node.pressure.9.tmp"})
    tmp.write(name, "x");
  EnvoyBridge bridge = must_open({tmp / "node.pressure", {}, 0.0, false});
  EXPECT_FALSE(std::filesystem::exists(tmp / ".node.pressure.12345.tmp"));
  for (const char* kept : {".node.pressure.x.tmp", ".other.1.tmp", "node.pressure.9.tmp"})
    EXPECT_TRUE(std::filesystem::exists(tmp / kept)) << kept;
}

TEST(EnvoyBridgeFile, OpenErrorsSayWhat) {
  TempDir tmp;
  tmp.write("plain", "x");
  auto under_file = EnvoyBridge::open({tmp / "plain/sub/p", {}, 0.0, false});
  ASSERT_FALSE(under_file);
  EXPECT_THAT(under_file.error().message, HasSubstr(tmp / "plain"));
  EXPECT_FALSE(EnvoyBridge::open({"relative/p", {}, 0.0, false}));
  EXPECT_FALSE(EnvoyBridge::open({tmp / "dir/", {}, 0.0, false}));
  EXPECT_FALSE(EnvoyBridge::open({tmp / "p", {}, 1.5, false}));
  EXPECT_FALSE(EnvoyBridge::open({tmp / "p", {}, kNan, false}));
}

// ---------------------------------------------------------------------------
// examples/envoy/envoy.yaml: Envoy is not packaged for Debian 12, so the
// example cannot be run here. This checks that it is YAML, that its overload
// manager is wired as docs/envoy.md says, and that it watches the file the
// example headroom.toml writes.

std::string example_bridge_file() {
  std::istringstream in(testing::read_file(std::string(HEADROOM_SOURCE_DIR) + "/examples/headroom.toml"));
  const std::string prefix = "# file = \"";
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(prefix) && line.ends_with('"')) return line.substr(prefix.size(), line.size() - prefix.size() - 1);
  return {};
}

constexpr const char* kCheckEnvoyYaml = R"PY(
import sys
try:
    import yaml
except ImportError:
    sys.exit(77)
doc = yaml.safe_load(open(sys.argv[1]))
static = doc["static_resources"]
assert static["listeners"] and static["clusters"], "static listener and cluster"
om = doc["overload_manager"]
monitor = "envoy.resource_monitors.injected_resource"
mons = [m for m in om["resource_monitors"] if m["name"] == monitor]
assert len(mons) == 1, "one injected_resource monitor"
tc = mons[0]["typed_config"]
assert tc["@type"] == "type.googleapis.com/envoy.extensions.resource_monitors.injected_resource.v3.InjectedResourceConfig", tc["@type"]
actions = {a["name"]: a for a in om["actions"]}
for a in actions.values():
    for t in a["triggers"]:
        assert t["name"] == monitor, t
        assert ("threshold" in t) != ("scaled" in t), t
        if "scaled" in t:
            s = t["scaled"]
            assert 0 <= s["scaling_threshold"] < s["saturation_threshold"] <= 1, s
        else:
            assert 0 <= t["threshold"]["value"] <= 1, t
rt = actions["envoy.overload_actions.reduce_timeouts"]
assert rt["triggers"][0]["scaled"] == {"scaling_threshold": 0.6, "saturation_threshold": 0.9}, rt
assert rt["typed_config"]["@type"] == "type.googleapis.com/envoy.config.overload.v3.ScaleTimersOverloadActionConfig"
assert rt["typed_config"]["timer_scale_factors"], rt
sar = actions["envoy.overload_actions.stop_accepting_requests"]
assert sar["triggers"][0]["threshold"]["value"] == 0.98, sar
print(tc["filename"])
)PY";

TEST(EnvoyExample, YamlIsWiredToTheExampleBridgeFile) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 not installed";
  TempDir tmp;
  const std::string script = tmp.write("check.py", kCheckEnvoyYaml);
  const std::string out = tmp / "out";
  const std::string yaml = std::string(HEADROOM_SOURCE_DIR) + "/examples/envoy/envoy.yaml";
  const std::string cmd = "/usr/bin/python3 '" + script + "' '" + yaml + "' >'" + out + "' 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "python3-yaml (Debian) not installed";
  ASSERT_EQ(WEXITSTATUS(status), 0) << testing::read_file(out);
  std::string filename = testing::read_file(out);
  while (filename.ends_with('\n')) filename.pop_back();
  const std::string expected = example_bridge_file();
  ASSERT_FALSE(expected.empty()) << "no '# file = \"...\"' line in examples/headroom.toml";
  EXPECT_EQ(filename, expected);
  // The README's snippet names the same file.
  EXPECT_THAT(testing::read_file(std::string(HEADROOM_SOURCE_DIR) + "/examples/envoy/README.md"), HasSubstr(expected));
}

}  // namespace
}  // namespace headroom::publishers
