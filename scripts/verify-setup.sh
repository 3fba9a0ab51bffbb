#!/usr/bin/env bash
# Checks that this machine holds exactly what scripts/setup.sh installs (run after it, e.g. by
# `juice hosts prepare`, on each host):
#   - each venv in $JUICE_CACHE holds exactly its lock: uv, venv (juice.txt), openstack, rally,
#     messaging (uv's venv: plus the pip and setuptools `python -m venv` seeds it with) (the `name==version` of `uv pip freeze`, editable installs aside, equal to the
#     lock's pins) and `uv pip check` finds no broken requirement;
#   - `juice --version` runs from the Juice venv;
#   - the native helpers are there and executable; with JUICE_OFFLINE=BUNDLE, byte for byte
#     the bundle's (their sha256 in its SHA256SUMS).
# One line per check; exit 0 when all pass, 1 otherwise (each difference named).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${JUICE_CACHE:-/var/cache/juice}
lock=$here/scripts/lock
uv=$cache/uv/bin/uv
bad=0
say() { printf 'verify: %s\n' "$*"; }
fail() { printf 'verify: FAILED: %s\n' "$*"; bad=1; }

# pins < FILE: sorted normalised `name==version` (PEP 503 names), as setup.sh's frozen().
pins() {
  sed -nE 's/^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+).*/\1==\2/p' \
    | awk -F'==' '{ n = tolower($1); gsub(/[-_.]+/, "-", n); print n "==" $2 }' | LC_ALL=C sort
}

[ -x "$uv" ] || { fail "$uv missing (setup.sh did not install uv)"; exit 1; }
for pair in uv:uv venv:juice openstack:openstack rally:rally messaging:messaging; do
  dir=$cache/${pair%%:*} file=$lock/${pair#*:}.txt
  if ! [ -x "$dir/bin/python" ]; then fail "$dir: no venv"; continue; fi
  want=$(pins < "$file")
  have=$("$uv" pip freeze -q --python "$dir/bin/python" --exclude-editable 2>/dev/null | pins)
  # uv's own venv (python -m venv) also holds the pip and setuptools it was seeded with.
  [ "${pair%%:*}" = uv ] && have=$(echo "$have" | grep -Ev '^(pip|setuptools)==')
  if [ "$have" != "$want" ]; then
    fail "$dir differs from ${file#"$here"/}: $(diff <(echo "$want") <(echo "$have") | grep '^[<>]' | head -6 | tr '\n' ' ')"
    continue
  fi
  if ! chk=$("$uv" pip check -q --python "$dir/bin/python" 2>&1); then
    fail "$dir: uv pip check: $(echo "$chk" | tail -3 | tr '\n' ' ')"
    continue
  fi
  say "$dir = ${file#"$here"/} ($(echo "$want" | grep -c .) distributions), uv pip check ok"
done

for f in juice-wan-delay; do
  [ -x "$cache/bin/$f" ] || { fail "$cache/bin/$f missing or not executable"; continue; }
  got=$(sha256sum "$cache/bin/$f" | cut -d' ' -f1)
  if [ -n "${JUICE_OFFLINE:-}" ]; then
    want=$(awk -v f="bin/$f" '$2 == f { print $1 }' "$JUICE_OFFLINE/SHA256SUMS")
    [ "$got" = "$want" ] || { fail "$cache/bin/$f: sha256 $got, the bundle's is ${want:-absent}"; continue; }
    say "$cache/bin/$f = the bundle's (sha256 ${got:0:16})"
  else
    say "$cache/bin/$f present (sha256 ${got:0:16})"
  fi
done
if v=$("$cache/venv/bin/juice" --version 2>&1); then say "$v runs"; else fail "$cache/venv/bin/juice --version: $(echo "$v" | tail -1)"; fi
[ "$bad" = 0 ] && say "all ok"
exit "$bad"
