#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# What a Prometheus scrape of headroomd's `[prometheus] listen` costs, side by
# side with node_exporter's default collectors on the same machine in the same
# run, and whether being scraped moves the ORCA tick (docs/benchmarks.md,
# "bench_prometheus.sh: scrape cost and tick timing"). From an existing build
# directory; it builds nothing.
#
#  1. cost: headroomd with N = 1, 16, 256 [[endpoint]]s (a few carry light
#     traffic from hr-test-load to hr-test-server) and node_exporter, both on
#     127.0.0.1. Cycles of 1 s windows on one grid, for each of headroomd,
#     node_exporter as Prometheus scrapes it (gzip) and node_exporter plain:
#     an idle second, then 8 scrapes in a second. CPU per scrape = (the
#     scrape window's CPU - the idle window's before it) / 8, from the
#     process CPU clock (all threads, ns); median and p10/p90 over cycles,
#     the ratio headroomd / node_exporter per cycle; the scrapes' wall
#     latency, the exposition's size and series count.
#  2. ticks: headroomd at N = 16 and 256, interleaved windows of 8 s: not
#     scraped (U), scraped once a second (S1), ten times a second (S10), and
#     ten times a second with each scrape started 1 ms before node.orca is
#     usually renamed (C10, the worst case). The period between renames of
#     node.orca (inotify on the file), p50/p99/max and the jitter p99 - p50;
#     how late each rename is against its usual time in the 100 ms cycle;
#     the tick thread's run-queue wait (schedstat).
#
#   sudo bench/bench_prometheus.sh BUILD_DIR [--quick] [--only cost,ticks]
#
# --quick: a smoke run under a minute (N = 1 and 16, 2 cycles, 2 s tick
# windows) that checks the benchmark still runs; its figures are not
# measurements of the goals. --only: the listed parts. Needs root (the eBPF
# endpoint probe), python3, prometheus-node-exporter; the helper
# bench/bench_prometheus.py does the measuring. Everything temporary is in a
# fresh directory under /dev/shm, removed at the end (also on SIGTERM); every
# process started is stopped by its id. About 9.5 minutes; --only cost about 5.
set -eu

quick=0
only="cost,ticks"
build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --only) [ $# -ge 2 ] || { echo "bench_prometheus.sh: --only needs a list" >&2; exit 2; }; only=$2; shift ;;
    --only=*) only=${1#--only=} ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    -*) echo "bench_prometheus.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
if [ -z "$build" ]; then
  echo "usage: sudo bench/bench_prometheus.sh BUILD_DIR [--quick] [--only cost,ticks]" >&2
  exit 2
fi
fail() { echo "bench_prometheus.sh: $*" >&2; exit 2; }
[ -d "$build" ] || fail "$build: no such directory"
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || fail "needs root (headroomd's eBPF endpoint probe)"
for b in agent/headroomd tests/tools/hr-test-server tests/tools/hr-test-load; do
  [ -x "$build/$b" ] || fail "$build/$b not built; run: cmake --build $build --target headroomd hr-test-server hr-test-load"
done
command -v python3 >/dev/null || fail "python3 not found"
node_exporter=$(command -v prometheus-node-exporter || command -v node_exporter || true)
[ -n "$node_exporter" ] || fail "node_exporter not found (apt-get install -y prometheus-node-exporter)"
[ -r /sys/kernel/btf/vmlinux ] || fail "no /sys/kernel/btf/vmlinux: the endpoint probe needs a kernel with BTF"

work=$(mktemp -d /dev/shm/hr-bench-prometheus.XXXXXX)
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

echo "# headroom Prometheus scrape benchmark$( [ "$quick" -eq 1 ] && echo ' (--quick: smoke run, not a measurement)')"
echo "date:    $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "commit:  $(git -C "$here/.." describe --always --dirty 2>/dev/null || echo '?')"
echo "kernel:  $(uname -r)"
echo "nproc:   $(nproc)"
echo "cpu:     $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "load:    $(cat /proc/loadavg)"
echo "python:  $(python3 --version 2>&1)"
echo "work:    $work"
echo

set -- run --build "$build" --work "$work" --node-exporter "$node_exporter" --only "$only"
[ "$quick" -eq 1 ] && set -- "$@" --quick
python3 "$here/bench_prometheus.py" "$@" &
driver=$!
rc=0
wait "$driver" || rc=$?
driver=""
echo
echo "load at end: $(cat /proc/loadavg)"
exit "$rc"
