# SPDX-License-Identifier: Apache-2.0
"""The real Prometheus server for tests: started on a free loopback port,
scraping one target every `scrape_interval`, with a small client for its HTTP
API. tests/prometheus/prometheus_test.py and tests/tune/ use it."""

import http.client
import json
import os
import time
import urllib.parse

from harness import Fatal, Proc, free_port, tail, wait_until


def http_get(host, port, path="/metrics", timeout=5.0):
    """(status, body) of one GET over a fresh connection; no proxy."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


class Prometheus:
    """`binary` scraping 127.0.0.1:target_port as job "headroom"."""

    def __init__(self, case, tmp, binary, target_port, scrape_interval="1s"):
        self.port = free_port()
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"global:\n  scrape_interval: {scrape_interval}\n  scrape_timeout: {scrape_interval}\n"
                    f"  evaluation_interval: {scrape_interval}\n"
                    "scrape_configs:\n  - job_name: headroom\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{target_port}']\n")
        tsdb = os.path.join(tmp, "tsdb")
        os.makedirs(tsdb)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = Proc("prometheus", [binary, "--config.file=" + config, "--storage.tsdb.path=" + tsdb,
                                        f"--web.listen-address=127.0.0.1:{self.port}"], tmp, case)

    def wait_ready(self, timeout=30):
        def ready():
            if not self.proc.alive():
                raise Fatal("prometheus exited: " + tail(self.proc.err()))
            return http_get("127.0.0.1", self.port, "/-/ready", 2)[0] == 200
        wait_until(ready, timeout, "Prometheus to be ready")

    def api(self, endpoint, **params):
        status, body = http_get("127.0.0.1", self.port, f"/api/v1/{endpoint}?" + urllib.parse.urlencode(params), 10)
        j = json.loads(body)
        if status != 200 or j.get("status") != "success":
            raise AssertionError(f"Prometheus {endpoint} {params}: {status} {body[:500]}")
        return j["data"]

    def query(self, expr):
        return self.api("query", query=expr, time=f"{time.time():.3f}")["result"]

    def scalar(self, expr):
        """The value of the one series an instant query returns."""
        result = self.query(expr)
        if len(result) != 1:
            raise AssertionError(f"{expr}: {len(result)} series, expected 1: {result}")
        return float(result[0]["value"][1])

    def matrix(self, expr):
        """A range selector's raw samples: [(labels, [(t, v)])]."""
        return [(r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in self.query(expr)]

    def range(self, expr, seconds=10, step=1):
        end = time.time()
        data = self.api("query_range", query=expr, start=f"{end - seconds:.3f}", end=f"{end:.3f}", step=str(step))
        return [(r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in data["result"]]
