// SPDX-License-Identifier: Apache-2.0
#include "agent/ctl/tune_sources.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

namespace headroom::ctl::tune {

namespace {

size_t append_body(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// "0.25", "NaN", "+Inf", "-Inf" (Prometheus' and the exposition's spellings).
std::optional<double> parse_number(std::string_view text) {
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (text == "+Inf" || text == "Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

std::string excerpt(std::string_view body) {
  std::string s(body.substr(0, 200));
  std::replace(s.begin(), s.end(), '\n', ' ');
  return "\"" + s + (body.size() > 200 ? "...\"" : "\"");
}

}  // namespace

Result<HttpResponse> http_get(const std::string& url) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return logic_error("GET " + url + ": libcurl could not start a transfer");
  HttpResponse out;
  char reason[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(kHttpTimeout.count()));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out.body);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, reason);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "headroomctl-tune");
  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out.status);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) return logic_error(reason[0] != '\0' ? std::string(reason) : curl_easy_strerror(rc));
  return out;
}

// ---------------------------------------------------------------- Prometheus

Result<std::vector<Series>> parse_query_range(std::string_view body) {
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return logic_error("the answer is not Prometheus API JSON: " + excerpt(body));
  if (doc.value("status", "") != "success") {
    const std::string type = doc.contains("errorType") && doc["errorType"].is_string() ? doc["errorType"].get<std::string>() : "";
    const std::string error = doc.contains("error") && doc["error"].is_string() ? doc["error"].get<std::string>() : excerpt(body);
    return logic_error("Prometheus answered " + (type.empty() ? "" : type + ": ") + error);
  }
  const auto data = doc.find("data");
  if (data == doc.end() || !data->is_object() || data->value("resultType", "") != "matrix" ||
      !data->contains("result") || !(*data)["result"].is_array())
    return logic_error("Prometheus' answer has no \"matrix\" result: " + excerpt(body));
  std::vector<Series> out;
  for (const auto& r : (*data)["result"]) {
    Series s;
    if (r.contains("metric") && r["metric"].is_object())
      for (const auto& [k, v] : r["metric"].items())
        if (v.is_string()) s.labels[k] = v.get<std::string>();
    if (r.contains("values") && r["values"].is_array()) {
      s.points.reserve(r["values"].size());
      for (const auto& p : r["values"]) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_string())
          return logic_error("Prometheus' answer has a point that is not [time, \"value\"]: " + p.dump());
        const auto v = parse_number(p[1].get_ref<const std::string&>());
        if (!v) return logic_error("Prometheus' answer has a value that is not a number: " + p.dump());
        s.points.emplace_back(p[0].get<double>(), *v);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string url_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string query_range_url(std::string_view base, std::string_view query, int64_t start, int64_t end,
                            std::chrono::seconds step) {
  return std::string(base) + "/api/v1/query_range?query=" + url_encode(query) + "&start=" + std::to_string(start) +
         "&end=" + std::to_string(end) + "&step=" + std::to_string(step.count());
}

Queries build_queries(const std::vector<std::string>& endpoints, std::chrono::seconds step) {
  std::string sel = "endpoint_instance=\"\"";
  if (!endpoints.empty()) {
    std::string re;
    for (const auto& e : endpoints) {
      if (!re.empty()) re += '|';
      for (char c : e) {
        if (c == '.') re += "\\\\";  // a regex's \. inside a PromQL string
        re += c;
      }
    }
    sel += ",endpoint=~\"" + re + "\"";
  }
  // A millisecond short of the step: Prometheus before 3.0 includes both ends
  // of a range, so a [step] window would count a sample on a step's edge in
  // two steps; this counts each sample once with either.
  const std::string w = "[" + std::to_string(step.count() * 1000 - 1) + "ms]";
  // rate() needs two samples in its window, which one step of the scrape
  // interval does not hold: the counters' window reaches back at least a
  // minute more. Their per-step figure is a rate (the histogram's times the
  // step), so steps that share samples still add up to the total.
  const std::string rw = "[" + std::to_string(std::max(step * 2, step + std::chrono::seconds(60)).count()) + "s]";
  Queries q;
  q.rate = "sum by (endpoint) (rate(headroom_endpoint_requests_total{" + sel + "}" + rw + "))";
  q.window_quantiles = "avg_over_time(headroom_endpoint_latency_seconds{" + sel + "}" + w + ")";
  q.window_requests = "avg_over_time(headroom_endpoint_window_requests{" + sel + "}" + w + ")";
  q.signals = "max by (endpoint, signal) (avg_over_time(headroom_utilization_ratio{scope=\"endpoint\"," + sel + "}" + w + "))";
  q.node_cpu = "max(avg_over_time(headroom_cpu_utilization_ratio{scope=\"node\"}" + w + "))";
  q.histogram = "sum by (endpoint, le) (rate(headroom_endpoint_request_duration_seconds_bucket{" + sel + "}" + rw +
                ")) * " + std::to_string(step.count());
  return q;
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Each point's value at its step; points off the grid or out of range are left out.
template <class Fn>
void for_each_step(const Series& s, int64_t start, std::chrono::seconds step, std::size_t steps, Fn&& fn) {
  for (const auto& [t, v] : s.points) {
    const double i = std::round((t - static_cast<double>(start)) / static_cast<double>(step.count()));
    if (i < 0 || i >= static_cast<double>(steps)) continue;
    fn(static_cast<std::size_t>(i), v);
  }
}

std::string label_of(const Labels& l, const std::string& name) {
  auto it = l.find(name);
  return it == l.end() ? std::string() : it->second;
}

// The series' labels but `leave`: what tells one headroomd's series from another's.
std::string source_key(Labels l, std::initializer_list<const char*> leave) {
  for (const char* k : leave) l.erase(k);
  std::string out;
  for (const auto& [k, v] : l) out += k + "=" + v + ",";
  return out;
}

// 0.9 from percentile="90" (headroomd) or quantile="0.9".
std::optional<double> quantile_of(const Labels& l) {
  if (auto p = l.find("percentile"); p != l.end())
    if (auto v = parse_number(p->second)) return *v / 100;
  if (auto q = l.find("quantile"); q != l.end()) return parse_number(q->second);
  return std::nullopt;
}

void add_nan_aware(double& into, double v) {
  if (!std::isfinite(v)) return;
  into = std::isnan(into) ? v : into + v;
}

void assemble_quantiles(const PrometheusAnswers& a, int64_t start, std::chrono::seconds step, std::size_t steps,
                        History& out) {
  // Window requests per source (one headroomd's endpoint) and step.
  std::map<std::string, std::vector<double>> weights;
  for (const Series& s : a.window_requests) {
    auto& w = weights[source_key(s.labels, {"__name__"})];
    w.assign(steps, kNaN);
    EndpointHistory& h = out.endpoints[label_of(s.labels, "endpoint")];
    h.window_requests.resize(steps, kNaN);
    for_each_step(s, start, step, steps, [&](std::size_t i, double v) {
      w[i] = v;
      add_nan_aware(h.window_requests[i], v);
    });
  }
  // Per endpoint and quantile: sum(value x weight) and sum(weight) per step.
  std::map<std::pair<std::string, double>, std::pair<std::vector<double>, std::vector<double>>> sums;
  for (const Series& s : a.window_quantiles) {
    const auto q = quantile_of(s.labels);
    if (!q) continue;
    const std::string name = label_of(s.labels, "endpoint");
    auto wit = weights.find(source_key(s.labels, {"__name__", "percentile", "quantile"}));
    auto& [vw, ww] = sums[{name, *q}];
    vw.resize(steps, 0);
    ww.resize(steps, 0);
    for_each_step(s, start, step, steps, [&](std::size_t i, double v) {
      const double w = wit == weights.end() ? 1.0 : wit->second[i];
      if (!std::isfinite(v) || !(w > 0)) return;
      vw[i] += v * w;
      ww[i] += w;
    });
  }
  for (const auto& [key, sw] : sums) {
    EndpointHistory& h = out.endpoints[key.first];
    std::vector<double>& series = h.window_quantiles[key.second];
    series.assign(steps, kNaN);
    for (std::size_t i = 0; i < steps; ++i)
      if (sw.second[i] > 0) series[i] = sw.first[i] / sw.second[i];
  }
}

void assemble_histograms(const std::vector<Series>& histogram, int64_t start, std::chrono::seconds step,
                         std::size_t steps, History& out) {
  // endpoint -> le -> increase per step
  std::map<std::string, std::map<double, std::vector<double>>> buckets;
  for (const Series& s : histogram) {
    const auto le = parse_number(label_of(s.labels, "le"));
    if (!le) continue;
    auto& b = buckets[label_of(s.labels, "endpoint")][*le];
    b.resize(steps, kNaN);
    for_each_step(s, start, step, steps, [&](std::size_t i, double v) { add_nan_aware(b[i], v); });
  }
  for (const auto& [name, by_le] : buckets) {
    EndpointHistory& h = out.endpoints[name];
    h.histogram_steps.assign(steps, {});
    for (std::size_t i = 0; i < steps; ++i) {
      Histogram& hist = h.histogram_steps[i];
      for (const auto& [le, series] : by_le) {
        hist.le.push_back(le);
        hist.cumulative.push_back(std::isfinite(series[i]) ? series[i] : 0);
      }
    }
  }
}

}  // namespace

History assemble(const PrometheusAnswers& a, int64_t start, std::chrono::seconds step, std::size_t steps) {
  History out;
  for (const Series& s : a.rate) {
    EndpointHistory& h = out.endpoints[label_of(s.labels, "endpoint")];
    h.rate.resize(steps, kNaN);
    for_each_step(s, start, step, steps, [&](std::size_t i, double v) { add_nan_aware(h.rate[i], v); });
  }
  assemble_quantiles(a, start, step, steps, out);
  assemble_histograms(a.histogram, start, step, steps, out);
  for (const Series& s : a.signals) {
    EndpointHistory& h = out.endpoints[label_of(s.labels, "endpoint")];
    auto& series = h.signals["utilization." + label_of(s.labels, "signal")];
    series.resize(steps, kNaN);
    for_each_step(s, start, step, steps, [&](std::size_t i, double v) {
      series[i] = std::isnan(series[i]) ? v : std::max(series[i], v);
    });
  }
  out.node_cpu.assign(steps, kNaN);
  for (const Series& s : a.node_cpu)
    for_each_step(s, start, step, steps, [&](std::size_t i, double v) {
      out.node_cpu[i] = std::isnan(out.node_cpu[i]) ? v : std::max(out.node_cpu[i], v);
    });
  for (auto& [name, h] : out.endpoints) {
    h.name = name;
    h.step_seconds = static_cast<double>(step.count());
    h.rate.resize(steps, kNaN);
  }
  return out;
}

// ---------------------------------------------------------------- /metrics

namespace {

bool name_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

// One sample line; an error message without the line number.
Result<Sample, std::string> parse_sample(std::string_view line) {
  Sample s;
  std::size_t i = 0;
  while (i < line.size() && name_char(line[i], i == 0)) ++i;
  if (i == 0) return std::string("expected a metric name");
  s.name = std::string(line.substr(0, i));
  if (i < line.size() && line[i] == '{') {
    ++i;
    for (;;) {
      while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      const std::size_t k = i;
      while (i < line.size() && name_char(line[i], i == k)) ++i;
      if (i == k || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"')
        return std::string("expected label=\"value\" in the braces");
      const std::string key(line.substr(k, i - k));
      i += 2;
      std::string value;
      for (; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] != '\\' || i + 1 >= line.size()) {
          value += line[i];
          continue;
        }
        const char e = line[++i];
        value += e == 'n' ? '\n' : e;  // \\ and \" stand for themselves
      }
      if (i >= line.size()) return "label " + key + "'s value has no closing quote";
      ++i;
      s.labels[key] = std::move(value);
    }
  }
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  std::size_t end = i;
  while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
  const auto v = parse_number(line.substr(i, end - i));
  if (!v) return "the value " + std::string(line.substr(i, end - i)) + " is not a number";
  s.value = *v;
  return s;
}

}  // namespace

Result<std::vector<Sample>> parse_exposition(std::string_view text) {
  std::vector<Sample> out;
  std::size_t number = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    auto s = parse_sample(line);
    if (!s) return logic_error("line " + std::to_string(number) + ": " + s.error() + ": " + excerpt(line));
    out.push_back(std::move(*s));
  }
  return out;
}

