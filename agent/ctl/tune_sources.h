// SPDX-License-Identifier: Apache-2.0
// Where `headroomctl tune recommend` reads history: a Prometheus server's
// HTTP API (range queries, JSON) or headroomd's own /metrics (the text
// exposition). The parsers and the assembly into per-endpoint histories are
// pure and table-tested; http_get() is the one place that does I/O.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/ctl/tune_model.h"
#include "headroom/orca/result.h"

namespace headroom::ctl::tune {

inline constexpr std::chrono::seconds kHttpTimeout{10};

struct HttpResponse {
  long status = 0;
  std::string body;
};
// One GET with libcurl, at most kHttpTimeout. The error is curl's reason
// ("Failed to connect to 127.0.0.1 port 1 ..."), for the caller to say which
// URL and flag it concerns; an HTTP status is not an error.
Result<HttpResponse> http_get(const std::string& url);

using Labels = std::map<std::string, std::string>;

// ---------------------------------------------------------------- Prometheus

struct Series {
  Labels labels;  // without __name__ unless the query kept it
  std::vector<std::pair<double, double>> points;  // (unix seconds, value); "NaN", "+Inf" as doubles
};
// A /api/v1/query_range answer: its "matrix" result. A body with "status":
// "error" is an error quoting Prometheus' errorType and error; so is anything
// that is not such JSON (the error quotes its start).
Result<std::vector<Series>> parse_query_range(std::string_view body);

// "%20"-style escaping of a query parameter's value.
std::string url_encode(std::string_view text);
// BASE/api/v1/query_range?query=...&start=...&end=...&step=...; BASE without
// a trailing '/'.
std::string query_range_url(std::string_view base, std::string_view query, int64_t start, int64_t end,
                            std::chrono::seconds step);

// The queries, one per quantity, each for every endpoint at once. `endpoints`
// narrows them with a regex matcher when not empty. avg_over_time()'s window
// is the step less 1 ms, so each raw sample counts in one step; rate()'s is
// max(2 steps, a step and a minute), as it needs two samples.
struct Queries {
  std::string rate, window_quantiles, window_requests, signals, node_cpu, histogram;
};
Queries build_queries(const std::vector<std::string>& endpoints, std::chrono::seconds step);

// What the queries returned, assembled per endpoint over the steps
// start, start + step, ... end. Series of one endpoint from several
// headroomd (several Prometheus targets) are combined: the window percentiles
// weighted by their window requests, the rates and histograms summed.
struct PrometheusAnswers {
  std::vector<Series> rate, window_quantiles, window_requests, signals, node_cpu, histogram;
};
struct History {
  std::map<std::string, EndpointHistory> endpoints;  // every endpoint any series named
  std::vector<double> node_cpu;
};
History assemble(const PrometheusAnswers& a, int64_t start, std::chrono::seconds step, std::size_t steps);

// ---------------------------------------------------------------- /metrics

struct Sample {
  std::string name;
  Labels labels;
  double value = 0;
};
// The text exposition format (version 0.0.4): comments and blank lines
// skipped, label values unescaped (\\, \", \n), NaN, +Inf and -Inf read, an
// optional timestamp ignored. The error names the line.
Result<std::vector<Sample>> parse_exposition(std::string_view text);

// headroomd's /metrics -> a one-step cumulative history of each endpoint
// (its aggregate series: no endpoint_instance label): the histogram since
// headroomd started and the signals' current values.
History history_from_metrics(const std::vector<Sample>& samples);

}  // namespace headroom::ctl::tune
