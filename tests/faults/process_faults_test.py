#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""headroomd against real faults of its process and its inputs.

    process_faults_test.py SOURCE_DIR BUILD_DIR

Each case starts the built headroomd (interval 100 ms) and breaks something
for real while readers poll its report files:

  - the service cgroup (node.cgroup, a cgroup v2 made for the case) removed
    mid-run and made again;
  - the daemon SIGSTOPped for 1.5 s and continued;
  - a SIGHUP storm: 1000 reloads, each waiting for the daemon's READY=1 on a
    NOTIFY_SOCKET the test owns, the file rewritten before each (a valid
    change of log_level, an invalid value, and every 50th a changed
    endpoint, which loads a new eBPF probe);
  - the eBPF in-flight table filled: more requests held unread on an
    endpoint's port than the table has slots;
  - a reload whose new eBPF probe cannot attach, for real
    (HEADROOM_EBPF_PROGRAMS=sockets allows only the socket programs, which
    cannot serve an endpoint with a path);
  - reads of the eBPF maps failing, through the probe's test hook
    (HEADROOM_TEST_EBPF_READ_FAULT names a file; while it exists every read
    fails as a refused map read would): no real fault makes the kernel
    refuse a map read on demand.

For each, while it lasts:
  (a) readers poll node.orca (and the endpoint reports) every 2 ms and decode
      every read (tests/oob/orca_oob.py's codec): never an undecodable or
      partial report; headroom.seq never goes back and one seq is always the
      same bytes, so a report that is not replaced stays byte-identical and
      reads as stale by its headroom.timestamp_ms;
  (b) headroomd logs one line when the fault starts and one when it ends, not
      one per tick (counted);
  (c) no temporary file (".*.tmp") is left in the report directory;
  (d) it recovers by itself once the fault is cleared;
  (e) no descriptor or memory growth (the fewest descriptors over a few looks
      equal before and after; VmRSS within RSS_TOLERANCE_KIB, not held in
      sanitizer builds, where LeakSanitizer at exit is the check).

Needs root (cgroups, eBPF); without root it skips (exit 77), with CI=true it
fails.
"""

import errno
import hashlib
import math
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "oob"))
import harness  # noqa: E402  (tests/support/harness.py: processes, waits, figures)
from harness import Fatal, Proc, figure, note, rss_kib, tail, toml_string, wait_until  # noqa: E402
import orca_oob  # noqa: E402  (the OrcaLoadReport codec)

SOURCE_DIR = BUILD_DIR = HEADROOMD = ""
SANITIZED = False

INTERVAL_MS = 100
RSS_TOLERANCE_KIB = 1024  # measured after a warm-up of 100 reloads (two new probes): +332 KiB after 900 reloads and
#                           after 3900 alike (a plateau: allocator arenas, not per reload); a leak per reload or tick
#                           is far more. With a warm-up of 20 (no new probe in it) the storm's first probe loads
#                           counted: +1068 KiB and +1100 KiB, over this tolerance since the instances' maps.
META = ("headroom.timestamp_ms", "headroom.seq", "headroom.interval_ms")
LOG_LINE = re.compile(r"^\S+ (trace|debug|info|warning|error|critical)\s+(.*)$")
WARM_UP_RELOADS = 100
STORM_RELOADS = int(os.environ.get("PROCESS_FAULTS_RELOADS", "1000"))  # a longer storm to look for growth


def now_ms():
    return int(time.time() * 1000)


class Reader(threading.Thread):
    """Polls report files every 2 ms and judges every read."""

    def __init__(self, paths):
        super().__init__(daemon=True)
        self.paths = list(paths)
        self.lock = threading.Lock()
        self.reads = 0
        self.missing = {p: 0 for p in self.paths}
        self.invalid = []          # (file, reason, size)
        self.order = []            # (file, seq, seq) going back
        self.same_seq_differs = []
        self.by_seq = {p: {} for p in self.paths}   # seq -> sha1
        self.last = {p: None for p in self.paths}   # (monotonic, seq, timestamp_ms, report)
        self.max_age_ms = {p: 0 for p in self.paths}
        self.unavailable = {p: 0 for p in self.paths}  # reads with headroom.ebpf.unavailable = 1
        self._halt = threading.Event()

    @staticmethod
    def judge(data):
        """The decoded report, or raises ValueError saying what is wrong."""
        if not data:
            raise ValueError("empty file")
        r = orca_oob.decode_report(data)
        nm = r["named_metrics"]
        for k in META:
            if k not in nm:
                raise ValueError(f"no {k} (a partial report)")
        for name, v in list(r["utilization"].items()) + list(nm.items()):
            if not math.isfinite(v):
                raise ValueError(f"{name} = {v}")
        for name, v in r["utilization"].items():
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"utilization {name} = {v}, outside [0, 1]")
        if orca_oob.encode_report(r) != data:
            raise ValueError("does not re-encode to the same bytes")
        return r

    def run(self):
        while not self._halt.is_set():
            for path in self.paths:
                t = time.monotonic()
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError as e:
                    with self.lock:
                        self.reads += 1
                        self.missing[path] += 1
                        if e.errno not in (errno.ENOENT,):
                            self.invalid.append((path, f"open: {e}", 0))
                    continue
                with self.lock:
                    self.reads += 1
                    try:
                        r = self.judge(data)
                    except Exception as e:  # noqa: BLE001  (every way a read can be wrong)
                        self.invalid.append((os.path.basename(path), str(e), len(data)))
                        continue
                    nm = r["named_metrics"]
                    seq, ts = int(nm["headroom.seq"]), int(nm["headroom.timestamp_ms"])
                    digest = hashlib.sha1(data).hexdigest()
                    seen = self.by_seq[path]
                    if seq in seen and seen[seq] != digest:
                        self.same_seq_differs.append((os.path.basename(path), seq))
                    seen[seq] = digest
                    last = self.last[path]
                    if last is not None and seq < last[1]:
                        self.order.append((os.path.basename(path), last[1], seq))
                    self.last[path] = (t, seq, ts, r)
                    self.max_age_ms[path] = max(self.max_age_ms[path], now_ms() - ts)
                    if nm.get("headroom.ebpf.unavailable") == 1.0:
                        self.unavailable[path] += 1
            self._halt.wait(0.002)

    def stop(self):
        self._halt.set()
        self.join(5)

    def latest(self, path=None):
        with self.lock:
            return self.last[path or self.paths[0]]

    def seq(self, path=None):
        last = self.latest(path)
        return last[1] if last else 0

    def unavailable_reads(self, path):
        with self.lock:
            return self.unavailable[path]

    def reset_max_age(self):
        with self.lock:
            for p in self.paths:
                self.max_age_ms[p] = 0

    def check(self, case, label):
        self.stop()
        with self.lock:
            for p in self.paths:
                figure(f"{label}: {os.path.basename(p)}: {len(self.by_seq[p])} distinct reports read, "
                       f"{self.missing[p]} reads found no file, max age read {self.max_age_ms[p]} ms, "
                       f"{self.unavailable[p]} reads with headroom.ebpf.unavailable")
            figure(f"{label}: {self.reads} reads in all, {len(self.invalid)} invalid")
            case.assertEqual(self.invalid[:5], [], f"{label}: a reader saw invalid or partial reports")
            case.assertEqual(self.order[:5], [], f"{label}: headroom.seq went back")
            case.assertEqual(self.same_seq_differs[:5], [], f"{label}: one seq, different bytes")
            for p in self.paths:
                case.assertGreater(len(self.by_seq[p]), 3, f"{label}: too few reports of {p} read")


class Notifications(threading.Thread):
    """systemd's side of sd_notify: a datagram socket the daemon is pointed at."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.1)
        self.cond = threading.Condition()
        self.messages = []  # (monotonic, text)
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            with self.cond:
                self.messages.append((time.monotonic(), data.decode("utf-8", "replace")))
                self.cond.notify_all()

    def count(self):
        with self.cond:
            return len(self.messages)

    def wait_for(self, line_prefix, after, timeout=10.0):
        """The first message from index `after` on with a line starting with
        line_prefix: (index, text)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i in range(after, len(self.messages)):
                    if any(ln.startswith(line_prefix) for ln in self.messages[i][1].split("\n")):
                        return i, self.messages[i][1]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {line_prefix!r} from the daemon within {timeout} s; got "
                                         f"{[m[1][:80] for m in self.messages[after:]][-5:]}")
                self.cond.wait(left)

    def statuses(self, after=0):
        with self.cond:
            out = []
            for _, text in self.messages[after:]:
                out += [ln for ln in text.split("\n") if ln.startswith("STATUS=")]
            return out

    def stop(self):
        self._halt.set()
        self.join(2)
        self.sock.close()


class Daemon:
    """headroomd --config FILE on a directory of the case's; its log lines."""

    def __init__(self, case, tmp, body, env=None, notify=None, name="headroomd"):
        self.case, self.tmp = case, tmp
        self.orca_dir = os.path.join(tmp, "orca")
        self.node = os.path.join(self.orca_dir, "node.orca")
        self.config = os.path.join(tmp, name + ".toml")
        self.write_config(body)
        environ = dict(os.environ)
        environ.pop("NOTIFY_SOCKET", None)
        if notify is not None:
            environ["NOTIFY_SOCKET"] = notify.path
        environ.update(env or {})
        saved = os.environ.copy()
        os.environ.clear()
        os.environ.update(environ)
        try:
            self.proc = Proc(name, [HEADROOMD, "--config", self.config], tmp, case)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def write_config(self, body):
        """Replaces the file atomically, as an editor or a package would."""
        text = "[agent]\norca_dir = " + toml_string(self.orca_dir) + "\ninterval = \"100ms\"\n" + body
        tmp = self.config + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.config)

    def endpoint_report(self, name):
        return os.path.join(self.orca_dir, f"endpoint.{name}.orca")

    @property
    def pid(self):
        return self.proc.pid

    def lines(self, since=0):
        out = []
        for line in self.proc.err().splitlines()[since:]:
            m = LOG_LINE.match(line)
            if m:
                out.append((m.group(1), m.group(2)))
        return out

    def line_count(self):
        return len(self.proc.err().splitlines())

    def count(self, text, since=0):
        return sum(1 for _, t in self.lines(since) if text in t)

    def check_alive(self):
        if not self.proc.alive():
            raise Fatal(f"headroomd exited with {self.proc.p.returncode}:\n{tail(self.proc.err())}")

    def wait_publishing(self, reader, path=None, timeout=10):
        """Until the reader has seen a fresh report two seqs on from now."""
        target = reader.seq(path) + 2

        def ok():
            self.check_alive()
            last = reader.latest(path)
            return last is not None and last[1] >= target and now_ms() - last[2] < 1000
        wait_until(ok, timeout, f"{path or 'node.orca'} with seq >= {target} and fresh")
        return reader.seq(path)

    def fds(self, looks=5):
        counts = []
        for _ in range(looks):
            counts.append(len(os.listdir(f"/proc/{self.pid}/fd")))
            time.sleep(0.03)
        return min(counts)

    def resources(self):
        return self.fds(), rss_kib(self.pid)

    def stop_cleanly(self):
        self.proc.signal(signal.SIGTERM)
        code = self.proc.wait(15)
        self.case.assertEqual(code, 0, f"headroomd's exit status on SIGTERM (LeakSanitizer reports here):\n"
                                       f"{tail(self.proc.err())}")


