#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A cleartext HTTP/2 server on Python's h2 (python3-h2, with its own HPACK
encoder, python3-hpack) for tests/http2/http2_test.py: a request for a path
starting with /fail is answered 503, any other 200, each with a short body.
h2's encoder Huffman-codes ":status" values when shorter and adds them to
its dynamic table, so from the second 503 on a connection the status is an
indexed field: what the probe follows by counting insertions.

    h2_status_server.py PORT      prints "port=N" once it listens
"""

import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events


def serve(conn):
    h2c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    h2c.initiate_connection()
    conn.sendall(h2c.data_to_send())
    paths = {}
    while True:
        data = conn.recv(65536)
        if not data:
            return
        for event in h2c.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                paths[event.stream_id] = dict(event.headers).get(b":path", b"/")
            if isinstance(event, h2.events.StreamEnded):
                path = paths.pop(event.stream_id, b"/")
                status = b"503" if path.startswith(b"/fail") else b"200"
                h2c.send_headers(event.stream_id, [(b":status", status), (b"content-length", b"2")])
                h2c.send_data(event.stream_id, b"ok", end_stream=True)
        out = h2c.data_to_send()
        if out:
            conn.sendall(out)


def main():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(sys.argv[1])))
    srv.listen(64)
    print(f"port={srv.getsockname()[1]}", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
