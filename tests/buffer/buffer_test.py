#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""headroomctl buffer against real servers (docs/buffers.md).

    buffer_test.py SOURCE_DIR BUILD_DIR

- Known capacity: hr-test-server --capacity 300 --reject-capacity 300 serves
  300 req/s, rejects 300 req/s more with 503 at once and answers 500 beyond:
  at a 100 req/s baseline its success buffer is 2.0 and its failure buffer
  3.0. A ramp must find both within 10 %.
- Known latency: against hr-test-server --delay /=20ms the served p50 is
  within 5 % of 20 ms, and no served request is faster than the delay.
- Bad targets: a closed port, a listener that accepts and never answers, one
  that closes every connection: exit 1 with a failed verdict naming the
  cause, never later than the plan's duration plus --timeout (plus slack).
- Nonsense flags: exit 64 with a message naming the flag.
- --baseline report: the endpoint report's rps_fractional is the baseline; a
  stale report, one without traffic, or no --scope is refused.
- --dry-run sends nothing; Ctrl-C (SIGINT) stops at once with exit 130 and
  the partial figures; --svg writes one well-formed SVG document.

Needs no root.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oob"))
import harness  # noqa: E402
from orca_oob import encode_report  # noqa: E402  (a hand-written OrcaLoadReport codec)
from harness import figure, note  # noqa: E402

HEADROOMCTL = TEST_SERVER = ""


def start_server(case, tmp, *args, name="hr-test-server"):
    return harness.start_listening(case, tmp, name, [TEST_SERVER, "--port", "0", *args])


