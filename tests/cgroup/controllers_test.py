#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""node.cgroup naming a real cgroup v1 group that is in some controllers'
hierarchies only (issue 28): each controller is read on its own.

  1. a group under cpu and cpuacct, not memory, a busy process in it with a
     quota of half a CPU: node.orca's cpu is its own (capacity 0.5, busy about
     1.0); memory is unavailable alone (absent, headroom.cgroup.memory_unavailable
     = 1), with one log line naming the memory directory and what to do;
  2. a group under memory only, a process holding 64 MiB in it under a
     256 MiB limit: memory is its own; cpu unavailable alone, one line.

Usage: controllers_test.py SOURCE_DIR BUILD_DIR. Needs root and a cgroup v1
host; without root it skips (exit 77), with CI=true it fails.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import harness  # noqa: E402  (tests/support/harness.py)
from harness import Proc, figure, tail, toml_string, wait_until  # noqa: E402

ROOT = "/sys/fs/cgroup"
BUILD = None
MIB = 1 << 20


def hierarchy(controller):
    """Where the v1 hierarchy of `controller` is mounted (alone or as cpu,cpuacct)."""
    for d in (os.path.join(ROOT, controller), os.path.join(ROOT, "cpu,cpuacct")):
        if os.path.isdir(d):
            return d
    return None


def make_group(case, name, controllers):
    """The group `name` in each of `controllers`' hierarchies; removed at the end."""
    dirs = []
    for c in controllers:
        d = os.path.join(hierarchy(c), name)
        if d not in dirs:
            os.mkdir(d)
            dirs.append(d)

    def remove():
        for d in dirs:
            harness.remove_cgroup(d, pause=0.05)
    case.addCleanup(remove)
    return dirs


def start_in(case, tmp, name, dirs, code):
    """python3 -c `code`, moved into `dirs` before it runs `code`."""
    join = " && ".join(f"echo $$ > {d}/cgroup.procs" for d in dirs)
    return Proc(name, ["/bin/sh", "-c", f"{join} && exec /usr/bin/python3 -c '{code}'"], tmp, case)


class Headroomd:
    def __init__(self, case, tmp, cgroup):
        self.orca = os.path.join(tmp, "orca")
        config = os.path.join(tmp, "headroom.toml")
        with open(config, "w") as f:
            f.write(f"[agent]\norca_dir = {toml_string(self.orca)}\ninterval = \"250ms\"\nsmoothing = \"0s\"\n"
                    f"ebpf = \"off\"\n[node]\ncgroup = {toml_string(cgroup)}\n")
        self.proc = Proc("headroomd", [BUILD.headroomd, "--config", config], tmp, case)

    def report(self):
        out = subprocess.run([BUILD.headroomctl, "cat", "--json", os.path.join(self.orca, "node.orca")],
                             capture_output=True, text=True, timeout=10)
        return json.loads(out.stdout)["report"] if out.returncode == 0 else None

    def settled(self, key, seconds=10):
        """The report once `key` has been in its utilization for a second."""
        wait_until(lambda: (self.report() or {}).get("utilization", {}).get(key) is not None, seconds,
                   f"node.orca with utilization[{key}]\n{tail(self.proc.err())}")
        time.sleep(1.0)
        return self.report()

    def stop(self, case):
        self.proc.signal(signal.SIGTERM)
        case.assertEqual(self.proc.wait(10), 0, tail(self.proc.err()))
        return self.proc.err()


def lines_with(log, text):
    return [ln for ln in log.splitlines() if text in ln]


