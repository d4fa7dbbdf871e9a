#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The driver of bench/bench_tune.sh (standard library only): how long
`headroomctl tune recommend` takes over a week of history at 15 s resolution
for 64 endpoints, from a Prometheus loaded with it, and what Prometheus
itself costs for the range queries recommend makes.

  bench_tune.py run --work DIR [--headroomctl PATH] [--runs 5] [--cache DIR]
                    [--endpoints 64] [--days 7] [--max-age-days 7] [--quick]

1. The data (cached): bench/tune_history.py writes the history as
   OpenMetrics, one file per 2 h window, each imported with `promtool tsdb
   create-blocks-from openmetrics` while the next is written; a Prometheus
   then runs on the blocks until its compactor has merged them (as a server
   that kept a week would hold them). The blocks go to
   CACHE/v<generator version>-<N>ep-<D>d/tsdb with meta.json (the history's
   start and end, what building cost). The history ends 3 to 5 h before it
   was made (Prometheus' head covers the last 2 h); a cache older than
   --max-age-days is rebuilt.
2. Prometheus (`--storage.tsdb.retention.time=30d`, a config that scrapes
   nothing) on a copy of the blocks made of hard links (its compactor and
   WAL never touch the cache), on a free loopback port; ready when
   /-/ready answers 200.
3. The floor: the range queries recommend makes (the history's last 7
   days, end = its last sample, step 5m), with curl, RUNS rounds: each
   query's wall time and Prometheus' CPU time over it (its process CPU
   clock); the five recommend always sends, one after the other and all at
   once (as it sends them); the histogram's, its fallback for endpoints
   without the percentile gauges.
4. recommend, when PATH is given and has `tune recommend`: RUNS runs of
   `headroomctl tune recommend --prometheus URL --since 7d --until END
   --config CFG --out FILE` (CFG: the 64 endpoints), each one's wall time, its own CPU
   (wait4's rusage) and Prometheus' CPU over it; the answer is checked:
   target within 10 % of the generated p90, max / 1.5 (recommend's default
   --max-margin) within 10 % of the p99, for every endpoint.
Medians and min-max over the runs; the first (cold) run is shown too.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tune_history  # noqa: E402  (next to this file)
from benchlib import ProcessOwner, cpu_clock_ns, free_port, median  # noqa: E402

DEFAULT_CACHE = "/var/cache/headroom-build/bench-tune"
STEP = "5m"
EMPTY_CONFIG = "global:\n  evaluation_interval: 1h\n"  # scrapes nothing, no rules

# The range queries of recommend (agent/ctl/tune_sources.cc), aggregates only,
# each over the step (5m).
SEL = 'endpoint_instance=""'
QUERIES = [
    ("requests", f"sum by (endpoint) (rate(headroom_endpoint_requests_total{{{SEL}}}[5m]))"),
    ("percentiles", f"avg_over_time(headroom_endpoint_latency_seconds{{{SEL}}}[5m])"),
    ("window_requests", f"avg_over_time(headroom_endpoint_window_requests{{{SEL}}}[5m])"),
    ("slo_utilization", f'max by (endpoint, signal) (avg_over_time(headroom_utilization_ratio{{scope="endpoint",{SEL}}}[5m]))'),
    ("node_cpu", 'max(avg_over_time(headroom_cpu_utilization_ratio{scope="node"}[5m]))'),
    ("histogram", f"sum by (endpoint, le) (increase(headroom_endpoint_request_duration_seconds_bucket{{{SEL}}}[5m]))"),
]
FIRST_FIVE = [name for name, _ in QUERIES[:5]]  # sent at once; the histogram only as the fallback


def log(msg):
    print(msg, flush=True)


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.lstat(os.path.join(root, f)).st_size
    return total


def blocks(path):
    return sorted(d for d in os.listdir(path) if re.fullmatch(r"[0-9A-Z]{26}", d))


def prom_get(port, path, timeout=30):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.status, r.read()


def prom_metric(port, name):
    _, body = prom_get(port, "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


class Prometheus:
    def __init__(self, owner, work, tsdb, tag):
        self.port = free_port()
        cfg = os.path.join(work, f"prometheus-{tag}.yml")
        with open(cfg, "w") as f:
            f.write(EMPTY_CONFIG)
        self.log = os.path.join(work, f"prometheus-{tag}.log")
        self.proc = owner.start(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tsdb}",
                                 f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=30d",
                                 "--web.enable-admin-api"], self.log)
        self.url = f"http://127.0.0.1:{self.port}"
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited ({self.proc.returncode}); see {self.log}")
            try:
                if prom_get(self.port, "/-/ready", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() - t0 > 300:
                raise RuntimeError(f"prometheus not ready after 300 s; see {self.log}")
            time.sleep(0.2)
        self.ready_s = time.monotonic() - t0

    def cpu_ns(self):
        return cpu_clock_ns(self.proc.pid)


def build_cache(a, owner, entry):
    """Generates, imports and compacts the history into entry/tsdb."""
    build = entry + ".build"
    shutil.rmtree(build, ignore_errors=True)
    os.makedirs(os.path.join(build, "om"))
    tsdb = os.path.join(build, "tsdb")
    now = int(time.time())
    end = (now - 3 * 3600) // 7200 * 7200 - tune_history.STEP_S
    log(f"building the history: {a.endpoints} endpoints, {a.days} days, ending {end} (in {build})")
    t0 = time.monotonic()
    gen_s, import_s, om_bytes, files = tune_history.build_tsdb(tsdb, os.path.join(build, "om"), end, a.days,
                                                               a.endpoints, percentiles=not a.no_percentiles)
    build_s = time.monotonic() - t0
    raw_bytes, raw_blocks = dir_bytes(tsdb), len(blocks(tsdb))
    log(f"  generated {om_bytes / 1e9:.2f} GB of OpenMetrics in {files} files: {gen_s:.0f} s of Python, "
        f"promtool {import_s:.0f} s (overlapped), {build_s:.0f} s wall; {raw_blocks} blocks, {raw_bytes / 1e6:.0f} MB")
    # Let Prometheus' compactor merge the 2 h blocks, as on a server that kept
    # the week: its third compaction trigger (one a minute) starts only after
    # the second found nothing left to do.
    t0 = time.monotonic()
    p = Prometheus(owner, build, tsdb, "compact")
    while prom_metric(p.port, "prometheus_tsdb_compactions_triggered_total") < 3:
        time.sleep(2)
    owner.stop(p.proc)
    compact_s = time.monotonic() - t0
    shutil.rmtree(os.path.join(tsdb, "wal"), ignore_errors=True)
    shutil.rmtree(os.path.join(tsdb, "chunks_head"), ignore_errors=True)
    meta = {
        "generator_version": tune_history.GENERATOR_VERSION, "endpoints": a.endpoints, "days": a.days,
        "percentiles": not a.no_percentiles,
        "start": end - (a.days * 86400 // tune_history.STEP_S - 1) * tune_history.STEP_S, "end": end,
        "made": now, "openmetrics_bytes": om_bytes, "files": files, "generate_s": round(gen_s, 1),
        "promtool_s": round(import_s, 1), "build_wall_s": round(build_s, 1), "blocks_imported": raw_blocks,
        "bytes_imported": raw_bytes, "compact_wall_s": round(compact_s, 1), "blocks": len(blocks(tsdb)),
        "bytes": dir_bytes(tsdb),
    }
    log(f"  compacted to {meta['blocks']} blocks, {meta['bytes'] / 1e6:.0f} MB, in {compact_s:.0f} s")
    with open(os.path.join(build, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    shutil.rmtree(os.path.join(build, "om"))
    shutil.rmtree(entry, ignore_errors=True)
    os.rename(build, entry)


def cached(a, owner):
    entry = os.path.join(a.cache, f"v{tune_history.GENERATOR_VERSION}-{a.endpoints}ep-{a.days}d"
                         + ("-histogram-only" if a.no_percentiles else ""))
    meta_path = os.path.join(entry, "meta.json")
    meta = None
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        age_d = (time.time() - meta["end"]) / 86400
        if age_d > a.max_age_days:
            log(f"cache {entry}: the history ended {age_d:.1f} days ago (> --max-age-days {a.max_age_days}); rebuilding")
            meta = None
    if meta is None:
        os.makedirs(a.cache, exist_ok=True)
        build_cache(a, owner, entry)
        with open(meta_path) as f:
            meta = json.load(f)
    else:
        log(f"cache {entry}: reused")
    log(f"history: {meta['endpoints']} endpoints x {meta['days']} days every {tune_history.STEP_S} s, "
        f"{time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime(meta['start']))} .. "
        f"{time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime(meta['end']))}")
    log(f"  built: {meta['openmetrics_bytes'] / 1e9:.2f} GB OpenMetrics in {meta['files']} files, Python "
        f"{meta['generate_s']} s, promtool {meta['promtool_s']} s (overlapped; {meta['build_wall_s']} s wall), "
        f"{meta['blocks_imported']} blocks {meta['bytes_imported'] / 1e6:.0f} MB; compaction {meta['compact_wall_s']} s "
        f"-> {meta['blocks']} blocks {meta['bytes'] / 1e6:.0f} MB")
    return entry, meta


def curl_query(url, query, start, end, out):
    """One range query with curl: (wall s from curl, HTTP status, series)."""
    data = urllib.parse.urlencode({"query": query, "start": start, "end": end, "step": STEP})
    r = subprocess.run(["curl", "-sS", "-o", out, "-w", "%{http_code} %{time_total}",
                        f"{url}/api/v1/query_range?{data}"], capture_output=True, text=True, check=True)
    code, wall = r.stdout.split()
    series = -1
    if code == "200":
        with open(out) as f:
            series = len(json.load(f)["data"]["result"])
    return float(wall), int(code), series


def fmt_stats(values, unit="s", scale=1.0):
    v = [x * scale for x in values]
    if not v:
        return "-"
    return f"{median(v):.3f} {unit} ({min(v):.3f}-{max(v):.3f})"


def floor_rounds(a, prom, meta, work):
    days, end = meta["days"], meta["end"]
    start = end - days * 86400
    log(f"\n## Prometheus alone: the range queries recommend makes (curl, {days} days to {end}, step {STEP}), "
        f"{a.runs} rounds")
    per = {name: {"wall": [], "cpu": [], "series": None} for name, _ in QUERIES}
    five_wall, five_cpu, par_wall, par_cpu = [], [], [], []
    out = os.path.join(work, "answer.json")
    for r in range(a.runs):
        for name, q in QUERIES:
            c0 = prom.cpu_ns()
            wall, code, series = curl_query(prom.url, q, start, end, out)
            cpu = (prom.cpu_ns() - c0) / 1e9
            if code != 200:
                raise RuntimeError(f"query {name}: HTTP {code}: {open(out).read()[:300]}")
            per[name]["wall"].append(wall)
            per[name]["cpu"].append(cpu)
            per[name]["series"] = series
        five_wall.append(sum(per[n]["wall"][-1] for n in FIRST_FIVE))
        five_cpu.append(sum(per[n]["cpu"][-1] for n in FIRST_FIVE))
        # The five at once, as recommend sends them.
        c0, t0 = prom.cpu_ns(), time.monotonic()
        procs = [subprocess.Popen(["curl", "-sS", "-o", f"{out}.{i}", "-w", "%{http_code}", f"{prom.url}/api/v1/query_range?"
                                   + urllib.parse.urlencode({"query": q, "start": start, "end": end, "step": STEP})],
                                  stdout=subprocess.PIPE, text=True)
                 for i, (n, q) in enumerate(QUERIES) if n in FIRST_FIVE]
        codes = [p.communicate()[0] for p in procs]
        par_wall.append(time.monotonic() - t0)
        par_cpu.append((prom.cpu_ns() - c0) / 1e9)
        if any(c != "200" for c in codes):
            raise RuntimeError(f"the five queries at once: HTTP {codes}")
    log(f"{'query':<17} {'series':>6}  {'wall: median (min-max)':<26} {'Prometheus CPU':<26} first round")
    for name, _ in QUERIES:
        d = per[name]
        log(f"{name:<17} {d['series']:>6}  {fmt_stats(d['wall']):<26} {fmt_stats(d['cpu']):<26} "
            f"{d['wall'][0]:.3f} s / {d['cpu'][0]:.3f} s")
    log(f"{'first five, Σ':<17} {'':>6}  {fmt_stats(five_wall):<26} {fmt_stats(five_cpu):<26} "
        f"{five_wall[0]:.3f} s / {five_cpu[0]:.3f} s")
    log(f"{'first five at once':<17} {'':>6}  {fmt_stats(par_wall):<26} {fmt_stats(par_cpu):<26} "
        f"{par_wall[0]:.3f} s / {par_cpu[0]:.3f} s")
    log("(recommend sends the first five at once; the histogram only for endpoints without the percentile gauges)")


def parse_duration_s(text):
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ns|us|µs|ms|s|m|h)\s*", text)
    if not m:
        raise ValueError(f"duration {text!r}")
    return float(m.group(1)) * {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def bucket_of(seconds):
    """The histogram bucket (lower, upper bound) that holds `seconds`."""
    bounds = [0.0] + [float(le) for le in tune_history.LE] + [float("inf")]
    for lo, hi in zip(bounds, bounds[1:]):
        if seconds <= hi:
            return lo, hi
    return bounds[-2], bounds[-1]


MAX_MARGIN = 1.5  # tune recommend's default --max-margin: max = the p99 at peak x 1.5


def check_answer(path, n, by_bucket=False):
    """The recommendation against the generated distributions: a list of
    problems (empty: every endpoint within 10 %, or with by_bucket, the
    histogram's resolution: inside the bucket that holds the quantile), and
    the largest relative error."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    want = tune_history.expected(n)
    problems, worst = [], 0.0
    got = {e.get("name"): e for e in doc.get("endpoint", [])}
    for name, w in want.items():
        e = got.get(name)
        if e is None:
            problems.append(f"{name}: missing from the output")
            continue
        for key, q, margin in (("target", "p90_s", 1.0), ("max", "p99_s", MAX_MARGIN)):
            if key not in e:
                problems.append(f"{name}: no {key}")
                continue
            got_s = parse_duration_s(e[key]) / margin
            err = got_s / w[q] - 1.0
            worst = max(worst, abs(err))
            lo, hi = bucket_of(w[q])
            if (not (lo <= got_s * 0.999 and got_s <= hi * 1.001)) if by_bucket else abs(err) > 0.10:
                problems.append(f"{name}: {key} {e[key]} vs generated {q[:3]} {w[q] * 1000:.3g}ms ({err:+.1%})")
    return problems, worst


def has_recommend(ctl):
    try:
        r = subprocess.run([ctl, "tune", "recommend", "--help"], capture_output=True, text=True, timeout=10)
    except OSError:
        return False
    return r.returncode == 0 and "--prometheus" in r.stdout  # an older headroomctl prints its own help


def recommend_rounds(a, prom, work, meta):
    cfg = os.path.join(work, "headroom.toml")
    with open(cfg, "w") as f:
        f.write(tune_history.config_text(meta["endpoints"]))
    out = os.path.join(work, "recommended.toml")
    argv = [a.headroomctl, "tune", "recommend", "--prometheus", prom.url, "--since", f"{meta['days']}d",
            "--until", str(meta["end"]),
            "--config", cfg, "--out", out]
    log(f"\n## headroomctl tune recommend, {a.runs} runs")
    log("command: " + " ".join(argv))
    walls, cpus, pcpus = [], [], []
    for r in range(a.runs):
        if os.path.exists(out):
            os.remove(out)
        c0 = prom.cpu_ns()
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=open(os.path.join(work, f"recommend-{r}.out"), "wb"), stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        pcpus.append((prom.cpu_ns() - c0) / 1e9)
        walls.append(wall)
        cpus.append(ru.ru_utime + ru.ru_stime)
        if p.returncode != 0:
            tail = open(os.path.join(work, f"recommend-{r}.out")).read()[-2000:]
            raise RuntimeError(f"headroomctl tune recommend exited {p.returncode}:\n{tail}")
    log(f"wall time:          {fmt_stats(walls)}  first {walls[0]:.3f} s")
    log(f"headroomctl CPU:    {fmt_stats(cpus)}  first {cpus[0]:.3f} s")
    log(f"Prometheus CPU:     {fmt_stats(pcpus)}  first {pcpus[0]:.3f} s")
    goal = median(walls) < 5.0
    log(f"goal (< 5 s over 7 days at 15 s for 64 endpoints): {'goal met' if goal else 'goal MISSED'}")
    by_bucket = not meta.get("percentiles", True)
    problems, worst = check_answer(out, meta["endpoints"], by_bucket)
    if problems:
        log(f"answer: {len(problems)} problems (the largest error {worst:.1%}):")
        for p in problems[:20]:
            log("  " + p)
        return 1
    within = "inside the histogram bucket of" if by_bucket else "within 10 % of"
    log(f"answer: target and max of all {meta['endpoints']} endpoints {within} the generated p90 and p99 "
        f"(the largest error {worst:.1%})")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["run"])
    ap.add_argument("--work", required=True, help="a fresh directory on the cache's file system (hard links)")
    ap.add_argument("--headroomctl", default="", help="the headroomctl to time; without it only the queries")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--endpoints", type=int, default=64)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--max-age-days", type=float, default=7.0)
    ap.add_argument("--no-percentiles", action="store_true",
                    help="a history without headroom_endpoint_latency_seconds: recommend falls back to the histogram")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # runs the cleanup below
    owner = ProcessOwner(a.work)
    try:
        entry, meta = cached(a, owner)
        tsdb = os.path.join(a.work, "tsdb")
        os.makedirs(tsdb)
        for b in blocks(os.path.join(entry, "tsdb")):
            shutil.copytree(os.path.join(entry, "tsdb", b), os.path.join(tsdb, b), copy_function=os.link)
        prom = Prometheus(owner, a.work, tsdb, "bench")
        log(f"prometheus on {prom.url}: ready in {prom.ready_s:.1f} s, pid {prom.proc.pid}")
        floor_rounds(a, prom, meta, a.work)
        rc = 0
        if a.headroomctl and has_recommend(a.headroomctl):
            rc = recommend_rounds(a, prom, a.work, meta)
        elif a.headroomctl:
            log(f"\n{a.headroomctl} has no `tune recommend`: only Prometheus' floor was measured")
        return rc
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        print(f"bench_tune.py: {e}", file=sys.stderr)
        return 2
    finally:
        owner.cleanup()


if __name__ == "__main__":
    sys.exit(main())
