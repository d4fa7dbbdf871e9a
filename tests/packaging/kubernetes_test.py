#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks packaging/kubernetes/ against itself and against the project.

Usage: kubernetes_test.py SOURCE_DIR HEADROOMD_BINARY

No cluster is needed: the manifests are parsed (python3-yaml), their fields
are compared with a table of the Kubernetes API fields they may use, and
their decisions with the systemd unit (systemd/headroomd.service), the
Containerfile and the ConfigMap's headroom.toml, which the real parser
(HEADROOMD_BINARY --check-config) must accept. Each check prints "ok: ..."
when it passes and "FAIL: ..." with the reason when it does not; the exit
status is 1 if any failed. Optional linters (hadolint, shellcheck) are run
when installed; otherwise a NOTE says what was skipped.
"""

import fnmatch
import ipaddress
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib

import yaml

NAMESPACE = "headroom"
CONTAINER = "headroomd"
METRICS_PORT_NAME = "metrics"


class Failure(Exception):
    pass


def need(condition, message):
    if not condition:
        raise Failure(message)


# ---------------------------------------------------------------------------
# Reading the files

class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, as kubectl's YAML decoder does
    (PyYAML would silently keep the last one)."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_documents(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text, list(yaml.load_all(text, Loader=StrictLoader))


def read_unit(path):
    """systemd unit -> {section: [(key, value), ...]}, continuations joined."""
    sections = {}
    current = None
    pending = ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if pending:
                line = pending + line
                pending = ""
            stripped = line.strip()
            if not stripped or stripped[0] in "#;":
                continue
            if stripped.endswith("\\"):
                pending = stripped[:-1] + " "
                continue
            if stripped.startswith("[") and stripped.endswith("]"):
                current = stripped[1:-1]
                sections.setdefault(current, [])
                continue
            key, sep, value = stripped.partition("=")
            if sep and current is not None:
                sections[current].append((key.strip(), value.strip()))
    return sections


def unit_list(unit, key):
    """A list-valued setting: assignments add up, an empty one resets."""
    values = []
    for k, v in unit.get("Service", []):
        if k != key:
            continue
        if not v:
            values = []
            continue
        values.extend(v.split())
    return values


def unit_value(unit, key):
    value = None
    for k, v in unit.get("Service", []):
        if k == key:
            value = v
    return value


def read_containerfile(path):
    """Instructions as (INSTRUCTION, arguments, line number), continuation
    lines joined and comment lines dropped, as the builders do."""
    instructions = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    buf, start = "", 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if stripped.startswith("#"):
            continue  # comments (and parser directives) end nothing
        if not buf:
            if not stripped:
                continue
            start = number
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        word, _, rest = buf.partition(" ")
        instructions.append((word.upper(), rest.strip(), start))
        buf = ""
    if buf:
        word, _, rest = buf.partition(" ")
        instructions.append((word.upper(), rest.strip(), start))
    return instructions


def substitute(text, args):
    def repl(m):
        name = m.group(1) or m.group(2)
        return args.get(name, m.group(0))
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, text)


def exec_form(text, what):
    need(text.startswith("["),
         f"Containerfile: {what} must be in exec form (a JSON array), not a shell command: {text}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise Failure(f"Containerfile: {what} is not a valid JSON array ({e}): {text}")
    need(isinstance(value, list) and all(isinstance(v, str) for v in value),
         f"Containerfile: {what} must be a JSON array of strings: {text}")
    return value


def parse_cap_text(text):
    """libcap's text form, as setcap takes it: "cap_bpf,cap_perfmon=ep" ->
    ({"BPF", "PERFMON"}, "ep")."""
    m = re.fullmatch(r"\s*([a-z_,0-9]+)\s*([=+])\s*([eip]+)\s*", text)
    need(m is not None, f"cannot read the file capabilities {text!r} (expected e.g. cap_bpf,cap_perfmon=ep)")
    caps = {c.strip().upper().removeprefix("CAP_") for c in m.group(1).split(",") if c.strip()}
    return caps, "".join(sorted(m.group(3)))


# ---------------------------------------------------------------------------
# Fields the manifests may use: the Kubernetes API (1.30+) and the Prometheus
# Operator's PodMonitor, for the objects and fields these manifests touch.
# A misspelt field (readOnlyRootFileSystem) is refused here rather than
# dropped or refused by an API server this test does not have.

LEAF = None
META = {"name": LEAF, "namespace": LEAF, "labels": LEAF, "annotations": LEAF, "generateName": LEAF,
        "finalizers": LEAF, "ownerReferences": LEAF}
SELECTOR = {"matchLabels": LEAF, "matchExpressions": LEAF}
SECCOMP = {"type": LEAF, "localhostProfile": LEAF}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": LEAF, "appArmorProfile": LEAF, "capabilities": {"add": LEAF, "drop": LEAF},
    "privileged": LEAF, "procMount": LEAF, "readOnlyRootFilesystem": LEAF, "runAsGroup": LEAF,
    "runAsNonRoot": LEAF, "runAsUser": LEAF, "seLinuxOptions": LEAF, "seccompProfile": SECCOMP,
    "windowsOptions": LEAF}
POD_SECURITY = {
    "appArmorProfile": LEAF, "fsGroup": LEAF, "fsGroupChangePolicy": LEAF, "runAsGroup": LEAF,
    "runAsNonRoot": LEAF, "runAsUser": LEAF, "seLinuxChangePolicy": LEAF, "seLinuxOptions": LEAF,
    "seccompProfile": SECCOMP, "supplementalGroups": LEAF, "supplementalGroupsPolicy": LEAF, "sysctls": LEAF,
    "windowsOptions": LEAF}
PROBE = {
    "exec": LEAF, "grpc": LEAF, "tcpSocket": LEAF, "failureThreshold": LEAF, "initialDelaySeconds": LEAF,
    "periodSeconds": LEAF, "successThreshold": LEAF, "terminationGracePeriodSeconds": LEAF,
    "timeoutSeconds": LEAF,
    "httpGet": {"host": LEAF, "httpHeaders": LEAF, "path": LEAF, "port": LEAF, "scheme": LEAF}}
RESOURCES = {"limits": {"cpu": LEAF, "memory": LEAF, "ephemeral-storage": LEAF},
             "requests": {"cpu": LEAF, "memory": LEAF, "ephemeral-storage": LEAF}, "claims": LEAF}
CONTAINER_FIELDS = {
    "args": LEAF, "command": LEAF, "env": LEAF, "envFrom": LEAF, "image": LEAF, "imagePullPolicy": LEAF,
    "lifecycle": LEAF, "livenessProbe": PROBE, "name": LEAF,
    "ports": [{"containerPort": LEAF, "hostIP": LEAF, "hostPort": LEAF, "name": LEAF, "protocol": LEAF}],
    "readinessProbe": PROBE, "resizePolicy": LEAF, "resources": RESOURCES, "restartPolicy": LEAF,
    "securityContext": CONTAINER_SECURITY, "startupProbe": PROBE, "stdin": LEAF, "stdinOnce": LEAF,
    "terminationMessagePath": LEAF, "terminationMessagePolicy": LEAF, "tty": LEAF, "volumeDevices": LEAF,
    "volumeMounts": [{"mountPath": LEAF, "mountPropagation": LEAF, "name": LEAF, "readOnly": LEAF,
                      "recursiveReadOnly": LEAF, "subPath": LEAF, "subPathExpr": LEAF}],
    "workingDir": LEAF}
VOLUME = {
    "name": LEAF,
    "hostPath": {"path": LEAF, "type": LEAF},
    "configMap": {"name": LEAF, "items": [{"key": LEAF, "path": LEAF, "mode": LEAF}], "defaultMode": LEAF,
                  "optional": LEAF},
    "emptyDir": {"medium": LEAF, "sizeLimit": LEAF}, "projected": LEAF, "secret": LEAF}
POD_SPEC = {
    "activeDeadlineSeconds": LEAF, "affinity": LEAF, "automountServiceAccountToken": LEAF,
    "containers": [CONTAINER_FIELDS], "dnsConfig": LEAF, "dnsPolicy": LEAF, "enableServiceLinks": LEAF,
    "hostAliases": LEAF, "hostIPC": LEAF, "hostNetwork": LEAF, "hostPID": LEAF, "hostUsers": LEAF,
    "hostname": LEAF, "imagePullSecrets": LEAF, "initContainers": [CONTAINER_FIELDS], "nodeName": LEAF,
    "nodeSelector": LEAF, "os": LEAF, "overhead": LEAF, "preemptionPolicy": LEAF, "priority": LEAF,
    "priorityClassName": LEAF, "readinessGates": LEAF, "resourceClaims": LEAF, "resources": LEAF,
    "restartPolicy": LEAF, "runtimeClassName": LEAF, "schedulerName": LEAF, "schedulingGates": LEAF,
    "securityContext": POD_SECURITY, "serviceAccountName": LEAF, "setHostnameAsFQDN": LEAF,
    "shareProcessNamespace": LEAF, "subdomain": LEAF, "terminationGracePeriodSeconds": LEAF,
    "tolerations": [{"effect": LEAF, "key": LEAF, "operator": LEAF, "tolerationSeconds": LEAF, "value": LEAF}],
    "topologySpreadConstraints": LEAF, "volumes": [VOLUME]}
RELABEL = [{"action": LEAF, "modulus": LEAF, "regex": LEAF, "replacement": LEAF, "separator": LEAF,
            "sourceLabels": LEAF, "targetLabel": LEAF}]
SCHEMAS = {
    ("v1", "Namespace"): {"metadata": META, "spec": LEAF},
    ("v1", "ServiceAccount"): {"metadata": META, "automountServiceAccountToken": LEAF, "imagePullSecrets": LEAF,
                               "secrets": LEAF},
    ("v1", "ConfigMap"): {"metadata": META, "data": LEAF, "binaryData": LEAF, "immutable": LEAF},
    ("apps/v1", "DaemonSet"): {"metadata": META, "spec": {
        "minReadySeconds": LEAF, "revisionHistoryLimit": LEAF, "selector": SELECTOR,
        "template": {"metadata": META, "spec": POD_SPEC},
        "updateStrategy": {"type": LEAF, "rollingUpdate": {"maxSurge": LEAF, "maxUnavailable": LEAF}}}},
    ("v1", "Service"): {"metadata": META, "spec": {
        "clusterIP": LEAF, "clusterIPs": LEAF, "externalTrafficPolicy": LEAF, "internalTrafficPolicy": LEAF,
        "ipFamilies": LEAF, "ipFamilyPolicy": LEAF, "publishNotReadyAddresses": LEAF, "selector": LEAF,
        "sessionAffinity": LEAF, "type": LEAF,
        "ports": [{"appProtocol": LEAF, "name": LEAF, "nodePort": LEAF, "port": LEAF, "protocol": LEAF,
                   "targetPort": LEAF}]}},
    ("monitoring.coreos.com/v1", "PodMonitor"): {"metadata": META, "spec": {
        "selector": SELECTOR, "namespaceSelector": {"any": LEAF, "matchNames": LEAF}, "jobLabel": LEAF,
        "podTargetLabels": LEAF, "sampleLimit": LEAF, "targetLimit": LEAF, "attachMetadata": LEAF,
        "podMetricsEndpoints": [{
            "port": LEAF, "portNumber": LEAF, "path": LEAF, "scheme": LEAF, "params": LEAF, "interval": LEAF,
            "scrapeTimeout": LEAF, "honorLabels": LEAF, "honorTimestamps": LEAF, "trackTimestampsStaleness": LEAF,
            "relabelings": RELABEL, "metricRelabelings": RELABEL, "basicAuth": LEAF, "authorization": LEAF,
            "oauth2": LEAF, "tlsConfig": LEAF, "proxyUrl": LEAF, "followRedirects": LEAF,
            "enableHttp2": LEAF, "filterRunning": LEAF}]}},
}


def check_fields(value, schema, where, problems):
    if schema is LEAF:
        return
    if isinstance(schema, list):
        if not isinstance(value, list):
            problems.append(f"{where}: expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            check_fields(item, schema[0], f"{where}[{i}]", problems)
        return
    if not isinstance(value, dict):
        problems.append(f"{where}: expected a mapping, got {type(value).__name__}")
        return
    for key, child in value.items():
        if key not in schema:
            problems.append(f"{where}.{key}: not a field of this object (misspelt?)")
            continue
        check_fields(child, schema[key], f"{where}.{key}", problems)


# ---------------------------------------------------------------------------
# The checks

class Context:
    def __init__(self, source_dir, binary):
        self.source = source_dir
        self.binary = binary
        self.deploy = os.path.join(source_dir, "packaging", "kubernetes")
        self.docs = {}       # file name -> list of documents
        self.objects = {}    # (kind, name) -> document

    def path(self, *parts):
        return os.path.join(self.deploy, *parts)

    # Lazily computed facts the checks share; each raises Failure when the
    # thing it needs is missing, so a broken prerequisite fails each check
    # that needs it with the reason.
    def obj(self, kind, name=None):
        found = [d for (k, n), d in self.objects.items() if k == kind and (name is None or n == name)]
        need(len(found) == 1, f"expected exactly one {kind}{' ' + name if name else ''} in packaging/kubernetes/*.yaml, "
             f"found {len(found)}")
        return found[0]

    def daemonset(self):
        return self.obj("DaemonSet")

    def pod(self):
        return self.daemonset()["spec"]["template"]["spec"]

    def container(self):
        found = [c for c in self.pod().get("containers", []) if c.get("name") == CONTAINER]
        need(len(found) == 1, f"the DaemonSet needs exactly one container named {CONTAINER!r}")
        return found[0]

    def volume(self, name):
        found = [v for v in self.pod().get("volumes", []) if v.get("name") == name]
        need(len(found) == 1, f"the DaemonSet has no volume named {name!r}")
        return found[0]

    def mounts(self, container):
        return container.get("volumeMounts", [])

    def config_text(self):
        cm = self.obj("ConfigMap")
        data = cm.get("data") or {}
        need("headroom.toml" in data, "the ConfigMap has no key headroom.toml")
        return data["headroom.toml"]

    def config(self):
        try:
            return tomllib.loads(self.config_text())
        except tomllib.TOMLDecodeError as e:
            raise Failure(f"the ConfigMap's headroom.toml is not valid TOML: {e}")

    def unit(self):
        return read_unit(os.path.join(self.source, "systemd", "headroomd.service"))

    def unit_caps(self):
        caps = unit_list(self.unit(), "CapabilityBoundingSet")
        need(caps, "systemd/headroomd.service has no CapabilityBoundingSet=")
        need(not any(c.startswith("~") for c in caps), "CapabilityBoundingSet= is a deny list (~); cannot compare")
        return {c.removeprefix("CAP_") for c in caps}

    def project_version(self):
        with open(os.path.join(self.source, "CMakeLists.txt"), encoding="utf-8") as f:
            m = re.search(r"project\(\s*headroom\s+VERSION\s+([0-9.]+)", f.read())
        need(m, "cannot find project(headroom VERSION ...) in CMakeLists.txt")
        return m.group(1)

    def deb_release(self):
        with open(os.path.join(self.source, "packaging", "Packaging.cmake"), encoding="utf-8") as f:
            m = re.search(r"set\(CPACK_DEBIAN_PACKAGE_RELEASE\s+(\w+)\)", f.read())
        need(m, "cannot find CPACK_DEBIAN_PACKAGE_RELEASE in packaging/Packaging.cmake")
        return m.group(1)

    def containerfile(self):
        path = self.path("Containerfile")
        need(os.path.isfile(path), "packaging/kubernetes/Containerfile is missing")
        return read_containerfile(path)

    def containerfile_args(self):
        args = {}
        for ins, rest, _ in self.containerfile():
            if ins == "ARG":
                name, sep, default = rest.partition("=")
                if sep:
                    args[name.strip()] = default.strip().strip('"')
        return args

    def listen(self):
        prom = self.config().get("prometheus")
        need(isinstance(prom, dict) and prom.get("listen"),
             "the ConfigMap's headroom.toml has no [prometheus] listen (docs/metrics.md)")
        listen = prom["listen"]
        m = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:]+):(\d+)", listen)
        need(m, f"[prometheus] listen = {listen!r} is not ADDRESS:PORT")
        host = m.group(1) or m.group(3)
        port = int(m.group(2) or m.group(4))
        return host, port

    def named_port(self, container, port):
        """A probe's or Service's port (a number or a container port's name)
        -> the number."""
        if isinstance(port, int):
            return port
        for p in container.get("ports", []):
            if p.get("name") == port:
                return p.get("containerPort")
        raise Failure(f"port {port!r} is not the name of a port of container {container.get('name')!r}")


def check_documents(ctx):
    """Every YAML document parses, is one object, and has apiVersion, kind
    and metadata."""
    files = sorted(f for f in os.listdir(ctx.deploy) if f.endswith((".yaml", ".yml")))
    need({"headroom.yaml", "monitoring.yaml"} <= set(files),
         f"packaging/kubernetes/ needs headroom.yaml and monitoring.yaml, has {files}")
    problems = []
    count = 0
    for name in files:
        try:
            text, docs = load_documents(ctx.path(name))
        except yaml.YAMLError as e:
            problems.append(f"{name} does not parse: {e}")
            continue
        if not text.startswith("# SPDX-License-Identifier: Apache-2.0\n"):
            problems.append(f"{name}: the first line must be '# SPDX-License-Identifier: Apache-2.0'")
        ctx.docs[name] = docs
        for i, doc in enumerate(docs):
            where = f"{name}, document {i + 1}"
            if doc is None:
                problems.append(f"{where} is empty (a stray '---'?)")
                continue
            if not isinstance(doc, dict):
                problems.append(f"{where} is not a mapping")
                continue
            kind = doc.get("kind")
            meta = doc.get("metadata")
            missing = [k for k, ok in (("apiVersion", isinstance(doc.get("apiVersion"), str) and doc["apiVersion"]),
                                       ("kind", isinstance(kind, str) and kind),
                                       ("metadata.name", isinstance(meta, dict) and isinstance(meta.get("name"), str)
                                        and meta["name"])) if not ok]
            if missing:
                problems.append(f"{where} ({kind or 'no kind'}) has no {', '.join(missing)}")
                continue
            if kind != "Namespace" and meta.get("namespace") != NAMESPACE:
                problems.append(f"{where} ({kind} {meta['name']}) must be in namespace {NAMESPACE!r}, "
                                f"is in {meta.get('namespace')!r}")
            key = (kind, meta["name"])
            if key in ctx.objects:
                problems.append(f"{where}: {kind} {meta['name']} is defined twice")
                continue
            ctx.objects[key] = doc
            count += 1
    kinds = {k for k, _ in ctx.objects}
    for kind in ("Namespace", "ServiceAccount", "ConfigMap", "DaemonSet", "Service", "PodMonitor"):
        if kind not in kinds:
            problems.append(f"no {kind} in packaging/kubernetes/*.yaml")
    if ("Namespace", NAMESPACE) not in ctx.objects:
        problems.append(f"no Namespace {NAMESPACE!r}")
    need(not problems, "\n    ".join(problems))
    return f"{count} documents in {', '.join(files)} parse (no duplicate keys) with apiVersion, kind, metadata"


def check_fields_known(ctx):
    """Every field is one the Kubernetes API (or the PodMonitor CRD) has."""
    need(ctx.objects, "no documents were read")
    problems = []
    for (kind, name), doc in ctx.objects.items():
        schema = SCHEMAS.get((doc["apiVersion"], kind))
        need(schema is not None, f"{kind} {name}: apiVersion {doc['apiVersion']} is not one this test knows "
             f"({', '.join(f'{a} {k}' for a, k in SCHEMAS)})")
        body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
        check_fields(body, schema, f"{kind}/{name}", problems)
    need(not problems, "unknown fields:\n    " + "\n    ".join(problems))
    return "every field is a field of its object (Kubernetes API, PodMonitor CRD)"


def check_security(ctx):
    """The DaemonSet's least privilege."""
    pod = ctx.pod()
    c = ctx.container()
    sc = c.get("securityContext") or {}
    need(sc.get("privileged") is not True, "the headroomd container must not be privileged")
    need(sc.get("allowPrivilegeEscalation") is False,
         "the headroomd container must set allowPrivilegeEscalation: false (the default is true)")
    need(sc.get("readOnlyRootFilesystem") is True, "the headroomd container must set readOnlyRootFilesystem: true")
    caps = sc.get("capabilities") or {}
    need(caps.get("drop") == ["ALL"], f"capabilities.drop must be [ALL], is {caps.get('drop')}")
    added = caps.get("add") or []
    need(sorted(added) == ["BPF", "PERFMON"], f"capabilities.add must be exactly BPF and PERFMON, is {added}")
    need(sc.get("runAsNonRoot") is True, "the headroomd container must set runAsNonRoot: true")
    need(isinstance(sc.get("runAsUser"), int) and sc["runAsUser"] > 0,
         f"runAsUser must be the package user's numeric uid, is {sc.get('runAsUser')!r}")
    need(isinstance(sc.get("runAsGroup"), int) and sc["runAsGroup"] > 0,
         f"runAsGroup must be the package group's numeric gid, is {sc.get('runAsGroup')!r}")
    seccomp = (sc.get("seccompProfile") or (pod.get("securityContext") or {}).get("seccompProfile") or {})
    need(seccomp.get("type") == "RuntimeDefault",
         f"seccompProfile must be RuntimeDefault (pod or container), is {seccomp.get('type')!r}")
    for key in ("hostPID", "hostNetwork", "hostIPC"):
        need(pod.get(key) is not True, f"{key}: true is not needed (packaging/kubernetes/README.md says why)")
    need(pod.get("automountServiceAccountToken") is False,
         "automountServiceAccountToken must be false: headroomd never talks to the API server")
    for other in pod.get("containers", []):
        if other is c:
            continue
        raise Failure(f"unexpected container {other.get('name')!r}: give it the same review as headroomd")
    # The init container: root, CHOWN only, one chown of the orca directory.
    inits = pod.get("initContainers") or []
    for init in inits:
        isc = init.get("securityContext") or {}
        name = init.get("name")
        need(isc.get("privileged") is not True, f"init container {name} must not be privileged")
        need(isc.get("allowPrivilegeEscalation") is False, f"init container {name}: allowPrivilegeEscalation: false")
        need(isc.get("readOnlyRootFilesystem") is True, f"init container {name}: readOnlyRootFilesystem: true")
        icaps = isc.get("capabilities") or {}
        need(icaps.get("drop") == ["ALL"], f"init container {name}: capabilities.drop must be [ALL]")
        need((icaps.get("add") or []) == ["CHOWN"],
             f"init container {name}: capabilities.add must be exactly [CHOWN], is {icaps.get('add')}")
        cmd = init.get("command") or []
        need(len(cmd) == 3 and cmd[0] == "chown",
             f"init container {name} must run exactly `chown UID:GID DIR`, runs {cmd}")
        need(cmd[1] == f"{sc['runAsUser']}:{sc['runAsGroup']}",
             f"init container {name} chowns to {cmd[1]}, headroomd runs as {sc['runAsUser']}:{sc['runAsGroup']}")
    return (f"headroomd: not privileged, no privilege escalation, drop ALL, add {sorted(added)}, read-only root, "
            f"non-root {sc['runAsUser']}:{sc['runAsGroup']}, seccomp RuntimeDefault, no hostPID/hostNetwork/hostIPC, "
            f"no service account token; {len(inits)} init container(s) with CHOWN only")


def check_caps_match_unit(ctx):
    """The container's capabilities, and the image's file capabilities, are
    the systemd unit's CapabilityBoundingSet."""
    unit_caps = ctx.unit_caps()
    ambient = {c.removeprefix("CAP_") for c in unit_list(ctx.unit(), "AmbientCapabilities")}
    need(ambient == unit_caps, f"the unit's AmbientCapabilities {sorted(ambient)} differ from its "
         f"CapabilityBoundingSet {sorted(unit_caps)}")
    added = set(((ctx.container().get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
    need(added == unit_caps, f"the DaemonSet adds {sorted(added)}, the unit's CapabilityBoundingSet is "
         f"{sorted(unit_caps)}")
    args = ctx.containerfile_args()
    setcaps = [substitute(rest, args) for ins, rest, _ in ctx.containerfile() if ins == "RUN" and "setcap" in rest]
    need(len(setcaps) == 1, "the Containerfile must run setcap once on /usr/sbin/headroomd")
    m = re.search(r"setcap\s+\"?([^\"\s]+)\"?\s+/usr/sbin/headroomd", setcaps[0])
    need(m, "cannot find `setcap CAPS /usr/sbin/headroomd` in the Containerfile")
    file_caps, flags = parse_cap_text(m.group(1))
    need(file_caps == unit_caps, f"the image's file capabilities {sorted(file_caps)} differ from the unit's "
         f"{sorted(unit_caps)}")
    need(flags == "ep", f"the file capabilities must be permitted and effective (=ep), are ={flags}: headroomd "
         "does not raise capabilities itself")
    return (f"capabilities {sorted(unit_caps)}: unit CapabilityBoundingSet = AmbientCapabilities = DaemonSet add "
            f"= image file capabilities ({m.group(1)})")


def check_orca_dir(ctx):
    """/run/orca: the unit's RuntimeDirectory, the hostPath, the mount, and
    the ConfigMap's orca_dir agree."""
    unit = ctx.unit()
    runtime = ["/run/" + d for d in unit_list(unit, "RuntimeDirectory")]
    orca_dir = ctx.config().get("agent", {}).get("orca_dir")
    need(orca_dir, "the ConfigMap's headroom.toml sets no agent.orca_dir")
    need(orca_dir in runtime, f"agent.orca_dir {orca_dir!r} is not the unit's RuntimeDirectory {runtime}")
    need(unit_value(unit, "RuntimeDirectoryMode") == "0755",
         "the unit's RuntimeDirectoryMode is no longer 0755: review the init container's chown (mode stays 0755)")
    c = ctx.container()
    mounts = [m for m in ctx.mounts(c) if m.get("mountPath") == orca_dir]
    need(len(mounts) == 1, f"headroomd mounts nothing at {orca_dir}")
    need(mounts[0].get("readOnly") is not True, f"the {orca_dir} mount must be read-write")
    vol = ctx.volume(mounts[0]["name"])
    hp = vol.get("hostPath") or {}
    need(hp.get("path") == orca_dir, f"volume {vol['name']} must be hostPath {orca_dir}, is {hp or vol}")
    need(hp.get("type") == "DirectoryOrCreate", f"hostPath {orca_dir} must be type DirectoryOrCreate, is "
         f"{hp.get('type')!r}")
    for init in ctx.pod().get("initContainers") or []:
        need(any(m.get("name") == vol["name"] and m.get("mountPath") == (init.get("command") or [None] * 3)[2]
                 for m in ctx.mounts(init)),
             f"init container {init.get('name')} must mount volume {vol['name']} where it chowns")
        need((init.get("command") or [None] * 3)[2] == orca_dir,
             f"init container {init.get('name')} must chown {orca_dir}")
    return f"{orca_dir}: unit RuntimeDirectory, hostPath (DirectoryOrCreate, read-write), orca_dir, init chown agree"


def check_host_roots(ctx):
    """proc_root and sys_root are the read-only mounts of the node's /proc
    and /sys."""
    agent = ctx.config().get("agent", {})
    c = ctx.container()
    found = []
    for key, host in (("proc_root", "/proc"), ("sys_root", "/sys")):
        root = agent.get(key)
        need(root, f"the ConfigMap's headroom.toml sets no agent.{key}")
        mounts = [m for m in ctx.mounts(c) if m.get("mountPath") == root]
        need(len(mounts) == 1, f"agent.{key} = {root!r} is not a mountPath of the headroomd container")
        m = mounts[0]
        need(m.get("readOnly") is True, f"the {root} mount must be readOnly: true")
        need(m.get("recursiveReadOnly") in (None, "IfPossible", "Enabled"),
             f"the {root} mount's recursiveReadOnly must be IfPossible or Enabled if set")
        need(m.get("mountPropagation") in (None, "None"), f"the {root} mount needs no mount propagation")
        hp = ctx.volume(m["name"]).get("hostPath") or {}
        need(hp.get("path") == host, f"{root} must be the node's {host} (hostPath), is {hp}")
        found.append(f"{key} {root} = node {host} (read-only)")
    return "; ".join(found)


def check_ports(ctx):
    """Container port, probes, Service and PodMonitor agree with
    [prometheus] listen."""
    host, port = ctx.listen()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise Failure(f"[prometheus] listen host {host!r} is not an IP address")
    need(not ip.is_loopback, f"[prometheus] listen = {host}:{port} is loopback: neither the kubelet's probes nor "
         "Prometheus could connect; listen on 0.0.0.0 (or [::]) in the pod's network namespace")
    c = ctx.container()
    ports = [p for p in c.get("ports", []) if p.get("name") == METRICS_PORT_NAME]
    need(len(ports) == 1, f"the headroomd container needs one port named {METRICS_PORT_NAME!r}")
    need(ports[0].get("containerPort") == port,
         f"containerPort {ports[0].get('containerPort')} is not the listen port {port}")
    need(ports[0].get("protocol", "TCP") == "TCP", "the metrics port is TCP")
    need("hostPort" not in ports[0], "the metrics port needs no hostPort: Prometheus scrapes the pod IP")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        p = c.get(probe)
        need(p, f"the headroomd container has no {probe}")
        http = p.get("httpGet")
        need(http, f"{probe} must be an httpGet")
        need(http.get("path") == "/metrics", f"{probe} must GET /metrics, gets {http.get('path')!r}")
        need(ctx.named_port(c, http.get("port")) == port, f"{probe} port {http.get('port')!r} is not {port}")
    labels = ctx.daemonset()["spec"]["template"]["metadata"].get("labels") or {}
    selector = ctx.daemonset()["spec"]["selector"].get("matchLabels") or {}
    need(selector and all(labels.get(k) == v for k, v in selector.items()),
         "the DaemonSet's selector does not match its pod template's labels")
    svc = ctx.obj("Service")
    need(svc["spec"].get("clusterIP") == "None", "the Service must be headless (clusterIP: None)")
    need(all(labels.get(k) == v for k, v in (svc["spec"].get("selector") or {}).items())
         and svc["spec"].get("selector"), "the Service's selector does not select the headroom pods")
    sports = [p for p in svc["spec"].get("ports", []) if p.get("name") == METRICS_PORT_NAME]
    need(len(sports) == 1, f"the Service needs one port named {METRICS_PORT_NAME!r}")
    need(sports[0].get("port") == port, f"the Service port {sports[0].get('port')} is not {port}")
    need(ctx.named_port(c, sports[0].get("targetPort", sports[0].get("port"))) == port,
         f"the Service's targetPort {sports[0].get('targetPort')!r} is not {port}")
    pm = ctx.obj("PodMonitor")
    pm_sel = (pm["spec"].get("selector") or {}).get("matchLabels") or {}
    need(pm_sel and all(labels.get(k) == v for k, v in pm_sel.items()),
         "the PodMonitor's selector does not select the headroom pods")
    need(NAMESPACE in ((pm["spec"].get("namespaceSelector") or {}).get("matchNames") or [NAMESPACE]),
         f"the PodMonitor's namespaceSelector does not include {NAMESPACE}")
    endpoints = pm["spec"].get("podMetricsEndpoints") or []
    need(endpoints, "the PodMonitor has no podMetricsEndpoints")
    for e in endpoints:
        need(e.get("port") == METRICS_PORT_NAME,
             f"the PodMonitor scrapes port {e.get('port')!r}, the container's port is named {METRICS_PORT_NAME!r}")
        need(e.get("path", "/metrics") == "/metrics", f"the PodMonitor scrapes {e.get('path')!r}, not /metrics")
    return (f"listen {host}:{port} = containerPort {METRICS_PORT_NAME} = startup/liveness/readiness GET /metrics = "
            f"Service {svc['metadata']['name']} (headless) = PodMonitor port {METRICS_PORT_NAME}")


def check_prometheus_labels(ctx):
    """The PodMonitor's job and instance are what packaging/prometheus/'s rules
    and alerts select (skipped when those files are absent)."""
    pm = ctx.obj("PodMonitor")
    endpoints = pm["spec"].get("podMetricsEndpoints") or []
    need(endpoints, "the PodMonitor has no podMetricsEndpoints")
    job = f"{pm['metadata']['namespace']}/{pm['metadata']['name']}"  # the operator's default
    if pm["spec"].get("jobLabel"):
        raise Failure("the PodMonitor sets jobLabel: update this check to the job it produces")
    for e in endpoints:
        relabel = {r.get("targetLabel"): r for r in e.get("relabelings") or []}
        inst = relabel.get("instance")
        need(inst and inst.get("sourceLabels") == ["__meta_kubernetes_pod_node_name"]
             and inst.get("action", "replace") == "replace",
             "the PodMonitor must set instance from __meta_kubernetes_pod_node_name: packaging/prometheus/ reads "
             "instance as the node")
        if "job" in relabel:
            job = relabel["job"].get("replacement", job)
        check_endpoint_label_dropped(e)
    alerts = os.path.join(ctx.source, "packaging", "prometheus")
    files = sorted(os.path.join(alerts, f) for f in os.listdir(alerts)
                   if f.endswith((".yml", ".yaml"))) if os.path.isdir(alerts) else []
    if not files:
        print("NOTE: no packaging/prometheus/*.yml: the PodMonitor's job is not compared with any rule")
        return f"PodMonitor job {job}, instance = node name"
    selectors = set()
    for path in files:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
        for group in doc.get("groups", []) if isinstance(doc, dict) else []:
            for rule in group.get("rules", []):
                for m in re.finditer(r'\bjob\s*(=~|=)\s*"([^"]*)"', str(rule.get("expr", ""))):
                    selectors.add((m.group(1), m.group(2)))
    for op, value in sorted(selectors):
        ok = re.fullmatch(value, job) if op == "=~" else value == job
        need(ok, f"packaging/prometheus/ selects job{op}\"{value}\", the PodMonitor's job is {job!r}")
    shown = ", ".join(f'job{op}"{v}"' for op, v in sorted(selectors)) or "no job selector"
    return (f"PodMonitor job {job!r} matches packaging/prometheus/ ({shown}); instance = node name; "
            "the operator's `endpoint` target label dropped")


def relabel_drops(rule, label):
    """Whether a relabeling is a labeldrop whose regex (anchored, as in
    Prometheus; default "(.*)") matches the label name."""
    if str(rule.get("action", "replace")).lower() != "labeldrop":
        return False
    regex = str(rule.get("regex", "(.*)"))
    try:
        return re.fullmatch(regex, label) is not None
    except re.error as e:
        raise Failure(f"the PodMonitor's labeldrop regex {regex!r} does not compile: {e}") from e


def check_endpoint_label_dropped(e):
    """The operator sets a target label `endpoint` (the port's name) on every
    series of a podMetricsEndpoints entry, before the entry's own relabelings.
    headroomd's series have an `endpoint` label of their own (an [[endpoint]]'s
    name): with both, Prometheus renames headroomd's `exported_endpoint` and
    packaging/prometheus/'s endpoint rules lump all endpoints together. So the
    entry's relabelings must drop the target label, and leave job, instance
    and node alone."""
    port = e.get("port")
    rules = e.get("relabelings") or []
    drops = [k for k, r in enumerate(rules) if relabel_drops(r, "endpoint")]
    for r in e.get("metricRelabelings") or []:
        need(not relabel_drops(r, "endpoint"),
             f"the PodMonitor (port {port!r}) drops `endpoint` in metricRelabelings, which run after the scrape, "
             "when headroomd's `endpoint` label has already been renamed exported_endpoint: drop the operator's "
             "target label in relabelings instead")
    need(drops, f"the PodMonitor (port {port!r}) does not drop the operator's `endpoint` target label: add "
         "`- action: labeldrop` with `regex: endpoint` to its relabelings. The operator sets `endpoint` to the "
         f"port's name ({port!r}) on every series; headroomd's own `endpoint` label (an [[endpoint]]'s name) then "
         "becomes exported_endpoint and every endpoint rule of packaging/prometheus/ lumps the endpoints together")
    for k in drops:
        lost = [label for label in ("job", "instance", "node") if relabel_drops(rules[k], label)]
        need(not lost, f"the PodMonitor's labeldrop of `endpoint` (regex {rules[k].get('regex', '(.*)')!r}) also "
             f"drops {', '.join(lost)}: use `regex: endpoint`")
    again = [r for r in rules[drops[-1] + 1:] if r.get("targetLabel") == "endpoint"]
    need(not again, "the PodMonitor sets the target label `endpoint` again after dropping it: "
         f"{again[0] if again else ''}")


def check_config_accepted(ctx):
    """The ConfigMap's headroom.toml passes headroomd --check-config."""
    cgroup = ctx.config().get("node", {}).get("cgroup", "")
    need(cgroup in ("", "/"), f"node.cgroup = {cgroup!r}: --check-config checks that it exists on this machine, "
         "so keep the ConfigMap's node.cgroup empty (the whole node)")
    need(os.access(ctx.binary, os.X_OK), f"{ctx.binary} is not an executable")
    text = ctx.config_text()
    # The commented [[endpoint]] example, uncommented, as a reader would.
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() == "# [[endpoint]]"]
    need(len(starts) == 1, "the ConfigMap's headroom.toml needs one commented example '# [[endpoint]]'")
    example = lines[:starts[0]]
    for line in lines[starts[0]:]:
        if not line.startswith("# "):
            break
        example.append(line[2:])
    variants = [("as shipped", text), ("with its [[endpoint]] example uncommented", "\n".join(example) + "\n")]
    results = []
    for what, body in variants:
        with tempfile.TemporaryDirectory(prefix="headroom-k8s-") as tmp:
            path = os.path.join(tmp, "headroom.toml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
            cmd = [ctx.binary, "--check-config", "--config", path]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        out = (r.stdout + r.stderr).strip()
        hint = ""
        if "prometheus" in out and "unknown" in out:
            hint = " (this headroomd predates the [prometheus] keys of docs/metrics.md)"
        need(r.returncode == 0, f"the ConfigMap's headroom.toml {what}: `{' '.join(shlex.quote(a) for a in cmd)}` "
             f"exited {r.returncode}{hint}:\n    {out}")
        results.append(what)
    return f"headroomd --check-config exits 0 for the ConfigMap's headroom.toml {' and '.join(results)}"


def check_containerfile(ctx):
    """The Containerfile: FROM first, COPY sources, apt hygiene, user, labels,
    entrypoint."""
    path = ctx.path("Containerfile")
    with open(path, encoding="utf-8") as f:
        need(f.readline() == "# SPDX-License-Identifier: Apache-2.0\n",
             "Containerfile: the first line must be '# SPDX-License-Identifier: Apache-2.0'")
    ins = ctx.containerfile()
    need(ins, "the Containerfile has no instructions")
    need(ins[0][0] == "FROM", f"the Containerfile's first instruction is {ins[0][0]} (line {ins[0][2]}), not FROM")
    froms = [rest for i, rest, _ in ins if i == "FROM"]
    need(froms == ["debian:12-slim"], f"the image must be built FROM debian:12-slim (one stage), is {froms}")
    args = ctx.containerfile_args()
    version = ctx.project_version()
    deb = f"headroom_{version}-{ctx.deb_release()}_amd64.deb"
    need(args.get("HEADROOM_VERSION") == version,
         f"ARG HEADROOM_VERSION={args.get('HEADROOM_VERSION')} is not the project's version {version}")
    need(not any(i == "ADD" for i, _, _ in ins), "use COPY, not ADD (no URLs, no archives unpacked)")
    with open(ctx.path("README.md"), encoding="utf-8") as f:
        readme = f.read()
    copies = []
    for i, rest, line in ins:
        if i != "COPY":
            continue
        words = exec_form(rest, "COPY") if rest.startswith("[") else shlex.split(rest)
        words = [w for w in words if not w.startswith("--")]
        need(len(words) >= 2, f"Containerfile line {line}: COPY needs a source and a destination")
        for src in words[:-1]:
            src = substitute(src, args)
            if fnmatch.fnmatch(deb, src):
                need(src in readme, f"Containerfile line {line}: COPY {src}: the README must document that the "
                     "build context holds this .deb")
                copies.append(src)
            else:
                raise Failure(f"Containerfile line {line}: COPY {src}: the build context (README.md) holds only "
                              f"the .deb ({deb}), so this source cannot exist there")
    need(copies, f"the Containerfile copies no .deb matching {deb}")
    runs = " ; ".join(substitute(rest, args) for i, rest, _ in ins if i == "RUN")
    m = re.search(r"apt-get install ([^;&|]*)", runs)
    need(m, "the Containerfile runs no apt-get install")
    need("--no-install-recommends" in m.group(1) and "-y" in m.group(1).split(),
         "apt-get install must use -y --no-install-recommends")
    need(any(fnmatch.fnmatch("/tmp/" + deb, w) or fnmatch.fnmatch("./" + deb, w) for w in m.group(1).split()),
         f"apt-get install must install the copied .deb ({deb})")
    need("rm -rf /var/lib/apt/lists/*" in runs, "the apt lists must be removed (rm -rf /var/lib/apt/lists/*)")
    # The user.
    sc = ctx.container().get("securityContext") or {}
    uid, gid = sc.get("runAsUser"), sc.get("runAsGroup")
    users = [substitute(rest, args) for i, rest, _ in ins if i == "USER"]
    need(users, "the Containerfile sets no USER")
    need(users[-1] == f"{uid}:{gid}", f"the Containerfile's USER {users[-1]} is not the DaemonSet's "
         f"runAsUser:runAsGroup {uid}:{gid}")
    mu = re.search(r"useradd\b[^;&]*--uid\s+\"?(\d+)\"?", runs)
    mg = re.search(r"groupadd\b[^;&]*--gid\s+\"?(\d+)\"?", runs)
    need(mu and int(mu.group(1)) == uid, f"the image's useradd must create headroom with --uid {uid}")
    need(mg and int(mg.group(1)) == gid, f"the image's groupadd must create headroom with --gid {gid}")
    need(re.search(r"useradd\b.*--uid[^;&]*\bheadroom\b", runs) and
         runs.find("useradd") < runs.find("apt-get install"),
         "the headroom user must be created before the .deb is installed (its postinst then keeps it)")
    # Labels.
    labels = {}
    for i, rest, _ in ins:
        if i == "LABEL":
            for word in shlex.split(rest):
                k, _, v = word.partition("=")
                labels[k] = substitute(v, args)
    for key in ("title", "description", "version", "licenses"):
        need(f"org.opencontainers.image.{key}" in labels, f"LABEL org.opencontainers.image.{key} is missing")
    need(labels["org.opencontainers.image.version"] == version,
         f"org.opencontainers.image.version {labels['org.opencontainers.image.version']} is not {version}")
    need(not any(i in ("HEALTHCHECK", "SHELL") for i, _, _ in ins),
         "no HEALTHCHECK (Kubernetes probes) and no SHELL")
    # What runs: ENTRYPOINT + CMD, or the pod's command/args instead.
    entry = [exec_form(rest, "ENTRYPOINT") for i, rest, _ in ins if i == "ENTRYPOINT"]
    cmd = [exec_form(rest, "CMD") for i, rest, _ in ins if i == "CMD"]
    need(entry, "the Containerfile has no ENTRYPOINT")
    c = ctx.container()
    argv = (c.get("command") or entry[-1]) + (c.get("args") if "args" in c else
                                                ([] if "command" in c else (cmd[-1] if cmd else [])))
    need(os.path.basename(argv[0]) == "headroomd", f"the container runs {argv[0]}, not headroomd")
    need(argv[0] == "/usr/sbin/headroomd", f"the container runs {argv[0]}; the package installs /usr/sbin/headroomd")
    config = None
    for k, a in enumerate(argv):
        if a == "--config" and k + 1 < len(argv):
            config = argv[k + 1]
        elif a.startswith("--config="):
            config = a.split("=", 1)[1]
    need(config, f"the container runs {argv} without --config")
    mounted = []
    for m in ctx.mounts(c):
        vol = ctx.volume(m["name"])
        cm = vol.get("configMap")
        if not cm:
            continue
        need(cm.get("name") == ctx.obj("ConfigMap")["metadata"]["name"], f"volume {vol['name']} names another "
             "ConfigMap")
        items = cm.get("items") or [{"key": k, "path": k} for k in ctx.obj("ConfigMap").get("data", {})]
        mounted += [m["mountPath"].rstrip("/") + "/" + it["path"] for it in items if it["key"] == "headroom.toml"]
    need(config in mounted, f"headroomd reads {config}, the ConfigMap's headroom.toml is mounted at {mounted}")
    image = c.get("image", "")
    need(image.endswith(":" + version), f"the DaemonSet's image {image} is not tagged {version}")
    for init in ctx.pod().get("initContainers") or []:
        need(init.get("image") == image, f"init container {init.get('name')} runs another image: {init.get('image')}")
    return (f"FROM debian:12-slim first; COPY {', '.join(copies)} (the build context's {deb}); apt-get install "
            f"--no-install-recommends, lists removed; user {uid}:{gid} = USER = runAsUser/runAsGroup; "
            f"OCI labels, version {version}; runs {' '.join(argv)} = the ConfigMap's mount")


def check_scheduling(ctx):
    """Every node, critical priority, rolling update, grace period,
    resources."""
    ds = ctx.daemonset()
    pod = ctx.pod()
    need(pod.get("priorityClassName") == "system-node-critical", "priorityClassName must be system-node-critical")
    tol = pod.get("tolerations") or []
    need(any(t.get("operator") == "Exists" and not t.get("key") and not t.get("effect") for t in tol),
         "a toleration {operator: Exists} (no key, no effect) is needed to run on every node")
    strategy = ds["spec"].get("updateStrategy") or {}
    need(strategy.get("type") == "RollingUpdate", "updateStrategy must be RollingUpdate")
    need((strategy.get("rollingUpdate") or {}).get("maxSurge", 0) in (0, "0", "0%"),
         "maxSurge must be 0: two agents on one node would both write its /run/orca")
    grace = pod.get("terminationGracePeriodSeconds")
    stop = unit_value(ctx.unit(), "TimeoutStopSec") or ""
    m = re.fullmatch(r"(\d+)s?", stop)
    need(m, f"cannot read the unit's TimeoutStopSec {stop!r}")
    need(isinstance(grace, int) and 1 <= grace <= int(m.group(1)),
         f"terminationGracePeriodSeconds {grace!r} must be between 1 and the unit's TimeoutStopSec ({stop})")

    def quantity(q):
        q = str(q)
        units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "": 1}
        mm = re.fullmatch(r"([0-9.]+)(m|Ki|Mi|Gi|)", q)
        need(mm, f"cannot read the quantity {q!r}")
        return float(mm.group(1)) * units[mm.group(2)]

    for c in pod.get("containers", []) + (pod.get("initContainers") or []):
        res = c.get("resources") or {}
        for r in ("cpu", "memory"):
            req = (res.get("requests") or {}).get(r)
            lim = (res.get("limits") or {}).get(r)
            need(req is not None and lim is not None, f"container {c.get('name')} needs requests and limits of {r}")
            need(quantity(req) <= quantity(lim), f"container {c.get('name')}: {r} request {req} above limit {lim}")
    res = ctx.container()["resources"]
    return (f"system-node-critical, tolerates every taint, RollingUpdate (maxSurge 0), grace {grace}s "
            f"(unit TimeoutStopSec={stop}), requests {res['requests']} limits {res['limits']}")


def check_readme(ctx):
    """The README explains each privilege and says what was not run."""
    with open(ctx.path("README.md"), encoding="utf-8") as f:
        readme = f.read()
    need(readme.startswith("<!-- SPDX-License-Identifier: Apache-2.0 -->") or
         readme.startswith("# SPDX-License-Identifier: Apache-2.0"), "README.md must start with its SPDX line")
    caps = set()
    for c in ctx.pod().get("containers", []) + (ctx.pod().get("initContainers") or []):
        caps |= set(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
    for word in sorted(caps) + ["hostPID", "hostNetwork", "allowPrivilegeEscalation", "readOnlyRootFilesystem",
                                "runAsUser", "setcap", "SYS_RESOURCE", "Containerfile", "kubernetes_test.py"]:
        need(word in readme, f"README.md does not mention {word}")
    return f"README.md explains {', '.join(sorted(caps))}, hostPID, hostNetwork and the rest"


def check_scripts(ctx):
    """build-image.sh: SPDX, executable, sh -n, shellcheck if installed."""
    path = ctx.path("build-image.sh")
    if not os.path.exists(path):
        return "no build-image.sh"
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    need(lines[0] == "#!/bin/sh" and lines[1] == "# SPDX-License-Identifier: Apache-2.0",
         "build-image.sh must start with #!/bin/sh and the SPDX line")
    need(os.access(path, os.X_OK), "build-image.sh is not executable")
    r = subprocess.run(["sh", "-n", path], capture_output=True, text=True)
    need(r.returncode == 0, f"sh -n build-image.sh: {r.stderr.strip()}")
    if shutil.which("shellcheck"):
        r = subprocess.run(["shellcheck", path], capture_output=True, text=True)
        need(r.returncode == 0, f"shellcheck build-image.sh:\n{r.stdout}{r.stderr}")
        return "build-image.sh: sh -n and shellcheck clean"
    print("NOTE: shellcheck is not installed; build-image.sh checked with sh -n only")
    return "build-image.sh: sh -n clean"


def check_hadolint(ctx):
    """hadolint on the Containerfile, when installed (not in Debian 12)."""
    tool = shutil.which("hadolint")
    if not tool:
        print("NOTE: hadolint is not installed (Debian 12 does not package it): Containerfile lint skipped")
        return None
    r = subprocess.run([tool, "--no-color", ctx.path("Containerfile")], capture_output=True, text=True)
    need(r.returncode == 0, f"hadolint Containerfile:\n{r.stdout}{r.stderr}")
    return "hadolint: Containerfile clean"


CHECKS = [check_documents, check_fields_known, check_security, check_caps_match_unit, check_orca_dir,
          check_host_roots, check_ports, check_prometheus_labels, check_config_accepted, check_containerfile,
          check_scheduling, check_readme, check_scripts, check_hadolint]


def main(argv):
    if len(argv) != 3:
        print("usage: kubernetes_test.py SOURCE_DIR HEADROOMD_BINARY", file=sys.stderr)
        return 64
    ctx = Context(os.path.abspath(argv[1]), argv[2])
    failed = 0
    passed = 0
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        try:
            message = check(ctx)
        except Failure as e:
            failed += 1
            print(f"FAIL: {name}: {e}")
        except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError, IndexError, ValueError,
                subprocess.SubprocessError) as e:
            failed += 1
            print(f"FAIL: {name}: {type(e).__name__}: {e}")
        else:
            if message is not None:
                passed += 1
                print(f"ok: {name}: {message}")
        sys.stdout.flush()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
