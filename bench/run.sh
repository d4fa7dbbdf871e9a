#!/usr/bin/env bash
# Runs the three benchmarks from an existing build directory (it builds nothing)
# and prints their tables with the machine's context.
#
#   bench/run.sh [--quick] BUILD_DIR
#
# --quick: a smoke run (fewer iterations, daemon for 5 s) that checks the
# benchmarks still run; its figures are not measurements of the goals.
set -euo pipefail

quick=0
build=""
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $arg" >&2; exit 2 ;;
    *) build="$arg" ;;
  esac
done
if [[ -z "$build" ]]; then
  echo "usage: bench/run.sh [--quick] BUILD_DIR" >&2
  exit 2
fi

bin="$build/bench"
for b in bench_publish bench_reader_latency bench_daemon_cpu; do
  if [[ ! -x "$bin/$b" ]]; then
    echo "run.sh: $bin/$b not built; run: cmake --build $build --target bench_publish bench_reader_latency bench_daemon_cpu" >&2
    exit 2
  fi
done

if (( quick )); then
  publish_args=(--iterations 2000 --warmup 100 --cold 5)
  reader_args=(--updates 500)
  daemon_args=(--seconds 5 --warmup-seconds 1 --split-ticks 10)
else
  publish_args=()
  reader_args=()
  daemon_args=()
fi

echo "# headroom benchmarks$( (( quick )) && echo ' (--quick: smoke run, not a measurement)')"
echo "date:    $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "kernel:  $(uname -r)"
echo "nproc:   $(nproc)"
echo "cpu:     $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "load:    $(cat /proc/loadavg)"
echo

"$bin/bench_publish" "${publish_args[@]}"
echo
"$bin/bench_reader_latency" "${reader_args[@]}"
echo
"$bin/bench_daemon_cpu" "${daemon_args[@]}"
echo
echo "load at end: $(cat /proc/loadavg)"
