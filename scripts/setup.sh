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
          memcached redis-server)
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
stamp="$cache/venv/.juice-stamp"
want=$(sha256sum "$here/pyproject.toml" | cut -d' ' -f1)
if [ ! -x "$cache/venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "creating venv in $cache/venv"
  rm -rf "$cache/venv"
  "$py" -m venv "$cache/venv"
  "$cache/venv/bin/pip" install -q --upgrade pip
  "$cache/venv/bin/pip" install -q -e "$here[dev]"
  echo "$want" > "$stamp"
else
  # editable install points at this clone (CI clones elsewhere): re-point cheaply.
  "$cache/venv/bin/pip" install -q --no-deps -e "$here" >/dev/null
fi

# OpenStack services (Keystone, nova) in their own venv, refreshed when the pins change.
ostamp="$cache/openstack/.juice-stamp"
owant=$(sha256sum "$here/scripts/requirements-openstack.txt" | cut -d' ' -f1)
if [ ! -x "$cache/openstack/bin/python" ] || [ "$(cat "$ostamp" 2>/dev/null)" != "$owant" ]; then
  log "creating the OpenStack venv in $cache/openstack (keystone, nova; ~2 min)"
  rm -rf "$cache/openstack"
  "$py" -m venv "$cache/openstack"
  "$cache/openstack/bin/pip" install -q --upgrade pip
  "$cache/openstack/bin/pip" install -q -r "$here/scripts/requirements-openstack.txt"
  echo "$owant" > "$ostamp"
fi

# Real Rally (for format checks and the Juice-vs-Rally benchmark), in its own venv too.
rstamp="$cache/rally/.juice-stamp"
rwant=$(sha256sum "$here/scripts/requirements-rally.txt" | cut -d' ' -f1)
if [ ! -x "$cache/rally/bin/rally" ] || [ "$(cat "$rstamp" 2>/dev/null)" != "$rwant" ]; then
  log "creating the Rally venv in $cache/rally (rally, rally-openstack; ~1 min)"
  rm -rf "$cache/rally"
  "$py" -m venv "$cache/rally"
  "$cache/rally/bin/pip" install -q --upgrade pip
  "$cache/rally/bin/pip" install -q -r "$here/scripts/requirements-rally.txt"
  echo "$rwant" > "$rstamp"
fi

# Native helpers.
"$here/native/build.sh" "$cache/bin"
ln -sf "$cache/venv/bin/juice" /usr/local/bin/juice
log "ready: $("$cache/venv/bin/juice" --version)"
