#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Holds N TCP connections against a listener, the way a careless or hostile
client would, and opens a new one for each the server closes.

    flood.py HOST PORT N MODE PROTO [--rate R]

MODE: idle      connects and sends nothing
      trickle   sends the next byte of a request that never ends, one a second
      halfopen  sends whole requests (HTTP: 8 pipelined GETs; HTTP/2: the
                preface and SETTINGS), then neither reads nor writes
      garbage   sends 512 random bytes, then nothing
PROTO: http (GET /metrics) or h2 (a gRPC server's HTTP/2).

Prints a line a second to stdout: "open=O connecting=C closed=X failed=F"
(closed: by the server; failed: a connect that did not succeed). One process,
epoll; RLIMIT_NOFILE's soft limit is raised to its hard limit.
"""

import errno
import os
import resource
import select
import socket
import sys
import time

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS frame
HTTP_GET = b"GET /metrics HTTP/1.1\r\nHost: flood\r\n\r\n"


def endless(proto):
    """The bytes a trickler sends, one at a time, forever."""
    head = (H2_PREFACE + H2_SETTINGS) if proto == "h2" else b"GET /metrics HTTP/1.1\r\nHost: flood\r\nX-Pad: "
    return head, b"\x00" if proto == "h2" else b"a"


def main(argv):
    host, port, n, mode, proto = argv[1], int(argv[2]), int(argv[3]), argv[4], argv[5]
    rate = int(argv[argv.index("--rate") + 1]) if "--rate" in argv else 4000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < n + 100:
        print(f"RLIMIT_NOFILE's hard limit {hard} is below {n + 100}", file=sys.stderr)
        return 1
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    ep = select.epoll()
    conns = {}  # fd -> [socket, connected, bytes of the trickle sent]
    stats = {"closed": 0, "failed": 0}
    head, tail = endless(proto)
    once = {"halfopen": (HTTP_GET * 8) if proto == "http" else H2_PREFACE + H2_SETTINGS,
            "garbage": os.urandom(512)}.get(mode, b"")

    def drop(fd, why):
        s = conns.pop(fd)[0]
        try:
            ep.unregister(fd)
        except OSError:
            pass
        s.close()
        stats[why] += 1

    def open_one():
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect((host, port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            stats["failed"] += 1
            return
        conns[s.fileno()] = [s, False, 0]
        ep.register(s.fileno(), select.EPOLLOUT | select.EPOLLIN | select.EPOLLRDHUP)

    def connected(fd, c):
        c[1] = True
        if once:
            try:
                c[0].send(once)
            except OSError:
                pass
        # halfopen reads nothing: only the server's close is watched for.
        ep.modify(fd, select.EPOLLRDHUP if mode == "halfopen" else select.EPOLLIN | select.EPOLLRDHUP)

    last_print = last_trickle = time.monotonic()
    budget = 0.0
    while True:
        now = time.monotonic()
        budget = min(rate, budget + rate * (now - getattr(main, "t", now)))
        main.t = now
        while len(conns) < n and budget >= 1:
            open_one()
            budget -= 1
        for fd, ev in ep.poll(0.02):
            c = conns.get(fd)
            if c is None:
                continue
            if not c[1]:
                err = c[0].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err != 0 or ev & (select.EPOLLERR | select.EPOLLHUP):
                    drop(fd, "failed")
                    continue
                connected(fd, c)
                continue
            if mode == "halfopen":
                drop(fd, "closed")
                continue
            try:
                data = c[0].recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                drop(fd, "closed")
        if mode == "trickle" and now - last_trickle >= 1.0:
            last_trickle = now
            for fd, c in list(conns.items()):
                if not c[1]:
                    continue
                byte = head[c[2]:c[2] + 1] or tail
                try:
                    c[0].send(byte)
                    c[2] += 1
                except BlockingIOError:
                    pass
                except OSError as e:
                    if e.errno in (errno.EPIPE, errno.ECONNRESET):
                        drop(fd, "closed")
        if now - last_print >= 1.0:
            last_print = now
            up = sum(1 for c in conns.values() if c[1])
            print(f"open={up} connecting={len(conns) - up} closed={stats['closed']} failed={stats['failed']}",
                  flush=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except KeyboardInterrupt:
        sys.exit(0)
