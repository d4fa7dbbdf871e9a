#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The soak (docs/reliability.md): headroomd for an hour with an eBPF endpoint
# under load, a reload every minute and a fault every five minutes, while a
# reader decodes every report; RSS, descriptors and CPU per tick must stay
# flat and every report valid. bench/soak.py measures; it builds nothing.
#
#   sudo bench/soak.sh BUILD_DIR [--duration SECONDS] [--reload S] [--fault S] [--json FILE]
#
# Root (tmpfs mounts, eBPF). Not part of CI: an hour by default.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: sudo bench/soak.sh BUILD_DIR [--duration SECONDS] [--reload S] [--fault S] [--json FILE]" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "soak.sh: needs root (tmpfs mounts, the eBPF endpoint probe)" >&2
  exit 1
fi
exec /usr/bin/python3 "$(dirname "$0")/soak.py" "$@"
