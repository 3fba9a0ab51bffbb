#!/usr/bin/env bash
# Installs everything Juice needs on a fresh Debian 12 machine (run as root). Idempotent.
#   - Debian packages (network tools, databases, probes)
#   - uv (pinned) and four venvs in $JUICE_CACHE (outside the clone, reused between runs):
#     venv (Juice), openstack, rally, messaging, each exactly its lock file in scripts/lock/
#   - native helpers built into $JUICE_CACHE/bin
# Offline (a host that reaches no registry): JUICE_OFFLINE=DIR, a bundle made by
# scripts/offline-bundle.sh on a machine that does (`juice hosts prepare --offline` copies it),
# is the only source: Debian packages from its flat repository, wheels with --no-index from it,
# the helpers as built there (checked against its SHA256SUMS). `--apt-packages` prints the list.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${JUICE_CACHE:-/var/cache/juice}
# Each line with the seconds since the start (`juice hosts prepare` reports the steps from them).
log() { printf '\033[1m[setup +%ds]\033[0m %s\n' "$SECONDS" "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  echo "setup.sh: must run as root (it installs Debian packages and creates network namespaces); rerun with sudo" >&2
  exit 2
fi

APT_PKGS=(iproute2 iptables nftables iputils-ping iperf3 procps psmisc rsync socat
          mariadb-server mariadb-client galera-4 mariadb-backup
          postgresql postgresql-client python3-venv
          memcached redis-server nats-server rabbitmq-server haproxy
          libmariadb-dev pkg-config gcc python3-dev  # build deps of mysqlclient (the C MySQLdb)
          openssh-server  # sshd: the tests' stand-in for a cloud's host (profiles over SSH)
          ovn-central ovn-common openvswitch-common)  # OVN's NB/SB ovsdb-servers and northd (real Neutron, ML2/OVN)
[ "${1:-}" = --apt-packages ] && { printf '%s\n' "${APT_PKGS[@]}"; exit 0; }
offline=${JUICE_OFFLINE:-}
if [ -n "$offline" ]; then
  # Shell and coreutils only: a bare host has no Python yet.
  [ -f "$offline/SHA256SUMS" ] || { echo "setup.sh: JUICE_OFFLINE=$offline: no SHA256SUMS there (not a bundle of scripts/offline-bundle.sh)" >&2; exit 2; }
  log "offline: checking the bundle $offline ($(wc -l < "$offline/SHA256SUMS") files)"
  (cd "$offline" && sha256sum -c --quiet --strict SHA256SUMS) \
    || { echo "setup.sh: the bundle $offline does not match its SHA256SUMS (see above); copy it again" >&2; exit 1; }
fi
# The native helpers are built with the Go pinned in scripts/lock/go-toolchain.txt, which
# scripts/go-toolchain.sh fetches from the Go module proxy with any go command: on a machine
# without one, Debian's golang-go (Go 1.19, itself too old to build them) is that client.
[ -n "$offline" ] || [ -n "${JUICE_GO:-}" ] || command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || APT_PKGS+=(golang-go)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  aptopts=()
  if [ -n "$offline" ]; then
    # The bundle's flat repository is apt's only source (its own lists, the host's untouched).
    mkdir -p "$offline/apt/lists/partial"
    echo "deb [trusted=yes] file:$offline/debs ./" > "$offline/apt/sources.list"
    aptopts=(-o "Dir::Etc::SourceList=$offline/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
             -o "Dir::State::Lists=$offline/apt/lists" -o APT::Get::List-Cleanup=0)
  fi
  apt-get "${aptopts[@]}" update -qq
  # policy-rc.d keeps the packaged services from starting: Juice starts its own servers.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get "${aptopts[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The packaged servers must not hold ports or data dirs Juice uses.
# sshd only when this script installed it (a host reached over SSH keeps its own sshd).
[[ " ${missing[*]} " == *" openssh-server "* ]] && systemctl disable --now ssh ssh.socket >/dev/null 2>&1 || true
for svc in mariadb postgresql memcached redis-server rabbitmq-server epmd.socket epmd nats-server haproxy \
           ovn-central ovn-northd ovn-ovsdb-server-nb ovn-ovsdb-server-sb; do
  systemctl disable --now "$svc" >/dev/null 2>&1 || true
done

# uv and pip trust the certificates this machine trusts (a proxy's own CA included), as
# apt and the go command do.
export UV_NATIVE_TLS=1 PIP_CERT=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}

# Python venvs (python3.11), cached outside the clone. Each installs exactly its lock file
# (scripts/lock/*.txt, every distribution pinned with hashes; regenerate with
# `bash scripts/lock.sh`) with uv, and is rebuilt when the hash of its lock changes.
mkdir -p "$cache"
py=${JUICE_PYTHON:-}
if [ -z "$py" ]; then
  for c in python3.11 /usr/bin/python3.11 python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then py=$c; break; fi
  done