def temporaries(directory):
    try:
        return sorted(n for n in os.listdir(directory) if n.startswith(".") and n.endswith(".tmp"))
    except OSError:
        return []


V1_CONTROLLERS = ("cpu", "cpuacct", "memory", "cpuset")  # what the v1 probe reads


def cgroup_dirs(name):
    """The directories of cgroup `name`: one on a cgroup v2 host, one per
    controller the probe reads on a v1 (or hybrid) host."""
    root = "/sys/fs/cgroup"
    if os.path.exists(os.path.join(root, "cgroup.controllers")):
        return [os.path.join(root, name)]
    return [os.path.join(root, c, name) for c in V1_CONTROLLERS if os.path.isdir(os.path.join(root, c))]


def make_cgroup(name):
    for d in cgroup_dirs(name):
        os.mkdir(d)
        if os.path.basename(os.path.dirname(d)) == "cpuset":  # an empty cpuset has no CPUs
            for f in ("cpuset.cpus", "cpuset.mems"):
                with open(os.path.join(os.path.dirname(d), f)) as src, open(os.path.join(d, f), "w") as dst:
                    dst.write(src.read())


def remove_cgroup(name):
    for d in cgroup_dirs(name):
        if os.path.isdir(d):
            os.rmdir(d)


def endpoint_toml(name, port, path=None, target="10ms", max_="100ms"):
    text = f"[[endpoint]]\nname = \"{name}\"\nport = {port}\ntarget = \"{target}\"\nmax = \"{max_}\"\n"
    if path:
        text += f"path = \"{path}\"\n"
    return text


