#!/usr/bin/env bash
# Debian packages the tests need: chromium + chromium-driver for the browser test
# (playwright drives /usr/bin/chromium; its own browser download is never used).
# Installs only what is missing; needs root (or sudo) and apt-get.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
log=$(mktemp)
if ! { $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium chromium-driver; } \
    </dev/null >"$log" 2>&1; then
  cat "$log" >&2
  echo "could not install chromium (needed by tests/test_browser.py)" >&2
  exit 1
fi
rm -f "$log"