fi
[ -n "$py" ] || { echo "setup.sh: Python 3.11 not found; install python3.11" >&2; exit 2; }
lock=$here/scripts/lock
# A top-level pin edited without regenerating the locks stops here, before anything is built.
"$py" "$here/scripts/lock-inputs.py" --check

# uv, pinned with hashes by scripts/lock/uv.txt, installed with pip into its own venv
# ($cache/uv); reinstalled when uv.txt changes. Its cache is $cache/uv-cache.
uvdir=$cache/uv
uv=$uvdir/bin/uv
uv_want=$(sha256sum "$lock/uv.txt" | cut -d' ' -f1)
if ! [ -x "$uv" ] || [ "$(cat "$uvdir/.juice-stamp" 2>/dev/null)" != "$uv_want" ]; then
  log "installing uv ($(grep -o '^uv==[^ ]*' "$lock/uv.txt")) into $uvdir"
  rm -rf "$uvdir"
  "$py" -m venv "$uvdir"
  pipnet=()
  [ -n "$offline" ] && pipnet=(--no-index --find-links "$offline/wheels")
  timeout 600 "$uvdir/bin/pip" install -q --disable-pip-version-check --no-input --require-hashes \
    --only-binary :all: "${pipnet[@]}" -r "$lock/uv.txt" \
    || { echo "setup.sh: could not install uv from PyPI into $uvdir (see above); check the network to PyPI and rerun" >&2; exit 1; }
  echo "$uv_want" > "$uvdir/.juice-stamp"
fi
export UV_CACHE_DIR=$cache/uv-cache UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1
# Juice, mysqlclient and ovs build from sdist: their build back-end is pinned too.
export UV_BUILD_CONSTRAINT=$lock/build.txt
# Offline: the bundle's wheels (and sdists) only; uv fails rather than reach an index.
uvnet=()
[ -n "$offline" ] && uvnet=(--offline --no-index --find-links "$offline/wheels")

# frozen DIR: the venv's distributions as sorted `name==version` lines, names normalised
# (PEP 503), editable installs left out; with no DIR, the same from a lock file on stdin.
frozen() {
  if [ $# -gt 0 ]; then "$uv" pip freeze -q --python "$1/bin/python" --exclude-editable; else cat; fi \
    | sed -nE 's/^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+).*/\1==\2/p' \
    | awk -F'==' '{ n = tolower($1); gsub(/[-_.]+/, "-", n); print n "==" $2 }' | LC_ALL=C sort
}
# venv DIR LOCK [STAMP_FILE...]: (re)create the venv DIR with exactly the distributions of LOCK
# when the hash of LOCK (and of the STAMP_FILEs) changed since it was built, or when what is
# installed no longer equals LOCK; otherwise leave it as it is and set kept=1. Then check that
# what is installed equals LOCK. (Not used in a condition, so `set -e` still stops on a failed
# install.)
venv() {
  local dir=$1 pins=$2; shift 2
  local want; want=$(cat "$pins" "$@" | sha256sum | cut -d' ' -f1)
  kept=0
  if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.juice-stamp" 2>/dev/null)" = "$want" ]; then
    if [ "$(frozen "$dir")" = "$(frozen < "$pins")" ]; then
      kept=1
      return 0
    fi
    log "$dir no longer matches ${pins#"$here"/}: rebuilding it"
  fi
  log "creating the venv $dir (${pins#"$here"/})"
  rm -rf "$dir"
  "$uv" venv -q --python "$py" "$dir"
  timeout 1800 "$uv" pip sync -q "${uvnet[@]}" --python "$dir/bin/python" --require-hashes "$pins" \
    || { echo "setup.sh: installing ${pins#"$here"/} into $dir failed (see above); fix the cause (network to PyPI, build deps) and rerun" >&2; exit 1; }
  if [ "$(frozen "$dir")" != "$(frozen < "$pins")" ]; then
    echo "setup.sh: $dir does not hold exactly ${pins#"$here"/} after install (diff: $(diff <(frozen < "$pins") <(frozen "$dir") | grep '^[<>]' | tr '\n' ' ')); rerun setup.sh, and if it persists regenerate the locks with 'bash scripts/lock.sh'" >&2
    exit 1
  fi
  echo "$want" > "$dir/.juice-stamp"
}
# bytecode DIR...: compile every module under the DIRs ahead of time, so that no Python process
# Juice starts (servers, the CLI, its drivers, pytest) compiles its imports again. uv installs
# without .pyc files, and with PYTHONDONTWRITEBYTECODE set (as on CI machines) Python never
# writes them: each `juice` command then spent ~2.5 s of CPU compiling pandas and pydantic, and
# the suite about a third of its CPU (measured with process accounting, docs/guides/setup.md).
# compileall skips what is up to date; a file it cannot compile (a package's Python 2 test
# data) is never imported, so its errors are not fatal.
bytecode() {
  "$cache/venv/bin/python" -m compileall -q -j 0 "$@" > /dev/null 2>&1 || true
}
# venv_bytecode DIR: bytecode for DIR's site-packages, once per build of the venv.
venv_bytecode() {
  local dir=$1
  if [ "$(cat "$dir/.juice-bytecode" 2>/dev/null)" != "$(cat "$dir/.juice-stamp")" ]; then
    log "compiling $dir to bytecode"
    bytecode "$dir"/lib/python3.11/site-packages
    cp "$dir/.juice-stamp" "$dir/.juice-bytecode"
  fi
}

