#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# What headroomd's out-of-band ORCA streams ([oob], docs/oob.md) cost the
# agent (docs/benchmarks.md, "Out-of-band streams"), from an existing build
# directory; it builds nothing.
#
# One headroomd (agent.interval = 100ms, orca_dir on /dev/shm, [oob] listen on
# 127.0.0.1, max_streams 2000, --no-ebpf) for the whole run. In rounds, each
# variant gets a slice of its own, the order rotated each round: 0 streams;
# 1, 100, 1000 streams at report_interval 100 ms and at Envoy's default 10 s,
# one connection per stream; 1000 streams at 100 ms on one connection. A fresh
# bench_oob_client opens the streams; once each had its first message and
# 2 s more, the slice measures 15 s: headroomd's CPU (process CPU clock and
# /proc/PID/stat) and per thread, VmRSS / VmHWM, the messages delivered (each
# parsed and validated by the client) and their gaps, and the period between
# renames of node.orca (bench_oob_client --watch-ticks, SCHED_FIFO). The
# summary gives medians and min-max over rounds, CPU per message above the
# same round's 0-stream slice, tick deviation. After the rounds, the memory
# phase: a fresh headroomd per variant (twice each), VmRSS / RssAnon before
# the client, with its streams open and after they closed (the long-running
# daemon keeps what its largest variant made it allocate, so its RSS says
# nothing about the smaller ones). Last the summary, with goal met / MISSED.
#
#   bench/bench_oob.sh BUILD_DIR [--quick] [-- extra bench_oob.py flags]
#
# --quick: a smoke run of about 70 s (1 round of 5 variants, 4 s slices,
# memory once) that shows the benchmark still runs; its figures are not
# measurements of the goals. Full run: 5 rounds of 8 variants and the memory
# phase, about 15 minutes. Root is not needed, but without it (or
# CAP_SYS_NICE) the tick observer is not SCHED_FIFO and its own wake-up
# delays are in the tick figures. The client shares the machine's CPUs with
# headroomd: its CPU is printed. Everything
# temporary is in a fresh directory under /dev/shm, removed at the end (also
# on SIGTERM); every process started is stopped by its id.
set -eu

quick=0
build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) echo "bench_oob.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
if [ -z "$build" ]; then
  echo "usage: bench/bench_oob.sh BUILD_DIR [--quick] [-- extra bench_oob.py flags]" >&2
  exit 2
fi
fail() { echo "bench_oob.sh: $*" >&2; exit 2; }
[ -d "$build" ] || fail "$build: no such directory"
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
for b in agent/headroomd bench/bench_oob_client; do
  [ -x "$build/$b" ] || fail "$build/$b not built; run: cmake --build $build --target headroomd bench_oob_client"
done
command -v python3 >/dev/null || fail "python3 not found"
# One descriptor per connection on both sides: 1000 streams on 1000 connections.
[ "$(ulimit -n)" -ge 4096 ] 2>/dev/null || ulimit -n 4096 2>/dev/null || \
  fail "ulimit -n is $(ulimit -n) and cannot be raised to 4096 (1000 connections on each side)"

work=$(mktemp -d /dev/shm/hr-bench-oob.XXXXXX)
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

echo "# headroom out-of-band stream benchmark$( [ "$quick" -eq 1 ] && echo ' (--quick: smoke run, not a measurement)')"
echo "date:    $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "commit:  $(git -C "$here/.." describe --always --dirty 2>/dev/null || echo '?')"
echo "kernel:  $(uname -r)"
echo "nproc:   $(nproc) (the client runs on the same CPUs as headroomd)"
echo "cpu:     $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "load:    $(cat /proc/loadavg)"
echo "grpc:    $(pkg-config --modversion grpc++ 2>/dev/null || echo '?')"
echo "work:    $work ($(stat -f -c %T "$work"))"
echo

set -- run --build "$build" --work "$work" "$@"
[ "$quick" -eq 1 ] && set -- "$@" --quick
python3 "$here/bench_oob.py" "$@" &
driver=$!
rc=0
wait "$driver" || rc=$?
driver=""
echo
echo "load at end: $(cat /proc/loadavg)"
exit "$rc"
