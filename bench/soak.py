# SPDX-License-Identifier: Apache-2.0
"""The soak (docs/reliability.md, docs/benchmarks.md "Soak"): headroomd runs
for a long time (one hour by default) with an eBPF endpoint under steady load,
a reload every minute (rotating: a change that keeps the probe, one that
rebuilds it, one that is rejected) and a fault now and then (rotating: the
ORCA directory's tmpfs full, remounted read-only, deleted; a planted
temporary name; the daemon stopped and continued). Meanwhile a reader decodes
both report files every 10 ms with a decoder that shares no code with the
agent (tests/oob/orca_oob.py). Every `--sample` seconds it records the
daemon's RSS, descriptors, CPU time and published ticks.

It fails (exit 1) when a reader saw an invalid report, when headroomd died,
when RSS or descriptors grew from the first to the last part of the run by
more than the bounds below, or when CPU per tick rose by more than half.

    sudo bench/soak.sh BUILD_DIR [--duration 3600] [--reload 60] [--fault 300]
"""

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oob"))
import orca_oob  # noqa: E402  (the independent decoder)
import benchlib  # noqa: E402

RSS_GROWTH_KIB = 2048  # a leak of 1 KiB per reload would be 60 KiB an hour: this bounds real growth, not noise
FD_GROWTH = 2
CPU_PER_TICK_RISE = 1.5


def log(text):
    print(time.strftime("%H:%M:%S ") + text, file=sys.stderr, flush=True)


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def check_report(r):
    """An empty string when the decoded report is one a reader may act on."""
    for k in ("cpu_utilization", "mem_utilization", "application_utilization", "rps_fractional", "eps"):
        v = r[k]
        if not math.isfinite(v) or v < 0:
            return f"{k} = {v}"
    if r["mem_utilization"] > 1:
        return f"mem_utilization = {r['mem_utilization']}"
    for k, v in r["utilization"].items():
        if not math.isfinite(v) or not 0 <= v <= 1:
            return f"utilization[{k}] = {v}"
    seq, ts, _ = orca_oob.metadata(r)
    if seq is None or ts is None or "headroom.interval_ms" not in r["named_metrics"]:
        return "metadata missing"
    return ""


class Reader(threading.Thread):
    """Decodes every report file every 10 ms; counts reads, invalid ones and
    how long each scope was stale (older than 3 intervals, at least 1 s)."""

    def __init__(self, paths):
        super().__init__(daemon=True)
        self.paths = paths
        self.reads = 0
        self.invalid = []
        self.stale_s = {p: 0.0 for p in paths}
        self.last_seq = {p: 0 for p in paths}
        self.stop_flag = threading.Event()

    def run(self):
        last = time.monotonic()
        while not self.stop_flag.wait(0.01):
            now = time.monotonic()
            for p in self.paths:
                try:
                    with open(p, "rb") as f:
                        data = f.read()
                except OSError:
                    self.stale_s[p] += now - last
                    continue
                self.reads += 1
                try:
                    r = orca_oob.decode_report(data)
                    why = check_report(r)
                except ValueError as e:
                    why = f"does not decode: {e}"
                if why:
                    self.invalid.append(f"{os.path.basename(p)}: {why} ({len(data)} bytes)")
                    continue
                seq, ts, stopped = orca_oob.metadata(r)
                if seq < self.last_seq[p]:
                    self.invalid.append(f"{os.path.basename(p)}: seq went back from {self.last_seq[p]} to {seq}")
                self.last_seq[p] = seq
                interval = r["named_metrics"]["headroom.interval_ms"]
                if stopped or time.time() * 1000 - ts > max(1000, 3 * interval):
                    self.stale_s[p] += now - last
            last = now


