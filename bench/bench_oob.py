#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The driver of bench/bench_oob.sh (standard library only): what headroomd's
out-of-band ORCA streams ([oob], docs/oob.md) cost the agent, with 0, 1, 100
and 1000 streams at a 100 ms and a 10 s report_interval, side by side in one
run, and whether they move the sampling tick. bench_oob.sh checks the
prerequisites, prints the machine's context and runs

  bench_oob.py run --build BUILD_DIR --work DIR [--quick]

One headroomd (agent.interval 100 ms, orca_dir on tmpfs, [oob] on 127.0.0.1,
max_streams 2000, --no-ebpf) for the whole run. Each round runs every variant
once, in a slice of its own (the order rotates by one each round): a fresh
bench_oob_client opens the variant's streams, the slice waits until every
stream has had its first message and then --settle seconds, then measures
over --slice seconds: headroomd's CPU (process CPU clock, exact; and
utime + stime of /proc/PID/stat as a cross-check), per thread
(/proc/PID/task/*/schedstat, context switches), VmRSS / VmHWM, the messages
the client received (and that each parsed and validated), the gaps between
a stream's messages; and the tick: bench_oob_client --watch-ticks (SCHED_FIFO)
times every rename of node.orca, the period between consecutive seqs is
compared with 100 ms. Then the memory phase: a fresh headroomd per variant
(--memory-reps times), its RSS before, with the streams open, after they
closed. Every process it starts is stopped by its id (also on SIGTERM).
For experiments: --variants "0 1000@100ms 1000@100ms/k1", --rounds, --slice,
--settle, --memory-reps, --transport unix (run --help).
"""
import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ProcessOwner, cpu_clock_ns, free_port, loadavg, median, pct  # noqa: E402  (next to this file)

INTERVAL_MS = 100  # agent.interval of the run
HZ = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

NAN = float("nan")
MIN_MESSAGES = 500  # per slice, for a per-message figure
DEFAULT_VARIANTS = "0 1@100ms 100@100ms 1000@100ms 1@10s 100@10s 1000@10s 1000@100ms/k1"
QUICK_VARIANTS = "0 1@100ms 100@100ms 1000@100ms 1000@10s"


# ------------------------------------------------------------------ helpers

def spread(values, fmt):
    v = [x for x in values if x == x]
    if not v:
        return "—"
    return f"{fmt.format(median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})"


def stat_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def status_kib(pid, keys=("VmRSS", "VmHWM", "RssAnon", "RssFile")):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in keys:
                out[k] = int(v.split()[0])
    return out


def threads(pid):
    """{tid: (comm, ns on CPU, ns runnable waiting, voluntary + involuntary switches)}"""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                run, wait = (int(x) for x in f.read().split()[:2])
            sw = 0
            with open(f"/proc/{pid}/task/{t}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        sw += int(line.split()[1])
            out[int(t)] = (comm, run, wait, sw)
        except (OSError, ValueError):
            pass  # a thread that just exited
    return out


def parse_variant(spec):
    """"0", "1000@100ms", "1000@10s/k1" -> dict"""
    k = None
    if "/k" in spec:
        spec, ks = spec.split("/k")
        k = int(ks)
    if spec == "0":
        return {"name": "0", "n": 0, "interval": "", "interval_ms": 0, "k": 0}
    n, interval = spec.split("@")
    n = int(n)
    ms = float(interval[:-2]) if interval.endswith("ms") else float(interval[:-1]) * 1000
    k = n if k is None else k
    name = f"{n}@{interval}" + (f"/k{k}" if k != n else "")
    return {"name": name, "n": n, "interval": interval, "interval_ms": ms, "k": k}


# ----------------------------------------------------------------- the run

class Bench(ProcessOwner):
    stop_timeout = 15

    def __init__(self, a):
        self.a = a
        self.build = os.path.abspath(a.build)
        self.work = a.work
        self.headroomd = os.path.join(self.build, "agent/headroomd")
        self.client_bin = os.path.join(self.build, "bench/bench_oob_client")
        self.procs = []
        self.quick = a.quick
        self.variants = [parse_variant(s) for s in (a.variants or (QUICK_VARIANTS if a.quick else DEFAULT_VARIANTS)).split()]
        if not any(v["n"] == 0 for v in self.variants):
            self.variants.insert(0, parse_variant("0"))
        self.rounds = a.rounds or (1 if a.quick else 5)
        self.slice_s = a.slice or (4 if a.quick else 15)
        self.settle_s = a.settle if a.settle is not None else (1 if a.quick else 2)
        self.mem_reps = a.memory_reps if a.memory_reps is not None else (1 if a.quick else 2)
        self.slices = []  # every slice's figures
        self.ticks = []   # (t_ns, seq, timestamp_ms) from the watcher

    # -- processes
    def start_headroomd(self, sub="main"):
        d = os.path.join(self.work, sub)
        self.orca_dir = os.path.join(d, "orca")
        os.makedirs(self.orca_dir, exist_ok=True)
        if self.a.transport == "unix":
            self.target = f"unix:{d}/oob.sock"
        else:
            self.target = f"127.0.0.1:{free_port()}"
        conf = os.path.join(d, "headroom.toml")
        with open(conf, "w") as f:
            f.write("# bench_oob.sh: the node report only, 100 ms, streams on one listener\n")
            f.write(f'[agent]\ninterval = "{INTERVAL_MS}ms"\norca_dir = "{self.orca_dir}"\n\n')
            f.write(f'[oob]\nlisten = ["{self.target}"]\nmax_streams = 2000\n')
        self.conf_text = open(conf).read()
        self.hd_log = os.path.join(d, "headroomd.log")
        self.hd = self.start([self.headroomd, "--config", conf, "--no-ebpf"], self.hd_log)
        end = time.monotonic() + 15
        while True:
            text = open(self.hd_log).read()
            if self.hd.poll() is not None:
                sys.stdout.write(text)
                raise SystemExit("bench_oob: headroomd exited at start")
            if "serving ORCA streams" in text and os.path.exists(os.path.join(self.orca_dir, "node.orca")):
                break
            if time.monotonic() > end:
                sys.stdout.write(text)
                raise SystemExit("bench_oob: headroomd did not start serving in 15 s")
            time.sleep(0.05)

    def start_watcher(self):
        self.ticks_path = os.path.join(self.work, "ticks.txt")
        log = os.path.join(self.work, "watcher.log")
        self.watcher = self.start([self.client_bin, "--watch-ticks", self.orca_dir, "--out", self.ticks_path], log)
        time.sleep(0.3)
        if self.watcher.poll() is not None:
            sys.stdout.write(open(log).read())
            raise SystemExit("bench_oob: the tick watcher exited at start")
        w = open(log).read().strip()
        if w:
            print(f"WARNING (watcher): {w}")

    # -- the client
    def start_client(self, v):
        argv = [self.client_bin, "--target", self.target, "--streams", str(v["n"]), "--channels", str(v["k"]),
                "--interval", v["interval"], "--control"]
        log = os.path.join(self.work, "client.log")
        c = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "ab"),
                             text=True, cwd=self.work)
        self.procs.append(c)
        return c

    def ask(self, c, cmd, timeout=20):
        c.stdin.write(cmd + "\n")
        c.stdin.flush()
        r, _, _ = select.select([c.stdout], [], [], timeout)
        if not r:
            raise SystemExit(f"bench_oob: the client did not answer {cmd!r} in {timeout} s")
        line = c.stdout.readline()
        if not line:
            raise SystemExit(f"bench_oob: the client exited (see {self.work}/client.log)")
        return json.loads(line)

    def sample(self):
        pid = self.hd.pid
        t = time.monotonic_ns()
        return {"t": t, "cpu": cpu_clock_ns(pid), "stat": stat_ticks(pid), "mem": status_kib(pid),
                "threads": threads(pid)}

    # -- one slice
    def run_slice(self, rnd, v):
        c = None
        open_s = 0.0
        if v["n"]:
            c = self.start_client(v)
            t0 = time.monotonic()
            while True:
                s = self.ask(c, "stat")
                if s["received_first"] + s["ended"] >= v["n"]:
                    break
                if time.monotonic() - t0 > 30:
                    break
                time.sleep(0.1)
            open_s = time.monotonic() - t0
            if s["ended"]:
                print(f"WARNING: {s['ended']} stream(s) ended while opening: {s['statuses']} {s['first_error']}")
        time.sleep(self.settle_s)
        rss = []
        a = self.sample()
        ca = self.ask(c, "mark") if c else None
        end = time.monotonic() + self.slice_s
        while True:  # VmRSS once a second over the slice
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(1.0, left))
            rss.append(status_kib(self.hd.pid)["VmRSS"])
        cb = self.ask(c, "mark") if c else None
        b = self.sample()
        if c:
            c.stdin.write("quit\n")
            c.stdin.flush()
            try:
                c.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            self.stop(c)
        dt = (b["t"] - a["t"]) / 1e9
        r = {"round": rnd, "v": v["name"], "n": v["n"], "interval_ms": v["interval_ms"], "k": v["k"],
             "t0": a["t"], "t1": b["t"], "dt": dt, "open_s": open_s,
             "cpu_pct": (b["cpu"] - a["cpu"]) / (b["t"] - a["t"]) * 100,
             "cpu_ns": b["cpu"] - a["cpu"],
             "stat_pct": (b["stat"] - a["stat"]) / HZ / dt * 100,
             "rss_mib": max(rss + [b["mem"]["VmRSS"]]) / 1024, "hwm_mib": b["mem"]["VmHWM"] / 1024,
             "anon_mib": b["mem"]["RssAnon"] / 1024, "file_mib": b["mem"]["RssFile"] / 1024,
             "nthreads": len(b["threads"])}
        # Per thread group: the main thread (the ticks), other threads by name.
        groups = {}
        for tid, (comm, run, wait, sw) in b["threads"].items():
            key = "main (tick)" if tid == self.hd.pid else comm
            prev = a["threads"].get(tid, (comm, 0, 0, 0))
            g = groups.setdefault(key, [0, 0, 0, 0])
            g[0] += (run - prev[1]) / 1e3  # µs
            g[1] += (wait - prev[2]) / 1e3
            g[2] += sw - prev[3]
            g[3] += 1
        r["threads"] = groups
        if cb:
            w = cb["window"]
            r.update({"msgs": cb["messages"] - ca["messages"], "bad": cb["bad"] - ca["bad"],
                      "client_cpu_pct": (cb["cpu_ns"] - ca["cpu_ns"]) / (cb["t_ns"] - ca["t_ns"]) * 100,
                      "gap50": w["gap_ms"]["p50"], "gap99": w["gap_ms"]["p99"], "gapmax": w["gap_ms"]["max"],
                      "worst": w["gap_ms"]["worst_stream"], "silent": w["silent_streams"],
                      "step50": w["seq_step"]["p50"], "stepmax": w["seq_step"]["max"], "ended": cb["ended"],
                      "statuses": cb["statuses"]})
            r["msgs_per_s"] = r["msgs"] / dt
        else:
            r.update({"msgs": 0, "bad": 0, "client_cpu_pct": 0.0, "msgs_per_s": 0.0})
        self.slices.append(r)
        tg = sorted(groups.items(), key=lambda kv: -kv[1][0])
        threads_txt = " ".join(f"{k}:{g[0] / dt / 1e4:.2f}%/{g[2] / dt:.0f}sw" for k, g in tg[:4])
        print(f"{rnd:>2} {v['name']:>14} {r['cpu_pct']:>7.3f} {r['stat_pct']:>6.2f} {r['msgs_per_s']:>8.0f} "
              f"{(r['cpu_ns'] / 1e3 / r['msgs']) if r['msgs'] else float('nan'):>8.2f} {r['rss_mib']:>6.2f} "
              f"{r['hwm_mib']:>6.2f} {r['client_cpu_pct']:>6.1f} {r.get('gap99', float('nan')):>7.1f} "
              f"{r.get('worst', float('nan')):>7.1f} {r.get('silent', 0):>4} {r['bad']:>3} {open_s:>5.1f}  "
              f"{threads_txt}  [{loadavg()}]", flush=True)
        time.sleep(1.0)  # the streams' ends are not in the next slice

    # -- memory: a fresh headroomd per variant
    def memory(self):
        """VmRSS of a fresh headroomd with each variant's streams open: the
        long-running daemon of the slices keeps what the largest variant
        made it allocate (glibc does not hand freed memory back), so its RSS
        says nothing about smaller variants."""
        print()
        print(f"## Memory: a fresh headroomd per variant ({self.mem_reps} time(s) each, ascending); VmRSS before "
              f"the client, with every stream open ({self.settle_s + 3:g} s after the last first message), and "
              "2 s after the client closed them")
        print()
        print("rep        variant  before  with   anon   HWM    KiB/stream (RSS, anon)  after close")
        self.mem = []
        order = sorted((v for v in self.variants if v["n"]), key=lambda v: (v["n"], v["k"], v["interval_ms"]))
        for rep in range(1, self.mem_reps + 1):
            for v in order:
                self.start_headroomd(f"mem.{rep}.{v['name'].replace('/', '_').replace('@', '_')}")
                time.sleep(1.0)
                b = status_kib(self.hd.pid)
                c = self.start_client(v)
                t0 = time.monotonic()
                while True:
                    st = self.ask(c, "stat")
                    if st["received_first"] + st["ended"] >= v["n"] or time.monotonic() - t0 > 30:
                        break
                    time.sleep(0.1)
                time.sleep(self.settle_s + 3)
                w = status_kib(self.hd.pid)
                c.stdin.write("quit\n")
                c.stdin.flush()
                try:
                    c.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
                self.stop(c)
                time.sleep(2.0)
                after = status_kib(self.hd.pid)
                self.stop(self.hd)
                m = {"v": v["name"], "n": v["n"], "k": v["k"], "before": b["VmRSS"] / 1024, "with": w["VmRSS"] / 1024,
                     "anon_before": b["RssAnon"] / 1024, "anon": w["RssAnon"] / 1024, "hwm": w["VmHWM"] / 1024,
                     "after": after["VmRSS"] / 1024}
                m["per"] = (w["VmRSS"] - b["VmRSS"]) / v["n"]
                m["per_anon"] = (w["RssAnon"] - b["RssAnon"]) / v["n"]
                self.mem.append(m)
                print(f"{rep:>3} {v['name']:>14} {m['before']:>6.2f} {m['with']:>6.2f} {m['anon']:>6.2f} {m['hwm']:>6.2f}"
                      f"  {m['per']:>8.1f} {m['per_anon']:>8.1f}          {m['after']:>6.2f}", flush=True)

    # -- ticks
    def read_ticks(self):
        out = []
        try:
            with open(self.ticks_path) as f:
                for line in f:
                    p = line.split()
                    if len(p) == 3:
                        out.append((int(p[0]), int(p[1]), int(p[2])))
        except OSError:
            pass
        return out

    def tick_periods(self, ticks, t0, t1):
        """Periods (ms) between the renames of consecutive seqs, both in [t0, t1]."""
        ev = [(t, s) for t, s, _ in ticks if t0 <= t <= t1 and s >= 0]
        return [(tb - ta) / 1e6 for (ta, sa), (tb, sb) in zip(ev, ev[1:]) if sb == sa + 1]

    # -- the whole run
    def run(self):
        self.start_headroomd()
        self.start_watcher()
        time.sleep(1.0)
        base = status_kib(self.hd.pid)
        th = threads(self.hd.pid)
        self.base_rss = base["VmRSS"] / 1024
        self.base_anon = base["RssAnon"] / 1024
        print(f"headroomd: pid {self.hd.pid}, {self.headroomd} --config headroom.toml --no-ebpf; "
              f"{len(th)} threads ({', '.join(sorted({c for c, *_ in th.values()}))})")
        print("headroom.toml: " + " | ".join(l for l in self.conf_text.splitlines() if l and not l.startswith("#")))
        print(f"before any stream: VmRSS {base['VmRSS'] / 1024:.2f} MiB (RssAnon {base['RssAnon'] / 1024:.2f}, "
              f"RssFile {base['RssFile'] / 1024:.2f}), VmHWM {base['VmHWM'] / 1024:.2f} MiB")
        print(f"client: {self.client_bin} --target {self.target} --streams N --channels K --interval I --control "
              "(callback API; K channels with distinct args = K connections)")
        print(f"variants: {' '.join(v['name'] for v in self.variants)}; {self.rounds} round(s), the order rotated "
              f"by one each round; per slice: open, until every stream had a message, then {self.settle_s} s, then "
              f"{self.slice_s} s measured")
        print()
        print("rd        variant    CPU%  stat%   msgs/s  µs/msg  RSSMiB HWMMiB cli%  gap99ms worstms sil bad "
              "open  top threads: CPU % of a core / switches per s  [load]")
        for rnd in range(1, self.rounds + 1):
            shift = (rnd - 1) % len(self.variants)
            order = self.variants[shift:] + self.variants[:shift]
            for v in order:
                self.run_slice(rnd, v)
        self.ticks = self.read_ticks()
        self.run_hd = self.hd
        self.long_rss = status_kib(self.hd.pid)
        self.stop(self.watcher)
        self.stop(self.hd)
        if self.mem_reps:
            self.memory()
        self.summary()

    def summary(self):
        print()
        print(f"## Summary ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load at end {loadavg()})")
        print()
        by = {}
        for r in self.slices:
            by.setdefault(r["v"], []).append(r)
        base = {r["round"]: r for r in self.slices if r["n"] == 0}
        for r in self.slices:
            b = base.get(r["round"])
            if r["msgs"] and b is not None:
                # CPU above the same round's 0-stream slice, per message delivered.
                r["above_us"] = (r["cpu_pct"] - b["cpu_pct"]) / 100 * r["dt"] * 1e6 / r["msgs"]
                r["total_us"] = r["cpu_ns"] / 1e3 / r["msgs"]
                r["thread_us"] = {k: (g[0] / r["dt"] - (b["threads"].get(k, [0])[0] / b["dt"])) * r["dt"] / r["msgs"]
                                  for k, g in r["threads"].items()}
            r["periods"] = self.tick_periods(self.ticks, r["t0"], r["t1"])
            r["dev99"] = pct([abs(p - INTERVAL_MS) for p in r["periods"]], .99)
        few = MIN_MESSAGES
        print(f"CPU: the process CPU clock over each {self.slice_s:g} s slice, medians over {self.rounds} round(s) "
              f"and (min–max) over rounds; µs per message above 0 streams: (CPU − the same round's 0-stream slice) "
              f"/ messages delivered (only where a slice carries ≥ {few} messages: below that the 0-stream noise, "
              "±0.05 % of a core on a quiet machine, is more than the messages cost); tick: |period − 100 ms| between consecutive "
              "renames of node.orca: p99 of each slice (median, min–max over rounds), and all slices pooled")
        print()
        print("| variant | CPU % of a core | CPU % (/proc stat) | messages/s | µs CPU per message: total | "
              "above 0 streams | tick p99, per slice: median (min–max) | tick \\|dev\\| pooled p50 / p99 / max (periods) "
              "| gap between a stream's messages p50 / p99 / worst, ms | client CPU % |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        rows = []
        for v in self.variants:
            rs = by.get(v["name"], [])
            if not rs:
                continue
            dev = [abs(p - INTERVAL_MS) for r in rs for p in r["periods"]]
            enough = v["n"] and median([r["msgs"] for r in rs]) >= few
            s = {"v": v, "cpu": median([r["cpu_pct"] for r in rs]), "cpu_max": max(r["cpu_pct"] for r in rs),
                 "above": median([r.get("above_us", NAN) for r in rs]) if enough else NAN,
                 "above_max": max(r.get("above_us", NAN) for r in rs) if enough else NAN,
                 "dev99": pct(dev, .99), "devmax": max(dev, default=NAN), "slice99": median([r["dev99"] for r in rs]),
                 "slice99_min": min(r["dev99"] for r in rs), "slice99_max": max(r["dev99"] for r in rs),
                 "ticks": len(dev), "rss": max(r["rss_mib"] for r in rs)}
            rows.append(s)
            gaps = (f"{median([r['gap50'] for r in rs]):.1f} / {median([r['gap99'] for r in rs]):.1f} / "
                    f"{max(r['worst'] for r in rs):.1f}") if v["n"] else "—"
            msgs = median([r["msgs"] for r in rs])
            per_msg = lambda key: (spread([r.get(key, NAN) for r in rs], "{:.1f}") if enough
                                   else (f"(n/a: {msgs:.0f} per slice)" if v["n"] else "—"))
            print(f"| {v['name']} | **{spread([r['cpu_pct'] for r in rs], '{:.3f}')}** | "
                  f"{spread([r['stat_pct'] for r in rs], '{:.2f}')} | "
                  f"{spread([r['msgs_per_s'] for r in rs], '{:.1f}') if v['n'] else '—'} | "
                  f"{per_msg('total_us')} | **{per_msg('above_us')}** | "
                  f"**{spread([r['dev99'] for r in rs], '{:.2f}')}** | "
                  f"{pct(dev, .5):.3f} / {s['dev99']:.3f} / {s['devmax']:.3f} ({len(dev)}) | {gaps} | "
                  f"{spread([r['client_cpu_pct'] for r in rs], '{:.1f}') if v['n'] else '—'} |")
        print()
        names = []
        for r in self.slices:
            for k in r["threads"]:
                if k not in names:
                    names.append(k)
        names = [k for k in names if max(r["threads"].get(k, [0])[0] / r["dt"] / 1e4 for r in self.slices) >= 0.05]
        print("headroomd per thread group (threads of one name summed; \"headroomd\" other than the main thread is "
              "the hub's sender thread): CPU % of a core / context switches per s, medians over rounds; and, where a "
              "slice carries enough messages, µs per message above the 0-stream slice:")
        print()
        print("| variant | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for v in self.variants:
            rs = by.get(v["name"], [])
            if not rs:
                continue
            enough = v["n"] and median([r["msgs"] for r in rs]) >= few
            cells = []
            for k in names:
                cpu = median([r["threads"][k][0] / r["dt"] / 1e4 for r in rs if k in r["threads"]])
                sw = median([r["threads"][k][2] / r["dt"] for r in rs if k in r["threads"]])
                us = median([r["thread_us"].get(k, NAN) for r in rs if "thread_us" in r]) if enough else NAN
                cells.append(f"{cpu:.3f} / {sw:.0f}" + (f"; {us:.1f} µs" if us == us else ""))
            print(f"| {v['name']} | " + " | ".join(cells) + " |")
        print()
        bad = sum(r["bad"] for r in self.slices)
        ended = [(r["v"], r["round"], r.get("statuses")) for r in self.slices if r["n"] and r.get("ended")]
        print(f"messages that did not parse or validate: {bad} of {sum(r['msgs'] for r in self.slices)}; slices "
              f"where streams ended before the quit: {ended if ended else 'none'}")
        lr = self.long_rss
        print(f"the long-running daemon of the slices: VmRSS {self.base_rss:.2f} MiB before any stream, "
              f"{lr['VmRSS'] / 1024:.2f} MiB at the end with no stream open (RssAnon {self.base_anon:.2f} → "
              f"{lr['RssAnon'] / 1024:.2f}), VmHWM {lr['VmHWM'] / 1024:.2f} MiB")
        print()
        mem_rows = []
        if getattr(self, "mem", None):
            print("Memory, fresh headroomd per variant (medians of the repetitions; KiB per stream = (VmRSS with the "
                  "streams − VmRSS before) / streams, and the same for RssAnon):")
            print()
            print("| variant | VmRSS before, MiB | with the streams | RssAnon with | KiB per stream (VmRSS) | "
                  "KiB per stream (RssAnon) | VmRSS 2 s after they closed | goal 16 MiB + 8 KiB × N |")
            print("|---|---|---|---|---|---|---|---|")
            seen = []
            for m in self.mem:
                if m["v"] in seen:
                    continue
                seen.append(m["v"])
                ms = [x for x in self.mem if x["v"] == m["v"]]
                limit = 16 + 8 * m["n"] / 1024
                w = median([x["with"] for x in ms])
                mem_rows.append({"v": m["v"], "n": m["n"], "with": w, "limit": limit,
                                 "per": median([x["per"] for x in ms]), "per_anon": median([x["per_anon"] for x in ms])})
                print(f"| {m['v']} | {spread([x['before'] for x in ms], '{:.2f}')} | **{spread([x['with'] for x in ms], '{:.2f}')}** | "
                      f"{spread([x['anon'] for x in ms], '{:.2f}')} | **{spread([x['per'] for x in ms], '{:.1f}')}** | "
                      f"{spread([x['per_anon'] for x in ms], '{:.1f}')} | {spread([x['after'] for x in ms], '{:.2f}')} | "
                      f"{limit:.2f} MiB: {'met' if w <= limit else 'MISSED'} |")
            print()
        self.verdicts(rows, mem_rows)
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump({"slices": self.slices, "base_rss": self.base_rss, "base_anon": self.base_anon,
                           "mem": getattr(self, "mem", []), "long_rss": self.long_rss}, f)

    def verdicts(self, rows, mem_rows):
        by = {s["v"]["name"]: s for s in rows}
        big, zero = by.get("1000@100ms"), by.get("0")
        if big:
            print(f"goal {'met' if big['above'] <= 10 else 'MISSED'}: ≤ 10 µs of agent CPU per streamed message "
                  f"(1000 streams at 100 ms, one connection each; CPU above the same round's 0-stream slice): "
                  f"median {big['above']:.2f} µs, worst round {big['above_max']:.2f} µs"
                  + (f" (1000 streams on one connection: {by['1000@100ms/k1']['above']:.2f} µs)"
                     if "1000@100ms/k1" in by else ""))
            print(f"goal {'met' if big['cpu'] <= 10 else 'MISSED'}: 1000 streams at 100 ms ≤ 10 % of a core: median "
                  f"{big['cpu']:.2f} % (worst round {big['cpu_max']:.2f} %; 0 streams {zero['cpu']:.2f} %)"
                  + (f"; on one connection {by['1000@100ms/k1']['cpu']:.2f} %" if "1000@100ms/k1" in by else ""))
        if mem_rows:
            ok = all(m["with"] <= m["limit"] for m in mem_rows)
            print(f"goal {'met' if ok else 'MISSED'}: RSS ≤ 16 MiB + 8 KiB per stream (fresh daemon per variant): "
                  + "; ".join(f"{m['v']} {m['with']:.2f} of {m['limit']:.2f} MiB ({m['per']:.1f} KiB per stream)"
                              for m in mem_rows))
        if big:
            print(f"goal {'met' if big['dev99'] < 5 else 'MISSED'}: tick p99 |period − 100 ms| < 5 ms with 1000 "
                  f"streams at 100 ms, all its slices pooled: {big['dev99']:.3f} ms ({big['ticks']} periods, max "
                  f"{big['devmax']:.3f}); per slice p99 median {big['slice99']:.3f} ms "
                  f"({big['slice99_min']:.3f}–{big['slice99_max']:.3f}). 0 streams: pooled {zero['dev99']:.3f} ms, "
                  f"per slice median {zero['slice99']:.3f} ({zero['slice99_min']:.3f}–{zero['slice99_max']:.3f})")


def main():
    ap = argparse.ArgumentParser(prog="bench_oob.py")
    ap.add_argument("cmd", choices=["run"])
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--variants", default="", help=f'default "{DEFAULT_VARIANTS}"; N@INTERVAL[/kCHANNELS]')
    ap.add_argument("--rounds", type=int, default=0, help="default 5 (--quick 1)")
    ap.add_argument("--slice", type=float, default=0, help="seconds measured per slice; default 15 (--quick 4)")
    ap.add_argument("--settle", type=float, default=None, help="seconds after the streams opened; default 2 (--quick 1)")
    ap.add_argument("--memory-reps", type=int, default=None,
                    help="fresh daemons per variant for the memory figures; default 2 (--quick 1), 0: none")
    ap.add_argument("--transport", choices=["tcp", "unix"], default="tcp")
    ap.add_argument("--json", default="", help="also write every slice's figures to this file")
    a = ap.parse_args()
    b = Bench(a)
    exiting = []

    def on_signal(signum, _frame):
        if not exiting:
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
