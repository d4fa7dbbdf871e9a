#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""grpc-js's weighted_round_robin, a real consumer, weighing two backends by
headroom's instance reports (issue 27).

    wrr_test.py SOURCE_DIR BUILD_DIR

Two backends, A and B (BUILD_DIR/tests/hr-wrr-backend), each in a cgroup of
its own (cgroup v1: cpu and cpuacct; v2: one cgroup with the cpu
controller), each registering headroom's OrcaService for its endpoint with
the default, its own instance: endpoint.<name>@host.orca, found by its
network namespace. headroomd (interval 250 ms) traces both ports
(protocol = "http2", target 40 ms, max 1 s). A grpc-js client
(tests/oob/wrr_client.js; @grpc/grpc-js 1.14 from packaging/install-grpc-js.sh)
keeps 8 calls in flight on target ipv4:127.0.0.1:PA,127.0.0.1:PB, first with
round_robin, then with weighted_round_robin (OOB reports every 0.5 s, 1 s
blackout, weights every 0.2 s; warmed up past the blackout, measured once
the weights have settled), and counts the calls each backend answered.

Scenarios, each with fresh backends, headroomd and report directory:
  (a) slow dependency: B answers every 2nd call after 60 ms, A at once.
      Half of B's calls miss the 40 ms target, so B's application
      utilization is at least 0.5; A's is its cgroup's CPU. WRR must give B
      clearly less than round_robin does (share_wrr < share_rr - 0.1).
  (b) CPU cost: every call burns 1 ms of CPU on A, 2 ms on B. Each
      instance's utilization is its own cgroup's CPU, so weight = qps / cpu
      = 1 / cost per call: WRR must give B well under round_robin's half
      (about 1/3; asserted below 0.45).
Throughout, a reader decodes both instance reports every 50 ms: while the
backends serve, neither's application_utilization is ever 0 (grpc-js would
then give it no weight), each names its backend's network namespace
(headroom.instance.netns), and each backend's OrcaService says at exit that
it served its own instance, not the aggregate.

The shares go to stderr as figures (docs/oob.md quotes them).
HEADROOM_WRR_SERVED=aggregate makes the backends serve their endpoint's
aggregate (endpoint.<name>.orca, whose utilization holds the node's CPU)
instead, the comparison docs/oob.md quotes too; scenario (b) is then
expected to fail. HEADROOM_WRR_ONLY=NAME runs the tests whose id contains
NAME. Needs root
(eBPF, cgroups), a kernel with BTF, node and grpc-js in
$HEADROOM_CACHE_DIR/npm (default /var/cache/headroom-build/npm); without
them it skips loudly (77), with CI=true it fails.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import harness  # noqa: E402  (tests/support/harness.py)
from harness import Fatal, Proc, figure, note, tail, toml_string, wait_until  # noqa: E402
import orca_oob  # noqa: E402  (the OrcaLoadReport codec, checked against protoc)

BACKEND = "tests/hr-wrr-backend"
CLIENT = os.path.join(HERE, "wrr_client.js")
PROTO = os.path.join(HERE, "wrr_backend.proto")
INTERVAL = "250ms"
TARGET_MS, MAX_MS = 40, 1000
INFLIGHT = 8
RR_WARMUP_S, RR_SECONDS = 1, 4
WRR_WARMUP_S, WRR_SECONDS = 4, 5  # 1 s blackout, then the weights settle
CGROUP_PREFIX = "headroom-wrr-test-"
SERVED = os.environ.get("HEADROOM_WRR_SERVED", "own")  # the backends' --instance
BUILD = None
NODE_MODULES = ""


def cache_dir():
    if os.environ.get("HEADROOM_CACHE_DIR"):
        return os.environ["HEADROOM_CACHE_DIR"]
    if os.geteuid() == 0:
        return "/var/cache/headroom-build"
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "headroom-build")


def grpc_js_problems(node_modules):
    """What is missing to run grpc-js; [] when it is there."""
    if subprocess.run(["sh", "-c", "command -v node"], capture_output=True).returncode != 0:
        return ["missing: node (packaging/install-build-deps.sh installs nodejs)"]
    try:
        with open(os.path.join(node_modules, "@grpc", "grpc-js", "package.json")) as f:
            version = json.load(f)["version"]
    except (OSError, ValueError, KeyError):
        return [f"missing: @grpc/grpc-js in {node_modules} (packaging/install-grpc-js.sh installs it)"]
    if not version.startswith("1.14."):
        return [f"@grpc/grpc-js {version} in {node_modules}, not 1.14.x (packaging/install-grpc-js.sh)"]
    if not os.path.isdir(os.path.join(node_modules, "@grpc", "proto-loader")):
        return [f"missing: @grpc/proto-loader in {node_modules} (packaging/install-grpc-js.sh)"]
    return []