class CgroupControllersTest(unittest.TestCase):

    def setUp(self):
        self.tmp = harness.make_temp_dir(self, "headroom-cgroup-controllers-")
        os.chmod(self.tmp, 0o755)
        self.name = f"hr-cgctl-{os.getpid()}-{self._testMethodName[5:11]}"

    def test_1_cpu_and_cpuacct_without_memory(self):
        dirs = make_group(self, self.name, ("cpu", "cpuacct"))
        cpu_dir = os.path.join(hierarchy("cpu"), self.name)
        # Short periods: a 250 ms window holds ten, so whether it ends before
        # or after a period's run moves busy by a tenth at most.
        with open(os.path.join(cpu_dir, "cpu.cfs_period_us"), "w") as f:
            f.write("25000")
        with open(os.path.join(cpu_dir, "cpu.cfs_quota_us"), "w") as f:
            f.write("12500")
        start_in(self, self.tmp, "spinner", dirs, "while True: pass")
        d = Headroomd(self, self.tmp, self.name)
        r = d.settled("cpu")
        log = d.stop(self)
        nm = r["named_metrics"]
        figure(f"cpu+cpuacct group: cpu {r['utilization']['cpu']:.3f}, busy {nm['headroom.cpu.busy']:.3f}, "
               f"capacity {nm['headroom.cpu.capacity']}, utilization keys {sorted(r['utilization'])}")
        self.assertEqual(nm["headroom.cpu.capacity"], 0.5, "its quota")
        self.assertGreater(nm["headroom.cpu.busy"], 0.7, "a spinning process under half a CPU")
        self.assertLess(nm["headroom.cpu.busy"], 1.15)
        self.assertGreater(r["cpu_utilization"], 0.7)
        self.assertNotIn("memory", r["utilization"], "not the host's memory in its place")
        self.assertEqual(nm.get("headroom.cgroup.memory_unavailable"), 1)
        self.assertNotIn("headroom.cgroup.cpu_unavailable", nm)
        missing = lines_with(log, "memory unavailable")
        self.assertEqual(len(missing), 1, log)
        self.assertIn(os.path.join(ROOT, "memory", self.name), missing[0])
        self.assertIn("MemoryAccounting=yes", missing[0])
        self.assertEqual(lines_with(log, "cgroup unavailable") + lines_with(log, "cpu unavailable"), [], log)

    def test_2_memory_without_cpu(self):
        dirs = make_group(self, self.name, ("memory",))
        with open(os.path.join(dirs[0], "memory.limit_in_bytes"), "w") as f:
            f.write(str(256 * MIB))
        start_in(self, self.tmp, "holder", dirs,
                 "import time\nb = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(600)")
        wait_until(lambda: int(open(os.path.join(dirs[0], "memory.usage_in_bytes")).read()) >= 64 * MIB, 10,
                   "64 MiB charged to the group")
        d = Headroomd(self, self.tmp, self.name)
        r = d.settled("memory")
        log = d.stop(self)
        nm = r["named_metrics"]
        used = nm["headroom.memory.used_bytes"]
        figure(f"memory group: memory {r['utilization']['memory']:.4f}, used {used / MIB:.1f} MiB, "
               f"utilization keys {sorted(r['utilization'])}")
        self.assertGreaterEqual(used, 64 * MIB)
        self.assertAlmostEqual(r["utilization"]["memory"], used / (256 * MIB), delta=0.02)
        self.assertNotIn("cpu", r["utilization"], "not the host's CPU in its place")
        self.assertEqual(r.get("cpu_utilization", 0), 0)
        self.assertEqual(nm.get("headroom.cgroup.cpu_unavailable"), 1, "so that 0 does not read as idle")
        self.assertNotIn("headroom.cgroup.memory_unavailable", nm)
        missing = lines_with(log, "cpu unavailable")
        self.assertEqual(len(missing), 1, log)
        self.assertIn(os.path.join(hierarchy("cpuacct"), self.name), missing[0])
        self.assertIn("not in the cpuacct hierarchy", missing[0])
        self.assertEqual(lines_with(log, "cgroup unavailable") + lines_with(log, "memory unavailable"), [], log)


def main():
    global BUILD
    problems = harness.needs_root("cgroups")
    if not problems and os.path.exists(os.path.join(ROOT, "cgroup.controllers")):
        problems.append("a cgroup v1 host (this one is v2; the v2 cases are the fixtures' in probes_cgroup_test)")
    if not problems and not all(hierarchy(c) for c in ("cpu", "cpuacct", "memory")):
        problems.append(f"the cpu, cpuacct and memory hierarchies under {ROOT}")
    BUILD = harness.prologue("controllers_test.py", ("headroomd", "headroomctl"), problems)
    return harness.run_suite(CgroupControllersTest)


if __name__ == "__main__":
    sys.exit(main())
