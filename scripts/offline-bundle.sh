#!/usr/bin/env bash
# Everything scripts/setup.sh downloads, gathered HERE (on the machine that runs Juice, which
# reaches the registries) for hosts that reach none (`juice hosts prepare --offline`).
#
#   bash scripts/offline-bundle.sh          -> prints the bundle's directory, e.g.
#                                              /var/cache/juice/offline/3f2a9c0d41b7e2aa
#
# The bundle, made once per digest of its inputs (the locks scripts/lock/*.txt, setup.sh's
# Debian package list, the native helpers' sources and Go pin, this script) under
# $JUICE_CACHE/offline/<digest>/:
#   wheels/   every file of every lock (uv, build, juice, openstack, rally, messaging), as pinned
#             with hashes (pip download --require-hashes, for this machine's platform: Linux
#             x86-64 or arm64, CPython 3.11 = Debian 12's); sdists where the lock has no wheel
#   debs/     the .deb files of setup.sh's Debian packages and of ALL their dependencies (resolved
#             as if nothing were installed: a host whose own packages are older than this
#             machine's lists still finds every version it needs), with a Packages index: a flat
#             apt repository (`deb [trusted=yes] file:...`); apt on the host takes from it only
#             what the host lacks
#   bin/      the native helpers, built here with the pinned Go (native/build.sh)
#   SHA256SUMS  every file above; INFO  what it holds (counts, MB, when, from which inputs)
# On the host, `JUICE_OFFLINE=<that dir> bash scripts/setup.sh` installs from it and nothing
# else (apt from the flat repository, uv/pip with --offline --no-index --find-links, helpers
# copied and checked against SHA256SUMS).
#
# This machine must be Debian 12 on the hosts' architecture (apt resolves with its own package
# lists, pip picks wheels for its own platform). Run as root (apt). Exit 0: the path printed;
# 1: a download failed (see above).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${JUICE_CACHE:-/var/cache/juice}
log() { printf '\033[1m[offline-bundle]\033[0m %s\n' "$*" >&2; }
die() { echo "offline-bundle.sh: $*" >&2; exit "${2:-1}"; }

[ "$(id -u)" = 0 ] || die "must run as root (apt-get); rerun with sudo" 2
. /etc/os-release
[ "${ID:-}" = debian ] && [ "${VERSION_ID:-}" = 12 ] \
  || die "this machine is ${PRETTY_NAME:-unknown}, not Debian 12: the bundle is for Debian 12 hosts and is resolved with this machine's apt and Python" 2
