// SPDX-License-Identifier: Apache-2.0
// headroomctl's rendering, fed reports built in the test and a fixed "now":
// the formatting helpers as tables, then whole reports and watch tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "agent/ctl/render.h"
#include "headroom/orca/report.h"

namespace headroom::ctl {
namespace {

constexpr int64_t kNow = 1'700'000'000'123;  // 2023-11-14T22:13:20.123Z

orca::Report make_report(int64_t timestamp_ms, uint64_t seq, int64_t interval_ms,
                         const std::map<std::string, double>& utilization, bool stopped = false) {
  orca::Report r;
  r.set_cpu_utilization(0.632);
  r.set_mem_utilization(0.41);
  r.set_application_utilization(0.7);
  for (const auto& [k, v] : utilization) (*r.mutable_utilization())[k] = v;
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(orca::kTimestampMsKey)] = static_cast<double>(timestamp_ms);
  nm[std::string(orca::kSeqKey)] = static_cast<double>(seq);
  nm[std::string(orca::kIntervalMsKey)] = static_cast<double>(interval_ms);
  if (stopped) nm[std::string(orca::kStoppedKey)] = 1.0;
  return r;
}

orca::Report node_report(int64_t timestamp_ms) {
  auto r = make_report(timestamp_ms, 42, 100, {{"memory", 0.41}, {"cpu", 0.632}, {"io.pressure", 0.05}});
  auto& nm = *r.mutable_named_metrics();
  nm["headroom.cpu.busy"] = 0.5;
  nm["headroom.cpu.saturation"] = 0.132;
  nm["headroom.cpu.capacity"] = 8;
  nm["headroom.memory.used_bytes"] = 512.0 * 1024 * 1024;
  return r;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The first line containing `part`, or "" (so a failing EXPECT shows the text).
std::string line_with(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines)
    if (contains(l, part)) return l;
  return {};
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// ---------------------------------------------------------------- formatting

TEST(CtlFormat, Percent) {
  struct Case {
    double fraction;
    const char* want;
  } cases[] = {
      {0.632, "63.2 %"}, {0.0, "0.0 %"},       {-0.0, "0.0 %"},   {1.0, "100.0 %"},
      {1.5, "150.0 %"},  {0.00049, "0.0 %"},   {0.0005, "0.1 %"}, {0.05, "5.0 %"},
  };
  for (const auto& c : cases) EXPECT_EQ(format_percent(c.fraction), c.want) << c.fraction;
}

TEST(CtlFormat, Age) {
  struct Case {
    int64_t ms;
    const char* want;
  } cases[] = {
      {0, "0.0 s"},           {300, "0.3 s"},          {12'345, "12.3 s"},         {59'900, "59.9 s"},
      {60'000, "1 min 00 s"}, {183'000, "3 min 03 s"}, {3'600'000, "1 h 00 min"}, {7'500'000, "2 h 05 min"},
      {90'000'000, "1 d 01 h"}, {-300, "-0.3 s"},      {-183'000, "-3 min 03 s"},
  };
  for (const auto& c : cases) EXPECT_EQ(format_age(c.ms), c.want) << c.ms;
  EXPECT_FALSE(format_age(std::numeric_limits<int64_t>::min()).empty());  // no overflow
}

TEST(CtlFormat, Mib) {
  struct Case {
    double bytes;
    const char* want;
  } cases[] = {{0, "0.0 MiB"}, {1024.0 * 1024, "1.0 MiB"}, {1.5 * 1024 * 1024, "1.5 MiB"}, {536870912, "512.0 MiB"}};
  for (const auto& c : cases) EXPECT_EQ(format_mib(c.bytes), c.want) << c.bytes;
}

TEST(CtlFormat, Number) {
  struct Case {
    double value;
    const char* want;
  } cases[] = {
      {3, "3"},         {0, "0"},     {-0.0, "0"},          {1'700'000'000'123.0, "1700000000123"},
      {0.125, "0.125"}, {2.5, "2.5"}, {1.5e-7, "1.5e-07"},  {1.0 / 3.0, "0.333333"},
      {-4, "-4"},
  };
  for (const auto& c : cases) EXPECT_EQ(format_number(c.value), c.want) << c.value;
}

TEST(CtlFormat, Utc) {
  EXPECT_EQ(format_utc(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_utc(kNow), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(format_utc(-1), "1969-12-31T23:59:59.999Z");
}

TEST(CtlFormat, NamedMetricByKey) {
  struct Case {
    const char* key;
    double value;
    const char* want;
  } cases[] = {
      {"headroom.memory.used_bytes", 1024.0 * 1024 * 1024, "1024.0 MiB"},
      {"headroom.cpu.busy", 0.5, "50.0 %"},
      {"headroom.cpu.saturation", 0.25, "25.0 %"},
      {"headroom.cpu.capacity", 4, "4"},
      {"headroom.cpu.capacity", 1.5, "1.5"},
      {"headroom.procs_running", 2, "2"},
      {"headroom.seq", 42, "42"},
      {"headroom.timestamp_ms", 1'700'000'000'123.0, "1700000000123 (2023-11-14T22:13:20.123Z)"},
  };
  for (const auto& c : cases) EXPECT_EQ(format_named_metric(c.key, c.value), c.want) << c.key;
}

TEST(CtlFormat, JsonQuote) {
  EXPECT_EQ(json_quote("node.orca"), "\"node.orca\"");
  EXPECT_EQ(json_quote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
}

TEST(CtlFormat, WithoutPath) {
  struct Case {
    const char* message;
    const char* path;
    const char* want;
  } cases[] = {
      {"open /x/n.orca: No such file or directory", "/x/n.orca", "open: No such file or directory"},
      {"/x/n.orca: not a valid xds.data.orca.v3.OrcaLoadReport (3 bytes)", "/x/n.orca",
       "not a valid xds.data.orca.v3.OrcaLoadReport (3 bytes)"},
      {"something else", "/x/n.orca", "something else"},
  };
  for (const auto& c : cases) EXPECT_EQ(without_path(c.message, c.path), c.want) << c.message;
}

TEST(CtlFormat, ScopeOfFileName) {
  struct Case {
    const char* name;
    const char* want;
  } cases[] = {
      {"node.orca", "node"}, {"endpoint.api.orca", "endpoint.api"}, {".node.orca.123.tmp", ""},
      {".node.orca", ""},    {".orca", ""},                         {"node.txt", ""},
      {"node.orca.tmp", ""}, {"", ""},
  };
  for (const auto& c : cases) EXPECT_EQ(scope_of_file_name(c.name), c.want) << c.name;
}

// ---------------------------------------------------------------- cat

TEST(CtlRender, KnownReport) {
  const auto lines = render_report("node.orca", node_report(kNow - 300), kNow);
  ASSERT_FALSE(lines.empty());
  const std::string& header = lines.front();
  EXPECT_TRUE(contains(header, "node.orca")) << header;
  EXPECT_TRUE(contains(header, "seq 42")) << header;
  EXPECT_TRUE(contains(header, "0.3 s ago")) << header;
  EXPECT_TRUE(contains(header, "interval 100 ms")) << header;
  EXPECT_FALSE(contains(header, "STALE")) << header;
  EXPECT_FALSE(contains(header, "STOPPED")) << header;

  EXPECT_TRUE(contains(line_with(lines, "cpu_utilization"), "63.2 %")) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "mem_utilization"), "41.0 %")) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "application_utilization"), "70.0 %")) << joined(lines);
  EXPECT_TRUE(line_with(lines, "rps_fractional").empty()) << "zero rps is not shown\n" << joined(lines);
  EXPECT_TRUE(line_with(lines, "eps").empty()) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "io.pressure"), "5.0 %")) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "headroom.cpu.busy"), "50.0 %")) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "headroom.cpu.saturation"), "13.2 %")) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "headroom.cpu.capacity"), "8")) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "used_bytes"), "512.0 MiB")) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "headroom.timestamp_ms"), "1699999999823 (2023-11-14T22:13:19.823Z)"))
      << joined(lines);

  // Maps sorted by key, whatever protobuf's iteration order.
  auto index_of = [&](const std::string& part) {
    return std::find_if(lines.begin(), lines.end(), [&](const std::string& l) { return contains(l, part); }) -
           lines.begin();
  };
  EXPECT_LT(index_of("  cpu "), index_of("  io.pressure"));
  EXPECT_LT(index_of("  io.pressure"), index_of("  memory"));
  EXPECT_LT(index_of("headroom.cpu.busy"), index_of("headroom.timestamp_ms"));
  // Values start in one column.
  const auto a = line_with(lines, "cpu_utilization").find("63.2 %");
  const auto b = line_with(lines, "headroom.memory.used_bytes").find("512.0 MiB");
  EXPECT_EQ(a, b) << joined(lines);
}

