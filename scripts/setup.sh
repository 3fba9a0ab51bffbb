#!/usr/bin/env bash
# Installs everything Juice needs on a fresh Debian 12 machine (run as root). Idempotent.
#   - Debian packages (network tools, databases, probes)
#   - the project venv in $JUICE_CACHE/venv (outside the clone, reused between runs)
#   - native helpers built into $JUICE_CACHE/bin
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${JUICE_CACHE:-/var/cache/juice}
log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  echo "setup.sh: must run as root (it installs Debian packages and creates network namespaces); rerun with sudo" >&2
  exit 2
fi

APT_PKGS=(iproute2 iptables nftables iputils-ping iperf3 procps psmisc rsync socat
          mariadb-server mariadb-client galera-4 mariadb-backup
          postgresql postgresql-client python3-venv
          memcached redis-server
          libmariadb-dev pkg-config gcc python3-dev)  # build deps of mysqlclient (the C MySQLdb)
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || APT_PKGS+=(golang-go)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d keeps the packaged services from starting: Juice starts its own servers.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The packaged servers must not hold ports or data dirs Juice uses.
for svc in mariadb postgresql memcached redis-server; do
  systemctl disable --now "$svc" >/dev/null 2>&1 || true
done

# Python venv (python3.11), cached outside the clone and refreshed when pyproject changes.
mkdir -p "$cache"
py=${JUICE_PYTHON:-}
if [ -z "$py" ]; then
  for c in python3.11 /usr/bin/python3.11 python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then py=$c; break; fi
  done
fi
[ -n "$py" ] || { echo "setup.sh: Python 3.11 not found; install python3.11" >&2; exit 2; }
# venv DIR STAMP_SOURCE INSTALL_ARGS...: (re)create the venv DIR when STAMP_SOURCE (the file
# that pins its contents) changed since it was built; otherwise leave it as it is and set
# kept=1. (Not used in a condition, so `set -e` still stops on a failed install.)
venv() {
  local dir=$1 pins=$2; shift 2
  local want; want=$(sha256sum "$pins" | cut -d' ' -f1)
  kept=0
  if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.juice-stamp" 2>/dev/null)" = "$want" ]; then
    kept=1
    return 0
  fi
  log "creating the venv $dir ($(basename "$pins"); a minute or two)"
  rm -rf "$dir"
  "$py" -m venv "$dir"
  "$dir/bin/pip" install -q --upgrade pip
  "$dir/bin/pip" install -q "$@"
  echo "$want" > "$dir/.juice-stamp"
}

# Juice's own venv. When it is kept, re-point its editable install at this clone (CI clones
# elsewhere), which is cheap.
venv "$cache/venv" "$here/pyproject.toml" -e "$here[dev]"
if [ "$kept" = 1 ]; then
  "$cache/venv/bin/pip" install -q --no-deps -e "$here" >/dev/null
fi
# The OpenStack services (Keystone, nova), kept out of Juice's venv.
venv "$cache/openstack" "$here/scripts/requirements-openstack.txt" \
  -r "$here/scripts/requirements-openstack.txt"
# Real Rally (format checks, the Juice-vs-Rally benchmark), in its own venv too.
venv "$cache/rally" "$here/scripts/requirements-rally.txt" -r "$here/scripts/requirements-rally.txt"

# Native helpers.
"$here/native/build.sh" "$cache/bin"
ln -sf "$cache/venv/bin/juice" /usr/local/bin/juice
log "ready: $("$cache/venv/bin/juice" --version)"
