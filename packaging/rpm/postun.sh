# SPDX-License-Identifier: Apache-2.0
# headroom %postun: the library cache; after an upgrade, restart the running
# daemon on the new binary (%systemd_postun_with_restart). The user and
# /etc/headroom are kept on erase, as RPM convention has it.
/sbin/ldconfig || :
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || :
  if [ "$1" -ge 1 ]; then systemctl try-restart headroomd.service >/dev/null 2>&1 || :; fi
fi
