// SPDX-License-Identifier: Apache-2.0
// Parsers, fed literal file contents: good input, edge cases a kernel really
// produces, and broken input whose error must say what is wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "probes/parse.h"

namespace headroom::probes {
namespace {

// A bad input and a piece of the error message it must produce.
struct BadCase {
  const char* name;
  std::string_view text;
  const char* message_part;
};

template <class T>
void expect_error(const Result<T>& r, const BadCase& c) {
  ASSERT_FALSE(r.ok()) << c.name << ": parsed although it should not";
  EXPECT_NE(r.error().message.find(c.message_part), std::string::npos)
      << c.name << ": message \"" << r.error().message << "\" lacks \"" << c.message_part << "\"";
  EXPECT_EQ(r.error().code, 0) << c.name << ": a format error is not a system error";
}

// ---------------------------------------------------------------- /proc/stat

constexpr std::string_view kStat =
    "cpu  4298 10 1873 69247 461 3 130 185 7 1\n"
    "cpu0 1705 4 718 35539 26 1 39 70 3 0\n"
    "cpu1 2592 6 1155 33708 435 2 90 115 4 1\n"
    "intr 123955 0 0 0 0 1 1 10 0 0\n"
    "ctxt 218812\n"
    "btime 1795963907\n"
    "processes 3423\n"
    "procs_running 3\n"
    "procs_blocked 1\n"
    "softirq 81397 0 8086 3 869 34503 0 2 23384 0 14550\n";

TEST(ParseProcStat, ReadsAggregateLineAndCounts) {
  auto r = parse_proc_stat(kStat);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->total.user, 4298u);
  EXPECT_EQ(r->total.nice, 10u);
  EXPECT_EQ(r->total.system, 1873u);
  EXPECT_EQ(r->total.idle, 69247u);
  EXPECT_EQ(r->total.iowait, 461u);
  EXPECT_EQ(r->total.irq, 3u);
  EXPECT_EQ(r->total.softirq, 130u);
  EXPECT_EQ(r->total.steal, 185u);
  EXPECT_EQ(r->ncpu, 2u);
  EXPECT_EQ(r->procs_running, 3u);
  EXPECT_EQ(r->procs_blocked, 1u);
}

TEST(ParseProcStat, OldKernelWithFourFieldsLeavesTheRestZero) {
  auto r = parse_proc_stat("cpu 1 2 3 4\ncpu0 1 2 3 4\nprocs_running 1\nprocs_blocked 0");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->total.user, 1u);
  EXPECT_EQ(r->total.idle, 4u);
  EXPECT_EQ(r->total.iowait, 0u);
  EXPECT_EQ(r->total.steal, 0u);
  EXPECT_EQ(r->ncpu, 1u);
  EXPECT_EQ(r->procs_blocked, 0u);
}

