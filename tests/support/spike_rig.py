# SPDX-License-Identifier: Apache-2.0
"""The spike rig that tests/buffer/spike_test.py and bench/bench_buffer.py
share: the reference shedding server (examples/shedding-server/) in a cgroup
of its own confined to one CPU, headroomd publishing for it (node.cgroup = that
cgroup, one [[endpoint]] on its port), and headroomctl buffer sending a spike.

Confining the service to one CPU makes the node report's CPU figure the
service's own, as on a machine where it has a dedicated core, while the load
generator and headroomd run on the other CPUs and do not count."""

import json
import os
import re
import subprocess
import threading
import time

import harness
from harness import Proc, wait_until

CGROUP = "headroom-spike-rig"


class ServiceCgroup:
    """A cgroup confined to one CPU (cpuset), v1 or v2; remove() at the end.
    Raises OSError when the machine has no cpuset hierarchy to use."""

    def __init__(self, name=CGROUP):
        self.name = name
        self.version = None
        self.dirs = []
        self.cpu = str(max(os.sched_getaffinity(0)))  # the last CPU: the client keeps the others
        if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            with open("/sys/fs/cgroup/cgroup.controllers") as f:
                if "cpuset" not in f.read().split():
                    raise OSError("cgroup v2 without the cpuset controller")
            self.write("/sys/fs/cgroup", "cgroup.subtree_control", "+cpuset +cpu +memory")
            d = os.path.join("/sys/fs/cgroup", name)
            os.makedirs(d, exist_ok=True)
            self.dirs = [d]
            self.write(d, "cpuset.cpus", self.cpu)
            self.version = 2
        elif os.path.isdir("/sys/fs/cgroup/cpuset"):
            for c in ("cpuset", "cpu", "cpuacct", "memory"):
                d = os.path.join("/sys/fs/cgroup", c, name)
                os.makedirs(d, exist_ok=True)
                self.dirs.append(d)
            self.write(self.dirs[0], "cpuset.cpus", self.cpu)
            self.write(self.dirs[0], "cpuset.mems", "0")
            self.version = 1
        else:
            raise OSError("no cgroup hierarchy with cpuset under /sys/fs/cgroup")

    @staticmethod
    def write(d, name, value):
        with open(os.path.join(d, name), "w") as f:
            f.write(value)

    def add(self, pid):
        for d in self.dirs:
            self.write(d, "cgroup.procs", str(pid))

    def remove(self):
        for d in self.dirs:
            harness.remove_cgroup(d)


class Rig:
    """Paths of the built programs and the service's cgroup."""

    def __init__(self, build, cgroup):
        self.headroomd = os.path.join(build, "agent", "headroomd")
        self.headroomctl = os.path.join(build, "agent", "headroomctl")
        self.server = os.path.join(build, "examples", "shedding-server", "headroom-example-shedding-server")
        self.test_load = os.path.join(build, "tests", "tools", "hr-test-load")
        self.cgroup = cgroup

    def missing(self):
        return [p for p in (self.headroomd, self.headroomctl, self.server, self.test_load) if not os.access(p, os.X_OK)]

    def start_server(self, tmp, orca, cost="1ms", extra=(), case=None, name="shedding-server"):
        """The shedding server in the service's cgroup; (Proc, port)."""
        proc = Proc(name, [self.server, "--port", "0", "--cost", cost, "--workers", "1", "--orca-dir", orca,
                           "--scope", "endpoint.spike", *extra], tmp, case)
        self.cgroup.add(proc.pid)

        def port():
            if not proc.alive():
                raise harness.Fatal(f"{name} exited: " + proc.err())
            m = re.search(r"^port=(\d+)$", proc.out(), re.M)
            return int(m.group(1)) if m else None
        return proc, wait_until(port, 10, f"{name}'s port=N line")

    def capacity(self, port, seconds=3):
        """Closed loop, 8 connections, before any report exists (nothing shed): requests per second."""
        p = subprocess.run([self.test_load, "--port", str(port), "--connections", "8", "--duration", f"{seconds}s"],
                           capture_output=True, text=True, timeout=30 + seconds)
        if p.returncode != 0:
            raise AssertionError("hr-test-load: " + p.stderr)
        got = json.loads(p.stdout)
        if got["errors"]:
            raise AssertionError(f"capacity run had errors: {got}")
        return got["rps"]

    def start_headroomd(self, tmp, orca, port, target, slo_max, agent_keys="", endpoint_keys="", case=None):
        """headroomd for the server's port; waits for the endpoint's first report and a settled window.
        endpoint_keys: more lines of the [[endpoint]] table (e.g. "max_concurrency = 16\n")."""
        config = os.path.join(tmp, "headroom.toml")
        with open(config, "w") as f:
            f.write(f'[agent]\norca_dir = {harness.toml_string(orca)}\n{agent_keys}'
                    f'[node]\ncgroup = "{self.cgroup.name}"\ncgroup_version = {self.cgroup.version}\n'
                    f'[[endpoint]]\nname = "spike"\nport = {port}\ntarget = "{target}"\nmax = "{slo_max}"\n{endpoint_keys}')
        proc = Proc("headroomd", [self.headroomd, "--config", config], tmp, case)
        report = os.path.join(orca, "endpoint.spike.orca")

        def published():
            if not proc.alive():
                raise harness.Fatal("headroomd exited: " + proc.err())
            return os.path.exists(report)
        wait_until(published, 15, "endpoint.spike.orca")
        time.sleep(1.5)  # idle reports over a whole window before the load starts
        return proc

    def spike(self, port, orca, baseline, multiple, before, length, after, slo_max, svg=None, extra=()):
        """headroomctl buffer --spike: (exit code, its JSON)."""
        argv = [self.headroomctl, "buffer", f"127.0.0.1:{port}/", "--baseline", f"{baseline:.1f}",
                "--spike", str(multiple), "--before", before, "--spike-for", length, "--after", after,
                "--settle", "1s", "--slo", slo_max, "--reject-within", "5ms", "--timeout", "2s",
                "--orca-dir", orca, "--scope", "endpoint.spike", "--json", *extra]
        if svg:
            argv += ["--svg", svg]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if p.returncode not in (0, 1):
            raise AssertionError(f"headroomctl buffer exited {p.returncode}: {p.stderr}")
        return p.returncode, json.loads(p.stdout)


class ReportTrace:
    """Reads a report file with `headroomctl cat --json` every ~50 ms in a
    thread, from start() to stop(): rows of (seconds since start, report)."""

    def __init__(self, headroomctl, path, every=0.05):
        self.argv = [headroomctl, "cat", "--json", path]
        self.every = every
        self.rows = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.t0 = None

    def start(self):
        self.t0 = time.monotonic()
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self.thread.join(10)
        return self.rows

    def run(self):
        while not self.stopping.is_set():
            p = subprocess.run(self.argv, capture_output=True, text=True, timeout=10)
            if p.returncode == 0:
                self.rows.append((time.monotonic() - self.t0, json.loads(p.stdout)["report"]))
            self.stopping.wait(self.every)


def served_share(doc, name):
    """Of the class's requests over every measured step, the share served."""
    offered = served = 0
    for st in doc["steps"]:
        c = st["classes"][name]
        offered += c["offered"]
        served += c["served"]
    return served / offered if offered else 0.0
