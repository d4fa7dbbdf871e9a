#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A week of headroomd history for `headroomctl tune recommend`, as
Prometheus would have scraped it (standard library only; bench/bench_tune.py
uses it, docs/benchmarks.md "tune recommend over a week of history").

The series of docs/metrics.md that recommend reads, aggregates only (no
endpoint_instance label), with the instance/job pair a scrape adds, every
15 s for DAYS days, for N endpoints ep00..epNN:
  headroom_endpoint_request_duration_seconds_bucket/_count/_sum (cumulative),
  headroom_endpoint_requests_total, headroom_endpoint_latency_seconds
  {percentile=50|90|99}, headroom_endpoint_window_requests,
  headroom_utilization_ratio{scope="endpoint",signal=latency.slo_target|
  latency.slo_max}, headroom_application_utilization_ratio{scope="endpoint"},
  headroom_cpu_utilization_ratio{scope="node"}.
Traffic follows the day (lowest at 03:00 UTC, highest at 15:00 UTC); each
endpoint's latency is one lognormal distribution whatever the load, so its
quantiles (expected()) are what recommend should answer.

  tune_history.py openmetrics --out FILE --end EPOCH [--days 7] [--endpoints 64]
  tune_history.py tsdb --dir DIR --end EPOCH [--days 7] [--endpoints 64]
  tune_history.py expected [--endpoints 64]         (JSON)
  tune_history.py config --out headroom.toml [--endpoints 64]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

# Bumped whenever the data written changes: bench_tune.py keys its cache on it.
GENERATOR_VERSION = 2

STEP_S = 15
WINDOW_S = 0.5  # headroomd's default smoothing: the report window
LE = ["0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5",
      "10"]  # as headroomd's exposition writes them; then +Inf
Z = {"0.5": 0.0, "0.9": 1.2815515655446004, "0.99": 2.3263478740408408}
PERCENTILE = {"0.5": "50", "0.9": "90", "0.99": "99"}  # headroomd's `percentile` label
SCRAPE = 'instance="node-a:9464",job="headroomd"'
PEAK_HOUR_UTC = 15.0
NIGHT_SHARE = 0.15  # the lowest rate as a share of the peak rate


def endpoint_params(i, n):
    """Endpoint i of n: median latency 2 ms .. 200 ms (geometric), spread sigma
    0.35 .. 0.75, peak rate 20 .. 650 requests/s; fixed, so a run can be
    checked against expected()."""
    frac = i / max(1, n - 1)
    return {
        "name": f"ep{i:02d}",
        "port": 20000 + i,
        "median_s": 0.002 * 100.0 ** frac,
        "sigma": 0.35 + 0.40 * ((i * 7) % 16) / 15.0,
        "peak_rps": 20.0 + 10.0 * ((i * 37) % 64),
    }


def quantile_s(p, q):
    return p["median_s"] * math.exp(p["sigma"] * Z[q])


def cdf(p, le_s):
    z = (math.log(le_s) - math.log(p["median_s"])) / p["sigma"]
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def day_shape(t):
    """0 at 03:00 UTC, 1 at 15:00 UTC, a cosine between."""
    h = (t % 86400) / 3600.0
    return 0.5 * (1.0 + math.cos(2.0 * math.pi * (h - PEAK_HOUR_UTC) / 24.0))


def expected(n):
    """What recommend should find for each endpoint: the quantiles of its
    distribution, its peak rate, the config it starts from."""
    out = {}
    for i in range(n):
        p = endpoint_params(i, n)
        out[p["name"]] = {
            "p50_s": quantile_s(p, "0.5"),
            "p90_s": quantile_s(p, "0.9"),
            "p99_s": quantile_s(p, "0.99"),
            "peak_rps": p["peak_rps"],
            "median_s": p["median_s"],
            "sigma": p["sigma"],
        }
    return out


def fmt_duration(s):
    """3 significant digits, as the config writes durations: "37.9ms", "1.48s"."""
    value, unit = (s, "s") if s >= 1.0 else (s * 1000, "ms")
    decimals = max(0, 2 - int(math.floor(math.log10(value))))
    return f"{value:.{decimals}f}{unit}"


def config_text(n):
    """A headroom.toml with the n endpoints, target/max deliberately off
    (twice p90 and p99) as a hand-written first guess would be."""
    lines = ["# The endpoints of bench/tune_history.py's generated history.", ""]
    for i in range(n):
        p = endpoint_params(i, n)
        lines += ["[[endpoint]]", f'name = "{p["name"]}"', f"port = {p['port']}",
                  f'target = "{fmt_duration(2 * quantile_s(p, "0.9"))}"', f'max = "{fmt_duration(2 * quantile_s(p, "0.99"))}"', ""]
    return "\n".join(lines)


