#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A real gRPC server and client (python3-grpcio) for tests/http2/http2_test.py.

    grpc_peer.py server PORT
    grpc_peer.py client PORT SECONDS CONCURRENCY OUT.json [--slow N] [--errors N] [--timeout-ms N]

The server has one unary method, /headroom.test.Probe/Call, on raw bytes:
a request b"slow" sleeps 40 ms first, b"fail" ends with status INTERNAL,
anything else answers at once. It prints "port=N" once it listens.

The client keeps CONCURRENCY calls in flight on one channel (one HTTP/2
connection) for SECONDS: of every 100 calls, --slow are "slow" and --errors
are "fail", spread evenly. It measures each call from before it is sent to
its status (a call past --timeout-ms, 10 s by default, is cancelled: the
client resets its stream), and writes what it counted to OUT.json: calls, errors, the
latencies in ms, and when the calls ran (monotonic seconds).
"""

import json
import sys
import threading
import time
from concurrent import futures

import grpc

METHOD = "/headroom.test.Probe/Call"
SLOW_S = 0.040


def serve(port):
    def call(request, context):
        if request == b"slow":
            time.sleep(SLOW_S)
        elif request == b"fail":
            context.abort(grpc.StatusCode.INTERNAL, "asked to fail")
        return b"ok"

    handler = grpc.method_handlers_generic_handler(
        "headroom.test.Probe", {"Call": grpc.unary_unary_rpc_method_handler(call)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64), handlers=(handler,),
                         options=[("grpc.so_reuseport", 0)])
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"port={bound}", flush=True)
    server.wait_for_termination()


def kind_of(i, slow, errors):
    """Of every 100 calls, `slow` slow ones and `errors` failing ones, spread
    (37 is prime to 100: j takes every value once per 100 calls)."""
    j = (i * 37) % 100
    if j < slow:
        return b"slow"
    if j < slow + errors:
        return b"fail"
    return b"fast"


def client(port, seconds, concurrency, out, slow, errors, timeout_s=10.0):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
    grpc.channel_ready_future(channel).result(timeout=10)
    call = channel.unary_unary(METHOD)
    lock = threading.Lock()
    counter = [0]
    latencies, failed = [], [0]
    started = time.monotonic()
    deadline = started + seconds

    def worker():
        while time.monotonic() < deadline:
            with lock:
                i = counter[0]
                counter[0] += 1
            t0 = time.monotonic()
            try:
                call(kind_of(i, slow, errors), timeout=timeout_s)
                bad = False
            except grpc.RpcError as e:
                bad = e.code() != grpc.StatusCode.OK
            ms = (time.monotonic() - t0) * 1000
            with lock:
                latencies.append(ms)
                failed[0] += bad

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ended = time.monotonic()
    channel.close()
    with open(out, "w") as f:
        json.dump({"calls": len(latencies), "errors": failed[0], "latencies_ms": latencies,
                   "started": started, "ended": ended}, f)


def main(argv):
    if len(argv) >= 3 and argv[1] == "server":
        serve(int(argv[2]))
        return 0
    if len(argv) >= 6 and argv[1] == "client":
        rest = argv[6:]
        opts = {"--slow": 0, "--errors": 0, "--timeout-ms": 10000}
        for i in range(0, len(rest) - 1, 2):
            opts[rest[i]] = int(rest[i + 1])
        client(int(argv[2]), float(argv[3]), int(argv[4]), argv[5], opts["--slow"], opts["--errors"],
               opts["--timeout-ms"] / 1000)
        return 0
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
