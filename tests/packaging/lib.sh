# SPDX-License-Identifier: Apache-2.0
# Shared by the packaging tests. A missing tool fails the test in CI (CI=true)
# and skips it loudly elsewhere (exit 77, CTest's SKIP_RETURN_CODE).
need() {
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 && continue
    if [ "${CI:-}" = true ]; then
      echo "FAIL: $tool is missing (CI=true); packaging/install-build-deps.sh installs it" >&2
      exit 1
    fi
    echo "SKIP: $tool is missing; packaging/install-build-deps.sh installs it" >&2
    exit 77
  done
}
need_root() {
  [ "$(id -u)" -eq 0 ] && return 0
  if [ "${CI:-}" = true ]; then echo "FAIL: needs root (CI runs as root)" >&2; exit 1; fi
  echo "SKIP: needs root" >&2
  exit 77
}
fail() { echo "FAIL: $*" >&2; exit 1; }
# The Debian mirror this machine's apt uses (debootstrap fetches from it).
debian_mirror() {
  m=$(grep -hs -E '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources |
    grep -v security | grep -o 'https\?://[^ ]*/debian/\?' | head -n 1)
  echo "${m:-http://deb.debian.org/debian}"
}
