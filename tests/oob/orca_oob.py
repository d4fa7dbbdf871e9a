#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A client for ORCA's out-of-band service that shares nothing with headroom.

    orca_oob.py ADDRESS [--authority A] [--interval SECONDS] [--count N] [--timeout S]
    orca_oob.py --decode FILE        (an .orca file as one JSON line)
    orca_oob.py --self-test          (the codec against protoc: $PROTOC, else protoc on PATH)

Calls /xds.service.orca.v3.OpenRcaService/StreamCoreMetrics through Python's
gRPC (Debian's python3-grpcio) on raw bytes: no generated stubs, no protobuf
runtime. The request (xds.service.orca.v3.OrcaLoadReportRequest) and the
reports (xds.data.orca.v3.OrcaLoadReport) are encoded and decoded here by hand
from the public definitions' field numbers, so a mistake shared by headroom's
.proto files and its code cannot hide in both ends of a test.

ADDRESS: "127.0.0.1:9447", "[::1]:9447" or "unix:/absolute/path". One JSON
line per message on stdout; the stream's final status on stderr. Exit 0 when
--count messages arrived or the stream ended with OK, 1 otherwise.
"""

import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

try:
    import grpc
except ImportError:  # the codec and the self-test work without it
    grpc = None

METHOD = "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics"

DOUBLE_FIELDS = {1: "cpu_utilization", 2: "mem_utilization", 6: "rps_fractional", 7: "eps",
                 9: "application_utilization"}
UINT64_FIELDS = {3: "rps"}
MAP_FIELDS = {4: "request_cost", 5: "utilization", 8: "named_metrics"}
FIELD_ORDER = ["cpu_utilization", "mem_utilization", "rps", "request_cost", "utilization", "rps_fractional",
               "eps", "named_metrics", "application_utilization"]
NUMBER_OF = {name: n for table in (DOUBLE_FIELDS, UINT64_FIELDS, MAP_FIELDS) for n, name in table.items()}

WT_VARINT, WT_FIXED64, WT_LEN, WT_START_GROUP, WT_END_GROUP, WT_FIXED32 = 0, 1, 2, 3, 4, 5
U64 = 1 << 64
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


# ---------------------------------------------------------------------------
# Wire format

def encode_varint(value):
    """A varint of a value in [-2^63, 2^64): negatives as 64-bit two's
    complement, 10 bytes (int32 and int64 alike, as protobuf does)."""
    if value < 0:
        if value < INT64_MIN:
            raise ValueError(f"varint out of range: {value}")
        value += U64
    if value >= U64:
        raise ValueError(f"varint out of range: {value}")
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_varint(data, pos):
    """(value as an unsigned 64-bit number, next position)."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & (U64 - 1), pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def as_int64(u):
    return u - U64 if u >= 1 << 63 else u


def as_int32(u):
    u &= 0xFFFFFFFF  # protobuf truncates an int32 varint to its low 32 bits
    return u - (1 << 32) if u >= 1 << 31 else u


def tag(field, wire_type):
    return encode_varint((field << 3) | wire_type)


def len_field(field, payload):
    return tag(field, WT_LEN) + encode_varint(len(payload)) + payload


def double_field(field, value):
    return tag(field, WT_FIXED64) + struct.pack("<d", value)


def read_fields(data):
    """Yields (field number, wire type, value) over a message's bytes: an int
    for a varint, bytes for the others (8 or 4 bytes, the payload, a group's
    body). Raises ValueError on malformed input."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = decode_varint(data, pos)
        field, wt = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wt == WT_VARINT:
            value, pos = decode_varint(data, pos)
        elif wt == WT_FIXED64:
            if pos + 8 > end:
                raise ValueError("truncated fixed64")
            value, pos = bytes(data[pos:pos + 8]), pos + 8
        elif wt == WT_LEN:
            n, pos = decode_varint(data, pos)
            if n > end - pos:
                raise ValueError(f"length {n} beyond the message's end")
            value, pos = bytes(data[pos:pos + n]), pos + n
        elif wt == WT_FIXED32:
            if pos + 4 > end:
                raise ValueError("truncated fixed32")
            value, pos = bytes(data[pos:pos + 4]), pos + 4
        elif wt == WT_START_GROUP:
            start = pos
            pos = _skip_group(data, pos, field, 1)
            value = bytes(data[start:pos])
        elif wt == WT_END_GROUP:
            raise ValueError(f"end group {field} without a start")
        else:
            raise ValueError(f"wire type {wt} (field {field})")
        yield field, wt, value


def _skip_group(data, pos, field, depth):
    if depth > 64:
        raise ValueError("groups nested too deep")
    while True:
        key, pos = decode_varint(data, pos)
        f, wt = key >> 3, key & 7
        if f == 0:
            raise ValueError("field number 0")
        if wt == WT_END_GROUP:
            if f != field:
                raise ValueError(f"end group {f} inside group {field}")
            return pos
        if wt == WT_VARINT:
            _, pos = decode_varint(data, pos)
        elif wt == WT_FIXED64:
            pos += 8
        elif wt == WT_FIXED32:
            pos += 4
        elif wt == WT_LEN:
            n, pos = decode_varint(data, pos)
            pos += n
        elif wt == WT_START_GROUP:
            pos = _skip_group(data, pos, f, depth + 1)
        else:
            raise ValueError(f"wire type {wt} (field {f})")
        if pos > len(data):
            raise ValueError("truncated group")


# ---------------------------------------------------------------------------
# OrcaLoadReportRequest

def _split_seconds(interval_seconds, nanos):
    if isinstance(interval_seconds, float):
        if not math.isfinite(interval_seconds):
            raise ValueError(f"interval {interval_seconds}")
        whole = int(interval_seconds)  # toward zero: seconds and nanos share the sign, as Duration wants
        return whole, nanos + int(round((interval_seconds - whole) * 1e9))
    return int(interval_seconds or 0), nanos


def encode_request(interval_seconds=None, nanos=0, cost_names=()):
    """OrcaLoadReportRequest's bytes. interval_seconds None and nanos 0: no
    report_interval at all; otherwise a Duration (seconds, nanos) even when
    both are 0 (an empty submessage). A float interval is split into seconds
    and nanos; seconds and nanos are sent as given, out-of-range ones too
    (within int64 / int32), so that a test can send what a client must not."""
    out = b""
    if interval_seconds is not None or nanos:
        seconds, nanos = _split_seconds(interval_seconds, nanos)
        if not INT64_MIN <= seconds <= INT64_MAX:
            raise ValueError(f"seconds {seconds} outside int64")
        if not INT32_MIN <= nanos <= INT32_MAX:
            raise ValueError(f"nanos {nanos} outside int32")
        duration = b""
        if seconds:
            duration += tag(1, WT_VARINT) + encode_varint(seconds)
        if nanos:
            duration += tag(2, WT_VARINT) + encode_varint(nanos)
        out += len_field(1, duration)
    for name in cost_names:
        out += len_field(2, name.encode("utf-8") if isinstance(name, str) else bytes(name))
    return out


def decode_request(data):
    """{"report_interval": (seconds, nanos) or None, "request_cost_names": [...]}."""
    req = {"report_interval": None, "request_cost_names": []}
    for field, wt, value in read_fields(data):
        if field == 1 and wt == WT_LEN:
            seconds = nanos = 0
            if req["report_interval"] is not None:  # a repeated submessage merges
                seconds, nanos = req["report_interval"]
            for f, w, v in read_fields(value):
                if f == 1 and w == WT_VARINT:
                    seconds = as_int64(v)
                elif f == 2 and w == WT_VARINT:
                    nanos = as_int32(v)
            req["report_interval"] = (seconds, nanos)
        elif field == 2 and wt == WT_LEN:
            req["request_cost_names"].append(value.decode("utf-8"))
    return req


# ---------------------------------------------------------------------------
# OrcaLoadReport

def empty_report():
    return {"cpu_utilization": 0.0, "mem_utilization": 0.0, "rps": 0, "request_cost": {}, "utilization": {},
            "rps_fractional": 0.0, "eps": 0.0, "named_metrics": {}, "application_utilization": 0.0}


def _map_entry(data):
    key, value = "", 0.0
    for field, wt, v in read_fields(data):
        if field == 1 and wt == WT_LEN:
            key = v.decode("utf-8")  # proto3 strings are UTF-8; invalid bytes are a parse error
        elif field == 2 and wt == WT_FIXED64:
            value = struct.unpack("<d", v)[0]
    return key, value


def decode_report(data, unknown=None):
    """An OrcaLoadReport's bytes as a dict keyed by the field names: maps as
    dicts, absent numbers 0. Unknown fields, and known numbers with another
    wire type (which protobuf treats as unknown), are skipped; pass a list as
    `unknown` to collect them as (field, wire type). A repeated scalar keeps
    its last value, a repeated map key its last entry, as protobuf does.
    Raises ValueError on bytes that are not a message."""
    r = empty_report()
    for field, wt, value in read_fields(data):
        if field in DOUBLE_FIELDS and wt == WT_FIXED64:
            r[DOUBLE_FIELDS[field]] = struct.unpack("<d", value)[0]
        elif field in UINT64_FIELDS and wt == WT_VARINT:
            r[UINT64_FIELDS[field]] = value
        elif field in MAP_FIELDS and wt == WT_LEN:
            k, v = _map_entry(value)
            r[MAP_FIELDS[field]][k] = v
        elif unknown is not None:
            unknown.append((field, wt))
    return r


def encode_report(report):
    """A report dict (decode_report's shape; missing keys are defaults) as
    bytes, fields in number order, zeros left out as proto3 does (a -0.0 is
    written: its bits are not zero)."""
    out = b""
    for name in FIELD_ORDER:
        if name not in report:
            continue
        n, value = NUMBER_OF[name], report[name]
        if n in DOUBLE_FIELDS:
            if struct.pack("<d", value) != b"\0" * 8:
                out += double_field(n, value)
        elif n in UINT64_FIELDS:
            if value:
                out += tag(n, WT_VARINT) + encode_varint(value)
        else:
            for k, v in value.items():
                out += len_field(n, len_field(1, k.encode("utf-8")) + double_field(2, v))
    unknown = set(report) - set(FIELD_ORDER)
    if unknown:
        raise ValueError(f"not OrcaLoadReport fields: {sorted(unknown)}")
    return out


def read_report_file(path):
    with open(path, "rb") as f:
        return decode_report(f.read())


def _json_number(v):
    return float(v)  # protobuf's JSON writes "NaN", "Infinity", "-Infinity" as strings


def report_from_json(obj):
    """A report as protobuf's JSON mapping prints it (headroomctl cat --json's
    "report", proto field names) in decode_report's shape, to compare."""
    r = empty_report()
    for key, value in obj.items():
        if key in MAP_FIELDS.values():
            r[key] = {k: _json_number(v) for k, v in value.items()}
        elif key in UINT64_FIELDS.values():
            r[key] = int(value)  # 64-bit integers are JSON strings
        elif key in DOUBLE_FIELDS.values():
            r[key] = _json_number(value)
        else:
            raise ValueError(f"not an OrcaLoadReport field: {key!r}")
    return r


def metadata(report):
    """(seq, timestamp_ms, stopped) from headroom's named_metrics."""
    nm = report["named_metrics"]
    seq, ts = nm.get("headroom.seq"), nm.get("headroom.timestamp_ms")
    return (int(seq) if seq is not None else None, int(ts) if ts is not None else None,
            nm.get("headroom.stopped") == 1)


# ---------------------------------------------------------------------------
# The client

def channel(target, authority=None, options=()):
    """An insecure channel: no proxy from the environment, no retries, its
    own connection (not shared with other channels to the same target)."""
    if grpc is None:
        raise RuntimeError("python3-grpcio is not installed (Debian: apt-get install python3-grpcio)")
    opts = [("grpc.enable_http_proxy", 0), ("grpc.enable_retries", 0), ("grpc.use_local_subchannel_pool", 1)]
    if authority is not None:
        opts.append(("grpc.default_authority", authority))
    return grpc.insecure_channel(target, options=opts + list(options))


class Stream:
    """One StreamCoreMetrics call; iterate for (receive_monotonic_time,
    report_dict, raw_bytes). When iteration ends, .code is the grpc.StatusCode
    (OK, the server's status, DEADLINE_EXCEEDED after `timeout`, CANCELLED
    after `count` messages or close()), .details its message, and
    .ended_by_count says whether this client ended it after `count`."""

    def __init__(self, target, authority=None, interval=None, count=None, timeout=None, nanos=0,
                 cost_names=(), request=None, metadata=None, options=(), wait_for_ready=False):
        self.target, self.authority, self.count = target, authority, count
        self.request = request if request is not None else encode_request(interval, nanos, cost_names)
        self._channel = channel(target, authority, options)
        call = self._channel.unary_stream(METHOD, request_serializer=None, response_deserializer=None)
        self.started = time.monotonic()
        self._call = call(self.request, timeout=timeout, metadata=metadata, wait_for_ready=wait_for_ready)
        self.received = 0
        self.code = self.details = None
        self.ended_by_count = False
        self.ended_at = None
        self.decode_errors = []
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        if self.count is not None and self.received >= self.count:
            self.ended_by_count = True
            self._finish(cancel=True)
            raise StopIteration
        try:
            raw = next(self._call)
        except StopIteration:
            self._finish()
            raise
        except grpc.RpcError:
            self._finish()
            raise StopIteration from None
        t = time.monotonic()
        self.received += 1
        try:
            report = decode_report(raw)
        except ValueError as e:
            self.decode_errors.append(f"message {self.received}: {e}")
            report = None
        return t, report, raw

    def _finish(self, cancel=False):
        if self._done:
            return
        self._done = True
        self.ended_at = time.monotonic()
        if cancel:
            self._call.cancel()
        try:
            self.code, self.details = self._call.code(), self._call.details()
        except Exception as e:  # no status from a call that never started
            self.code, self.details = None, repr(e)
        self._channel.close()

    def running(self):
        """Whether the call is still open (without reading from it)."""
        return not self._done and not self._call.done()

    def close(self):
        """Cancels the call (if it still runs) and closes the channel."""
        self._finish(cancel=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def stream(target, authority=None, interval=None, count=None, timeout=None, **kwargs):
    """A Stream (see there): iterate it like a generator of
    (receive_monotonic_time, report_dict, raw_bytes); read .code and .details
    once it is exhausted."""
    return Stream(target, authority=authority, interval=interval, count=count, timeout=timeout, **kwargs)


# ---------------------------------------------------------------------------
# Self-test against protoc

def _text_string(s):
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c in '"\\':
            out.append("\\" + c)
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _text_double(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def report_text_format(report):
    lines = []
    for name in FIELD_ORDER:
        if name not in report:
            continue
        v = report[name]
        if isinstance(v, dict):
            for k, x in v.items():
                lines.append(f"{name} {{ key: {_text_string(k)} value: {_text_double(x)} }}")
        elif name == "rps":
            lines.append(f"{name}: {v}")
        else:
            lines.append(f"{name}: {_text_double(v)}")
    return "\n".join(lines) + "\n"


def protoc_path():
    """$PROTOC (e.g. the build's protoc), else protoc on PATH."""
    return os.environ.get("PROTOC") or shutil.which("protoc")


def _protoc(args, data, include):
    r = subprocess.run([protoc_path()] + [f"-I{d}" for d in include] + args, input=data, capture_output=True,
                       timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"protoc {' '.join(args)} exited {r.returncode}: {r.stderr.decode()}")
    return r.stdout


def _same(a, b):
    """Report dicts equal, NaN equal to NaN and -0.0 told from 0.0."""
    def norm(x):
        if isinstance(x, float):
            return struct.pack("<d", x)
        if isinstance(x, dict):
            return {k: norm(v) for k, v in x.items()}
        return x
    return norm(a) == norm(b)


def self_test(source_dir=None, log=None):
    """The codec against protoc: reports protoc encoded from text format are
    decoded here; reports encoded here go through protoc (decode to text,
    encode again) and come back equal; requests encoded here are the bytes
    protoc encodes, from a .proto written here from the public field numbers
    and from headroom's own orca.proto when it is there. Raises
    AssertionError; returns the number of checks."""
    log = log or (lambda text: print(text, file=sys.stderr))
    if not protoc_path():
        raise AssertionError("protoc is not installed (Debian: apt-get install protobuf-compiler), nor named by $PROTOC")
    source_dir = source_dir or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    proto_dir = os.path.join(source_dir, "orca", "proto")
    report_proto = "xds/data/orca/v3/orca_load_report.proto"
    if not os.path.exists(os.path.join(proto_dir, report_proto)):
        raise AssertionError(f"no {report_proto} under {proto_dir}")
    checks = 0

    def check(ok, what):
        nonlocal checks
        if not ok:
            raise AssertionError(what)
        checks += 1

    # 1. Reports from protoc's encoder.
    reports = [
        {},
        {"cpu_utilization": 0.5},
        {"cpu_utilization": 4.25, "mem_utilization": 0.016530850088665124, "rps": 18446744073709551615,
         "request_cost": {"db": 12.5}, "utilization": {"cpu": 1.0, "memory": 0.1, "io.pressure": 0.0006404868041846091},
         "rps_fractional": 200.0071190533956, "eps": 1e-300, "application_utilization": 1.7976931348623157e308,
         "named_metrics": {"headroom.seq": 34.0, "headroom.timestamp_ms": 1796168987930.0, "": 0.0,
                           "caf\u00e9 \u65e5\u672c \"q\" \\": 5e-324, "neg": -2.5, "negzero": -0.0}},
        {"rps": 1, "eps": float("inf"), "rps_fractional": float("nan"), "mem_utilization": -0.0},
        {"named_metrics": {f"k{i}": i * 0.1 for i in range(300)}, "utilization": {"x" * 200: 0.75}},
    ]
    for i, want in enumerate(reports):
        data = _protoc(["--encode=xds.data.orca.v3.OrcaLoadReport", report_proto],
                       report_text_format(want).encode(), [proto_dir])
        got = decode_report(data)
        full = dict(empty_report(), **want)
        check(_same(got, full), f"report {i}: protoc encoded {full!r}, decoded {got!r}")
        if all(len(v) <= 1 for v in want.values() if isinstance(v, dict)):
            # No map with two entries, so one order: our bytes are protoc's.
            check(encode_report(want) == data, f"report {i}: encoded {encode_report(want).hex()}, "
                                               f"protoc {data.hex()}")
        # 2. Our encoder through protoc and back.
        ours = encode_report(full)
        text = _protoc(["--decode=xds.data.orca.v3.OrcaLoadReport", report_proto], ours, [proto_dir])
        again = _protoc(["--encode=xds.data.orca.v3.OrcaLoadReport", report_proto], text, [proto_dir])
        check(_same(decode_report(again), full), f"report {i}: through protoc's decoder: {text.decode()!r}")

    # 3. Unknown fields of every wire type, known numbers with another wire
    # type, repeated scalars and map keys: what protobuf does.
    odd = (tag(1, WT_FIXED64) + struct.pack("<d", 0.25) + tag(100, WT_VARINT) + encode_varint(-1) +
           tag(101, WT_FIXED32) + b"abcd" + tag(102, WT_LEN) + encode_varint(3) + b"xyz" +
           tag(103, WT_START_GROUP) + tag(1, WT_VARINT) + b"\x05" + tag(2, WT_START_GROUP) + tag(2, WT_END_GROUP) +
           tag(103, WT_END_GROUP) + tag(2, WT_VARINT) + b"\x07" + tag(1, WT_FIXED64) + struct.pack("<d", 0.75) +
           len_field(8, len_field(1, b"a") + double_field(2, 1.0)) +
           len_field(8, len_field(1, b"a") + double_field(2, 2.0) + tag(3, WT_VARINT) + b"\x01") +
           len_field(8, double_field(2, 3.0)) + len_field(5, len_field(1, b"k")))
    unknown = []
    got = decode_report(odd, unknown)
    check(got["cpu_utilization"] == 0.75 and got["mem_utilization"] == 0.0 and
          got["named_metrics"] == {"a": 2.0, "": 3.0} and got["utilization"] == {"k": 0.0},
          f"odd fields: {got!r}")
    check(unknown == [(100, 0), (101, 5), (102, 2), (103, 3), (2, 0)], f"unknown fields seen: {unknown}")
    # protoc reads the same known fields (it prints unknown ones by number,
    # which its text parser does not take back: those lines are dropped).
    text = _protoc(["--decode=xds.data.orca.v3.OrcaLoadReport", report_proto], odd, [proto_dir]).decode()
    known, depth = [], 0
    for line in text.splitlines():
        s = line.strip()
        if depth:
            depth += s.endswith("{") - (s == "}")
            continue
        if s[:1].isdigit():
            depth = int(s.endswith("{"))
            continue
        known.append(line)
    again = _protoc(["--encode=xds.data.orca.v3.OrcaLoadReport", report_proto], "\n".join(known).encode(),
                    [proto_dir])
    check(_same(decode_report(again), got), f"odd fields through protoc: {text!r}")
    for bad in (b"\x09\x00\x00", b"\x0a\x05ab", b"\x80", b"\x00\x00", b"\x0f", b"\xff" * 11,
                tag(1, WT_END_GROUP), tag(3, WT_START_GROUP) + b"\x08", len_field(8, len_field(1, b"\xff"))):
        try:
            decode_report(bad)
            check(False, f"{bad.hex()} decoded")
        except ValueError:
            checks += 1

    # 4. Requests: our bytes are protoc's, with the public numbers and with
    # headroom's own definition of the service.
    tmp = tempfile.mkdtemp(prefix="orca-oob-selftest-")
    try:
        with open(os.path.join(tmp, "req.proto"), "w") as f:
            f.write('syntax = "proto3";\npackage selftest;\n'
                    "message Duration { int64 seconds = 1; int32 nanos = 2; }\n"
                    "message OrcaLoadReportRequest { Duration report_interval = 1; "
                    "repeated string request_cost_names = 2; }\n")
        definitions = [("selftest.OrcaLoadReportRequest", "req.proto", [tmp])]
        service_proto = "xds/service/orca/v3/orca.proto"
        if os.path.exists(os.path.join(proto_dir, service_proto)):
            include = [proto_dir] + [d for d in ("/usr/include",)
                                     if os.path.exists(os.path.join(d, "google/protobuf/duration.proto"))]
            definitions.append(("xds.service.orca.v3.OrcaLoadReportRequest", service_proto, include))
        else:
            log(f"NOTE: self-test: no {service_proto} in {proto_dir}; requests checked against the public numbers only")
        requests = [
            ((None, 0, ()), ""),
            ((0, 0, ()), "report_interval {}"),
            ((1, 0, ()), "report_interval { seconds: 1 }"),
            ((0, 300_000_000, ()), "report_interval { nanos: 300000000 }"),
            ((0.3, 0, ()), "report_interval { nanos: 300000000 }"),
            ((2.5, 0, ()), "report_interval { seconds: 2 nanos: 500000000 }"),
            ((-1, 0, ()), "report_interval { seconds: -1 }"),
            ((0, -1, ()), "report_interval { nanos: -1 }"),
            ((-0.5, 0, ()), "report_interval { nanos: -500000000 }"),
            ((0, 1_000_000_000, ()), "report_interval { nanos: 1000000000 }"),
            ((INT64_MAX, 999_999_999, ()), f"report_interval {{ seconds: {INT64_MAX} nanos: 999999999 }}"),
            ((INT64_MIN, INT32_MIN, ()), f"report_interval {{ seconds: {INT64_MIN} nanos: {INT32_MIN} }}"),
            ((3600, 0, ("a", "", "caf\u00e9")), 'report_interval { seconds: 3600 } request_cost_names: "a" '
                                                'request_cost_names: "" request_cost_names: "caf\\303\\251"'),
            ((None, 0, [f"cost-{i:05d}" for i in range(10000)]),
             " ".join(f'request_cost_names: "cost-{i:05d}"' for i in range(10000))),
        ]
        for message, proto, include in definitions:
            for (seconds, nanos, names), text in requests:
                want = _protoc([f"--encode={message}", proto], text.encode(), include)
                got = encode_request(seconds, nanos, names)
                check(got == want, f"{message} {text[:80]!r}: encoded {got.hex()[:120]}, protoc {want.hex()[:120]}")
                back = decode_request(want)
                s, n = _split_seconds(seconds, nanos) if seconds is not None or nanos else (None, None)
                check(back["report_interval"] == (None if s is None else (s, n)) and
                      back["request_cost_names"] == list(names), f"{text[:80]!r} decoded {back!r}")
        check(encode_request(-1) == b"\x0a\x0b\x08" + b"\xff" * 9 + b"\x01", "seconds -1 is a 10-byte varint")
        check(encode_request(0, -1) == b"\x0a\x0b\x10" + b"\xff" * 9 + b"\x01", "nanos -1 is a 10-byte varint")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # 5. The JSON mapping headroomctl prints.
    j = json.loads('{"cpu_utilization":0,"mem_utilization":0.5,"rps":"18446744073709551615","request_cost":{},'
                   '"utilization":{"cpu":0.99996440599999992},"rps_fractional":"NaN","eps":"Infinity",'
                   '"named_metrics":{"headroom.seq":34},"application_utilization":1e-300}')
    check(_same(report_from_json(j), dict(empty_report(), mem_utilization=0.5, rps=18446744073709551615,
                                          utilization={"cpu": 0.99996440599999992}, rps_fractional=float("nan"),
                                          eps=float("inf"), named_metrics={"headroom.seq": 34.0},
                                          application_utilization=1e-300)), f"JSON: {report_from_json(j)}")
    return checks


# ---------------------------------------------------------------------------
# CLI

def _json_safe(report):
    def num(v):
        return v if not isinstance(v, float) or math.isfinite(v) else repr(v)
    return {k: ({kk: num(vv) for kk, vv in v.items()} if isinstance(v, dict) else num(v)) for k, v in report.items()}


def main(argv):
    import argparse
    p = argparse.ArgumentParser(description="Stream ORCA load reports from an OpenRcaService.")
    p.add_argument("address", nargs="?", help='"127.0.0.1:9447", "[::1]:9447" or "unix:/path"')
    p.add_argument("--authority", help="the :authority to send (default: the address)")
    p.add_argument("--interval", type=float, help="report_interval in seconds (default: none sent)")
    p.add_argument("--count", type=int, help="stop after this many messages")
    p.add_argument("--timeout", type=float, help="deadline of the call, seconds")
    p.add_argument("--cost-name", action="append", default=[], help="a request_cost_names entry; repeatable")
    p.add_argument("--decode", metavar="FILE", help="print an .orca file as JSON and exit")
    p.add_argument("--self-test", action="store_true", help="check the codec against protoc and exit")
    p.add_argument("--source-dir", help="headroom's source tree, for --self-test (default: this file's)")
    a = p.parse_args(argv)
    if a.self_test:
        n = self_test(a.source_dir)
        print(f"self-test: {n} checks passed", file=sys.stderr)
        return 0
    if a.decode:
        print(json.dumps(_json_safe(read_report_file(a.decode)), sort_keys=False))
        return 0
    if not a.address:
        p.error("ADDRESS is required")
    s = stream(a.address, authority=a.authority, interval=a.interval, count=a.count, timeout=a.timeout,
               cost_names=a.cost_name)
    try:
        for t, report, raw in s:
            line = {"received_unix_ms": int(time.time() * 1000), "bytes": len(raw),
                    "report": _json_safe(report) if report is not None else None}
            print(json.dumps(line), flush=True)
    except KeyboardInterrupt:
        s.close()
    for e in s.decode_errors:
        print(f"decode error: {e}", file=sys.stderr)
    code = s.code.name if s.code is not None else "none"
    print(f"status: {code}" + (f": {s.details}" if s.details else "") +
          (f" (after --count {a.count})" if s.ended_by_count else ""), file=sys.stderr)
    return 0 if (s.ended_by_count or s.code == grpc.StatusCode.OK) and not s.decode_errors else 1


if __name__ == "__main__":
    if grpc is None and "--self-test" not in sys.argv and "--decode" not in sys.argv \
            and os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)  # Debian's python3-grpcio lives there
    sys.exit(main(sys.argv[1:]))
