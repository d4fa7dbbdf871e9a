#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""headroomctl buffer --retries against real servers (docs/buffers.md).

    buffer_retries_test.py SOURCE_DIR BUILD_DIR

- The reference shedding server shedding everything (its endpoint report,
  written here, at utilization 2.0, past every threshold): with --retries
  immediate every request is sent 1 + --max-retries times, amplification
  exactly 3.00 at --max-retries 2, every request rejected in the end; with
  --retries dials
  its answers' dials (maxRetries 0 at a shed probability of 1) allow none:
  amplification 1.00, every retry suppressed as dials_count.
- The same with --retries budget and the report sampled: the budget's
  report rule refuses every retry that falls due within the run.
- hr-test-server answering 503 without dials: --retries dials retries
  nothing (no_dials); --retries budget keeps the amplification within the
  default budget (10 % of the first attempts plus 10 retries a window), and
  says the budget held back the rest.
- --retries nonsense: exit 64 naming the flag.

Needs no root.
"""

import json
import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oob"))
import harness  # noqa: E402
from orca_oob import encode_report  # noqa: E402  (a hand-written OrcaLoadReport codec)
from harness import Proc, figure, wait_until  # noqa: E402

HEADROOMCTL = TEST_SERVER = SHEDDING_SERVER = ""


def buffer(*args, timeout=60):
    """headroomctl buffer ARGS --json: (exit code, parsed JSON or None, stderr)."""
    p = subprocess.run([HEADROOMCTL, "buffer", *map(str, args), "--json"], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr


class Publisher:
    """Keeps endpoint.<name>.orca in `orca` fresh at `utilization`, every 50 ms."""

    def __init__(self, case, orca, name, utilization):
        self.path = os.path.join(orca, f"endpoint.{name}.orca")
        self.utilization = utilization
        self.stopped = False
        self.publish()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()
        case.addCleanup(self.stop)

    def publish(self):
        report = {"application_utilization": self.utilization, "rps_fractional": 100.0, "named_metrics": {
            "headroom.timestamp_ms": float(int(time.time() * 1000)), "headroom.seq": 1.0,
            "headroom.interval_ms": 100.0}}
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(encode_report(report))
        os.rename(tmp, self.path)

    def loop(self):
        while not self.stopped:
            self.publish()
            time.sleep(0.05)

    def stop(self):
        self.stopped = True
        self.thread.join()


def start(case, tmp, name, argv):
    proc = Proc(name, argv, tmp, case)

    def port():
        if not proc.alive():
            raise harness.Fatal(f"{name} exited: " + proc.err())
        for line in proc.out().splitlines():
            if line.startswith("port="):
                return int(line[5:])
        return None
    return proc, wait_until(port, 10, f"{name}'s port=N line")


RUN = ("--baseline", 50, "--ramp", 1, "--step", "2s", "--settle", "0s", "--timeout", "1s")


class BufferRetriesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.make_temp_dir(self, "headroom-buffer-retries-")

    def shedding_server(self):
        orca = self.orca = os.path.join(self.tmp, "orca")
        os.makedirs(orca, exist_ok=True)
        Publisher(self, orca, "play", 2.0)
        _, port = start(self, self.tmp, "shedding-server", [SHEDDING_SERVER, "--port", "0", "--orca-dir", orca,
                                                             "--scope", "endpoint.play", "--cost", "0"])

        # The server reads the report on its own thread: wait until it sheds.
        def sheds():
            code, doc, err = buffer(f"127.0.0.1:{port}/", "--baseline", 20, "--ramp", 1, "--step", "0.2s",
                                    "--settle", "0s", "--orca-dir", "")
            return doc is not None and doc["steps"][0]["all"]["served"] == 0
        wait_until(sheds, 10, "the shedding server shedding everything")
        return port

    def test_immediate_retries_triple_the_load_on_a_server_that_sheds_everything(self):
        port = self.shedding_server()
        _, doc, err = buffer(f"127.0.0.1:{port}/", *RUN, "--retries", "immediate", "--max-retries", 2,
                             "--orca-dir", "")
        self.assertIsNotNone(doc, err)
        all_ = doc["retries"]["steps"][0]["all"]
        figure(f"immediate, shedding everything: {all_['first_attempts']} first attempts, {all_['retries']} "
               f"retries, amplification {all_['amplification']:.2f}")
        self.assertEqual(doc["retries"]["mode"], "immediate")
        self.assertEqual(all_["first_attempts"], 100)
        self.assertEqual(all_["retries"], 200)
        self.assertAlmostEqual(all_["amplification"], 3.0)
        self.assertEqual(all_["suppressed_by"]["max_retries"], 100)
        step = doc["steps"][0]["all"]
        self.assertEqual(step["offered"], 100, "offered counts first attempts")
        self.assertEqual(step["served"], 0)
        self.assertEqual(step["rejected"], 100, "each request's last attempt was a quick 503")
        for name, counts in doc["retries"]["steps"][0]["classes"].items():
            self.assertAlmostEqual(counts["amplification"], 3.0, msg=name)

    def test_dials_at_full_shedding_allow_no_retry(self):
        port = self.shedding_server()
        _, doc, err = buffer(f"127.0.0.1:{port}/", *RUN, "--retries", "dials", "--orca-dir", "")
        self.assertIsNotNone(doc, err)
        all_ = doc["retries"]["steps"][0]["all"]
        self.assertEqual(all_["first_attempts"], 100)
        self.assertEqual(all_["retries"], 0)
        self.assertAlmostEqual(all_["amplification"], 1.0)
        self.assertEqual(all_["suppressed_by"]["dials_count"], 100)

    def test_the_budget_reads_the_targets_report(self):
        # CRITICAL's dials at full shedding ask for 2 s (0.5 s x 4): its
        # retries of the first 2 s fall due within the run, where the
        # budget's report rule (the report sheds everything) refuses them.
        # The other buckets ask for longer: their retries fall past the end.
        port = self.shedding_server()
        _, doc, err = buffer(f"127.0.0.1:{port}/", "--baseline", 50, "--ramp", 1, "--step", "4s", "--settle", "0s",
                             "--timeout", "1s", "--retries", "budget", "--orca-dir", self.orca,
                             "--scope", "endpoint.play")
        self.assertIsNotNone(doc, err)
        retries = doc["retries"]
        critical = retries["steps"][0]["classes"]["CRITICAL"]
        figure(f"budget fed the report, shedding everything: CRITICAL suppressed {critical['suppressed_by']}, "
               f"{retries['past_end']} retries past the end")
        self.assertEqual(retries["steps"][0]["all"]["retries"], 0)
        self.assertGreaterEqual(critical["suppressed_by"]["target_shedding"], 20)
        self.assertGreater(retries["past_end"], 0)

    def test_answers_without_dials_and_the_budget(self):
        _, port = start(self, self.tmp, "hr-test-server", [TEST_SERVER, "--port", "0", "--status", "/=503"])
        _, doc, err = buffer(f"127.0.0.1:{port}/", *RUN, "--retries", "dials", "--orca-dir", "")
        self.assertIsNotNone(doc, err)
        all_ = doc["retries"]["steps"][0]["all"]
        self.assertEqual(all_["retries"], 0)
        self.assertEqual(all_["suppressed_by"]["no_dials"], 100)

        _, doc, err = buffer(f"127.0.0.1:{port}/", "--baseline", 100, "--ramp", 1, "--step", "2s", "--settle", "0s",
                             "--timeout", "1s", "--retries", "budget", "--orca-dir", "")
        self.assertIsNotNone(doc, err)
        all_ = doc["retries"]["steps"][0]["all"]
        figure(f"budget, every answer a 503: {all_['first_attempts']} first attempts, {all_['retries']} retries, "
               f"amplification {all_['amplification']:.3f}, suppressed {all_['suppressed_by']}")
        self.assertEqual(all_["first_attempts"], 200)
        # At most CRITICAL's 10 % of the first attempts plus 10 a window.
        self.assertLessEqual(all_["retries"], 0.1 * 200 + 10)
        self.assertGreater(all_["retries"], 0)
        self.assertGreater(all_["suppressed_by"]["budget"], 0)

    def test_a_bad_mode_exits_64_naming_the_flag(self):
        p = subprocess.run([HEADROOMCTL, "buffer", "127.0.0.1:9/", "--baseline", "10", "--retries", "often"],
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 64, p.stderr)
        self.assertIn("--retries often", p.stderr)
        p = subprocess.run([HEADROOMCTL, "buffer", "127.0.0.1:9/", "--baseline", "10", "--max-retries", "2"],
                           capture_output=True, text=True, timeout=10)
        self.assertNotEqual(p.returncode, 0, "--max-retries without --retries would do nothing")
        self.assertIn("--retries", p.stderr)
        p = subprocess.run([HEADROOMCTL, "buffer", "127.0.0.1:9/", "--baseline", "10", "--retries", "immediate",
                            "--max-retries", "-1"],
                           capture_output=True, text=True, timeout=10)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--max-retries", p.stderr)


def main():
    global HEADROOMCTL, TEST_SERVER, SHEDDING_SERVER
    build = harness.prologue("buffer_retries_test.py",
                             ("headroomctl", "test_server", "examples/shedding-server/headroom-example-shedding-server"))
    HEADROOMCTL, TEST_SERVER = build.headroomctl, build.test_server
    SHEDDING_SERVER = os.path.join(build.build_dir, "examples", "shedding-server", "headroom-example-shedding-server")
    return harness.run_suite(BufferRetriesTest, only_env="BUFFER_RETRIES_TEST_ONLY")


if __name__ == "__main__":
    sys.exit(main())
