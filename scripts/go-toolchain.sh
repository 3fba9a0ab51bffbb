#!/usr/bin/env bash
# Prints the path of the pinned Go (scripts/lock/go-toolchain.txt), fetching it first when it
# is not in the cache yet.
#
#   scripts/go-toolchain.sh            -> /var/cache/juice/go/toolchain/go1.26.8.linux-amd64/bin/go
#
# The toolchain is the Go module golang.org/toolchain@v0.0.1-<version>.<platform> (what
# `GOTOOLCHAIN=<version>` makes the go command fetch), downloaded from the Go module proxy by
# whatever go command is at hand (on a bare Debian 12 machine: Debian's golang-go, Go 1.19,
# which scripts/setup.sh installs for this only), checked against the pinned h1 sum, and
# unpacked into $JUICE_CACHE/go/toolchain/<version>.<platform> (~250 MB; the zip is ~70 MB).
# JUICE_GO=/path/to/go overrides all of this (a user's own toolchain; it must be >= the go
# line of native/jaeger/go.mod for Jaeger). Exit codes: 0 ok, 3 no go command to fetch with,
# 1 the download failed or its sum does not match the pin.
set -euo pipefail
if [ -n "${JUICE_GO:-}" ]; then
  [ -x "$JUICE_GO" ] || { echo "go-toolchain.sh: JUICE_GO=$JUICE_GO is not an executable; unset it or point it at a go binary" >&2; exit 2; }
  echo "$JUICE_GO"; exit 0
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${JUICE_CACHE:-/var/cache/juice}
gocache=${JUICE_GO_CACHE:-$cache/go}
case $(uname -m) in
  x86_64) platform=linux-amd64 ;;
  aarch64|arm64) platform=linux-arm64 ;;
  *) echo "go-toolchain.sh: no Go toolchain pinned for $(uname -m) in scripts/lock/go-toolchain.txt; set JUICE_GO to a go binary" >&2; exit 2 ;;
esac
read -r version sum < <(awk -v p="$platform" '!/^#/ && $2 == p { print $1, $3 }' "$here/scripts/lock/go-toolchain.txt")
[ -n "${sum:-}" ] || { echo "go-toolchain.sh: no line for $platform in scripts/lock/go-toolchain.txt" >&2; exit 2; }
dest=$gocache/toolchain/$version.$platform
if [ -x "$dest/bin/go" ] && [ "$(cat "$dest/.juice-sum" 2>/dev/null)" = "$sum" ]; then
  echo "$dest/bin/go"; exit 0
fi
client=""
for c in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
  if [ -n "$c" ] && [ -x "$c" ]; then client=$c; break; fi
done
[ -n "$client" ] || { echo "go-toolchain.sh: no go command to fetch $version with; install Debian's golang-go (scripts/setup.sh does) or set JUICE_GO" >&2; exit 3; }
mod=golang.org/toolchain@v0.0.1-$version.$platform
echo "go-toolchain.sh: fetching $version ($platform) from the Go module proxy with $("$client" env GOVERSION)..." >&2
mkdir -p "$gocache/mod" "$gocache/toolchain"
tmp=$(mktemp -d "$gocache/toolchain/.fetch.XXXXXX")
trap 'chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"' EXIT
# Outside any module (cd to the temp dir), into a module cache of its own that is removed
# afterwards: only the unpacked toolchain is kept.
json=$(cd "$tmp" && GOTOOLCHAIN=local GOFLAGS= GOMODCACHE="$tmp/mod" timeout 900 "$client" mod download -json "$mod") || {
  echo "go-toolchain.sh: downloading $mod failed (see above); check access to the Go module proxy (GOPROXY=$("$client" env GOPROXY)) and rerun" >&2; exit 1; }
got=$(printf '%s\n' "$json" | sed -nE 's/^[[:space:]]*"Sum": "([^"]*)".*/\1/p')
dir=$(printf '%s\n' "$json" | sed -nE 's/^[[:space:]]*"Dir": "([^"]*)".*/\1/p')
if [ "$got" != "$sum" ]; then
  echo "go-toolchain.sh: $mod has sum '$got', scripts/lock/go-toolchain.txt pins '$sum': refusing it" >&2; exit 1
fi
cp -a "$dir" "$tmp/go"
chmod -R u+w "$tmp/go"
# A module zip carries no file modes: the executables get theirs back (as the go command does
# for toolchain modules since Go 1.21).
chmod +x "$tmp/go/bin/"* "$tmp/go/pkg/tool/"*/*
echo "$sum" > "$tmp/go/.juice-sum"
chmod -R u+w "$dest" 2>/dev/null || true
rm -rf "$dest"
mv "$tmp/go" "$dest"
echo "go-toolchain.sh: $("$dest/bin/go" version) in $dest" >&2
echo "$dest/bin/go"
