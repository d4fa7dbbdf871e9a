#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""headroomd in a PID namespace of its own (a pod without hostPID) against the
real kernel.

    pidns_test.py SOURCE_DIR BUILD_DIR

headroomd runs under `unshare --pid --fork` (getpid() is 1) in a network
namespace made by the test, with an [[endpoint]] on the port of its own
[prometheus] listen (path /metrics, so the syscall set, which keeps the agent
out of its server tracking by PID) and one on an hr-test-server beside it:

  - with the host's /proc as proc_root (no --mount-proc), N scrapes of its
    own port are not counted (the endpoint's window holds 0 requests, rps 0)
    while the N requests to the test server are; the instance is "@host"
    (the agent's network namespace found through its kernel PID); no
    warning. Before the fix (getpid()) the scrapes were counted and the
    instance was not "@host";
  - with a proc_root of its own namespace (--mount-proc): the warning that
    its PID there is not the kernel's, once.

Needs root (eBPF, namespaces); without it it skips (exit 77), saying why; with
CI=true a skip is a failure.
"""

import os
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
SCRAPES = 20
WARNING = "is the procfs of a PID namespace other than the kernel's initial one"

# N GETs, each on a new connection, inside the namespace: one process for all.
GETS = """
import sys, urllib.request
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for _ in range(n):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        r.read()
"""


class Netns:
    def __init__(self, case):
        self.name = f"hr-pidns-{os.getpid()}"
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        case.addCleanup(lambda: subprocess.run(["ip", "netns", "del", self.name], capture_output=True))
        subprocess.run(["ip", "-n", self.name, "link", "set", "lo", "up"], check=True)

    def argv(self, *argv):
        return ["ip", "netns", "exec", self.name] + [str(a) for a in argv]

    def gets(self, port, path, n):
        subprocess.run(self.argv(sys.executable, "-c", GETS, port, path, n), check=True, timeout=30)


class PidNamespace(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.make_temp_dir(self)
        self.ns = Netns(self)
        self.own_port, self.web_port = free_port(), free_port()

    def write_config(self, target="20ms"):
        temp = self.config + ".new"
        with open(temp, "w") as f:
            f.write("[agent]\norca_dir = " + toml_string(self.orca_dir) + "\ninterval = \"200ms\"\n"
                    "smoothing = \"4s\"\n[prometheus]\n" f"listen = \"127.0.0.1:{self.own_port}\"\n"
                    f"[[endpoint]]\nname = \"own\"\nport = {self.own_port}\npath = \"/metrics\"\n"
                    f"target = \"{target}\"\nmax = \"200ms\"\n"
                    f"[[endpoint]]\nname = \"web\"\nport = {self.web_port}\npath = \"/\"\n"
                    f"target = \"{target}\"\nmax = \"200ms\"\n")
        os.rename(temp, self.config)

    def start_agent(self, mount_proc=False):
        self.orca_dir = os.path.join(self.tmp, "orca")
        self.config = os.path.join(self.tmp, "headroom.toml")
        self.write_config()
        config = self.config
        # --kill-child: stopping unshare stops headroomd, PID 1 of the namespace.
        unshare = ["unshare", "--pid", "--kill-child=SIGTERM"] + (["--mount-proc"] if mount_proc else [])
        self.agent = Proc("headroomd", self.ns.argv(*unshare, HEADROOMD, "--config", config), self.tmp, self)
        wait_until(lambda: self.alive() and "eBPF endpoint probe attached" in self.agent.err(), 15,
                   "headroomd's eBPF probe")

    def reload(self, target):
        """A reload with other endpoints: a new sampler and probe, the listener kept."""
        self.write_config(target=target)
        # SIGHUP to headroomd, unshare's child (unshare would die of it).
        unshare = self.agent.pid  # ip netns exec execs
        with open(f"/proc/{unshare}/task/{unshare}/children") as f:
            os.kill(int(f.read().split()[0]), 1)
        wait_until(lambda: self.alive() and "configuration reloaded" in self.agent.err(), 10, "the reload")

    def alive(self):
        if not self.agent.alive():
            raise Fatal(f"headroomd exited with {self.agent.p.returncode}:\n{tail(self.agent.err())}")
        return True

    def instances(self, endpoint):
        self.alive()
        prefix = f"endpoint.{endpoint}@"
        return sorted(n[len(prefix):-len(".orca")] for n in os.listdir(self.orca_dir)
                      if n.startswith(prefix) and n.endswith(".orca"))

    def report(self, scope):
        self.alive()
        with open(os.path.join(self.orca_dir, scope + ".orca"), "rb") as f:
            return orca_oob.decode_report(f.read())

    def requests(self, scope):
        return self.report(scope)["named_metrics"].get("headroom.window.requests", 0)

    def test_its_own_scrapes_are_not_counted_and_its_namespace_is_host(self):
        server = Proc("hr-test-server", self.ns.argv(harness.TEST_SERVER, "--port", self.web_port,
                                                      "--delay", "/=1ms"), self.tmp, self)
        wait_until(lambda: server.alive() and f"port={self.web_port}" in server.out(), 10, "hr-test-server")
        self.start_agent()
        wait_until(lambda: self.instances("own") and self.instances("web"), 10, "both endpoints' instances")
        self.ns.gets(self.own_port, "/metrics", SCRAPES)
        self.ns.gets(self.web_port, "/", SCRAPES)
        # Both counted by the next ticks: the test server's requests are the witness.
        wait_until(lambda: self.requests("endpoint.web") == SCRAPES, 5, f"{SCRAPES} requests of endpoint.web")
        time.sleep(0.6)  # three more intervals
        own = {s: self.report(s) for s in ("endpoint.own", "endpoint.own@" + self.instances("own")[0])}
        figure(f"{SCRAPES} scrapes of its own port from a PID namespace: endpoint.own counts "
               f"{self.requests('endpoint.own'):g} (rps {own['endpoint.own']['rps_fractional']:.2f}), "
               f"endpoint.web {self.requests('endpoint.web'):g} of {SCRAPES}; instances own "
               f"{self.instances('own')}, web {self.instances('web')}")
        for scope, r in own.items():
            self.assertEqual(r["named_metrics"].get("headroom.window.requests", 0), 0, (scope, r))
            self.assertEqual(r["rps_fractional"], 0, (scope, r))
            self.assertNotIn("headroom.ebpf.unavailable", r["named_metrics"], (scope, r))
        self.assertEqual(self.instances("own"), ["host"], tail(self.agent.err()))
        self.assertEqual(self.instances("web"), ["host"], tail(self.agent.err()))
        self.assertNotIn(WARNING, self.agent.err())
        # The new probe's start-up scan finds the listener held by headroomd: not a server either.
        self.reload("25ms")
        self.ns.gets(self.own_port, "/metrics", SCRAPES)
        self.ns.gets(self.web_port, "/", SCRAPES)
        wait_until(lambda: self.requests("endpoint.web") == SCRAPES, 5, f"{SCRAPES} requests after the reload")
        time.sleep(0.6)
        figure(f"after a reload that replaced the probe: endpoint.own counts {self.requests('endpoint.own'):g}, "
               f"endpoint.web {self.requests('endpoint.web'):g} of {SCRAPES}")
        self.assertEqual(self.requests("endpoint.own"), 0, tail(self.agent.err()))

    def test_a_proc_root_of_its_own_namespace_is_said_once(self):
        self.start_agent(mount_proc=True)
        wait_until(lambda: WARNING in self.agent.err(), 5, "the warning")
        self.reload("25ms")  # builds the sampler again, and says nothing more
        self.assertEqual(self.agent.err().count(WARNING), 1, tail(self.agent.err()))
        note("the warning: " + next(line for line in self.agent.err().splitlines() if WARNING in line))


def main():
    global HEADROOMD
    missing = harness.needs_ebpf("loading eBPF programs, making PID and network namespaces")
    missing += harness.needs_commands(("ip",), "iproute2") + harness.needs_commands(("unshare",), "util-linux")
    build = harness.prologue("pidns_test.py", ("headroomd", "test_server"), missing)
    HEADROOMD = build.headroomd
    return harness.run_suite(PidNamespace, only_env="PIDNS_ONLY")


if __name__ == "__main__":
    sys.exit(main())
