#!/usr/bin/env bash
# Runs the tests, in two tiers:
#
#   bash scripts/test.sh           everything (what CI runs): set-up (idempotent), lint, types, Go unit
#                                  tests, then pytest with the real-server integration tests (MariaDB,
#                                  Galera, PostgreSQL, RabbitMQ, NATS, Keystone, placement, nova, sshd)
#   bash scripts/test.sh --fast    the inner loop: lint, types, Go, and every test that starts no
#                                  server (pytest -m "not slow")
#
# Any other argument goes to pytest (`bash scripts/test.sh tests/lab -k wan`). pytest runs
# $JUICE_TEST_WORKERS processes at once (pytest-xdist; default 5 for everything, 2 for --fast):
# the real-server tests mostly wait (servers starting, boots, fault windows), so on 2 cores
# five of them overlap well (measured: the suite used 1.64 of 2 cores with four). Tests that
# share a deployment are pinned to one worker
# (xdist_group). The suite's wall time is printed at the end; the list of tests that start or
# use real servers is written to $JUICE_TEST_CENSUS (default /var/cache/juice/test-census.txt;
# test-census-fast.txt for --fast).
set -euo pipefail
t0=$(date +%s)
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${JUICE_CACHE:-/var/cache/juice}
fast=0
args=()
for a in "$@"; do
  case $a in
    --fast) fast=1 ;;
    *) args+=("$a") ;;
  esac
done
"$here/scripts/setup.sh"
"$here/scripts/test-deps.sh"   # headless Chromium for the report width test
export PATH="$cache/venv/bin:$PATH"
# lint and type caches outside the clone: a fresh clone checks in seconds, not half a minute
export MYPY_CACHE_DIR="$cache/mypy-cache" RUFF_CACHE_DIR="$cache/ruff-cache"
cd "$here"
echo "== ruff"; ruff check src tests benchmarks plugins
echo "== mypy (strict, src)"; mypy
go=$("$here/scripts/go-toolchain.sh")
echo "== go test (native, $("$go" env GOVERSION))"
(cd native/wan-delay && GOFLAGS=-mod=readonly GOCACHE="$cache/go/cache" GOMODCACHE="$cache/go/mod" GOTOOLCHAIN=local "$go" test ./...)

# Server processes: none the tests start may outlive them. Listed (never killed here) by pid:
# the servers' own executables, and anything run from Juice's venvs.
servers() {
  ps -eo pid=,comm=,args= | awk -v cache="$cache" '
    $2 ~ /^(mariadbd|mysqld|postgres|beam\.smp|epmd|nats-server|memcached|redis-server|haproxy|gunicorn|juice-wan-delay|sshd|uwsgi)$/ \
      || index($0, cache "/openstack/") || index($0, cache "/messaging/") { print $1 }' | sort
}

if [ "$fast" = 1 ]; then
  workers=${JUICE_TEST_WORKERS:-2}
  marks=(-m "not slow")
else
  workers=${JUICE_TEST_WORKERS:-5}
  marks=()
fi
if [ "$fast" = 1 ]; then census=${JUICE_TEST_CENSUS:-$cache/test-census-fast.txt}
else census=${JUICE_TEST_CENSUS:-$cache/test-census.txt}; fi
echo "== pytest ($workers workers${marks:+, ${marks[*]}})"
# Leftovers of an earlier crashed run are removed first; a user's own labs are kept, and
# any juice- namespace or server process the tests add and do not remove fails the run.
juice lab sweep >/dev/null
before=$(ip netns list | awk '{print $1}' | grep '^juice-' | sort || true)
servers_before=$(servers)
rc=0
# Nothing passes silently (tests/noskip.py): a skipped test fails, saying why, unless its
# reason starts with "[optional]" (what cannot be obtained here: a CockroachDB binary).
export JUICE_REQUIRE_ALL=${JUICE_REQUIRE_ALL:-1}
# busy: the machine's CPU-seconds spent so far outside idle and iowait (every process, ours or
# not): printed at the end beside what two cores could give, to say whether the run was CPU-bound
busy() { awk '/^cpu /{ printf "%d", ($2+$3+$4+$7+$8+$9)/100 }' /proc/stat; }
busy0=$(busy); pt0=$(date +%s)
pytest -q -rs -p no:cacheprovider -n "$workers" --dist loadgroup --server-census="$census" \
  "${marks[@]}" "${args[@]}" || rc=$?
after=$(ip netns list | awk '{print $1}' | grep '^juice-' | sort || true)
left=$(comm -13 <(echo "$before") <(echo "$after") | grep . || true)
if [ -n "$left" ]; then echo "tests left namespaces behind: $left" >&2; rc=1; fi
sleep 1  # a server stopped at the very end may still be exiting
leaked=$(comm -13 <(echo "$servers_before") <(servers) | grep . || true)
if [ -n "$leaked" ]; then
  echo "tests left server processes behind:" >&2
  for p in $leaked; do ps -o pid=,args= -p "$p" >&2 || true; done
  rc=1
fi
took=$(( $(date +%s) - pt0 )); cores=$(nproc)
echo "== the machine was busy $(( $(busy) - busy0 )) CPU-s during pytest's $took s, of $(( took * cores )) its $cores cores could give"
used=$(grep -vc $'\t-$' "$census" 2>/dev/null || echo 0)
echo "== $(basename "$census"): $used tests start or use real servers"
echo "== wall time: $(( $(date +%s) - t0 )) s$([ "$fast" = 1 ] && echo ' (fast tier)')"
exit $rc
