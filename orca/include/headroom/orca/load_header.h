// SPDX-License-Identifier: Apache-2.0
// ORCA load reports as HTTP response headers, for a backend (or a sidecar in
// front of it) that hands its load to Envoy per response:
//
//   endpoint-load-metrics: TEXT cpu_utilization=0.7,application_utilization=0.8,...
//   endpoint-load-metrics-bin: <base64 of the binary OrcaLoadReport>
//
// The builders never produce a value Envoy's parser would reject, because one
// bad entry makes Envoy drop the whole report. The rules, and where each comes
// from (Envoy source/common/orca/orca_parser.cc and
// test/common/orca/orca_parser_test.cc), are listed in load_header.cc.
#pragma once

#include <string>
#include <string_view>

#include "headroom/orca/report.h"
#include "headroom/orca/result.h"

namespace headroom::orca {

// Header names Envoy reads (orca_parser.h: kEndpointLoadMetricsHeader{,Bin}).
inline constexpr std::string_view kLoadMetricsHeader = "endpoint-load-metrics";
inline constexpr std::string_view kLoadMetricsBinHeader = "endpoint-load-metrics-bin";
// Format prefix of the TEXT form, space included (kHeaderFormatPrefixText).
inline constexpr std::string_view kTextFormatPrefix = "TEXT ";

// The value of endpoint-load-metrics in TEXT form: "TEXT " then comma-separated
// key=value pairs, no spaces. Written:
//   - cpu_utilization always (0 when unusable), so the value is never just the
//     prefix, which an HTTP stack would trim to "TEXT" and Envoy reject;
//   - mem_utilization, application_utilization, rps_fractional, eps when > 0
//     (a zero is the same as absent in proto3 and in Envoy);
//   - named_metrics.<k> and utilization.<k> for every entry whose key and value
//     pass the rules below, sorted by key so the output is deterministic.
// Dropped: values that are NaN, infinite or negative; mem_utilization and
// utilization values above 1; keys that are empty or hold anything but visible
// ASCII other than ',', '=' and ':'; request_cost and rps (Envoy's TEXT
// parser rejects those names). Numbers are the shortest decimal that reads
// back to the same double, so parse_text_header_value restores them exactly.
std::string text_header_value(const Report& report);

// The value of endpoint-load-metrics-bin: standard base64 with padding of the
// serialized report (map entries sorted by key), after dropping the same
// unusable values as the TEXT form and map keys that are empty or not UTF-8
// (protobuf refuses to parse those); other keys, request_cost and rps are kept.
// Never empty: Envoy rejects an empty value, so a report with nothing set is
// encoded with an explicit cpu_utilization = 0, which decodes to the same report.
std::string bin_header_value(const Report& report);

// Parses a TEXT value by Envoy's rules: the "TEXT " prefix; tokens split on
// ',' with surrounding whitespace trimmed and empty tokens skipped; key and
// value split at the first '=' (or ':' when there is no '='); keys
// cpu_utilization, mem_utilization, application_utilization, rps_fractional,
// eps, named_metrics.<k>, utilization.<k> with <k> non-empty. The whole value
// is rejected on an unknown prefix or key, a repeated key, an empty or
// unparsable value, or one that is NaN, infinite or negative; the error names
// the offending key.
Result<Report> parse_text_header_value(std::string_view value);

// Parses an endpoint-load-metrics-bin value: base64 (padded or not, as Envoy
// accepts both), then the binary message. Stricter than Envoy, which takes any
// message that parses: values that are NaN, infinite or negative are rejected
// too, naming the field, so both forms obey the same value rules.
Result<Report> parse_bin_header_value(std::string_view value);

// RFC 4648 base64, standard alphabet ('+', '/'), '=' padding.
std::string base64_encode(std::string_view bytes);
// Accepts padded and unpadded input; rejects other characters, impossible
// lengths, misplaced padding and non-zero trailing bits.
Result<std::string> base64_decode(std::string_view text);

}  // namespace headroom::orca