class Cgroups:
    """One cgroup per backend with CPU accounting: v1 cpu and cpuacct (apart or
    joined), or v2 with the cpu controller. remove() at the end."""

    def __init__(self, names):
        self.dirs = {}
        v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
        if v2:
            with open("/sys/fs/cgroup/cgroup.controllers") as f:
                if "cpu" not in f.read().split():
                    raise OSError("cgroup v2 without the cpu controller")
            with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
                f.write("+cpu")
            roots = ["/sys/fs/cgroup"]
        else:
            roots = sorted({os.path.realpath(os.path.join("/sys/fs/cgroup", c)) for c in ("cpu", "cpuacct")})
            if not all(os.path.isdir(r) for r in roots):
                raise OSError("no cpu and cpuacct hierarchies under /sys/fs/cgroup")
        try:
            for name in names:
                self.dirs[name] = []
                for root in roots:
                    d = os.path.join(root, CGROUP_PREFIX + name)
                    os.makedirs(d, exist_ok=True)
                    self.dirs[name].append(d)
        except OSError:
            self.remove()
            raise

    def procs_files(self, name):
        return [os.path.join(d, "cgroup.procs") for d in self.dirs[name]]

    def remove(self):
        for dirs in self.dirs.values():
            for d in dirs:
                if not harness.remove_cgroup(d):
                    note(f"cannot remove cgroup {d}")
        self.dirs = {}


CGROUPS = None


def netns_of(pid):
    return os.stat(f"/proc/{pid}/ns/net").st_ino


class Backend:
    """hr-wrr-backend in its cgroup from its first instruction: a shell writes
    its own pid into the cgroup and then execs the backend (same pid)."""

    def __init__(self, case, tmp, orca_dir, name, flags):
        self.name = name
        moves = " ".join(f"echo $$ > {p} &&" for p in CGROUPS.procs_files(name))
        argv = ["sh", "-c", f'{moves} exec "$0" "$@"', os.path.join(BUILD.build_dir, BACKEND),
                "--listen", "127.0.0.1:0", "--orca-dir", orca_dir, "--endpoint", name,
                "--instance", SERVED] + list(flags)
        self.proc = Proc("backend-" + name, argv, tmp, case)

        def port():
            if not self.proc.alive():
                raise Fatal(f"backend {name} exited: " + self.proc.err())
            m = re.search(r"^listening on 127\.0\.0\.1:(\d+)$", self.proc.out(), re.M)
            return int(m.group(1)) if m else None
        self.port = wait_until(port, 10, f"backend {name}'s listening line")
        self.netns = netns_of(self.proc.pid)
        with open(f"/proc/{self.proc.pid}/cgroup") as f:
            groups = f.read()
        if CGROUP_PREFIX + name not in groups:
            raise AssertionError(f"backend {name} is not in its cgroup:\n{groups}")

    def stop(self, case):
        """Stops it; what its OrcaService served: (scope, messages)."""
        case.assertEqual(self.proc.stop(grace=10), 0, tail(self.proc.err()))
        m = re.search(r"^orca scope=(\S+) messages=(\d+) calls=(\d+)$", self.proc.err(), re.M)
        case.assertIsNotNone(m, f"backend {self.name} did not say what it served:\n" + tail(self.proc.err()))
        return m.group(1), int(m.group(2))


class InstanceWatcher(threading.Thread):
    """Decodes every endpoint's reports every 50 ms: the instance scopes seen,
    every instance report whose application_utilization was 0, and each
    report's application_utilization over time."""

    def __init__(self, orca_dir, names):
        super().__init__(daemon=True)
        self.orca_dir, self.names = orca_dir, names
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.reads = {n: 0 for n in names}
        self.zeros = []      # (file, report)
        self.scopes = {n: set() for n in names}
        self.latest = {}     # name -> report
        # (name, is an instance) -> [(monotonic time, application_utilization)]
        self.app = {(n, i): [] for n in names for i in (False, True)}
        self.errors = []

    def run(self):
        while not self.halt.is_set():
            for entry in os.listdir(self.orca_dir):
                m = re.fullmatch(r"endpoint\.([^@]+?)(@.+)?\.orca", entry)
                if not m or m.group(1) not in self.names:
                    continue
                try:
                    r = orca_oob.read_report_file(os.path.join(self.orca_dir, entry))
                except FileNotFoundError:
                    continue
                except ValueError as e:
                    self.errors.append(f"{entry}: {e}")
                    continue
                name, instance = m.group(1), m.group(2) is not None
                with self.lock:
                    self.app[(name, instance)].append((time.monotonic(), r["application_utilization"]))
                    if not instance:
                        continue
                    self.reads[name] += 1
                    self.scopes[name].add(entry[:-len(".orca")])
                    self.latest[name] = r
                    if r["application_utilization"] == 0:
                        self.zeros.append((entry, r))
            self.halt.wait(0.05)

    def mean_app(self, name, instance, since, until):
        with self.lock:
            values = [v for t, v in self.app[(name, instance)] if since <= t < until]
        return sum(values) / len(values) if values else float("nan")

    def stop(self):
        self.halt.set()
        self.join(5)


