#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""headroomd's out-of-band ORCA service ([oob], StreamCoreMetrics) against real clients.

    oob_test.py SOURCE_DIR BUILD_DIR

Starts the built headroomd with an [oob] table (TCP on 127.0.0.1 and [::1],
a unix: socket; ports chosen free at run time), the project's test server and
load client for the endpoints, and streams reports with two clients that
share nothing with the daemon's code: tests/oob/orca_oob.py (Python's gRPC on
raw bytes, the messages encoded by hand from the public field numbers) and a
raw HTTP/2 client written here for the clients that misbehave; and with
`headroomctl oob` (the C++ client). While a case runs, a thread reads the
report files every 5 ms and keeps them by headroom.seq, so that every message
a stream carried is compared with the file of its tick. Each case starts what
it needs and stops it when it ends, also on failure.

Needs root (the eBPF endpoint probe) and python3-grpcio. A missing tool or no
root fails with CI=true and skips (exit 77) elsewhere.
"""

import json
import os
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import orca_oob  # noqa: E402  (next to this file)
from orca_oob import grpc  # noqa: E402  (None when python3-grpcio is missing)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import harness  # noqa: E402  (tests/support/harness.py: processes, waits, figures)
from harness import (Fatal, Proc, TestServer, figure, free_port, note, rss_kib, tail,  # noqa: E402
                     toml_string, wait_until)

SOURCE_DIR = BUILD_DIR = ""
HEADROOMD = HEADROOMCTL = TEST_SERVER = TEST_LOAD = ""
SANITIZED = False  # an AddressSanitizer build: RSS is not comparable
HAVE_IPV6 = False

INTERVAL_MS = 100  # agent.interval in every case
RSS_LIMIT_MIB = 60
FIRST_MESSAGE_LIMIT_S = 0.5  # "the first message comes at once"


def free_port_both():
    """A port free on 127.0.0.1 and, with IPv6, on ::1 too: one number for
    both listeners, as a configuration would have it."""
    for _ in range(50):
        port = free_port()
        if not HAVE_IPV6:
            return port
        try:
            with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
                s.bind(("::1", port))
            return port
        except OSError:
            continue
    raise AssertionError("no port free on both 127.0.0.1 and ::1")


def p50(values):
    return statistics.median(values) if values else None


def fmt(v, digits=0):
    return "-" if v is None else f"{v:.{digits}f}"


def ipv6_loopback():
    try:
        with open("/proc/net/if_inet6") as f:
            rows = [line.split() for line in f if line.strip()]
    except OSError:
        return False
    return any(row[0] == "0" * 31 + "1" and row[-1] == "lo" for row in rows)


def code_name(code):
    return code.name if code is not None else "none"


def report_diff(a, b):
    """The fields (and map keys) in which two report dicts differ, as text."""
    out = []
    for k in orca_oob.FIELD_ORDER:
        x, y = a.get(k), b.get(k)
        if isinstance(x, dict) and isinstance(y, dict):
            for mk in sorted(set(x) | set(y)):
                if x.get(mk) != y.get(mk):
                    out.append(f"{k}[{mk!r}]: {x.get(mk, '<absent>')!r} vs {y.get(mk, '<absent>')!r}")
        elif x != y:
            out.append(f"{k}: {x!r} vs {y!r}")
    return "; ".join(out)


# ---------------------------------------------------------------------------
# Processes

def _connectable(path):
    """Whether a unix socket at path accepts a connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        try:
            s.connect(path)
            return True
        except OSError:
            return False

class Agent:
    """headroomd --config FILE, FILE written from keyword settings, with an
    [oob] table listening on TCP 127.0.0.1 (and [::1] with the same port when
    the machine has IPv6) and on a unix socket in the case's temp dir."""

    def __init__(self, case, tmp, *, endpoints=(), max_streams=None, unknown_authority=None,
                 default_interval=None, tcp=True, ipv6=True, unix=True, log_level="info", name="headroomd"):
        self.case, self.tmp = case, tmp
        self.orca_dir = os.path.join(tmp, "orca")
        os.makedirs(self.orca_dir, exist_ok=True)
        self.node_orca = os.path.join(self.orca_dir, "node.orca")
        self.config_path = os.path.join(tmp, "headroom.toml")
        self.port = free_port_both()
        self.tcp = f"127.0.0.1:{self.port}" if tcp else None
        self.ipv6 = f"[::1]:{self.port}" if ipv6 and HAVE_IPV6 else None
        self.unix_path = os.path.join(tmp, "oob.sock") if unix else None
        self.unix = "unix:" + self.unix_path if unix else None
        self.listen = [a for a in (self.tcp, self.ipv6, self.unix) if a]
        self.settings = dict(endpoints=list(endpoints), max_streams=max_streams, unknown_authority=unknown_authority,
                             default_interval=default_interval, log_level=log_level, interval=f"{INTERVAL_MS}ms",
                             listen=self.listen, extra_oob={})
        self.write_config()
        self.proc = self._start(name)

    def _start(self, name):
        return Proc(name, [HEADROOMD, "--config", self.config_path], self.tmp, self.case)

    def restart(self, name="headroomd-again"):
        """Starts headroomd again with the same file (the previous one stopped)."""
        self.proc = self._start(name)
        return self.proc

    def config_text(self, **overrides):
        s = dict(self.settings, **overrides)
        lines = ["[agent]",
                 "orca_dir = " + toml_string(self.orca_dir),
                 "interval = " + toml_string(s["interval"]),
                 "log_level = " + toml_string(s["log_level"]),
                 "", "[oob]",
                 "listen = [" + ", ".join(toml_string(a) for a in s["listen"]) + "]"]
        for key in ("max_streams", "unknown_authority", "default_interval"):
            if s[key] is not None:
                lines.append(f"{key} = " + (str(s[key]) if isinstance(s[key], int) else toml_string(s[key])))
        for key, value in s["extra_oob"].items():
            lines.append(f"{key} = {value}")
        for e in s["endpoints"]:
            lines += ["", "[[endpoint]]"]
            for key, value in e.items():
                lines.append(f"{key} = " + (str(value) if isinstance(value, int) else toml_string(value)))
        return "\n".join(lines) + "\n"

    def write_config(self, **overrides):
        """Replaces the file by rename, so a SIGHUP never reads half of it."""
        temp = self.config_path + ".new"
        with open(temp, "w") as f:
            f.write(self.config_text(**overrides))
        os.rename(temp, self.config_path)

    def file(self, scope):
        return os.path.join(self.orca_dir, scope + ".orca")

    def check_alive(self):
        if not self.proc.alive():
            raise Fatal(f"headroomd exited with {self.proc.p.returncode}; its stderr:\n{tail(self.proc.err())}")

    def wait_ready(self, scopes=(), timeout=15, authority=None):
        """node.orca (and the scopes' files) written by this process, and
        every listener answering a stream (with `authority`: a report, or a
        refusal that only a listener can give)."""
        started = time.monotonic()

        def written(path):
            self.check_alive()
            r = orca_oob.read_report_file(path)
            _, ts, stopped = orca_oob.metadata(r)
            return not stopped and ts is not None and abs(time.time() * 1000 - ts) < 2000

        try:
            for path in [self.node_orca] + [self.file(s) for s in scopes]:
                wait_until(lambda: written(path), timeout, f"{os.path.basename(path)} from this headroomd")
            for address in self.listen:
                def answers():
                    self.check_alive()
                    with orca_oob.stream(address, authority=authority, count=1, timeout=2) as s:
                        got = list(s)
                    return bool(got) or code_name(s.code) in ("NOT_FOUND", "RESOURCE_EXHAUSTED")
                wait_until(answers, max(2.0, timeout - (time.monotonic() - started)),
                           f"a first report on the [oob] listener {address}", poll=0.1)
        except Fatal:
            raise
        except AssertionError as e:
            raise AssertionError(f"{e}; headroomd's stderr:\n{tail(self.proc.err())}") from None


# ---------------------------------------------------------------------------
# Watching the files

