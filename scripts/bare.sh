#!/usr/bin/env bash
# A bare Debian 12 (bookworm) machine on this one, for checking that Juice's set-up needs
# nothing but what its own scripts install.
#
#   bash scripts/bare.sh image          make (or reuse) the cached root filesystem; print its path
#   bash scripts/bare.sh check          copy this clone into a throwaway copy of it, run
#                                       scripts/setup.sh there as root (what .ci/run does)
#   bash scripts/bare.sh run -- CMD...  the same, running CMD instead (e.g. bash scripts/quickstart.sh)
#   bash scripts/bare.sh hostlayer      make (or reuse) the test hosts' layer over the image (python3
#                                       and libfaketime from Debian); print its path
#   bash scripts/bare.sh host DIR LOWER[:LOWER...] [SRC=DST...]
#                                       run one test host in the foreground (tests/testhosts.py
#                                       starts it inside a lab site's network namespace), with
#                                       this machine's SRC bind-mounted at DST: see host()
#
# The image: `debootstrap bookworm` (Debian's required and important packages) plus sshd, git
# and ca-certificates, and only what a user behind a proxy would configure on such a machine:
# this machine's apt sources (and the keyrings they name), its apt Acquire settings, its
# /etc/pip.conf and the CA certificates it trusts (/usr/local/share/ca-certificates). It is
# cached in $JUICE_CACHE/bare/bookworm (~350 MB, ~2 min to make) and remade when older than
# $JUICE_BARE_MAX_AGE_DAYS (default 14) or when this script's recipe changed.
#
# A check runs in a copy-on-write overlay of the image (its upper layer in $JUICE_CACHE/bare/
# runs/<pid>), in private mount and PID namespaces: when it ends, on success, failure or Ctrl-C,
# every process in it is gone with the namespace and the overlay is removed; one left by a
# crash (its pid dead) is removed at the next start. The network is this machine's: the
# registries are reached as the machine reaches them. Only the proxy and registry variables
# of this environment are passed in (http_proxy, https_proxy, no_proxy, GOPROXY,
# PIP_INDEX_URL, UV_INDEX_URL and their upper-case forms).
#
# `check` is skipped, saying so, when it already passed on this machine for the same inputs
# (this script, scripts/setup.sh and everything it runs, the locks, native/, the image's
# date); JUICE_BARE_CHECK=always runs it anyway, JUICE_BARE_CHECK=never skips it (saying so).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${JUICE_CACHE:-/var/cache/juice}
base=$cache/bare
img=$base/bookworm
max_age_days=${JUICE_BARE_MAX_AGE_DAYS:-14}
log() { printf '\033[1m[bare]\033[0m %s\n' "$*" >&2; }
die() { echo "bare.sh: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, namespaces); rerun with sudo"
mkdir -p "$base"
cmd=${1:-}
[ -n "$cmd" ] || die "usage: bash scripts/bare.sh image|check|run -- CMD...|hostlayer|host DIR LOWERS"
shift

# What the image is made of; a change remakes it.
recipe() { sed -n '/^make_image()/,/^}/p' "$0"; }

make_image() {
  local mirror tmp
  command -v debootstrap >/dev/null 2>&1 || {
    log "installing debootstrap (Debian package)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
  }
  # The Debian mirror this machine's own sources name (deb.debian.org unless configured).
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
    | grep -oE 'https?://[^ ]*/debian/?( |$)' | grep -v security | head -1 | tr -d ' ' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  tmp=$base/.image.$$
  rm -rf "$tmp"
  log "making a bare Debian 12 image with debootstrap from $mirror (about 2 minutes)"
  timeout 1200 debootstrap --include=openssh-server,git,ca-certificates bookworm "$tmp" "$mirror" \
    > "$base/debootstrap.log" 2>&1 || { tail -20 "$base/debootstrap.log" >&2; rm -rf "$tmp"; die "debootstrap failed (log above: $base/debootstrap.log)"; }
  # What a user behind a proxy configures: package sources (with their keyrings), apt's
  # Acquire settings, pip's configuration, the CA certificates the machine trusts.
  rm -f "$tmp/etc/apt/sources.list"
  local f k
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    cp "$f" "$tmp$f"
    for k in $(grep -oE '(Signed-By:|signed-by=)[[:space:]]*/[^] ]+' "$f" | sed -E 's/^(Signed-By:|signed-by=)[[:space:]]*//'); do
      [ -f "$k" ] && { mkdir -p "$tmp$(dirname "$k")"; cp "$k" "$tmp$k"; }
    done
  done
  for f in $(grep -l 'Acquire::' /etc/apt/apt.conf.d/* 2>/dev/null); do cp "$f" "$tmp$f"; done
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$tmp/etc/pip.conf"
  if compgen -G '/usr/local/share/ca-certificates/*' >/dev/null; then
    cp -r /usr/local/share/ca-certificates/. "$tmp/usr/local/share/ca-certificates/"
    chroot "$tmp" update-ca-certificates >/dev/null 2>&1
  fi
  recipe | sha256sum | cut -d' ' -f1 > "$tmp/.juice-recipe"
  date -u +%Y-%m-%dT%H:%M:%SZ > "$tmp/.juice-made"
  rm -rf "$img"
  mv "$tmp" "$img"
  log "image ready: $img ($(du -sh "$img" | cut -f1))"
}

ensure_image() {
  mkdir -p "$base"
  exec 9> "$base/.lock"
  flock 9
  local want; want=$(recipe | sha256sum | cut -d' ' -f1)
  if [ -f "$img/.juice-made" ] && [ "$(cat "$img/.juice-recipe" 2>/dev/null)" = "$want" ] \
     && [ -z "$(find "$img/.juice-made" -mtime +"$max_age_days")" ]; then
    return 0
  fi
  [ -d "$img" ] && log "the image in $img is stale (recipe changed or older than $max_age_days days): remaking it"
  make_image
}

# Overlays left by a crashed check (their owner's pid gone) are removed.
sweep_runs() {
  local d pid
  for d in "$base"/runs/*/; do
    [ -d "$d" ] || continue
    pid=$(basename "$d")
    if ! kill -0 "$pid" 2>/dev/null; then rm -rf "$d"; fi
  done
}

# run_in_image CMD...: CMD as root in a throwaway overlay of the image with this clone at /root/juice.
run_in_image() {
  run=$base/runs/$$   # global: the EXIT trap removes it
  sweep_runs
  mkdir -p "$run/upper" "$run/work" "$run/root"
  trap 'rm -rf "$run"' EXIT
  local pass=() v
  for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY GOPROXY PIP_INDEX_URL UV_INDEX_URL; do
    [ -n "${!v:-}" ] && pass+=("$v=${!v}")
  done
  # The clone as a user would have it: its tracked files and the working tree's changes, no
  # caches, no ignored files.
  local clone=$run/clone
  mkdir -p "$clone"
  (cd "$here" && git ls-files -z --cached --others --exclude-standard \
     | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
     | tar --null -T - -cf -) | tar -xf - -C "$clone"
  [ -d "$here/.git" ] && cp -a "$here/.git" "$clone/.git"
  unshare --mount --pid --fork --propagation private -- bash -euc '
    img=$1 run=$2; shift 2
    root=$run/root
    mount -t overlay overlay -o "lowerdir=$img,upperdir=$run/upper,workdir=$run/work" "$root"
    mount -t proc proc "$root/proc"
    mount -t sysfs sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/run"
    mount -t tmpfs tmpfs "$root/tmp"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    mkdir -p "$root/root/juice"
    mount --bind "$run/clone" "$root/root/juice"
    exec chroot "$root" "$@"
  ' bare "$img" "$run" env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 TERM=dumb CI="${CI:-}" "${pass[@]}" "$@"
}

# The test hosts' layer (tests/testhosts.py): the image plus what a host needs before Juice
# prepares it (python3 for the host agent, libfaketime for a clock of its own), installed from
# Debian's packages in a chroot over the image, and scripts/faketime-sleep.c (built here);
# only the overlay's upper directory is kept, in $JUICE_CACHE/bare/layers/host-<key> (key:
# this recipe, that file and the image's date), ~40 MB.
hostlayer_recipe() { sed -n '/^make_hostlayer()/,/^}/p' "$0"; cat "$here/scripts/faketime-sleep.c"; }
hostlayer_path() {
  echo "$base/layers/host-$( { hostlayer_recipe; cat "$img/.juice-made" "$img/.juice-recipe"; } \
    | sha256sum | cut -c1-16)"
}
make_hostlayer() {
  local out=$1 tmp=$base/layers/.tmp.$$
  rm -rf "$tmp"; mkdir -p "$tmp/upper" "$tmp/work" "$tmp/root"
  log "making the test hosts' layer (python3, libfaketime from Debian) over $img"
  unshare --mount --propagation private -- bash -euc '
    img=$1 tmp=$2 root=$2/root
    mount -t overlay overlay -o "lowerdir=$img,upperdir=$tmp/upper,workdir=$tmp/work" "$root"
    mount -t proc proc "$root/proc"; mount --rbind /dev "$root/dev"; mount -t tmpfs tmpfs "$root/tmp"
    mount --bind /etc/resolv.conf "$root/etc/resolv.conf"
    export DEBIAN_FRONTEND=noninteractive
    chroot "$root" sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      python3 libfaketime iproute2 procps >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/*"
  ' hostlayer "$img" "$tmp" > "$base/hostlayer.log" 2>&1 \
    || { tail -20 "$base/hostlayer.log" >&2; rm -rf "$tmp"; die "the host layer failed (log: $base/hostlayer.log)"; }
  # libfaketime 0.9.10's absolute monotonic sleeps, mended (see the file); built here with
  # this Debian 12's gcc for the image's (the same) glibc
  mkdir -p "$tmp/upper/usr/local/lib/juice"
  gcc -O2 -shared -fPIC -o "$tmp/upper/usr/local/lib/juice/faketime-sleep.so" "$here/scripts/faketime-sleep.c" -ldl \
    || { rm -rf "$tmp"; die "building scripts/faketime-sleep.c failed (gcc: scripts/setup.sh installs it)"; }
  date -u +%Y-%m-%dT%H:%M:%SZ > "$tmp/upper/.juice-layer-made"
  rm -rf "$out"; mv "$tmp/upper" "$out"; rm -rf "$tmp"
  log "host layer ready: $out ($(du -sh "$out" | cut -f1))"
}
ensure_hostlayer() {
  local out
  # made already for the current image (and recipe): no lock (a `check` or `run` holds it for
  # its whole run)
  if [ -f "$img/.juice-made" ] && [ "$(cat "$img/.juice-recipe" 2>/dev/null)" = "$(recipe | sha256sum | cut -d' ' -f1)" ] \
     && [ -z "$(find "$img/.juice-made" -mtime +"$max_age_days")" ]; then
    out=$(hostlayer_path)
    [ -f "$out/.juice-layer-made" ] && { echo "$out"; return 0; }
  fi
  ensure_image   # holds the lock (fd 9) from here on
  out=$(hostlayer_path)
  mkdir -p "$base/layers"
  [ -f "$out/.juice-layer-made" ] || make_hostlayer "$out"
  # layers of an older recipe or image: unused by anyone now (the lock is held)
  local d
  for d in "$base"/layers/host-*; do [ "$d" = "$out" ] || [ ! -d "$d" ] || rm -rf "$d"; done
  echo "$out"
}

# host DIR LOWERS [SRC=DST...]: one test host, in the foreground, in the network namespace it was started
# in. DIR holds upper/ (what the caller put there: sshd's config and keys, the clock's
# /etc/ld.so.preload and /etc/faketimerc), work/ and root/; LOWERS is overlayfs's lowerdir
# (colon-separated, top first). In new mount and PID namespaces: the overlay mounted on
# DIR/root, its own /proc (this PID namespace's), /sys, /dev, tmpfs /run and /tmp, then
# pivot_root into it (nothing of this machine's file system stays reachable) and sshd -D as
# the namespace's first process. --kill-child: when unshare (the caller's recorded pid) ends,
# sshd is killed, and with it every process of the host (the kernel ends a PID namespace
# with its first process); the mounts go with the last process of the mount namespace.
host() {
  local dir=$1 lowers=$2
  shift 2
  [ -d "$dir/upper" ] && [ -d "$dir/work" ] && [ -d "$dir/root" ] || die "host: $dir needs upper/, work/ and root/"
  exec unshare --mount --pid --fork --kill-child --propagation private -- bash -euc '
    dir=$1 lowers=$2 root=$1/root
    shift 2
    mount -t overlay juice-host -o "lowerdir=$lowers,upperdir=$dir/upper,workdir=$dir/work" "$root"
    # SRC=DST: this machine'"'"'s directory SRC at DST in the host (the prepared layer'"'"'s build
    # host only: the download caches; never a test host). In this mount namespace only; the
    # mount point stays an empty directory in the upper layer.
    for b in "$@"; do
      mkdir -p "$root${b#*=}"; mount --bind "${b%%=*}" "$root${b#*=}"
    done
    mount -t proc proc "$root/proc"
    mount -t sysfs sysfs "$root/sys"
    # a /dev of its own: the usual devices, its own pts, shm (libfaketime keeps its state
    # there) and mqueue
    mount -t tmpfs -o mode=755,nosuid juice-dev "$root/dev"
    for d in null zero full random urandom tty; do
      touch "$root/dev/$d"; mount --bind "/dev/$d" "$root/dev/$d"
    done
    mkdir -p "$root/dev/pts" "$root/dev/shm"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$root/dev/pts"
    ln -s pts/ptmx "$root/dev/ptmx"
    mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
    ln -s /proc/self/fd "$root/dev/fd"
    ln -s /proc/self/fd/0 "$root/dev/stdin"; ln -s /proc/self/fd/1 "$root/dev/stdout"; ln -s /proc/self/fd/2 "$root/dev/stderr"
    mount -t tmpfs tmpfs "$root/run"
    mount -t tmpfs tmpfs "$root/tmp"
    mkdir -p "$root/run/sshd" "$root/.juice-oldroot"
    cd "$root"
    pivot_root . .juice-oldroot
    umount -l /.juice-oldroot
    rmdir /.juice-oldroot
    exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
      /usr/sbin/sshd -D -e -f /etc/ssh/juice_sshd_config
  ' host "$dir" "$lowers" "$@"
}

# The inputs a check's result depends on.
check_inputs() {
  {
    cat "$img/.juice-made"
    cd "$here" && git ls-files -z --cached --others --exclude-standard scripts native pyproject.toml \
      plugins/*/pyproject.toml | xargs -0 sha256sum
  } | sha256sum | cut -d' ' -f1
}

[ "$cmd" = host ] && { host "$@"; }
sweep_runs
case $cmd in
  hostlayer)
    ensure_hostlayer
    ;;
  image)
    ensure_image
    echo "$img"
    ;;
  check)
    mode=${JUICE_BARE_CHECK:-auto}
    if [ "$mode" = never ]; then log "bare-machine check skipped (JUICE_BARE_CHECK=never)"; exit 0; fi
    ensure_image
    inputs=$(check_inputs)
    stamp=$base/passed.$inputs
    if [ "$mode" != always ] && [ -f "$stamp" ]; then
      log "bare-machine check: scripts/setup.sh passed on the image of $(cat "$img/.juice-made") for these same inputs at $(sed -n 1p "$stamp") (in $(sed -n 2p "$stamp")); not repeated (JUICE_BARE_CHECK=always repeats it)"
      exit 0
    fi
    log "bare-machine check: scripts/setup.sh in a copy of the bare Debian 12 image made $(cat "$img/.juice-made")"
    t0=$(date +%s)
    rc=0
    run_in_image timeout 2400 bash /root/juice/scripts/setup.sh || rc=$?
    took=$(( $(date +%s) - t0 ))
    if [ "$rc" != 0 ]; then
      echo "bare.sh: scripts/setup.sh FAILED on a bare Debian 12 machine (exit $rc after ${took} s); reproduce with: bash scripts/bare.sh run -- bash /root/juice/scripts/setup.sh" >&2
      exit 1
    fi
    printf '%s\n%s s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$took" > "$stamp"
    log "bare-machine check passed: scripts/setup.sh on a bare Debian 12 machine in ${took} s"
    ;;
  run)
    [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || die "usage: bash scripts/bare.sh run -- CMD..."
    ensure_image
    run_in_image "$@"
    ;;
  *) die "unknown command '$cmd': use image, check, run, hostlayer or host" ;;
esac