class Agent:
    """headroomd on the case's report directory, one http2 [[endpoint]] per backend."""

    def __init__(self, case, tmp, orca_dir, backends):
        config = os.path.join(tmp, "headroom.toml")
        body = f"[agent]\norca_dir = {toml_string(orca_dir)}\ninterval = \"{INTERVAL}\"\n"
        for b in backends:
            body += (f"\n[[endpoint]]\nname = \"{b.name}\"\nport = {b.port}\nprotocol = \"http2\"\n"
                     f"target = \"{TARGET_MS}ms\"\nmax = \"{MAX_MS}ms\"\n")
        with open(config, "w") as f:
            f.write(body)
        self.proc = Proc("headroomd", [BUILD.headroomd, "--config", config], tmp, case)
        self.orca_dir = orca_dir

    def check_alive(self):
        if not self.proc.alive():
            raise Fatal(f"headroomd exited with {self.proc.p.returncode}:\n{tail(self.proc.err())}")

    def instance(self, name, netns):
        """The one instance report of endpoint `name`, once it names `netns`."""
        self.check_alive()
        files = [f for f in os.listdir(self.orca_dir) if f.startswith(f"endpoint.{name}@")]
        if len(files) != 1:
            return None
        r = orca_oob.read_report_file(os.path.join(self.orca_dir, files[0]))
        if r["named_metrics"].get("headroom.ebpf.unavailable"):
            raise Fatal(f"headroomd has no eBPF probe:\n{tail(self.proc.err())}")
        return files[0] if r["named_metrics"].get("headroom.instance.netns") == netns else None


def run_client(tmp, policy, backends, warmup, seconds, label):
    """wrr_client.js with `policy`; its JSON result, and the last weights
    grpc-js logged (weighted_round_robin)."""
    env = dict(os.environ, NODE_PATH=NODE_MODULES)
    if policy == "weighted_round_robin":
        env.update(GRPC_TRACE="weighted_round_robin", GRPC_VERBOSITY="DEBUG")
    target = "ipv4:" + ",".join(f"127.0.0.1:{b.port}" for b in backends)
    argv = ["node", CLIENT, "--target", target, "--proto", PROTO, "--policy", policy,
            "--inflight", str(INFLIGHT), "--warmup", str(warmup), "--seconds", str(seconds)]
    err_path = os.path.join(tmp, f"client-{label}-{policy}.err")
    with open(err_path, "wb") as err:
        done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                              timeout=warmup + seconds + 30)
    with open(err_path, encoding="utf-8", errors="replace") as f:
        log = f.read()
    if done.returncode != 0:
        raise AssertionError(f"wrr_client.js ({policy}) exited {done.returncode}:\n{tail(log)}")
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    weights = re.findall(r"Created picker with weights: (\S+)", log)
    last = weights[-1] if weights else ""
    for b in backends:  # "[127.0.0.1:PORT]:WEIGHT" as "NAME:WEIGHT"
        last = re.sub(rf"\[127\.0\.0\.1:{b.port}\]:([0-9.e+-]+)", lambda m: f"{b.name}:{float(m.group(1)):.0f}", last)
    result["last_weights"] = last
    return result


def share(result, name):
    total = sum(result["counts"].values())
    return result["counts"].get(name, 0) / total if total else float("nan")


