#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Endpoint instances (docs/endpoints.md, "Instances") against the real kernel.

    instances_test.py SOURCE_DIR BUILD_DIR

Two "pods" made by the test: two network namespaces (each its own loopback)
and two cgroups (cpu, cpuacct and memory; pod B with a CPU quota of half a
CPU), each running hr-test-server on the *same port*, each loaded by its own
hr-test-load inside its namespace. headroomd (one [[endpoint]] on that port)
must publish endpoint.web@<pod>.orca for each:

  - each instance report matches its own server's traffic: the request rate
    within 10 % of its client's, the share over the target within 2 points of
    its client's measure of the same window (hr-test-load --completions-file),
    and cpu_utilization within 0.05 of the pod's
    cgroup's usage over its capacity (B's quota);
  - both program sets (sockets, syscalls) attribute by namespace;
  - a server that exits: its report says so (headroom.instance.gone) within 3
    intervals and is removed after agent.instance_grace; started again, it is
    an instance again;
  - agent.endpoint_instances = 1 with two pods: one instance report, one
    warning, the aggregate still counts both;
  - a pod whose cgroup disappears under its server: one log line, the report
    stays valid and never reads a utilization of 0;
  - a pod whose cgroup has no memory controller (v1: cpu and cpuacct only;
    v2: a parent that hands down cpu only): its own CPU all the same, no
    cgroup error.

Needs root (eBPF, namespaces, cgroups); without it it skips (exit 77), saying
why; with CI=true a skip is a failure.
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "oob"))
import harness  # noqa: E402  (tests/support/harness.py)
from harness import Fatal, Proc, figure, free_port, note, tail, toml_string, wait_until  # noqa: E402
import orca_oob  # noqa: E402  (the OrcaLoadReport codec)

HEADROOMD = ""
CGROOT = "/sys/fs/cgroup"
INTERVAL_S = 0.2


def cgroup_v2():
    return os.path.exists(os.path.join(CGROOT, "cgroup.controllers"))


class Pod:
    """A network namespace with its loopback up and a cgroup of its own."""

    def __init__(self, case, tmp, name, quota_cpus=None, memory=True):
        self.case, self.tmp, self.name = case, tmp, name
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        subprocess.run(["ip", "netns", "add", name], check=True)
        case.addCleanup(lambda: subprocess.run(["ip", "netns", "del", name], capture_output=True))
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        if cgroup_v2():
            # Without memory: a parent that hands its children the cpu controller only.
            parent = CGROOT if memory else os.path.join(CGROOT, name + "-cpuonly")
            if not memory:
                os.makedirs(parent, exist_ok=True)
                with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                    f.write("+cpu")
            self.dirs = [os.path.join(parent, name)]
        else:
            self.dirs = [os.path.join(CGROOT, c, name) for c in ("cpu", "cpuacct") + (("memory",) if memory else ())]
        for d in self.dirs:
            os.makedirs(d, exist_ok=True)
        case.addCleanup(self.remove_cgroups)
        if cgroup_v2() and not memory:
            case.addCleanup(lambda: os.rmdir(os.path.dirname(self.dirs[0])))
        self.capacity = os.cpu_count()
        if quota_cpus is not None:
            if cgroup_v2():
                with open(os.path.join(self.dirs[0], "cpu.max"), "w") as f:
                    f.write(f"{int(quota_cpus * 100000)} 100000")
            else:
                with open(os.path.join(self.dirs[0], "cpu.cfs_quota_us"), "w") as f:
                    f.write(str(int(quota_cpus * 100000)))
            self.capacity = min(self.capacity, quota_cpus)
        self.server = None

    def remove_cgroups(self):
        for d in self.dirs:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids = f.read().split()
                root = CGROOT if cgroup_v2() else os.path.dirname(d)
                for pid in pids:
                    with open(os.path.join(root, "cgroup.procs"), "w") as f:
                        f.write(pid)
                os.rmdir(d)
            except OSError:
                pass

    def run(self, name, argv, into_cgroup=False):
        p = Proc(name, ["ip", "netns", "exec", self.name] + [str(a) for a in argv], self.tmp, self.case)
        if into_cgroup:  # ip netns exec execs: the pid is the program's
            for d in self.dirs:
                with open(os.path.join(d, "cgroup.procs"), "w") as f:
                    f.write(str(p.pid))
        return p

    def start_server(self, port, *args):
        self.server = self.run(f"server-{self.name}", [harness.TEST_SERVER, "--port", port] + list(args),
                               into_cgroup=True)
        wait_until(lambda: self.listening(port), 10, f"hr-test-server listening in {self.name}")
        return self.server

    def listening(self, port):
        out = subprocess.run(["ip", "netns", "exec", self.name, "ss", "-Htln", f"sport = :{port}"],
                             capture_output=True, text=True).stdout
        return str(port) in out

    def cpu_usage_s(self):
        """The cgroup's CPU time so far, seconds."""
        if cgroup_v2():
            with open(os.path.join(self.dirs[0], "cpu.stat")) as f:
                return int(re.search(r"usage_usec (\d+)", f.read()).group(1)) / 1e6
        with open(os.path.join(self.dirs[1], "cpuacct.usage")) as f:
            return int(f.read()) / 1e9


