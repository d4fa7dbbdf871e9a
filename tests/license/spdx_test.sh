#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every source file says its license in its first lines: Apache-2.0, except
# the eBPF programs (probes/ebpf/, and any *.bpf.c), which the kernel wants GPL-compatible and
# which are GPL-2.0-only OR BSD-2-Clause. The generated vmlinux.h, fixtures
# and golden files carry none.
#   spdx_test.sh SOURCE_DIR
set -eu
src=$1
cd "$src"
if [ -d .git ] && command -v git >/dev/null 2>&1; then
  list() { git ls-files; }
else
  list() { find . -type f ! -path './.git/*' ! -path './build*' | sed 's|^\./||'; }
fi
bad=0 checked=0
for f in $(list); do
  case "$f" in
    probes/ebpf/vmlinux.h | tests/fixtures/* | tests/golden/*) continue ;;
    probes/ebpf/*.c | probes/ebpf/*.h | *.bpf.c) want='GPL-2.0-only OR BSD-2-Clause' ;;
    *.cc | *.h | *.c | *.proto | *.sh | *.py | *.js | *.cmake | */CMakeLists.txt | CMakeLists.txt | .ci/run) want='Apache-2.0' ;;
    *) continue ;;
  esac
  checked=$((checked + 1))
  if ! head -n 3 "$f" | grep -q "SPDX-License-Identifier: $want\$"; then
    echo "FAIL: $f: no 'SPDX-License-Identifier: $want' in its first 3 lines" >&2
    bad=$((bad + 1))
  fi
done
[ "$checked" -gt 50 ] || { echo "FAIL: only $checked source files found under $src" >&2; exit 1; }
[ "$bad" -eq 0 ] || { echo "FAIL: $bad of $checked source files lack their SPDX line" >&2; exit 1; }
echo "$checked source files carry their SPDX line"