def buffer(*args, timeout=120):
    """headroomctl buffer ARGS --json: (exit code, parsed JSON or None, stderr, seconds)."""
    started = time.monotonic()
    p = subprocess.run([HEADROOMCTL, "buffer", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    took = time.monotonic() - started
    doc = None
    if "--json" in args and p.stdout.strip():
        doc = json.loads(p.stdout)
    return p.returncode, doc, p.stderr, took


class Listener:
    """A TCP listener on 127.0.0.1 that does `what` with each connection: "silent"
    keeps it open and never reads, "close" closes it at once."""

    def __init__(self, case, what):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.kept = []
        self.stopped = False
        self.what = what
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()
        case.addCleanup(self.stop)

    def loop(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.what == "close":
                conn.close()
            else:
                self.kept.append(conn)

    def stop(self):
        self.stopped = True
        self.sock.close()
        for c in self.kept:
            c.close()


class BufferTest(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.make_temp_dir(self, "headroom-buffer-")

    def test_known_capacity_gives_known_buffers(self):
        _, port = start_server(self, self.tmp, "--capacity", "300", "--reject-capacity", "300")
        rc, doc, err, took = buffer(f"127.0.0.1:{port}/", "--baseline", 100, "--ramp", "1,2,4,5,7",
                                    "--step", "3s", "--settle", "1s", "--slo", "200ms", "--json",
                                    "--orca-dir", "")
        self.assertIsNotNone(doc, err)
        b = doc["buffers"]
        note(f"capacity server: success {b['success']:.3f}, failure {b['failure']:.3f}: {b['explanation']}")
        for s in doc["steps"]:
            note(f"  {s['multiple']}x offered {s['offered_rps']:.0f} served {s['served_rps']:.0f} "
                 f"rejected {s['rejected_rps']:.0f} failed {s['failed_rps']:.0f}")
        figure(f"capacity server (300 served + 300 rejected per s, baseline 100): success buffer "
               f"{b['success']:.2f} (expected 2.0), failure buffer {b['failure']:.2f} (expected 3.0)")
        self.assertAlmostEqual(b["success"], 2.0, delta=0.2)
        self.assertAlmostEqual(b["failure"], 3.0, delta=0.3)
        self.assertFalse(b["success_is_lower_bound"])
        self.assertFalse(b["failure_is_lower_bound"])
        self.assertEqual(rc, 0, err)  # no expectations: the verdict passes when the target answered

        # The same figures as expectations gate the exit status.
        rc, doc, err, _ = buffer(f"127.0.0.1:{port}/", "--baseline", 100, "--ramp", "1,4", "--step", "2s",
                                 "--settle", "1s", "--expect-success-buffer", 2.5, "--json", "--orca-dir", "")
        self.assertEqual(rc, 1, err)
        self.assertFalse(doc["verdict"]["passed"])

    def test_latency_against_a_fixed_delay(self):
        _, port = start_server(self, self.tmp, "--delay", "/=20ms")
        rc, doc, err, _ = buffer(f"127.0.0.1:{port}/", "--baseline", 200, "--ramp", "1", "--step", "3s",
                                 "--settle", "1s", "--json", "--orca-dir", "")
        self.assertEqual(rc, 0, err)
        lat = doc["steps"][0]["all"]["served_latency_ms"]
        served = doc["steps"][0]["all"]["served"]
        figure(f"fixed 20 ms server at 200 req/s: served p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms "
               f"({served} requests)")
        self.assertGreater(served, 350)
        self.assertLess(abs(lat["p50"] - 20.0) / 20.0, 0.05, lat)
        # Nothing can be answered faster than the server's delay.
        by_step = subprocess.run([HEADROOMCTL, "buffer", f"127.0.0.1:{port}/", "--baseline", "50", "--ramp", "1",
                                  "--step", "1s", "--settle", "0s", "--slo", "20ms", "--json", "--orca-dir", ""],
                                 capture_output=True, text=True, timeout=30)
        fast = json.loads(by_step.stdout)["steps"][0]["all"]
        self.assertEqual(fast["served"], 0, "a 2xx within 20 ms from a server that waits 20 ms")
        self.assertGreater(fast["failed_by"].get("over_slo", 0), 40)

    def test_closed_port_fails_naming_the_cause(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        rc, doc, err, took = buffer(f"127.0.0.1:{port}/", "--baseline", 100, "--ramp", "1", "--step", "2s",
                                    "--settle", "0s", "--timeout", "1s", "--slo", "500ms", "--json", "--orca-dir", "")
        self.assertEqual(rc, 1, err)
        self.assertFalse(doc["verdict"]["passed"])
        first = doc["verdict"]["checks"][0]
        self.assertFalse(first["passed"])
        self.assertIn("refused", first["detail"])
        self.assertEqual(doc["steps"][0]["all"]["failed_by"].get("connect"), doc["steps"][0]["all"]["offered"])
        self.assertLess(took, 2 + 1 + 2)

    def test_silent_and_closing_targets_fail_in_time(self):
        for what, reason in (("silent", "timeout"), ("close", "closed")):
            with self.subTest(what=what):
                lst = Listener(self, what)
                rc, doc, err, took = buffer(f"127.0.0.1:{lst.port}/", "--baseline", 100, "--ramp", "1",
                                            "--step", "2s", "--settle", "0s", "--timeout", "1s", "--slo", "500ms",
                                            "--json", "--orca-dir", "")
                figure(f"a target that {'never answers' if what == 'silent' else 'closes every connection'}: "
                       f"exit {rc} after {took:.2f} s (plan 2 s + timeout 1 s)")
                self.assertEqual(rc, 1, err)
                self.assertFalse(doc["verdict"]["passed"])
                all_ = doc["steps"][0]["all"]
                self.assertEqual(all_["failed"], all_["offered"])
                self.assertGreater(all_["failed_by"].get(reason, 0), 0.9 * all_["offered"], all_["failed_by"])
                self.assertLess(took, 2 + 1 + 2)

    def test_nonsense_flags_exit_64_naming_the_flag(self):
        target = "127.0.0.1:9/"
        cases = [
            (["--baseline", "-5"], "--baseline"),
            (["--baseline", "lots"], "--baseline"),
            (["--baseline", "10", "--ramp", "2,1"], "--ramp"),
            (["--baseline", "10", "--mix", "URGENT=1"], "--mix"),
            (["--baseline", "10", "--spike", "0.5"], "--spike"),
            (["--baseline", "10", "--step", "10"], "--step"),
            (["--baseline", "10", "--slo", "1s", "--timeout", "500ms"], "--timeout"),
            (["--baseline", "5000", "--ramp", "1,10"], "--max-rate"),
            (["--baseline", "10", "--step", "5m"], "--max-duration"),
            (["--baseline", "10", "--expect-served", "CRITICAL=120"], "--expect-served"),
            (["--baseline", "10", "--signal", "utilisation"], "--signal"),
            (["--baseline", "report"], "--scope"),
        ]
        for extra, flag in cases:
            with self.subTest(args=extra):
                p = subprocess.run([HEADROOMCTL, "buffer", target, *extra], capture_output=True, text=True, timeout=10)
                self.assertEqual(p.returncode, 64, p.stderr)
                self.assertIn(flag, p.stderr)
        for bad_target, words in (("nohost", "HOST:PORT"), ("127.0.0.1:99999", "port"),
                                  ("127.0.0.1:123456789012345678901234", "port"),
                                  ("https://127.0.0.1:1/", "TLS"), ("192.0.2.1:80/", "--allow-remote")):
            with self.subTest(target=bad_target):
                p = subprocess.run([HEADROOMCTL, "buffer", bad_target, "--baseline", "10"], capture_output=True,
                                   text=True, timeout=10)
                self.assertEqual(p.returncode, 64, p.stderr)
                self.assertIn(words, p.stderr)

    def test_baseline_from_the_endpoint_report(self):
        orca = os.path.join(self.tmp, "orca")
        os.makedirs(orca)

        def publish(rps, age_ms=0):
            report = {"rps_fractional": rps, "named_metrics": {
                "headroom.timestamp_ms": float(int(time.time() * 1000) - age_ms), "headroom.seq": 7.0,
                "headroom.interval_ms": 100.0}}
            with open(os.path.join(orca, ".endpoint.api.orca.tmp"), "wb") as f:
                f.write(encode_report(report))
            os.rename(os.path.join(orca, ".endpoint.api.orca.tmp"), os.path.join(orca, "endpoint.api.orca"))

        def dry(*extra):
            return subprocess.run([HEADROOMCTL, "buffer", "127.0.0.1:9/", "--baseline", "report", "--orca-dir", orca,
                                   "--ramp", "1,2", "--step", "1s", "--settle", "0s", "--dry-run", *extra],
                                  capture_output=True, text=True, timeout=10)
        publish(123.4)
        p = dry("--scope", "endpoint.api")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("2 steps, 2 s, 123 to 247 req/s", p.stderr)
        publish(123.4, age_ms=60_000)
        p = dry("--scope", "endpoint.api")
        self.assertEqual(p.returncode, 64)
        self.assertIn("stale", p.stderr)
        publish(0.0)
        p = dry("--scope", "endpoint.api")
        self.assertEqual(p.returncode, 64)
        self.assertIn("rps_fractional 0", p.stderr)
        p = dry("--scope", "endpoint.missing")
        self.assertEqual(p.returncode, 64)
        self.assertIn("endpoint.missing.orca", p.stderr)

    def test_dry_run_sends_nothing(self):
        lst = Listener(self, "silent")
        p = subprocess.run([HEADROOMCTL, "buffer", f"127.0.0.1:{lst.port}/x", "--baseline", "100", "--spike", "4",
                            "--dry-run"], capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("3 steps, 40 s, 100 to 400 req/s, 10 000 requests to 127.0.0.1:", p.stderr)
        time.sleep(0.2)
        self.assertEqual(lst.kept, [])

    def test_sigint_stops_at_once_with_partial_figures(self):
        _, port = start_server(self, self.tmp, "--delay", "/=1ms")
        proc = subprocess.Popen([HEADROOMCTL, "buffer", f"127.0.0.1:{port}/", "--baseline", "100", "--ramp", "1,2",
                                 "--step", "10s", "--settle", "0s", "--json", "--orca-dir", "",
                                 "--svg", os.path.join(self.tmp, "run.svg")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - sent
        figure(f"SIGINT to exit: {took * 1000:.0f} ms")
        self.assertEqual(proc.returncode, 130, err)
        self.assertLess(took, 0.5)
        doc = json.loads(out)
        self.assertTrue(doc["interrupted"])
        self.assertGreater(doc["steps"][0]["all"]["served"], 50)
        self.assertEqual(doc["steps"][1]["all"]["offered"], 0)
        root = ET.parse(os.path.join(self.tmp, "run.svg")).getroot()
        self.assertTrue(root.tag.endswith("svg"))
        self.assertGreater(len(root.findall(".//{http://www.w3.org/2000/svg}rect")), 3)


def main():
    global HEADROOMCTL, TEST_SERVER
    build = harness.prologue("buffer_test.py", ("headroomctl", "test_server"))
    HEADROOMCTL, TEST_SERVER = build.headroomctl, build.test_server
    return harness.run_suite(BufferTest, only_env="BUFFER_TEST_ONLY")


if __name__ == "__main__":
    sys.exit(main())
