#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""headroomd against real faults of its ORCA directory.

    directory_faults_test.py SOURCE_DIR BUILD_DIR

Each case starts the built headroomd (interval 100 ms, no eBPF) on a
directory of its own and breaks that directory for real: a tiny tmpfs that
fills up (ENOSPC), a read-only remount (EROFS), a read-only bind mount over the
directory (EROFS; a read-write one changes nothing), the directory removed, the
directory replaced by a regular file, the directory made unwritable (0555,
the daemon running as nobody: root ignores modes), temporary names planted by
someone else (a file, a directory with entries, a symlink to a file outside),
a second headroomd on the same directory (the lock), the lock file removed,
a directory others can write into (refused; accepted with a warning when
configured so), another program's temporary file in the directory at
start-up, and reloads: one that keeps the directory keeps its lock, one that
moves releases it, one while the directory is read-only is not rejected.

For each, while it lasts:
  (a) a reader polls node.orca every 2 ms for the whole case and decodes every
      read (tests/oob/orca_oob.py's codec, checked against protoc by
      oob.ClientCodecAgainstProtoc): never an undecodable or partial report;
      headroom.seq never goes back and one seq is always the same bytes, so
      during a fault the last report stays byte-identical and shows its age in
      headroom.timestamp_ms: after FAULT_S, headroomctl cat --json (the
      reader library's rule) calls it stale (a missing file is counted apart);
  (b) no log flood: while a fault lasts (FAULT_S, 12 ticks) headroomd logs
      exactly one warning-or-error line, and exactly one line when it ends
      ("publishing ... again"); a directory removed and made again at once is
      one warning and nothing else; planted temporary names are handled
      without a line;
  (c) no temporary file (".*.tmp") of headroomd's is left after recovery;
  (d) it recovers by itself once the fault is cleared: seq rises again and
      timestamps are fresh, same pid;
  (e) no descriptor or memory growth: the fewest descriptors in /proc/PID/fd
      over a few looks is the same before and after, VmRSS grows by at most
      RSS_TOLERANCE_KIB (not held in sanitizer builds, where LeakSanitizer at
      exit is the check: headroomd must exit 0).

Needs root (mounts, another user); without root it skips (exit 77), with
CI=true it fails. Mounts are always unmounted, also on failure.
HEADROOMD=/path/to/headroomd runs the cases against another build;
HEADROOM_FAULTS_ONLY=removed keeps the cases whose name contains "removed".
"""

import errno
import hashlib
import json
import os
import re
import shutil
import signal
import stat
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

SOURCE_DIR = BUILD_DIR = HEADROOMD = HEADROOMCTL = ""
SANITIZED = False

INTERVAL_MS = 100
FAULT_S = 1.2             # how long each fault is held: 12 ticks, enough to see a flood
RSS_TOLERANCE_KIB = 512   # first use of error paths maps a few pages; a leak per tick is far more over a run
NOBODY_UID = NOBODY_GID = 65534
LOCK_NAME = ".headroomd.lock"
META = ("headroom.timestamp_ms", "headroom.seq", "headroom.interval_ms")
LOG_LINE = re.compile(r"^\S+ (trace|debug|info|warning|error|critical)\s+(.*)$")


def now_ms():
    return int(time.time() * 1000)


class Reader(threading.Thread):
    """Polls one report file every 2 ms and judges every read."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.lock = threading.Lock()
        self.reads = 0
        self.missing = 0
        self.invalid = []          # (reason, size)
        self.order = []            # seq going back
        self.same_seq_differs = []
        self.by_seq = {}           # seq -> sha1 of the bytes
        self.last = None           # (monotonic, seq, timestamp_ms, digest)
        self.baseline_util = None  # utilization keys of the first report
        self.max_age_ms = 0
        self.max_missing_s = 0.0
        self._missing_since = None
        self._halt = threading.Event()

    def judge(self, data):
        """The decoded report, or raises ValueError saying what is wrong."""
        if not data:
            raise ValueError("empty file")
        r = orca_oob.decode_report(data)
        nm = r["named_metrics"]
        for k in META:
            if k not in nm:
                raise ValueError(f"no {k} (a partial report)")
        if not r["utilization"] or not r["application_utilization"] > 0:
            raise ValueError("no utilization or no application_utilization (a partial report)")
        if self.baseline_util is None:
            self.baseline_util = set(r["utilization"])
        elif set(r["utilization"]) != self.baseline_util:
            raise ValueError(f"utilization keys {sorted(r['utilization'])}, first report had "
                             f"{sorted(self.baseline_util)}")
        if orca_oob.encode_report(r) != data:
            raise ValueError("does not re-encode to the same bytes")
        return r

    def run(self):
        while not self._halt.is_set():
            t = time.monotonic()
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except OSError as e:
                if e.errno not in (errno.ENOENT, errno.ENOTDIR):
                    with self.lock:
                        self.invalid.append((f"open: {e}", 0))
                with self.lock:
                    self.reads += 1
                    if self.last is not None:  # gone after it was there (not before the first report)
                        self.missing += 1
                        if self._missing_since is None:
                            self._missing_since = t
                self._halt.wait(0.002)
                continue
            with self.lock:
                self.reads += 1
                if self._missing_since is not None:
                    self.max_missing_s = max(self.max_missing_s, t - self._missing_since)
                    self._missing_since = None
                try:
                    r = self.judge(data)
                except Exception as e:  # noqa: BLE001  (every way a read can be wrong)
                    self.invalid.append((str(e), len(data)))
                    self._halt.wait(0.002)
                    continue
                seq = int(r["named_metrics"]["headroom.seq"])
                ts = int(r["named_metrics"]["headroom.timestamp_ms"])
                digest = hashlib.sha1(data).hexdigest()
                if seq in self.by_seq and self.by_seq[seq] != digest:
                    self.same_seq_differs.append(seq)
                self.by_seq[seq] = digest
                if self.last is not None and seq < self.last[1]:
                    self.order.append((self.last[1], seq))
                self.last = (t, seq, ts, digest)
                self.max_age_ms = max(self.max_age_ms, now_ms() - ts)
            self._halt.wait(0.002)

    def stop(self):
        self._halt.set()
        self.join(5)

    def seq(self):
        with self.lock:
            return self.last[1] if self.last else 0

    def snapshot(self):
        with self.lock:
            return self.last

    def check(self, case, label):
        self.stop()
        with self.lock:
            figure(f"{label}: {self.reads} reads of node.orca, {len(self.by_seq)} distinct reports, "
                   f"{self.missing} reads after the first report found no file (longest {self.max_missing_s * 1000:.0f} ms), "
                   f"{len(self.invalid)} invalid, max age read {self.max_age_ms} ms")
            case.assertEqual(self.invalid, [], f"{label}: a reader saw invalid or partial reports")
            case.assertEqual(self.order, [], f"{label}: headroom.seq went back (another writer?)")
            case.assertEqual(self.same_seq_differs, [], f"{label}: one seq, different bytes")
            case.assertGreater(len(self.by_seq), 3, f"{label}: too few reports read")


class Daemon:
    """headroomd --config FILE --no-ebpf on one directory; its log lines."""

    def __init__(self, case, tmp, orca_dir, *, user=False, extra="", name="headroomd"):
        self.case, self.tmp, self.orca_dir = case, tmp, orca_dir
        self.node = os.path.join(orca_dir, "node.orca")
        self.config = os.path.join(tmp, name + ".toml")
        with open(self.config, "w") as f:
            f.write("[agent]\norca_dir = " + toml_string(orca_dir) + "\ninterval = \"100ms\"\n"
                    "log_level = \"info\"\n" + extra)
        os.chmod(self.config, 0o644)
        argv = [HEADROOMD, "--config", self.config, "--no-ebpf"]
        if user:
            argv = ["setpriv", f"--reuid={NOBODY_UID}", f"--regid={NOBODY_GID}", "--clear-groups", "--"] + argv
        self.proc = Proc(name, argv, tmp, case)

    @property
    def pid(self):
        return self.proc.pid  # setpriv execs headroomd: the same pid

    def lines(self, since=0, until=None):
        """(level, text) of each log line from line `since` to `until`."""
        out = []
        for line in self.proc.err().splitlines()[since:until]:
            m = LOG_LINE.match(line)
            if m:
                out.append((m.group(1), m.group(2)))
        return out

    def line_count(self):
        return len(self.proc.err().splitlines())

    def check_alive(self):
        if not self.proc.alive():
            raise Fatal(f"headroomd exited with {self.proc.p.returncode}:\n{tail(self.proc.err())}")

    def wait_publishing(self, reader, above=None, timeout=10):
        """Until the reader has seen a fresh report with seq above `above`
        (default: the seq now, plus 2)."""
        target = (reader.seq() if above is None else above) + 2

        def ok():
            self.check_alive()
            last = reader.snapshot()
            return last is not None and last[1] >= target and now_ms() - last[2] < 1000
        wait_until(ok, timeout, f"node.orca with seq >= {target} and fresh")
        return reader.seq()

    def fds(self, looks=5):
        """The fewest descriptors over a few looks (a report being written
        holds one more for a moment)."""
        counts = []
        for _ in range(looks):
            counts.append(len(os.listdir(f"/proc/{self.pid}/fd")))
            time.sleep(0.03)
        return min(counts)

    def stop_cleanly(self):
        self.proc.signal(signal.SIGTERM)
        code = self.proc.wait(10)
        self.case.assertEqual(code, 0, f"headroomd's exit status on SIGTERM (LeakSanitizer reports here):\n"
                                       f"{tail(self.proc.err())}")


def ctl_cat(path):
    """headroomctl cat FILE --json: the reader library's verdict on a file."""
    r = subprocess.run([HEADROOMCTL, "cat", path, "--json"], capture_output=True, timeout=10)
    if r.returncode != 0:
        raise AssertionError(f"headroomctl cat {path} --json exited {r.returncode}: {r.stderr.decode()}")
    return json.loads(r.stdout)


def temporaries(directory):
    try:
        return sorted(n for n in os.listdir(directory) if n.startswith(".") and n.endswith(".tmp"))
    except OSError:
        return []


def mount_tmpfs(case, path, size):
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path], check=True)
    harness.LIVE_MOUNTS.append(path)

    def unmount():
        if path in harness.LIVE_MOUNTS:
            if subprocess.run(["umount", path], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", path], capture_output=True)
            harness.LIVE_MOUNTS.remove(path)
    case.addCleanup(unmount)


def bind_mount(case, path):
    """path bound over itself; returns the umount that clears it."""
    subprocess.run(["mount", "--bind", path, path], check=True)
    harness.LIVE_MOUNTS.append(path)

    def unmount():
        # EBUSY while a file is open through the mount (the reader's, a
        # moment at a time): again. Never lazily: a mount the agent holds
        # open must fail the case.
        for _ in range(200):
            r = subprocess.run(["umount", path], capture_output=True, text=True)
            if r.returncode == 0:
                harness.LIVE_MOUNTS.remove(path)
                return
            time.sleep(0.005)
        raise AssertionError(f"umount {path}: {r.stderr.strip()} (does headroomd hold the bind mount open?)")

    def cleanup():
        if path in harness.LIVE_MOUNTS:
            if subprocess.run(["umount", path], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", path], capture_output=True)
            harness.LIVE_MOUNTS.remove(path)
    case.addCleanup(cleanup)
    return unmount


class DirectoryFaultsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.make_temp_dir(self, "headroom-dirfaults-")
        os.chmod(self.tmp, 0o755)  # nobody must reach its files in the unwritable case
        self.orca = os.path.join(self.tmp, "orca")
        self.started = time.monotonic()

    def tearDown(self):
        note(f"{self.id().split('.')[-1]}: {time.monotonic() - self.started:.1f} s")

    # -- helpers ---------------------------------------------------------

    def start(self, **kw):
        d = Daemon(self, self.tmp, self.orca, **kw)
        reader = Reader(d.node)
        reader.start()
        self.addCleanup(reader.stop)
        d.wait_publishing(reader, above=1)
        time.sleep(0.3)  # past the first ticks: descriptors and RSS have settled
        return d, reader

    def fault_cycle(self, label, d, reader, inject, clear, *, fault_line, recovery_line, error_lines=1,
                    recovery_lines=1, held_still=True, leftover_ok=()):
        """Injects a fault, holds it FAULT_S, clears it; asserts (a)-(e)."""
        fds_before, rss_before = d.fds(), rss_kib(d.pid)
        mark = d.line_count()
        seq_before = reader.seq()
        inject()
        held_from = time.monotonic()
        if error_lines:
            wait_until(lambda: (d.check_alive() or True) and any(re.search(fault_line, t) for _, t in d.lines(mark)),
                       5, f"{label}: headroomd's error line matching {fault_line!r}")
        frozen = reader.snapshot()
        time.sleep(max(0.0, FAULT_S - (time.monotonic() - held_from)))
        during = reader.snapshot()
        stale = None
        if held_still and error_lines and os.path.exists(d.node):
            # The report left in place reads as stale by its own metadata
            # (headroomctl applies the reader library's rule).
            stale = ctl_cat(d.node)
            self.assertTrue(stale["stale"], f"{label}: the report left in place does not read as stale: {stale}")
        mark_clear = d.line_count()
        clear()
        recovered_at = time.monotonic()
        seq_after = d.wait_publishing(reader, above=max(seq_before, during[1] if during else 0))
        recovery_s = time.monotonic() - recovered_at
        wait_until(lambda: not [n for n in temporaries(self.orca) if n not in leftover_ok], 2,
                   f"{label}: no temporary file left")
        time.sleep(0.3)
        fds_after, rss_after = d.fds(), rss_kib(d.pid)
        fault_log = d.lines(mark, mark_clear)
        clear_log = d.lines(mark_clear)
        noisy = [(lv, t) for lv, t in fault_log if lv in ("warning", "error", "critical")]
        recovered = [(lv, t) for lv, t in clear_log if re.search(recovery_line, t)]
        figure(f"{label}: fault held {FAULT_S:.1f} s ({int(FAULT_S * 1000 / INTERVAL_MS)} ticks): "
               f"{len(noisy)} warning/error line(s) during it, {len(clear_log)} line(s) after clearing "
               f"({len(recovered)} recovery); seq {seq_before} -> {seq_after}, recovered in {recovery_s * 1000:.0f} ms; "
               f"fds {fds_before} -> {fds_after}, VmRSS {rss_before} -> {rss_after} KiB" +
               (f"; the report left in place read {stale['age_ms']} ms old, stale ({stale['stale_reason']})"
                if stale else ""))
        self.assertEqual(len(noisy), error_lines, f"{label}: warning/error lines during the fault: {noisy}")
        if error_lines:
            self.assertRegex(noisy[0][1], fault_line)
        self.assertEqual(len(recovered), recovery_lines, f"{label}: recovery lines: {clear_log}")
        self.assertEqual([x for x in clear_log if x[0] in ("error", "critical")], [],
                         f"{label}: errors after the fault was cleared")
        if held_still and error_lines and frozen is not None and during is not None:
            # Held still: the report that was there stays, byte for byte.
            self.assertEqual(frozen[1], during[1], f"{label}: node.orca changed while publishing failed")
            self.assertEqual(frozen[3], during[3])
        self.assertGreater(seq_after, seq_before)
        self.assertEqual(fds_after, fds_before, f"{label}: descriptors {fds_before} -> {fds_after}")
        if SANITIZED:
            note(f"NOTE: {label}: sanitizer build, VmRSS not compared (LeakSanitizer checks at exit)")
        else:
            self.assertLessEqual(rss_after - rss_before, RSS_TOLERANCE_KIB, f"{label}: VmRSS grew")
        return fault_log, clear_log

    def assert_locked(self, label, d):
        """The directory has the lock file again and a second agent is kept out."""
        self.assertTrue(os.path.exists(os.path.join(self.orca, LOCK_NAME)), f"{label}: no lock file in the new directory")
        other = Proc("headroomd-second", [HEADROOMD, "--config", d.config, "--no-ebpf"], self.tmp, self)
        code = other.wait(10)
        if code is None:
            other.stop()
        figure(f"{label}: a second headroomd on the new directory exited {code}")
        self.assertEqual(code, 73, f"{label}: a second headroomd on the new directory: {tail(other.err())}")

    def finish(self, label, d, reader):
        reader.check(self, label)
        # Looked at once the agent has stopped: while it runs, a report being
        # written has its temporary name for a moment (a slow, sanitized
        # build was seen in the middle of one).
        d.stop_cleanly()
        self.assertEqual(temporaries(self.orca), [], f"{label}: temporary files left")

    # -- the faults ------------------------------------------------------

    def test_1_full_file_system(self):
        mount_tmpfs(self, self.orca, "64k")
        d, reader = self.start()
        filler = os.path.join(self.orca, "filler")

        def fill():
            with open(filler, "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\0" * 4096)
                except OSError as e:
                    self.assertEqual(e.errno, errno.ENOSPC)
            st = os.statvfs(self.orca)
            figure(f"ENOSPC: tmpfs size=64k filled, {st.f_bavail} blocks left")
        self.fault_cycle("ENOSPC", d, reader, fill, lambda: os.unlink(filler),
                         fault_line=r"cannot publish .*node\.orca.*No space left on device",
                         recovery_line=r"publishing .*node\.orca again")
        self.finish("ENOSPC", d, reader)

    def test_2_read_only_remount(self):
        mount_tmpfs(self, self.orca, "1m")
        d, reader = self.start()

        self.fault_cycle("EROFS", d, reader, lambda: self.remount("ro"), lambda: self.remount("rw"),
                         fault_line=r"cannot publish .*node\.orca.*Read-only file system",
                         recovery_line=r"publishing .*node\.orca again")
        self.finish("EROFS", d, reader)

    def test_2b_reload_while_read_only(self):
        mount_tmpfs(self, self.orca, "1m")
        d, reader = self.start()
        mark = d.line_count()
        self.remount("ro")
        wait_until(lambda: any("Read-only file system" in t for _, t in d.lines(mark)), 5, "the EROFS error line")
        reloaded_at = d.line_count()
        with open(d.config, "a") as f:
            f.write('smoothing = "400ms"\n')
        d.proc.signal(signal.SIGHUP)
        wait_until(lambda: any("configuration reloaded" in t or "reload rejected" in t for _, t in d.lines(reloaded_at)),
                   5, "the reload")
        time.sleep(0.5)
        during = d.lines(reloaded_at)
        self.remount("rw")
        d.wait_publishing(reader)
        time.sleep(0.2)
        errors = [t for lv, t in d.lines(mark) if lv in ("error", "critical")]
        figure(f"reload while read-only: {len(errors)} error line(s) from the fault to recovery "
               f"(the running and the reloaded configuration's publisher, once each): {during[:2]}")
        self.assertTrue(any("configuration reloaded" in t for _, t in during),
                        f"a reload while the directory is read-only must not be rejected: {during}")
        self.assertLessEqual(len(errors), 2, errors)
        self.assertTrue(any(re.search(r"publishing .*node\.orca again", t) for _, t in d.lines(reloaded_at)))
        self.finish("reload while read-only", d, reader)

    def test_2c_read_only_bind_mount(self):
        # The same directory bound over itself keeps its device and inode;
        # only the mount differs. Read-write, the agent's writes are what
        # readers see: nothing to say. Read-only, publishing fails as for a
        # read-only remount, and the agent must not hold the mount open
        # (bind_mount's umount fails the case if it does).
        os.mkdir(self.orca, 0o755)
        d, reader = self.start()
        unbind = {}
        fault_line = r"cannot publish .*node\.orca.*read-only mount.*Read-only file system"

        def bind(read_only):
            def do():
                mark = d.line_count()
                unbind["clear"] = bind_mount(self, self.orca)
                if not read_only:
                    return
                subprocess.run(["mount", "-o", "remount,bind,ro", self.orca], check=True)
                bound_at = time.monotonic()
                with self.assertRaises(OSError, msg="the read-only bind mount is writable"):
                    open(os.path.join(self.orca, ".probe"), "w").close()
                # Noticed within 16 writes (the path is looked at that often);
                # the fault is held from then, for the report to go stale.
                wait_until(lambda: any(re.search(fault_line, t) for _, t in d.lines(mark)), 5,
                           "the read-only bind mount's error line")
                figure(f"read-only bind mount: noticed {(time.monotonic() - bound_at) * 1000:.0f} ms after "
                       f"the remount (the path is looked at every 16 writes, 1.6 s at 100 ms)")
            return do
        self.fault_cycle("read-write bind mount", d, reader, bind(False), lambda: unbind["clear"](),
                         fault_line="", recovery_line="^$", error_lines=0, recovery_lines=0)
        self.fault_cycle("read-only bind mount", d, reader, bind(True), lambda: unbind["clear"](),
                         fault_line=fault_line, recovery_line=r"publishing .*node\.orca again")
        self.assert_locked("read-only bind mount", d)
        self.finish("read-only bind mount", d, reader)

    def remount(self, mode):
        # EBUSY while a report is open for writing: try again at once.
        for _ in range(200):
            r = subprocess.run(["mount", "-o", f"remount,{mode}", self.orca], capture_output=True, text=True)
            if r.returncode == 0:
                return
            time.sleep(0.005)
        raise AssertionError(f"mount -o remount,{mode}: {r.stderr}")

    def test_3_directory_removed(self):
        d, reader = self.start()

        def remove():
            for _ in range(50):  # a report created meanwhile makes rmdir fail: again
                if subprocess.run(["rm", "-rf", self.orca], capture_output=True).returncode == 0:
                    return
            raise AssertionError("rm -rf kept failing")
        # Made again at once by the agent: one warning, no error, nothing to clear.
        self.fault_cycle("removed", d, reader, remove, lambda: None,
                         fault_line=r"was replaced while running.*holding .*\.headroomd\.lock",
                         recovery_line=r"publishing", recovery_lines=0, held_still=False)
        self.assert_locked("removed", d)
        self.finish("removed", d, reader)

    def test_4_directory_replaced_by_a_file(self):
        d, reader = self.start()
        blocker = os.path.join(self.tmp, "blocker")

        def replace():
            for _ in range(50):  # the agent may make the directory again in between: again
                subprocess.run(["rm", "-rf", self.orca], capture_output=True)
                with open(blocker, "w") as f:
                    f.write("not a directory\n")
                try:
                    os.rename(blocker, self.orca)
                    return
                except OSError:
                    continue
            raise AssertionError("could not put a file where the directory was")
        self.fault_cycle("replaced by a file", d, reader, replace, lambda: os.unlink(self.orca),
                         fault_line=r"cannot publish .*node\.orca.*Not a directory",
                         recovery_line=r"publishing .*node\.orca again")
        self.assert_locked("replaced by a file", d)
        self.finish("replaced by a file", d, reader)

    def test_5_unwritable_directory(self):
        os.mkdir(self.orca, 0o755)
        os.chown(self.orca, NOBODY_UID, NOBODY_GID)
        d, reader = self.start(user=True)
        with open(f"/proc/{d.pid}/status") as f:
            uid = re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1)
        self.assertEqual(uid, str(NOBODY_UID), "headroomd does not run as nobody")
        self.fault_cycle("chmod 0555", d, reader, lambda: os.chmod(self.orca, 0o555), lambda: os.chmod(self.orca, 0o755),
                         fault_line=r"cannot publish .*node\.orca.*Permission denied",
                         recovery_line=r"publishing .*node\.orca again")
        self.finish("chmod 0555", d, reader)

    def test_6_planted_temporary_names(self):
        outside = os.path.join(self.tmp, "victim")
        with open(outside, "w") as f:
            f.write("must never be written\n")
        victim_before = os.stat(outside)
        d, reader = self.start()
        planted = os.path.join(self.orca, f".node.orca.{d.pid}.tmp")

        def plant(make):
            def do():
                for _ in range(200):  # the writer's own file may hold the name this instant
                    try:
                        make()
                        return
                    except FileExistsError:
                        time.sleep(0.002)
                raise AssertionError("could not plant " + planted)
            return do

        def plant_file():
            with open(planted, "x") as f:
                f.write("planted")

        def plant_directory():
            os.mkdir(planted)
            with open(os.path.join(planted, "inside"), "w") as f:
                f.write("x")

        # A file and a symlink: removed by the next publish, without a word.
        for label, make in (("planted file", plant_file), ("planted symlink", lambda: os.symlink(outside, planted))):
            self.fault_cycle(label, d, reader, plant(make), lambda: None, fault_line="", recovery_line="^$",
                             error_lines=0, recovery_lines=0)
            self.assertFalse(os.path.lexists(planted), f"{label}: still there")
        # A directory with entries: not ours to empty; publishing goes through
        # the second name and leaves nothing behind.
        self.fault_cycle("planted directory", d, reader, plant(plant_directory), lambda: None, fault_line="",
                         recovery_line="^$", error_lines=0, recovery_lines=0,
                         leftover_ok=(os.path.basename(planted),))
        time.sleep(0.2)
        self.assertEqual(temporaries(self.orca), [os.path.basename(planted)])
        shutil.rmtree(planted)
        victim_after = os.stat(outside)
        with open(outside) as f:
            self.assertEqual(f.read(), "must never be written\n")
        self.assertEqual((victim_before.st_mtime_ns, victim_before.st_size),
                         (victim_after.st_mtime_ns, victim_after.st_size))
        self.finish("planted", d, reader)

    def test_7_second_agent_on_the_same_directory(self):
        d, reader = self.start()
        fds_before = d.fds()
        seq_before = reader.seq()
        other = Proc("headroomd-second", [HEADROOMD, "--config", d.config, "--no-ebpf"], self.tmp, self)
        code = other.wait(5)
        if code is None:
            other.stop()
        err = other.err()
        with reader.lock:
            went_back = len(reader.order)
        figure(f"second agent: exit {code}, first agent's seq {seq_before} -> {reader.seq()}, "
               f"seq went back {went_back} times meanwhile; "
               f"its message: {err.strip().splitlines()[-1] if err.strip() else '(none)'}")
        self.assertEqual(code, 73, f"a second headroomd on {self.orca} must exit 73 at once:\n{tail(err)}")
        for want in (self.orca + " is in use by another headroomd", f"pid {d.pid}",
                     os.path.join(self.orca, LOCK_NAME)):
            self.assertIn(want, err)
        # The first one was not disturbed: no line, reports go on.
        time.sleep(0.5)
        self.assertEqual([x for x in d.lines() if x[0] in ("warning", "error", "critical")], [])
        d.wait_publishing(reader)
        self.assertEqual(d.fds(), fds_before)
        self.finish("second agent", d, reader)

    def test_7b_lock_file_removed(self):
        d, reader = self.start()
        lock = os.path.join(self.orca, LOCK_NAME)
        mark = d.line_count()
        os.unlink(lock)
        removed_at = time.monotonic()
        wait_until(lambda: os.path.exists(lock), 5, "the lock file made again")
        back_s = time.monotonic() - removed_at
        time.sleep(0.3)
        lines = [x for x in d.lines(mark) if x[0] in ("warning", "error", "critical")]
        figure(f"lock file removed: back after {back_s * 1000:.0f} ms (checked every 16 publishes), "
               f"{len(lines)} warning line(s)")
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("took the lock again", lines[0][1])
        self.assert_locked("lock file removed", d)
        self.finish("lock file removed", d, reader)

    def test_8_directory_others_can_write_into(self):
        os.mkdir(self.orca)
        os.chmod(self.orca, 0o777)
        refused = Proc("headroomd-refused", [HEADROOMD, "--config", self._config("refused", ""), "--no-ebpf"],
                       self.tmp, self)
        code = refused.wait(5)
        if code is None:
            refused.stop()
        err = refused.err()
        figure(f"0777 directory: exit {code}; message: {err.strip().splitlines()[-1] if err.strip() else '(none)'}")
        self.assertEqual(code, 73, f"a world-writable directory must be refused:\n{tail(err)}")
        for want in (self.orca, "writable by every user (mode 0777)", "chmod 0755", 'unsafe_orca_dir = "warn"'):
            self.assertIn(want, err)
        self.assertEqual(os.listdir(self.orca), [], "nothing may be written into a refused directory")

        d, reader = self.start(extra='unsafe_orca_dir = "warn"\n')
        warnings = [t for lv, t in d.lines() if lv == "warning"]
        figure(f"0777 directory with unsafe_orca_dir = \"warn\": {len(warnings)} warning line(s)")
        self.assertEqual(len(warnings), 1, d.proc.err())
        self.assertIn("writable by every user", warnings[0])
        self.finish("0777 warn", d, reader)

    def _config(self, name, extra):
        path = os.path.join(self.tmp, name + ".toml")
        with open(path, "w") as f:
            f.write("[agent]\norca_dir = " + toml_string(self.orca) + "\ninterval = \"100ms\"\n" + extra)
        return path

    def test_9_other_programs_temporaries_survive_start_up(self):
        os.mkdir(self.orca)
        theirs = {".something.tmp": "another program's", ".report.json.4242.tmp": "a writer's, not headroomd's",
                  ".node.orca.tmp": "no pid: not a name headroomd makes"}
        ours = [".node.orca.999999.tmp", ".endpoint.api.orca.999999.1.tmp"]  # a crashed headroomd's
        for name, text in theirs.items():
            with open(os.path.join(self.orca, name), "w") as f:
                f.write(text)
        for name in ours:
            with open(os.path.join(self.orca, name), "w") as f:
                f.write("partial")
        d, reader = self.start()
        left = temporaries(self.orca)
        figure(f"start-up cleaning: left {left}")
        self.assertEqual(left, sorted(theirs), "only headroomd's own temporaries may be removed")
        for name, text in theirs.items():
            with open(os.path.join(self.orca, name)) as f:
                self.assertEqual(f.read(), text)
            os.unlink(os.path.join(self.orca, name))
        self.finish("start-up cleaning", d, reader)

    def test_10_reload_keeps_the_lock(self):
        d, reader = self.start()
        fds_before = d.fds()

        def reload(extra, what):
            mark = d.line_count()
            with open(d.config, "a") as f:
                f.write(extra)
            d.proc.signal(signal.SIGHUP)
            wait_until(lambda: any("configuration reloaded" in t or "reload rejected" in t for _, t in d.lines(mark)),
                       5, f"the reload ({what})")
            lines = d.lines(mark)
            self.assertEqual([x for x in lines if x[0] in ("warning", "error", "critical")], [], f"{what}: {lines}")
            return lines

        # Same directory: the new pipeline's publisher shares the running one's lock.
        reload('smoothing = "400ms"\n', "same directory")
        d.wait_publishing(reader)
        other = Proc("headroomd-second", [HEADROOMD, "--config", self._config("second", ""), "--no-ebpf"], self.tmp,
                     self)
        code = other.wait(10)
        if code is None:
            other.stop()
        self.assertEqual(code, 73, f"after a reload that keeps the directory, the lock must still be held: "
                                   f"{tail(other.err())}")
        self.assertIn(f"pid {d.pid}", other.err())
        self.assertEqual(d.fds(), fds_before, "a reload that keeps the directory left a descriptor behind")
        # Another directory: locked; the old one's lock released with the old pipeline.
        moved = os.path.join(self.tmp, "orca2")
        with open(d.config) as f:
            text = f.read().replace(toml_string(self.orca), toml_string(moved))
        with open(d.config, "w") as f:
            f.write(text)
        reload("", "another directory")
        wait_until(lambda: os.path.exists(os.path.join(moved, "node.orca")), 5, "node.orca in the new directory")
        reader.check(self, "reload")  # the old directory gets another writer now
        released = Proc("headroomd-old-dir", [HEADROOMD, "--config", self._config("old", ""), "--no-ebpf"], self.tmp,
                        self)

        def started():
            if not released.alive():
                raise Fatal(f"the old directory's lock was not released: {tail(released.err())}")
            r = orca_oob.read_report_file(os.path.join(self.orca, "node.orca"))
            return r["named_metrics"]["headroom.seq"] <= 3  # its own first reports, not the moved agent's
        wait_until(started, 5, "another agent publishing into the old directory")
        time.sleep(0.3)
        self.assertTrue(released.alive(), f"the old directory's lock was not released: {tail(released.err())}")
        released.stop()
        fds_after = d.fds()
        figure(f"reload: same directory kept the lock (second agent exit {code}); after moving to another "
               f"directory the old one was free; fds {fds_before} -> {fds_after}")
        self.assertEqual(fds_after, fds_before, "the old directory's descriptors were not closed")
        d.stop_cleanly()


def main():
    global SOURCE_DIR, BUILD_DIR, HEADROOMD, HEADROOMCTL, SANITIZED
    problems = harness.needs_root("tmpfs mounts, a remount, running headroomd as nobody")
    if not shutil.which("setpriv"):
        problems.append("setpriv missing (Debian: util-linux)")
    build = harness.prologue("directory_faults_test.py", ("headroomd", "headroomctl"), problems)
    SOURCE_DIR, BUILD_DIR, SANITIZED = build.source_dir, build.build_dir, build.sanitized
    HEADROOMD, HEADROOMCTL = build.headroomd, build.headroomctl
    os.environ.pop("JOURNAL_STREAM", None)  # plain log lines on stderr, which the cases count
    return harness.run_suite(DirectoryFaultsTest, only_env="HEADROOM_FAULTS_ONLY")


if __name__ == "__main__":
    sys.exit(main())
