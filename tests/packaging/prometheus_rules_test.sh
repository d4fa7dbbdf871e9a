#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Prometheus recording rules and alerts of packaging/prometheus/: both files
# pass `promtool check rules` (lint errors fatal), every unit test in
# packaging/prometheus/tests/ passes `promtool test rules`, and every recording
# rule and alert is tested (each alert both firing and not firing).
#   prometheus_rules_test.sh SOURCE_DIR
# promtool comes with Debian's `prometheus` package; $PROMTOOL overrides it.
# Without it the test fails in CI (CI=true) and skips loudly (77) elsewhere.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 SOURCE_DIR" >&2; exit 64; }
dir=$1/packaging/prometheus
promtool=${PROMTOOL:-promtool}

if ! command -v "$promtool" >/dev/null 2>&1; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: promtool not installed (CI=true); apt-get install prometheus" >&2
    exit 1
  fi
  echo "*****************************************************************" >&2
  echo "SKIPPED: promtool not installed (apt-get install prometheus)" >&2
  echo "*****************************************************************" >&2
  exit 77
fi

rules=$dir/headroom-rules.yml
alerts=$dir/headroom-alerts.yml
for f in "$rules" "$alerts"; do
  [ -f "$f" ] || { echo "FAIL: $f is missing" >&2; exit 1; }
done
set -- "$dir"/tests/*.yml
[ -f "$1" ] || { echo "FAIL: no unit tests in $dir/tests/" >&2; exit 1; }

failed=0
run() {
  echo "+ $*"
  if ! "$@"; then
    echo "FAIL: $*" >&2
    failed=$((failed + 1))
  fi
}

"$promtool" --version 2>&1 | head -n 1
run "$promtool" check rules --lint-fatal "$rules" "$alerts"
run "$promtool" test rules "$@"

# Coverage: every recorded name is queried by a test, and every alert has a
# case where it fires and one where it does not (`exp_alerts: []`).
echo "+ coverage of $rules and $alerts by $dir/tests/*.yml"
for name in $(sed -n 's/^ *- record: *//p' "$rules" | sort -u); do
  if ! grep -q -- "expr: *$name\$" "$@"; then
    echo "FAIL: recording rule $name: no promql_expr_test queries it" >&2
    failed=$((failed + 1))
  fi
done
cases=$(awk '
  /^ *alertname:/ { name = $2; next }
  /^ *exp_alerts:/ && name != "" {
    if ($0 ~ /\[\] *$/) quiet[name] = 1; else fires[name] = 1
    name = ""
  }
  END { for (n in fires) print n " fires"; for (n in quiet) print n " quiet" }
' "$@")
for name in $(sed -n 's/^ *- alert: *//p' "$alerts" | sort -u); do
  for want in fires quiet; do
    if ! printf '%s\n' "$cases" | grep -qx "$name $want"; then
      echo "FAIL: alert $name: no test case where it $( [ $want = fires ] && echo fires || echo 'does not fire')" >&2
      failed=$((failed + 1))
    fi
  done
done

if [ "$failed" -ne 0 ]; then
  echo "FAIL: $failed check(s) failed" >&2
  exit 1
fi
echo "PASS: rules and alerts check, their unit tests pass, every rule and alert is tested"
