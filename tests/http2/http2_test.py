#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""HTTP/2 and gRPC endpoints (protocol = "http2") against real servers and clients.

    http2_test.py SOURCE_DIR BUILD_DIR

headroomd (interval 100 ms) traces the servers with its eBPF probe; what its
endpoint reports say is compared with what the clients measured themselves:

  - nghttpd (Debian's nghttp2-server, cleartext) loaded by h2load
    (nghttp2-client) with many streams per connection, while the test stops
    nghttpd for 50 ms every 150 ms (SIGSTOP/SIGCONT), so that a share of the
    requests is slow: the requests counted within 5 % of h2load's, the share
    over the target within 2 points of the share h2load's per-request log
    shows, and the streams in flight while nghttpd is stopped equal to the
    streams h2load keeps open;
  - errors: a server on Python's h2 answering a quarter of the requests 503
    (its HPACK encoder Huffman-codes the status and then refers to it in its
    dynamic table), and nghttpd sending "grpc-status: 13" trailers (nghttp2's
    encoder, a Huffman-coded name): the error share as h2load counted;
  - a gRPC server and client (python3-grpcio, tests/http2/grpc_peer.py): 16
    RPCs at a time on one channel, 20 % taking 40 ms and 10 % ending with
    status INTERNAL: the share over the target and the error share within 2
    points of the client's counts;
  - the gRPC server SIGSTOPped under load: latency.slo_target and
    latency.slo_max reach 1.0 within target + window (+ slack);
  - hostile clients on an HTTP/2 port: garbage after the preface, frames with
    absurd lengths, 10 000 streams opened and never answered on one
    connection: the in-flight streams stay bounded (the probe measures at most
    128 per connection), another endpoint's figures are untouched, and the
    agent keeps publishing;
  - an HTTP/1 endpoint (hr-test-server, a quarter of its requests 40 ms)
    beside an HTTP/2 one: on a kernel with the socket set (6.11+) both sets
    are attached, the HTTP/1 server is not a traced process, and each
    endpoint counts and times its requests as its client does.

Needs root (eBPF) and nghttpd, h2load, python3-grpcio and python3-h2; without them it
skips (exit 77), saying why; with CI=true a skip is a failure.
"""

import json
import os
import re
import shutil
import signal
import socket
import struct
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "oob"))
import harness  # noqa: E402  (tests/support/harness.py)
from harness import Fatal, Proc, figure, free_port, note, tail, toml_string, wait_until  # noqa: E402
import orca_oob  # noqa: E402  (the OrcaLoadReport codec)

SOURCE_DIR = BUILD_DIR = HEADROOMD = ""
NGHTTPD = "/usr/sbin/nghttpd"
H2LOAD = "/usr/bin/h2load"
PEER = os.path.join(HERE, "grpc_peer.py")
STATUS_SERVER = os.path.join(HERE, "h2_status_server.py")
PYTHON = "/usr/bin/python3"  # Debian's, which python3-grpcio is installed for

TARGET_MS = 20
MAX_MS = 400

# The program set headroomd attaches for HTTP/2 endpoints: the syscall set,
# as BTF tracepoints, or as raw ones where HEADROOM_EBPF_PROGRAMS=raw forces
# them (kernels before 6.2 get those: ctest runs a part of this test so).
FORCED = os.environ.get("HEADROOM_EBPF_PROGRAMS", "")
SYSCALL_KIND = {"": "tp_btf syscalls", "auto": "tp_btf syscalls", "syscalls": "tp_btf syscalls",
                "raw": "raw_tp syscalls"}.get(FORCED)


class Agent:
    """headroomd on a directory of the case's, with the given endpoints."""

    def __init__(self, case, tmp, endpoints, smoothing="30s", kind=None):
        kind = kind or SYSCALL_KIND
        self.orca_dir = os.path.join(tmp, "orca")
        config = os.path.join(tmp, "headroom.toml")
        body = ("[agent]\norca_dir = " + toml_string(self.orca_dir) + "\ninterval = \"100ms\"\n"
                "smoothing = " + toml_string(smoothing) + "\n")
        for name, port, *protocol in endpoints:
            body += (f"\n[[endpoint]]\nname = \"{name}\"\nport = {port}\n"
                     f"protocol = \"{protocol[0] if protocol else 'http2'}\"\n"
                     f"target = \"{TARGET_MS}ms\"\nmax = \"{MAX_MS}ms\"\n")
        with open(config, "w") as f:
            f.write(body)
        self.proc = Proc("headroomd", [HEADROOMD, "--config", config], tmp, case)
        self.names = [e[0] for e in endpoints]
        for name in self.names:
            wait_until(lambda: self.report(name), 15, f"endpoint.{name}.orca")
        if f"attached ({kind}," not in self.proc.err():
            raise AssertionError(f"headroomd did not attach the {kind} programs:\n" + tail(self.proc.err()))

    def check_alive(self):
        if not self.proc.alive():
            raise Fatal(f"headroomd exited with {self.proc.p.returncode}:\n{tail(self.proc.err())}")

    def parser_totals(self, case):
        """Stops headroomd (SIGTERM); the HTTP/2 parsers' totals it logs then."""
        case.assertEqual(self.proc.stop(grace=15), 0, tail(self.proc.err()))
        m = re.search(r"HTTP/2 frame parsers since the probe was loaded: (\d+) frames, (\d+) frame headers split "
                      r"between two system calls \(handled\), (\d+) desyncs, (\d+) resyncs, (\d+) streams not "
                      r"measured .*?, (\d+) header blocks not walked whole", self.proc.err())
        case.assertIsNotNone(m, "no HTTP/2 parser totals in headroomd's log:\n" + tail(self.proc.err()))
        keys = ("frames", "split", "desyncs", "resyncs", "dropped", "hpack_lost")
        return dict(zip(keys, (int(g) for g in m.groups())))

    def report(self, name):
        self.check_alive()
        with open(os.path.join(self.orca_dir, f"endpoint.{name}.orca"), "rb") as f:
            return orca_oob.decode_report(f.read())

    def fresh(self, name):
        """A report written after this call."""
        seq = self.report(name)["named_metrics"].get("headroom.seq", 0)
        return wait_until(lambda: (lambda r: r if r["named_metrics"].get("headroom.seq", 0) > seq else None)(
            self.report(name)), 5, f"a new endpoint.{name}.orca")


def shares(report):
    u = report["utilization"]
    return u.get("latency.slo_target", float("nan")), u.get("latency.slo_max", float("nan"))


def describe(report):
    nm = report["named_metrics"]
    keys = ("headroom.window.requests", "headroom.window.seconds", "headroom.inflight", "headroom.inflight.avg",
            "headroom.pending", "headroom.latency.p50_ms", "headroom.latency.p99_ms")
    return (f"rps={report['rps_fractional']:.1f} eps={report['eps']:.1f} util={report['utilization']} " +
            " ".join(f"{k[9:]}={nm[k]:.4g}" for k in keys if k in nm))


class Pauser(threading.Thread):
    """Stops a process for `stop_s` every `period_s` until told to end."""

    def __init__(self, pid, stop_s, period_s):
        super().__init__(daemon=True)
        self.pid, self.stop_s, self.period_s = pid, stop_s, period_s
        self.done = threading.Event()
        self.pauses = 0

    def run(self):
        while not self.done.wait(self.period_s - self.stop_s):
            os.kill(self.pid, signal.SIGSTOP)
            time.sleep(self.stop_s)
            os.kill(self.pid, signal.SIGCONT)
            self.pauses += 1

    def end(self):
        self.done.set()
        self.join(5)
        os.kill(self.pid, signal.SIGCONT)


def start_nghttpd(case, tmp):
    docroot = os.path.join(tmp, "htdocs")
    os.makedirs(docroot, exist_ok=True)
    with open(os.path.join(docroot, "index.html"), "w") as f:
        f.write("x" * 100)
    port = free_port()
    proc = Proc("nghttpd", [NGHTTPD, "--no-tls", "-d", docroot, "--address", "127.0.0.1", str(port)], tmp, case)

    def listening():
        if not proc.alive():
            raise Fatal("nghttpd exited: " + proc.err())
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    wait_until(listening, 10, "nghttpd to listen")
    return proc, port


def start_grpc_server(case, tmp, name="grpc-server"):
    port = free_port()
    proc = Proc(name, [PYTHON, PEER, "server", port], tmp, case)

    def bound():
        if not proc.alive():
            raise Fatal("the gRPC server exited: " + proc.err())
        return re.search(r"^port=(\d+)$", proc.out(), re.M)
    wait_until(bound, 20, "the gRPC server's port=N line")
    return proc, port


def h2load_log(path):
    """h2load --log-file: (start µs, status, duration µs) per request."""
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                rows.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return rows


class Http2(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.make_temp_dir(self)

    def test_1_nghttpd_h2load_counts_shares_and_streams(self):
        """nghttpd + h2load, 2 connections x 32 streams, 2 x 1000 requests/s, nghttpd paused 50 ms in every 150 ms."""
        server, port = start_nghttpd(self, self.tmp)
        agent = Agent(self, self.tmp, [("h2", port)])
        connections, streams, seconds = 2, 32, 8
        log = os.path.join(self.tmp, "h2load.log")
        pauser = Pauser(server.pid, 0.050, 0.150)
        load = Proc("h2load", [H2LOAD, "-c", connections, "-m", streams, "--rps", 1000, "-D", seconds,
                               "--log-file", log, f"http://127.0.0.1:{port}/index.html"], self.tmp, self)
        time.sleep(1.0)
        pauser.start()
        # Streams in flight while nghttpd is stopped: every stream h2load
        # keeps open waits in nghttpd (read, or unread in its socket).
        time.sleep(3.0)
        pauser.end()
        os.kill(server.pid, signal.SIGSTOP)
        time.sleep(0.6)
        during = agent.fresh("h2")
        os.kill(server.pid, signal.SIGCONT)
        self.assertIsNotNone(load.wait(seconds + 20), "h2load did not finish")
        self.assertEqual(load.p.returncode, 0, load.out() + load.err())
        time.sleep(0.3)
        after = agent.fresh("h2")
        rows = h2load_log(log)
        ok = [r for r in rows if r[1] == 200]
        slow = sum(1 for r in ok if r[2] > TARGET_MS * 1000)
        client_share = slow / len(ok)
        nm = after["named_metrics"]
        counted = nm["headroom.window.requests"]
        figure(f"nghttpd/h2load: {len(ok)} requests by h2load, {counted:.0f} counted; slow share "
               f"{client_share:.4f} by h2load, {shares(after)[0]:.4f} by headroom ({pauser.pauses} pauses)")
        note("after: " + describe(after))
        self.assertGreater(len(ok), 5000, load.out())
        self.assertLessEqual(abs(counted - len(ok)), 0.05 * len(ok), describe(after))
        self.assertGreater(client_share, 0.02, "the pauses made too few requests slow to compare")
        self.assertLessEqual(abs(shares(after)[0] - client_share), 0.02, describe(after))
        in_flight = during["named_metrics"]["headroom.inflight"]
        pending = during["named_metrics"]["headroom.pending"]
        figure(f"nghttpd stopped: {in_flight:.0f} streams in flight + {pending:.0f} connections with unread "
               f"requests; h2load keeps {connections * streams} streams open")
        # Unread requests count once per connection (their streams are not
        # known until read), so in flight is at most the open streams, and
        # with the pending connections at least all of them but the unread.
        self.assertLessEqual(in_flight, connections * streams, describe(during))
        self.assertGreaterEqual(in_flight + pending * streams, connections * streams, describe(during))
        t = agent.parser_totals(self)
        figure(f"nghttpd/h2load parsers: {t['frames']} frames, {t['split']} split headers, {t['desyncs']} desyncs, "
               f"{t['dropped']} streams not measured, {t['hpack_lost']} blocks not walked")
        self.assertGreaterEqual(t["frames"], 3 * len(ok), t)
        self.assertEqual(t["desyncs"], 0, t)
        # A stream whose slot is still held by the one 128 streams before it
        # on its connection is not measured (docs/endpoints.md). Here that
        # should never happen (32 streams in flight at most), yet one stream
        # in ~16 000 was not measured in a CI run, on this code and on the
        # code before the slow-client change alike; its cause is not known.
        # At most one in 10 000 is tolerated; the shares are checked above.
        self.assertLessEqual(t["dropped"], max(1, len(ok) // 10000), t)

    def test_1b_status_and_trailer_errors(self):
        """:status 503 from Python's h2 (Huffman, then indexed), grpc-status trailers from nghttpd."""
        port = free_port()
        h2srv = Proc("h2-status-server", [PYTHON, STATUS_SERVER, port], self.tmp, self)
        def listening():
            if not h2srv.alive():
                raise Fatal("the h2 server exited: " + h2srv.err())
            return "port=" in h2srv.out()
        wait_until(listening, 20, "the h2 server's port=N line")
        nghttpd_dir = os.path.join(self.tmp, "htdocs")
        os.makedirs(nghttpd_dir, exist_ok=True)
        with open(os.path.join(nghttpd_dir, "index.html"), "w") as f:
            f.write("x" * 100)
        trailer_port = free_port()
        trailers = Proc("nghttpd-trailer", [NGHTTPD, "--no-tls", "-d", nghttpd_dir, "--trailer", "grpc-status: 13",
                                            "--address", "127.0.0.1", trailer_port], self.tmp, self)
        wait_until(lambda: socket.create_connection(("127.0.0.1", trailer_port), timeout=1).close() or True, 10,
                   "nghttpd to listen")
        agent = Agent(self, self.tmp, [("status", port), ("trailer", trailer_port)])
        log = os.path.join(self.tmp, "h2load.log")
        base = f"http://127.0.0.1:{port}"
        load = Proc("h2load", [H2LOAD, "-c", 2, "-m", 8, "-n", 4000, "--log-file", log, base + "/ok", base + "/ok",
                               base + "/ok", base + "/fail"], self.tmp, self)
        load2 = Proc("h2load-trailer", [H2LOAD, "-c", 1, "-m", 4, "-n", 2000,
                                        f"http://127.0.0.1:{trailer_port}/index.html"], self.tmp, self)
        self.assertEqual(load.wait(60), 0, load.out() + load.err())
        self.assertEqual(load2.wait(60), 0, load2.out() + load2.err())
        time.sleep(0.3)
        r = agent.fresh("status")
        rows = h2load_log(log)
        failed = sum(1 for x in rows if x[1] == 503) / len(rows)
        share = r["eps"] / r["rps_fractional"]
        t = agent.fresh("trailer")
        t_share = t["eps"] / t["rps_fractional"] if t["rps_fractional"] else float("nan")
        figure(f":status 503: {failed:.4f} of h2load's {len(rows)} requests, {share:.4f} by headroom; "
               f"grpc-status 13 trailers (nghttpd): error share {t_share:.4f} by headroom of "
               f"{t['named_metrics']['headroom.window.requests']:.0f} requests (want 1)")
        self.assertEqual(len(rows), 4000, load.out())
        self.assertAlmostEqual(failed, 0.25, delta=0.01)
        self.assertLessEqual(abs(share - failed), 0.02, describe(r))
        self.assertEqual(t["named_metrics"]["headroom.window.requests"], 2000, describe(t))
        self.assertGreaterEqual(t_share, 0.98, describe(t))

    def test_2_grpc_shares_and_errors(self):
        """python3-grpcio: 16 RPCs in flight on one channel, 20 % slow (40 ms), 10 % INTERNAL."""
        server, port = start_grpc_server(self, self.tmp)
        agent = Agent(self, self.tmp, [("grpc", port)])
        out = os.path.join(self.tmp, "client.json")
        client = Proc("grpc-client", [PYTHON, PEER, "client", port, 8, 16, out, "--slow", 20, "--errors", 10],
                      self.tmp, self)
        self.assertEqual(client.wait(60), 0, client.err())
        time.sleep(0.3)
        r = agent.fresh("grpc")
        with open(out) as f:
            c = json.load(f)
        lat = c["latencies_ms"]
        client_slow = sum(1 for ms in lat if ms > TARGET_MS) / len(lat)
        client_errors = c["errors"] / c["calls"]
        nm = r["named_metrics"]
        counted = nm["headroom.window.requests"]
        error_share = r["eps"] / r["rps_fractional"] if r["rps_fractional"] > 0 else float("nan")
        figure(f"gRPC: {c['calls']} calls by the client, {counted:.0f} counted; slow share {client_slow:.4f} by the "
               f"client, {shares(r)[0]:.4f} by headroom; error share {client_errors:.4f} by the client, "
               f"{error_share:.4f} by headroom")
        note("report: " + describe(r))
        self.assertGreater(c["calls"], 1000)
        self.assertLessEqual(abs(counted - c["calls"]), 0.05 * c["calls"], describe(r))
        self.assertLessEqual(abs(shares(r)[0] - client_slow), 0.02, describe(r))
        self.assertLessEqual(abs(error_share - client_errors), 0.02, describe(r))
        t = agent.parser_totals(self)
        figure(f"gRPC parsers: {t['frames']} frames, {t['split']} split headers, {t['desyncs']} desyncs, "
               f"{t['dropped']} streams not measured, {t['hpack_lost']} blocks not walked")
        self.assertGreaterEqual(t["frames"], 3 * c["calls"], t)
        self.assertEqual(t["desyncs"], 0, t)
        self.assertEqual(t["hpack_lost"], 0, t)

    def test_2b_grpc_concurrency(self):
        """python3-grpcio: 16 RPCs in flight on one channel, every one 40 ms: 16 streams in flight."""
        server, port = start_grpc_server(self, self.tmp)
        agent = Agent(self, self.tmp, [("grpc", port)], smoothing="2s")
        out = os.path.join(self.tmp, "client.json")
        client = Proc("grpc-client", [PYTHON, PEER, "client", port, 4, 16, out, "--slow", 100], self.tmp, self)
        time.sleep(3.0)
        r = agent.fresh("grpc")
        self.assertEqual(client.wait(30), 0, client.err())
        with open(out) as f:
            c = json.load(f)
        lat = sorted(c["latencies_ms"])
        median = lat[len(lat) // 2]
        avg = r["named_metrics"]["headroom.inflight.avg"]
        # The client keeps 16 calls open; each spends at least its 40 ms
        # sleep of its median round trip in the server: by Little's law at
        # least this many streams are in flight there on average, and never
        # more than the 16 calls open.
        expect = 16 * 40.0 / median
        figure(f"gRPC concurrency: headroom.inflight.avg {avg:.2f} with 16 calls open, each 40 ms in the server "
               f"of a {median:.1f} ms median round trip (at least {expect:.2f}, at most 16)")
        note("report: " + describe(r))
        self.assertGreaterEqual(avg, expect - 0.5, describe(r))
        self.assertLessEqual(avg, 16.0 + 1e-9, describe(r))
        self.assertLessEqual(r["named_metrics"]["headroom.inflight"], 16, describe(r))

    def test_3_grpc_server_stopped_reaches_one(self):
        """The gRPC server SIGSTOPped under load: both shares 1.0 within target + window."""
        window_s, slack_s = 1.0, 0.5
        server, port = start_grpc_server(self, self.tmp)
        agent = Agent(self, self.tmp, [("grpc", port)], smoothing="1s")
        out = os.path.join(self.tmp, "client.json")
        Proc("grpc-client", [PYTHON, PEER, "client", port, 20, 16, out], self.tmp, self)
        time.sleep(2.0)
        healthy = agent.fresh("grpc")
        note("healthy: " + describe(healthy))
        self.assertGreater(healthy["rps_fractional"], 50, describe(healthy))
        self.assertLess(shares(healthy)[0], 0.05, describe(healthy))
        stopped = time.monotonic()
        server.signal(signal.SIGSTOP)
        try:
            limit = TARGET_MS / 1000 + window_s + slack_s
            last = None
            reached = None
            while time.monotonic() < stopped + max(limit, MAX_MS / 1000 + window_s + slack_s):
                last = agent.report("grpc")
                t, m = shares(last)
                if t >= 0.999 and reached is None:
                    reached = time.monotonic() - stopped
                if t >= 0.999 and m >= 0.999:
                    break
                time.sleep(0.05)
            both = time.monotonic() - stopped
            figure(f"gRPC server stopped: latency.slo_target 1.0 after {reached if reached is None else round(reached * 1000)} ms "
                   f"(limit {limit * 1000:.0f}), latency.slo_max 1.0 after {both * 1000:.0f} ms "
                   f"(limit {(MAX_MS / 1000 + window_s + slack_s) * 1000:.0f})")
            self.assertIsNotNone(reached, "latency.slo_target did not reach 1.0: " + describe(last))
            self.assertLessEqual(reached, limit, describe(last))
            self.assertGreaterEqual(shares(last)[1], 0.999, "latency.slo_max: " + describe(last))
        finally:
            server.signal(signal.SIGCONT)
        wait_until(lambda: shares(agent.report("grpc"))[0] < 0.5, 5, "latency.slo_target below 0.5 after SIGCONT")

    def test_4_hostile_clients(self):
        """Garbage after the preface, absurd lengths, 10 000 unanswered streams: bounded, isolated."""
        server, port = start_nghttpd(self, self.tmp)
        sink_port = free_port()
        sink = Proc("sink", [PYTHON, "-c", SINK, sink_port], self.tmp, self)
        wait_until(lambda: "listening" in sink.out(), 10, "the silent server")
        agent = Agent(self, self.tmp, [("h2", port), ("silent", sink_port)])
        log = os.path.join(self.tmp, "h2load.log")
        load = Proc("h2load", [H2LOAD, "-c", 2, "-m", 8, "-D", 6, "--log-file", log,
                               f"http://127.0.0.1:{port}/index.html"], self.tmp, self)
        time.sleep(1.0)
        hostile = []
        # garbage after the preface, on both servers
        for p in (port, sink_port):
            s = socket.create_connection(("127.0.0.1", p))
            s.sendall(PREFACE + settings() + os.urandom(64 * 1024))
            hostile.append(s)
        # frames with absurd lengths: a HEADERS frame claiming 16 MiB, then bytes
        for p in (port, sink_port):
            s = socket.create_connection(("127.0.0.1", p))
            s.sendall(PREFACE + settings() + frame(1, 0x5, 1, b"\x82" * 64, length=0xFFFFFF) + b"\0" * 4096)
            hostile.append(s)
        # 10 000 streams opened, never answered (the silent server reads and never writes)
        s = socket.create_connection(("127.0.0.1", sink_port))
        s.sendall(PREFACE + settings())
        batch = b"".join(frame(1, 0x5, 2 * i + 1, HEADERS_BLOCK) for i in range(10000))
        s.sendall(batch)
        hostile.append(s)
        time.sleep(1.0)
        silent = agent.fresh("silent")
        figure(f"hostile: the silent server's streams in flight {silent['named_metrics']['headroom.inflight']:.0f} "
               f"after 10 000 opened on one connection (bound 128 per connection)")
        self.assertLessEqual(silent["named_metrics"]["headroom.inflight"], 128 + 2, describe(silent))
        self.assertGreaterEqual(silent["named_metrics"]["headroom.inflight"], 100, describe(silent))
        self.assertEqual(load.wait(30), 0, load.out() + load.err())
        time.sleep(0.3)
        r = agent.fresh("h2")
        rows = [x for x in h2load_log(log) if x[1] == 200]
        counted = r["named_metrics"]["headroom.window.requests"]
        figure(f"hostile: nghttpd's endpoint counted {counted:.0f} of h2load's {len(rows)} requests "
               f"next to the hostile connections")
        self.assertLessEqual(abs(counted - len(rows)), 0.05 * len(rows), describe(r))
        self.assertLess(shares(r)[0], 0.05, "nghttpd answered at once; nothing should be slow: " + describe(r))
        for s in hostile:
            s.close()
        # Their ends abort what they held: nothing stays in flight.
        wait_until(lambda: agent.fresh("silent")["named_metrics"]["headroom.inflight"] == 0, 5,
                   "the silent server's streams to end with their connections")
        agent.fresh("h2")

    def test_5_http1_endpoint_beside_keeps_the_socket_set(self):
        """An HTTP/1 endpoint beside an HTTP/2 one: each measured by its own program set, both as their clients."""
        if FORCED not in ("", "auto"):
            note(f"NOTE: HEADROOM_EBPF_PROGRAMS={FORCED}: both endpoints use the {SYSCALL_KIND} programs")
            kind = SYSCALL_KIND
        elif kernel_release() < (6, 11):
            note(f"NOTE: kernel {os.uname().release} has no socket set (6.11+): both endpoints use the syscall set")
            kind = SYSCALL_KIND
        else:
            kind = "tp_btf sockets + syscalls"
        server, port = start_nghttpd(self, self.tmp)
        h1 = Proc("hr-test-server", [harness.TEST_SERVER, "--port", "0", "--delay", "/slow=40ms"], self.tmp, self)
        h1_port = wait_until(lambda: (lambda m: int(m.group(1)) if m else None)(
            re.search(r"^port=(\d+)$", h1.out(), re.M)), 10, "hr-test-server's port=N line")
        agent = Agent(self, self.tmp, [("h2", port), ("h1", h1_port, "http1")], kind=kind)
        if kind != SYSCALL_KIND:
            # The socket set follows sockets, not processes: only nghttpd,
            # the HTTP/2 server, is a traced process.
            self.assertIn("; 1 server process(es) found)", agent.proc.err(), tail(agent.proc.err()))
        log = os.path.join(self.tmp, "h2load.log")
        h2 = Proc("h2load", [H2LOAD, "-c", 2, "-m", 16, "-n", 6000, "--log-file", log,
                             f"http://127.0.0.1:{port}/index.html"], self.tmp, self)
        load = Proc("hr-test-load", [harness.TEST_LOAD, "--port", h1_port, "--connections", 4, "--requests", 2000,
                                     "--path", "/a", "--path", "/a", "--path", "/a", "--path", "/slow",
                                     "--over", f"{TARGET_MS}ms"], self.tmp, self)
        self.assertEqual(h2.wait(60), 0, h2.out() + h2.err())
        self.assertEqual(load.wait(60), 0, load.out() + load.err())
        client = json.loads(load.out().strip().splitlines()[-1])
        time.sleep(0.3)
        r1, r2 = agent.fresh("h1"), agent.fresh("h2")
        rows = [x for x in h2load_log(log) if x[1] == 200]
        c1, c2 = r1["named_metrics"]["headroom.window.requests"], r2["named_metrics"]["headroom.window.requests"]
        client_slow = client["over"][f"{TARGET_MS}ms"]
        figure(f"{kind}: HTTP/1 endpoint counted {c1:.0f} of {client['requests']} requests, slow share "
               f"{shares(r1)[0]:.4f} (client {client_slow:.4f}); HTTP/2 endpoint counted {c2:.0f} of h2load's "
               f"{len(rows)}")
        self.assertEqual(client["requests"], 2000, load.out())
        self.assertLessEqual(abs(c1 - 2000), 0.05 * 2000, describe(r1))
        self.assertLessEqual(abs(shares(r1)[0] - client_slow), 0.02, describe(r1))
        self.assertEqual(len(rows), 6000, h2.out())
        self.assertLessEqual(abs(c2 - len(rows)), 0.05 * len(rows), describe(r2))
        self.assertLess(shares(r2)[0], 0.05, "nghttpd answered at once: " + describe(r2))


def kernel_release():
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# :method GET, :scheme http, :path /, :authority (literal, not indexed) "x"
HEADERS_BLOCK = b"\x82\x86\x84\x01\x01x"


def frame(ftype, flags, sid, payload, length=None):
    n = len(payload) if length is None else length
    return struct.pack(">I", n)[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def settings():
    return frame(4, 0, 0, b"")


# A server that reads everything and never answers.
SINK = r"""
import socket, sys, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(64)
print("listening", flush=True)
def drain(c):
    with c:  # closed when the client is done: the server's end of the connection
        while c.recv(65536):
            pass
while True:
    c, _ = srv.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
"""


def main():
    global SOURCE_DIR, BUILD_DIR, HEADROOMD
    missing = harness.needs_ebpf("loading eBPF programs")
    if SYSCALL_KIND is None:
        sys.exit(f"http2_test.py: HEADROOM_EBPF_PROGRAMS={FORCED}: HTTP/2 endpoints take the syscall programs "
                 "only; unset it, or set it to syscalls or raw")
    for tool, pkg in ((NGHTTPD, "nghttp2-server"), (H2LOAD, "nghttp2-client")):
        if not os.access(tool, os.X_OK):
            missing.append(f"missing: {tool} (Debian: apt-get install {pkg})")
    for module, pkg in (("grpc", "python3-grpcio"), ("h2", "python3-h2")):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"missing: {pkg} for {sys.executable} (Debian: apt-get install {pkg})")
    build = harness.prologue("http2_test.py", ("headroomd", "test_server", "test_load"), missing)
    SOURCE_DIR, BUILD_DIR, HEADROOMD = build.source_dir, build.build_dir, build.headroomd
    return harness.run_suite(Http2, only_env="HTTP2_ONLY")


if __name__ == "__main__":
    sys.exit(main())
