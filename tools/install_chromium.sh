#!/usr/bin/env bash
# Makes Debian's chromium available for the browser test (tests/test_browser.py).
# Playwright's own browser download (`playwright install`) needs a host that is often
# unreachable, so the test drives the distribution's chromium instead. Installs it with apt
# when run as root; otherwise says how, and the browser test skips itself.
set -uo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing chromium for the browser test (apt-get)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; the browser test will be skipped"
else
  echo "note: chromium is not installed and this is not root; the browser test will be skipped"
  echo "      (install it with: sudo apt-get install -y chromium)"
fi
exit 0
