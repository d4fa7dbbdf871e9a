#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A latent dependency, end to end (docs/dependencies.md, "The scenario").

    scenario_test.py SOURCE_DIR BUILD_DIR

The rig: a dependency (an HTTP/1.1 server in this process whose answers
take DELAY_HEALTHY, then DELAY_LATENT, then DELAY_HEALTHY again); the
reference shedding server (examples/shedding-server/) with WORKERS workers,
whose requests under /dep call the dependency from the worker and whose
other requests do not; headroomd with one [[dependency]] on the
dependency's address (max_concurrency = BULKHEAD), measured with eBPF from
the calling side; two paced loads, INDEPENDENT_RPS on / and DEPENDENT_RPS on
/dep, each writing every completion.

Without the gate the latent dependency's calls fill the workers and the
independent path misses its SLO too: measured, and it must miss, or the rig
proves nothing. With --gate dependency.store --fallback, the server asks
the reference gate (headroom/orca/dependency_gate.h) on headroom's report
before each call: the independent path keeps >= 99 % within its SLO while
the dependency is latent, the dependent path is answered in a few ms (its
fallback) for the most part, and once the dependency recovers the gate
closes within RECOVER_WITHIN_S.

Needs root (eBPF); skips loudly (77) without it, fails with CI=true.
DEPENDENCY_SCENARIO_ONLY=NAME keeps the tests whose name contains NAME.
"""

import http.server
import json
import os
import sys
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import harness  # noqa: E402
from harness import Proc, figure, note, tail, toml_string, wait_until  # noqa: E402

WORKERS = 12
BULKHEAD = 4             # the dependency's max_concurrency: calls in flight the service allows it
INDEPENDENT_RPS = 100
DEPENDENT_RPS = 20
SLO_S = 0.100            # the independent path's objective
DELAY_HEALTHY, DELAY_LATENT = 0.005, 2.0
HEALTHY_S, LATENT_S, RECOVERED_S = 4.0, 10.0, 12.0
RECOVER_WITHIN_S = 10.0  # open_for (5 s) + the half-open trickle's evidence
BUILD = None


class Dependency:
    """An HTTP/1.1 keep-alive server whose answers take `delay` seconds."""

    def __init__(self):
        self.delay = DELAY_HEALTHY
        dep = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                time.sleep(dep.delay)
                body = b"ok\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def completions(path):
    """[(monotonic_s, latency_s)] from hr-test-load's --completions-file."""
    out = []
    with open(path) as f:
        for line in f:
            t, lat = line.split()
            out.append((int(t) / 1e9, float(lat) / 1e6))
    return out


def within(samples, start, end):
    return [lat for t, lat in samples if start <= t - lat < end]  # by when the request was sent


def share_at_most(lats, bound):
    return sum(1 for x in lats if x <= bound) / len(lats) if lats else float("nan")


def quantile(lats, q):
    s = sorted(lats)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


