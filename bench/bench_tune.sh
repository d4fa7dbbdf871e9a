#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# How long `headroomctl tune recommend` takes over a week of history at 15 s
# resolution for 64 endpoints, from a Prometheus loaded by the benchmark, and
# what Prometheus itself costs for the range queries recommend makes
# (docs/benchmarks.md, "tune recommend over a week of history"). From an
# existing build directory; it builds nothing.
#
#   bench/bench_tune.sh BUILD_DIR [--runs 5] [--cache DIR] [--max-age-days 7]
#                       [--histogram-only]
#
# The first run generates the history (bench/tune_history.py: 64 endpoints
# ep00..ep63, 7 days every 15 s, ~9 GB of OpenMetrics written and imported
# 2 h at a time with promtool, then compacted by Prometheus) into
# /var/cache/headroom-build/bench-tune/ (--cache), about 10 minutes; later
# runs reuse it until the history ended more than --max-age-days ago. Then
# Prometheus runs on a copy of the blocks (hard links) on a loopback port,
# the six range queries are timed with curl, and, when BUILD_DIR's
# headroomctl has `tune recommend`, recommend is timed RUNS times and its
# answer checked against the generated distributions (exit 1 when it is off
# by more than 10 %). --histogram-only: a history without the percentile
# gauges (a headroomd from before them; its own cache entry), so recommend
# falls back to the histogram; its answer is checked against the histogram's
# resolution (inside the bucket that holds the quantile). Needs python3
# (3.11: tomllib), curl, and Debian's prometheus (prometheus, promtool).
# The run's directory (the copy, the logs) is made under the cache and
# removed at the end (also on SIGTERM); every process started is stopped by
# its id. Not run in CI.
set -eu

build=""
cache=/var/cache/headroom-build/bench-tune
runs=5
max_age=7
extra=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) [ $# -ge 2 ] || { echo "bench_tune.sh: --runs needs a number" >&2; exit 2; }; runs=$2; shift ;;
    --cache) [ $# -ge 2 ] || { echo "bench_tune.sh: --cache needs a directory" >&2; exit 2; }; cache=$2; shift ;;
    --max-age-days) [ $# -ge 2 ] || { echo "bench_tune.sh: --max-age-days needs a number" >&2; exit 2; }; max_age=$2; shift ;;
    --histogram-only) extra=--no-percentiles ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    -*) echo "bench_tune.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
if [ -z "$build" ]; then
  echo "usage: bench/bench_tune.sh BUILD_DIR [--runs 5] [--cache DIR] [--max-age-days 7] [--histogram-only]" >&2
  exit 2
fi
fail() { echo "bench_tune.sh: $*" >&2; exit 2; }
[ -d "$build" ] || fail "$build: no such directory"
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
ctl="$build/agent/headroomctl"
[ -x "$ctl" ] || fail "$ctl not built; run: cmake --build $build --target headroomctl"
for t in python3 curl prometheus promtool; do
  command -v "$t" >/dev/null || fail "$t not found (apt-get install -y python3 curl prometheus)"
done
mkdir -p "$cache" || fail "cannot create $cache (--cache DIR)"

work=$(mktemp -d "$cache/run.XXXXXX")
driver=""
cleanup() {
  if [ -n "$driver" ]; then
    kill -TERM "$driver" 2>/dev/null || true
    wait "$driver" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

echo "# headroomctl tune recommend over a week of history"
echo "date:       $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "commit:     $(git -C "$here/.." describe --always --dirty 2>/dev/null || echo '?')"
echo "kernel:     $(uname -r)"
echo "nproc:      $(nproc)"
echo "cpu:        $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "load:       $(cat /proc/loadavg)"
echo "prometheus: $(prometheus --version 2>&1 | head -n1)"
echo "work:       $work"
echo

python3 "$here/bench_tune.py" run --work "$work" --headroomctl "$ctl" --runs "$runs" --cache "$cache" \
  --max-age-days "$max_age" $extra &
driver=$!
rc=0
wait "$driver" || rc=$?
driver=""
echo
echo "load at end: $(cat /proc/loadavg)"
exit "$rc"
