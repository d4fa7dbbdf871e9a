# SPDX-License-Identifier: Apache-2.0
"""What the Python benchmark drivers (bench_prometheus.py, bench_oob.py)
share: the programs they start and always stop, the process CPU clock,
order statistics, and the machine's load."""

import math
import os
import signal
import socket
import subprocess
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_clock_ns(pid):
    """The process CPU clock (clock_getcpuclockid): every thread, also those
    that exited, in ns."""
    return time.clock_gettime_ns(((~pid) << 3) | 2)


def median(values):
    """Of the values that are numbers (NaN, a figure not measured, is left out)."""
    v = sorted(x for x in values if x == x)
    if not v:
        return float("nan")
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def pct(values, q):
    """Nearest rank: every figure printed was observed."""
    v = sorted(values)
    if not v:
        return float("nan")
    return v[max(0, math.ceil(q * len(v)) - 1)]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class ProcessOwner:
    """Starts programs in self.work, logs to a file, and stops every one it
    started (cleanup(), also after a failure)."""

    stop_timeout = 10  # seconds between SIGTERM and SIGKILL

    def __init__(self, work):
        self.work = work
        self.procs = []

    def start(self, argv, log, **kw):
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        p = subprocess.Popen(argv, stdout=open(log, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env, cwd=self.work, **kw)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def cleanup(self):
        for p in list(reversed(self.procs)):
            try:
                if p.stdin:
                    p.stdin.close()
            except OSError:
                pass
            self.stop(p)
