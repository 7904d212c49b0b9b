#!/usr/bin/env bash
# The Debian package the tests need: chromium, for the browser test (playwright launches
# /usr/bin/chromium itself; no WebDriver, and playwright's own browser download is never used).
# Installs it only where it is missing; needs root (or sudo) and apt-get.
# L2D_CHROMIUM names another browser binary to look for (the tests of this script use it).
set -euo pipefail
CHROMIUM="${L2D_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
log=$(mktemp)
if ! { $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium; } \
    </dev/null >"$log" 2>&1; then
  cat "$log" >&2
  echo "could not install chromium (needed by tests/test_browser.py)" >&2
  exit 1
fi
rm -f "$log"
if [ ! -x "$CHROMIUM" ]; then
  echo "apt-get installed chromium but $CHROMIUM is still missing (tests/test_browser.py launches it)" >&2
  exit 1
fi