class FileMonitor(threading.Thread):
    """Reads the report files every 5 ms while a case runs: each file's
    reports by headroom.seq (decoded here), node.orca's replacements
    (seq, timestamp_ms, when seen) and headroomd's RSS every 50 ms."""

    def __init__(self, agent, scopes=("node",)):
        super().__init__(daemon=True)
        self.agent = agent
        self.paths = {scope: agent.file(scope) for scope in scopes}
        self.lock = threading.Lock()
        self.reports = {scope: {} for scope in scopes}  # scope -> seq -> report
        self.conflicts = []
        self.node_samples = []  # (seq, timestamp_ms, monotonic)
        self.rss = []
        self.errors = []
        self._last = {}
        self._stop_event = threading.Event()

    def run(self):
        next_rss = 0.0
        while not self._stop_event.is_set():
            for scope, path in self.paths.items():
                self._poll(scope, path)
            now = time.monotonic()
            if now >= next_rss:
                next_rss = now + 0.05
                try:
                    kib = rss_kib(self.agent.proc.pid)
                    if kib is not None:
                        with self.lock:
                            self.rss.append(kib)
                except OSError:
                    pass
            self._stop_event.wait(0.005)

    def _poll(self, scope, path):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._last.get(scope) == key:
            return
        self._last[scope] = key
        try:
            with open(path, "rb") as f:
                report = orca_oob.decode_report(f.read())
        except (OSError, ValueError) as e:
            with self.lock:
                self.errors.append(f"{scope}: {e}")
            return
        seq, ts, _ = orca_oob.metadata(report)
        if seq is None:
            return
        with self.lock:
            old = self.reports[scope].get(seq)
            if old is not None and old != report:
                self.conflicts.append((scope, seq))
            self.reports[scope][seq] = report
            if scope == "node" and (not self.node_samples or self.node_samples[-1][0] != seq):
                self.node_samples.append((seq, ts, time.monotonic()))

    def read_now(self):
        """One more look at every file (after the agent stopped)."""
        for scope, path in self.paths.items():
            self._last.pop(scope, None)
            self._poll(scope, path)

    def stop(self):
        self._stop_event.set()
        if self.is_alive():
            self.join(10)

    def snapshot(self, scope):
        with self.lock:
            return dict(self.reports[scope])

    def by_timestamp(self, scope):
        return {orca_oob.metadata(r)[1]: r for r in self.snapshot(scope).values()}

    def check(self, case, label, since=None):
        """node.orca replaced on time (its headroom.timestamp_ms advancing about
        every interval) and RSS bounded; reports both. `since`: a monotonic
        time before which samples are not judged."""
        self.stop()
        with self.lock:
            samples = [s for s in self.node_samples if since is None or s[2] >= since]
            rss = list(self.rss)
            conflicts, errors = list(self.conflicts), list(self.errors)
        limit_ms = 5 * INTERVAL_MS
        case.assertGreater(len(samples), 10, f"{label}: node.orca was replaced only {len(samples)} times")
        seen_gaps = [(b[2] - a[2]) * 1000 for a, b in zip(samples, samples[1:])]
        steps = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(samples, samples[1:]) if b[0] > a[0]]
        ts_gaps = [b[1] - a[1] for a, b in zip(samples, samples[1:])]
        max_rss = max(rss) if rss else None
        figure(f"{label}: node.orca seen replaced {len(samples)} times, max gap between sightings "
               f"{max(seen_gaps):.0f} ms (limit {limit_ms}), headroom.timestamp_ms per seq p50 {p50(steps):.0f} ms, "
               f"max step {max(ts_gaps)} ms; headroomd max RSS {(max_rss or 0) / 1024:.1f} MiB")
        case.assertEqual(conflicts, [], f"{label}: two different reports with one seq")
        case.assertEqual(errors, [], f"{label}: report files that did not decode")
        case.assertLessEqual(max(seen_gaps), limit_ms, f"{label}: node.orca not replaced for {max(seen_gaps):.0f} ms")
        seqs = [s[0] for s in samples]
        case.assertTrue(all(b > a for a, b in zip(seqs, seqs[1:])), f"{label}: headroom.seq did not rise: {seqs}")
        case.assertTrue(all(g >= 0 for g in ts_gaps), f"{label}: headroom.timestamp_ms went back")
        case.assertLessEqual(max(ts_gaps), limit_ms, f"{label}: headroom.timestamp_ms jumped {max(ts_gaps)} ms")
        case.assertTrue(0.8 * INTERVAL_MS <= p50(steps) <= 1.25 * INTERVAL_MS, f"{label}: steps {steps}")
        if max_rss is not None:
            if SANITIZED:
                note(f"NOTE: {label}: sanitizer build, RSS {max_rss / 1024:.1f} MiB not held to {RSS_LIMIT_MIB} MiB")
            else:
                case.assertLess(max_rss, RSS_LIMIT_MIB * 1024, f"{label}: headroomd's RSS reached {max_rss} KiB")
        return max_rss


# ---------------------------------------------------------------------------
# Clients

class Collector(threading.Thread):
    """One orca_oob stream read to its end on a thread: the messages, when
    each came, the final status. `seconds` is the call's deadline (a stream
    still open then ends with DEADLINE_EXCEEDED)."""

    def __init__(self, case, label, address, seconds=None, **kwargs):
        super().__init__(daemon=True)
        self.label, self.address = label, address
        self.stream = orca_oob.stream(address, timeout=seconds, **kwargs)
        self.messages = []  # (monotonic, report, raw)
        self.error = None
        case.addCleanup(self.close)
        self.start()

    def run(self):
        try:
            for m in self.stream:
                self.messages.append(m)
        except Exception as e:  # not an RPC status: a bug here
            self.error = repr(e)

    def close(self):
        self.stream.close()
        self.join(10)

    def finished(self, timeout):
        self.join(timeout)
        return not self.is_alive()

    @property
    def code(self):
        return self.stream.code

    @property
    def reports(self):
        return [m[1] for m in self.messages]

    def first_latency(self):
        return self.messages[0][0] - self.stream.started if self.messages else None

    def summary(self):
        return (f"{self.label}: {len(self.messages)} message(s), status {code_name(self.code)}"
                + (f" ({self.stream.details})" if self.stream.details else ""))


