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
- One bad instance among several healthy ones (TARGET given once per
  instance; the bad one answers 503 to everything): a retry goes to the
  next instance and is served there. One bad among 16 keeps the retry
  ratio (1/16) under the budget's CRITICAL and DEGRADED ratios: --retries
  budget suppresses nothing, every request that met the bad instance is
  retried once, elsewhere, and all but the few whose retry fell past the
  run's end are served. One bad among 4 (a ratio of 1/4, over every
  bucket's): the budget holds the retries to 10 % of the first attempts
  plus 10 and some requests stay rejected, where --retries immediate
  serves them all at 1.25x.
- A target that accepts and never answers: --retries budget keeps the
  amplification within the budget, --retries dials retries nothing (a
  timeout carries no dials), --retries immediate --max-retries 3 sends
  every request up to 4 times; every run ends within its plan and timeout,
  and headroomctl's peak RSS stays small.
- --retries nonsense: exit 64 naming the flag; a repeated TARGET: exit 64.

Needs no root.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oob"))
import harness  # noqa: E402
from orca_oob import encode_report  # noqa: E402  (a hand-written OrcaLoadReport codec)
from harness import figure, wait_until  # noqa: E402

HEADROOMCTL = TEST_SERVER = SHEDDING_SERVER = ""


def buffer(*args, timeout=60):
    """headroomctl buffer ARGS --json: (exit code, parsed JSON or None, stderr)."""
    p = subprocess.run([HEADROOMCTL, "buffer", *map(str, args), "--json"], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr


def buffer_measured(tmp, *args):
    """buffer(), and the run's wall time (s) and headroomctl's own peak RSS (KiB)."""
    out_path, err_path = os.path.join(tmp, "buffer.out"), os.path.join(tmp, "buffer.err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        began = time.monotonic()
        p = subprocess.Popen([HEADROOMCTL, "buffer", *map(str, args), "--json"], stdout=out, stderr=err,
                             stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)  # this child's own rusage
        took = time.monotonic() - began
        p.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path) as f:
        text = f.read()
    with open(err_path) as f:
        err_text = f.read()
    return p.returncode, (json.loads(text) if text.strip() else None), err_text, took, usage.ru_maxrss


class Silent:
    """A listener on 127.0.0.1 that accepts every connection and never answers."""

    def __init__(self, case):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.accepted = 0
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()
        case.addCleanup(self.stop)

    def loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            self.held.append(conn)

    def stop(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join()
        for conn in self.held:
            conn.close()


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


RUN = ("--baseline", 50, "--ramp", 1, "--step", "2s", "--settle", "0s", "--timeout", "1s")
# Instances: 200 requests a second for 3 s, CRITICAL and DEGRADED, whose
# budget ratios (10 % and 7.5 %) stay above one bad instance in 16.
INSTANCES_RUN = ("--baseline", 200, "--ramp", 1, "--step", "3s", "--settle", "0s", "--timeout", "1s",
                 "--mix", "CRITICAL=50,DEGRADED=50", "--orca-dir", "")


class BufferRetriesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.make_temp_dir(self, "headroom-buffer-retries-")

    def shedding_server(self):
        orca = self.orca = os.path.join(self.tmp, "orca")
        os.makedirs(orca, exist_ok=True)
        Publisher(self, orca, "play", 2.0)
        _, port = harness.start_listening(self, self.tmp, "shedding-server",
                                          [SHEDDING_SERVER, "--port", "0", "--orca-dir", orca,
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
        _, port = harness.start_listening(self, self.tmp, "hr-test-server",
                                          [TEST_SERVER, "--port", "0", "--status", "/=503"])
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

    def instances(self, healthy, bad):
        """`healthy` hr-test-servers answering 200, then `bad` answering 503: their TARGETs."""
        targets = []
        for i in range(healthy + bad):
            argv = [TEST_SERVER, "--port", "0"] + (["--status", "/=503"] if i >= healthy else [])
            _, port = harness.start_listening(self, self.tmp, f"hr-test-server-{i}", argv)
            targets.append(f"127.0.0.1:{port}/")
        return targets

    def check_instances(self, doc, targets, bad):
        """The per-instance report: each healthy one served all it got, the bad one rejected all."""
        self.assertEqual([i["target"] for i in doc["instances"]], targets)
        for i in doc["instances"]:
            if i["target"] == bad:
                self.assertEqual(i["rejected"], i["attempts"], i)
            else:
                self.assertEqual(i["served"], i["attempts"], i)
        firsts = doc["retries"]["steps"][0]["all"]["first_attempts"]
        # Round robin: every instance got its share of the first attempts.
        for i in doc["instances"]:
            if i["target"] != bad:
                continue
            self.assertLessEqual(abs(i["attempts"] - firsts / len(targets)), 2,
                                 "the bad instance got one share of the first attempts and no retry")

    def test_one_bad_instance_among_16_healthy_ones_the_budget_lets_every_retry_go_elsewhere(self):
        targets = self.instances(15, 1)
        bad = targets[-1]
        figures = {}
        for mode in ("budget", "immediate"):
            code, doc, err = buffer(*targets, *INSTANCES_RUN, "--retries", mode, "--max-retries", 3)
            self.assertIsNotNone(doc, err)
            self.assertEqual(code, 0, err)
            retries = doc["retries"]
            all_ = retries["steps"][0]["all"]
            step = doc["steps"][0]["all"]
            at_bad = next(i for i in doc["instances"] if i["target"] == bad)
            figures[mode] = all_
            figure(f"{mode}, 1 bad instance among 16: {all_['first_attempts']} first attempts, "
                   f"{at_bad['attempts']} at the bad instance, {all_['retries']} retries "
                   f"({retries['past_end']} past the end), amplification {all_['amplification']:.3f}, "
                   f"suppressed {all_['suppressed']}, served {step['served']}/{step['offered']}")
            self.assertEqual(all_["first_attempts"], 600)
            self.check_instances(doc, targets, bad)
            self.assertEqual(all_["suppressed"], 0, f"{mode}: nothing held back at a ratio of 1/16")
            self.assertEqual(all_["retries"] + retries["past_end"], at_bad["attempts"],
                             f"{mode}: every attempt the bad instance rejected was retried once, and only once")
            self.assertGreaterEqual(step["served"] / step["offered"], 0.99, mode)
            self.assertEqual(step["served"] + step["rejected"], step["offered"], mode)
            self.assertEqual(sum(i["attempts"] for i in doc["instances"]), 600 + all_["retries"])

    def test_one_bad_instance_among_4_is_past_the_budget(self):
        targets = self.instances(3, 1)
        bad = targets[-1]
        _, doc, err = buffer(*targets, *INSTANCES_RUN, "--retries", "budget")
        self.assertIsNotNone(doc, err)
        all_ = doc["retries"]["steps"][0]["all"]
        step = doc["steps"][0]["all"]
        figure(f"budget, 1 bad instance among 4: {all_['first_attempts']} first attempts, {all_['retries']} retries, "
               f"amplification {all_['amplification']:.3f}, suppressed {all_['suppressed_by']['budget']} (budget), "
               f"served {step['served']}/{step['offered']}")
        self.check_instances(doc, targets, bad)
        self.assertLessEqual(all_["retries"], 0.1 * all_["first_attempts"] + 10)
        self.assertGreater(all_["suppressed_by"]["budget"], 0)
        self.assertLess(step["served"] / step["offered"], 0.95, "the requests the budget held back stay rejected")

        _, doc, err = buffer(*targets, *INSTANCES_RUN, "--retries", "immediate", "--max-retries", 3)
        self.assertIsNotNone(doc, err)
        all_ = doc["retries"]["steps"][0]["all"]
        step = doc["steps"][0]["all"]
        figure(f"immediate, 1 bad instance among 4: amplification {all_['amplification']:.3f}, "
               f"served {step['served']}/{step['offered']}")
        self.check_instances(doc, targets, bad)
        self.assertEqual(all_["retries"], 150, "each of the bad instance's quarter retried once, elsewhere")
        self.assertEqual(step["served"], step["offered"])

    def test_a_target_that_never_answers(self):
        silent = Silent(self)
        plan = ("--baseline", 100, "--ramp", 1, "--step", "3s", "--settle", "0s", "--timeout", "200ms",
                "--slo", "100ms", "--orca-dir", "")
        bound_s = 3 + 0.2 + 2  # the plan, the last timeout, and starting the process
        got, rss = {}, {}
        for mode in ("budget", "dials", "immediate"):
            code, doc, err, took, rss_kib = buffer_measured(self.tmp, f"127.0.0.1:{silent.port}/", *plan,
                                                            "--retries", mode, "--max-retries", 3)
            self.assertIsNotNone(doc, err)
            all_ = doc["retries"]["steps"][0]["all"]
            got[mode] = all_
            figure(f"{mode}, a target that never answers: {all_['first_attempts']} first attempts, "
                   f"{all_['retries']} retries, amplification {all_['amplification']:.2f}, "
                   f"{doc['retries']['past_end']} past the end, {took:.2f} s, peak RSS {rss_kib / 1024:.1f} MiB")
            self.assertEqual(all_["first_attempts"], 300, mode)
            self.assertEqual(doc["steps"][0]["all"]["served"], 0, mode)
            self.assertLess(took, bound_s, f"{mode}: the run ends within its plan and timeout")
            self.assertLess(rss_kib, 64 * 1024, f"{mode}: headroomctl's peak RSS")
            rss[mode] = rss_kib
        self.assertLess(rss["immediate"] - rss["dials"], 8 * 1024,
                        "the storm's four times the requests cost next to no memory beside a run without retries")
        self.assertLessEqual(got["budget"]["retries"], 0.1 * 300 + 10, "the budget: 10 % plus 10 a window")
        self.assertGreater(got["budget"]["suppressed_by"]["budget"], 0)
        self.assertEqual(got["dials"]["retries"], 0, "a timeout carries no dials")
        self.assertEqual(got["dials"]["suppressed_by"]["no_dials"], 300)
        # Every attempt times out after 200 ms and goes again at once: all
        # requests but those of the last 0.6 s are sent 4 times.
        self.assertGreater(got["immediate"]["amplification"], 3.4, "the storm the budget prevents")
        self.assertLessEqual(got["immediate"]["amplification"], 4.0)

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

    def test_bad_instances_exit_64_naming_the_target(self):
        for targets, says in ((["127.0.0.1:9/", "127.0.0.1:9/"], "give each instance once"),
                              (["127.0.0.1:9/a", "127.0.0.1:10/b"], "give them one path"),
                              ([f"127.0.0.1:{1000 + i}/" for i in range(65)], "at most 64 instances")):
            p = subprocess.run([HEADROOMCTL, "buffer", *targets, "--baseline", "10", "--dry-run"],
                               capture_output=True, text=True, timeout=10)
            self.assertEqual(p.returncode, 64, p.stderr)
            self.assertIn("TARGET", p.stderr)
            self.assertIn(says, p.stderr)


def main():
    global HEADROOMCTL, TEST_SERVER, SHEDDING_SERVER
    build = harness.prologue("buffer_retries_test.py",
                             ("headroomctl", "test_server", "examples/shedding-server/headroom-example-shedding-server"))
    HEADROOMCTL, TEST_SERVER = build.headroomctl, build.test_server
    SHEDDING_SERVER = os.path.join(build.build_dir, "examples", "shedding-server", "headroom-example-shedding-server")
    return harness.run_suite(BufferRetriesTest, only_env="BUFFER_RETRIES_TEST_ONLY")


if __name__ == "__main__":
    sys.exit(main())
