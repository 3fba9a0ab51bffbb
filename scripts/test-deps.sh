#!/usr/bin/env bash
# What the tests need beyond the set-up (scripts/setup.sh):
# - headless Chromium from Debian's package, with which tests/report/test_fit.py renders the
#   fixture reports at 1280 px and measures their width;
# - Jaeger (scripts/jaeger.sh: built once from its Go module into the cache), into which
#   tests/trace/test_jaeger.py loads traced boots. Only tracing needs it, so the set-up (and
#   the quickstart) does not build it.
# Idempotent, and instant when both are there. Called by scripts/test.sh; JUICE_NO_TEST_DEPS=1
# skips it (the width test then skips, saying why; the Jaeger test builds Jaeger itself).
set -euo pipefail
[ "${JUICE_NO_TEST_DEPS:-0}" = 1 ] && exit 0
here=$(cd "$(dirname "$0")/.." && pwd)
# all cores: nothing else runs yet (scripts/test.sh calls this before lint and pytest)
JAEGER_JOBS=${JAEGER_JOBS:-$(nproc)} "$here/scripts/jaeger.sh" "${JUICE_CACHE:-/var/cache/juice}/bin" || \
  echo "test-deps: Jaeger could not be built (see above): tests/trace/test_jaeger.py will say why" >&2
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "test-deps: chromium is not installed and this is not root: the report width test will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
