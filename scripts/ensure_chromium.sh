#!/usr/bin/env bash
# Debian's chromium and chromedriver (package chromium-driver), for the tests that open the HTML report and the
# `vista serve` dashboard in a headless browser. Installed with apt when this user may (root, or passwordless sudo);
# otherwise a note, and those tests skip (unless REQUIRE_CHROMIUM=1, which .ci/run sets: there a missing browser
# fails the run).
set -uo pipefail
command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 && exit 0
if [[ $(id -u) -eq 0 ]]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO="none"; fi
if [[ "$SUDO" != "none" ]] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium and chromium-driver (the browser tests)..." >&2
  if $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 \
     || { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1; }; then
    exit 0
  fi
fi
echo "note: Debian's chromium/chromium-driver are not installed and could not be installed here; the browser tests skip" >&2
[[ "${REQUIRE_CHROMIUM:-0}" == "1" ]] && exit 1
exit 0