TEST(CtlRender, RpsAndEpsWhenSet) {
  auto r = node_report(kNow);
  r.set_rps_fractional(12.5);
  r.set_eps(0.25);
  const auto lines = render_report("node.orca", r, kNow);
  EXPECT_TRUE(contains(line_with(lines, "rps_fractional"), "12.5")) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "eps"), "0.25")) << joined(lines);
}

TEST(CtlRender, StaleMarker) {
  const auto lines = render_report("node.orca", node_report(kNow - 12'300), kNow);
  EXPECT_TRUE(contains(lines.front(), "12.3 s ago")) << lines.front();
  EXPECT_TRUE(contains(lines.front(), "STALE (older than 1000 ms)")) << lines.front();
}

TEST(CtlRender, StoppedMarker) {
  const auto r = make_report(kNow - 100, 7, 100, {{"cpu", 0.1}}, /*stopped=*/true);
  const auto lines = render_report("node.orca", r, kNow);
  EXPECT_TRUE(contains(lines.front(), "STOPPED")) << lines.front();
  EXPECT_FALSE(contains(lines.front(), "STALE")) << lines.front();
}

TEST(CtlRender, FutureAndMissingMetadata) {
  const auto future = render_report("node.orca", node_report(kNow + 5'000), kNow);
  EXPECT_TRUE(contains(future.front(), "5.0 s in the future")) << future.front();
  EXPECT_TRUE(contains(future.front(), "STALE")) << future.front();

  orca::Report bare;
  bare.set_cpu_utilization(0.2);
  const auto lines = render_report("x.orca", bare, kNow);
  EXPECT_TRUE(contains(lines.front(), "no headroom metadata")) << lines.front();
  EXPECT_TRUE(contains(lines.front(), "STALE (named_metrics lacks")) << lines.front();
  EXPECT_TRUE(contains(line_with(lines, "cpu_utilization"), "20.0 %")) << joined(lines);
}

TEST(CtlRender, Json) {
  const std::string json = render_report_json("/run/orca/node.orca", node_report(kNow - 300), kNow);
  EXPECT_EQ(json.find('\n'), std::string::npos) << json;
  EXPECT_EQ(json.rfind("{\"file\":\"/run/orca/node.orca\",\"age_ms\":300,\"stale\":false,\"stale_reason\":\"\",", 0),
            0u)
      << json;
  EXPECT_TRUE(contains(json, "\"report\":{")) << json;
  EXPECT_TRUE(contains(json, "\"cpu_utilization\":0.632")) << json;
  EXPECT_TRUE(contains(json, "\"io.pressure\":0.05")) << json;
  EXPECT_EQ(json.back(), '}') << json;

  const std::string stale = render_report_json("n.orca", node_report(kNow - 12'300), kNow);
  EXPECT_TRUE(contains(stale, "\"stale\":true,\"stale_reason\":\"older than 1000 ms\"")) << stale;
  const std::string bare = render_report_json("n.orca", orca::Report(), kNow);
  EXPECT_TRUE(contains(bare, "\"age_ms\":null")) << bare;
}

// ---------------------------------------------------------------- watch

TEST(CtlWatch, DynamicColumnsFromTwoReports) {
  std::vector<WatchEntry> entries;
  // Listed out of order: the node row still comes first.
  entries.push_back({"endpoint.api",
                     make_report(kNow - 200, 9, 100, {{"latency.slo_target", 0.25}, {"concurrency", 0.5}}), ""});
  entries.push_back({"node", node_report(kNow - 300), ""});
  const Table t = build_watch_table(entries, kNow);

  const std::vector<std::string> want_header = {"SCOPE",       "AGE",    "SEQ",         "CPU",         "MEM",
                                                "APP",         "cpu",    "memory",      "io.pressure", "concurrency",
                                                "latency.slo_target", "STATUS"};
  EXPECT_EQ(t.header, want_header);
  ASSERT_EQ(t.rows.size(), 2u);
  const auto& node = t.rows[0];
  ASSERT_EQ(node.size(), want_header.size());
  EXPECT_EQ(node[0], "node");
  EXPECT_EQ(node[1], "0.3 s");
  EXPECT_EQ(node[2], "42");
  EXPECT_EQ(node[3], "63.2 %");
  EXPECT_EQ(node[4], "41.0 %");
  EXPECT_EQ(node[5], "70.0 %");
  EXPECT_EQ(node[6], "63.2 %");
  EXPECT_EQ(node[7], "41.0 %");
  EXPECT_EQ(node[8], "5.0 %");
  EXPECT_EQ(node[9], "-");
  EXPECT_EQ(node[10], "-");
  EXPECT_EQ(node[11], "ok");
  const auto& ep = t.rows[1];
  EXPECT_EQ(ep[0], "endpoint.api");
  EXPECT_EQ(ep[2], "9");
  EXPECT_EQ(ep[6], "-");
  EXPECT_EQ(ep[9], "50.0 %");
  EXPECT_EQ(ep[10], "25.0 %");
}

TEST(CtlWatch, StatusColumn) {
  std::vector<WatchEntry> entries;
  entries.push_back({"endpoint.bad", std::nullopt, "not a valid xds.data.orca.v3.OrcaLoadReport (3 bytes)"});
  entries.push_back({"endpoint.old", node_report(kNow - 12'300), ""});
  entries.push_back({"endpoint.stopped", make_report(kNow, 1, 100, {}, /*stopped=*/true), ""});
  const Table t = build_watch_table(entries, kNow);
  ASSERT_EQ(t.rows.size(), 3u);

  const auto& bad = t.rows[0];
  EXPECT_EQ(bad[0], "endpoint.bad");
  EXPECT_EQ(bad.back(), "ERROR: not a valid xds.data.orca.v3.OrcaLoadReport (3 bytes)");
  for (std::size_t i = 1; i + 1 < bad.size(); ++i) EXPECT_EQ(bad[i], "-") << t.header[i];

  EXPECT_EQ(t.rows[1][1], "12.3 s");
  EXPECT_EQ(t.rows[1].back(), "STALE: older than 1000 ms");
  EXPECT_EQ(t.rows[2].back(), "STOPPED");
}

TEST(CtlWatch, FormatTableAligns) {
  Table t;
  t.header = {"SCOPE", "CPU", "STATUS"};
  t.rows = {{"node", "63.2 %", "ok"}, {"endpoint.api", "5.0 %", "STALE: x"}};
  t.right_aligned = {false, true, false};
  const std::vector<std::string> want = {
      "SCOPE            CPU  STATUS",
      "node          63.2 %  ok",
      "endpoint.api   5.0 %  STALE: x",
  };
  EXPECT_EQ(format_table(t), want);
}

TEST(CtlWatch, Frames) {
  WatchFrame waiting;
  waiting.dir = "/run/orca";
  waiting.now_unix_ms = kNow;
  waiting.waiting_reason = "No such file or directory";
  auto lines = render_watch_frame(waiting);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(contains(lines[0], "/run/orca")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "2023-11-14T22:13:20.123Z")) << lines[0];
  EXPECT_EQ(lines[1], "waiting for /run/orca (No such file or directory)");

  WatchFrame empty = waiting;
  empty.waiting_reason.clear();
  lines = render_watch_frame(empty);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(contains(lines[1], "no report files")) << lines[1];

  WatchFrame full = empty;
  full.entries.push_back({"node", node_report(kNow - 300), ""});
  full.entries.push_back({"endpoint.bad", std::nullopt, "open: Permission denied"});
  lines = render_watch_frame(full);
  ASSERT_EQ(lines.size(), 4u) << joined(lines);
  EXPECT_EQ(lines[1].rfind("SCOPE", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("node ", 0), 0u) << lines[2];
  EXPECT_TRUE(contains(lines[3], "ERROR: open: Permission denied")) << lines[3];
  // A blank line separates frames in a log, so none may appear inside one.
  for (const auto& l : lines) EXPECT_FALSE(l.empty());
}

TEST(CtlRender, EndpointReportHasNoMachineFields) {
  auto r = make_report(kNow - 100, 3, 100, {{"latency.slo_target", 0.125}});
  r.set_rps_fractional(250);
  const auto lines = render_report("/run/orca/endpoint.api.orca", r, kNow);
  const std::string all = [&] {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }();
  EXPECT_EQ(all.find("cpu_utilization"), std::string::npos) << all;
  EXPECT_EQ(all.find("mem_utilization"), std::string::npos) << all;
  EXPECT_NE(all.find("latency.slo_target"), std::string::npos) << all;
  EXPECT_NE(all.find("rps_fractional"), std::string::npos) << all;
  // The node's report keeps them.
  const auto node_lines = render_report("/run/orca/node.orca", node_report(kNow - 100), kNow);
  bool has_cpu = false;
  for (const auto& l : node_lines) has_cpu = has_cpu || l.starts_with("cpu_utilization");
  EXPECT_TRUE(has_cpu);
}

TEST(CtlWatch, EndpointRowsAndUnavailableLatency) {
  std::vector<WatchEntry> entries;
  entries.push_back({"node", node_report(kNow - 100), ""});
  auto unavailable = make_report(kNow - 100, 5, 100, {});
  (*unavailable.mutable_named_metrics())["headroom.ebpf.unavailable"] = 1;
  entries.push_back({"endpoint.api", unavailable, ""});
  const Table t = build_watch_table(entries, kNow);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].back(), "ok");
  EXPECT_EQ(t.rows[1][3], "-");  // CPU
  EXPECT_EQ(t.rows[1][4], "-");  // MEM
  EXPECT_EQ(t.rows[1].back(), "ok, latency unavailable (no eBPF)");
}

// A dependency's report, like an endpoint's aggregate, has no machine fields.
TEST(CtlWatch, DependencyRowsHaveNoMachineFields) {
  std::vector<WatchEntry> entries;
  entries.push_back({"node", node_report(kNow - 100), ""});
  entries.push_back({"dependency.cache", make_report(kNow - 100, 5, 100, {{"errors", 0.25}}), ""});
  const Table t = build_watch_table(entries, kNow);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[1][0], "dependency.cache");
  EXPECT_EQ(t.rows[1][3], "-");  // CPU
  EXPECT_EQ(t.rows[1][4], "-");  // MEM
  EXPECT_EQ(t.rows[1].back(), "ok");
  const auto lines = render_report("/run/orca/dependency.cache.orca", entries[1].report.value(), kNow);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_EQ(all.find("cpu_utilization"), std::string::npos) << all;
  EXPECT_NE(all.find("errors"), std::string::npos) << all;
}

// ---------------------------------------------------------------- instances

orca::Report instance_report(int64_t ts, uint64_t netns, bool gone = false, bool no_cgroup = false) {
  auto r = make_report(ts, 4, 100, {{"latency.slo_target", 0.5}}, /*stopped=*/gone);
  r.set_cpu_utilization(0.25);
  r.set_mem_utilization(0.125);
  auto& nm = *r.mutable_named_metrics();
  nm[std::string(orca::kMetricInstanceNetns)] = static_cast<double>(netns);
  if (gone) nm[std::string(orca::kMetricInstanceGone)] = 1;
  if (no_cgroup) nm[std::string(orca::kMetricInstanceCgroupUnavailable)] = 1;
  return r;
}

TEST(CtlFormat, SplitInstanceAndInstanceFileNames) {
  EXPECT_EQ(split_instance("endpoint.api@pod-1").base, "endpoint.api");
  EXPECT_EQ(split_instance("endpoint.api@pod-1").instance, "pod-1");
  EXPECT_EQ(split_instance("endpoint.api").instance, "");
  EXPECT_EQ(split_instance("node").base, "node");
  const std::vector<std::string> names = {"endpoint.api@b.orca", "endpoint.api.orca", "endpoint.api@a.orca",
                                          ".endpoint.api@c.orca.tmp", "endpoint.api2@x.orca", "endpoint.api@.orca",
                                          "endpoint.api.v2@y.orca", "node.orca", "endpoint.api@d.txt"};
  EXPECT_EQ(instance_file_names("endpoint.api.orca", names),
            (std::vector<std::string>{"endpoint.api@a.orca", "endpoint.api@b.orca"}));
  EXPECT_TRUE(instance_file_names("node.orca", names).empty());
  EXPECT_TRUE(instance_file_names("endpoint.api@a.orca", names).empty());
}

TEST(CtlRender, InstanceReportShowsItsCgroupAndNamespace) {
  const auto lines = render_report("/run/orca/endpoint.api@pod-1.orca", instance_report(kNow - 100, 4026532000), kNow);
  EXPECT_TRUE(contains(line_with(lines, "cpu_utilization"), "25.0 %")) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "mem_utilization"), "12.5 %")) << joined(lines);
  EXPECT_TRUE(contains(line_with(lines, "headroom.instance.netns"), "4026532000 (net:[4026532000])")) << joined(lines);
  EXPECT_FALSE(contains(lines.front(), "STOPPED")) << lines.front();

  const auto gone = render_report("endpoint.api@pod-1.orca", instance_report(kNow - 100, 7, /*gone=*/true), kNow);
  EXPECT_TRUE(contains(gone.front(), "GONE (the instance stopped serving")) << gone.front();
  EXPECT_FALSE(contains(gone.front(), "the agent stopped")) << gone.front();
}

TEST(CtlWatch, InstancesUnderTheirEndpointAndGoneOnesMarked) {
  std::vector<WatchEntry> entries;
  entries.push_back({"endpoint.api@pod-b", instance_report(kNow - 100, 2, /*gone=*/true), ""});
  entries.push_back({"endpoint.api.v2", make_report(kNow - 100, 1, 100, {}), ""});
  entries.push_back({"endpoint.api@pod-a", instance_report(kNow - 100, 1, false, /*no_cgroup=*/true), ""});
  entries.push_back({"endpoint.api", make_report(kNow - 100, 1, 100, {}), ""});
  entries.push_back({"node", node_report(kNow - 100), ""});
  entries.push_back({"endpoint.web@host", instance_report(kNow - 100, 3), ""});  // its aggregate absent
  const Table t = build_watch_table(entries, kNow);
  ASSERT_EQ(t.rows.size(), 6u);
  std::vector<std::string> scopes;
  for (const auto& row : t.rows) scopes.push_back(row[0]);
  EXPECT_EQ(scopes, (std::vector<std::string>{"node", "endpoint.api", "  @pod-a", "  @pod-b", "endpoint.api.v2",
                                              "endpoint.web@host"}));
  EXPECT_EQ(t.rows[1][3], "-");       // the aggregate: no machine CPU
  EXPECT_EQ(t.rows[2][3], "25.0 %");  // an instance: its cgroup's
  EXPECT_EQ(t.rows[2][4], "-");       // whose memory could not be read
  EXPECT_EQ(t.rows[2].back(), "ok, cgroup unavailable");
  EXPECT_EQ(t.rows[3][4], "12.5 %");
  EXPECT_EQ(t.rows[3].back(), "GONE (stopped serving)");
  EXPECT_EQ(t.rows[5].back(), "ok");
}

}  // namespace
}  // namespace headroom::ctl
