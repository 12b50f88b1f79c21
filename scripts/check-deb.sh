#!/usr/bin/env bash
# scripts/check-deb.sh DEB...
#
# Checks the permissions a built Debian package (scripts/deb.sh → target/debian/…/*.deb)
# would install, from the modes recorded in its archives (not an extraction, so neither the
# umask nor the user running this changes what is seen):
#   - data (`dpkg-deb -c`): no world-writable file or directory (mode o+w; symlinks, always
#     0777, are skipped; a sticky world-writable directory like /tmp is tolerated but named:
#     lookout ships none), no setuid or setgid entry, every entry owned by root:root;
#   - control (`dpkg-deb --ctrl-tarfile`): no world-writable member, in particular no
#     world-writable maintainer script (preinst, postinst, prerm, postrm, config).
# Prints what it checked. Exit: 0 clean; 1 an offending path (each one named, as
# "check-deb: FAIL …"); 2 usage, or a file dpkg-deb cannot read.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,12p' "$0"; exit 2; }
command -v dpkg-deb >/dev/null || { echo "check-deb: dpkg-deb not found (apt-get install dpkg)" >&2; exit 2; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
bad=0
fail() { echo "check-deb: FAIL $DEB: $*" >&2; bad=$((bad + 1)); }
verdict() { [ "$bad" = "$1" ] && echo "$2" || echo "$(( bad - $1 )) problem(s) so far, see FAIL lines"; }

# `tar -tv` lines: MODE OWNER/GROUP SIZE DATE TIME PATH[ -> TARGET | link to TARGET].
# Prints MODE<TAB>OWNER<TAB>PATH (device entries have "MAJ,MIN" as size: still one field).
entries() {
  sed -E 's/^([^ ]+) +([^ ]+) +[^ ]+ +[^ ]+ +[^ ]+ +(.*)$/\1\t\2\t\3/' "$1" |
    awk -F'\t' -v OFS='\t' '{ p = $3; if ($1 ~ /^l/) sub(/ -> .*$/, "", p); else if ($1 ~ /^h/) sub(/ link to .*$/, "", p); print $1, $2, p }'
}

for DEB in "$@"; do
  [ -f "$DEB" ] || { echo "check-deb: no such file: $DEB" >&2; exit 2; }
  dpkg-deb -c "$DEB" > "$TMP/data" 2>"$TMP/err" || { echo "check-deb: dpkg-deb cannot read $DEB:" >&2; cat "$TMP/err" >&2; exit 2; }
  dpkg-deb --ctrl-tarfile "$DEB" 2>"$TMP/err" | tar -tvf - > "$TMP/control" ||
    { echo "check-deb: cannot list the control archive of $DEB:" >&2; cat "$TMP/err" >&2; exit 2; }
  echo "check-deb: $DEB ($(dpkg-deb -f "$DEB" Package Version Architecture | awk '{print $2}' | paste -sd' '))"

  n=0 nf=0 nd=0 nl=0 b0=$bad
  while IFS=$'\t' read -r mode owner path; do
    n=$((n + 1))
    case $mode in
      l*) nl=$((nl + 1)); continue ;;   # a symlink's own mode is meaningless
      d*) nd=$((nd + 1)) ;;
      *) nf=$((nf + 1)) ;;
    esac
    case $owner in root/root|0/0) ;; *) fail "$path is owned by $owner, not root/root ($mode)" ;; esac
    case ${mode:3:1} in s|S) fail "$path is setuid ($mode)" ;; esac
    case ${mode:6:1} in s|S) fail "$path is setgid ($mode)" ;; esac
    # mode string: type, then rwx for user (1-3), group (4-6), other (7-9); s/S at 3 or 6 is
    # setuid/setgid, t/T at 9 the sticky bit.
    if [ "${mode:8:1}" = w ]; then
      if [ "${mode:0:1}" = d ] && [ "${mode:9:1}" = t ]; then
        echo "check-deb: note: $path is a sticky world-writable directory ($mode), tolerated like /tmp"
      else
        fail "$path is world-writable ($mode)"
      fi
    fi
  done < <(entries "$TMP/data")
  echo "  data: $n entries ($nf files, $nd directories, $nl symlinks) checked for o+w, setuid, setgid, owner root:root: $(verdict "$b0" ok)"

  scripts=() b0=$bad
  while IFS=$'\t' read -r mode owner path; do
    name=${path#./}
    [ -n "$name" ] || continue
    case $name in preinst|postinst|prerm|postrm|config) scripts+=("$name $mode") ;; esac
    if [ "${mode:8:1}" = w ]; then
      case $name in
        preinst|postinst|prerm|postrm|config) fail "maintainer script $name is world-writable ($mode)" ;;
        *) fail "control member $name is world-writable ($mode)" ;;
      esac
    fi
  done < <(entries "$TMP/control")
  echo "  control: $(grep -c . "$TMP/control") members checked for o+w; maintainer scripts: ${scripts[*]:-(none)}: $(verdict "$b0" ok)"
done

if [ $bad = 0 ]; then
  echo "check-deb: OK ($# package(s))"
else
  echo "check-deb: FAILED: see the FAIL lines above (the summary lines describe what was checked)" >&2
  exit 1
fi
