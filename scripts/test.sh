#!/usr/bin/env bash
# Runs every test: set-up (idempotent), lint, types, Go unit tests, then pytest, which
# includes the real-server integration tests (namespaces, MariaDB, Galera, PostgreSQL).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${JUICE_CACHE:-/var/cache/juice}
"$here/scripts/setup.sh"
export PATH="$cache/venv/bin:$PATH"
cd "$here"
echo "== ruff"; ruff check src tests benchmarks plugins
echo "== mypy (strict, src)"; mypy
echo "== go test (native)"; (cd native/wan-delay && GOFLAGS=-mod=readonly GOCACHE="$cache/go/cache" GOMODCACHE="$cache/go/mod" GOTOOLCHAIN=local PATH="/usr/local/go/bin:$PATH" go test ./...)
echo "== pytest"
# Leftovers of an earlier crashed run are removed first; a user's own labs are kept, and
# any juice- namespace the tests add and do not remove fails the run.
juice lab sweep >/dev/null
before=$(ip netns list | awk '{print $1}' | grep '^juice-' | sort || true)
pytest -q -p no:cacheprovider "$@"
after=$(ip netns list | awk '{print $1}' | grep '^juice-' | sort || true)
left=$(comm -13 <(echo "$before") <(echo "$after") | grep . || true)
if [ -n "$left" ]; then echo "tests left namespaces behind: $left" >&2; exit 1; fi
