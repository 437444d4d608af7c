#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12, as a new user runs them (issue 44).
# A green CI on a machine that already has the packages hides a missing install step;
# this check does not. Not part of CI (it takes most of an hour on 2 cores): run it
# before resolving an issue that changes scripts/setup.sh or adds a dependency, and put
# its figures in the README's set-up section.
#
#   scripts/check-fresh-debian.sh [--fresh-base] [--remove]
#
# 1. debootstrap --variant=minbase bookworm into DIR/base from this machine's Debian
#    mirror (the first deb.debian.org-style URI in /etc/apt/sources.list*, or
#    EMBEDLAB_FRESH_MIRROR). The pristine base is kept and reused; --fresh-base makes it anew.
# 2. A copy of the base as DIR/root, with the apt sources (bookworm, -updates, -security),
#    resolv.conf and hosts a freshly installed machine has.
# 3. The committed HEAD of this repository cloned to /root/embedlab in it, ../shared
#    (this repository's ../shared) bound read-only at /root/shared beside it; /proc, /sys
#    (recursively: the cgroup filesystems too) and /dev (recursively) bound in.
# 4. As root in a login-like environment (no display): cd /root/embedlab &&
#    scripts/run.sh, then scripts/test.sh, each command's output in DIR/run.log and
#    DIR/test.log.
# 5. A report: exit codes, phase times, the packages installed (count, download, disk),
#    tests passed/failed/skipped (each skip with its reason), processes of the root still
#    running after each command (they are killed afterwards), files written outside the
#    clone (besides the packages' installation), and whether ../shared changed.
# Mounts are undone on every exit (trap), also on failure or Ctrl-C; --remove also
# deletes DIR/root. DIR is EMBEDLAB_FRESH_DIR, default ../fresh-root (beside ../shared).
# Needs root and debootstrap (apt-get install debootstrap). Exit status 0 when both
# commands exit 0 (so no test failed), no process is left, no service is enabled and
# ../shared is unchanged.
# EMBEDLAB_FRESH_RUN and EMBEDLAB_FRESH_TEST replace the two commands (to try the check
# itself quickly, e.g. with "true").
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
REPO=$(pwd)
SHARED=$(cd .. && pwd)/shared
DIR=${EMBEDLAB_FRESH_DIR:-$(cd .. && pwd)/fresh-root}
FRESH_BASE=0
REMOVE=0
for arg in "$@"; do
  case $arg in
    --fresh-base) FRESH_BASE=1 ;;
    --remove) REMOVE=1 ;;
    *) echo "check-fresh-debian: unknown argument '$arg' (they are --fresh-base and --remove)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "check-fresh-debian: needs root (debootstrap, chroot, mounts)" >&2
  exit 2
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "check-fresh-debian: needs debootstrap (apt-get install debootstrap)" >&2
  exit 2
fi
[ -d "$SHARED" ] || echo "check-fresh-debian: no $SHARED; the tests that need it will skip" >&2

# This machine's Debian mirror: the first URI of a bookworm suite that is not -security.
mirror() {
  if [ -n "${EMBEDLAB_FRESH_MIRROR:-}" ]; then
    echo "$EMBEDLAB_FRESH_MIRROR"
    return
  fi
  local uri
  uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^deb / && $3 ~ /^bookworm(-updates)?$/ { print $2; exit }
         /^URIs:/ { u = $2 } /^Suites:/ && / bookworm( |$)|: bookworm/ && u != "" && u !~ /security/ { print u; exit }')
  echo "${uri:-http://deb.debian.org/debian}"
}
MIRROR=$(mirror)
SECURITY=${EMBEDLAB_FRESH_SECURITY_MIRROR:-${MIRROR%/debian}/debian-security}
ROOT=$DIR/root
CLONE=/root/embedlab
mkdir -p "$DIR"
T0=$SECONDS
say() { echo "check-fresh-debian: $*"; }

