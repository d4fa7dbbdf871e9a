#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`headroomctl tune validate` and `tune search` (docs/tuning.md) against the
real canary: the reference shedding server confined to one CPU (the spike
rig's cgroup), reading its thresholds from the same headroom.toml as the
headroomd that measures it.

    validate_test.py SOURCE_DIR BUILD_DIR

One case, in order, on one canary:
1. a baseline of traffic, then `tune recommend --metrics` from headroomd's
   own /metrics: the proposal;
2. `tune validate` on the proposal passes (exit 0, every criterion);
3. `tune validate` on a file that sheds too late (every start point moved
   three quarters of the way to all_shed) fails with served_within_slo or graceful_rejection, the
   cause "too late", and a suggestion naming a signal;
4. `tune search` from that file reaches a pass within --max-spikes and writes
   it with its buffers; the written file passes `headroomd --check-config`;
5. after each run headroomd's configuration file is the original again.
A target that is not local is refused (69) before anything is applied.

Needs root (eBPF, the cgroup) and 2 CPUs; without them it skips loudly (77),
and with CI=true it fails.
"""

import json
import os
import re
import subprocess
import sys
import tomllib
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import harness  # noqa: E402
import spike_rig  # noqa: E402
from harness import Proc, figure, free_port, note, toml_string, wait_until  # noqa: E402

B = None
RIG = None
BASELINE = 300             # req/s: about a third of the canary's one CPU at 1 ms per request
SPIKE = ["--spike", "4", "--before", "4s", "--spike-for", "16s", "--after", "3s"]
MAX_SPIKES = 3


def late_file(text):
    """The proposal with every [[endpoint.shed]] start point moved three
    quarters of the way to its all_shed: shedding that starts too late."""
    entries = [s for e in tomllib.loads(text)["endpoint"] for s in e.get("shed", [])]
    lines, index = [], -1
    for line in text.splitlines():
        if line.strip() == "[[endpoint.shed]]":
            index += 1
        m = re.match(r"^(shed_start|critical_start)\s*=", line)
        if m and index >= 0:
            e = entries[index]
            line = f"{m.group(1)} = {round(e[m.group(1)] + 0.75 * (e['all_shed'] - e[m.group(1)]), 4)}"
        lines.append(line)
    return "\n".join(lines) + "\n"


class ValidateTest(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.make_temp_dir(self, "headroom-tune-validate-")
        self.orca = os.path.join(self.tmp, "orca")
        os.makedirs(self.orca)

    def ctl(self, *args, timeout=600):
        argv = [B.headroomctl, *args]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        note(f"$ {' '.join(argv[1:4])} ... -> exit {p.returncode}\n{harness.tail(p.stdout, 40)}\n"
             f"{harness.tail(p.stderr, 15)}")
        return p

    def tune(self, command, path, *extra):
        return self.ctl("tune", command, path, "--target", f"127.0.0.1:{self.port}/", "--endpoint", "play",
                        "--baseline", str(BASELINE), *SPIKE, "--headroomd-config", self.config,
                        "--headroomd-pid", str(self.agent.pid), "--orca-dir", self.orca, "--json", *extra)

    def assert_original_config(self):
        with open(self.config) as f:
            self.assertEqual(f.read(), self.original, "headroomd's configuration put back after the run")

    def test_recommend_validate_search_on_a_canary(self):
        self.port = free_port()
        metrics = free_port()
        self.config = os.path.join(self.tmp, "headroom.toml")
        self.original = (f'[agent]\norca_dir = {toml_string(self.orca)}\ninterval = "100ms"\n'
                         f'[node]\ncgroup = "{RIG.cgroup.name}"\ncgroup_version = {RIG.cgroup.version}\n'
                         f'[prometheus]\nlisten = "127.0.0.1:{metrics}"\n'
                         f'[[endpoint]]\nname = "play"\nport = {self.port}\ntarget = "10ms"\nmax = "500ms"\n'
                         '[[endpoint.shed]]\nsignal = "application_utilization"\nshed_start = 0.6\n'
                         'critical_start = 0.8\n')
        with open(self.config, "w") as f:
            f.write(self.original)
        server = Proc("shedding-server", [RIG.server, "--port", str(self.port), "--cost", "1ms", "--workers", "32",
                                          "--delay", "lognormal:10ms,0.5", "--orca-dir", self.orca,
                                          "--scope", "endpoint.play", "--config", self.config], self.tmp, self)
        RIG.cgroup.add(server.pid)
        wait_until(lambda: re.search(r"^port=\d+$", server.out(), re.M), 10, "the shedding server's port line")
        self.agent = Proc("headroomd", [B.headroomd, "--config", self.config], self.tmp, self)
        wait_until(lambda: os.path.exists(os.path.join(self.orca, "endpoint.play.orca")), 15, "endpoint.play.orca")

        # 1. A baseline, then the proposal from headroomd's /metrics.
        p = self.ctl("buffer", f"127.0.0.1:{self.port}/", "--baseline", str(BASELINE), "--ramp", "1",
                     "--step", "15s", "--settle", "0s", "--slo", "1s", "--orca-dir", self.orca, "--json")
        self.assertIn(p.returncode, (0, 1), p.stderr)
        proposal = os.path.join(self.tmp, "proposal.toml")
        p = self.ctl("tune", "recommend", "--metrics", f"http://127.0.0.1:{metrics}/metrics", "--config",
                     self.config, "--out", proposal)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(proposal) as f:
            proposal_text = f.read()
        play = [e for e in tomllib.loads(proposal_text)["endpoint"] if e["name"] == "play"][0]
        figure(f"proposal from a {BASELINE} req/s baseline: target {play['target']}, max {play['max']}, "
               + ", ".join(f"{s['signal']} {s['shed_start']}/{s['critical_start']}/{s['all_shed']}"
                           for s in play["shed"]))

        # 2. The proposal passes.
        p = self.tune("validate", proposal)
        self.assert_original_config()
        doc = json.loads(p.stdout)
        failed = [c["name"] for c in doc["criteria"] if not c["pass"]]
        figure(f"validate(proposal): exit {p.returncode}, failed {failed or 'none'}, buffers {doc['buffers']}")
        self.assertEqual(p.returncode, 0, f"the proposal must pass; failed: {failed}, {doc.get('suggestion')}")
        self.assertTrue(doc["pass"])

        # 3. Shedding too late fails, naming the criterion and the cause.
        late = os.path.join(self.tmp, "late.toml")
        with open(late, "w") as f:
            f.write(late_file(proposal_text))
        p = self.tune("validate", late)
        self.assert_original_config()
        doc = json.loads(p.stdout)
        failed = [c["name"] for c in doc["criteria"] if not c["pass"]]
        figure(f"validate(late): exit {p.returncode}, failed {failed}, suggestion {doc.get('suggestion')}")
        self.assertEqual(p.returncode, 1)
        self.assertTrue({"served_within_slo", "graceful_rejection"} & set(failed), failed)
        self.assertEqual(doc["suggestion"]["cause"], "too_late")
        self.assertIn(doc["suggestion"]["signal"], {s["signal"] for s in play["shed"]})
        self.assertRegex(p.stdout + p.stderr, r"served_within_slo|graceful_rejection")

        # 4. search from the late file reaches a pass within the bound.
        best = os.path.join(self.tmp, "best.toml")
        p = self.tune("search", late, "--max-spikes", str(MAX_SPIKES), "--out", best)
        self.assert_original_config()
        doc = json.loads(p.stdout)
        figure("search(late): exit %d, runs: %s" % (p.returncode, "; ".join(
            f"s={r['s']:.3f} {'PASS' if r['pass'] else 'FAIL'} success {r['buffers']['success']:.2f} "
            f"failure {r['buffers']['failure']:.2f}" for r in doc["runs"])))
        self.assertEqual(p.returncode, 0, "search reaches a pass")
        self.assertLessEqual(len(doc["runs"]), MAX_SPIKES)
        self.assertTrue(any(r["pass"] for r in doc["runs"]))
        with open(best) as f:
            best_text = f.read()
        self.assertIn("tune search", best_text.split("\n[", 1)[0], "the header says how it was made")
        c = subprocess.run([B.headroomd, "--check-config", "--config", best], capture_output=True, text=True)
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)

    def test_a_target_that_is_not_local_is_refused(self):
        config = os.path.join(self.tmp, "headroom.toml")
        with open(config, "w") as f:
            f.write('[[endpoint]]\nname = "play"\nport = 8080\ntarget = "10ms"\nmax = "500ms"\n')
        before = os.path.getmtime(config)
        p = self.ctl("tune", "validate", config, "--target", "192.0.2.1:8080/", "--endpoint", "play",
                     "--baseline", "10", "--headroomd-config", config)
        self.assertEqual(p.returncode, 69)
        self.assertIn("192.0.2.1", p.stderr)
        self.assertEqual(os.path.getmtime(config), before, "nothing applied")


def main():
    global B, RIG
    problems = harness.needs_ebpf("the eBPF endpoint probe, the cgroup")
    if len(os.sched_getaffinity(0)) < 2:
        problems.append("needs 2 CPUs (one for the canary, one for the client)")
    B = harness.prologue(sys.argv[0], ["headroomd", "headroomctl",
                                       "examples/shedding-server/headroom-example-shedding-server"], problems)
    try:
        cgroup = spike_rig.ServiceCgroup("headroom-tune-canary")
    except OSError as e:
        sys.exit(harness.unable(sys.argv[0], [str(e)]))
    RIG = spike_rig.Rig(B.build_dir, cgroup)
    return harness.run_suite(ValidateTest, cleanup=cgroup.remove)


if __name__ == "__main__":
    sys.exit(main())