def g(x):
    return f"{x:.6g}"


def noise(seed, k):
    """A deterministic value in [-1, 1) for series `seed` at step k (the same
    whichever window is written, and cheap)."""
    x = math.sin(k * 12.9898 + seed * 78.233) * 43758.5453
    return 2.0 * (x - math.floor(x)) - 1.0


class History:
    """The week's per-step values; write() puts steps [k0, k1) out as one
    OpenMetrics file (promtool makes one block of a file inside one 2 h
    window, but parses the whole file again for every 2 h window it spans)."""

    def __init__(self, end, days, n, percentiles=True):
        self.percentiles = percentiles  # False: a headroomd from before the percentile gauges
        self.count = days * 86400 // STEP_S
        self.start = end - (self.count - 1) * STEP_S
        self.end = end
        self.times = [self.start + k * STEP_S for k in range(self.count)]
        self.shape = [day_shape(t) for t in self.times]
        self.params = [endpoint_params(i, n) for i in range(n)]
        self.cum, self.rates = [], []
        for i, p in enumerate(self.params):
            acc, r_list, c_list = 0.0, [], []
            for k, s in enumerate(self.shape):
                r = p["peak_rps"] * (NIGHT_SHARE + (1 - NIGHT_SHARE) * s) * (1.0 + 0.03 * noise(i, k))
                acc += r * STEP_S
                r_list.append(r)
                c_list.append(int(acc))
            self.cum.append(c_list)
            self.rates.append(r_list)

    def write(self, out, k0, k1):
        ks = range(k0, k1)
        ts = [f" {self.times[k]}\n" for k in ks]
        shape = self.shape[k0:k1]

        def labels(p, extra=""):
            return f'{{endpoint="{p["name"]}"{extra},{SCRAPE}}} '

        def series(prefix, values):
            out.write("".join([prefix + v + t for v, t in zip(values, ts)]))

        fam = "headroom_endpoint_request_duration_seconds"
        out.write(f"# TYPE {fam} histogram\n# UNIT {fam} seconds\n")
        for p, c_all in zip(self.params, self.cum):
            c_list = c_all[k0:k1]
            for le in LE:
                f = cdf(p, float(le))
                extra = f',le="{le}"'
                series(f"{fam}_bucket{labels(p, extra)}", [str(round(c * f)) for c in c_list])
            strs = [str(c) for c in c_list]
            extra = ',le="+Inf"'
            series(f"{fam}_bucket{labels(p, extra)}", strs)
            series(f"{fam}_count{labels(p)}", strs)
            mean = p["median_s"] * math.exp(p["sigma"] ** 2 / 2)
            series(f"{fam}_sum{labels(p)}", [f"{c * mean:.6f}" for c in c_list])

        out.write("# TYPE headroom_endpoint_requests counter\n")
        for p, c_all in zip(self.params, self.cum):
            series(f"headroom_endpoint_requests_total{labels(p)}", [str(c) for c in c_all[k0:k1]])

        fam = "headroom_endpoint_latency_seconds"
        if self.percentiles:
            out.write(f"# TYPE {fam} gauge\n# UNIT {fam} seconds\n")
        for i, p in enumerate(self.params if self.percentiles else []):
            for j, q in enumerate(("0.5", "0.9", "0.99")):
                # The window's percentile: within the kernel histogram's ~6 % buckets.
                v, seed = quantile_s(p, q), 1000 + 3 * i + j
                extra = f',percentile="{PERCENTILE[q]}"'
                series(f"{fam}{labels(p, extra)}", [g(v * (1.0 + 0.03 * noise(seed, k))) for k in ks])

        out.write("# TYPE headroom_endpoint_window_requests gauge\n")
        for p, r_all in zip(self.params, self.rates):
            series(f"headroom_endpoint_window_requests{labels(p)}", [str(round(r * WINDOW_S)) for r in r_all[k0:k1]])

        out.write("# TYPE headroom_utilization_ratio gauge\n")
        for i, p in enumerate(self.params):
            for j, (signal, lo, hi) in enumerate((("latency.slo_target", 0.10, 0.45), ("latency.slo_max", 0.02, 0.20))):
                seed = 2000 + 2 * i + j
                series(f'headroom_utilization_ratio{{endpoint="{p["name"]}",scope="endpoint",signal="{signal}",{SCRAPE}}} ',
                       [g(lo + (hi - lo) * s * (1.0 + 0.1 * noise(seed, k))) for s, k in zip(shape, ks)])

        out.write("# TYPE headroom_application_utilization_ratio gauge\n")
        for i, p in enumerate(self.params):
            series(f'headroom_application_utilization_ratio{{endpoint="{p["name"]}",scope="endpoint",{SCRAPE}}} ',
                   [g(0.1 + 0.5 * s * (1.0 + 0.05 * noise(3000 + i, k))) for s, k in zip(shape, ks)])

        out.write("# TYPE headroom_cpu_utilization_ratio gauge\n")
        series(f'headroom_cpu_utilization_ratio{{scope="node",{SCRAPE}}} ',
               [g(0.12 + 0.5 * s * (1.0 + 0.05 * noise(4000, k))) for s, k in zip(shape, ks)])
        out.write("# EOF\n")

    def windows(self, seconds=7200):
        """[k0, k1) of each aligned window of `seconds` the history spans."""
        k0 = 0
        while k0 < self.count:
            edge = (self.times[k0] // seconds + 1) * seconds
            k1 = min(self.count, k0 + (edge - self.times[k0] + STEP_S - 1) // STEP_S)
            yield k0, k1
            k0 = k1


def build_tsdb(tsdb, work, end, days, n, percentiles=True, log=sys.stderr):
    """The history as TSDB blocks in `tsdb`: one OpenMetrics file per 2 h
    window in `work`, each imported by `promtool tsdb create-blocks-from
    openmetrics` while the next is written, then removed. Returns
    (seconds generating, seconds promtool ran, OpenMetrics bytes, files)."""
    h = History(end, days, n, percentiles)
    gen_s, total_bytes, files, pending = 0.0, 0, 0, None
    prom_s = 0.0

    def finish(p):
        nonlocal prom_s
        proc, path, t0 = p
        if proc.wait() != 0:
            raise RuntimeError(f"promtool tsdb create-blocks-from openmetrics {path} {tsdb}: exit {proc.returncode}")
        prom_s += time.monotonic() - t0
        os.remove(path)

    try:
        for k0, k1 in h.windows():
            path = os.path.join(work, f"history-{h.times[k0]}.om")
            t0 = time.monotonic()
            with open(path, "w", buffering=1 << 22) as f:
                h.write(f, k0, k1)
            gen_s += time.monotonic() - t0
            total_bytes += os.path.getsize(path)
            files += 1
            if pending:
                finish(pending)
                pending = None
            proc = subprocess.Popen(["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet", path, tsdb],
                                    stdout=subprocess.DEVNULL, stderr=log)
            pending = (proc, path, time.monotonic())
        if pending:
            finish(pending)
            pending = None
    finally:
        if pending and pending[0].poll() is None:  # interrupted: stop the import this started
            pending[0].kill()
            pending[0].wait()
    return gen_s, prom_s, total_bytes, files


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    om = sub.add_parser("openmetrics", help="write the history as OpenMetrics text")
    om.add_argument("--out", required=True)
    om.add_argument("--end", type=int, required=True, help="Unix time of the last sample")
    om.add_argument("--days", type=int, default=7)
    om.add_argument("--endpoints", type=int, default=64)
    td = sub.add_parser("tsdb", help="write the history as TSDB blocks (promtool), one 2 h window at a time")
    td.add_argument("--dir", required=True, help="the blocks' directory; DIR.om holds the files meanwhile")
    td.add_argument("--end", type=int, required=True, help="Unix time of the last sample")
    td.add_argument("--days", type=int, default=7)
    td.add_argument("--endpoints", type=int, default=64)
    ex = sub.add_parser("expected", help="print each endpoint's quantiles as JSON")
    ex.add_argument("--endpoints", type=int, default=64)
    cf = sub.add_parser("config", help="write a headroom.toml with the endpoints")
    cf.add_argument("--out", required=True)
    cf.add_argument("--endpoints", type=int, default=64)
    a = ap.parse_args(argv)
    if a.cmd == "openmetrics":
        if a.end % STEP_S:
            ap.error(f"--end {a.end}: not a multiple of {STEP_S} s")
        h = History(a.end, a.days, a.endpoints)
        with open(a.out, "w", buffering=1 << 22) as f:
            h.write(f, 0, h.count)
    elif a.cmd == "tsdb":
        os.makedirs(a.dir + ".om", exist_ok=True)
        gen_s, prom_s, size, files = build_tsdb(a.dir, a.dir + ".om", a.end, a.days, a.endpoints)
        os.rmdir(a.dir + ".om")
        print(f"{files} files, {size} bytes of OpenMetrics; Python {gen_s:.1f} s, promtool {prom_s:.1f} s")
    elif a.cmd == "expected":
        json.dump(expected(a.endpoints), sys.stdout, indent=1)
        print()
    else:
        with open(a.out, "w") as f:
            f.write(config_text(a.endpoints))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