# Undo the mounts (deepest first) and end what still runs in the root; on every exit.
MOUNTED=()
cleanup() {
  local status=$?
  kill_root_processes >/dev/null 2>&1 || true
  local i
  for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
    umount -R "${MOUNTED[$i]}" 2>/dev/null || umount -R -l "${MOUNTED[$i]}" 2>/dev/null ||
      echo "check-fresh-debian: could not unmount ${MOUNTED[$i]}" >&2
  done
  MOUNTED=()
  if awk -v r="$ROOT/" 'index($2, r) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    echo "check-fresh-debian: still mounted under $ROOT:" >&2
    awk -v r="$ROOT/" 'index($2, r) == 1 { print "  " $2 }' /proc/self/mounts >&2
  elif [ "$REMOVE" = 1 ]; then
    rm -rf "$ROOT"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Processes whose root directory is the fresh root (the chroot's), as "pid name".
root_processes() {
  local p root
  for p in /proc/[0-9]*; do
    root=$(readlink "$p/root" 2>/dev/null) || continue
    [ "$root" = "$ROOT" ] || continue
    echo "${p#/proc/} $(cat "$p/comm" 2>/dev/null)"
  done
}
kill_root_processes() {
  local pid
  for pid in $(root_processes | awk '{ print $1 }'); do kill "$pid" 2>/dev/null || true; done
  sleep 2
  for pid in $(root_processes | awk '{ print $1 }'); do kill -9 "$pid" 2>/dev/null || true; done
}

# 1. The pristine base.
if [ "$FRESH_BASE" = 1 ] || [ ! -f "$DIR/base.complete" ]; then
  say "debootstrap --variant=minbase bookworm from $MIRROR into $DIR/base (a few minutes)"
  rm -rf "$DIR/base" "$DIR/base.tmp" "$DIR/base.complete"
  debootstrap --variant=minbase bookworm "$DIR/base.tmp" "$MIRROR" >"$DIR/debootstrap.log" 2>&1 || {
    tail -n 20 "$DIR/debootstrap.log" >&2
    say "debootstrap failed; its log is $DIR/debootstrap.log"
    exit 1
  }
  mv "$DIR/base.tmp" "$DIR/base"
  date -u +%FT%TZ >"$DIR/base.complete"
else
  say "the base from $(cat "$DIR/base.complete") ($DIR/base; --fresh-base makes it anew)"
fi

# 2. The root: a copy of the base, set up as an installed machine is.
if awk -v r="$ROOT/" 'index($2, r) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
  say "$ROOT still has mounts from an earlier run; unmount them first" >&2
  exit 1
fi
rm -rf "$ROOT"
cp -a "$DIR/base" "$ROOT"
cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY bookworm-security main
EOF
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
[ -e "$ROOT/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$(hostname -s)" >"$ROOT/etc/hosts"

# 3. The clone and ../shared, and the kernel's file systems.
git clone -q "$REPO" "$ROOT$CLONE"
COMMIT=$(git -C "$ROOT$CLONE" rev-parse --short HEAD)
say "commit $COMMIT ($(git -C "$ROOT$CLONE" log -1 --format=%s | cut -c1-80))"
bind() { # bind SOURCE TARGET [ro|rec]
  mkdir -p "$2"
  if [ "${3:-}" = rec ]; then
    mount --rbind "$1" "$2"
    mount --make-rslave "$2"
  else
    mount --bind "$1" "$2"
  fi
  MOUNTED+=("$2")
  [ "${3:-}" != ro ] || mount -o remount,bind,ro "$2"
}
bind /proc "$ROOT/proc"
bind /sys "$ROOT/sys" rec
bind /dev "$ROOT/dev" rec
if [ -d "$SHARED" ]; then
  bind "$SHARED" "$ROOT/root/shared" ro
  SHARED_SUM_BEFORE=$(cd "$SHARED" && find . -printf '%p %s %T@ %m\n' | sort | md5sum)
fi

# apt's summary lines, from each setup's log (one per command that installed something).
apt_summary() {
  local log=$1
  [ -f "$log" ] || return 0
  awk '/newly installed/ { n = $3 } /^Need to get/ { dl = $4 " " $5 } /^After this operation/ { du = $4 " " $5 }
       END { if (n != "") printf "%s packages, %s download, %s on disk", n, dl, du }' "$log"
}

# 4. The two commands, as the README writes them.
in_root() {
  chroot "$ROOT" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd $CLONE && $1"
}
declare -A EXIT SECS LEFT WRITTEN
command_run() { # command_run NAME COMMAND
  local name=$1 start status=0
  touch "$DIR/stamp-$name"
  sleep 1
  say "$2 (output in $DIR/$name.log)"
  start=$SECONDS
  in_root "$2" >"$DIR/$name.log" 2>&1 </dev/null || status=$?
  EXIT[$name]=$status
  SECS[$name]=$((SECONDS - start))
  say "$2: exit $status after ${SECS[$name]} s"
  LEFT[$name]=$(root_processes | sort -k2 | awk '{ printf "%s%s(%s)", (NR > 1 ? ", " : ""), $2, $1 }')
  kill_root_processes >/dev/null 2>&1 || true
  WRITTEN[$name]=$(written_outside "$DIR/stamp-$name")
  # setup.sh's apt-get output (the clone's build/logs/setup.log), when this command installed.
  local log=$ROOT$CLONE/build/logs/setup.log
  : >"$DIR/apt-$name"
  if [ -f "$log" ] && [ "$log" -nt "$DIR/stamp-$name" ]; then
    cp "$log" "$DIR/setup-$name.log"
    apt_summary "$log" >"$DIR/apt-$name"
  fi
}

# Files (and links) changed since STAMP outside the clone, the packages' own files and
# apt's and dpkg's bookkeeping left out; /proc, /sys, /dev and ../shared are other mounts.
written_outside() {
  local stamp=$1
  cat "$ROOT"/var/lib/dpkg/info/*.list 2>/dev/null | sort -u >"$DIR/package-files"
  (cd "$ROOT" && find . -xdev \( -path "./${CLONE#/}" -o -path ./root/shared -o -path ./proc -o -path ./sys -o -path ./dev \) -prune \
    -o \( -type f -o -type l \) -newer "$stamp" -print) | sed 's|^\.||' | sort |
    comm -23 - "$DIR/package-files" |
    grep -vE '^/var/(lib/(dpkg|apt|ucf|systemd/deb-systemd-helper-enabled|python)|cache/(apt|debconf|man|ldconfig)|log/(apt|dpkg\.log|alternatives\.log))|^/etc/(ld\.so\.cache|alternatives/|ssl/certs/|ssh/ssh_host_|systemd/system/|python3)|^/usr/(lib/python3|share/(mime|icons|fonts|applications|glib-2\.0))|^/usr/lib/(x86_64-linux-gnu/(gdk-pixbuf|gio|qt6/plugins))|/__pycache__/|\.pyc$' || true
}

command_run run "${EMBEDLAB_FRESH_RUN:-scripts/run.sh}"
command_run test "${EMBEDLAB_FRESH_TEST:-scripts/test.sh}"

# 5. The report.
# Boot-time enable links (systemd's *.wants, SysV's S links) the commands added.
enabled_links() {
  (cd "$1" && ls -1 etc/systemd/system/*.wants/ etc/rc[2-5].d/ 2>/dev/null | grep -vE '^$|:$' | grep -vE '^K' | sort -u)
}
ENABLED=$(comm -13 <(enabled_links "$DIR/base") <(enabled_links "$ROOT") | tr '\n' ' ' | sed 's/ $//')
SHARED_CHANGED=no
if [ -d "$SHARED" ]; then
  [ "$(cd "$SHARED" && find . -printf '%p %s %T@ %m\n' | sort | md5sum)" = "$SHARED_SUM_BEFORE" ] || SHARED_CHANGED=YES
fi
{
  echo "check-fresh-debian: ==== report: commit $COMMIT on a fresh Debian 12 (debootstrap minbase bookworm, $MIRROR), $(nproc) cores ===="
  for name in run test; do
    echo "  scripts/$name.sh: exit ${EXIT[$name]}, ${SECS[$name]} s"
    grep -aE '^(setup|run|test): .*(installed in|took|done in) [0-9]+ s' "$DIR/$name.log" | cut -c1-160 | sed 's/^/    /' || true
    echo "    packages installed: $(cat "$DIR/apt-$name" 2>/dev/null || true)"
  done
  echo "  tests:"
  grep -aE 'tests passed, [0-9]+ tests? failed out of [0-9]+|^Total Test time' "$DIR/test.log" | sed 's/^/    /' || true
  skipped=$(grep -acE '^  skipped ' "$DIR/test.log" || true)
  failed=$(awk '/tests passed, [0-9]+ tests? failed out of/ { f += $4 } END { print f + 0 }' "$DIR/test.log")
  total=$(awk '/tests passed, [0-9]+ tests? failed out of/ { t += $NF } END { print t + 0 }' "$DIR/test.log")
  echo "    total $total: passed $((total - failed - skipped)), failed $failed, skipped $skipped"
  awk '/The following tests FAILED:/ { on = 1; next } on && /^[ \t]+[0-9]+ - / { print "    FAILED " $0; next } { on = 0 }' "$DIR/test.log"
  grep -aE '^  skipped ' "$DIR/test.log" | cut -c1-220 | sed 's/^  /    /' || true
  for name in run test; do
    echo "  processes left in the root after $name.sh: ${LEFT[$name]:-none}"
  done
  for name in run test; do
    if [ -n "${WRITTEN[$name]}" ]; then
      echo "  files written outside the clone by $name.sh (besides installing packages): $(echo "${WRITTEN[$name]}" | wc -l)"
      echo "${WRITTEN[$name]}" | head -n 30 | sed 's/^/    /'
    else
      echo "  files written outside the clone by $name.sh (besides installing packages): none"
    fi
  done
  echo "  services enabled at boot that the base did not have: ${ENABLED:-none}"
  echo "  ../shared changed: $SHARED_CHANGED (bound read-only)"
  echo "  check took $((SECONDS - T0)) s; logs: $DIR/run.log, $DIR/test.log"
} | tee "$DIR/report.txt"

ok=1
[ "${EXIT[run]}" = 0 ] && [ "${EXIT[test]}" = 0 ] || ok=0
[ -z "${LEFT[run]}${LEFT[test]}" ] || ok=0
[ "$SHARED_CHANGED" = no ] || ok=0
[ -z "$ENABLED" ] || ok=0
[ "$ok" = 1 ] && say "PASSED" || say "FAILED"
[ "$ok" = 1 ]
