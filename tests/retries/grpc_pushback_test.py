#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A shed gRPC answer's trailers against a real gRPC client (docs/retries.md, "gRPC").

    grpc_pushback_test.py SOURCE_DIR BUILD_DIR

The trailers come from libheadroom-orca's C interface
(headroom_retry_grpc_trailers, through ctypes over
BUILD_DIR/orca/libheadroom-orca.so). A Python gRPC server (a generic
handler: raw bytes, no protoc) answers every call of /headroom.test.Shed/Call
with RESOURCE_EXHAUSTED and those trailers, recording when each attempt came
and its grpc-previous-rpc-attempts. The client is Python's gRPC (gRPC's C
core) on a channel whose service config has a retryPolicy: maxAttempts 4,
a backoff of 10 ms, retryableStatusCodes RESOURCE_EXHAUSTED.

Checks: dials with no retry left (pushback -1) are not retried, the server
sees one attempt; dials inviting retries after 400 ms (pushback 400) are
retried up to maxAttempts, each attempt at least 400 ms after the one before
(the policy's own backoff is 10 ms, as the case without a pushback shows);
the x-headroom-retry trailer reaches the client intact; a status the policy
does not list (UNAVAILABLE) is not retried whatever the pushback says.

Needs no root; needs python3-grpcio (run with /usr/bin/python3). A missing
module fails with CI=true and skips (exit 77) elsewhere. Not in the sanitizer
build: Python cannot load a library built with AddressSanitizer.
"""

import ctypes
import json
import os
import sys
import threading
import time
import unittest
from concurrent import futures

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import harness  # noqa: E402  (tests/support/harness.py: the prologue)
from harness import figure, note  # noqa: E402

try:
    import grpc
    PROBLEMS = []
except ImportError:
    PROBLEMS = [f"missing: python3-grpcio for {sys.executable} (Debian: apt-get install python3-grpcio)"]

LIBRARY = os.path.join("orca", "libheadroom-orca.so")
BUILD = harness.prologue("grpc_pushback_test.py", (LIBRARY,), PROBLEMS)

SERVICE = "headroom.test.Shed"
METHOD = f"/{SERVICE}/Call"
MAX_ATTEMPTS = 4
BACKOFF_S = 0.01
# gRPC's timers fire on a millisecond clock: an attempt may come this much
# before the pushback measured on the server's clock has passed.
TIMER_SLACK_S = 0.005


class Dials(ctypes.Structure):  # headroom_retry_dials
    _fields_ = [("max_retries", ctypes.c_int32), ("reserved", ctypes.c_int32),
                ("retry_after_seconds", ctypes.c_double)]


class Trailer(ctypes.Structure):  # headroom_grpc_trailer
    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char * 88)]


LIB = ctypes.CDLL(os.path.join(BUILD.build_dir, LIBRARY))
LIB.headroom_retry_grpc_trailers.argtypes = [ctypes.POINTER(Dials), ctypes.POINTER(Trailer)]
LIB.headroom_retry_grpc_trailers.restype = ctypes.c_int


def shed_trailers(max_retries, retry_after_seconds):
    """The library's trailers for the dials, as (key, value) pairs."""
    out = (Trailer * 2)()
    n = LIB.headroom_retry_grpc_trailers(ctypes.byref(Dials(max_retries, 0, retry_after_seconds)), out)
    assert n == 2, f"headroom_retry_grpc_trailers returned {n}"
    return tuple((t.key.decode(), t.value.decode()) for t in out)


class ShedServer:
    """A gRPC server that sheds every call with `code` and `trailers`."""

    def __init__(self, code, trailers):
        self.code, self.trailers = code, trailers
        self.lock = threading.Lock()
        self.attempts = []  # (monotonic time, grpc-previous-rpc-attempts or None)
        handler = grpc.method_handlers_generic_handler(
            SERVICE, {"Call": grpc.unary_unary_rpc_method_handler(self.call)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=(handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def call(self, request, context):
        previous = dict(context.invocation_metadata()).get("grpc-previous-rpc-attempts")
        with self.lock:
            self.attempts.append((time.monotonic(), previous))
        context.set_trailing_metadata(self.trailers)
        context.abort(self.code, "shed")

    def seen(self):
        with self.lock:
            return list(self.attempts)

    def stop(self):
        self.server.stop(grace=None)


def retrying_channel(port):
    """A channel whose service config retries RESOURCE_EXHAUSTED."""
    config = {"methodConfig": [{
        "name": [{"service": SERVICE}],
        "retryPolicy": {"maxAttempts": MAX_ATTEMPTS, "initialBackoff": f"{BACKOFF_S}s",
                        "maxBackoff": f"{BACKOFF_S}s", "backoffMultiplier": 1,
                        "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}}]}
    return grpc.insecure_channel(f"127.0.0.1:{port}", options=[
        ("grpc.enable_retries", 1), ("grpc.service_config", json.dumps(config))])


class GrpcPushback(unittest.TestCase):

    def shed_once(self, code, trailers):
        """One call against a server shedding with code and trailers: the
        client's error and the attempts the server saw."""
        server = ShedServer(code, trailers)
        self.addCleanup(server.stop)
        channel = retrying_channel(server.port)
        self.addCleanup(channel.close)
        with self.assertRaises(grpc.RpcError) as caught:
            channel.unary_unary(METHOD)(b"request", timeout=20)
        # A late retry would come within the pushback; wait past it.
        time.sleep(0.6)
        return caught.exception, server.seen()

    def test_trailers_are_pushback_then_dials(self):
        self.assertEqual(grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], 8)  # HEADROOM_GRPC_SHED_STATUS
        self.assertEqual(shed_trailers(0, 20.0), (("grpc-retry-pushback-ms", "-1"),
                                                  ("x-headroom-retry", '{"maxRetries":0,"retryAfterSeconds":20}')))
        self.assertEqual(shed_trailers(1, 2.5)[0], ("grpc-retry-pushback-ms", "2500"))

    def test_no_retry_left_is_not_retried(self):
        trailers = shed_trailers(0, 5.0)
        self.assertEqual(trailers[0][1], "-1")
        error, attempts = self.shed_once(grpc.StatusCode.RESOURCE_EXHAUSTED, trailers)
        self.assertEqual(error.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(len(attempts), 1, f"the server saw {len(attempts)} attempts")
        got = dict(error.trailing_metadata() or ())
        self.assertEqual(json.loads(got.get("x-headroom-retry", "null")), {"maxRetries": 0, "retryAfterSeconds": 5})
        figure(f"pushback -1: {len(attempts)} attempt")

    def test_pushback_spaces_the_retries(self):
        trailers = shed_trailers(2, 0.4)
        self.assertEqual(trailers[0][1], "400")
        error, attempts = self.shed_once(grpc.StatusCode.RESOURCE_EXHAUSTED, trailers)
        self.assertEqual(error.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        # gRPC's pushback has no count: the policy's maxAttempts bounds the attempts.
        self.assertEqual(len(attempts), MAX_ATTEMPTS, f"the server saw {len(attempts)} attempts")
        self.assertEqual([p for _, p in attempts], [None, "1", "2", "3"])
        gaps = [b[0] - a[0] for a, b in zip(attempts, attempts[1:])]
        for gap in gaps:
            self.assertGreaterEqual(gap, 0.4 - TIMER_SLACK_S, f"gaps {gaps}")
        figure("pushback 400 ms: gaps " + ", ".join(f"{g * 1000:.0f}" for g in gaps) + " ms")

    def test_without_pushback_the_backoff_decides(self):
        trailers = (shed_trailers(2, 0.4)[1],)  # the dials alone
        _, attempts = self.shed_once(grpc.StatusCode.RESOURCE_EXHAUSTED, trailers)
        self.assertEqual(len(attempts), MAX_ATTEMPTS)
        gaps = [b[0] - a[0] for a, b in zip(attempts, attempts[1:])]
        self.assertLess(max(gaps), 0.3, f"gaps {gaps}: the 10 ms backoff, not the dials' 400 ms")
        figure("no pushback, 10 ms backoff: gaps " + ", ".join(f"{g * 1000:.0f}" for g in gaps) + " ms")

    def test_a_status_outside_the_policy_is_not_retried(self):
        error, attempts = self.shed_once(grpc.StatusCode.UNAVAILABLE, shed_trailers(2, 0.0))
        self.assertEqual(error.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(len(attempts), 1)


def main():
    note(f"grpcio {grpc.__version__}, {os.path.join(BUILD.build_dir, LIBRARY)}")
    return harness.run_suite(GrpcPushback)


if __name__ == "__main__":
    sys.exit(main())
