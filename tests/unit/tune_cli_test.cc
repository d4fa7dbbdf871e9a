// SPDX-License-Identifier: Apache-2.0
// headroomctl tune validate and search before anything is applied or sent:
// the built binary run on bad flags and bad files, its exit status and the
// message that says what to fix. No load is sent and no process signalled.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "process.h"
#include "temp_dir.h"

namespace headroom {
namespace {

using testing::TempDir;

constexpr const char* kGood = R"([[endpoint]]
name = "play"
port = 8080
target = "37.9ms"
max = "64.1ms"

[[endpoint.shed]]
signal = "utilization.latency.slo_target"
shed_start = 0.28
critical_start = 0.64
)";

class TuneCli : public ::testing::Test {
 protected:
  testing::RunResult ctl(std::vector<std::string> args) {
    args.insert(args.begin(), HEADROOMCTL_PATH);
    return testing::run(std::move(args), logs_);
  }
  TempDir dir_, logs_;
};

TEST_F(TuneCli, HelpListsTheCriteriaAndExitCodes) {
  for (const char* sub : {"validate", "search"}) {
    const auto r = ctl({"tune", sub, "--help"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("--headroomd-config"), std::string::npos);
    EXPECT_NE(r.out.find("69 environment"), std::string::npos);
  }
  EXPECT_NE(ctl({"tune", "validate", "--help"}).out.find("no_baseline_shedding"), std::string::npos);
  EXPECT_NE(ctl({"tune", "search", "--help"}).out.find("--max-spikes"), std::string::npos);
}

struct Case {
  std::string name;
  std::vector<std::string> args;  // after "tune"
  int code;
  std::string err;
};

TEST_F(TuneCli, BadInputExitsWithItsCodeAndSaysWhatToFix) {
  const std::string good = dir_.write("good.toml", kGood);
  const std::string nomax = dir_.write("nomax.toml", "[[endpoint]]\nname = \"play\"\nport = 8080\ntarget = \"10ms\"\n");
  const std::string noshed = dir_.write("noshed.toml", "[[endpoint]]\nname = \"play\"\nport = 8080\ntarget = \"10ms\"\nmax = \"20ms\"\n");
  const std::string broken = dir_.write("broken.toml", "[[endpoint]\n");
  const std::string config = dir_ / "absent-headroom.toml";
  const std::vector<std::string> local = {"--target", "127.0.0.1:9/play", "--endpoint", "play"};
  auto with = [&](std::vector<std::string> head, std::vector<std::string> tail = {}) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  const std::vector<Case> cases = {
      {"no subcommand", {}, 64, "A subcommand is required"},
      {"no FILE", {"validate", "--target", "127.0.0.1:9", "--endpoint", "play"}, 64, "FILE is required"},
      {"no --target", {"validate", good, "--endpoint", "play"}, 64, "--target is required"},
      {"unknown flag", with({"validate", good}, with(local, {"--bogus"})), 64, "--bogus"},
      {"bad --spike", with({"validate", good}, with(local, {"--spike", "0.5"})), 64, "--spike"},
      {"unreadable FILE", with({"validate", dir_ / "absent.toml"}, local), 64, "absent.toml: cannot read"},
      {"FILE without max", with({"validate", nomax}, local), 64, "nomax.toml:1:1: endpoint[0].max: is required"},
      {"FILE not TOML", with({"validate", broken}, local), 64, "broken.toml:1:"},
      {"endpoint not in FILE", {"validate", good, "--target", "127.0.0.1:9", "--endpoint", "other"}, 64,
       "no [[endpoint]] with name = \"other\""},
      {"bad --target", {"validate", good, "--target", "127.0.0.1", "--endpoint", "play"}, 64, "--target: TARGET"},
      {"target not local", {"validate", good, "--target", "192.0.2.1:80", "--endpoint", "play"}, 69,
       "is not on this machine"},
      {"bad --mix", with({"validate", good}, with(local, {"--baseline", "100", "--mix", "NOPE=1"})), 64, "NOPE"},
      {"--expect-served not in the mix",
       with({"validate", good}, with(local, {"--baseline", "100", "--mix", "BULK=1", "--expect-served", "CRITICAL=99"})), 64,
       "--expect-served"},
      {"headroomd configuration unreadable",
       with({"validate", good},
            with(local, {"--baseline", "100", "--headroomd-pid", "999999", "--headroomd-config", config})),
       69, "absent-headroom.toml"},
      {"--no-apply and no report to take the baseline from",
       with({"validate", good}, with(local, {"--no-apply", "--orca-dir", dir_.path()})), 69, "--baseline report"},
      {"search needs --out", with({"search", good}, local), 64, "--out is required"},
      {"search needs shed entries", with({"search", noshed}, with(local, {"--out", dir_ / "best.toml"})), 64,
       "has no [[endpoint.shed]]"},
      {"search refuses --no-apply", with({"search", good}, with(local, {"--out", dir_ / "best.toml", "--no-apply"})), 64,
       "--no-apply"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> args{"tune"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = ctl(args);
    EXPECT_EQ(r.code, c.code) << r.err;
    EXPECT_NE(r.err.find(c.err), std::string::npos) << r.err;
  }
}

// headroomd that never takes the file (this test process, ignoring SIGHUP,
// and no report): exit 69 before any load, and the original back in place.
TEST_F(TuneCli, AFileHeadroomdDoesNotTakeIsPutBackBeforeAnyLoad) {
  const std::string good = dir_.write("good.toml", kGood);
  const std::string config = dir_.write("headroom.toml", "# the canary's own configuration\n");
  struct sigaction ignore {}, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGHUP, &ignore, &old), 0);
  const auto r = ctl({"tune", "validate", good, "--target", "127.0.0.1:9/play", "--endpoint", "play", "--baseline", "100",
                      "--headroomd-pid", std::to_string(::getpid()), "--headroomd-config", config, "--orca-dir", dir_.path()});
  ::sigaction(SIGHUP, &old, nullptr);
  EXPECT_EQ(r.code, 69) << r.err;
  EXPECT_NE(r.err.find("headroomd did not take the file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("will send"), std::string::npos) << r.err;
  EXPECT_EQ(testing::read_file(config), "# the canary's own configuration\n");
}

}  // namespace
}  // namespace headroom
