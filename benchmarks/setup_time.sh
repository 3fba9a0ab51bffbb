#!/usr/bin/env bash
# Wall time of a FRESH set-up of the venvs (Juice, openstack, rally; B also messaging): scripts/setup.sh of
#   A = BASE (default 04876c2, the last commit before the uv + lock files set-up; a git worktree)
#   B = this tree (uv, scripts/lock/*.txt)
# each run in a new empty JUICE_CACHE with empty pip and uv caches (the uv cache lives in
# JUICE_CACHE). The Debian packages must already be installed: a run that installs some is
# refused. The Go build cache stays warm (native/build.sh's default), the same for A and B.
# Runs alternate A B, B A, A B, ... to spread any drift of the host over both; printed: each
# run's wall time with the load average just before it, then the median per variant.
#
#   bash benchmarks/setup_time.sh [N] [BASE]     # as root; N repetitions per variant (default 1)
#
# Nothing outside the temp dir is changed: each set-up runs in a private mount namespace with
# an overlay on /usr/local/bin (the old setup.sh links /usr/local/bin/juice to its cache), and
# the temp dir and the worktree are removed on exit. Network: PyPI only.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-1}
base=${2:-04876c2}
[ "$(id -u)" = 0 ] || { echo "setup_time.sh: must run as root (setup.sh does); rerun with sudo" >&2; exit 2; }
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "setup_time.sh: N must be a positive integer, got '$n'" >&2; exit 2; }
command -v unshare >/dev/null || { echo "setup_time.sh: unshare not found; apt-get install util-linux" >&2; exit 2; }
git -C "$here" rev-parse -q --verify "$base^{commit}" >/dev/null \
  || { echo "setup_time.sh: $base is not a commit of $here; fetch it or pass another BASE" >&2; exit 2; }

tmp=$(mktemp -d /tmp/juice-setup-time.XXXXXX)
wt=$tmp/base
cleanup() {
  git -C "$here" worktree remove --force "$wt" >/dev/null 2>&1 || true
  git -C "$here" worktree prune >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
git -C "$here" worktree add -q --detach "$wt" "$base"

# measure KEY LABEL TREE RUN: one fresh set-up of TREE; prints the run's line and appends its
# seconds to $tmp/KEY.times.
measure() {
  local key=$1 variant=$2 tree=$3 run=$4 dir=$tmp/run
  rm -rf "$dir"; mkdir -p "$dir/ulb-up" "$dir/ulb-work"
  local load; load=$(cut -d' ' -f1-3 /proc/loadavg)
  local t0 t1 rc=0
  t0=$EPOCHREALTIME
  # shellcheck disable=SC2016  # $1, $2: the inner bash's arguments
  JUICE_CACHE=$dir/cache PIP_CACHE_DIR=$dir/pip-cache timeout 1800 \
    unshare --mount --propagation private bash -c '
      mount -t overlay overlay -o "lowerdir=/usr/local/bin,upperdir=$1/ulb-up,workdir=$1/ulb-work" /usr/local/bin \
        || { echo "setup_time.sh: cannot mount an overlay on /usr/local/bin" >&2; exit 97; }
      exec bash "$2/scripts/setup.sh"' _ "$dir" "$tree" >"$dir.log" 2>&1 || rc=$?
  t1=$EPOCHREALTIME
  if [ "$rc" != 0 ]; then
    tail -n 20 "$dir.log" >&2
    echo "setup_time.sh: the set-up of $variant failed (exit $rc, log above)" >&2
    exit 1
  fi
  if grep -q 'installing Debian packages' "$dir.log"; then
    echo "setup_time.sh: run $run of $variant had to install Debian packages; install them first (e.g. JUICE_CACHE=/tmp/jc-x bash scripts/setup.sh) and rerun" >&2
    exit 1
  fi
  local secs; secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  echo "$secs" >> "$tmp/$key.times"
  printf 'run %d  %s  load average before: %s  wall: %s s\n' "$run" "$variant" "$load" "$secs"
  rm -rf "$dir" "$dir.log"
}
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

a="A ($(git -C "$here" rev-parse --short "$base"))"
b="B (this tree)"
echo "fresh set-up of the venvs, $n run(s) per variant, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')"
for i in $(seq 1 "$n"); do
  if [ $((i % 2)) = 1 ]; then
    measure A "$a" "$wt" "$i"; measure B "$b" "$here" "$i"
  else
    measure B "$b" "$here" "$i"; measure A "$a" "$wt" "$i"
  fi
done
echo "median  $a: $(median "$tmp/A.times") s   $b: $(median "$tmp/B.times") s"