class RawH2:
    """A bare HTTP/2 client for what a polite client never does: no HPACK
    dynamic table, no Huffman, literal headers only; it can stop reading."""

    PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8

    def __init__(self, address, rcvbuf=None, timeout=5.0):
        if address.startswith("unix:"):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target = address[5:]
        elif address.startswith("["):
            host, port = address[1:].split("]:")
            self.sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            target = (host, int(port))
        else:
            host, port = address.rsplit(":", 1)
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            target = (host, int(port))
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(target)
        self.next_id = 1
        self.buf = b""
        self.server_settings = {}

    @staticmethod
    def frame(ftype, flags, sid, payload=b""):
        return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload

    @staticmethod
    def hpack_int(n, prefix_bits=7, first=0):
        top = (1 << prefix_bits) - 1
        if n < top:
            return bytes([first | n])
        out = [first | top]
        n -= top
        while n >= 128:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out)

    @classmethod
    def literal(cls, name, value):
        name, value = name.encode(), value.encode()
        return b"\x00" + cls.hpack_int(len(name)) + name + cls.hpack_int(len(value)) + value

    def send(self, data):
        self.sock.sendall(data)

    def handshake(self, window=2**31 - 1):
        """Preface, SETTINGS (no push, the largest stream window), a
        connection window as large; waits for the server's SETTINGS and acks."""
        settings = struct.pack(">HI", 2, 0) + struct.pack(">HI", 4, window)
        self.send(self.PREFACE + self.frame(self.SETTINGS, 0, 0, settings) +
                  self.frame(self.WINDOW_UPDATE, 0, 0, struct.pack(">I", window - 65535)))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            ftype, flags, sid, payload = self.read_frame()
            if ftype == self.SETTINGS and not flags & 1:
                for i in range(0, len(payload), 6):
                    k, v = struct.unpack(">HI", payload[i:i + 6])
                    self.server_settings[k] = v
                self.send(self.frame(self.SETTINGS, 1, 0))
                return self.server_settings
        raise AssertionError("no SETTINGS from the server")

    def open(self, authority, request=b"", path=orca_oob.METHOD, end_stream=True):
        sid = self.next_id
        self.next_id += 2
        block = b"".join(self.literal(k, v) for k, v in (
            (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", authority),
            ("content-type", "application/grpc"), ("te", "trailers")))
        message = b"\x00" + struct.pack(">I", len(request)) + request
        self.send(self.frame(self.HEADERS, 0x4, sid, block) + self.frame(self.DATA, 0x1 if end_stream else 0, sid,
                                                                         message))
        return sid

    def read_frame(self):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the server")
            self.buf += chunk
        n = int.from_bytes(self.buf[:3], "big")
        ftype, flags = self.buf[3], self.buf[4]
        sid = struct.unpack(">I", self.buf[5:9])[0] & 0x7FFFFFFF
        payload, self.buf = self.buf[9:9 + n], self.buf[9 + n:]
        return ftype, flags, sid, payload

    def read_messages(self, sid, count, timeout=5.0):
        """The first `count` gRPC messages of stream sid, decoded."""
        data, out = b"", []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"stream {sid}: {len(out)} of {count} messages in {timeout} s")
            ftype, flags, fsid, payload = self.read_frame()
            if ftype == self.PING and not flags & 1:
                self.send(self.frame(self.PING, 1, 0, payload))
            if ftype == self.GOAWAY:
                raise AssertionError(f"GOAWAY {payload[:8].hex()} {payload[8:]!r}")
            if ftype == self.RST_STREAM and fsid == sid:
                raise AssertionError(f"stream {sid} reset: {payload.hex()}")
            if ftype != self.DATA or fsid != sid:
                continue
            if flags & 0x8:  # padded
                payload = payload[1:len(payload) - payload[0]]
            data += payload
            while len(data) >= 5 and len(data) >= 5 + struct.unpack(">I", data[1:5])[0]:
                n = struct.unpack(">I", data[1:5])[0]
                out.append(orca_oob.decode_report(data[5:5 + n]))
                data = data[5 + n:]
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def ctl_oob(address, *args, timeout=20):
    """headroomctl oob ADDRESS ARGS --json: (exit code, [(received_unix_ms, report)], stderr)."""
    r = subprocess.run([HEADROOMCTL, "oob", address, *args, "--json"], capture_output=True, timeout=timeout)
    return (r.returncode,) + parse_ctl_lines(r.stdout.decode("utf-8", "replace")) + (r.stderr.decode("utf-8", "replace"),)


def parse_ctl_lines(text):
    out, bad = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            j = json.loads(line)
            out.append((int(j["received_unix_ms"]), orca_oob.report_from_json(j["report"])))
        except (ValueError, KeyError, TypeError) as e:
            bad.append(f"{line[:200]!r}: {e!r}")
    return out, bad


# ---------------------------------------------------------------------------

class OobTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.started = time.monotonic()
        self.tmp = harness.make_temp_dir(self, "headroom-oob-")

    def tearDown(self):
        note(f"    [{self.id().rsplit('.', 1)[-1]}: {time.monotonic() - self.started:.1f} s]")

    # -- shared checks ------------------------------------------------------

    def assertSameReport(self, got, want, label):
        if got != want:
            self.fail(f"{label}; got vs want: {report_diff(got, want)}")

    def check_against_files(self, label, reports, monitor, scope, min_share=0.8):
        """Every report that a file also carried (same headroom.seq) is that
        file's report, field for field; most of them were seen in the file."""
        files = monitor.snapshot(scope)
        matched, missing = 0, []
        for i, r in enumerate(reports):
            seq, _, _ = orca_oob.metadata(r)
            self.assertIsNotNone(seq, f"{label}: message {i} has no headroom.seq: {r}")
            if seq not in files:
                missing.append(seq)
                continue
            if r != files[seq]:
                others = [s for s, rs in monitor.reports.items() if s != scope and rs.get(seq) == r]
                self.fail(f"{label}: message {i} (seq {seq}) is not {scope}.orca's report of that seq"
                          + (f" (it is {others[0]}.orca's)" if others else "") +
                          f"; stream vs file: {report_diff(r, files[seq])}\nstream: {r}\nfile:   {files[seq]}")
            matched += 1
        self.assertGreaterEqual(matched, max(1, int(min_share * len(reports))),
                                f"{label}: only {matched} of {len(reports)} messages' seqs seen in {scope}.orca "
                                f"(not seen: {missing[:10]})")
        return matched

    def check_cadence(self, label, reports, effective_ms, times=None, first_latency=None, tolerance=(0.75, 1.35),
                      early_ms=INTERVAL_MS / 4):
        """Seqs and timestamps rise; the timestamps' gaps (and the arrival
        gaps) are about the effective interval, none shorter than it by more
        than early_ms (the ticks' jitter: a quarter of a tick); the first
        came at once."""
        meta = [orca_oob.metadata(r) for r in reports]
        seqs = [m[0] for m in meta]
        stamps = [m[1] for m in meta]
        self.assertTrue(all(b > a for a, b in zip(seqs, seqs[1:])), f"{label}: headroom.seq not rising: {seqs}")
        self.assertTrue(all(b > a for a, b in zip(stamps, stamps[1:])),
                        f"{label}: headroom.timestamp_ms not rising: {stamps}")
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        arrivals = [(b - a) * 1000 for a, b in zip(times, times[1:])] if times else []
        figure(f"{label}: {len(reports)} messages, timestamp gaps p50 {fmt(p50(gaps))} ms (min {fmt(min(gaps, default=None))}, "
               f"max {fmt(max(gaps, default=None))}), arrival gaps p50 {fmt(p50(arrivals))} ms, first message after "
               f"{fmt(first_latency * 1000 if first_latency is not None else None)} ms; expected {effective_ms} ms")
        if first_latency is not None:
            self.assertLess(first_latency, FIRST_MESSAGE_LIMIT_S, f"{label}: the first message took {first_latency:.3f} s")
        if len(gaps) >= 2:
            lo, hi = tolerance
            self.assertTrue(lo * effective_ms <= p50(gaps) <= hi * effective_ms,
                            f"{label}: timestamp gaps p50 {p50(gaps)} ms for an interval of {effective_ms} ms: {gaps}")
            self.assertGreaterEqual(min(gaps), effective_ms - early_ms,
                                    f"{label}: a message came before its interval ({effective_ms} ms) was over: "
                                    f"timestamp gaps {gaps}")
        if len(arrivals) >= 2:
            lo, hi = tolerance
            self.assertTrue(lo * effective_ms <= p50(arrivals) <= hi * effective_ms,
                            f"{label}: arrival gaps p50 {p50(arrivals):.0f} ms for {effective_ms} ms: {arrivals}")

    def check_stream(self, c, monitor, scope, effective_ms, seconds, end=("DEADLINE_EXCEEDED",), min_count=None):
        """A Collector that ran for `seconds`: still open at its deadline, the
        messages decoded, about seconds/interval of them, on cadence, each
        its file's report of the tick."""
        with self.subTest(c.label):
            self.assertIsNone(c.error, c.label)
            self.assertEqual(c.stream.decode_errors, [], c.label)
            self.assertIn(code_name(c.code), end, c.summary())
            self.check_cadence(c.label, c.reports, effective_ms, [m[0] for m in c.messages], c.first_latency())
            expected = seconds * 1000 / effective_ms
            want = min_count if min_count is not None else max(1, int(0.6 * expected))
            self.assertGreaterEqual(len(c.messages), want, f"{c.summary()}; about {expected:.0f} expected")
            self.assertLessEqual(len(c.messages), expected + 2, f"{c.summary()}; about {expected:.0f} expected")
            self.check_against_files(c.label, c.reports, monitor, scope)

    def endpoints(self, p1, p2=None):
        eps = [dict(name="web1", port=p1, target="10ms", max="500ms")]
        if p2 is not None:
            eps.append(dict(name="web2", port=p2, target="30ms", max="600ms"))
        return eps

    # 0 ---------------------------------------------------------------------
    def test_0_codec_against_protoc(self):
        n = orca_oob.self_test(SOURCE_DIR, note)
        figure(f"case 0: orca_oob.py's codec: {n} checks against protoc passed")

    # 1 ---------------------------------------------------------------------
    def test_1_authority_picks_the_report(self):
        s1 = TestServer(self, self.tmp, "1ms", "hr-test-server-1")
        s2 = TestServer(self, self.tmp, "1ms", "hr-test-server-2")
        agent = Agent(self, self.tmp, endpoints=self.endpoints(s1.port, s2.port), default_interval="200ms")
        load = harness.start_load(self, self.tmp, s1.port, rate=200, duration="120s",
                                   name=f"hr-test-load-{s1.port}")
        agent.wait_ready(scopes=("endpoint.web1", "endpoint.web2"))

        def measured():
            if not load.alive():
                raise Fatal("hr-test-load exited: " + load.err())
            agent.check_alive()
            return orca_oob.read_report_file(agent.file("endpoint.web1"))["rps_fractional"] > 50
        wait_until(measured, 15, "endpoint.web1.orca's rps_fractional above 50 (the eBPF probe measuring)")
        monitor = FileMonitor(agent, ("node", "endpoint.web1", "endpoint.web2"))
        monitor.start()
        self.addCleanup(monitor.stop)
        time.sleep(0.3)

        unknown_port = free_port()
        seconds = 3.5
        P1, P2 = s1.port, s2.port
        plan = [  # label, address, authority, interval, scope, effective ms, extra
            ("A tcp authority=127.0.0.1:P1 interval=300ms", agent.tcp, f"127.0.0.1:{P1}", 0.3, "endpoint.web1", 300, {}),
            ("B tcp authority=127.0.0.1:P2 interval=10ms", agent.tcp, f"127.0.0.1:{P2}", 0.01, "endpoint.web2", 100, {}),
            ("C tcp authority=127.0.0.1:<unknown port> no interval", agent.tcp, f"127.0.0.1:{unknown_port}", None,
             "node", 200, {}),
            ("D tcp authority=localhost (no port) interval=0", agent.tcp, "localhost", 0, "node", 200, {}),
            ("E tcp authority=localhost:P1 interval=100ms", agent.tcp, f"localhost:{P1}", 0.1, "endpoint.web1", 100, {}),
            ("F tcp authority=[::1]:P2 interval=250ms", agent.tcp, f"[::1]:{P2}", 0.25, "endpoint.web2", 250, {}),
            ("G tcp no authority (the listener's) interval=50ms", agent.tcp, None, 0.05, "node", 100, {}),
            ("H unix no authority interval=100ms", agent.unix, None, 0.1, "node", 100, {}),
            ("I unix authority=127.0.0.1:P2 interval=100ms", agent.unix, f"127.0.0.1:{P2}", 0.1, "endpoint.web2", 100,
             {}),
            ("J tcp authority=127.0.0.1:P1 10000 request_cost_names", agent.tcp, f"127.0.0.1:{P1}", 0.1,
             "endpoint.web1", 100, {"cost_names": [f"cost-{i:05d}" for i in range(10000)]}),
            ("K tcp authority=127.0.0.1:P1 interval=0.3s as seconds 0 nanos 300000000", agent.tcp, f"127.0.0.1:{P1}",
             0, "endpoint.web1", 300, {"nanos": 300_000_000}),
        ]
        if agent.ipv6:
            plan += [
                ("L ipv6 no authority interval=100ms", agent.ipv6, None, 0.1, "node", 100, {}),
                ("M ipv6 authority=127.0.0.1:P1 interval=100ms", agent.ipv6, f"127.0.0.1:{P1}", 0.1, "endpoint.web1",
                 100, {}),
            ]
        else:
            note("*** SKIPPED: case 1's IPv6 streams: no IPv6 loopback (::1 on lo) on this machine ***")
        collectors = [(Collector(self, label, address, seconds, authority=authority, interval=interval, **extra),
                       scope, eff) for label, address, authority, interval, scope, eff, extra in plan]

        # headroomctl oob meanwhile, on each listener.
        ctl_plan = [("headroomctl tcp --authority 127.0.0.1:P1 --interval 100ms --count 10", agent.tcp,
                     ["--authority", f"127.0.0.1:{P1}", "--interval", "100ms", "--count", "10"], "endpoint.web1", 100, 10),
                    ("headroomctl unix (default interval 200ms) --count 5", agent.unix, ["--count", "5"], "node", 200, 5)]
        if agent.ipv6:
            ctl_plan.append(("headroomctl ipv6 --authority 127.0.0.1:P2 --interval 300ms --count 4", agent.ipv6,
                             ["--authority", f"127.0.0.1:{P2}", "--interval", "300ms", "--count", "4"],
                             "endpoint.web2", 300, 4))
        ctl_results = {}

        def run_ctl(label, address, args):
            try:
                ctl_results[label] = ctl_oob(address, *args)
            except Exception as e:
                ctl_results[label] = e
        ctl_threads = [threading.Thread(target=run_ctl, args=(label, address, args), daemon=True)
                       for label, address, args, _, _, _ in ctl_plan]
        for t in ctl_threads:
            t.start()
        for c, _, _ in collectors:
            c.finished(seconds + 10)
        for t in ctl_threads:
            t.join(30)
        agent.check_alive()
        monitor.stop()

        for c, scope, eff in collectors:
            note("    " + c.summary())
            self.check_stream(c, monitor, scope, eff, seconds)

        with self.subTest("endpoint reports: rps_fractional, eps, application_utilization, the node's cpu"):
            a = collectors[0][0].reports
            b = collectors[1][0].reports
            self.assertTrue(a and b, "no endpoint messages")
            rps = [r["rps_fractional"] for r in a]
            figure(f"case 1: endpoint web1 (load 200/s) rps_fractional in its stream {min(rps):.1f}..{max(rps):.1f}; "
                   f"web2 (no load) {min(r['rps_fractional'] for r in b):.1f}; web1 eps max {max(r['eps'] for r in a)}, "
                   f"application_utilization max {max(r['application_utilization'] for r in a):.3f}")
            self.assertTrue(all(x > 0 for x in rps), f"web1's rps_fractional while the load runs: {rps}")
            self.assertTrue(all(r["rps_fractional"] == 0 for r in b), "web2 has no load")
            for r in a + b:
                for k in ("eps", "application_utilization", "cpu_utilization"):
                    self.assertTrue(r[k] >= 0 and r[k] == r[k] and r[k] != float("inf"), f"{k} = {r[k]}")
                # docs/oob.md: the endpoint's composite is the largest of its signals and the node's CPU.
                self.assertGreaterEqual(r["application_utilization"], r["cpu_utilization"],
                                        f"application_utilization below cpu_utilization: {r}")
            node = monitor.by_timestamp("node")
            pairs = [(r["cpu_utilization"], node[orca_oob.metadata(r)[1]]["cpu_utilization"])
                     for r in a + b if orca_oob.metadata(r)[1] in node]
            self.assertGreater(len(pairs), 5, "endpoint messages with a node report of the same tick")
            self.assertEqual([p[0] for p in pairs], [p[1] for p in pairs],
                             "an endpoint report's cpu_utilization is the node's of the same tick "
                             "(endpoint, node) per message")
            self.assertTrue(any(p[1] > 0 for p in pairs), "the node's cpu_utilization was 0 throughout")

        with self.subTest("the three scopes' reports differ (the comparison tells them apart)"):
            nodes, w1, w2 = (monitor.snapshot(s) for s in ("node", "endpoint.web1", "endpoint.web2"))
            common = set(nodes) & set(w1) & set(w2)
            self.assertTrue(common)
            self.assertTrue(all(nodes[s] != w1[s] and w1[s] != w2[s] and nodes[s] != w2[s] for s in common))

        for (label, address, args, scope, eff, count) in ctl_plan:
            with self.subTest(label):
                result = ctl_results.get(label)
                self.assertFalse(isinstance(result, Exception) or result is None, f"{label}: {result!r}")
                code, messages, bad, err = result
                self.assertEqual(code, 0, f"{label}: exit {code}; stderr: {err}")
                self.assertEqual(bad, [], f"{label}: lines that are not {{received_unix_ms, report}}")
                self.assertEqual(len(messages), count, f"{label}: {len(messages)} lines; stderr: {err}")
                reports = [m[1] for m in messages]
                received = [m[0] for m in messages]
                self.check_cadence(label, reports, eff)
                recv_gaps = [b - a for a, b in zip(received, received[1:])]
                ages = [rcv - orca_oob.metadata(r)[1] for rcv, r in messages]
                figure(f"{label}: received_unix_ms gaps p50 {fmt(p50(recv_gaps))} ms; received - timestamp "
                       f"{min(ages)}..{max(ages)} ms")
                self.assertTrue(all(-20 <= a <= 3 * INTERVAL_MS + 500 for a in ages),
                                f"{label}: received_unix_ms - headroom.timestamp_ms: {ages}")
                if len(recv_gaps) >= 2:
                    self.assertTrue(0.6 * eff <= p50(recv_gaps) <= 1.5 * eff, f"{label}: received gaps {recv_gaps}")
                self.check_against_files(label, reports, monitor, scope)

        monitor.check(self, f"case 1 ({len(collectors)} streams and {len(ctl_plan)} headroomctl oob at once)")

    # 2 ---------------------------------------------------------------------
    def test_2_report_interval_edges(self):
        agent = Agent(self, self.tmp, ipv6=False)
        agent.wait_ready()
        monitor = FileMonitor(agent)
        monitor.start()
        self.addCleanup(monitor.stop)
        tcp = agent.tcp
        I64, I32 = orca_oob.INT64_MAX, orca_oob.INT32_MAX
        invalid = [("seconds -1", -1, 0), ("nanos -1", 0, -1), ("nanos 1000000000", 0, 1_000_000_000),
                   ("seconds 1 nanos -1", 1, -1), ("seconds -1 nanos -5", -1, -5),
                   (f"seconds {orca_oob.INT64_MIN}", orca_oob.INT64_MIN, 0), (f"nanos {I32}", 0, I32),
                   ("seconds 5 nanos 1000000000", 5, 1_000_000_000)]
        long_ones = [("seconds 3600 (1 h)", 3600, 0), ("seconds 3600 nanos 1", 3600, 1), ("seconds 7200", 7200, 0),
                     ("seconds 315576000000 nanos 999999999 (Duration's largest)", 315_576_000_000, 999_999_999)]
        beyond = [(f"seconds {I64} nanos 999999999 (beyond Duration's range)", I64, 999_999_999)]
        hold = 2.5
        c_invalid = [Collector(self, "invalid " + label, tcp, 5, interval=s, nanos=n) for label, s, n in invalid]
        c_long = [Collector(self, "long " + label, tcp, hold, interval=s, nanos=n) for label, s, n in long_ones]
        c_beyond = [Collector(self, "long " + label, tcp, hold, interval=s, nanos=n) for label, s, n in beyond]
        c_names = Collector(self, "10000 request_cost_names, interval 100ms", tcp, hold, interval=0.1,
                            cost_names=[f"cost-{i:05d}" for i in range(10000)])
        c_unknown = Collector(self, "a request with unknown fields, interval 100ms", tcp, hold,
                              request=orca_oob.encode_request(0.1) + orca_oob.tag(9, orca_oob.WT_VARINT) + b"\x01" +
                              orca_oob.len_field(1, orca_oob.tag(7, orca_oob.WT_FIXED32) + b"\0\0\0\0"))
        c_garbage = Collector(self, "a request that is not a message (0xff 0xff)", tcp, 5, request=b"\xff\xff")

        with self.subTest("negative or out-of-range nanos: INVALID_ARGUMENT, no message"):
            for c in c_invalid:
                self.assertTrue(c.finished(6), c.label)
                took = c.stream.ended_at - c.stream.started
                note(f"    {c.summary()} after {took * 1000:.0f} ms")
                self.assertEqual(code_name(c.code), "INVALID_ARGUMENT", c.summary())
                self.assertEqual(len(c.messages), 0, c.summary())
                self.assertLess(took, 1.0, f"{c.label}: refused after {took:.2f} s")
            figure("case 2: INVALID_ARGUMENT for " + "; ".join(f"{c.label[8:]} ({c.stream.details!r})"
                                                                for c in c_invalid[:2]) + f"; and {len(c_invalid) - 2} more")

        with self.subTest("above 1 h: served as 1 h (the first message at once, the stream stays open)"):
            for c in c_long:
                self.assertTrue(c.finished(hold + 5), c.label)
                note(f"    {c.summary()}, first after {fmt((c.first_latency() or 0) * 1000)} ms")
                self.assertEqual(code_name(c.code), "DEADLINE_EXCEEDED", c.summary())
                self.assertEqual(len(c.messages), 1, c.summary())
                self.assertLess(c.first_latency(), FIRST_MESSAGE_LIMIT_S, c.label)
            for c in c_beyond:  # the literal rule says 1 h; refusing it as out of Duration's range is fair too
                self.assertTrue(c.finished(hold + 5), c.label)
                figure(f"case 2: {c.summary()}")
                if code_name(c.code) != "INVALID_ARGUMENT":
                    self.assertEqual(code_name(c.code), "DEADLINE_EXCEEDED", c.summary())
                    self.assertEqual(len(c.messages), 1, c.summary())

        with self.subTest("10 000 request_cost_names: accepted, ignored"):
            self.assertTrue(c_names.finished(hold + 5))
            self.check_stream(c_names, monitor, "node", 100, hold)
            self.assertTrue(all(r["request_cost"] == {} for r in c_names.reports))
            figure(f"case 2: 10 000 request_cost_names ({len(c_names.stream.request)} bytes): {c_names.summary()}, "
                   f"first after {fmt((c_names.first_latency() or 0) * 1000)} ms")

        with self.subTest("unknown request fields are skipped, as protobuf does"):
            self.assertTrue(c_unknown.finished(hold + 5))
            self.check_stream(c_unknown, monitor, "node", 100, hold)

        with self.subTest("a request that does not parse: refused, no message"):
            self.assertTrue(c_garbage.finished(6))
            figure(f"case 2: {c_garbage.summary()}")
            self.assertIn(code_name(c_garbage.code), ("INVALID_ARGUMENT", "INTERNAL"), c_garbage.summary())
            self.assertEqual(c_garbage.messages, [])

        with self.subTest("another method of the service, another service: UNIMPLEMENTED"):
            for method in ("/xds.service.orca.v3.OpenRcaService/Nothing", "/grpc.health.v1.Health/Watch_not_here"):
                ch = orca_oob.channel(tcp)
                try:
                    call = ch.unary_stream(method, request_serializer=None, response_deserializer=None)
                    it = call(b"", timeout=5)
                    try:
                        got = list(it)
                        code = it.code()
                    except grpc.RpcError as e:
                        got, code = [], e.code()
                finally:
                    ch.close()
                self.assertEqual(code_name(code), "UNIMPLEMENTED", f"{method}: {len(got)} messages")

        agent.check_alive()
        monitor.check(self, "case 2 (interval edges)")

    # 3 ---------------------------------------------------------------------
    def test_3_unknown_authority_error_and_first_endpoint_of_a_port(self):
        port = free_port()
        # Two endpoints on one port: the one with a path comes first in the
        # file, so an authority with this port gets its report. Their targets
        # differ, so their reports do (headroom.slo.target_ms).
        endpoints = [dict(name="api", port=port, path="/api", target="20ms", max="500ms"),
                     dict(name="all", port=port, target="10ms", max="500ms")]
        agent = Agent(self, self.tmp, endpoints=endpoints, unknown_authority="error", ipv6=False)
        agent.wait_ready(scopes=("endpoint.api", "endpoint.all"), authority=f"127.0.0.1:{port}")
        monitor = FileMonitor(agent, ("node", "endpoint.api", "endpoint.all"))
        monitor.start()
        self.addCleanup(monitor.stop)
        seconds = 2.0
        ok = [Collector(self, f"tcp authority=127.0.0.1:{port} (api, first of the port)", agent.tcp, seconds,
                        authority=f"127.0.0.1:{port}", interval=0.1),
              Collector(self, f"unix authority=localhost:{port}", agent.unix, seconds, authority=f"localhost:{port}",
                        interval=0.1)]
        refused = [Collector(self, "tcp authority=127.0.0.1:<unknown port>", agent.tcp, 5,
                             authority=f"127.0.0.1:{free_port()}", interval=0.1),
                   Collector(self, "tcp authority=localhost (no port)", agent.tcp, 5, authority="localhost"),
                   Collector(self, "tcp no authority (the listener's port)", agent.tcp, 5),
                   Collector(self, "unix no authority", agent.unix, 5),
                   Collector(self, "tcp authority=127.0.0.1:0", agent.tcp, 5, authority="127.0.0.1:0"),
                   Collector(self, "tcp authority=127.0.0.1:65536", agent.tcp, 5, authority="127.0.0.1:65536")]
        for c in refused:
            with self.subTest(c.label):
                self.assertTrue(c.finished(6), c.label)
                took = c.stream.ended_at - c.stream.started
                note(f"    {c.summary()} after {took * 1000:.0f} ms")
                self.assertEqual(code_name(c.code), "NOT_FOUND", c.summary())
                self.assertEqual(c.messages, [], c.summary())
                self.assertLess(took, 1.0, c.label)
        figure(f"case 3: unknown_authority = \"error\": {refused[0].summary()}")
        for c in ok:
            c.finished(seconds + 5)
            self.check_stream(c, monitor, "endpoint.api", 100, seconds)
        code, messages, bad, err = ctl_oob(agent.tcp, "--authority", f"127.0.0.1:{free_port()}", "--count", "1",
                                           timeout=10)
        figure(f"case 3: headroomctl oob with an unknown authority: exit {code}, stderr {err.strip()[:200]!r}")
        with self.subTest("headroomctl oob refused"):
            self.assertNotEqual(code, 0)
            self.assertEqual(messages, [])
            self.assertIn("NOT_FOUND", err.upper().replace(" ", "_"))
        agent.check_alive()
        monitor.check(self, "case 3 (unknown_authority = \"error\")")

    # 4 ---------------------------------------------------------------------
    def test_4_max_streams(self):
        agent = Agent(self, self.tmp, max_streams=4, ipv6=False)  # default_interval: the default, 1 s
        agent.wait_ready()
        monitor = FileMonitor(agent)
        monitor.start()
        self.addCleanup(monitor.stop)
        long = 8.0

        def open_four():
            return [Collector(self, "stream 1 (tcp, no interval: 1 s)", agent.tcp, long),
                    Collector(self, "stream 2 (unix, no interval: 1 s)", agent.unix, long),
                    Collector(self, "stream 3 (tcp, 100ms)", agent.tcp, long, interval=0.1),
                    Collector(self, "stream 4 (unix, 100ms)", agent.unix, long, interval=0.1)]
        # The streams wait_ready opened (one report each, then cancelled)
        # leave max_streams when the server has handled their cancellation,
        # which can come after the four open (seen under the sanitizers): one
        # of the four is then refused. Opened again until all four are
        # served, for a bounded time: a place that never came back fails here.
        deadline = time.monotonic() + 6
        while True:
            four = open_four()
            served = lambda: all(c.messages for c in four)  # noqa: E731
            wait_until(lambda: served() or any(c.code is not None for c in four), 3,
                       "a first message on each of the 4 streams, or one of them ended")
            if served():
                break
            summaries = "; ".join(c.summary() for c in four)
            for c in four:
                c.close()
            if time.monotonic() > deadline:
                self.fail(f"4 streams under max_streams 4 were not all served: {summaries}")
            note(f"NOTE: case 4: not all 4 served yet ({summaries}); opening them again")
            time.sleep(0.2)
        time.sleep(0.3)
        counts = [len(c.messages) for c in four]
        over = [Collector(self, "stream 5 (tcp)", agent.tcp, 5, interval=0.1),
                Collector(self, "stream 6 (unix)", agent.unix, 5, interval=0.1)]
        for c in over:
            with self.subTest(c.label):
                self.assertTrue(c.finished(6), c.label)
                took = c.stream.ended_at - c.stream.started
                figure(f"case 4: max_streams 4: {c.summary()} after {took * 1000:.0f} ms")
                self.assertEqual(code_name(c.code), "RESOURCE_EXHAUSTED", c.summary())
                self.assertEqual(c.messages, [])
                self.assertLess(took, 1.0)
        code, messages, bad, err = ctl_oob(agent.tcp, "--count", "1", timeout=10)
        with self.subTest("headroomctl oob refused too"):
            figure(f"case 4: headroomctl oob beyond max_streams: exit {code}, stderr {err.strip()[:200]!r}")
            self.assertNotEqual(code, 0)
            self.assertEqual(messages, [])
        time.sleep(1.6)
        with self.subTest("the 4 keep streaming"):
            for c, before in zip(four, counts):
                self.assertIsNone(c.code, c.summary())
                self.assertGreater(len(c.messages), before, f"{c.label}: no message after the refusals")
        four[2].close()
        replacement = {}

        def room():
            c = Collector(self, "stream 3' (after stream 3 closed)", agent.tcp, 2, interval=0.1, count=2)
            c.finished(5)
            replacement["c"] = c
            return len(c.messages) == 2
        with self.subTest("a closed stream makes room"):
            wait_until(room, 3, "a stream to open after one of the 4 closed", poll=0.1)
        for c in four[:2]:
            c.finished(long + 5)
            self.check_stream(c, monitor, "node", 1000, long, min_count=6)
        four[3].finished(long + 5)
        self.check_stream(four[3], monitor, "node", 100, long)
        agent.check_alive()
        monitor.check(self, "case 4 (max_streams)")

    # 5 ---------------------------------------------------------------------
    def test_5_bad_clients_keep_the_cadence(self):
        agent = Agent(self, self.tmp, ipv6=False)
        agent.wait_ready()
        monitor = FileMonitor(agent)
        monitor.start()
        self.addCleanup(monitor.stop)
        time.sleep(0.5)
        host, port = "127.0.0.1", agent.port
        witness = Collector(self, "witness stream (tcp, 100ms, read throughout)", agent.tcp, 60, interval=0.1)
        keep = []  # what stays connected until the end of the case
        self.addCleanup(lambda: [k.close() for k in keep])

        with self.subTest("a: garbage, HTTP/1.1, a broken HTTP/2 connection"):
            answers = []
            bad_h2 = (RawH2.PREFACE + RawH2.frame(RawH2.SETTINGS, 0, 0) +
                      RawH2.frame(RawH2.HEADERS, 0x4, 1, b"\xff" * 64) + random.randbytes(4096))
            for what, address, data in (
                    ("64 KiB of random bytes", agent.tcp, random.randbytes(64 * 1024)),
                    ("64 KiB of random bytes on the unix socket", agent.unix, random.randbytes(64 * 1024)),
                    ("an HTTP/1.1 GET", agent.tcp, f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()),
                    ("an HTTP/1.1 POST of the method", agent.tcp,
                     f"POST {orca_oob.METHOD} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/grpc\r\n"
                     f"Content-Length: 5\r\n\r\n\0\0\0\0\0".encode()),
                    ("the HTTP/2 preface, then bad HPACK and noise", agent.tcp, bad_h2)):
                raw = RawH2(address, timeout=3)
                try:
                    try:
                        raw.send(data)
                        sent = "sent"
                    except OSError as e:  # the server may close before taking it all
                        sent = f"send: {e.strerror}"
                    try:
                        first = raw.sock.recv(200)
                        first = repr(first[:60]) if first else "closed"
                    except OSError as e:
                        first = f"recv: {e.strerror or e!r}"
                finally:
                    raw.close()
                answers.append(f"{what}: {sent}, answer {first}")
            # Half a preface, then silence: kept open for the rest of the case.
            silent = RawH2(agent.tcp)
            silent.send(RawH2.PREFACE[:10])
            keep.append(silent)
            figure("case 5a: " + "; ".join(answers))
            with orca_oob.stream(agent.tcp, count=2, interval=0.1, timeout=5) as s:
                self.assertEqual(len(list(s)), 2, f"a stream after the garbage: {code_name(s.code)} {s.details}")

        with self.subTest("b: the raw HTTP/2 client streams (it is a real client)"):
            raw = RawH2(agent.tcp)
            settings = raw.handshake()
            sid = raw.open(agent.tcp, orca_oob.encode_request(0.1))
            got = raw.read_messages(sid, 3)
            raw.close()
            figure(f"case 5b: raw HTTP/2 client: server SETTINGS {settings}; 3 messages, seqs "
                   f"{[orca_oob.metadata(r)[0] for r in got]}")
            self.check_cadence("case 5b raw HTTP/2 stream", got, 100)

        with self.subTest("c: clients that open streams and never read"):
            conns, streams = 4, 50
            opened = 0
            limit = None
            for i in range(conns):
                raw = RawH2(agent.tcp if i % 2 == 0 else agent.unix, rcvbuf=4096)
                limit = raw.handshake().get(3)  # SETTINGS_MAX_CONCURRENT_STREAMS
                keep.append(raw)
                for _ in range(min(streams, limit) if limit else streams):
                    raw.open(agent.tcp, orca_oob.encode_request(0.01))
                    opened += 1
            lazy = []
            for i in range(50):
                s = orca_oob.stream(agent.tcp if i % 2 == 0 else agent.unix, interval=0.01)
                lazy.append(s)
                keep.append(s)
            started = time.monotonic()
            time.sleep(5.0)
            witness_during = [m for m in witness.messages if m[0] >= started]
            rss = rss_kib(agent.proc.pid)
            figure(f"case 5c: {opened} raw HTTP/2 streams on {conns} connections that never read (4 KiB receive "
                   f"buffers, windows 2^31-1; server's max concurrent streams {limit}) and 50 gRPC streams never "
                   f"read, for 5 s: headroomd RSS {rss / 1024:.1f} MiB; witness got {len(witness_during)} messages")
            agent.check_alive()
            self.assertIsNone(witness.code, witness.summary())
            self.check_cadence("case 5c witness stream while they do not read", [m[1] for m in witness_during], 100,
                               [m[0] for m in witness_during])
            self.assertGreaterEqual(len(witness_during), 40, "the witness stream starved")
            ended = [s for s in lazy if not s.running()]
            self.assertEqual(ended, [], f"{len(ended)} of the gRPC streams that do not read were ended")

        for k in keep:
            k.close()
        keep.clear()
        time.sleep(0.5)
        with self.subTest("d: after they left"):
            agent.check_alive()
            with orca_oob.stream(agent.tcp, count=3, interval=0.1, timeout=5) as s:
                got = [m[1] for m in s]
            self.assertEqual(len(got), 3, f"a stream after the bad clients left: {code_name(s.code)} {s.details}")
            self.assertIsNone(witness.code, witness.summary())
            witness.close()
            self.check_against_files("case 5 witness", witness.reports, monitor, "node")
        monitor.check(self, "case 5 (garbage, streams never read)")

    # 6 ---------------------------------------------------------------------
    def test_6_reload_keeps_the_streams(self):
        server = TestServer(self, self.tmp, "1ms")
        agent = Agent(self, self.tmp, endpoints=self.endpoints(server.port), default_interval="1s")
        agent.wait_ready(scopes=("endpoint.web1",))
        monitor = FileMonitor(agent, ("node", "endpoint.web1"))
        monitor.start()
        self.addCleanup(monitor.stop)
        streams = [Collector(self, "tcp node 100ms", agent.tcp, 30, interval=0.1),
                   Collector(self, "unix web1 100ms", agent.unix, 30, authority=f"127.0.0.1:{server.port}",
                             interval=0.1)]
        if agent.ipv6:
            streams.append(Collector(self, "ipv6 node 300ms", agent.ipv6, 30, interval=0.3))
        wait_until(lambda: all(len(c.messages) >= 3 for c in streams), 3, "3 messages on each stream")

        def reload(what, log_line, **overrides):
            before = [len(c.messages) for c in streams]
            lines = agent.proc.err().count(log_line)
            agent.write_config(**overrides)
            agent.proc.signal(signal.SIGHUP)
            wait_until(lambda: agent.check_alive() or agent.proc.err().count(log_line) > lines, 5,
                       f"{log_line!r} in headroomd's log")
            reloaded = time.monotonic()
            time.sleep(1.2)
            for c, n in zip(streams, before):
                self.assertIsNone(c.code, f"{what}: {c.summary()}")
                after = [m for m in c.messages if m[0] >= reloaded]
                self.assertGreaterEqual(len(after), 2, f"{what}: {c.label}: {len(after)} messages in 1.2 s after it")
            figure(f"case 6: {what}: " + ", ".join(f"{c.label} {n} -> {len(c.messages)}"
                                                   for c, n in zip(streams, before)))

        with self.subTest("a valid reload, the same listen (default_interval changed)"):
            reload("valid reload", "configuration reloaded", default_interval="2s")
            with orca_oob.stream(agent.tcp, count=1, timeout=5) as s:
                self.assertEqual(len(list(s)), 1, "a new stream after the reload")
        with self.subTest("a rejected reload"):
            reload("rejected reload", "reload rejected", default_interval="2s", interval="1ns")
        for c in streams:
            c.close()
        for c, scope, eff in zip(streams, ("node", "endpoint.web1", "node"), (100, 100, 300)):
            with self.subTest(c.label):
                self.assertEqual(c.stream.decode_errors, [])
                # A reload restarts the agent's tick (one shorter and one longer
                # tick in node.orca too), so one early message is allowed here.
                self.check_cadence(c.label + " across two reloads", c.reports, eff, [m[0] for m in c.messages],
                                   c.first_latency(), early_ms=INTERVAL_MS * 0.6)
                self.check_against_files(c.label, c.reports, monitor, scope)
        agent.check_alive()
        monitor.check(self, "case 6 (SIGHUP)")

    def test_6b_reload_replaces_only_the_listeners_that_changed(self):
        agent = Agent(self, self.tmp, ipv6=False)
        agent.wait_ready()
        kept = Collector(self, "tcp kept", agent.tcp, 30, interval=0.1)
        dropped = Collector(self, "unix dropped", agent.unix, 30, interval=0.1)
        wait_until(lambda: len(kept.messages) >= 2 and len(dropped.messages) >= 2, 3, "2 messages on each stream")
        new_port = free_port_both()
        new_tcp = f"127.0.0.1:{new_port}"
        lines = agent.proc.err().count("configuration reloaded")
        agent.write_config(listen=[agent.tcp, new_tcp])
        agent.proc.signal(signal.SIGHUP)
        wait_until(lambda: agent.check_alive() or agent.proc.err().count("configuration reloaded") > lines, 5,
                   "the reload")
        reloaded = time.monotonic()
        wait_until(lambda: dropped.finished(0), 5, "the stream on the removed unix listener to end")
        self.assertIsNotNone(dropped.code, dropped.summary())
        self.assertFalse(os.path.exists(agent.unix_path) and
                         _connectable(agent.unix_path), "the removed unix listener still accepts connections")
        with orca_oob.stream(new_tcp, count=2, timeout=5, interval=0.1) as s:
            self.assertEqual(len(list(s)), 2, f"the added listener {new_tcp}: {s.code} {s.details}")
        time.sleep(0.5)
        self.assertIsNone(kept.code, "the kept listener's stream ended: " + kept.summary())
        after = [m for m in kept.messages if m[0] >= reloaded]
        self.assertGreaterEqual(len(after), 4, f"the kept listener's stream: {len(after)} messages after the reload")
        figure(f"case 6b: reload replacing unix by {new_tcp}: the kept stream got {len(after)} messages after it, "
               f"the dropped one ended with {dropped.code}")
        kept.close()
        agent.check_alive()

    def test_6c_a_missing_module_is_a_clear_error(self):
        """[oob] is a module headroomd loads (publishers/oob_module.h): a
        headroomd that cannot find it refuses to start with [oob] (exit 73,
        naming the file) and starts without."""
        bindir = os.path.join(self.tmp, "sbin")
        os.makedirs(bindir)
        copy = os.path.join(bindir, "headroomd")
        shutil.copy(HEADROOMD, copy)  # ../lib/headroom/headroom-oob.so does not exist from here
        config = os.path.join(self.tmp, "with-oob.toml")
        with open(config, "w") as f:
            f.write(f'[agent]\norca_dir = "{self.tmp}/orca"\n[oob]\nlisten = ["unix:{self.tmp}/oob.sock"]\n')
        p = subprocess.run([copy, "--config", config, "--once"], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 73, p.stderr)
        self.assertIn(f"cannot load the [oob] module {self.tmp}/lib/headroom/headroom-oob.so", p.stderr)
        with open(config, "w") as f:
            f.write(f'[agent]\norca_dir = "{self.tmp}/orca"\n')
        p = subprocess.run([copy, "--config", config, "--once"], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)

    # 7 ---------------------------------------------------------------------
    def test_7_sigterm_final_report_then_unavailable_and_restart(self):
        server = TestServer(self, self.tmp, "1ms")
        agent = Agent(self, self.tmp, endpoints=self.endpoints(server.port))
        agent.wait_ready(scopes=("endpoint.web1",))
        monitor = FileMonitor(agent, ("node", "endpoint.web1"))
        monitor.start()
        self.addCleanup(monitor.stop)
        auth = f"127.0.0.1:{server.port}"
        streams = [(Collector(self, "tcp node 100ms", agent.tcp, 30, interval=0.1), "node"),
                   (Collector(self, "tcp web1 100ms", agent.tcp, 30, authority=auth, interval=0.1), "endpoint.web1"),
                   (Collector(self, "unix node 100ms", agent.unix, 30, interval=0.1), "node"),
                   (Collector(self, "tcp node 1 h", agent.tcp, 30, interval=3600), "node"),
                   (Collector(self, "unix web1 no interval (1 s)", agent.unix, 30, authority=auth), "endpoint.web1")]
        if agent.ipv6:
            streams.append((Collector(self, "ipv6 web1 100ms", agent.ipv6, 30, authority=auth, interval=0.1),
                            "endpoint.web1"))
        ctl = Proc("headroomctl-oob", [HEADROOMCTL, "oob", agent.tcp, "--authority", auth, "--interval", "100ms",
                                       "--json"], self.tmp, self)
        # One that never reads: the stop must not wait for it for ever.
        stuck = RawH2(agent.tcp, rcvbuf=4096)
        self.addCleanup(stuck.close)
        stuck.handshake()
        for _ in range(20):
            stuck.open(agent.tcp, orca_oob.encode_request(0.01))
        wait_until(lambda: all(c.messages for c, _ in streams) and
                   len([c for c, _ in streams if len(c.messages) >= 3]) >= len(streams) - 2,
                   4, "messages on every stream")
        time.sleep(0.5)
        sent = time.monotonic()
        agent.proc.signal(signal.SIGTERM)
        code = agent.proc.wait(10)
        took = time.monotonic() - sent
        figure(f"case 7: SIGTERM with {len(streams)} streams, headroomctl oob and 20 streams never read: exit {code} "
               f"in {took:.2f} s")
        self.assertEqual(code, 0, f"headroomd after SIGTERM: {code}; stderr:\n{tail(agent.proc.err())}")
        self.assertLess(took, 5.0)
        monitor.stop()
        monitor.read_now()
        finals = {scope: orca_oob.read_report_file(agent.file(scope)) for scope in ("node", "endpoint.web1")}
        for scope, r in finals.items():
            self.assertTrue(orca_oob.metadata(r)[2], f"{scope}.orca's last report is not marked stopped")

        for c, scope in streams:
            with self.subTest(c.label):
                self.assertTrue(c.finished(5), f"{c.label}: still open after headroomd stopped")
                ended = c.stream.ended_at - sent
                note(f"    {c.summary()}, ended {ended * 1000:.0f} ms after SIGTERM")
                self.assertEqual(code_name(c.code), "UNAVAILABLE", c.summary())
                self.assertGreaterEqual(len(c.messages), 2, c.summary())
                last = c.reports[-1]
                self.assertTrue(orca_oob.metadata(last)[2], f"{c.label}: the last message is not headroom.stopped = 1:"
                                                             f" {last['named_metrics']}")
                self.assertFalse(any(orca_oob.metadata(r)[2] for r in c.reports[:-1]), "stopped before the last")
                self.assertSameReport(last, finals[scope], f"{c.label}: the final message is not {scope}.orca's last report")
                self.assertTrue(c.messages[-1][0] >= sent, "the final message came before the SIGTERM")
                self.check_against_files(c.label, c.reports, monitor, scope)
        with self.subTest("headroomctl oob"):
            ctl_code = ctl.wait(5)
            messages, bad = parse_ctl_lines(ctl.out())
            figure(f"case 7: headroomctl oob after SIGTERM: exit {ctl_code}, {len(messages)} messages, "
                   f"stderr {ctl.err().strip()[-200:]!r}")
            self.assertIsNotNone(ctl_code, "headroomctl oob still running after headroomd stopped")
            self.assertEqual(bad, [])
            self.assertTrue(messages and orca_oob.metadata(messages[-1][1])[2], "its last message is not stopped")
            self.assertSameReport(messages[-1][1], finals["endpoint.web1"],
                                  "headroomctl oob: the final message is not endpoint.web1.orca's last report")
            self.check_against_files("headroomctl oob", [m[1] for m in messages], monitor, "endpoint.web1")

        with self.subTest("started again on the same addresses"):
            last_seq = orca_oob.metadata(finals["node"])[0]
            agent.restart()
            restarted = time.monotonic()
            agent.wait_ready(scopes=("endpoint.web1",))
            figure(f"case 7: headroomd started again: every listener streaming {time.monotonic() - restarted:.2f} s "
                   f"after the start")
            for address in agent.listen:
                with orca_oob.stream(address, count=3, interval=0.1, timeout=5) as s:
                    got = [m[1] for m in s]
                self.assertEqual(len(got), 3, f"{address} after the restart: {code_name(s.code)} {s.details}")
                seqs = [orca_oob.metadata(r)[0] for r in got]
                self.assertLess(seqs[0], last_seq, f"{address}: seqs {seqs}: not the new headroomd's")
                self.assertFalse(any(orca_oob.metadata(r)[2] for r in got))
            code, messages, _, err = ctl_oob(agent.tcp, "--authority", auth, "--count", "2", timeout=10)
            self.assertEqual((code, len(messages)), (0, 2), err)
            agent.check_alive()


