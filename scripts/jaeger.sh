#!/usr/bin/env bash
# Build Jaeger v2 (the `cmd/jaeger` program of github.com/jaegertracing/jaeger, pinned at
# v1.76.0 by native/jaeger/go.mod and go.sum) into OUTDIR (default /var/cache/juice/bin) as
# juice-jaeger-1.76.0.
#
#   scripts/jaeger.sh [OUTDIR]
#
# Only `juice trace --jaeger` and its test need it, so scripts/setup.sh does not call this
# (the quickstart's set-up stays as fast as it was); scripts/test-deps.sh and `juice trace
# --jaeger` do. Idempotent: exits at once when the binary is there. A cold build downloads the
# module's dependencies from the Go module proxy (checked against go.sum) and compiles for many
# minutes: it runs under `nice -n 19` with GOMAXPROCS=1 so it shares the machine politely, or on
# JAEGER_JOBS cores (scripts/test-deps.sh: all of them, as nothing else runs yet: a cold build
# on 1 core of a loaded 2-core machine took over 25 min).
# Go caches live under $JUICE_CACHE/go (default /var/cache/juice/go; JUICE_GO_CACHE overrides), as for
# native/build.sh and scripts/go-toolchain.sh.
# Exit codes: 0 built or present, 3 no Go toolchain, 1 the build failed.
set -euo pipefail

VERSION=1.76.0
OUTDIR=${1:-/var/cache/juice/bin}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../native/jaeger" && pwd)
BIN=juice-jaeger-$VERSION
CACHE=${JUICE_GO_CACHE:-${JUICE_CACHE:-/var/cache/juice}/go}

if [ -x "$OUTDIR/$BIN" ]; then
    exit 0
fi

GO=$("$SRC/../../scripts/go-toolchain.sh") || {
    echo "jaeger.sh: no Go toolchain to build $BIN with (see above); Jaeger is needed only by 'juice trace --jaeger' and its test" >&2
    exit 3
}

export GOFLAGS="-mod=readonly -buildvcs=false"
export GOCACHE="$CACHE/cache"
export GOMODCACHE="$CACHE/mod"
export GOTOOLCHAIN=local
export CGO_ENABLED=0
JOBS=${JAEGER_JOBS:-1}
case $JOBS in ''|*[!0-9]*|0) echo "jaeger.sh: JAEGER_JOBS must be a positive number, got '$JOBS'" >&2; exit 2 ;; esac
export GOMAXPROCS=$JOBS

mkdir -p "$OUTDIR" "$GOCACHE" "$GOMODCACHE"
echo "jaeger.sh: building $BIN with $("$GO" env GOVERSION) (a first build takes many minutes)..." >&2
tmp="$OUTDIR/.$BIN.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$SRC" && nice -n 19 "$GO" build -p "$JOBS" -trimpath -ldflags='-s -w' -o "$tmp" \
    github.com/jaegertracing/jaeger/cmd/jaeger) || {
    echo "jaeger.sh: go build of $BIN failed" >&2
    exit 1
}
mv -f "$tmp" "$OUTDIR/$BIN"
echo "jaeger.sh: built $OUTDIR/$BIN" >&2