class Agent:
    def __init__(self, case, tmp, port, extra="", programs=None):
        self.orca_dir = os.path.join(tmp, "orca")
        config = os.path.join(tmp, "headroom.toml")
        with open(config, "w") as f:
            f.write("[agent]\norca_dir = " + toml_string(self.orca_dir) + f"\ninterval = \"{int(INTERVAL_S * 1000)}ms\"\n"
                    "smoothing = \"4s\"\ninstance_grace = \"2s\"\n" + extra +
                    f"[[endpoint]]\nname = \"web\"\nport = {port}\ntarget = \"20ms\"\nmax = \"200ms\"\n")
        env = ["env", "HEADROOM_EBPF_PROGRAMS=" + programs] if programs else []
        self.proc = Proc("headroomd", env + [HEADROOMD, "--config", config], tmp, case)
        wait_until(lambda: self.alive() and os.path.exists(os.path.join(self.orca_dir, "node.orca")), 10,
                   "headroomd's first report")

    def alive(self):
        if not self.proc.alive():
            raise Fatal(f"headroomd exited with {self.proc.p.returncode}:\n{tail(self.proc.err())}")
        return True

    def instances(self):
        self.alive()
        return sorted(n[len("endpoint.web@"):-len(".orca")] for n in os.listdir(self.orca_dir)
                      if n.startswith("endpoint.web@") and n.endswith(".orca"))

    def report(self, scope):
        self.alive()
        with open(os.path.join(self.orca_dir, scope + ".orca"), "rb") as f:
            return orca_oob.decode_report(f.read())


def load_json(proc):
    proc.wait(60)
    return json.loads(proc.out().strip().splitlines()[-1])


