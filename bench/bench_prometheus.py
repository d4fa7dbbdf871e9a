#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The driver of bench/bench_prometheus.sh (standard library only): what a
Prometheus scrape of headroomd's `[prometheus] listen` costs, side by side
with node_exporter's default collectors, and whether being scraped moves the
ORCA tick. bench_prometheus.sh checks the prerequisites, prints the machine's
context and runs

  bench_prometheus.py run --build BUILD_DIR --work DIR [--quick] [--only cost,ticks]

Every process it starts is stopped by its id when it ends (also on SIGTERM).
`bench_prometheus.py scraper` is the scraping client it starts as a separate
process (so the tick observer in this one never waits for it). For
experiments: --counts 256, --tick-pattern "U C10 U C10", --tick-window 4,
--scraper-cpu 0 (run --help).
"""
import argparse
import ctypes
import gzip
import http.client
import json
import os
import random
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ProcessOwner, cpu_clock_ns, free_port, loadavg, median, pct  # noqa: E402  (next to this file)

INTERVAL_NS = 100_000_000  # headroomd's default agent.interval
ENDPOINT_PORT0 = 20000     # [[endpoint]] i listens on ENDPOINT_PORT0 + i
BUSY = 3                   # endpoints with traffic (fewer when N is smaller)
LOAD_RATE = 20             # requests/s per busy endpoint

# What Prometheus 2.x sends with a scrape (scrape/scrape.go).
PROM_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
              "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
    "User-Agent": "Prometheus/2.45.0",
    "X-Prometheus-Scrape-Timeout-Seconds": "10",
}
PLAIN_HEADERS = {"Accept": "text/plain;version=0.0.4"}  # http.client adds Accept-Encoding: identity


# ------------------------------------------------------------------ helpers

def task_schedstat_ns(pid):
    """Σ of /proc/PID/task/*/schedstat's first field (ns on CPU). The file of
    /proc/PID alone is the main thread's: scrapes run on other threads."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that just exited
    return total


def run_wait_ns(tid):
    """Time a thread spent runnable, waiting for a CPU (schedstat's second
    field): headroomd's ticks run on its main thread."""
    try:
        with open(f"/proc/{tid}/task/{tid}/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def stat_ticks(pid):
    """utime + stime of the whole process from /proc/PID/stat (clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


HZ = os.sysconf("SC_CLK_TCK")


def cpu_sample(pids):
    """{name: (cpu clock ns, Σ task schedstat ns, stat ticks)}"""
    return {k: (cpu_clock_ns(p), task_schedstat_ns(p), stat_ticks(p)) for k, p in pids.items()}


def port_in_use(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def scrape(port, headers, timeout=10):
    """One scrape on a fresh connection: (wall ns, status, wire bytes,
    Content-Encoding, Content-Type, body as received)."""
    t0 = time.monotonic_ns()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", "/metrics", headers=headers)
        r = c.getresponse()
        body = r.read()
        t1 = time.monotonic_ns()
        return t1 - t0, r.status, len(body), r.getheader("Content-Encoding") or "", r.getheader("Content-Type") or "", body
    finally:
        c.close()


def exposition(port, headers):
    """What one scrape returns: bytes on the wire, bytes of text, series (lines
    that are neither comments nor empty), the text, its content type."""
    _, status, wire, enc, ctype, body = scrape(port, headers)
    if status != 200:
        raise RuntimeError(f"GET /metrics on port {port}: HTTP {status}")
    text = gzip.decompress(body) if enc == "gzip" else body
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    return {"wire": wire, "bytes": len(text), "series": series, "text": text.decode(), "ctype": ctype, "enc": enc}


# ------------------------------------------------------------- the scraper

def scraper_main():
    """Reads one JSON command a line: {"port", "prom": bool, "at": [monotonic
    ns]}; scrapes at those times (a scrape that would start late starts at
    once); answers {"lat": [ns], "wire": [bytes], "bad": n, "late_max_ns",
    "end_ns"}."""
    for line in sys.stdin:
        cmd = json.loads(line)
        headers = PROM_HEADERS if cmd["prom"] else PLAIN_HEADERS
        lat, wire, spans, bad, late = [], [], [], 0, 0
        for at in cmd["at"]:
            now = time.monotonic_ns()
            if at > now:
                time.sleep((at - now) / 1e9)
            t0 = time.monotonic_ns()
            late = max(late, t0 - at)
            try:
                ns, status, size, _, _, _ = scrape(cmd["port"], headers)
                lat.append(ns)
                spans.append((t0, t0 + ns))
                wire.append(size)
                bad += status != 200
            except OSError:
                bad += 1
        print(json.dumps({"lat": lat, "wire": wire, "spans": spans, "bad": bad, "late_max_ns": late,
                          "end_ns": time.monotonic_ns()}),
              flush=True)


# ------------------------------------------------------- inotify observer

IN_ATTRIB, IN_NONBLOCK, IN_CLOEXEC = 0x4, 0o4000, 0o2000000
_libc = ctypes.CDLL(None, use_errno=True)


class TickObserver:
    """When node.orca (and the tick's last endpoint report) is replaced.

    Watches the report files' inodes, not the directory: a rename over a file
    drops the old inode's link count (IN_ATTRIB, at the rename), then the new
    inode is watched. Two wake-ups per tick, where a directory watch would
    wake this process for each of 257 reports at 256 endpoints."""

    def __init__(self, orca_dir, last_endpoint):
        self.fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.node = os.path.join(orca_dir, "node.orca")
        self.paths = {"node": self.node}
        if last_endpoint:
            self.paths["last"] = os.path.join(orca_dir, f"endpoint.{last_endpoint}.orca")
        self.wd = {}
        for k in self.paths:
            self._watch(k)

    def _watch(self, key):
        wd = _libc.inotify_add_watch(self.fd, self.paths[key].encode(), IN_ATTRIB)
        if wd < 0:
            raise OSError(ctypes.get_errno(), self.paths[key])
        self.wd[wd] = key

    def close(self):
        os.close(self.fd)

    def drain(self):
        """Handles what is queued (the watches move to the new inodes) and
        forgets it."""
        while self._read([]):
            pass

    def observe(self, until_ns):
        """Until the monotonic time: [(t_ns, "node"|"last", seq, timestamp_ms)]."""
        out = []
        while True:
            left = until_ns - time.monotonic_ns()
            if left <= 0:
                return out
            r, _, _ = select.select([self.fd], [], [], left / 1e9)
            if r:
                self._read(out)

    def _read(self, out):
        try:
            buf = os.read(self.fd, 65536)
        except BlockingIOError:
            return False
        t = time.monotonic_ns()
        off = 0
        while off < len(buf):
            wd, mask, _, ln = struct.unpack_from("iIII", buf, off)
            off += 16 + ln
            key = self.wd.pop(wd, None)
            if key is None or not mask & IN_ATTRIB:
                if key is not None:
                    self.wd[wd] = key
                continue
            _libc.inotify_rm_watch(self.fd, wd)
            self._watch(key)
            seq = ts = None
            if key == "node":
                try:
                    with open(self.node, "rb") as f:
                        nm = named_metrics(f.read())
                    seq, ts = nm.get("headroom.seq"), nm.get("headroom.timestamp_ms")
                except (OSError, ValueError, IndexError, struct.error):
                    pass
            out.append((t, key, seq, ts))
        return True


def _varint(b, i):
    x = s = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return x, i


def named_metrics(b):
    """named_metrics (field 8, map<string, double>) of an OrcaLoadReport."""
    out, i = {}, 0
    while i < len(b):
        key, i = _varint(b, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            _, i = _varint(b, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        elif wt == 2:
            n, i = _varint(b, i)
            sub, i = b[i:i + n], i + n
            if field == 8:
                j, name, value = 0, None, 0.0
                while j < len(sub):
                    k, j = _varint(sub, j)
                    if k == 0x0A:
                        m, j = _varint(sub, j)
                        name, j = sub[j:j + m].decode(), j + m
                    elif k == 0x11:
                        value, j = struct.unpack_from("<d", sub, j)[0], j + 8
                    else:
                        raise ValueError("unexpected field in a named_metrics entry")
                out[name] = value
        else:
            raise ValueError("unexpected wire type")
    return out


# ----------------------------------------------------------------- the run

class Bench(ProcessOwner):
    def __init__(self, a):
        self.a = a
        self.build = os.path.abspath(a.build)
        self.work = a.work
        self.headroomd = os.path.join(self.build, "agent/headroomd")
        self.server_bin = os.path.join(self.build, "tests/tools/hr-test-server")
        self.load_bin = os.path.join(self.build, "tests/tools/hr-test-load")
        self.ne_bin = a.node_exporter
        self.procs = []  # every process started here and still running
        self.quick = a.quick
        if a.quick:
            self.counts, self.tick_counts = [1, 16], [16]
            self.cycles, self.tick_window_s, self.tick_pattern = 2, 2, "U S1 S10 C10 U"
        else:
            self.counts, self.tick_counts = [1, 16, 256], [16, 256]
            self.cycles, self.tick_window_s = 16, 8
            self.tick_pattern = "U S1 S1 U S10 C10 U S1 S1 U C10 S10 U S1 S1 U"
        if a.counts:
            self.counts = [int(x) for x in a.counts.split(",")]
            self.tick_counts = [n for n in self.tick_counts if n in self.counts] or self.counts[-1:]
        if a.tick_pattern:
            self.tick_pattern = a.tick_pattern
        if a.tick_window:
            self.tick_window_s = a.tick_window
        self.only = set(a.only.split(","))
        self.window_ns = 1_000_000_000  # a multiple of the interval: every window holds as many ticks
        self.k = 8                      # scrapes per window, 125 ms apart: 4 phases against the ticks
        self.results = []               # per N, for the summary
        self.tick_results = []

    # -- processes
    def wait_listening(self, p, port, log, what, seconds=10):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if p.poll() is not None:
                sys.stdout.write(open(log).read())
                raise SystemExit(f"bench_prometheus: {what} exited at start")
            if port_in_use(port):
                return
            time.sleep(0.05)
        raise SystemExit(f"bench_prometheus: {what} does not listen on 127.0.0.1:{port} after {seconds} s")

    def start_node_exporter(self):
        self.ne_port = free_port()
        log = os.path.join(self.work, "node_exporter.log")
        self.ne = self.start([self.ne_bin, f"--web.listen-address=127.0.0.1:{self.ne_port}"], log)
        self.wait_listening(self.ne, self.ne_port, log, "node_exporter")
        time.sleep(0.5)
        collectors = re.findall(r"collector=(\S+)$", open(log).read(), re.M)
        ver = subprocess.run([self.ne_bin, "--version"], capture_output=True, text=True).stdout.splitlines()
        self.ne_desc = (f"{ver[0] if ver else '?'}, pid {self.ne.pid}, 127.0.0.1:{self.ne_port}, "
                        f"default collectors ({len(collectors)} enabled)")

    def start_traffic_servers(self):
        self.servers = []
        for i in range(BUSY):
            port = ENDPOINT_PORT0 + i
            log = os.path.join(self.work, f"server{i}.log")
            p = self.start([self.server_bin, "--port", str(port), "--delay", "/slow=20ms", "--status", "/err=500"], log)
            self.wait_listening(p, port, log, f"hr-test-server on {port}")
            self.servers.append(p)

    def start_headroomd(self, n):
        d = os.path.join(self.work, f"agent.n{n}")
        os.makedirs(d, exist_ok=True)
        self.hd_port = free_port()
        conf = os.path.join(d, "headroom.toml")
        with open(conf, "w") as f:
            f.write(f"# bench_prometheus.sh: {n} endpoint(s), the rest defaults (interval 100ms)\n")
            f.write(f'[prometheus]\nlisten = "127.0.0.1:{self.hd_port}"\n')
            for i in range(n):
                f.write(f'\n[[endpoint]]\nname = "ep{i}"\nport = {ENDPOINT_PORT0 + i}\ntarget = "10ms"\nmax = "500ms"\n')
        self.orca_dir = os.path.join(d, "orca")
        log = os.path.join(d, "headroomd.log")
        p = self.start([self.headroomd, "--config", conf, "--orca-dir", self.orca_dir], log)
        end = time.monotonic() + 15
        while True:
            text = open(log).read()
            if p.poll() is not None:
                sys.stdout.write(text)
                raise SystemExit("bench_prometheus: headroomd exited at start")
            if "endpoint latency signals unavailable" in text:
                sys.stdout.write(text)
                raise SystemExit("bench_prometheus: the eBPF probe did not load (run as root, kernel with BTF)")
            if "headroomd started" in text and ("eBPF endpoint probe attached" in text or n == 0):
                break
            if time.monotonic() > end:
                sys.stdout.write(text)
                raise SystemExit("bench_prometheus: headroomd did not start in 15 s")
            time.sleep(0.05)
        self.wait_listening(p, self.hd_port, log, "headroomd's [prometheus] listen")
        self.hd = p
        self.hd_log = log
        return p

    def start_load(self, n):
        loads = []
        for i in range(min(BUSY, n)):
            log = os.path.join(self.work, f"load.n{n}.{i}.json")
            loads.append(self.start([self.load_bin, "--port", str(ENDPOINT_PORT0 + i), "--connections", "1",
                                     "--rate", str(LOAD_RATE), "--path", "/", "--path", "/slow", "--path", "/err",
                                     "--duration", "3600s"], log))
        return loads

    # -- the scraper process
    def start_scraper(self):
        self.scraper = subprocess.Popen([sys.executable, os.path.abspath(__file__), "scraper"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=self.work)
        self.procs.append(self.scraper)
        if self.a.scraper_cpu is not None:
            os.sched_setaffinity(self.scraper.pid, {self.a.scraper_cpu})

    def scraper_send(self, port, prom, at):
        self.scraper.stdin.write(json.dumps({"port": port, "prom": prom, "at": at}) + "\n")
        self.scraper.stdin.flush()

    def scraper_reply(self):
        line = self.scraper.stdout.readline()
        if not line:
            raise SystemExit("bench_prometheus: the scraper process died")
        return json.loads(line)

    # -- 1./2. CPU per scrape
    def cost(self, n):
        hd_pid, ne_pid = self.hd.pid, self.ne.pid
        pids = {"hd": hd_pid, "ne": ne_pid}
        targets = [("hd", self.hd_port, True), ("nez", self.ne_port, True), ("nep", self.ne_port, False)]
        owner = {"hd": "hd", "nez": "ne", "nep": "ne"}
        W, K = self.window_ns, self.k
        print(f"## N = {n}: CPU per scrape, {self.cycles} cycles; each cycle, for headroomd, node_exporter as "
              f"Prometheus scrapes (gzip) and node_exporter plain (order rotated): {W / 1e9:.1f} s idle, then {K} "
              f"scrapes {W / K / 1e6:.0f} ms apart in {W / 1e9:.1f} s")
        # Warm-up: a few scrapes of each, and a second of quiet.
        for _ in range(3):
            for _, port, prom in targets:
                scrape(port, PROM_HEADERS if prom else PLAIN_HEADERS)
        # Windows on one grid of W: the ticks' phase in every window is the same.
        t0 = (time.monotonic_ns() // W + 2) * W
        plan = []
        for c in range(self.cycles):
            order = targets[c % 3:] + targets[:c % 3]
            for t in order:
                plan += [("idle", None), ("scrape", t)]
        plan.append(("idle", None))
        samples = []   # CPU at each window boundary
        replies = {}   # window index -> scraper's reply
        overruns = 0
        loads = []     # load average at the end of each cycle
        for j, (kind, t) in enumerate(plan):
            start = t0 + j * W
            now = time.monotonic_ns()
            if now > start + 5_000_000:
                overruns += 1
            else:
                time.sleep(max(0, start - now) / 1e9)
            samples.append(cpu_sample(pids))
            if j % 6 == 5:
                loads.append(loadavg())
            if kind == "scrape":
                self.scraper_send(t[1], t[2], [start + 10_000_000 + i * (W // K) for i in range(K)])
                # Read the reply after the window has ended: not before, it may be in flight.
                time.sleep(max(0, start + W - 2_000_000 - time.monotonic_ns()) / 1e9)
                replies[j] = self.scraper_reply()
                if replies[j]["end_ns"] > start + W:
                    overruns += 1
        samples.append(cpu_sample(pids))
        # Per window and process: (clock, schedstat, ticks) used in it.
        used = [{p: tuple(b[p][m] - a[p][m] for m in range(3)) for p in pids} for a, b in zip(samples, samples[1:])]
        per = {k: [] for k in owner}          # per cycle, µs per scrape (cpu clock)
        spill = {k: [] for k in owner}        # (next idle - previous idle) / K, µs
        pooled = {k: [0, 0, 0, 0] for k in owner}  # Σ scrape - Σ previous idle per method, scrapes
        lat = {k: [] for k in owner}
        wire = {k: [] for k in owner}
        bad = 0
        idle_cpu = {p: [] for p in pids}
        for j, (kind, t) in enumerate(plan):
            if kind == "idle":
                for p in pids:
                    idle_cpu[p].append(used[j][p][0])
                continue
            k, proc = t[0], owner[t[0]]
            prev, cur, nxt = used[j - 1][proc], used[j][proc], used[j + 1][proc]
            per[k].append((cur[0] - prev[0]) / K / 1000)
            spill[k].append((nxt[0] - prev[0]) / K / 1000)
            for m in range(3):
                pooled[k][m] += cur[m] - prev[m]
            pooled[k][3] += K
            lat[k] += replies[j]["lat"]
            wire[k] += replies[j]["wire"]
            bad += replies[j]["bad"]
        cycles = list(range(self.cycles))
        # per[k] is in plan order: one entry per cycle for each k.
        ratio_z = [h / z if z > 0 else float("nan") for h, z in zip(per["hd"], per["nez"])]
        ratio_p = [h / z if z > 0 else float("nan") for h, z in zip(per["hd"], per["nep"])]
        print(f"{'cycle':>5} {'headroomd µs':>13} {'n_e gzip µs':>12} {'n_e plain µs':>13} {'hd/ne gzip':>11} "
              f"{'hd/ne plain':>12}  load")
        for c in cycles:
            print(f"{c + 1:>5} {per['hd'][c]:>13.0f} {per['nez'][c]:>12.0f} {per['nep'][c]:>13.0f} "
                  f"{ratio_z[c]:>11.3f} {ratio_p[c]:>12.3f}  {loads[c]}")
        if overruns:
            print(f"WARNING: {overruns} window(s) started late or their scrapes ran past the window's end")
        if bad:
            print(f"WARNING: {bad} scrape(s) failed or did not answer 200")
        # What the scrapes return (after the cycles: traffic has been on for a while).
        hd_x = exposition(self.hd_port, PROM_HEADERS)
        nez_x = exposition(self.ne_port, PROM_HEADERS)
        nep_x = exposition(self.ne_port, PLAIN_HEADERS)
        x = {"hd": hd_x, "nez": nez_x, "nep": nep_x}
        print()
        name = {"hd": f"headroomd, N={n}", "nez": "node_exporter, as Prometheus (gzip)", "nep": "node_exporter, plain"}
        print(f"| N = {n} | {name['hd']} | {name['nez']} | {name['nep']} |")
        print("|---|---|---|---|")

        def row(label, f):
            print(f"| {label} | " + " | ".join(f(k) for k in owner) + " |")

        row("agent CPU per scrape, µs: median", lambda k: f"**{median(per[k]):.0f}**")
        row("... p10 / p90 over cycles", lambda k: f"{pct(per[k], 0.1):.0f} / {pct(per[k], 0.9):.0f}")
        print(f"| ratio headroomd / node_exporter per cycle: median (p10 / p90) | | "
              f"**{median(ratio_z):.3f}** ({pct(ratio_z, 0.1):.3f} / {pct(ratio_z, 0.9):.3f}) | "
              f"{median(ratio_p):.3f} ({pct(ratio_p, 0.1):.3f} / {pct(ratio_p, 0.9):.3f}) |")
        row("wall latency per scrape (client), ms: p50 / p99",
            lambda k: f"{pct(lat[k], 0.5) / 1e6:.2f} / {pct(lat[k], 0.99) / 1e6:.2f}")
        row("exposition, bytes: text / on the wire", lambda k: f"{x[k]['bytes']} / {x[k]['wire']}"
            + (" (gzip)" if x[k]["enc"] == "gzip" else ""))
        row("series (lines that are not comments)", lambda k: f"{x[k]['series']}")
        row("CPU of the idle windows, % of a core: median",
            lambda k: f"{median(idle_cpu[owner[k]]) / W * 100:.2f}")
        row("spill: (next idle − previous idle) / scrapes, µs: median", lambda k: f"{median(spill[k]):+.0f}")
        row("pooled: Σ task schedstat / process CPU clock, µs per scrape",
            lambda k: f"{pooled[k][1] / pooled[k][3] / 1000:.0f} / {pooled[k][0] / pooled[k][3] / 1000:.0f}")
        row(f"pooled: /proc/PID/stat utime+stime ({1000 // HZ} ms ticks), µs per scrape",
            lambda k: f"{pooled[k][2] * 1e6 / HZ / pooled[k][3]:.0f}")
        print(f"content types: headroomd {hd_x['ctype']!r}; node_exporter {nez_x['ctype']!r} (Prometheus' Accept), "
              f"{nep_x['ctype']!r} (plain)")
        # The traffic's mark on headroomd's figures.
        req = [float(v) for e, v in re.findall(r'^headroom_endpoint_requests_total\{endpoint="(ep\d+)"\} (\S+)$',
                                              hd_x["text"], re.M)]
        err = sum(float(v) for v in re.findall(r'^headroom_endpoint_errors_total\{[^}]*\} (\S+)$', hd_x["text"], re.M))
        slo = sum(float(v) for v in re.findall(r'^headroom_endpoint_requests_over_slo_total\{[^}]*slo="target"[^}]*\} (\S+)$',
                                               hd_x["text"], re.M))
        print(f"traffic: {sum(1 for v in req if v > 0)} of {n} endpoint(s) counted requests "
              f"({sum(req):.0f} requests, {err:.0f} errors, {slo:.0f} over the 10 ms target); "
              f"exposition before any traffic {self.hd_size0['bytes']} bytes / {self.hd_size0['series']} series, "
              f"now {hd_x['bytes']} / {hd_x['series']}")
        print()
        self.results.append({"n": n, "per": per, "rz": ratio_z, "rp": ratio_p, "lat": lat, "x": x})

    # -- 3. tick timing
    MODES = {
        "U": (0, "not scraped"),
        "S1": (1, "scraped 1/s"),
        "S10": (10, "scraped 10/s (stress)"),
        "C10": (10, "10/s, each 1 ms before the usual rename (worst case)"),
    }

    def ticks(self, n):
        I = INTERVAL_NS
        W = self.tick_window_s * 1_000_000_000
        pattern = self.tick_pattern.split()
        if pattern[0] != "U":
            raise SystemExit("bench_prometheus: the tick windows must begin with U")
        print(f"## N = {n}: the ORCA tick while scraped: windows of {self.tick_window_s} s, {' '.join(pattern)}; "
              "U not scraped, S1 scraped once a second and S10 ten times a second (each scrape at a random time "
              "in its slot), C10 ten times a second each started 1 ms before node.orca's usual rename; "
              "Prometheus' headers")
        print("times: when node.orca (and the last endpoint report) is renamed, from inotify on the files' inodes "
              "(the observer runs SCHED_FIFO); period: between consecutive seqs; late: behind the rename's usual "
              "time in the 100 ms cycle (the median of window 1); hit: a scrape was in flight at a tick's usual time")
        obs = TickObserver(self.orca_dir, f"ep{n - 1}" if n > 0 else None)
        old_policy, old_param = os.sched_getscheduler(0), os.sched_getparam(0)
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(10))
            rt = True
        except (OSError, AttributeError):
            rt = False
            print("WARNING: could not run the observer SCHED_FIFO; its own wake-up delays are in the figures")
        data = {m: {"period": [], "late": [], "ts": [], "span": [], "lat": [], "cpu": [], "win": [],
                     "wait": []} for m in self.MODES}
        hit = {"late": [], "span": []}  # ticks of scraped windows with a scrape in flight at their usual time
        phase = None
        rng = random.Random(1)
        print(f"{'win':>3} {'mode':>4} {'ticks':>5} {'period p50':>10} {'p99':>8} {'max':>8} {'jitter':>7} "
              f"{'late p99':>8} {'max':>7} {'span p50':>8} {'p99':>7} {'scrapes':>7} {'hits':>4} {'lat p50':>7} "
              f"{'p99':>6} {'hd CPU %':>8} {'wait':>5}  load")
        nan = float("nan")
        try:
            t0 = (time.monotonic_ns() // I + 5) * I
            for j, mode in enumerate(pattern):
                start, end = t0 + j * W, t0 + (j + 1) * W
                time.sleep(max(0, start - time.monotonic_ns()) / 1e9)
                obs.drain()
                c0, w0 = cpu_clock_ns(self.hd.pid), run_wait_ns(self.hd.pid)
                rate = self.MODES[mode][0]
                at = []
                if mode == "C10":
                    first = start + (phase - start) % I  # the first usual rename at or after start
                    at = [first + i * I - 1_000_000 for i in range(self.tick_window_s * rate)
                          if first + i * I - 1_000_000 >= start and first + i * I < end - 30_000_000]
                elif rate:
                    # Uniform in each slot, so every phase against the ticks is
                    # seen; the last slot's first half only, to end in the window.
                    slot, count = 1_000_000_000 // rate, self.tick_window_s * rate
                    at = [start + i * slot + rng.randrange(0, slot if i < count - 1 else slot // 2)
                          for i in range(count)]
                if at:
                    self.scraper_send(self.hd_port, True, at)
                ev = obs.observe(end)
                c1, w1 = cpu_clock_ns(self.hd.pid), run_wait_ns(self.hd.pid)
                rep = self.scraper_reply() if at else {"lat": [], "spans": [], "bad": 0}
                if rep["bad"]:
                    print(f"WARNING: {rep['bad']} scrape(s) failed")
                nodes = [(t, s, ts) for t, k, s, ts in ev if k == "node"]
                lasts = [t for t, k, _, _ in ev if k == "last"]
                if phase is None:
                    xs = [t % I for t, _, _ in nodes]
                    dev = [((x - xs[0] + I // 2) % I) - I // 2 for x in xs]
                    phase = (xs[0] + int(median(dev))) % I
                period, tsp, span, late, hits = [], [], [], [], 0
                for (ta, sa, xa), (tb, sb, xb) in zip(nodes, nodes[1:]):
                    if sa is not None and sb == sa + 1:
                        period.append((tb - ta) / 1e6)
                        tsp.append(xb - xa)
                li = 0
                for i, (t, _, _) in enumerate(nodes):
                    lns = ((t - phase + I // 2) % I) - I // 2
                    late.append(lns / 1e6)
                    nxt = nodes[i + 1][0] if i + 1 < len(nodes) else end
                    while li < len(lasts) and lasts[li] < t:
                        li += 1
                    sp = (lasts[li] - t) / 1e6 if li < len(lasts) and lasts[li] < nxt else None
                    if sp is not None:
                        span.append(sp)
                    usual = t - lns
                    if any(s0 <= t and s1 >= usual - 1_000_000 for s0, s1 in rep["spans"]):
                        hits += 1
                        hit["late"].append(lns / 1e6)
                        if sp is not None:
                            hit["span"].append(sp)
                d = data[mode]
                d["period"] += period
                d["ts"] += tsp
                d["span"] += span
                d["late"] += late
                d["lat"] += rep["lat"]
                d["cpu"].append((c1 - c0) / (end - start) * 100)
                wait = (w1 - w0) / (W // I) / 1000  # µs per tick
                d["wait"].append(wait)
                d["win"].append(period)
                lat = rep["lat"]
                print(f"{j + 1:>3} {mode:>4} {len(period):>5} {pct(period, .5):>10.3f} {pct(period, .99):>8.3f} "
                      f"{max(period, default=nan):>8.3f} {pct(period, .99) - pct(period, .5):>7.3f} "
                      f"{pct(late, .99):>8.3f} {max(late, default=nan):>7.3f} "
                      f"{pct(span, .5):>8.3f} {pct(span, .99):>7.3f} {len(lat):>7} {hits if at else '':>4} "
                      f"{pct(lat, .5) / 1e6 if lat else nan:>7.2f} {pct(lat, .99) / 1e6 if lat else nan:>6.2f} "
                      f"{(c1 - c0) / (end - start) * 100:>8.2f} {wait:>5.0f}  {loadavg()}")
        finally:
            if rt:
                os.sched_setscheduler(0, old_policy, old_param)
            obs.close()
        print()
        print(f"| N = {n}, windows of a kind pooled | ticks | period p50 | p99 | max | jitter p99 − p50 | min | "
              "late p50 / p99 / max | span node.orca → last report p50 / p99 | report timestamps (1 ms steps): "
              "period min / max | scrape latency p50 / p99 | headroomd CPU % | tick thread's run-queue wait, µs "
              "per tick |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        summary = {}
        for m, (_, label) in self.MODES.items():
            d = data[m]
            p = d["period"]
            if not p:
                continue
            jit = pct(p, .99) - pct(p, .5)
            summary[m] = {"p50": pct(p, .5), "p99": pct(p, .99), "max": max(p), "jitter": jit, "ticks": len(p),
                          "late99": pct(d["late"], .99), "latemax": max(d["late"]),
                          "span50": pct(d["span"], .5), "span99": pct(d["span"], .99),
                          "win": [pct(w, .99) - pct(w, .5) for w in d["win"]], "wait": median(d["wait"])}
            lat = d["lat"]
            print(f"| {label} | {len(p)} | {pct(p, .5):.3f} ms | {pct(p, .99):.3f} | {max(p):.3f} | **{jit:.3f}** | "
                  f"{min(p):.3f} | {pct(d['late'], .5):.3f} / {pct(d['late'], .99):.3f} / {max(d['late']):.3f} | "
                  f"{pct(d['span'], .5):.3f} / {pct(d['span'], .99):.3f} ms | "
                  f"{min(d['ts'], default=nan):.0f} / {max(d['ts'], default=nan):.0f} ms | "
                  + (f"{pct(lat, .5) / 1e6:.2f} / {pct(lat, .99) / 1e6:.2f} ms" if lat else "—")
                  + f" | {median(d['cpu']):.2f} | {median(d['wait']):.0f} |")
        if hit["late"]:
            print(f"| ticks with a scrape in flight at their usual time (all scraped windows) | {len(hit['late'])} | | | | "
                  f"| | {pct(hit['late'], .5):.3f} / {pct(hit['late'], .99):.3f} / {max(hit['late']):.3f} | "
                  f"{pct(hit['span'], .5):.3f} / {pct(hit['span'], .99):.3f} ms | | | | |")
        # The noise floor of the jitter: the unscraped windows split in two.
        u = data["U"]["win"]
        noise = nan
        if len(u) >= 2:
            a = [x for w in u[0::2] for x in w]
            b = [x for w in u[1::2] for x in w]
            noise = (pct(a, .99) - pct(a, .5)) - (pct(b, .99) - pct(b, .5))
            print(f"noise: jitter of the unscraped windows 1, 3, 5... minus that of 2, 4, 6...: {noise:+.3f} ms; "
                  "per window, U: " + " ".join(f"{x:.2f}" for x in summary["U"]["win"])
                  + ("; S1: " + " ".join(f"{x:.2f}" for x in summary["S1"]["win"]) if "S1" in summary else ""))
        print()
        self.tick_results.append({"n": n, "s": summary, "hit": hit, "noise": noise})

    # -- the whole run
    def run(self):
        for i in range(max(self.counts)):
            port = ENDPOINT_PORT0 + i
            if port_in_use(port):
                raise SystemExit(f"bench_prometheus: 127.0.0.1:{port} already has a listener; the endpoints use "
                                 f"{ENDPOINT_PORT0}..{ENDPOINT_PORT0 + 255}")
        self.start_node_exporter()
        self.start_traffic_servers()
        self.start_scraper()
        print(f"node_exporter: {self.ne_desc}")
        print(f"headroomd: {self.headroomd}, interval 100 ms, N [[endpoint]]s ep0.. on ports {ENDPOINT_PORT0}+i "
              f"(target 10ms, max 500ms); ep0..ep{BUSY - 1} (those that exist) carry {LOAD_RATE} req/s each from "
              f"hr-test-load (1 connection; /, /slow = 20 ms, /err = 500) to hr-test-server; the others' ports are idle")
        print("scrapes: a fresh connection each (headroomd closes them), GET /metrics; CPU: the process CPU clock "
              "(all threads, ns), CPU per scrape = (scrape window − the idle window before it) / scrapes")
        print()
        for n in self.counts:
            if "cost" not in self.only and not ("ticks" in self.only and n in self.tick_counts):
                continue
            self.start_headroomd(n)
            time.sleep(0.5)
            self.hd_size0 = exposition(self.hd_port, PROM_HEADERS)
            loads = self.start_load(n)
            time.sleep(1.5 if self.quick else 3)
            print(f"headroomd pid {self.hd.pid}, N = {n}, listen 127.0.0.1:{self.hd_port}; "
                  f"{open(self.hd_log).read().splitlines()[0].split(' ', 2)[-1].strip()}")
            if "cost" in self.only:
                self.cost(n)
            if "ticks" in self.only and n in self.tick_counts:
                self.ticks(n)
            for p in loads:
                self.stop(p)
            self.stop(self.hd)
        self.summary()

    def summary(self):
        print(f"## Summary ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load at end {loadavg()})")
        print()
        if self.results:
            print("| N | headroomd µs CPU per scrape (p10–p90) | node_exporter as Prometheus (gzip) | node_exporter plain "
                  "| ratio hd / ne gzip, median of cycles | hd / ne plain | headroomd bytes / series | "
                  "node_exporter bytes (gzip on the wire) / series | scrape wall p50 / p99 ms, hd / ne gzip |")
            print("|---|---|---|---|---|---|---|---|---|")
            for r in self.results:
                per, x, lat = r["per"], r["x"], r["lat"]
                f = {k: f"{median(per[k]):.0f} ({pct(per[k], .1):.0f}–{pct(per[k], .9):.0f})" for k in per}
                print(f"| {r['n']} | **{f['hd']}** | {f['nez']} | {f['nep']} | **{median(r['rz']):.3f}** | "
                      f"{median(r['rp']):.3f} | {x['hd']['bytes']} / {x['hd']['series']} | "
                      f"{x['nez']['bytes']} ({x['nez']['wire']}) / {x['nez']['series']} | "
                      f"{pct(lat['hd'], .5) / 1e6:.2f} / {pct(lat['hd'], .99) / 1e6:.2f}, "
                      f"{pct(lat['nez'], .5) / 1e6:.2f} / {pct(lat['nez'], .99) / 1e6:.2f} |")
            print()
            for which, key, rk in (("as Prometheus scrapes it (gzip)", "nez", "rz"), ("plain, uncompressed", "nep", "rp")):
                ok = all(median(r["per"]["hd"]) < median(r["per"][key]) and median(r[rk]) < 1 for r in self.results)
                detail = "; ".join(f"N={r['n']}: {median(r['per']['hd']):.0f} vs {median(r['per'][key]):.0f} µs "
                                   f"(ratio {median(r[rk]):.3f})" for r in self.results)
                print(f"goal {'met' if ok else 'MISSED'}: headroomd CPU per scrape < node_exporter's "
                      f"(default collectors, {which}): {detail}")
            worst = max(self.results, key=lambda r: median(r["per"]["hd"]))
            print(f"at one scrape per 15 s, headroomd's dearest (N={worst['n']}) is "
                  f"{median(worst['per']['hd']) / 15e6 * 100:.4f} % of a core")
            print()
        if self.tick_results:
            print("| N | windows pooled | ticks | period p50 / p99 / max, ms | jitter p99 − p50, ms | "
                  "late p99 / max, ms | span node.orca → last report p50 / p99, ms | tick thread's run-queue wait, "
                  "µs per tick |")
            print("|---|---|---|---|---|---|---|---|")
            for r in self.tick_results:
                for m, (_, label) in self.MODES.items():
                    s = r["s"].get(m)
                    if s:
                        print(f"| {r['n']} | {label} | {s['ticks']} | {s['p50']:.3f} / {s['p99']:.3f} / {s['max']:.3f} | "
                              f"**{s['jitter']:.3f}** | {s['late99']:.3f} / {s['latemax']:.3f} | "
                              f"{s['span50']:.3f} / {s['span99']:.3f} | {s['wait']:.0f} |")
                h = r["hit"]
                if h["late"]:
                    print(f"| {r['n']} | ticks with a scrape in flight at their usual time | {len(h['late'])} | | | "
                          f"{pct(h['late'], .99):.3f} / {max(h['late']):.3f} | "
                          f"{pct(h['span'], .5):.3f} / {pct(h['span'], .99):.3f} | |")
            print()
            threshold = 1.0
            for r in self.tick_results:
                s = r["s"]
                if "U" not in s or "S1" not in s:
                    continue
                d = s["S1"]["jitter"] - s["U"]["jitter"]
                extra = "; ".join(f"{m} {s[m]['jitter'] - s['U']['jitter']:+.3f} ms" for m in ("S10", "C10") if m in s)
                print(f"goal {'met' if d < threshold else 'MISSED'}: tick p99 jitter scraped 1/s − not scraped "
                      f"< {threshold:g} ms at N={r['n']}: {d:+.3f} ms (p99 {s['S1']['p99'] - s['U']['p99']:+.3f} ms, "
                      f"max {s['S1']['max'] - s['U']['max']:+.3f} ms; noise, U − U: {r['noise']:+.3f} ms); "
                      f"stress, no goal: {extra}")
            print(f"threshold: {threshold:g} ms = 1 % of the 100 ms interval; readers take a report as stale only after "
                  "max(3 × interval, 1 s), so a tick that moves by less than 1 ms changes nothing any reader can see")

def main():
    if len(sys.argv) > 1 and sys.argv[1] == "scraper":
        scraper_main()
        return 0
    ap = argparse.ArgumentParser(prog="bench_prometheus.py")
    ap.add_argument("cmd", choices=["run"])
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--node-exporter", default="/usr/bin/prometheus-node-exporter")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="cost,ticks")
    ap.add_argument("--counts", default="", help="endpoint counts, e.g. 1,16 (default 1,16,256; --quick 1,16)")
    ap.add_argument("--tick-pattern", default="", help='windows of the tick part, e.g. "U S1 C10 U"')
    ap.add_argument("--tick-window", type=int, default=0, help="seconds per tick window")
    ap.add_argument("--scraper-cpu", type=int, default=None, help="pin the scraping client to this CPU")
    a = ap.parse_args()
    b = Bench(a)
    exiting = []

    def on_signal(signum, _frame):
        if not exiting:  # once: a second signal must not cut the cleanup short
            exiting.append(signum)
            sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        b.run()
    finally:
        exiting.append(0)
        b.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