History history_from_metrics(const std::vector<Sample>& samples) {
  History out;
  std::map<std::string, std::map<double, double>> buckets;
  for (const Sample& s : samples) {
    if (s.labels.contains("endpoint_instance")) continue;
    const std::string name = label_of(s.labels, "endpoint");
    if (s.name == "headroom_endpoint_request_duration_seconds_bucket") {
      if (auto le = parse_number(label_of(s.labels, "le"))) buckets[name][*le] = s.value;
    } else if (s.name == "headroom_utilization_ratio" && label_of(s.labels, "scope") == "endpoint") {
      out.endpoints[name].signals["utilization." + label_of(s.labels, "signal")] = {s.value};
    } else if (s.name == "headroom_cpu_utilization_ratio" && label_of(s.labels, "scope") == "node") {
      out.node_cpu = {s.value};
    } else if (s.name == "headroom_endpoint_window_requests") {
      out.endpoints[name].window_requests = {s.value};
    }
  }
  for (const auto& [name, by_le] : buckets) {
    Histogram h;
    for (const auto& [le, n] : by_le) {
      h.le.push_back(le);
      h.cumulative.push_back(n);
    }
    out.endpoints[name].histogram_steps = {std::move(h)};
  }
  for (auto& [name, h] : out.endpoints) {
    h.name = name;
    h.cumulative = true;
    if (h.histogram_steps.empty()) continue;
    h.rate = {h.histogram_steps[0].count()};
  }
  return out;
}

}  // namespace headroom::ctl::tune