class Soak:
    def __init__(self, args):
        self.a = args
        self.build = os.path.abspath(args.build_dir)
        self.work = tempfile.mkdtemp(prefix="headroom-soak-")
        self.mnt = os.path.join(self.work, "mnt")
        self.orca = os.path.join(self.mnt, "orca")
        self.config = os.path.join(self.work, "headroom.toml")
        self.owner = benchlib.ProcessOwner(self.work)
        self.mounted = False
        self.samples = []
        self.events = []
        self.port = benchlib.free_port()

    def write_config(self, kind):
        target = {"rebuild": "25ms"}.get(kind, "20ms")
        level = "debug" if kind == "keep" else "info"
        interval = '"1ns"' if kind == "invalid" else '"100ms"'
        with open(self.config + ".new", "w") as f:
            f.write(f'[agent]\ninterval = {interval}\norca_dir = "{self.orca}"\nlog_level = "{level}"\n'
                    f'[[endpoint]]\nname = "soak"\nport = {self.port}\ntarget = "{target}"\nmax = "200ms"\n')
        os.rename(self.config + ".new", self.config)

    def sample(self, t0):
        pid = self.daemon.pid
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        try:
            seq = orca_oob.metadata(orca_oob.read_report_file(os.path.join(self.orca, "node.orca")))[0]
        except (OSError, ValueError):
            seq = None
        self.samples.append({"t": time.monotonic() - t0, "rss_kib": proc_status(pid, "VmRSS"),
                             "fds": fd_count(pid), "cpu_s": cpu_s, "seq": seq})

    # The faults: each is (name, inject, clear).
    def fault_enospc(self):
        filler = os.path.join(self.mnt, "filler")
        with open(filler, "wb") as f:
            try:
                f.write(b"\0" * (1 << 20))
            except OSError:
                pass
        return lambda: os.unlink(filler)

    def fault_erofs(self):
        subprocess.run(["mount", "-o", "remount,ro", self.mnt], check=True)
        return lambda: subprocess.run(["mount", "-o", "remount,rw", self.mnt], check=True)

    def fault_deleted(self):
        shutil.rmtree(self.orca, ignore_errors=True)
        return lambda: None

    def fault_planted(self):
        planted = os.path.join(self.orca, f".node.orca.{self.daemon.pid}.tmp")
        os.makedirs(os.path.join(planted, "inside"), exist_ok=True)
        return lambda: shutil.rmtree(planted, ignore_errors=True)

    def fault_stopped(self):
        self.daemon.send_signal(signal.SIGSTOP)
        return lambda: self.daemon.send_signal(signal.SIGCONT)

    def run(self):
        if os.geteuid() != 0:
            print("soak.py: needs root (tmpfs mounts, the eBPF endpoint probe)", file=sys.stderr)
            return 2
        os.makedirs(self.mnt)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "soak", self.mnt], check=True)
        self.mounted = True
        os.makedirs(self.orca)
        try:
            return self.soak()
        finally:
            self.owner.cleanup()
            if self.mounted:
                subprocess.run(["umount", "-l", self.mnt], check=False)
            shutil.rmtree(self.work, ignore_errors=True)

    def soak(self):
        a = self.a
        tools = os.path.join(self.build, "tests", "tools")
        self.owner.start([os.path.join(tools, "hr-test-server"), "--port", str(self.port),
                          "--delay", "/slow=40ms", "--delay", "/=1ms"], os.path.join(self.work, "server.log"))
        time.sleep(0.3)
        self.owner.start([os.path.join(tools, "hr-test-load"), "--port", str(self.port), "--connections", "8",
                          "--rate", str(a.rate), "--duration", f"{int(a.duration) + 60}s",
                          "--path", "/", "--path", "/", "--path", "/", "--path", "/slow"],
                         os.path.join(self.work, "load.log"))
        self.write_config("base")
        daemon_log = os.path.join(self.work, "headroomd.log")
        self.daemon = self.owner.start([os.path.join(self.build, "agent", "headroomd"), "--config", self.config],
                                       daemon_log)
        paths = [os.path.join(self.orca, "node.orca"), os.path.join(self.orca, "endpoint.soak.orca")]
        deadline = time.monotonic() + 10
        while not all(os.path.exists(p) for p in paths):
            if time.monotonic() > deadline or self.daemon.poll() is not None:
                print(open(daemon_log).read(), file=sys.stderr)
                raise SystemExit("soak.py: headroomd did not publish")
            time.sleep(0.05)
        reader = Reader(paths)
        reader.start()
        reloads = ["keep", "rebuild", "invalid", "base"]
        faults = [("enospc", self.fault_enospc), ("erofs", self.fault_erofs), ("stopped", self.fault_stopped),
                  ("deleted", self.fault_deleted), ("planted", self.fault_planted)]
        t0 = time.monotonic()
        next_sample, next_reload, next_fault = 0.0, a.reload, a.fault / 2
        n_reload = n_fault = 0
        clear_at, clear = None, None
        log(f"soak for {a.duration:.0f} s: reload every {a.reload:.0f} s, a fault every {a.fault:.0f} s; "
            f"work dir {self.work}")
        while True:
            now = time.monotonic() - t0
            if self.daemon.poll() is not None:
                print(tail_of(daemon_log), file=sys.stderr)
                raise SystemExit(f"soak.py: headroomd exited with {self.daemon.returncode} at {now:.0f} s")
            if now >= a.duration:
                break
            if now >= next_sample:
                self.sample(t0)
                next_sample += a.sample
            if clear is not None and now >= clear_at:
                clear()
                clear = None
            if now >= next_reload and clear is None:
                kind = reloads[n_reload % len(reloads)]
                self.write_config(kind)
                self.daemon.send_signal(signal.SIGHUP)
                self.events.append((round(now, 1), "reload " + kind))
                n_reload += 1
                next_reload += a.reload
            if now >= next_fault and clear is None:
                name, inject = faults[n_fault % len(faults)]
                clear = inject()
                clear_at = now + a.fault_length
                self.events.append((round(now, 1), "fault " + name))
                log(f"fault {name} for {a.fault_length:.0f} s")
                n_fault += 1
                next_fault += a.fault
            time.sleep(0.05)
        if clear is not None:
            clear()
        time.sleep(1)
        self.sample(t0)
        reader.stop_flag.set()
        reader.join()
        return self.report(reader, daemon_log)

    def report(self, reader, daemon_log):
        s = self.samples
        k = max(1, len(s) // 10)
        # The first tenth is warm-up (maps, first reloads, allocator arenas).
        early, late = s[k:2 * k] or s[:1], s[-k:]
        rss_early = benchlib.median([x["rss_kib"] for x in early])
        rss_late = benchlib.median([x["rss_kib"] for x in late])
        fds_early = max(x["fds"] for x in early)
        fds_late = max(x["fds"] for x in late)

        def cpu_per_tick(part):
            dt = part[-1]["seq"] - part[0]["seq"] if part[0]["seq"] and part[-1]["seq"] else 0
            return (part[-1]["cpu_s"] - part[0]["cpu_s"]) / dt * 1e6 if dt > 0 else float("nan")
        cpt_early = cpu_per_tick(s[k:3 * k] if len(s) >= 3 * k else s)
        cpt_late = cpu_per_tick(s[-2 * k:])
        with open(daemon_log, errors="replace") as f:
            log_lines = sum(1 for _ in f)
        out = {
            "duration_s": round(s[-1]["t"]), "reloads": sum(1 for e in self.events if e[1].startswith("reload")),
            "faults": sum(1 for e in self.events if e[1].startswith("fault")), "reads": reader.reads,
            "invalid_reads": len(reader.invalid), "stale_s": {os.path.basename(p): round(v, 1)
                                                             for p, v in reader.stale_s.items()},
            "rss_kib": {"early": rss_early, "late": rss_late, "max": max(x["rss_kib"] for x in s)},
            "fds": {"early": fds_early, "late": fds_late},
            "cpu_us_per_tick": {"early": round(cpt_early, 1), "late": round(cpt_late, 1)},
            "log_lines": log_lines, "ticks": s[-1]["seq"],
        }
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump({"summary": out, "samples": s, "events": self.events}, f, indent=1)
        print(json.dumps(out, indent=1))
        failures = []
        if reader.invalid:
            failures.append(f"{len(reader.invalid)} invalid reads, first: {reader.invalid[0]}")
        if rss_late - rss_early > RSS_GROWTH_KIB:
            failures.append(f"RSS grew {rss_early} -> {rss_late} KiB")
        if fds_late - fds_early > FD_GROWTH:
            failures.append(f"descriptors grew {fds_early} -> {fds_late}")
        if cpt_late > CPU_PER_TICK_RISE * cpt_early:
            failures.append(f"CPU per tick rose {cpt_early:.1f} -> {cpt_late:.1f} us")
        for f in failures:
            print("FAIL: " + f, file=sys.stderr)
        print("soak: " + ("FAILED" if failures else "passed"), file=sys.stderr)
        return 1 if failures else 0


def tail_of(path, lines=30):
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build_dir")
    p.add_argument("--duration", type=float, default=3600, help="seconds (default 3600)")
    p.add_argument("--reload", type=float, default=60, help="seconds between reloads (default 60)")
    p.add_argument("--fault", type=float, default=300, help="seconds between faults (default 300)")
    p.add_argument("--fault-length", type=float, default=5, help="seconds a fault lasts (default 5)")
    p.add_argument("--rate", type=int, default=200, help="requests per second to the endpoint (default 200)")
    p.add_argument("--sample", type=float, default=10, help="seconds between samples (default 10)")
    p.add_argument("--json", help="write the summary, every sample and every event to this file")
    # SIGTERM ends the run like Ctrl-C: the programs stopped, the tmpfs unmounted.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return Soak(p.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
