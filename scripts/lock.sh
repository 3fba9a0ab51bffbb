#!/usr/bin/env bash
# Regenerates the lock files that scripts/setup.sh installs, one per venv, from the top-level
# pins (pyproject.toml, scripts/requirements-*.txt):
#
#   scripts/lock/juice.txt      Juice's venv: pyproject.toml's dependencies + the `dev` extra
#                               (Juice itself is not in it: setup.sh installs it editable, --no-deps)
#   scripts/lock/openstack.txt  scripts/requirements-openstack.txt (Keystone, nova, gunicorn, ...)
#   scripts/lock/rally.txt      scripts/requirements-rally.txt (Rally, rally-openstack)
#   scripts/lock/messaging.txt  scripts/requirements-messaging.txt (oslo.messaging, ombt)
#   scripts/lock/build.txt      build back-ends for the packages built from sdist (Juice, mysqlclient,
#                               ovs): setup.sh passes it to uv as build constraints
#   scripts/lock/uv.txt         uv itself (UV_VERSION below), which setup.sh installs with pip
#
#   bash scripts/lock.sh                      # after editing a top-level pin: the other pins stay put
#   bash scripts/lock.sh --upgrade            # move every transitive pin to the newest allowed
#   bash scripts/lock.sh --upgrade-package X  # move only X
#
# Every lock lists every distribution with its exact version and sha256 hashes, resolved for
# CPython 3.11.2 (Debian 12's python3.11) on x86_64 glibc 2.36 (Debian 12), whatever the host.
# Hashes work for the packages built from sdist too (mysqlclient, ovs): the hash pins the sdist,
# and uv builds it after checking it. The build back-end itself (setuptools, wheel) is pinned
# with hashes in build.txt. The hashes cover every file of a release (all platforms), hence the
# size of the files. A lock resolved for 3.11.2 can hold a package a later 3.11.x does not need
# (async-timeout, for python_full_version < 3.11.3): it is installed all the same, unused.
# Each lock also records a digest of the top-level pins it comes from (scripts/lock-inputs.py),
# so that setup.sh stops with "run 'bash scripts/lock.sh'" when a pin was edited but the locks
# were not regenerated. No root needed; network: PyPI only.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
UV_VERSION=0.13.9          # the uv that resolves here and that setup.sh installs (via uv.txt)
PY_TARGET=3.11.2           # Debian 12's python3.11
PLATFORM=x86_64-manylinux_2_36
log() { printf '\033[1m[lock]\033[0m %s\n' "$*" >&2; }

py=${JUICE_PYTHON:-}
if [ -z "$py" ]; then
  for c in python3.11 /usr/bin/python3.11 python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then py=$c; break; fi
  done
fi
[ -n "$py" ] || { echo "lock.sh: Python 3.11 not found; install python3.11 (or set JUICE_PYTHON)" >&2; exit 2; }

tmp=$(mktemp -d /tmp/juice-lock.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# uv: setup.sh's copy when it is this version, else a throw-away one.
uv=${JUICE_CACHE:-/var/cache/juice}/uv/bin/uv
if ! [ -x "$uv" ] || [ "$("$uv" --version 2>/dev/null | cut -d' ' -f2)" != "$UV_VERSION" ]; then
  log "installing uv $UV_VERSION into $tmp"
  "$py" -m venv "$tmp/uv"
  timeout 300 "$tmp/uv/bin/pip" install -q --disable-pip-version-check --only-binary :all: "uv==$UV_VERSION" \
    || { echo "lock.sh: could not install uv $UV_VERSION from PyPI (see above); check the network to PyPI" >&2; exit 1; }
  uv=$tmp/uv/bin/uv
fi
export UV_CACHE_DIR=${UV_CACHE_DIR:-$tmp/uv-cache} UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1
export UV_CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh"

cd "$here"   # relative paths: the files' headers do not depend on where the clone is
mkdir -p scripts/lock
compile() {  # compile OUT INPUT... [uv options]
  local out=$1; shift
  log "$out"
  timeout 600 "$uv" pip compile -q --python "$py" --python-version "$PY_TARGET" --python-platform "$PLATFORM" \
    --generate-hashes --output-file "$out" "$@" \
    || { echo "lock.sh: resolving $out failed (see above); fix the top-level pins and rerun" >&2; exit 1; }
}
compile scripts/lock/juice.txt pyproject.toml --extra dev "$@"
compile scripts/lock/openstack.txt scripts/requirements-openstack.txt "$@"
compile scripts/lock/rally.txt scripts/requirements-rally.txt "$@"
compile scripts/lock/messaging.txt scripts/requirements-messaging.txt "$@"
# Build back-ends: Juice's [build-system] requires (setuptools>=77, wheel); mysqlclient and ovs
# ask for setuptools (>=61) only, which this satisfies.
build_reqs=$("$py" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
printf '%s\n' "$build_reqs" > "$tmp/build.in"
compile scripts/lock/build.txt "$tmp/build.in" "$@"
printf 'uv==%s\n' "$UV_VERSION" > "$tmp/uv.in"
compile scripts/lock/uv.txt "$tmp/uv.in" "$@"
# The temp inputs' paths must not leak into the files (they would change at every run).
sed -i "s|$tmp/build.in|pyproject.toml [build-system]|; s|$tmp/uv.in|UV_VERSION in scripts/lock.sh|" \
  scripts/lock/build.txt scripts/lock/uv.txt
# Each lock records a digest of the pins it was resolved from: setup.sh refuses a stale lock.
"$py" scripts/lock-inputs.py --write
for f in juice openstack rally messaging build uv; do
  log "scripts/lock/$f.txt: $(grep -c '^[A-Za-z0-9]' "scripts/lock/$f.txt") packages"
done
