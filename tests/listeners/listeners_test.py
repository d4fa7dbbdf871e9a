#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""headroomd's listeners under connection floods (docs/reliability.md,
"Listeners under a connection flood").

    listeners_test.py SOURCE_DIR BUILD_DIR

One headroomd with `[prometheus] listen` and a TCP `[oob] listen` on
127.0.0.1, agent.interval 100 ms. Each case holds FLOOD connections
(tests/listeners/flood.py, its own process: idle, trickling a byte a second,
half-open, garbage; each one the server closes is opened again) against one
listener and, while they are held: a scrape of /metrics (a new connection)
and a new OOB stream's first report answer within ANSWER_MS, headroomd's RSS
stays under its bound, and no tick comes later than 1.5 intervals after the
one before (the reports' headroom.timestamp_ms, read from node.orca).
LISTENERS_ONLY=name keeps the cases whose name contains it. Needs
RLIMIT_NOFILE's hard limit above FLOOD + 1000 and python3-grpcio; without
them it fails with CI=true and skips (77) elsewhere.
"""

import os
import re
import resource
import statistics
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "oob"))
import harness  # noqa: E402
from harness import Fatal, Proc, figure, free_port, rss_kib, tail, toml_string, wait_until  # noqa: E402
import orca_oob  # noqa: E402

BUILD = None
FLOOD = int(os.environ.get("LISTENERS_FLOOD", "10000"))
INTERVAL_MS = 100
ANSWER_MS = 100    # the goal: a scrape, a new stream's first report
MARGIN_MS = 500    # what a single probe may take on a loaded 2-core machine
PROBES = 8
HOLD_S = 3.0       # the flood held this long before probing (deadlines at work)
# headroomd's RSS while a flood is held (docs/reliability.md): the HTTP
# listener keeps at most 512 connections of 8 KiB pools (its flood may add
# METRICS_GROWTH_MIB to the RSS it began with); the OOB gate keeps 1024
# waiting sockets and hands gRPC at most 2048 connections (the whole process
# stays under OOB_RSS_MIB).
METRICS_GROWTH_MIB = 16
OOB_RSS_MIB = 128


class Ticks(threading.Thread):
    """Reads node.orca every 5 ms: the timestamp of each sequence number."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.stamps = {}
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            try:
                nm = orca_oob.read_report_file(self.path)["named_metrics"]
                self.stamps.setdefault(int(nm["headroom.seq"]), int(nm["headroom.timestamp_ms"]))
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.005)

    def max_gap_ms(self, since_seq):
        """The longest time between two consecutive ticks after since_seq, and how many pairs."""
        seqs = sorted(s for s in self.stamps if s > since_seq)
        gaps = [self.stamps[b] - self.stamps[a] for a, b in zip(seqs, seqs[1:]) if b == a + 1]
        return (max(gaps) if gaps else None), len(gaps)

    def last_seq(self):
        return max(self.stamps) if self.stamps else 0


def scrape_ms(port):
    """Milliseconds to GET /metrics over a new connection (status 200 and a body), or raises."""
    import http.client
    t = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        body = r.read()
    finally:
        conn.close()
    if r.status != 200 or b"headroom_ticks_total" not in body:
        raise AssertionError(f"GET /metrics answered {r.status}, {len(body)} bytes")
    return (time.monotonic() - t) * 1000


def stream_ms(port):
    """Milliseconds from opening a new OOB stream (a new channel) to its first report, or raises."""
    t = time.monotonic()
    with orca_oob.Stream(f"127.0.0.1:{port}", interval=0.1, count=1, timeout=5) as s:
        for received, report, _ in s:
            if report is None or "headroom.seq" not in report["named_metrics"]:
                raise AssertionError(f"not a report: {s.decode_errors}")
            return (received - t) * 1000
    raise AssertionError(f"no report: {s.code} {s.details}")


class ListenersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="headroom-listeners-")
        harness.TEMP_DIRS.append(cls.tmp)  # removed by reap()
        cls.metrics_port, cls.oob_port = free_port(), free_port()
        orca_dir = os.path.join(cls.tmp, "orca")
        os.makedirs(orca_dir)
        cls.node = os.path.join(orca_dir, "node.orca")
        config = os.path.join(cls.tmp, "headroom.toml")
        with open(config, "w") as f:
            f.write(f"[agent]\norca_dir = {toml_string(orca_dir)}\ninterval = \"{INTERVAL_MS}ms\"\n"
                    f"[prometheus]\nlisten = \"127.0.0.1:{cls.metrics_port}\"\n"
                    f"[oob]\nlisten = [\"127.0.0.1:{cls.oob_port}\"]\n")
        # headroomd inherits the limit raised here: the caps are a quarter of it.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        cls.daemon = Proc("headroomd", [BUILD.headroomd, "--config", config], cls.tmp)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        wait_until(lambda: os.path.exists(cls.node) or not cls.daemon.alive(), 10, "node.orca")
        if not cls.daemon.alive():
            raise Fatal("headroomd exited: " + tail(cls.daemon.err()))
        cls.ticks = Ticks(cls.node)
        cls.ticks.start()
        wait_until(lambda: scrape_ms(cls.metrics_port) is not None, 10, "a first scrape")
        cls.rss_idle_kib = rss_kib(cls.daemon.pid)

    @classmethod
    def tearDownClass(cls):
        cls.ticks.halt.set()
        cls.daemon.stop()
        harness.reap()

    def flood(self, listener, mode):
        port = self.metrics_port if listener == "metrics" else self.oob_port
        proto = "http" if listener == "metrics" else "h2"
        since = self.ticks.last_seq()
        rss_before = rss_kib(self.daemon.pid)
        f = Proc(f"flood-{listener}-{mode}", [sys.executable, os.path.join(HERE, "flood.py"), "127.0.0.1", port,
                                               FLOOD, mode, proto], self.tmp, self)

        def status():
            m = re.findall(r"open=(\d+) connecting=(\d+) closed=(\d+) failed=(\d+)", f.out())
            if not f.alive():
                raise Fatal(f"flood.py exited: {tail(f.err())}")
            return tuple(map(int, m[-1])) if m else None
        wait_until(status, 10, "the flood's first status line")
        time.sleep(HOLD_S)
        scrapes, streams, rss = [], [], []
        for _ in range(PROBES):
            scrapes.append(scrape_ms(self.metrics_port))
            streams.append(stream_ms(self.oob_port))
            rss.append(rss_kib(self.daemon.pid))
            time.sleep(0.1)
        opened, connecting, closed, failed = status()
        f.stop()
        gap, pairs = self.ticks.max_gap_ms(since)
        self.assertTrue(self.daemon.alive(), tail(self.daemon.err()))
        label = f"{listener} {mode}"
        figure(f"{label}: {FLOOD} held (open {opened}, connecting {connecting}, closed by headroomd {closed}, "
               f"failed {failed}): scrape median {statistics.median(scrapes):.1f} max {max(scrapes):.1f} ms; "
               f"new stream's first report median {statistics.median(streams):.1f} max {max(streams):.1f} ms; "
               f"RSS max {max(rss) / 1024:.1f} MiB (before {rss_before / 1024:.1f}, idle {self.rss_idle_kib / 1024:.1f}); "
               f"longest tick gap {gap} ms over {pairs} ticks")
        self.assertGreater(opened + closed, FLOOD // 2, "the flood did connect")
        for name, ms in (("scrape", scrapes), ("new stream", streams)):
            self.assertLessEqual(statistics.median(ms), ANSWER_MS, f"{label}: {name} median {ms}")
            self.assertLessEqual(max(ms), MARGIN_MS, f"{label}: {name} {ms}")
        bound = rss_before + METRICS_GROWTH_MIB * 1024 if listener == "metrics" else OOB_RSS_MIB * 1024
        self.assertLess(max(rss), bound, f"{label}: RSS {rss} KiB (before the flood {rss_before})")
        self.assertIsNotNone(gap, "ticks were read")
        self.assertGreater(pairs, 20, "most ticks were read")
        self.assertLessEqual(gap, 1.5 * INTERVAL_MS, f"{label}: a tick came {gap} ms after the one before")

    def test_metrics_idle(self):
        self.flood("metrics", "idle")

    def test_metrics_trickle(self):
        self.flood("metrics", "trickle")

    def test_metrics_halfopen(self):
        self.flood("metrics", "halfopen")

    def test_metrics_garbage(self):
        self.flood("metrics", "garbage")

    def test_oob_idle(self):
        self.flood("oob", "idle")

    def test_oob_trickle(self):
        self.flood("oob", "trickle")

    def test_oob_halfopen(self):
        self.flood("oob", "halfopen")

    def test_oob_garbage(self):
        self.flood("oob", "garbage")


def main():
    global BUILD
    problems = []
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < FLOOD + 1000:
        problems.append(f"RLIMIT_NOFILE's hard limit {hard} is below {FLOOD + 1000} (ulimit -Hn)")
    if orca_oob.grpc is None:
        problems.append("missing: python3-grpcio (Debian: apt-get install python3-grpcio)")
    BUILD = harness.prologue(sys.argv[0], programs=["headroomd"], problems=problems)
    return harness.run_suite(ListenersTest, only_env="LISTENERS_ONLY")


if __name__ == "__main__":
    sys.exit(main())
