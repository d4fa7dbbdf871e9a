#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Time to shed (docs/buffers.md, docs/benchmarks.md "Time to shed"): repeated
# 4x spikes against the reference shedding server in a one-CPU cgroup, with
# headroomd's default interval and smoothing and three alternatives side by
# side, rotated from round to round; p50 and p90 of the time from the spike's
# first request to the signal crossing the shedding threshold and to the
# first shed request, and what each variant costs (CRITICAL served, latency,
# shedding at the baseline, headroomd's CPU). bench/bench_buffer.py measures;
# it builds nothing.
#
#   sudo bench/bench_buffer.sh BUILD_DIR [--rounds N] [--quick]
#
# Root (eBPF, the cgroup) and 2 CPUs. About 7 minutes with 5 rounds;
# --quick (1 round, 2 variants, under a minute) only shows it still runs.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: sudo bench/bench_buffer.sh BUILD_DIR [--rounds N] [--quick]" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "bench_buffer.sh: needs root (the eBPF endpoint probe, the service's cgroup)" >&2
  exit 1
fi
exec /usr/bin/python3 "$(dirname "$0")/bench_buffer.py" "$@"
