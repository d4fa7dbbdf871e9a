// SPDX-License-Identifier: Apache-2.0
// The eBPF program set by name: what HEADROOM_EBPF_PROGRAMS and the probe's
// options accept, and the names the probe gives back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "probes/endpoint_probe.h"

namespace headroom::probes {
namespace {

using ::testing::HasSubstr;

TEST(ProgramSet, EveryNameParsesBackToItsSet) {
  for (const ProgramSet set : {ProgramSet::automatic, ProgramSet::sockets, ProgramSet::syscalls, ProgramSet::raw}) {
    const auto parsed = parse_program_set(program_set_name(set));
    ASSERT_TRUE(parsed.ok()) << program_set_name(set);
    EXPECT_EQ(*parsed, set);
  }
  EXPECT_EQ(program_set_name(ProgramSet::automatic), "auto");
  EXPECT_EQ(program_set_name(ProgramSet::sockets), "sockets");
  EXPECT_EQ(program_set_name(ProgramSet::syscalls), "syscalls");
  EXPECT_EQ(program_set_name(ProgramSet::raw), "raw");
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
    EXPECT_THAT(parsed.error().message, HasSubstr("auto, sockets, syscalls or raw"));
  }
}

TEST(ProgramSet, OptionsDefaultToAutomatic) { EXPECT_EQ(EndpointProbeOptions{}.programs, ProgramSet::automatic); }

}  // namespace
}  // namespace headroom::probes