class WeightedRoundRobinTest(unittest.TestCase):

    def run_scenario(self, label, flags_a, flags_b):
        """Both policies against fresh backends; (share_rr, share_wrr) of B."""
        tmp = harness.make_temp_dir(self, f"headroom-wrr-{label}-")
        orca_dir = os.path.join(tmp, "orca")
        os.makedirs(orca_dir)
        a = Backend(self, tmp, orca_dir, "a", flags_a)
        b = Backend(self, tmp, orca_dir, "b", flags_b)
        agent = Agent(self, tmp, orca_dir, (a, b))
        for x in (a, b):
            wait_until(lambda: agent.instance(x.name, x.netns), 15, f"endpoint.{x.name}@... naming netns {x.netns}")
        watcher = InstanceWatcher(orca_dir, ("a", "b"))
        watcher.start()
        try:
            rr = run_client(tmp, "round_robin", (a, b), RR_WARMUP_S, RR_SECONDS, label)
            wrr = run_client(tmp, "weighted_round_robin", (a, b), WRR_WARMUP_S, WRR_SECONDS, label)
            ended = time.monotonic()
            agent.check_alive()
        finally:
            watcher.stop()
        for res in (rr, wrr):
            self.assertEqual(res["errors"], 0, f"{res['policy']}: calls failed: {res.get('last_error')}")
            self.assertGreater(sum(res["counts"].values()), 100, f"{res['policy']}: too few calls: {res}")
        srr, swrr = share(rr, "b"), share(wrr, "b")
        # The weighted run's measured seconds were its last ones.
        app = {(n, i): watcher.mean_app(n, i, ended - WRR_SECONDS, ended) for n in ("a", "b") for i in (False, True)}
        figure(f"({label}) served: {SERVED}")
        figure(f"({label}) share of calls to B: round_robin {srr:.3f} ({rr['counts']}), "
               f"weighted_round_robin {swrr:.3f} ({wrr['counts']})")
        figure(f"({label}) application_utilization while WRR measured: instance reports A {app[('a', True)]:.3f}, "
               f"B {app[('b', True)]:.3f}; aggregates A {app[('a', False)]:.3f}, B {app[('b', False)]:.3f}; "
               f"grpc-js's last weights: {wrr['last_weights']}")
        figure(f"({label}) WRR share of B per second: " +
               " ".join(f"{s.get('b', 0) / max(1, sum(s.values())):.2f}" for s in wrr["slices"]))

        self.assertEqual(watcher.errors, [], "instance reports that do not decode")
        for x in (a, b):
            self.assertGreater(watcher.reads[x.name], 20, f"too few reads of {x.name}'s instance report")
            self.assertEqual(len(watcher.scopes[x.name]), 1, f"{x.name}: more than one instance: "
                             f"{watcher.scopes[x.name]}")
            self.assertEqual(watcher.latest[x.name]["named_metrics"].get("headroom.instance.netns"), x.netns)
        self.assertEqual(watcher.zeros[:3], [], "an instance report with application_utilization 0 while serving")
        for x in (a, b):
            scope, messages = x.stop(self)
            (own,) = watcher.scopes[x.name]
            expected = own if SERVED == "own" else f"endpoint.{x.name}"
            self.assertEqual(scope, expected, f"backend {x.name}'s OrcaService served {scope}, not {expected}")
            self.assertGreater(messages, 0, f"backend {x.name}'s OrcaService sent no report")
        return srr, swrr

    def test_a_slow_dependency_on_b(self):
        srr, swrr = self.run_scenario("a", [], ["--slow-every", "2", "--slow-ms", "60"])
        self.assertAlmostEqual(srr, 0.5, delta=0.05, msg="round_robin splits calls evenly")
        self.assertLess(swrr, srr - 0.1, "weighted_round_robin does not move calls away from the slow backend")

    def test_b_twice_the_cpu_per_call(self):
        srr, swrr = self.run_scenario("b", ["--cost-ms", "1"], ["--cost-ms", "2"])
        self.assertAlmostEqual(srr, 0.5, delta=0.05, msg="round_robin splits calls evenly")
        self.assertLess(swrr, 0.45, "weighted_round_robin does not move calls away from the costlier backend")


def main():
    global BUILD, NODE_MODULES, CGROUPS
    problems = harness.needs_ebpf("the eBPF endpoint probe, the backends' cgroups")
    NODE_MODULES = os.path.join(cache_dir(), "npm", "node_modules")
    problems += grpc_js_problems(NODE_MODULES)
    BUILD = harness.prologue("wrr_test.py", ("headroomd", BACKEND), problems)
    try:
        CGROUPS = Cgroups(("a", "b"))
    except OSError as e:
        return harness.unable("wrr_test.py", [f"cannot make the backends' cgroups: {e}"])
    return harness.run_suite(WeightedRoundRobinTest, only_env="HEADROOM_WRR_ONLY", cleanup=CGROUPS.remove)


if __name__ == "__main__":
    sys.exit(main())