class Scenario(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.make_temp_dir(self, "headroom-dependency-")
        self.dep = Dependency()
        self.addCleanup(self.dep.close)
        self.orca = os.path.join(self.tmp, "orca")
        config = os.path.join(self.tmp, "headroom.toml")
        with open(config, "w") as f:
            f.write("[agent]\norca_dir = " + toml_string(self.orca) + "\ninterval = \"50ms\"\nsmoothing = \"1s\"\n"
                    "[[dependency]]\nname = \"store\"\naddress = \"127.0.0.1:" + str(self.dep.port) + "\"\n"
                    "target = \"50ms\"\nmax = \"500ms\"\nmax_concurrency = " + str(BULKHEAD) + "\n")
        self.agent = Proc("headroomd", [BUILD.headroomd, "--config", config], self.tmp, self)
        report = os.path.join(self.orca, "dependency.store.orca")
        wait_until(lambda: self.alive(self.agent) and os.path.exists(report), 10, "headroomd's dependency report")

    def alive(self, p):
        if not p.alive():
            raise harness.Fatal(f"{p.name} exited with {p.p.returncode}:\n{tail(p.err())}")
        return True

    def start_server(self, gate):
        argv = [os.path.join(BUILD.build_dir, "examples", "shedding-server", "headroom-example-shedding-server"),
                "--port", "0", "--no-shed", "--workers", WORKERS, "--cost", "200us", "--orca-dir", self.orca,
                "--dependency", f"127.0.0.1:{self.dep.port}", "--dependency-timeout", "5s"]
        if gate:
            argv += ["--gate", "dependency.store", "--fallback"]
        server = Proc("shedding-server-" + ("gate" if gate else "nogate"), argv, self.tmp, self)

        def port():
            self.alive(server)
            for line in server.out().splitlines():
                if line.startswith("port="):
                    return int(line[5:])
            return None
        return server, wait_until(port, 10, "the shedding server's port")

    def run_phases(self, gate):
        """Runs healthy, latent and recovered phases; returns the figures."""
        self.dep.delay = DELAY_HEALTHY
        server, port = self.start_server(gate)
        label = "gate" if gate else "no gate"
        total = HEALTHY_S + LATENT_S + RECOVERED_S
        files = {}
        loads = []
        for path, rps in (("/", INDEPENDENT_RPS), ("/dep", DEPENDENT_RPS)):
            files[path] = os.path.join(self.tmp, f"{label.replace(' ', '-')}{path.replace('/', '-')}.completions")
            loads.append(Proc(f"load{path.replace('/', '-')}-{label.replace(' ', '-')}",
                              [BUILD.test_load, "--port", port, "--path", path, "--connections", 48, "--rate", rps,
                               "--duration", f"{int(total)}s", "--completions-file", files[path]], self.tmp, self))
        t0 = time.monotonic()
        gate_states = []  # (monotonic, state) from the server's /stats
        latent_at = t0 + HEALTHY_S
        healthy_at = latent_at + LATENT_S
        phase = 0
        while time.monotonic() < t0 + total:
            now = time.monotonic()
            if phase == 0 and now >= latent_at:
                self.dep.delay, phase = DELAY_LATENT, 1
            if phase == 1 and now >= healthy_at:
                self.dep.delay, phase = DELAY_HEALTHY, 2
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=1) as r:
                    stats = json.loads(r.read())
                d = stats["dependency"]
                gate_states.append((time.monotonic(), d["fail_fast"], d["gate"], d["ok"]))
            except OSError:
                pass  # a busy server: the next poll
            time.sleep(0.1)
        for p in loads:
            p.wait(30)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as r:
            stats = json.loads(r.read())
        server.stop()
        ind, dep = completions(files["/"]), completions(files["/dep"])
        lat_ind = within(ind, latent_at, healthy_at)
        lat_dep = within(dep, latent_at + 1.0, healthy_at)  # the gate needs a report or two to see it
        out = {
            "independent_within_slo": share_at_most(lat_ind, SLO_S),
            "independent_requests": len(lat_ind),
            "healthy_within_slo": share_at_most(within(ind, t0 + 1.0, latent_at), SLO_S),
            "dependent_p50_ms": 1e3 * quantile(lat_dep, 0.5),
            "dependent_within_10ms": share_at_most(lat_dep, 0.010),
            "dependent_requests": len(lat_dep),
            "stats": stats["dependency"],
            # When the gate began to fail calls fast, and the last time it did
            # after the dependency recovered (whichever rule acted).
            "opened_after_s": next((round(t - latent_at, 2) for (t, f, *_), (_, f0, *_) in
                                    zip(gate_states[1:], gate_states) if gate and t >= latent_at and f > f0), None),
            "closed_after_s": max((round(t - healthy_at, 2) for (t, f, *_), (_, f0, *_) in
                                   zip(gate_states[1:], gate_states) if gate and t >= healthy_at and f > f0),
                                  default=0.0 if gate else None),
            "breaker_opened": any(st in ("open", "half_open") for _, _, st, _ in gate_states),
            # Calls that reached the dependency over the run's last 2 s.
            "calls_at_end": (gate_states[-1][3] - next((ok for t, _, _, ok in gate_states if t >= t0 + total - 2.0),
                                                       gate_states[-1][3])) if gate_states else 0,
        }
        gate_line = (f"; the gate failed calls fast from {out['opened_after_s']} s after the dependency turned "
                     f"latent until {out['closed_after_s']} s after it recovered (CRITICAL's breaker "
                     f"{'opened' if out['breaker_opened'] else 'stayed closed: the bulkhead acted'})") if gate else ""
        figure(f"{label}: independent path within {SLO_S * 1e3:.0f} ms while latent "
               f"{out['independent_within_slo']:.4f} of {out['independent_requests']} sent (healthy "
               f"{out['healthy_within_slo']:.4f}); dependent path while latent p50 {out['dependent_p50_ms']:.1f} ms, "
               f"{out['dependent_within_10ms']:.3f} within 10 ms{gate_line}; {out['calls_at_end']} calls reached "
               f"it in the last 2 s; calls {out['stats']}")
        return out

    def test_1_without_the_gate_the_latent_dependency_takes_the_independent_path_down(self):
        r = self.run_phases(gate=False)
        self.assertGreater(r["healthy_within_slo"], 0.99, "the rig is not healthy before the dependency turns latent")
        self.assertLess(r["independent_within_slo"], 0.5,
                        "the latent dependency did not fill the workers: the rig proves nothing")

    def test_2_with_the_gate_the_independent_path_keeps_its_slo(self):
        r = self.run_phases(gate=True)
        self.assertGreater(r["healthy_within_slo"], 0.99, "the rig is not healthy before the dependency turns latent")
        self.assertGreaterEqual(r["independent_within_slo"], 0.99,
                                "the gate did not keep the latent dependency's calls from the independent path")
        self.assertLess(r["dependent_p50_ms"], 10.0, "the dependent path was not failed fast while latent")
        self.assertGreater(r["stats"]["fail_fast"], 0)
        self.assertIsNotNone(r["opened_after_s"], "the gate never failed a call fast while the dependency was latent")
        self.assertLessEqual(r["opened_after_s"], 1.0, "the gate took more than a second to fail calls fast")
        self.assertLessEqual(r["closed_after_s"], RECOVER_WITHIN_S,
                             "the gate still failed calls fast long after the dependency recovered")
        self.assertGreater(r["calls_at_end"], 0.5 * 2.0 * DEPENDENT_RPS,
                           "the dependent path's requests do not reach the recovered dependency again")


def main():
    global BUILD
    BUILD = harness.prologue("scenario_test.py", ("headroomd", "test_load",
                                                  "examples/shedding-server/headroom-example-shedding-server"),
                             harness.needs_ebpf("the dependency probe"))
    return harness.run_suite(Scenario, "DEPENDENCY_SCENARIO_ONLY")


if __name__ == "__main__":
    sys.exit(main())
