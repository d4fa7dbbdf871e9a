# SPDX-License-Identifier: Apache-2.0
"""What the Python integration tests (tests/prometheus/, tests/oob/,
tests/faults/, tests/http2/, tests/buffer/) share: the start of their main()
(prologue(): the directories, the programs, what the machine must have),
started programs that are always stopped, bounded waits, temporary
directories, free ports, figures printed at the end, and the project's test
server and load generator (TEST_SERVER and TEST_LOAD, set by prologue())."""

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

TEST_SERVER = TEST_LOAD = ""  # set by prologue()
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


def failure_summary(failures, limit=1500):
    """Each failed test (or subtest) with where it failed and its message,
    from unittest's (test, traceback) pairs: printed after the figures, so
    that the end of a long output still says why a run failed."""
    lines = []
    for test, tb in failures:
        tb_lines = tb.rstrip().splitlines()
        where = next((line.strip() for line in reversed(tb_lines) if line.startswith("  File ")), "")
        last_indented = max((i for i, line in enumerate(tb_lines) if line.startswith("  ")), default=-1)
        message = "\n".join(tb_lines[last_indented + 1:]) or "\n".join(tb_lines[-5:])
        if len(message) > limit:
            message = message[:limit] + " [...]"
        lines.append(f"FAILED: {test.id()}" + (f"\n  at {where}" if where else "") + "\n  " +
                     message.replace("\n", "\n  "))
    return "\n".join(lines)


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


def remove_cgroup(path, tries=50, pause=0.1):
    """rmdir a cgroup once its processes have left (killed ones take a
    moment); True when it is gone."""
    for _ in range(tries):
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(pause)
    return False


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


def start_listening(case, tmp, name, argv, timeout=10):
    """Starts a server that prints "port=N" once it listens: (Proc, N). Fails
    at once, with its stderr, if it exits first."""
    proc = Proc(name, argv, tmp, case)

    def port():
        if not proc.alive():
            raise Fatal(f"{name} exited: " + proc.err())
        m = re.search(r"^port=(\d+)$", proc.out(), re.M)
        return int(m.group(1)) if m else None
    return proc, wait_until(port, timeout, f"{name}'s port=N line")


class TestServer:
    """hr-test-server in HTTP mode on 127.0.0.1, every path delayed by `delay`."""

    def __init__(self, case, tmp, delay, name="hr-test-server"):
        self.proc, self.port = start_listening(case, tmp, name, [TEST_SERVER, "--port", "0", "--delay", "/=" + delay])


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


class Build:
    """The directories a test was given and the programs it may run from them.
    $HEADROOMD runs the cases against another build of headroomd."""

    def __init__(self, source_dir, build_dir):
        self.source_dir = os.path.abspath(source_dir)
        self.build_dir = os.path.abspath(build_dir)
        self.headroomd = os.environ.get("HEADROOMD") or os.path.join(self.build_dir, "agent", "headroomd")
        self.headroomctl = os.path.join(self.build_dir, "agent", "headroomctl")
        self.test_server = os.path.join(self.build_dir, "tests", "tools", "hr-test-server")
        self.test_load = os.path.join(self.build_dir, "tests", "tools", "hr-test-load")
        self.sanitized = False  # AddressSanitizer + UBSan (HEADROOM_SANITIZE): timings and RSS mean less
        try:
            with open(os.path.join(self.build_dir, "CMakeCache.txt")) as f:
                self.sanitized = "HEADROOM_SANITIZE:BOOL=ON" in f.read()
        except OSError:
            pass


def needs_root(why):
    """A problem for prologue() when not root: `why` says what for."""
    return [] if os.geteuid() == 0 else [f"needs root ({why}); CI runs it as root"]


def needs_ebpf(why):
    """needs_root(why), and a kernel with BTF, which the endpoint probe's
    programs are relocated against."""
    problems = needs_root(why)
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        problems.append("needs a kernel with BTF (/sys/kernel/btf/vmlinux)")
    return problems


def needs_commands(commands, package):
    """A problem for each command not on PATH; `package` is Debian's."""
    return [f"missing: {c} (Debian: apt-get install {package})" for c in commands if shutil.which(c) is None]


def unable(script, problems):
    """What a test does when the machine lacks something it needs: fails under
    CI=true (CI must run every test), else skips loudly (77, CTest's
    SKIP_RETURN_CODE). The exit status."""
    if os.environ.get("CI") == "true":
        note(f"FAIL (CI=true): {script}: " + "; ".join(problems))
        return 1
    note(f"*** SKIPPED: {script}: " + "; ".join(problems) + " ***")
    return 77


def prologue(script, programs=(), problems=()):
    """The start of every Python integration test's main(): SOURCE_DIR and
    BUILD_DIR from the command line (else the usage, exit 64); `programs`
    (names of Build's attributes: "headroomd", "test_server", ...; or paths
    relative to BUILD_DIR) built (else FAIL, exit 1); `problems` (what the machine lacks: root, a
    tool, a kernel feature; see needs_root()) empty, else unable(). Sets
    TEST_SERVER and TEST_LOAD. Returns the Build, or exits."""
    if len(sys.argv) != 3:
        note(f"usage: {sys.argv[0]} SOURCE_DIR BUILD_DIR")
        sys.exit(64)
    global TEST_SERVER, TEST_LOAD
    build = Build(sys.argv[1], sys.argv[2])
    TEST_SERVER, TEST_LOAD = build.test_server, build.test_load
    paths = [getattr(build, p) if hasattr(build, p) else os.path.join(build.build_dir, p) for p in programs]
    missing = [p for p in paths if not os.access(p, os.X_OK)]
    if missing:
        note(f"FAIL: not built: {', '.join(missing)}")
        sys.exit(1)
    if problems:
        sys.exit(unable(script, list(problems)))
    return build


def run_suite(case_class, only_env=None, cleanup=None):
    """Runs one unittest.TestCase class the way every Python integration test
    does: SIGTERM (ctest's timeout) interrupts like Ctrl-C, everything started
    is stopped whatever happens (then `cleanup()`), the figures, each
    failure's message once more and the wall time are printed last.
    `only_env` names an environment variable that, when set, keeps only the
    tests whose id contains its value, or one of its comma-separated parts.
    The exit status."""
    def interrupted(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)
    started = time.monotonic()
    result = None
    try:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(case_class)
        if only_env and os.environ.get(only_env):
            parts = [p for p in os.environ[only_env].split(",") if p]
            suite = unittest.TestSuite(t for t in suite if any(p in t.id() for p in parts))
        result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
    except KeyboardInterrupt as e:
        note(f"\nFAIL: interrupted ({e or 'SIGINT'}); stopping everything the test started")
    finally:
        reap()
        if cleanup is not None:
            cleanup()
    print_figures()
    if result is not None and not result.wasSuccessful():
        note("\n" + failure_summary(result.failures + result.errors))
    note(f"wall time {time.monotonic() - started:.1f} s")
    return 0 if result is not None and result.wasSuccessful() else 1