# ---------------------------------------------------------------------------

def supports_oob():
    """(True, "") when the built headroomd accepts an [oob] table."""
    d = tempfile.mkdtemp(prefix="headroom-oob-check-")
    try:
        path = os.path.join(d, "check.toml")
        with open(path, "w") as f:
            f.write(f'[agent]\norca_dir = {toml_string(d)}\n\n[oob]\nlisten = ["127.0.0.1:9447", "unix:{d}/s"]\n'
                    'max_streams = 4\nunknown_authority = "error"\ndefault_interval = "200ms"\n')
        r = subprocess.run([HEADROOMD, "--config", path, "--check-config"], capture_output=True, timeout=30)
        return r.returncode == 0, (r.stdout + r.stderr).decode("utf-8", "replace").strip()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    global SOURCE_DIR, BUILD_DIR, HEADROOMD, HEADROOMCTL, TEST_SERVER, TEST_LOAD, SANITIZED, HAVE_IPV6
    problems = []
    if grpc is None:
        problems.append("missing: Python's gRPC (Debian: apt-get install python3-grpcio)")
    if not orca_oob.protoc_path():
        problems.append("missing: protoc (Debian: apt-get install protobuf-compiler)")
    problems += harness.needs_root("the eBPF endpoint probe")
    build = harness.prologue("oob_test.py", ("headroomd", "headroomctl", "test_server", "test_load"), problems)
    SOURCE_DIR, BUILD_DIR, HEADROOMD, HEADROOMCTL = build.source_dir, build.build_dir, build.headroomd, build.headroomctl
    TEST_SERVER, TEST_LOAD = build.test_server, build.test_load
    SANITIZED = build.sanitized or "sanitize" in os.path.basename(BUILD_DIR)
    HAVE_IPV6 = ipv6_loopback()
    ok, output = supports_oob()
    if not ok:
        print(f"FAIL: {HEADROOMD} does not accept an [oob] table: {output}", file=sys.stderr)
        return 1
    if not HAVE_IPV6:
        note("NOTE: no IPv6 loopback on this machine: the [::1] listeners are left out")

    # OOB_TEST_ONLY=test_5 runs one test while debugging.
    return harness.run_suite(OobTest, only_env="OOB_TEST_ONLY")


if __name__ == "__main__":
    if grpc is None and os.path.exists("/usr/bin/python3") and \
            os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        # Debian's python3-grpcio is for Debian's python3; another python3 first on PATH (pyenv, a venv) lacks it.
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit(main())
