#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The dependency probe of two builds against each other (standard library
only): runs the bench_dependency_floor of two build directories alternately
(A B, B A, A B, ...) with the same options, and prints per figure each
build's median over its runs (with the range) and the median of the paired
differences B - A (with their interquartile range). The figures: per
connection (traced, untraced) floor - none, product - none, product - floor
and the ratio to the floor (each run's medians over its cycles), and the
ns bpf_stats sees inside the floor's and the probe's programs per exchange
(the least noisy: it leaves out the dispatch, which both pay alike).

  bench/ab_dependency.py [--runs N (6)] [--protocol generic|http1] BUILD_A BUILD_B
                         [-- bench_dependency_floor options (--cycles 40 --slice 1000)]

Build A at another commit in a worktree of its own, as for ab_commits.sh,
or copy its build/bench/bench_dependency_floor aside (the programs are in
the binary). A path to a binary is taken as it is. Needs root.
"""
import os
import re
import statistics
import subprocess
import sys

FIGURES = ("floor - none", "product - none", "product - floor", "ratio to floor, of the medians")


def binary(path):
    return path if os.path.isfile(path) else os.path.join(path, "bench", "bench_dependency_floor")


def run(path, protocol, options):
    out = subprocess.run([path, "--protocol", protocol] + options, capture_output=True, text=True, check=True).stdout
    fig, conn = {}, None
    for line in out.splitlines():
        if line.startswith(("traced", "untraced")):
            conn = line.split()[0]
        elif line.startswith(("calls counted", "bpf_stats", "read()")):
            conn = None
        m = re.match(r"\s+(.+?)\s{2,}(-?[\d.]+) (ns|x)", line)
        if m and conn and m.group(1) in FIGURES:
            fig[f"{conn} {m.group(1)}"] = float(m.group(2))
        m = re.match(r"\s+(traced|untraced)\s+(floor|product)\s+total\s+([\d.]+) ns", line)
        if m:
            fig[f"bpf_stats {m.group(1)} {m.group(2)}"] = float(m.group(3))
    return fig


def main(argv):
    runs, protocol, builds, options = 6, "generic", [], []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            options = argv[i + 1:]
            break
        if a in ("--runs", "--protocol") and i + 1 < len(argv):
            if a == "--runs":
                runs = int(argv[i + 1])
            else:
                protocol = argv[i + 1]
            i += 2
            continue
        if a.startswith("-"):
            sys.exit(__doc__)
        builds.append(a)
        i += 1
    if len(builds) != 2 or runs < 1:
        sys.exit(__doc__)
    options = options or ["--cycles", "40", "--slice", "1000"]
    bins = [binary(b) for b in builds]
    res = {0: [], 1: []}
    for r in range(runs):
        for who in ((0, 1) if r % 2 == 0 else (1, 0)):  # a drift within a pair hits both alike
            res[who].append(run(bins[who], protocol, options))
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"# A = {bins[0]}\n# B = {bins[1]}\n# {protocol}, {runs} runs each, alternated; "
          f"{' '.join(options)}; load {load}")
    print(f"{'figure':45} {'A median [range]':>24} {'B median [range]':>24} {'B - A [p25..p75]':>24}")
    for key in res[0][0]:
        va, vb = [f[key] for f in res[0]], [f[key] for f in res[1]]
        d = sorted(y - x for x, y in zip(va, vb))
        q = statistics.quantiles(d, n=4, method="inclusive") if len(d) > 1 else [d[0]] * 3
        fmt = "{:.2f}" if key.endswith("medians") else "{:.0f}"
        cell = lambda m, lo, hi: f"{fmt.format(m)} [{fmt.format(lo)}..{fmt.format(hi)}]"
        print(f"{key:45} {cell(statistics.median(va), min(va), max(va)):>24} "
              f"{cell(statistics.median(vb), min(vb), max(vb)):>24} {cell(statistics.median(d), q[0], q[2]):>24}")


if __name__ == "__main__":
    main(sys.argv[1:])
