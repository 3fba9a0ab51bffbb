#!/usr/bin/env bash
# README command 1: install everything (idempotent), then run the main job: the quickstart
# experiment (examples/quickstart.yaml: Keystone on MariaDB vs Galera, 3 sites, 0 and 50 ms
# one-way). Resumable; the last line printed is the path of the HTML report.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh"
cd "$here"
exec "${JUICE_CACHE:-/var/cache/juice}/venv/bin/juice" run examples/quickstart.yaml "$@"
