#!/usr/bin/env bash
# Build juice-wan-delay into OUTDIR (default /var/cache/juice/bin).
#
#   native/build.sh [OUTDIR]
#
# Idempotent: the binary is rebuilt only when the hash of its sources
# (*.go except tests, go.mod, go.sum) or the Go version changed (the Go is the one
# scripts/lock/go-toolchain.txt pins, see scripts/go-toolchain.sh); the hash is
# kept in OUTDIR/.juice-wan-delay.stamp. Go caches live under
# $JUICE_CACHE/go (default /var/cache/juice/go; JUICE_GO_CACHE overrides), as scripts/go-toolchain.sh, so CI can cache them.
set -euo pipefail

OUTDIR=${1:-/var/cache/juice/bin}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/wan-delay" && pwd)
BIN=juice-wan-delay
CACHE=${JUICE_GO_CACHE:-${JUICE_CACHE:-/var/cache/juice}/go}

# The pinned Go (scripts/lock/go-toolchain.txt), fetched into the cache on first use.
GO=$("$SRC/../../scripts/go-toolchain.sh") || {
    echo "build.sh: no Go toolchain to build $BIN with (see above)" >&2
    exit 3
}

export GOFLAGS=-mod=readonly
export GOCACHE="$CACHE/cache"
export GOMODCACHE="$CACHE/mod"
export GOTOOLCHAIN=local
export CGO_ENABLED=0

mkdir -p "$OUTDIR" "$GOCACHE" "$GOMODCACHE"

goversion=$("$GO" env GOVERSION)
stamp=$(
    cd "$SRC"
    {
        echo "$goversion"
        find . -maxdepth 1 -type f \( -name '*.go' ! -name '*_test.go' -o -name go.mod -o -name go.sum \) \
            -print | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done
    } | sha256sum | cut -d' ' -f1
)
stampfile="$OUTDIR/.$BIN.stamp"
if [ -x "$OUTDIR/$BIN" ] && [ -f "$stampfile" ] && [ "$(cat "$stampfile")" = "$stamp" ]; then
    echo "build.sh: $OUTDIR/$BIN is up to date"
    exit 0
fi

tmp="$OUTDIR/.$BIN.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$SRC" && "$GO" build -trimpath -ldflags='-s -w' -o "$tmp" .) || {
    echo "build.sh: go build of $BIN failed" >&2
    exit 1
}
mv -f "$tmp" "$OUTDIR/$BIN"
echo "$stamp" > "$stampfile"
echo "build.sh: built $OUTDIR/$BIN ($goversion)"
