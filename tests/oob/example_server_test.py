#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/grpc/'s server against a live headroomd and Python's gRPC.

    example_server_test.py SOURCE_DIR BUILD_DIR

Starts the example server (BUILD_DIR/examples/grpc/headroom-example-grpc-server,
--endpoint echo --instance aggregate, the file compared below, a report
directory that does not exist yet) and then
BUILD_DIR/agent/headroomd (--no-ebpf, interval 100 ms, one [[endpoint]]
"echo" on the server's port). On ONE channel to the server: its own Echo RPC
(/headroom.example.Echo/Say, bytes encoded here) and
OpenRcaService/StreamCoreMetrics at 200 ms (tests/oob/orca_oob.py's codec,
written by hand from the public field numbers). A thread reads
endpoint.echo.orca every 10 ms and keeps each report by (headroom.seq,
headroom.timestamp_ms), so every message is compared with the file of its tick.

Checks: the Echo reply; every message equals its file; the messages are about
200 ms apart; after headroomd's SIGTERM the stream carries at most the reports
that were still fresh, never the final one (headroom.stopped), and goes
silent; a stream opened 2 s later gets nothing in 1.5 s (DEADLINE_EXCEEDED);
with headroomd started again the open stream resumes within 3 s; the server
stops on SIGTERM with the stream open; a report directory that cannot be
watched makes the server exit 1 naming it. Figures go to stderr.

HEADROOM_EXAMPLE_SERVER=PATH runs another build of the server (its Makefile's).
Needs no root; needs python3-grpcio (run with /usr/bin/python3). A missing
tool fails with CI=true and skips (exit 77) elsewhere.
"""

import os
import queue
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (tests/support/harness.py: the prologue)
from harness import note  # noqa: E402

INTERVAL_MS = 100   # agent.interval
STREAM_MS = 200     # the stream's report_interval
ECHO_METHOD = "/headroom.example.Echo/Say"
ORCA_METHOD = "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics"


try:
    import grpc
    PROBLEMS = []
except ImportError:
    PROBLEMS = [f"missing: python3-grpcio for {sys.executable} (Debian: apt-get install python3-grpcio)"]
# $HEADROOM_EXAMPLE_SERVER: another build of the example (e.g. its Makefile's,
# against an installed headroom).
SERVER = os.environ.get("HEADROOM_EXAMPLE_SERVER") or "examples/grpc/headroom-example-grpc-server"
BUILD = harness.prologue("example_server_test.py", ("headroomd", SERVER), PROBLEMS)
SOURCE_DIR, BUILD_DIR, HEADROOMD = BUILD.source_dir, BUILD.build_dir, BUILD.headroomd
SERVER = os.path.join(BUILD_DIR, SERVER)
from orca_oob import decode_report, encode_request  # noqa: E402  (tests/oob/orca_oob.py, next to this file)


class Failure(AssertionError):
    pass


def check(ok, what):
    if not ok:
        raise Failure(what)


# --- processes ----------------------------------------------------------------

PROCS = []


def start(args, log):
    with open(log, "ab") as f:
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=f, stdin=subprocess.DEVNULL)
    PROCS.append(p)
    return p


def stop(p, sig=signal.SIGTERM, timeout=5.0):
    """Signals p and waits; its exit code, None if it had to be killed."""
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return None
    return p.returncode


def read_line(p, timeout, what):
    """The first stdout line of p, within timeout."""
    q = queue.Queue()
    threading.Thread(target=lambda: q.put(p.stdout.readline()), daemon=True).start()
    try:
        line = q.get(timeout=timeout)
    except queue.Empty:
        raise Failure(f"{what}: no line on stdout within {timeout} s") from None
    check(line, f"{what}: exited ({p.poll()}) before printing a line")
    return line.decode().strip()


# --- the report file, followed ------------------------------------------------

class FileWatcher(threading.Thread):
    """Reads a report file every 10 ms; keeps each report by (seq, timestamp_ms)."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.reports = {}
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.errors = []

    def run(self):
        last = None
        while not self.halt.is_set():
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = None
            if data is not None and data != last:
                last = data
                try:
                    r = decode_report(data)
                    with self.lock:
                        self.reports[key_of(r)] = r
                except ValueError as e:
                    self.errors.append(str(e))
            time.sleep(0.01)

    def get(self, key):
        with self.lock:
            return self.reports.get(key)


def key_of(report):
    nm = report["named_metrics"]
    return int(nm.get("headroom.seq", -1)), int(nm.get("headroom.timestamp_ms", -1))


def stopped(report):
    return report["named_metrics"].get("headroom.stopped") == 1


# --- the stream, read in a thread ---------------------------------------------

class StreamReader(threading.Thread):
    """One StreamCoreMetrics call; .messages gets (monotonic time, report)."""

    def __init__(self, channel, interval_s, timeout=None):
        super().__init__(daemon=True)
        call = channel.unary_stream(ORCA_METHOD, request_serializer=None, response_deserializer=None)
        self.call = call(encode_request(interval_s), timeout=timeout)
        self.messages = []
        self.lock = threading.Lock()
        self.code = self.details = None
        self.start()

    def run(self):
        try:
            for raw in self.call:
                t = time.monotonic()
                with self.lock:
                    self.messages.append((t, decode_report(raw)))
            self.code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            self.code, self.details = e.code(), e.details()

    def snapshot(self):
        with self.lock:
            return list(self.messages)

    def wait_for(self, pred, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msgs = self.snapshot()
            if pred(msgs):
                return msgs
            if not self.is_alive():
                break
            time.sleep(0.01)
        return None


def encode_echo(text):
    b = text.encode()
    assert len(b) < 128
    return b"\x0a" + bytes([len(b)]) + b  # EchoRequest / EchoReply {1: message}


# --- the test -----------------------------------------------------------------

def compare_with_files(msgs, files, what):
    """Every message equals the file's report of its (seq, timestamp)."""
    deadline = time.monotonic() + 1.0  # the file thread may be one poll behind
    for _, r in msgs:
        k = key_of(r)
        want = files.get(k)
        while want is None and time.monotonic() < deadline:
            time.sleep(0.02)
            want = files.get(k)
        check(want is not None, f"{what}: message seq={k[0]} ts={k[1]} matches no report the file held")
        check(r == want, f"{what}: message seq={k[0]} differs from its file:\n  stream {r}\n  file   {want}")


def run(tmp):
    # 1. A report directory that cannot be watched: exit 1, its name said.
    loop = os.path.join(tmp, "loop")
    os.symlink("loop", loop)
    bad = os.path.join(loop, "orca")
    r = subprocess.run([SERVER, "--listen", "127.0.0.1:0", "--orca-dir", bad, "--endpoint", "echo"],
                       capture_output=True, timeout=10)
    err = r.stderr.decode()
    note(f"unwatchable directory: exit {r.returncode}: {err.strip()}")
    check(r.returncode == 1, f"--orca-dir {bad}: exit {r.returncode}, want 1 (stdout {r.stdout!r})")
    check(bad in err, f"--orca-dir {bad}: the message does not name the directory: {err!r}")
    r = subprocess.run([SERVER, "--listen", "127.0.0.1:0", "--endpoint", "no/such name"], capture_output=True,
                       timeout=10)
    check(r.returncode == 1 and b"no/such name" in r.stderr, f"a bad endpoint name: exit {r.returncode}, {r.stderr!r}")

    # 2. The server first, on a directory headroomd has not created yet.
    orca_dir = os.path.join(tmp, "orca")
    server_log = os.path.join(tmp, "server.log")
    server = start([SERVER, "--listen", "127.0.0.1:0", "--orca-dir", orca_dir, "--endpoint", "echo",
                    "--instance", "aggregate"], server_log)
    line = read_line(server, 10, "example server")
    note(f"server: {line}")
    m = re.match(r"listening on 127\.0\.0\.1:(\d+)\b", line)
    check(m, f"unexpected first line: {line!r}")
    port = int(m.group(1))

    config = os.path.join(tmp, "headroom.toml")
    with open(config, "w") as f:
        f.write(f'[agent]\ninterval = "{INTERVAL_MS}ms"\norca_dir = "{orca_dir}"\n\n'
                f'[[endpoint]]\nname = "echo"\nport = {port}\ntarget = "10ms"\nmax = "100ms"\n')
    agent_log = os.path.join(tmp, "headroomd.log")
    agent = start([HEADROOMD, "--config", config, "--no-ebpf"], agent_log)
    files = FileWatcher(os.path.join(orca_dir, "endpoint.echo.orca"))
    files.start()

    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_http_proxy", 0),
                                                                  ("grpc.enable_retries", 0)])
    try:
        grpc.channel_ready_future(channel).result(timeout=10)
        echo = channel.unary_unary(ECHO_METHOD, request_serializer=None, response_deserializer=None)
        reply = echo(encode_echo("hello headroom"), timeout=5)
        check(reply == encode_echo("hello headroom"), f"Echo replied {reply!r}")
        note("Echo: the reply is the request")

        # 3. The stream, every message its file's, 200 ms apart.
        s = StreamReader(channel, STREAM_MS / 1000)
        msgs = s.wait_for(lambda ms: len(ms) >= 16, 10)
        check(msgs is not None, f"16 messages within 10 s: got {len(s.snapshot())} ({s.code}: {s.details})")
        compare_with_files(msgs, files, "running")
        stamps = [key_of(r)[1] for _, r in msgs]
        seqs = [key_of(r)[0] for _, r in msgs]
        check(all(b > a for a, b in zip(seqs, seqs[1:])), f"seq not increasing: {seqs}")
        check(not any(stopped(r) for _, r in msgs), "a message marked headroom.stopped while headroomd runs")
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        median = statistics.median(gaps)
        note(f"FIGURE: {len(msgs)} messages, timestamp gaps median {median} ms, min {min(gaps)}, max {max(gaps)} "
             f"(requested {STREAM_MS} ms, agent interval {INTERVAL_MS} ms)")
        check(150 <= median <= 260, f"median gap {median} ms, want 150..260: {gaps}")
        note(f"all {len(msgs)} messages equal endpoint.echo.orca of their tick")

        # 3b. Without eBPF the endpoint report is zeros and headroom.* metadata;
        # the node report has measured values: --endpoint "" serves it.
        node_server = start([SERVER, "--listen", "127.0.0.1:0", "--orca-dir", orca_dir], server_log)
        line = read_line(node_server, 10, "example server (node)")
        check("ORCA: node " in line, f"--endpoint empty: {line!r}")
        node_port = int(re.match(r"listening on 127\.0\.0\.1:(\d+)\b", line).group(1))
        node_files = FileWatcher(os.path.join(orca_dir, "node.orca"))
        node_files.start()
        node_channel = grpc.insecure_channel(f"127.0.0.1:{node_port}", options=[("grpc.enable_http_proxy", 0)])
        try:
            ns = StreamReader(node_channel, STREAM_MS / 1000)
            node_msgs = ns.wait_for(lambda ms: len(ms) >= 5, 5)
            check(node_msgs is not None, f"5 node messages within 5 s: got {len(ns.snapshot())} ({ns.code})")
            compare_with_files(node_msgs, node_files, "node")
            check(any(r["cpu_utilization"] > 0 or r["utilization"] for _, r in node_msgs),
                  "the node messages carry no measured value")
            note(f"node report: {len(node_msgs)} messages equal node.orca of their tick "
                 f"(cpu_utilization {node_msgs[-1][1]['cpu_utilization']:.4f}, "
                 f"{len(node_msgs[-1][1]['utilization'])} utilization entries)")
        finally:
            node_files.halt.set()
            node_channel.close()
        check(stop(node_server) == 0, "the node example server did not exit 0 on SIGTERM")

        # 4. headroomd stops: what was fresh, then silence; never the final report.
        before = len(s.snapshot())
        t_term = time.monotonic()
        rc = stop(agent)
        check(rc == 0, f"headroomd exited {rc} on SIGTERM")
        t_exit = time.monotonic()
        time.sleep(2.0)
        with files.lock:
            final = [r for r in files.reports.values() if stopped(r)]
        check(final, "headroomd wrote no final report (headroom.stopped = 1)")
        after = s.snapshot()[before:]
        check(s.is_alive(), f"the stream ended when headroomd stopped: {s.code}: {s.details}")
        check(not any(stopped(r) for _, r in after), "a stream carried the final report (headroom.stopped = 1)")
        compare_with_files(after, files, "after SIGTERM")
        late = [t - t_exit for t, _ in after if t - t_exit > 0.5]
        note(f"FIGURE: after SIGTERM: {len(after)} message(s) "
             f"{[round((t - t_term) * 1000) for t, _ in after]} ms after it; headroomd exited in "
             f"{round((t_exit - t_term) * 1000)} ms; silent for the next 2 s")
        check(len(after) <= 2, f"{len(after)} messages after SIGTERM, want at most the fresh ones (<= 2)")
        check(not late, f"messages {late} s after headroomd exited: the stream did not go silent")

        # 5. A new stream on the stopped report: nothing, until its deadline.
        t_new = time.monotonic()
        fresh = StreamReader(channel, STREAM_MS / 1000, timeout=1.5)
        fresh.join(5)
        check(not fresh.is_alive(), "a stream with a 1.5 s deadline still runs after 5 s")
        check(fresh.code == grpc.StatusCode.DEADLINE_EXCEEDED and not fresh.messages,
              f"a new stream while headroomd is stopped: {len(fresh.messages)} message(s), {fresh.code}: "
              f"{fresh.details} (want none, DEADLINE_EXCEEDED)")
        note(f"FIGURE: a new stream {round(t_new - t_exit, 1)} s after the stop: no message, "
             f"DEADLINE_EXCEEDED after {round(time.monotonic() - t_new, 2)} s")

        # 6. headroomd again: the open stream resumes (seq starts at 1 again;
        # newer means a later timestamp).
        last_ts = max(key_of(r)[1] for _, r in s.snapshot())
        before = len(s.snapshot())
        t_start = time.monotonic()
        agent = start([HEADROOMD, "--config", config, "--no-ebpf"], agent_log)
        resumed = s.wait_for(lambda ms: any(key_of(r)[1] > last_ts for _, r in ms[before:]), 3.0)
        check(resumed is not None, f"no newer message within 3 s of headroomd's restart "
                                   f"({len(s.snapshot()) - before} message(s); stream {s.code}: {s.details})")
        t_first = next(t for t, r in resumed[before:] if key_of(r)[1] > last_ts)
        s.wait_for(lambda ms: len(ms) >= before + 3, 3.0)
        new = s.snapshot()[before:]
        compare_with_files(new, files, "after the restart")
        check(not any(stopped(r) for _, r in new), "a stopped report after the restart")
        note(f"FIGURE: the open stream resumed {round((t_first - t_start) * 1000)} ms after headroomd started "
             f"(seq {key_of(new[0][1])[0]}, {len(new)} message(s) compared)")

        reply = echo(encode_echo("again"), timeout=5)
        check(reply == encode_echo("again"), f"Echo after the restart replied {reply!r}")

        # 7. The server stops on SIGTERM, the stream still open.
        t_stop = time.monotonic()
        rc = stop(server)
        took = time.monotonic() - t_stop
        s.join(5)
        note(f"FIGURE: the server stopped in {round(took * 1000)} ms with a stream open; the stream ended "
             f"{s.code}: {s.details}")
        check(rc == 0, f"the example server exited {rc} on SIGTERM")
        check(took < 4, f"the example server took {took:.1f} s to stop")
        check(not s.is_alive(), "the stream is still open after the server stopped")
        check(stop(agent) == 0, "headroomd (second run) did not exit 0 on SIGTERM")
        check(not files.errors, f"report files that did not decode: {files.errors[:3]}")
    finally:
        files.halt.set()
        channel.close()


def main():
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="hr-example-grpc-")
    ok = False
    try:
        run(tmp)
        ok = True
    except Failure as e:
        note(f"FAIL: {e}")
    finally:
        for p in PROCS:
            stop(p, timeout=3)
        if not ok:
            for name in ("server.log", "headroomd.log"):
                path = os.path.join(tmp, name)
                if os.path.exists(path):
                    with open(path, errors="replace") as f:
                        note(f"--- {name} (last lines)\n" + "".join(f.readlines()[-30:]))
        shutil.rmtree(tmp, ignore_errors=True)
    note(f"{'PASS' if ok else 'FAIL'} in {time.monotonic() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