class ProcessFaultsTest(unittest.TestCase):

    def setUp(self):
        self.tmp = harness.make_temp_dir(self, "headroom-process-faults-")
        os.chmod(self.tmp, 0o755)

    def common_checks(self, d, reader, label, before, errors_at_most=2):
        """(b) to (e) at the end of a case, once the fault has cleared."""
        d.check_alive()
        reader.check(self, label)
        fds, rss = d.resources()
        figure(f"{label}: descriptors {before[0]} -> {fds}, VmRSS {before[1]} -> {rss} KiB "
               f"({rss - before[1]:+d} KiB)")
        self.assertEqual(fds, before[0], f"{label}: descriptors grew")
        if not SANITIZED:
            self.assertLessEqual(rss - before[1], RSS_TOLERANCE_KIB, f"{label}: VmRSS grew")
        self.assertEqual(temporaries(d.orca_dir), [], f"{label}: temporary files left")
        noisy = [t for lvl, t in d.lines() if lvl in ("warning", "error", "critical")]
        kinds = {}
        for t in noisy:
            kinds[t[:50]] = kinds.get(t[:50], 0) + 1
        figure(f"{label}: {len(noisy)} warning/error lines in all: {kinds}")
        self.assertLessEqual(len(noisy), errors_at_most, f"{label}: log flood:\n" + "\n".join(noisy[:10]))
        d.stop_cleanly()

    # -- 1 ------------------------------------------------------------------
    def test_1_service_cgroup_removed_and_recreated(self):
        name = f"headroom-fault-{os.getpid()}"
        if not cgroup_dirs(name):
            self.fail("no cgroup hierarchy under /sys/fs/cgroup")
        make_cgroup(name)
        self.addCleanup(remove_cgroup, name)
        figure(f"cgroup: {name} in {cgroup_dirs(name)}")
        d = Daemon(self, self.tmp, f"[node]\ncgroup = \"{name}\"\n")
        reader = Reader([d.node])
        reader.start()
        self.addCleanup(reader.stop)
        d.wait_publishing(reader)
        keys = set(reader.latest()[3]["utilization"])
        figure(f"cgroup: utilization keys with the cgroup: {sorted(keys)}")
        before = d.resources()
        lines0 = d.line_count()

        remove_cgroup(name)
        t0 = time.monotonic()
        time.sleep(1.5)
        d.check_alive()
        during = reader.latest()
        gone = d.lines(lines0)
        figure(f"cgroup: while removed ({time.monotonic() - t0:.1f} s): seq {during[1]}, utilization keys "
               f"{sorted(during[3]['utilization'])}, age {now_ms() - during[2]} ms; log: "
               f"{[t[:100] for _, t in gone]}")
        self.assertLess(now_ms() - during[2], 1000, "node.orca is still published while the cgroup is gone")
        errors = [t for lvl, t in gone if lvl in ("warning", "error")]
        self.assertEqual(len(errors), 1, f"one line when the cgroup goes, not one per tick: {gone}")

        lines1 = d.line_count()
        make_cgroup(name)
        wait_until(lambda: set(reader.latest()[3]["utilization"]) == keys, 5,
                   "the cgroup's signals back in node.orca after the cgroup is made again")
        recovery = f"{time.monotonic() - t0 - 1.5:.2f}"
        time.sleep(0.5)
        back = d.lines(lines1)
        figure(f"cgroup: signals back {recovery} s after the cgroup was made again; log: "
               f"{[t[:100] for _, t in back]}")
        self.assertEqual(len(back), 1, f"one line when the cgroup is back: {back}")
        self.common_checks(d, reader, "cgroup", before)

    # -- 2 ------------------------------------------------------------------
    def test_2_sigstop_then_sigcont(self):
        d = Daemon(self, self.tmp, "")
        reader = Reader([d.node])
        reader.start()
        self.addCleanup(reader.stop)
        d.wait_publishing(reader)
        before = d.resources()
        d.proc.signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        time.sleep(0.1)
        frozen = reader.latest()
        time.sleep(1.4)
        during = reader.latest()
        age = now_ms() - during[2]
        interval = during[3]["named_metrics"]["headroom.interval_ms"]
        figure(f"sigstop: after 1.5 s stopped, node.orca seq {during[1]} (was {frozen[1]}), age {age} ms "
               f"= {age / interval:.1f} intervals")
        self.assertEqual(during[1], frozen[1], "node.orca changed while the daemon was stopped")
        self.assertGreater(age, 3 * interval, "a stopped daemon's report must read as stale by its metadata")
        d.proc.signal(signal.SIGCONT)
        resumed_at = time.monotonic()
        seq_stop = during[1]
        wait_until(lambda: now_ms() - reader.latest()[2] < 300, 2, "a fresh report after SIGCONT")
        fresh_after = time.monotonic() - resumed_at
        time.sleep(1.0)
        after = reader.latest()
        with reader.lock:
            seqs = sorted(s for s in reader.by_seq[d.node] if s > seq_stop)
        published = after[1] - seq_stop
        elapsed = time.monotonic() - resumed_at
        figure(f"sigstop: fresh again {fresh_after * 1000:.0f} ms after SIGCONT; {published} reports in the "
               f"{elapsed:.2f} s after it (stopped {resumed_at - stopped_at:.1f} s = "
               f"{(resumed_at - stopped_at) * 1000 / INTERVAL_MS:.0f} intervals)")
        # One tick per interval from SIGCONT on: no burst of the 15 missed.
        self.assertLessEqual(published, elapsed * 1000 / INTERVAL_MS + 2, "a burst of catch-up ticks")
        self.assertEqual(seqs[0], seq_stop + 1, "seq rises by one across the stop")
        self.common_checks(d, reader, "sigstop", before, errors_at_most=0)

    # -- 3 ------------------------------------------------------------------
    def test_3_sighup_storm(self):
        notify = Notifications(os.path.join(self.tmp, "notify.sock"))
        notify.start()
        self.addCleanup(notify.stop)
        port_a, port_b = harness.free_port(), harness.free_port()
        valid = [
            "log_level = \"info\"\n" + endpoint_toml("web", port_a),
            "log_level = \"warn\"\n" + endpoint_toml("web", port_a),
        ]
        invalid = "log_level = \"info\"\nsmoothing = \"forever\"\n" + endpoint_toml("web", port_a)
        moved = "log_level = \"info\"\n" + endpoint_toml("web", port_b) + endpoint_toml("other", port_a)
        d = Daemon(self, self.tmp, valid[0], notify=notify)
        reader = Reader([d.node, d.endpoint_report("web")])
        reader.start()
        self.addCleanup(reader.stop)
        notify.wait_for("READY=1", 0)
        d.wait_publishing(reader)
        # Warm up (the first reloads take their allocations), then measure.
        # The warm-up holds two endpoint changes (i = 49, 99): a new probe's
        # first load takes the most (libbpf parses the kernel's BTF).
        sent = {"valid": 0, "invalid": 0, "endpoints": 0}
        took_ms = {"valid": [], "invalid": [], "endpoints": []}  # RELOADING=1 to READY=1
        applied = [valid[0]]
        total_invalid = [1]  # the last one, after the storm

        def endpoints_of(body):
            return body.split("\n", 1)[1]

        def reload(i):
            if i % 50 == 49:
                body = moved if i % 100 == 49 else valid[0]
            elif i % 2:
                body = invalid
            else:
                body = valid[(i // 2) % 2]
            if body == invalid:
                kind = "invalid"
            else:
                # A valid file whose endpoints differ from those in force loads a new probe.
                kind = "endpoints" if endpoints_of(body) != endpoints_of(applied[0]) else "valid"
                applied[0] = body
            sent[kind] += 1
            total_invalid[0] += kind == "invalid"
            d.write_config(body)
            mark = notify.count()
            d.proc.signal(signal.SIGHUP)
            i_reloading, _ = notify.wait_for("RELOADING=1", mark)
            i_ready, _ = notify.wait_for("READY=1", i_reloading + 1)
            with notify.cond:
                took_ms[kind].append((notify.messages[i_ready][0] - notify.messages[i_reloading][0]) * 1000)

        for i in range(WARM_UP_RELOADS):
            reload(i)
        before = d.resources()
        lines0 = d.line_count()
        notes0 = notify.count()
        sent = {k: 0 for k in sent}
        took_ms = {k: [] for k in took_ms}
        reader.reset_max_age()
        t0 = time.monotonic()
        for i in range(WARM_UP_RELOADS, STORM_RELOADS):
            reload(i)
            if i % 100 == 0:
                d.check_alive()
        took = time.monotonic() - t0
        # The last valid file is in force: make it a distinct one and check.
        final = "log_level = \"info\"\n" + endpoint_toml("final", port_b)
        d.write_config(final)
        mark = notify.count()
        d.proc.signal(signal.SIGHUP)
        notify.wait_for("READY=1", notify.wait_for("RELOADING=1", mark)[0] + 1)
        d.write_config(invalid)
        mark = notify.count()
        d.proc.signal(signal.SIGHUP)
        _, status = notify.wait_for("READY=1", notify.wait_for("RELOADING=1", mark)[0] + 1)
        final_report = d.endpoint_report("final")
        wait_until(lambda: os.path.exists(final_report), 5, "endpoint.final.orca")
        wait_until(lambda: not os.path.exists(d.endpoint_report("web")), 5, "endpoint.web.orca removed")
        r = orca_oob.read_report_file(final_report)
        self.assertNotIn("headroom.ebpf.unavailable", r["named_metrics"], "the final config's probe runs")
        self.assertIn("last reload failed", status, "STATUS= says the last reload failed")
        with notify.cond:
            reloads = sum(1 for _, t in notify.messages[notes0:] if "RELOADING=1" in t.split("\n"))
        rejected = d.count("reload rejected", lines0)  # an error: logged at every level but off
        figure(f"storm: {STORM_RELOADS - WARM_UP_RELOADS} reloads in {took:.1f} s ({took * 1000 / (STORM_RELOADS - WARM_UP_RELOADS):.1f} ms "
               f"each, RELOADING=1 to READY=1 waited for each): {sent['valid']} valid log_level changes, "
               f"{sent['invalid']} invalid files, {sent['endpoints']} endpoint changes (each a new eBPF probe); "
               f"{reloads} RELOADING=1 seen, {rejected} \"reload rejected\" lines")
        self.assertEqual(reloads, STORM_RELOADS - WARM_UP_RELOADS + 2)
        self.assertEqual(rejected, sent["invalid"] + 1)
        with reader.lock:
            max_age = reader.max_age_ms[d.node]
        longest = {k: max(v) for k, v in took_ms.items() if v}
        figure(f"storm: longest reload (RELOADING=1 to READY=1) by kind: "
               + ", ".join(f"{k} {v:.0f} ms" for k, v in longest.items())
               + f"; node.orca max age read during the storm {max_age} ms")
        # One loop: a reload holds up the tick due meanwhile by its own
        # length, and never more (no tick is lost for good, none comes in a burst).
        self.assertLessEqual(max_age, 3 * INTERVAL_MS + max(longest.values()),
                             "node.orca kept its cadence during the storm")
        self.assertLess(max(took_ms["valid"] + took_ms["invalid"]),
                        INTERVAL_MS, "a reload that loads no probe takes less than an interval")
        reader.paths.remove(d.endpoint_report("web"))
        with reader.lock:
            del reader.by_seq[d.endpoint_report("web")]
        # One error per rejected file, nothing else: no flood, nothing about probes.
        noisy = [t for lvl, t in d.lines() if lvl in ("warning", "error", "critical")]
        self.assertEqual(len(noisy), total_invalid[0])
        self.assertTrue(all(t.startswith("reload rejected") for t in noisy), noisy[:3])
        self.common_checks(d, reader, "storm", before, errors_at_most=total_invalid[0])
        notify.stop()

    # -- 4 ------------------------------------------------------------------
    def test_4_ebpf_inflight_table_filled(self):
        slots = 16384  # HR_MAX_INFLIGHT (probes/ebpf/endpoint_abi.h): the socket set's slots, the syscall set's map
        conns = slots + 2000
        # The client sockets live here, the server's in the holder: each
        # process needs about `conns` descriptors.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard < conns + 500:
            self.fail(f"RLIMIT_NOFILE's hard limit is {hard}; this case needs {conns + 500}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))
        # A server that accepts and never reads: every request stays in flight.
        server = Proc("holder", [sys.executable, "-c", HOLDER, str(conns + 1000)], self.tmp, self)
        port = wait_until(lambda: int(re.search(r"port=(\d+)", server.out()).group(1)), 10, "holder's port")
        d = Daemon(self, self.tmp, endpoint_toml("held", port, target="10ms", max_="50ms"))
        report = d.endpoint_report("held")
        reader = Reader([d.node, report])
        reader.start()
        self.addCleanup(reader.stop)
        d.wait_publishing(reader)
        d.wait_publishing(reader, report)
        before = d.resources()
        lines0 = d.line_count()
        client = Proc("clients", [sys.executable, "-c", CLIENTS, str(port), str(conns)], self.tmp, self)
        opened = wait_until(lambda: re.search(r"opened ([0-9.]+)", client.out()), 30, "the clients' requests sent")
        wait_until(lambda: d.count("in-flight table is full", lines0) >= 1, 5, "the table-full warning")
        time.sleep(1.0)
        full = reader.latest(report)[3]
        figure(f"table: {conns} requests held unread ({float(opened.group(1)):.1f} s to open); endpoint report: "
               f"pending {full['named_metrics'].get('headroom.pending')}, inflight "
               f"{full['named_metrics'].get('headroom.inflight')}, utilization {full['utilization']}")
        # The server closes its connections: their requests end (aborted).
        server.stop()
        client.stop()
        wait_until(lambda: d.count("has room again", lines0) >= 1, 10, "the table-has-room line")
        time.sleep(0.5)
        d.check_alive()
        self.assertEqual(d.count("in-flight table is full", lines0), 1, "said once")
        self.assertEqual(d.count("has room again", lines0), 1, "its end said once")
        held = full["named_metrics"].get("headroom.pending", 0)
        self.assertGreaterEqual(held, slots * 7 // 8, "most of the table's requests are counted")
        self.assertLess(held, conns, "the requests beyond the table are not")
        self.assertEqual(full["utilization"].get("latency.slo_target"), 1.0,
                         "the held requests are late: the share over target is 1")
        self.common_checks(d, reader, "table", before)

    # -- 5 ------------------------------------------------------------------
    def test_5_reload_whose_probe_cannot_attach_is_refused(self):
        notify = Notifications(os.path.join(self.tmp, "notify.sock"))
        notify.start()
        self.addCleanup(notify.stop)
        srv = harness.TestServer(self, self.tmp, "1ms")
        load = harness.start_load(self, self.tmp, srv.port, rate=200, connections=2, duration="60s")
        good = endpoint_toml("web", srv.port)
        d = Daemon(self, self.tmp, good, env={"HEADROOM_EBPF_PROGRAMS": "sockets"}, notify=notify)
        report = d.endpoint_report("web")
        reader = Reader([d.node, report])
        reader.start()
        self.addCleanup(reader.stop)
        notify.wait_for("READY=1", 0)
        d.wait_publishing(reader, report)
        if "headroom.ebpf.unavailable" in reader.latest(report)[3]["named_metrics"]:
            self.skipTest("the socket programs do not load on this kernel (6.11+): " + tail(d.proc.err(), 3))
        wait_until(lambda: reader.latest(report)[3]["rps_fractional"] > 50, 5, "web counting requests")
        before = d.resources()
        lines0 = d.line_count()
        # A path needs the syscall programs, which HEADROOM_EBPF_PROGRAMS rules out.
        d.write_config("log_level = \"debug\"\n" + endpoint_toml("web", srv.port, path="/"))
        mark = notify.count()
        d.proc.signal(signal.SIGHUP)
        i, _ = notify.wait_for("RELOADING=1", mark)
        _, ready = notify.wait_for("READY=1", i + 1)
        time.sleep(1.0)
        d.check_alive()
        after = reader.latest(report)[3]
        log = d.lines(lines0)
        figure(f"probe reload: STATUS after it: {[ln for ln in ready.split(chr(10)) if ln.startswith('STATUS=')]}")
        figure(f"probe reload: endpoint report 1 s later: rps {after['rps_fractional']:.0f}, "
               f"unavailable {after['named_metrics'].get('headroom.ebpf.unavailable')}")
        self.assertEqual(d.count("reload failed", lines0), 1, f"the reload is reported as failed: {log}")
        self.assertEqual(d.count("configuration reloaded", lines0), 0, "and not as reloaded")
        self.assertIn("last reload failed", ready)
        self.assertNotIn("headroom.ebpf.unavailable", after["named_metrics"], "the running probe stays")
        self.assertGreater(after["rps_fractional"], 50, "and keeps counting")
        self.assertEqual(sum(1 for lvl, _ in log if lvl == "debug"), 0,
                         "the failed reload's log_level was not applied")
        # Fixed: the next reload applies and clears the status.
        d.write_config(good)
        mark = notify.count()
        d.proc.signal(signal.SIGHUP)
        i, _ = notify.wait_for("RELOADING=1", mark)
        _, ready = notify.wait_for("READY=1", i + 1)
        self.assertNotIn("last reload failed", ready)
        self.assertEqual(d.count("configuration reloaded", lines0), 1)
        load.stop()
        self.common_checks(d, reader, "probe reload", before)

    # -- 6 ------------------------------------------------------------------
    def test_6_ebpf_map_reads_fail_then_recover(self):
        notify = Notifications(os.path.join(self.tmp, "notify.sock"))
        notify.start()
        self.addCleanup(notify.stop)
        fault = os.path.join(self.tmp, "fail-reads")
        srv = harness.TestServer(self, self.tmp, "1ms")
        load = harness.start_load(self, self.tmp, srv.port, rate=200, connections=2, duration="60s")
        d = Daemon(self, self.tmp, endpoint_toml("web", srv.port),
                   env={"HEADROOM_TEST_EBPF_READ_FAULT": fault}, notify=notify)
        report = d.endpoint_report("web")
        reader = Reader([d.node, report])
        reader.start()
        self.addCleanup(reader.stop)
        notify.wait_for("READY=1", 0)
        wait_until(lambda: reader.latest(report)[3]["rps_fractional"] > 50, 5, "web counting requests")
        before = d.resources()
        lines0 = d.line_count()
        mark = notify.count()
        open(fault, "w").close()
        wait_until(lambda: reader.unavailable_reads(report) > 0, 3, "the endpoint report saying unavailable")
        time.sleep(1.2)
        failing = [s for s in notify.statuses(mark) if "failing" in s]
        self.assertTrue(failing, f"STATUS= says the reads fail: {notify.statuses(mark)}")
        self.assertLess(now_ms() - reader.latest(report)[2], 1000,
                        "the endpoint report is still published (unavailable, not stale)")
        os.unlink(fault)
        wait_until(lambda: "headroom.ebpf.unavailable" not in reader.latest(report)[3]["named_metrics"], 3,
                   "the endpoint signals back after the fault")
        time.sleep(1.0)
        back = reader.latest(report)[3]
        statuses = notify.statuses(mark)
        figure(f"map reads: statuses sent while failing and after: {len(statuses)}: {[s[:160] for s in statuses]}")
        figure(f"map reads: after recovery rps {back['rps_fractional']:.0f}")
        self.assertEqual(d.count("reading the eBPF maps failed", lines0), 1, "said once")
        self.assertEqual(d.count("works again", lines0), 1, "its end said once")
        self.assertLessEqual(len(statuses), 2, "STATUS= sent when the state changes, not every tick")
        self.assertNotIn("failing", statuses[-1])
        self.assertGreater(back["rps_fractional"], 50, "counting again")
        self.assertLess(back["rps_fractional"], 400, "no spike from the gap (200 requests/s offered)")
        load.stop()
        self.common_checks(d, reader, "map reads", before)


# A server that accepts connections and never reads from them.
HOLDER = r"""
import resource, socket, sys
n = int(sys.argv[1])
h = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (h, h))
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4096)
print("port=%d" % s.getsockname()[1], flush=True)
held = []
while True:
    c, _ = s.accept()
    held.append(c)
"""


# Opens N connections to a port, sends one request on each, holds them.
CLIENTS = r"""
import resource, socket, sys, time
h = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (h, h))
port, n = int(sys.argv[1]), int(sys.argv[2])
t0 = time.monotonic()
held = []
for _ in range(n):
    c = socket.create_connection(("127.0.0.1", port))
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    held.append(c)
print("opened %.2f" % (time.monotonic() - t0), flush=True)
time.sleep(3600)
"""


def main():
    global SOURCE_DIR, BUILD_DIR, HEADROOMD, SANITIZED
    problems = harness.needs_root("cgroups, eBPF")
    if not problems and not os.path.exists("/sys/kernel/btf/vmlinux"):
        problems.append("no BTF (/sys/kernel/btf/vmlinux): the eBPF cases cannot run")
    build = harness.prologue("process_faults_test.py", ("headroomd", "test_server", "test_load"), problems)
    SOURCE_DIR, BUILD_DIR, SANITIZED, HEADROOMD = build.source_dir, build.build_dir, build.sanitized, build.headroomd
    return harness.run_suite(ProcessFaultsTest, only_env="PROCESS_FAULTS_ONLY")


if __name__ == "__main__":
    sys.exit(main())