class Instances(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.make_temp_dir(self)
        self.port = free_port()

    def pods(self):
        a = Pod(self, self.tmp, "hr-inst-a")
        b = Pod(self, self.tmp, "hr-inst-b", quota_cpus=0.5)
        return a, b

    def two_loaded_pods(self, programs=None, seconds=12):
        a, b = self.pods()
        agent = Agent(self, self.tmp, self.port, programs=programs)
        # A: 1 ms answers, 0.5 ms of CPU each; B: half its answers after 60 ms, 3 ms of CPU each.
        a.start_server(self.port, "--delay", "/=1ms", "--cpu", "/=500us")
        b.start_server(self.port, "--delay", "/slow=60ms", "--cpu", "/=3ms")
        la = a.run("load-a", [harness.TEST_LOAD, "--port", self.port, "--connections", 4, "--rate", 300,
                              "--duration", f"{seconds}s", "--over", "20ms", "--completions-file",
                              self.completions(a)])
        lb = b.run("load-b", [harness.TEST_LOAD, "--port", self.port, "--connections", 4, "--rate", 40,
                              "--path", "/", "--path", "/slow", "--duration", f"{seconds}s", "--over", "20ms",
                              "--completions-file", self.completions(b)])
        return a, b, agent, la, lb

    def completions(self, pod):
        return os.path.join(self.tmp, f"completions-{pod.name}")

    def client_share_in_window(self, pod, report, over_s=0.020):
        """The share of the client's requests over target in the window the
        report covers, counted as the agent counts (docs/endpoints.md,
        "Windows"): those that ended in it, and those still unanswered at
        its end and older than the target by then. The client's whole-run
        share would compare another stretch of time: under a busy machine
        the share moves from second to second."""
        nm = report["named_metrics"]
        end = nm["headroom.timestamp_ms"] / 1000 - (time.time() - time.monotonic())
        start = end - nm["headroom.window.seconds"]
        ended = late = 0
        with open(self.completions(pod)) as f:
            for line in f:
                done_ns, latency_us = line.split()
                done, latency = int(done_ns) / 1e9, float(latency_us) / 1e6
                if start < done <= end:
                    ended += 1
                    late += latency > over_s
                elif done > end and done - latency < end - over_s:
                    ended += 1  # in flight at the window's end, already late
                    late += 1
        return late / ended if ended else 0.0, ended

    def test_each_pod_on_the_same_port_gets_its_own_report(self):
        a, b, agent, la, lb = self.two_loaded_pods()
        wait_until(lambda: agent.instances() == ["hr-inst-a", "hr-inst-b"], 10, "both instance reports")
        time.sleep(6)  # past the 4 s window and smoothing
        usage0 = {p.name: p.cpu_usage_s() for p in (a, b)}
        t0 = time.monotonic()
        time.sleep(4)
        reports = {p.name: agent.report("endpoint.web@" + p.name) for p in (a, b)}
        elapsed = time.monotonic() - t0
        cgroup_cpu = {p.name: (p.cpu_usage_s() - usage0[p.name]) / elapsed / p.capacity for p in (a, b)}
        clients = {"hr-inst-a": load_json(la), "hr-inst-b": load_json(lb)}
        for p in (a, b):
            r, c = reports[p.name], clients[p.name]
            rps = r.get("rps_fractional", 0.0)
            share = r["utilization"].get("latency.slo_target", 0.0)
            run_share = c["over"]["20ms"] if isinstance(c["over"], dict) else c["over"]
            client_share, counted = self.client_share_in_window(p, r)
            cpu = r.get("cpu_utilization", 0.0)
            figure(f"{p.name}: rps {rps:.1f} (client {c['rps']:.1f}), over 20 ms {share:.3f} (client "
                   f"{client_share:.3f} of the same window's {counted} requests, {run_share:.3f} over its whole run), "
                   f"cpu {cpu:.3f} (cgroup {cgroup_cpu[p.name]:.3f}), application "
                   f"{r.get('application_utilization', 0):.3f}")
            self.assertLess(abs(rps - c["rps"]), 0.10 * c["rps"], (p.name, r, c))
            self.assertLess(abs(share - client_share), 0.02, (p.name, r, c))
            self.assertLess(abs(cpu - cgroup_cpu[p.name]), 0.05, (p.name, r, cgroup_cpu))
            self.assertGreater(r.get("application_utilization", 0), 0)
            netns = os.stat(f"/run/netns/{p.name}").st_ino
            self.assertEqual(int(r["named_metrics"]["headroom.instance.netns"]), netns)
        # The aggregate counts both.
        agg = agent.report("endpoint.web")
        total = clients["hr-inst-a"]["rps"] + clients["hr-inst-b"]["rps"]
        self.assertLess(abs(agg.get("rps_fractional", 0) - total), 0.10 * total, agg)

    def test_the_syscall_set_attributes_by_namespace_too(self):
        a, b, agent, la, lb = self.two_loaded_pods(programs="syscalls", seconds=8)
        wait_until(lambda: agent.instances() == ["hr-inst-a", "hr-inst-b"], 10, "both instance reports")
        time.sleep(5)
        ra, rb = agent.report("endpoint.web@hr-inst-a"), agent.report("endpoint.web@hr-inst-b")
        ca, cb = load_json(la), load_json(lb)
        figure(f"syscall set: a rps {ra.get('rps_fractional', 0):.1f} (client {ca['rps']:.1f}), b rps "
               f"{rb.get('rps_fractional', 0):.1f} (client {cb['rps']:.1f})")
        self.assertLess(abs(ra.get("rps_fractional", 0) - ca["rps"]), 0.10 * ca["rps"])
        self.assertLess(abs(rb.get("rps_fractional", 0) - cb["rps"]), 0.10 * cb["rps"])

    def test_an_instance_that_exits_says_so_then_goes_and_comes_back(self):
        a, b = self.pods()
        agent = Agent(self, self.tmp, self.port)
        a.start_server(self.port, "--delay", "/=1ms")
        b.start_server(self.port, "--delay", "/=1ms")
        wait_until(lambda: agent.instances() == ["hr-inst-a", "hr-inst-b"], 10, "both instance reports")
        b.server.stop()
        t0 = time.monotonic()
        gone = wait_until(lambda: agent.report("endpoint.web@hr-inst-b")["named_metrics"].get("headroom.instance.gone"),
                          5, "the gone instance's report")
        said = time.monotonic() - t0
        figure(f"an exited server's report says gone after {said:.2f} s ({said / INTERVAL_S:.1f} intervals)")
        self.assertEqual(gone, 1.0)
        self.assertLessEqual(said, 3 * INTERVAL_S + 0.3)
        self.assertEqual(agent.report("endpoint.web@hr-inst-b")["named_metrics"].get("headroom.stopped"), 1.0)
        self.assertNotIn("headroom.instance.gone", agent.report("endpoint.web@hr-inst-a")["named_metrics"])
        wait_until(lambda: agent.instances() == ["hr-inst-a"], 5, "the gone instance's report removed")
        removed = time.monotonic() - t0
        figure(f"removed {removed:.2f} s after the server exited (agent.instance_grace = 2s)")
        self.assertGreaterEqual(removed, 2.0)
        b.start_server(self.port, "--delay", "/=1ms")
        wait_until(lambda: agent.instances() == ["hr-inst-a", "hr-inst-b"], 5, "the restarted server's instance")
        wait_until(lambda: "headroom.instance.gone" not in agent.report("endpoint.web@hr-inst-b")["named_metrics"],
                   5, "the restarted instance serving")

    def test_past_the_bound_requests_count_in_the_aggregate_only(self):
        a, b = self.pods()
        agent = Agent(self, self.tmp, self.port, extra="endpoint_instances = 1\n")
        a.start_server(self.port, "--delay", "/=1ms")
        b.start_server(self.port, "--delay", "/=1ms")
        la = a.run("load-a", [harness.TEST_LOAD, "--port", self.port, "--rate", 100, "--duration", "6s"])
        lb = b.run("load-b", [harness.TEST_LOAD, "--port", self.port, "--rate", 100, "--duration", "6s"])
        wait_until(lambda: len(agent.instances()) == 1, 10, "one instance report")
        time.sleep(4.5)
        self.assertEqual(len(agent.instances()), 1, agent.instances())
        agg = agent.report("endpoint.web")
        ca, cb = load_json(la), load_json(lb)
        self.assertLess(abs(agg.get("rps_fractional", 0) - ca["rps"] - cb["rps"]), 0.15 * (ca["rps"] + cb["rps"]), agg)
        self.assertEqual(agent.proc.err().count("more than agent.endpoint_instances = 1 instances"), 1,
                         tail(agent.proc.err()))

    def test_an_oob_listener_inside_each_pod_serves_that_pods_report(self):
        a, b = self.pods()
        oob_port = free_port()
        agent = Agent(self, self.tmp, self.port, extra=f"[oob]\ninstance_listen = \"127.0.0.1:{oob_port}\"\n")
        a.start_server(self.port, "--delay", "/=1ms")
        b.start_server(self.port, "--delay", "/=1ms")
        a.run("load-a", [harness.TEST_LOAD, "--port", self.port, "--rate", 200, "--duration", "10s"])
        b.run("load-b", [harness.TEST_LOAD, "--port", self.port, "--rate", 40, "--duration", "10s"])
        wait_until(lambda: agent.instances() == ["hr-inst-a", "hr-inst-b"], 10, "both instance reports")
        time.sleep(4)
        for pod, rate in ((a, 200), (b, 40)):
            out = subprocess.run(["ip", "netns", "exec", pod.name, sys.executable,
                                  os.path.join(HERE, "..", "oob", "orca_oob.py"), f"127.0.0.1:{oob_port}",
                                  "--count", "2", "--timeout", "5"], capture_output=True, text=True, timeout=20)
            self.assertIn("after --count 2", out.stdout + out.stderr, out.stderr + tail(agent.proc.err()))
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            self.assertTrue(lines, out.stdout + out.stderr)
            seen = json.loads(lines[-1])["report"]
            figure(f"OOB inside {pod.name}: rps {seen.get('rps_fractional', 0):.1f} (its load {rate}/s)")
            self.assertEqual(int(seen["named_metrics"]["headroom.instance.netns"]),
                             os.stat(f"/run/netns/{pod.name}").st_ino, seen)
            self.assertLess(abs(seen.get("rps_fractional", 0) - rate), 0.15 * rate, seen)

    def test_a_pod_whose_cgroup_has_no_memory_controller_still_has_its_own_cpu(self):
        pod = Pod(self, self.tmp, "hr-inst-nomem", quota_cpus=0.5, memory=False)
        agent = Agent(self, self.tmp, self.port)
        pod.start_server(self.port, "--delay", "/=1ms", "--cpu", "/=2ms")
        load = pod.run("load-nomem", [harness.TEST_LOAD, "--port", self.port, "--rate", 100, "--duration", "10s"])
        wait_until(lambda: agent.instances() == ["hr-inst-nomem"], 10, "the instance report")
        time.sleep(3)
        usage0, t0 = pod.cpu_usage_s(), time.monotonic()
        time.sleep(3)
        r = agent.report("endpoint.web@hr-inst-nomem")
        cgroup_cpu = (pod.cpu_usage_s() - usage0) / (time.monotonic() - t0) / pod.capacity
        figure(f"no memory controller: cpu {r.get('cpu_utilization', 0):.3f} (cgroup {cgroup_cpu:.3f}), mem "
               f"{r.get('mem_utilization')}, application {r.get('application_utilization', 0):.3f}")
        self.assertLess(abs(r.get("cpu_utilization", 0) - cgroup_cpu), 0.05, (r, cgroup_cpu))
        self.assertGreater(r.get("application_utilization", 0), 0, r)
        self.assertGreaterEqual(r.get("application_utilization", 0), r.get("cpu_utilization", 0), r)
        self.assertNotIn("headroom.instance.cgroup_unavailable", r["named_metrics"], r)
        self.assertNotIn("cannot be read", agent.proc.err(), tail(agent.proc.err()))
        load.wait(30)

    def test_a_cgroup_that_disappears_is_said_and_never_reads_idle(self):
        a, _ = self.pods()
        agent = Agent(self, self.tmp, self.port)
        a.start_server(self.port, "--delay", "/=1ms")
        la = a.run("load-a", [harness.TEST_LOAD, "--port", self.port, "--rate", 100, "--duration", "8s"])
        wait_until(lambda: agent.instances() == ["hr-inst-a"], 10, "the instance report")
        time.sleep(1)
        a.remove_cgroups()  # its server moved to the root cgroup, its own removed
        wait_until(lambda: "its cgroup can no longer be read" in agent.proc.err(), 5, "the log line")
        self.assertEqual(agent.proc.err().count("its cgroup can no longer be read"), 1, tail(agent.proc.err()))
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            r = agent.report("endpoint.web@hr-inst-a")
            self.assertGreater(r.get("application_utilization", 0), 0, r)
            self.assertGreater(r.get("rps_fractional", 0), 0, r)
            time.sleep(INTERVAL_S / 2)
        la.stop()


def main():
    global HEADROOMD
    missing = harness.needs_ebpf("loading eBPF programs, making network namespaces and cgroups")
    missing += harness.needs_commands(("ip", "ss"), "iproute2")
    build = harness.prologue("instances_test.py", ("headroomd", "test_server", "test_load"), missing)
    HEADROOMD = build.headroomd
    return harness.run_suite(Instances, only_env="INSTANCES_ONLY")


if __name__ == "__main__":
    sys.exit(main())
