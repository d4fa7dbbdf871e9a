#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Time to shed (docs/buffers.md), and what agent.interval and
agent.smoothing trade for it. Run through bench/bench_buffer.sh.

    bench_buffer.py BUILD_DIR [--rounds N] [--quick]

The rig of the spike test (tests/support/spike_rig.py): the reference
shedding server (1 ms of CPU per request, one worker) in a cgroup confined to
one CPU, headroomd with node.cgroup on it and one [[endpoint]] (100 ms target,
500 ms max), headroomctl buffer on the other CPU. The server's capacity is
measured once, closed loop; the baseline is 40 % of it.

Variants: (interval, smoothing) = the defaults (100 ms, 500 ms), the old
default smoothing (100 ms, 1 s), and (100 ms, 250 ms), (50 ms, 250 ms). In
each round every variant gets a fresh headroomd and one spike (4 s baseline,
8 s at 4x, 3 s baseline), the order rotated from round to round. Per spike:
from its first request to the endpoint's application_utilization first at or
above 0.6 (the shedder's shed_start; sampled every 10 ms) and to the first
rejected request; CRITICAL's served share, served p99, the share shed at the
baseline (shedding nobody asked for), and headroomd's CPU per second.
Summary: p50 and p90 of the times, medians of the rest, per variant."""

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
import benchlib  # noqa: E402
import harness  # noqa: E402
import spike_rig  # noqa: E402

VARIANTS = [("100ms", "500ms"), ("100ms", "1s"), ("100ms", "250ms"), ("50ms", "250ms")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1 round, 2 variants: the benchmark still runs")
    args = ap.parse_args()
    variants = VARIANTS[:2] if args.quick else VARIANTS
    rounds = 1 if args.quick else args.rounds
    cgroup = spike_rig.ServiceCgroup("headroom-bench-buffer")
    rig = spike_rig.Rig(os.path.abspath(args.build), cgroup)
    if rig.missing():
        print("not built: " + ", ".join(rig.missing()), file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="headroom-bench-buffer-", dir="/dev/shm")
    harness.TEMP_DIRS.append(work)
    results = {v: [] for v in variants}
    try:
        orca = os.path.join(work, "orca")
        server, port = rig.start_server(work, orca)
        cap = rig.capacity(port)
        baseline = 0.4 * cap
        print(f"capacity {cap:.0f} req/s (closed loop); baseline {baseline:.0f} req/s, spike 4x; "
              f"load {benchlib.loadavg()}", flush=True)
        for r in range(rounds):
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            for interval, smoothing in order:
                d = rig.start_headroomd(work, orca, port, "100ms", "500ms",
                                        agent_keys=f'interval = "{interval}"\nsmoothing = "{smoothing}"\n')
                cpu0, t0 = benchlib.cpu_clock_ns(d.pid), time.monotonic()
                _, doc = rig.spike(port, orca, baseline, 4, "4s", "8s", "3s", "500ms")
                cpu = (benchlib.cpu_clock_ns(d.pid) - cpu0) / 1e9 / (time.monotonic() - t0)
                d.stop()
                steps = {s["kind"]: s for s in doc["steps"]}
                tts = doc["time_to_shed"]
                row = {
                    "signal": tts["signal_over_threshold_s"],
                    "reject": tts["first_rejection_s"],
                    "critical": spike_rig.served_share(doc, "CRITICAL"),
                    "p99": steps["spike"]["all"]["served_latency_ms"]["p99"],
                    "baseline_shed": steps["baseline"]["all"]["rejected_share"],
                    "served": steps["spike"]["served_rps"],
                    "cpu": cpu,
                }
                results[(interval, smoothing)].append(row)
                print(f"round {r + 1} interval {interval:>5} smoothing {smoothing:>5}: signal "
                      f"{row['signal']} s, first rejection {row['reject']} s, CRITICAL {row['critical'] * 100:.2f} %, "
                      f"served p99 {row['p99']:.0f} ms, baseline shed {row['baseline_shed'] * 100:.2f} %, "
                      f"headroomd {row['cpu'] * 100:.2f} % CPU", flush=True)
                time.sleep(1)  # the server's queue drains
        server.stop()
    finally:
        harness.reap()
        cgroup.remove()

    def ms(v):
        return "never" if v != v or v == float("inf") else f"{v * 1000:.0f}"
    print("\n| interval | smoothing | to signal >= 0.6 p50 / p90 (ms) | to first rejection p50 / p90 (ms) "
          "| CRITICAL served | spike served p99 | shed at baseline | headroomd CPU |")
    print("|---|---|---|---|---|---|---|---|")
    for v in variants:
        rows = results[v]
        sig = [x["signal"] if x["signal"] is not None else float("inf") for x in rows]
        rej = [x["reject"] if x["reject"] is not None else float("inf") for x in rows]
        print(f"| {v[0]} | {v[1]} | {ms(benchlib.pct(sig, 0.5))} / {ms(benchlib.pct(sig, 0.9))} "
              f"| {ms(benchlib.pct(rej, 0.5))} / {ms(benchlib.pct(rej, 0.9))} "
              f"| {benchlib.median([x['critical'] for x in rows]) * 100:.2f} % (min {min(x['critical'] for x in rows) * 100:.2f} %) "
              f"| {benchlib.median([x['p99'] for x in rows]):.0f} ms (max {max(x['p99'] for x in rows):.0f}) "
              f"| {benchlib.median([x['baseline_shed'] for x in rows]) * 100:.2f} % "
              f"| {benchlib.median([x['cpu'] for x in rows]) * 100:.2f} % |")
    print(f"\n{rounds} round(s); load {benchlib.loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