# Juice's own venv: the lock, then Juice itself, editable, without dependencies. When the venv
# is kept, the editable install is re-pointed at this clone (CI clones elsewhere) only if it
# points elsewhere, which is cheap.
venv "$cache/venv" "$lock/juice.txt" "$here/pyproject.toml"
juice_url=$(sed -nE 's/.*"url": ?"([^"]*)".*/\1/p' "$cache"/venv/lib/python3.11/site-packages/juice-*.dist-info/direct_url.json 2>/dev/null || true)
if [ "$kept" = 0 ] || [ "$juice_url" != "file://$here" ]; then
  "$uv" pip install -q "${uvnet[@]}" --python "$cache/venv/bin/python" --no-deps -e "$here"
fi
# The OpenStack services (Keystone, nova, placement), kept out of Juice's venv.
venv "$cache/openstack" "$lock/openstack.txt" "$here/plugins/juice-nova/pyproject.toml"
# ... plus Juice's simulated compute hosts (plugins/juice-nova: a multi-node fake virt driver and
# its nova-compute launcher), editable and without dependencies, re-pointed at this clone when it
# points elsewhere.
nova_url=$(sed -nE 's/.*"url": ?"([^"]*)".*/\1/p' "$cache"/openstack/lib/python3.11/site-packages/juice_nova-*.dist-info/direct_url.json 2>/dev/null || true)
if [ "$kept" = 0 ] || [ "$nova_url" != "file://$here/plugins/juice-nova" ]; then
  "$uv" pip install -q "${uvnet[@]}" --python "$cache/openstack/bin/python" --no-deps -e "$here/plugins/juice-nova"
fi
# Real Rally (format checks, the Juice-vs-Rally benchmark), in its own venv too.
venv "$cache/rally" "$lock/rally.txt"
# The messaging study's clients (oslo.messaging, ombt), in their own venv too.
venv "$cache/messaging" "$lock/messaging.txt" "$here/plugins/juice-messaging/pyproject.toml"
# ... plus Juice's agents and NATS transport (plugins/juice-messaging: stdlib only), editable and
# without dependencies, re-pointed at this clone when it points elsewhere.
msg_url=$(sed -nE 's/.*"url": ?"([^"]*)".*/\1/p' "$cache"/messaging/lib/python3.11/site-packages/juice_messaging-*.dist-info/direct_url.json 2>/dev/null || true)
if [ "$kept" = 0 ] || [ "$msg_url" != "file://$here/plugins/juice-messaging" ]; then
  "$uv" pip install -q "${uvnet[@]}" --python "$cache/messaging/bin/python" --no-deps -e "$here/plugins/juice-messaging"
fi

for v in venv openstack rally messaging; do venv_bytecode "$cache/$v"; done
# ... and this clone's own modules (editable installs: not in any site-packages)
bytecode "$here/src" "$here/plugins"

# Native helpers: built with the pinned Go, or offline as the bundle has them (checked above).
if [ -n "$offline" ]; then
  mkdir -p "$cache/bin"
  for f in "$offline"/bin/* "$offline"/bin/.*.stamp; do
    [ -f "$f" ] || continue
    cmp -s "$f" "$cache/bin/${f##*/}" || { cp -p "$f" "$cache/bin/${f##*/}.tmp.$$" && mv -f "$cache/bin/${f##*/}.tmp.$$" "$cache/bin/${f##*/}"; }
  done
  log "native helpers from the bundle: $(cd "$offline/bin" && ls | tr '\n' ' ')"
else
  "$here/native/build.sh" "$cache/bin"
fi
# `juice` on the PATH only for the default cache: a set-up in another JUICE_CACHE (tests,
# benchmarks/setup_time.sh) leaves the link to /var/cache/juice alone.
if [ "$cache" = /var/cache/juice ]; then
  ln -sf "$cache/venv/bin/juice" /usr/local/bin/juice
else
  log "JUICE_CACHE is not the default: /usr/local/bin/juice left as it is; use $cache/venv/bin/juice"
fi
log "ready: $("$cache/venv/bin/juice" --version)"