TEST(ParseProcStat, ToleratesUnknownLinesAndExtraFields) {
  auto r = parse_proc_stat(
      "cpu 1 2 3 4 5 6 7 8 9 10 11 12\n"
      "cpufreq 2400\n"  // not a cpuN line
      "cpu0 1 2 3 4 5 6 7 8 9 10 11 12\n"
      "\n"
      "future_counter 42 43\n"
      "procs_running 2 extra\n"
      "procs_blocked 0\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->total.steal, 8u);
  EXPECT_EQ(r->ncpu, 1u);
  EXPECT_EQ(r->procs_running, 2u);
}

TEST(ParseProcStat, RejectsBrokenInput) {
  const BadCase cases[] = {
      {"empty", "", "no \"cpu\" line"},
      {"no cpu line", "cpu0 1 2 3 4\nprocs_running 1\nprocs_blocked 0\n", "no \"cpu\" line"},
      {"three fields", "cpu 1 2 3\ncpu0 1 2 3\nprocs_running 1\nprocs_blocked 0\n", "has 3 fields, need at least 4"},
      {"not a number", "cpu 1 2 x 4\ncpu0 1 2 3 4\nprocs_running 1\nprocs_blocked 0\n", "bad number \"x\""},
      {"negative", "cpu 1 -2 3 4\ncpu0 1 2 3 4\nprocs_running 1\nprocs_blocked 0\n", "bad number \"-2\""},
      {"overflow", "cpu 18446744073709551616 2 3 4\ncpu0 1\nprocs_running 1\nprocs_blocked 0\n", "bad number"},
      {"no cpuN", "cpu 1 2 3 4\nprocs_running 1\nprocs_blocked 0\n", "no \"cpuN\" lines"},
      {"no procs_running", "cpu 1 2 3 4\ncpu0 1 2 3 4\nprocs_blocked 0\n", "no \"procs_running\" line"},
      {"no procs_blocked", "cpu 1 2 3 4\ncpu0 1 2 3 4\nprocs_running 1\n", "no \"procs_blocked\" line"},
      {"procs_running without value", "cpu 1 2 3 4\ncpu0 1 2 3 4\nprocs_running\nprocs_blocked 0\n",
       "\"procs_running\" line has no value"},
      {"procs_running > 32 bits", "cpu 1 2 3 4\ncpu0 1 2 3 4\nprocs_running 4294967296\nprocs_blocked 0\n",
       "bad number \"4294967296\""},
      {"duplicate cpu", "cpu 1 2 3 4\ncpu 1 2 3 4\ncpu0 1 2 3 4\nprocs_running 1\nprocs_blocked 0\n",
       "duplicate \"cpu\" line"},
  };
  for (const BadCase& c : cases) expect_error(parse_proc_stat(c.text), c);
}

// ----------------------------------------------------------- /proc/schedstat

TEST(ParseSchedStat, SumsRunDelayOverCpusAndSkipsDomains) {
  auto r = parse_schedstat(
      "version 15\n"
      "timestamp 4295094844\n"
      "cpu0 0 0 81234 40123 45678 20345 900000000 1000000007 51234\n"
      "domain0 00000003 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 "
      "32 33 34 35\n"
      "cpu1 0 0 81235 40124 45679 20346 900000001 2000000000 51235\n"
      "domain0 00000003 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 "
      "32 33 34 35\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->run_delay_ns, 3000000007u);
  EXPECT_EQ(r->ncpu, 2u);
}

TEST(ParseSchedStat, NewerVersionWithExtraFieldsIsAccepted) {
  auto r = parse_schedstat("version 17\ntimestamp 1\ncpu0 0 0 1 2 3 4 5 42 6 7 8\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->run_delay_ns, 42u);
  EXPECT_EQ(r->ncpu, 1u);
}

TEST(ParseSchedStat, RejectsBrokenInput) {
  const BadCase cases[] = {
      {"empty", "", "no \"version\" line"},
      {"no version", "timestamp 1\ncpu0 0 0 1 2 3 4 5 6 7\n", "no \"version\" line"},
      {"old version", "version 14\ncpu0 0 0 1 2 3 4 5 6 7\n", "version 14 is too old"},
      {"bad version", "version x\ncpu0 0 0 1 2 3 4 5 6 7\n", "bad number \"x\""},
      {"short cpu line", "version 15\ncpu0 0 0 1 2 3 4 5\n", "\"cpu0\" line has 7 fields, need at least 8"},
      {"bad run delay", "version 15\ncpu0 0 0 1 2 3 4 5 x 7\n", "bad number \"x\""},
      {"no cpus", "version 15\ntimestamp 1\n", "no \"cpuN\" lines"},
      {"sum overflows", "version 15\ncpu0 0 0 1 2 3 4 5 18446744073709551615 7\ncpu1 0 0 1 2 3 4 5 1 7\n",
       "overflows"},
  };
  for (const BadCase& c : cases) expect_error(parse_schedstat(c.text), c);
}

// ------------------------------------------------------------- /proc/meminfo

TEST(ParseMemInfo, ConvertsKilobytesToBytes) {
  auto r = parse_meminfo(
      "MemTotal:       24683656 kB\n"
      "MemFree:        24373644 kB\n"
      "MemAvailable:   24370588 kB\n"
      "Buffers:            3924 kB\n"
      "HugePages_Total:       0\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->total_bytes, 24683656ull * 1024);
  EXPECT_EQ(r->available_bytes, 24370588ull * 1024);
}

TEST(ParseMemInfo, RejectsBrokenInput) {
  const BadCase cases[] = {
      {"empty", "", "no MemTotal"},
      {"no MemAvailable (kernel < 3.14)", "MemTotal: 100 kB\nMemFree: 50 kB\n", "no MemAvailable"},
      {"no MemTotal", "MemFree: 50 kB\nMemAvailable: 60 kB\n", "no MemTotal"},
      {"no unit", "MemTotal: 100\nMemAvailable: 60 kB\n", "\"MemTotal\" line: expected unit kB"},
      {"wrong unit", "MemTotal: 100 kB\nMemAvailable: 60 MB\n", "\"MemAvailable\" line: expected unit kB"},
      {"no value", "MemTotal:\nMemAvailable: 60 kB\n", "\"MemTotal\" line has no value"},
      {"bad number", "MemTotal: 1x0 kB\nMemAvailable: 60 kB\n", "bad number \"1x0\""},
      {"overflow", "MemTotal: 18446744073709551615 kB\nMemAvailable: 60 kB\n", "overflows"},
  };
  for (const BadCase& c : cases) expect_error(parse_meminfo(c.text), c);
}

// ------------------------------------------------------------------ pressure

TEST(ParsePressure, ReadsSomeAndFull) {
  auto r = parse_pressure(
      "some avg10=1.60 avg60=0.42 avg300=0.33 total=3293556\n"
      "full avg10=0.01 avg60=0.26 avg300=0.52 total=3853513\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->some.avg10, 1.60);
  EXPECT_DOUBLE_EQ(r->some.avg60, 0.42);
  EXPECT_DOUBLE_EQ(r->some.avg300, 0.33);
  EXPECT_EQ(r->some.total_us, 3293556u);
  ASSERT_TRUE(r->full.has_value());
  EXPECT_DOUBLE_EQ(r->full->avg10, 0.01);
  EXPECT_DOUBLE_EQ(r->full->avg300, 0.52);
  EXPECT_EQ(r->full->total_us, 3853513u);
}

TEST(ParsePressure, FullLineIsOptional) {
  // cpu pressure before Linux 5.13 has only the "some" line.
  auto r = parse_pressure("some avg10=100.00 avg60=0.00 avg300=0.00 total=0\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->some.avg10, 100.0);
  EXPECT_FALSE(r->full.has_value());
}

TEST(ParsePressure, ToleratesUnknownKeysAndLines) {
  auto r = parse_pressure(
      "some avg10=0.50 avg60=0.00 avg300=0.00 total=7 avg1800=0.10\n"
      "other avg10=9.99\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->some.avg10, 0.5);
  EXPECT_EQ(r->some.total_us, 7u);
  EXPECT_FALSE(r->full.has_value());
}

TEST(ParsePressure, RejectsBrokenInput) {
  const BadCase cases[] = {
      {"empty", "", "no \"some\" line"},
      {"only full", "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", "no \"some\" line"},
      {"no total", "some avg10=0.00 avg60=0.00 avg300=0.00\n", "\"some\" line: no total"},
      {"no avg60", "some avg10=0.00 avg300=0.00 total=1\n", "\"some\" line: no avg60"},
      {"bad avg", "some avg10=abc avg60=0.00 avg300=0.00 total=1\n", "bad number \"avg10=abc\""},
      {"nan avg", "some avg10=nan avg60=0.00 avg300=0.00 total=1\n", "bad number \"avg10=nan\""},
      {"bad total", "some avg10=0.00 avg60=0.00 avg300=0.00 total=-1\n", "bad number \"total=-1\""},
      {"bad full", "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00\n",
       "\"full\" line: no total"},
      {"no key=value", "some avg10 0.00\n", "expected key=value, got \"avg10\""},
      {"duplicate some",
       "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=1\n",
       "duplicate \"some\" line"},
  };
  for (const BadCase& c : cases) expect_error(parse_pressure(c.text), c);
}

// ------------------------------------------------------------ cgroup v2 files

TEST(ParseCgroup2CpuStat, ReadsUsageAndThrottling) {
  auto r = parse_cgroup2_cpu_stat(
      "usage_usec 8123456789\n"
      "user_usec 6012345678\n"
      "system_usec 2111111111\n"
      "core_sched.force_idle_usec 0\n"
      "nr_periods 1234567\n"
      "nr_throttled 7890\n"
      "throttled_usec 456789012\n"
      "nr_bursts 0\n"
      "burst_usec 0\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->usage_usec, 8123456789u);
  EXPECT_EQ(r->nr_throttled, 7890u);
  EXPECT_EQ(r->throttled_usec, 456789012u);
}

TEST(ParseCgroup2CpuStat, WithoutCpuControllerThrottlingIsZero) {
  auto r = parse_cgroup2_cpu_stat("usage_usec 5\nuser_usec 3\nsystem_usec 2\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->usage_usec, 5u);
  EXPECT_EQ(r->nr_throttled, 0u);
  EXPECT_EQ(r->throttled_usec, 0u);
}

TEST(ParseCgroup2CpuStat, RejectsBrokenInput) {
  const BadCase cases[] = {
      {"empty", "", "no usage_usec"},
      {"no usage", "user_usec 3\nsystem_usec 2\n", "no usage_usec"},
      {"bad usage", "usage_usec 12ab\n", "\"usage_usec\" line: bad number \"12ab\""},
      {"bad throttled", "usage_usec 1\nthrottled_usec -\n", "\"throttled_usec\" line: bad number"},
      {"usage without value", "usage_usec\n", "\"usage_usec\" line has no value"},
  };
  for (const BadCase& c : cases) expect_error(parse_cgroup2_cpu_stat(c.text), c);
}

TEST(ParseCgroup2CpuMax, QuotaOverPeriod) {
  const struct {
    std::string_view text;
    std::optional<double> cpus;
  } cases[] = {
      {"max 100000\n", std::nullopt},
      {"max 100000", std::nullopt},
      {"200000 100000\n", 2.0},
      {"150000 100000\n", 1.5},
      {"50000 100000\n", 0.5},
      {"1000 1000\n", 1.0},
  };
  for (const auto& c : cases) {
    auto r = parse_cgroup2_cpu_max(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.error().message;
    EXPECT_EQ(*r, c.cpus) << c.text;
  }
}

TEST(ParseCgroup2CpuMax, RejectsBrokenInput) {
  const BadCase cases[] = {
      {"empty", "", "expected \"<quota> <period>\""},
      {"one token", "max\n", "expected \"<quota> <period>\""},
      {"three tokens", "1 2 3\n", "got \"1 2 3\""},
      {"period 0", "200000 0\n", "period is 0"},
      {"max period 0", "max 0\n", "period is 0"},
      {"quota 0", "0 100000\n", "quota is 0"},
      {"negative quota", "-1 100000\n", "quota: bad number \"-1\""},
      {"bad period", "max 1e5\n", "period: bad number \"1e5\""},
  };
  for (const BadCase& c : cases) expect_error(parse_cgroup2_cpu_max(c.text), c);
}

TEST(ParseCpuListCount, CountsRangesAndSingles) {
  const struct {
    std::string_view text;
    unsigned count;
  } cases[] = {
      {"0-3,8,10-11", 7}, {"0-3,8,10-11\n", 7}, {"0\n", 1},        {"5-5", 1},
      {"0-63\n", 64},     {"0-15,32-47\n", 32}, {"1,3,5,7\n", 4},   {"0-4095", 4096},
  };
  for (const auto& c : cases) {
    auto r = parse_cpu_list_count(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.error().message;
    EXPECT_EQ(*r, c.count) << c.text;
  }
}

TEST(ParseCpuListCount, RejectsBrokenInput) {
  const BadCase cases[] = {
      {"empty", "", "empty CPU list"},
      {"newline only (empty cpuset)", "\n", "empty CPU list"},
      {"reversed range", "3-1", "bad CPU list item \"3-1\""},
      {"letters", "a", "bad CPU list item \"a\""},
      {"empty item", "0,,1", "bad CPU list item \"\""},
      {"trailing comma", "0,", "bad CPU list item \"\""},
      {"open range", "0-", "bad CPU list item \"0-\""},
      {"stride", "0-7:2", "bad CPU list item \"0-7:2\""},
      {"negative", "-1", "bad CPU list item \"-1\""},
  };
  for (const BadCase& c : cases) expect_error(parse_cpu_list_count(c.text), c);
}

TEST(ParseCgroup2MemoryMax, MaxIsUnlimited) {
  auto unlimited = parse_cgroup2_memory_max("max\n");
  ASSERT_TRUE(unlimited.ok()) << unlimited.error().message;
  EXPECT_FALSE(unlimited->has_value());

  auto limited = parse_cgroup2_memory_max("4294967296\n");
  ASSERT_TRUE(limited.ok()) << limited.error().message;
  EXPECT_EQ(*limited, std::optional<uint64_t>(4294967296u));
}

TEST(ParseCgroup2MemoryMax, RejectsBrokenInput) {
  const BadCase cases[] = {
      {"empty", "", "empty, expected a number"},
      {"suffix", "512M\n", "bad number \"512M\""},
      {"negative", "-1\n", "bad number \"-1\""},
      {"Max", "Max\n", "bad number \"Max\""},
  };
  for (const BadCase& c : cases) expect_error(parse_cgroup2_memory_max(c.text), c);
}

// ------------------------------------------------------------ numbers, v1

TEST(ParseNumbers, UnsignedAndSigned) {
  EXPECT_EQ(*parse_u64("42"), 42u);
  EXPECT_EQ(*parse_u64(" 42 \n"), 42u);
  EXPECT_EQ(*parse_u64("18446744073709551615\n"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*parse_u64("9223372036854771712\n"), 9223372036854771712u);
  EXPECT_EQ(*parse_i64("-1\n"), -1);
  EXPECT_EQ(*parse_i64("200000\n"), 200000);
  EXPECT_EQ(*parse_i64("-9223372036854775808"), std::numeric_limits<int64_t>::min());
}

TEST(ParseNumbers, RejectsBrokenInput) {
  const BadCase u64_cases[] = {
      {"empty", "", "empty, expected a number"},
      {"blank", " \n", "empty, expected a number"},
      {"overflow", "18446744073709551616", "bad number \"18446744073709551616\""},
      {"negative", "-1", "bad number \"-1\""},
      {"plus", "+5", "bad number \"+5\""},
      {"two numbers", "1 2", "bad number \"1 2\""},
      {"hex", "0x10", "bad number \"0x10\""},
  };
  for (const BadCase& c : u64_cases) expect_error(parse_u64(c.text), c);
  const BadCase i64_cases[] = {
      {"empty", "\n", "empty, expected a number"},
      {"letters", "abc", "bad number \"abc\""},
      {"overflow", "9223372036854775808", "bad number"},
      {"decimal", "1.5", "bad number \"1.5\""},
  };
  for (const BadCase& c : i64_cases) expect_error(parse_i64(c.text), c);
}

TEST(ParseNumbers, LongGarbageIsCutInTheMessage) {
  const std::string garbage(1000, 'x');
  auto r = parse_u64(garbage);
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.error().message.size(), 100u);
  EXPECT_NE(r.error().message.find("..."), std::string::npos);
}

TEST(ParseCgroup1CpuStat, ReadsThrottling) {
  auto r = parse_cgroup1_cpu_stat(
      "nr_periods 1234567\nnr_throttled 7890\nthrottled_time 456789012345\nnr_bursts 0\nburst_time 0\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->nr_throttled, 7890u);
  EXPECT_EQ(r->throttled_time_ns, 456789012345u);
}

TEST(ParseCgroup1CpuStat, RejectsBrokenInput) {
  const BadCase cases[] = {
      {"empty", "", "no nr_throttled"},
      {"no throttled_time", "nr_periods 1\nnr_throttled 2\n", "no throttled_time"},
      {"bad number", "nr_periods 1\nnr_throttled x\nthrottled_time 3\n", "\"nr_throttled\" line: bad number \"x\""},
  };
  for (const BadCase& c : cases) expect_error(parse_cgroup1_cpu_stat(c.text), c);
}

}  // namespace
}  // namespace headroom::probes
