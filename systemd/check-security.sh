#!/usr/bin/env bash
# systemd/check-security.sh [UNIT_FILE] [MAX]
#
# Prints `systemd-analyze security` for the shipped unit and fails if its overall exposure
# is above MAX (default 2.0). Works without a running systemd (containers, CI): the unit is
# analysed offline (`--offline=yes`, systemd >= 250), so neither the unit nor the binary need
# to be installed.
#
# Exit: 0 at or below MAX, 1 above it, 2 the tool is missing or its output was not understood.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
UNIT=${1:-$HERE/lookout.service}
MAX=${2:-2.0}

command -v systemd-analyze >/dev/null || {
  echo "check-security: systemd-analyze not found (apt-get install systemd)" >&2; exit 2; }
[ -f "$UNIT" ] || { echo "check-security: no unit file at $UNIT" >&2; exit 2; }

# Offline mode analyses the file as named; a relative path needs ./ to be taken as a file.
case "$UNIT" in /*) ;; *) UNIT=./$UNIT ;; esac
out=$(systemd-analyze security --offline=yes --no-pager "$UNIT" 2>&1) || true
echo "$out" | grep -E '✗|→' || true
level=$(echo "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' | tail -1)
if [ -z "$level" ]; then
  echo "check-security: could not read the exposure level from systemd-analyze:" >&2
  echo "$out" | tail -20 >&2
  exit 2
fi
if awk -v l="$level" -v m="$MAX" 'BEGIN { exit !(l + 0 <= m + 0) }'; then
  echo "check-security: $(basename "$UNIT") exposure $level <= $MAX: OK"
else
  echo "check-security: $(basename "$UNIT") exposure $level > $MAX: FAIL (see the ✗ lines above)" >&2
  exit 1
fi
