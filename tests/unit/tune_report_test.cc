// SPDX-License-Identifier: Apache-2.0
// tune validate's and search's outputs: the JSON fields scripts read, the
// table's verdict and suggestion lines, and the header of the file search writes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "agent/ctl/tune_report.h"

namespace headroom::ctl::tune {
namespace {

RunSummary failed_run(double s) {
  RunSummary r;
  r.s = s;
  r.shed = {ShedEntry{"utilization.latency.slo_target", {0.28, 0.64, 1.0}}};
  r.judgement.passed = false;
  r.judgement.cause = Cause::too_late;
  r.judgement.criteria = {Criterion{"spike_received", true, {Measure{"sent / planned rate", 0.99, 0.95, true, true, "%"}}},
                          Criterion{"graceful_rejection", false, {Measure{"failed / offered", 0.05, 0.01, false, false, "%"}}}};
  r.judgement.suggestion = Suggestion{Cause::too_late, "utilization.latency.slo_target", 0.5, 0.19, 0.37, "lower it"};
  r.buffers.baseline_rps = 100;
  r.buffers.success = 1.5;
  r.buffers.failure = 0.25;
  return r;
}

TEST(TuneReport, JsonCarriesTheCriteriaBuffersAndSuggestion) {
  const auto j = nlohmann::json::parse(judgement_json(failed_run(1)));
  EXPECT_FALSE(j.at("pass").get<bool>());
  ASSERT_EQ(j.at("criteria").size(), 2u);
  EXPECT_EQ(j.at("criteria")[1].at("name"), "graceful_rejection");
  EXPECT_FALSE(j.at("criteria")[1].at("pass").get<bool>());
  EXPECT_DOUBLE_EQ(j.at("criteria")[1].at("measures")[0].at("limit").get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(j.at("buffers").at("success").get<double>(), 1.5);
  EXPECT_EQ(j.at("suggestion").at("cause"), "too_late");
  EXPECT_DOUBLE_EQ(j.at("suggestion").at("shed_start").get<double>(), 0.19);

  RunSummary passed;
  passed.judgement.passed = true;
  EXPECT_TRUE(nlohmann::json::parse(judgement_json(passed)).at("suggestion").is_null());
}

TEST(TuneReport, TableEndsWithTheVerdictAndTheSuggestion) {
  const auto lines = render_judgement(failed_run(1));
  ASSERT_GE(lines.size(), 4u);
  EXPECT_NE(lines[2].find("FAIL"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("failed / offered 5.00 % (<= 1.00 %) !"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[lines.size() - 2], "verdict: FAIL graceful_rejection (too_late)");
  EXPECT_EQ(lines.back(), "suggestion: lower it");
}

TEST(TuneReport, SearchHeaderIsCommentsNamingTheCommandAndEveryRun) {
  RunSummary pass = failed_run(0.5);
  pass.judgement = Judgement{true, Cause::none, {}, std::nullopt};
  const std::string header = search_header("headroomctl tune search f.toml --out best.toml", {failed_run(1), pass}, 1);
  EXPECT_NE(header.find("# Made by headroomctl tune search"), std::string::npos);
  EXPECT_NE(header.find("(run 2, s = 0.5)"), std::string::npos) << header;
  EXPECT_NE(header.find("# Command: headroomctl tune search f.toml --out best.toml\n"), std::string::npos);
  std::size_t lines = 0, start = 0;
  for (auto end = header.find('\n'); end != std::string::npos; start = end + 1, end = header.find('\n', start)) {
    const std::string line = header.substr(start, end - start);
    if (line.empty()) continue;
    ++lines;
    EXPECT_EQ(line[0], '#') << line;
  }
  EXPECT_EQ(lines, 6u);  // made by, command, runs:, the table's head and two runs
  const auto j = nlohmann::json::parse(search_json({failed_run(1), pass}, 1, "best.toml"));
  EXPECT_EQ(j.at("best"), 1);
  EXPECT_EQ(j.at("runs")[0].at("shed")[0].at("shed_start"), 0.28);
  EXPECT_DOUBLE_EQ(j.at("runs")[1].at("s").get<double>(), 0.5);
}

}  // namespace
}  // namespace headroom::ctl::tune
