#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the benchmarks from an existing build directory (it builds nothing)
# and prints their tables with the machine's context: the three daemon
# benchmarks, the dependency gate's (bench_gate), then the eBPF endpoint
# probes' (bench/bench_endpoints.sh, with bench_ebpf_floor).
#
#   bench/run.sh [--quick] [--no-endpoints] BUILD_DIR
#
# --quick: a smoke run (fewer iterations, daemon for 5 s) that checks the
# benchmarks still run; its figures are not measurements of the goals.
# --no-endpoints: skip bench_endpoints.sh (about 9 minutes; root, nginx, wrk,
# bpftool, jq). Without root or those tools it is skipped with the reason.
set -euo pipefail

quick=0
endpoints=1
build=""
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-endpoints) endpoints=0 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $arg" >&2; exit 2 ;;
    *) build="$arg" ;;
  esac
done
if [[ -z "$build" ]]; then
  echo "usage: bench/run.sh [--quick] [--no-endpoints] BUILD_DIR" >&2
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
# The dependency gate's decision cost: a few seconds, no root.
if [[ -x "$bin/bench_gate" ]]; then
  if (( quick )); then "$bin/bench_gate" --rounds 3 --calls 200000; else "$bin/bench_gate"; fi
else
  echo "# bench_gate skipped: not built (cmake --build $build --target bench_gate)"
fi
echo

# The endpoint probes' benchmark drives nginx and wrk and loads eBPF: it needs
# root and those tools; without them it is skipped, not failed.
endpoints_skip=""
if (( ! endpoints )); then
  endpoints_skip="--no-endpoints"
elif (( EUID != 0 )); then
  endpoints_skip="needs root"
else
  for tool in nginx wrk bpftool jq; do
    command -v "$tool" >/dev/null || endpoints_skip="${endpoints_skip:+$endpoints_skip, }$tool not installed"
  done
  for b in bench/bench_syscall_overhead bench/bench_open_conns bench/bench_ebpf_floor agent/headroomd agent/headroomctl \
           tests/tools/hr-test-load; do
    [[ -x "$build/$b" ]] || endpoints_skip="${endpoints_skip:+$endpoints_skip, }$build/$b not built"
  done
fi
if [[ -z "$endpoints_skip" ]]; then
  endpoints_args=()
  (( quick )) && endpoints_args+=(--quick)
  "$(dirname "$0")/bench_endpoints.sh" "${endpoints_args[@]}" "$build"
else
  echo "# bench_endpoints.sh skipped: $endpoints_skip"
  echo "#   (cmake --build $build --target headroomd headroomctl hr-test-load bench_syscall_overhead bench_open_conns bench_ebpf_floor;"
  echo "#    apt-get install -y nginx-light wrk bpftool jq; run as root)"
fi
echo
echo "load at end: $(cat /proc/loadavg)"
