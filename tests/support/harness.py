# SPDX-License-Identifier: Apache-2.0
"""What the Python integration tests (tests/prometheus/, tests/oob/) share:
started programs that are always stopped, bounded waits, temporary
directories, free ports, figures printed at the end, and the project's test
server and load generator. Each test sets TEST_SERVER and TEST_LOAD once it
knows the build directory."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

TEST_SERVER = TEST_LOAD = ""  # set by the test's main()
FIGURES = []

# Everything started, so that an interrupted run still stops it (unittest
# skips a test's cleanups on KeyboardInterrupt): reap() at the end.
LIVE_PROCS = []
LIVE_MOUNTS = []
TEMP_DIRS = []


def note(text):
    print(text, file=sys.stderr, flush=True)


def figure(text):
    FIGURES.append(text)
    note("FIGURE: " + text)


def print_figures():
    note("\nFigures:\n" + "\n".join("  " + f for f in FIGURES))


class Fatal(AssertionError):
    """Raised from a wait's predicate to stop waiting at once."""


def wait_until(pred, timeout, what, poll=0.05):
    """Polls pred until it returns something true; its value. Bounded."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = pred()
            if value:
                return value
        except Fatal:
            raise
        except Exception as e:  # a request that failed, a file not there yet
            last_error = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}" +
                                 (f" (last error: {last_error!r})" if last_error else ""))
        time.sleep(poll)


def free_port(host="127.0.0.1"):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def make_temp_dir(case, prefix="headroom-test-"):
    d = tempfile.mkdtemp(prefix=prefix)
    TEMP_DIRS.append(d)

    def remove():
        shutil.rmtree(d, ignore_errors=True)
        if d in TEMP_DIRS:
            TEMP_DIRS.remove(d)
    case.addCleanup(remove)
    return d


def tail(text, lines=25):
    return "\n".join(text.splitlines()[-lines:])


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def toml_string(s):
    return json.dumps(s)  # a TOML basic string is a JSON string


class Proc:
    """A started program, its stdout and stderr in files of the case's temp dir."""

    def __init__(self, name, argv, logdir, case=None):
        self.name = name
        self.argv = [str(a) for a in argv]
        self.out_path = os.path.join(logdir, name + ".out")
        self.err_path = os.path.join(logdir, name + ".err")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.p = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                      close_fds=True)
        LIVE_PROCS.append(self)
        if case is not None:
            case.addCleanup(self.stop)

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p.poll() is None

    def out(self):
        with open(self.out_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def err(self):
        with open(self.err_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def signal(self, sig):
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def wait(self, timeout):
        """The exit code, or None if still running after timeout seconds."""
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace=5.0):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)
        if self in LIVE_PROCS:
            LIVE_PROCS.remove(self)
        return self.p.returncode


class TestServer:
    """hr-test-server in HTTP mode on 127.0.0.1, every path delayed by `delay`."""

    def __init__(self, case, tmp, delay, name="hr-test-server"):
        self.proc = Proc(name, [TEST_SERVER, "--port", "0", "--delay", "/=" + delay], tmp, case)

        def port():
            if not self.proc.alive():
                raise Fatal("hr-test-server exited: " + self.proc.err())
            m = re.search(r"^port=(\d+)$", self.proc.out(), re.M)
            return int(m.group(1)) if m else None
        self.port = wait_until(port, 10, "hr-test-server's port=N line")


def start_load(case, tmp, port, rate=200, connections=4, duration="60s", name=None):
    """hr-test-load, paced; it runs until the case stops it."""
    return Proc(name or "hr-test-load", [TEST_LOAD, "--port", port, "--connections", connections, "--rate", rate,
                                         "--duration", duration], tmp, case)


def reap():
    for p in list(LIVE_PROCS):
        try:
            p.stop(grace=2.0)
        except Exception as e:
            note(f"cannot stop {p.name} ({p.pid}): {e}")
    for d in list(LIVE_MOUNTS):
        if subprocess.run(["umount", d], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", d], capture_output=True)
        LIVE_MOUNTS.remove(d)
    for d in list(TEMP_DIRS):
        shutil.rmtree(d, ignore_errors=True)
        TEMP_DIRS.remove(d)


def run_suite(case_class, only_env=None, cleanup=None):
    """Runs one unittest.TestCase class the way every Python integration test
    does: SIGTERM (ctest's timeout) interrupts like Ctrl-C, everything started
    is stopped whatever happens (then `cleanup()`), the figures and the wall
    time are printed last. `only_env` names an environment variable that, when
    set, keeps only the tests whose id contains its value. The exit status."""
    def interrupted(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)
    started = time.monotonic()
    result = None
    try:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(case_class)
        if only_env and os.environ.get(only_env):
            suite = unittest.TestSuite(t for t in suite if os.environ[only_env] in t.id())
        result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
    except KeyboardInterrupt as e:
        note(f"\nFAIL: interrupted ({e or 'SIGINT'}); stopping everything the test started")
    finally:
        reap()
        if cleanup is not None:
            cleanup()
    print_figures()
    note(f"wall time {time.monotonic() - started:.1f} s")
    return 0 if result is not None and result.wasSuccessful() else 1
