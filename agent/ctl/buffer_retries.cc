// SPDX-License-Identifier: Apache-2.0
// `headroomctl buffer --retries` (agent/ctl/buffer_retries.h).
#include "agent/ctl/buffer_retries.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <limits>
#include <string>
#include <utility>

#include "headroom/orca/text.h"

namespace headroom::ctl::buffer {
namespace {

constexpr std::array<std::string_view, 5> kModeNames = {"none", "immediate", "backoff", "dials", "budget"};

// The head (status line and headers, without the blank line) of the final
// response in `response`: 1xx interim responses before it are skipped.
std::string_view final_head(std::string_view response) {
  for (;;) {
    const auto end = response.find("\r\n\r\n");
    const std::string_view head = response.substr(0, end);
    // "HTTP/1.1 103 ...": the status's first digit is at 9.
    if (end == std::string_view::npos || head.size() < 10 || head[9] != '1') return head;
    response.remove_prefix(end + 4);
  }
}

// Retry-After's delta-seconds, or its HTTP-date as seconds after the
// answer's own Date (else after `now_unix_s`): a server's clock and the
// client's may disagree, its two headers do not. A date already past is 0.
std::optional<double> retry_after_seconds(std::string_view value, std::optional<std::string_view> date,
                                          int64_t now_unix_s) {
  if (value.empty() || value.size() > 40) return std::nullopt;
  if (value.find_first_not_of("0123456789") == std::string_view::npos)
    return value.size() > 10 ? std::nullopt : std::optional<double>(std::stod(std::string(value)));
  const auto when = parse_http_date(value);
  if (!when) return std::nullopt;
  const auto reference = date ? parse_http_date(*date) : std::nullopt;
  const int64_t from = reference ? *reference : now_unix_s;
  return static_cast<double>(std::max<int64_t>(0, *when - from));
}

}  // namespace

std::optional<int64_t> parse_http_date(std::string_view text) {
  // RFC 9110 5.6.7: the IMF-fixdate, and the two obsolete forms a recipient
  // must still read (RFC 850's and asctime's). strptime reads the names of
  // days and months in the C locale, which headroomctl never leaves.
  static constexpr const char* kForms[] = {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                                           "%a %b %e %H:%M:%S %Y"};
  if (text.size() > 40) return std::nullopt;
  const std::string s(text);
  for (const char* form : kForms) {
    std::tm tm{};
    const char* end = strptime(s.c_str(), form, &tm);
    if (end != nullptr && *end == '\0') return static_cast<int64_t>(timegm(&tm));
  }
  return std::nullopt;
}

Result<RetryMode> parse_retry_mode(std::string_view text) {
  for (std::size_t i = 0; i < kModeNames.size(); ++i)
    if (text == kModeNames[i]) return static_cast<RetryMode>(i);
  return logic_error("--retries " + std::string(text) + ": expected none, immediate, backoff, dials or budget");
}

std::string_view retry_mode_name(RetryMode mode) noexcept { return kModeNames[static_cast<std::size_t>(mode)]; }

std::string_view suppressed_name(Suppressed reason) noexcept {
  switch (reason) {
    case Suppressed::max_retries: return "max_retries";
    case Suppressed::no_dials: return "no_dials";
    case Suppressed::dials_count: return "dials_count";
    case Suppressed::dials_wait: return "dials_wait";
    case Suppressed::budget: return "budget";
    case Suppressed::target_shedding: return "target_shedding";
  }
  return "?";
}

Suppressed suppressed_of(orca::RetryDecision decision) noexcept {
  switch (decision) {
    case orca::RetryDecision::deny_dials_count: return Suppressed::dials_count;
    case orca::RetryDecision::deny_dials_wait: return Suppressed::dials_wait;
    case orca::RetryDecision::deny_target_shedding: return Suppressed::target_shedding;
    case orca::RetryDecision::retry:  // not a suppression; the budget's reason is the closest
    case orca::RetryDecision::deny_budget: break;
  }
  return Suppressed::budget;
}

int64_t backoff_delay_ns(int retry_number, double uniform) noexcept {
  const int exponent = std::clamp(retry_number - 1, 0, 10);
  const int64_t ceiling = kBackoffBaseNs << exponent;
  if (!(uniform > 0)) return 0;  // also NaN
  return std::min(ceiling - 1, static_cast<int64_t>(uniform * static_cast<double>(ceiling)));
}

std::optional<orca::RetryDials> dials_of_response(std::string_view response, int max_retries, int64_t now_unix_s) {
  std::string_view head = final_head(response);
  std::optional<std::string_view> dials_text, retry_after, date;
  // Header lines after the status line; a repeated header: the first counts.
  for (auto nl = head.find('\n'); nl != std::string_view::npos; nl = head.find('\n')) {
    head.remove_prefix(nl + 1);
    const std::string_view line = head.substr(0, head.find('\n'));
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    if (iequals(name, orca::kRetryDialsHeader) && !dials_text) dials_text = trim(line.substr(colon + 1));
    if (iequals(name, "retry-after") && !retry_after) retry_after = trim(line.substr(colon + 1));
    if (iequals(name, "date") && !date) date = trim(line.substr(colon + 1));
  }
  if (dials_text) {
    auto dials = orca::parse_retry_dials(*dials_text);
    if (!dials) return std::nullopt;
    return *dials;
  }
  if (!retry_after) return std::nullopt;
  const auto seconds = retry_after_seconds(*retry_after, date, now_unix_s);
  if (!seconds) return std::nullopt;
  return orca::clamp_retry_dials(orca::RetryDials{max_retries, *seconds});
}

bool wants_retry(const loadgen::Record& attempt) noexcept {
  if (attempt.outcome == loadgen::Outcome::cancelled) return false;
  if (attempt.outcome != loadgen::Outcome::response) return true;
  return attempt.status < 200 || attempt.status >= 300;
}

RetryChoice choose_retry(RetryMode mode, int retry_number, int max_retries,
                         const std::optional<orca::RetryDials>& dials, double uniform) noexcept {
  if (mode == RetryMode::none || retry_number > max_retries) return {-1, Suppressed::max_retries};
  const auto wait_ns = [](const orca::RetryDials& d) {
    return static_cast<int64_t>(std::ceil(std::clamp(d.retry_after_seconds, 0.0, orca::kMaxRetryAfterSeconds) * 1e9));
  };
  switch (mode) {
    case RetryMode::immediate:
      return {0, Suppressed::max_retries};
    case RetryMode::backoff:
      return {backoff_delay_ns(retry_number, uniform), Suppressed::max_retries};
    case RetryMode::dials:
      if (!dials) return {-1, Suppressed::no_dials};
      if (retry_number > dials->max_retries) return {-1, Suppressed::dials_count};
      return {wait_ns(*dials), Suppressed::max_retries};
    case RetryMode::budget: {
      // The budget decides when the retry is due; it leaves no sooner than
      // the answer asked, so that the budget's own dials rule is not what
      // holds back a retry of this very answer.
      const int64_t delay = backoff_delay_ns(retry_number, uniform);
      return {dials ? std::max(delay, wait_ns(*dials)) : delay, Suppressed::max_retries};
    }
    case RetryMode::none: break;
  }
  return {-1, Suppressed::max_retries};
}

int64_t RetryCounts::suppressed_total() const noexcept {
  int64_t n = 0;
  for (const int64_t v : suppressed) n += v;
  return n;
}

double RetryCounts::amplification() const noexcept {
  if (first_attempts == 0) return 1.0;
  return static_cast<double>(first_attempts + retries) / static_cast<double>(first_attempts);
}

RetryClient::RetryClient(Settings settings) : s_(std::move(settings)), rng_(s_.seed) {
  if (s_.mode == RetryMode::budget) budget_ = std::make_unique<orca::RetryBudget>();
}

loadgen::RetryHooks RetryClient::hooks() {
  loadgen::RetryHooks h;
  if (s_.mode == RetryMode::none) return h;
  h.after = [this](const loadgen::Record& r, std::string_view response, int64_t now) { return after(r, response, now); };
  h.admit = [this](const loadgen::Record& r, int64_t now) { return admit(r, now); };
  return h;
}

void RetryClient::update_target(const orca::Report& report, const orca::ShedderConfig& config, bool stale) noexcept {
  if (budget_) budget_->update_target(report, config, stale);
}

int64_t RetryClient::after(const loadgen::Record& ended, std::string_view response, int64_t now_ns) {
  if (!wants_retry(ended)) return -1;
  std::optional<orca::RetryDials> dials;
  if (ended.outcome == loadgen::Outcome::response) dials = dials_of_response(response, s_.max_retries, std::time(nullptr));
  const int priority = ended.request_class < s_.priorities.size() ? s_.priorities[ended.request_class] : 50;
  if (budget_ && dials) budget_->record_dials(priority, *dials, now_ns);
  const double uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  const RetryChoice choice = choose_retry(s_.mode, ended.attempt + 1, s_.max_retries, dials, uniform);
  if (choice.delay_ns < 0) suppressed_.push_back(Held{ended.first, choice.reason});
  else if (budget_) failed_at_[ended.first] = now_ns;  // the dials' wait is counted from here
  return choice.delay_ns;
}

bool RetryClient::admit(const loadgen::Record& r, int64_t now_ns) {
  if (!budget_) return true;
  if (r.attempt == 0) {
    budget_->record_first_attempt(now_ns);
    return true;
  }
  const int priority = r.request_class < s_.priorities.size() ? s_.priorities[r.request_class] : 50;
  int64_t failed_at = now_ns;
  if (auto it = failed_at_.find(r.first); it != failed_at_.end()) {
    failed_at = it->second;
    failed_at_.erase(it);
  }
  const orca::RetryDecision d = budget_->may_retry(priority, r.attempt, now_ns, failed_at);
  if (d == orca::RetryDecision::retry) return true;
  suppressed_.push_back(Held{r.first, suppressed_of(d)});
  return false;
}

std::vector<loadgen::Record> first_attempt_outcomes(const std::vector<loadgen::Record>& records) {
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  std::vector<loadgen::Record> out;
  std::vector<uint32_t> position(records.size(), kNone);  // record index -> index in out
  for (std::size_t i = 0; i < records.size(); ++i) {
    const loadgen::Record& r = records[i];
    if (r.attempt == 0) {
      position[i] = static_cast<uint32_t>(out.size());
      out.push_back(r);
      continue;
    }
    if (r.first >= i || position[r.first] == kNone) continue;  // not of this run's records
    // Records are in schedule order, so a later attempt replaces an earlier one.
    loadgen::Record& f = out[position[r.first]];
    f.status = r.status;
    f.outcome = r.outcome;
    f.attempt = r.attempt;
    f.latency_ns = r.scheduled_ns - f.scheduled_ns + r.latency_ns;
  }
  return out;
}

std::vector<StepRetries> retry_counts(const std::vector<Step>& steps, std::size_t classes,
                                      const std::vector<loadgen::Record>& records,
                                      const std::vector<RetryClient::Held>& suppressed) {
  std::vector<StepRetries> out(steps.size());
  std::vector<int64_t> begin(steps.size());
  int64_t t = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    out[i].by_class.resize(classes);
    begin[i] = t + steps[i].settle.count();
    t += steps[i].duration.count();
  }
  // The counts of the step and class of a first attempt; null when it is
  // not measured (settling, cancelled, unknown).
  const auto counted = [&](uint32_t first) -> std::array<RetryCounts*, 2> {
    if (first >= records.size()) return {nullptr, nullptr};
    const loadgen::Record& f = records[first];
    if (f.phase >= steps.size() || f.request_class >= classes || f.scheduled_ns < begin[f.phase] ||
        f.outcome == loadgen::Outcome::cancelled)
      return {nullptr, nullptr};
    return {&out[f.phase].all, &out[f.phase].by_class[f.request_class]};
  };
  for (const auto& r : records) {
    if (r.outcome == loadgen::Outcome::cancelled) continue;
    for (RetryCounts* c : counted(r.first)) {
      if (c == nullptr) break;
      ++(r.attempt == 0 ? c->first_attempts : c->retries);
    }
  }
  for (const auto& h : suppressed)
    for (RetryCounts* c : counted(h.first))
      if (c != nullptr) ++c->suppressed[static_cast<std::size_t>(h.reason)];
  return out;
}

}  // namespace headroom::ctl::buffer
