#!/usr/bin/env bash
# README command 1: install everything (idempotent), then run the quickstart experiment.
# The last line printed is the path of the report.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh"
cd "$here"
exec "${JUICE_CACHE:-/var/cache/juice}/venv/bin/juice" quickstart "$@"