pip=$cache/uv/bin/pip
[ -x "$pip" ] || die "$pip not found: run scripts/setup.sh here first" 2
lock=$here/scripts/lock
locks=(uv build juice openstack rally messaging)
mapfile -t apt_pkgs < <(bash "$here/scripts/setup.sh" --apt-packages)
[ ${#apt_pkgs[@]} -gt 0 ] || die "scripts/setup.sh --apt-packages printed nothing"

digest=$(
  {
    for l in "${locks[@]}"; do echo "lock $l"; cat "$lock/$l.txt"; done
    echo "apt ${apt_pkgs[*]}"; echo "arch $(dpkg --print-architecture)"
    cat "$lock/go-toolchain.txt" "$0"
    (cd "$here" && git ls-files -z native/wan-delay native/build.sh | LC_ALL=C sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -c1-16)
out=$cache/offline/$digest
mkdir -p "$cache/offline"
exec 9> "$cache/offline/.lock"
flock 9
if [ -f "$out/INFO" ] && [ -f "$out/SHA256SUMS" ]; then
  touch "$out"  # used: kept (the directory's mtime: no file of it changes, none is sent again)
  echo "$out"; exit 0
fi
# Bundles of other digests not used for 2 days are removed (another clone's may be in use).
for d in "$cache"/offline/*/; do
  [ -d "$d" ] && [ "${d%/}" != "$out" ] && [ -n "$(find "${d%/}" -maxdepth 0 -mtime +2 2>/dev/null)" ] && rm -rf "$d"
done
tmp=$cache/offline/.tmp.$$
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/wheels" "$tmp/debs/partial" "$tmp/bin"
t0=$(date +%s)
# The newest other bundle's files are reused (hard links): pip and apt skip a file already there
# whose hash matches; what the new locks and package list do not name is removed below.
prev=$(ls -td "$cache"/offline/*/ 2>/dev/null | grep -vxF "$out/" | head -1 || true)
if [ -n "$prev" ] && [ -d "$prev/wheels" ] && [ -d "$prev/debs" ]; then
  log "reusing the files of $prev"
  cp -al "$prev/wheels/." "$tmp/wheels/"
  cp -al "$prev/debs/." "$tmp/debs/"
  rm -f "$tmp/debs/Packages"
fi

# 1. Wheels: each lock's files as pinned, for this platform (sdists only where no wheel fits).
export PIP_CERT=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt} PIP_DISABLE_PIP_VERSION_CHECK=1
for l in "${locks[@]}"; do
  log "wheels of scripts/lock/$l.txt"
  timeout 1800 "$pip" download -q --no-input --no-deps --require-hashes -d "$tmp/wheels" -r "$lock/$l.txt" >&2 \
    || die "pip download of scripts/lock/$l.txt failed (see above); check the network to PyPI and rerun"
done
# Only files pinned by a lock stay (by sha256): a reused file no lock names any more goes.
pinned=$(for l in "${locks[@]}"; do grep -o 'sha256:[0-9a-f]\{64\}' "$lock/$l.txt"; done | cut -d: -f2 | LC_ALL=C sort -u)
(cd "$tmp/wheels" && sha256sum -- *) | while read -r h f; do
  grep -qxF "$h" <<< "$pinned" || { log "not pinned by any lock: $f (removed)"; rm -f "$tmp/wheels/$f"; }
done

# 2. Debian packages: setup.sh's list (golang-go aside: the helpers come built) and their whole
# dependency closure, resolved against an empty dpkg status (as if nothing were installed).
# Against a bare image's status instead, the bundle would be ~30 MB smaller but would miss, on
# a host older than that image, the newer libraries its packages depend on.
none=$tmp/empty-status
: > "$none"
aptopts=(-q -y -o "Dir::State::status=$none" -o "Dir::Cache::archives=$tmp/debs" -o Debug::NoLocking=1
         -o APT::Install-Recommends=false)
log "Debian packages: ${apt_pkgs[*]} and all their dependencies"
if ! timeout 1800 apt-get "${aptopts[@]}" install --download-only "${apt_pkgs[@]}" >/dev/null; then
  log "apt-get download failed: updating the package lists and trying again"
  apt-get update -qq >&2
  timeout 1800 apt-get "${aptopts[@]}" install --download-only "${apt_pkgs[@]}" >/dev/null \
    || die "apt-get could not download the Debian packages (see above)"
fi
# Only the .debs apt chose stay (a reused one no longer needed goes).
# (--print-uris against an empty archive directory: it lists every file, not only the missing.)
mkdir -p "$tmp/uris/partial"
wanted=$(apt-get "${aptopts[@]}" -o "Dir::Cache::archives=$tmp/uris" --print-uris install "${apt_pkgs[@]}" | sed -nE "s/^'[^']*' ([^ ]+) .*/\1/p" | LC_ALL=C sort -u)
for f in "$tmp"/debs/*.deb; do
  grep -qxF "${f##*/}" <<< "$wanted" || rm -f "$f"
done
rm -rf "$tmp/debs/partial" "$tmp/debs/lock" "$tmp/uris" "$none"
# A flat repository's index (what dpkg-scanpackages writes), with dpkg-deb only.
(
  cd "$tmp/debs"
  for f in *.deb; do
    dpkg-deb -f "$f" | grep -v '^$'
    printf 'Filename: ./%s\nSize: %s\nSHA256: %s\n\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
  done > Packages
)

# 3. Native helpers, built with the pinned Go.
log "native helpers (native/build.sh)"
"$here/native/build.sh" "$tmp/bin" >&2

(cd "$tmp" && find wheels debs bin -type f | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)
mb() { du -sm "$tmp/$1" | cut -f1; }
{
  echo "made=$(date -u +%Y-%m-%dT%H:%M:%SZ) seconds=$(( $(date +%s) - t0 )) digest=$digest arch=$(dpkg --print-architecture)"
  echo "wheels=$(find "$tmp/wheels" -type f | wc -l) wheels_mb=$(mb wheels)"
  echo "debs=$(find "$tmp/debs" -name '*.deb' | wc -l) debs_mb=$(mb debs)"
  echo "bin=$(find "$tmp/bin" -type f | wc -l) bin_mb=$(mb bin)"
  echo "apt=${apt_pkgs[*]}"
} > "$tmp/INFO"
mv "$tmp" "$out"
trap - EXIT
log "bundle ready: $out ($(du -sh "$out" | cut -f1); $(sed -n 2,4p "$out/INFO" | tr '\n' ' '))"
echo "$out"
