#!/usr/bin/env bash
# Runs the verdicts benchmark's two specs (alone on the machine: nothing else running), logging
# the load average every 30 s, then the analysis (benchmarks/verdicts_aa.py).
#   bash benchmarks/verdicts/run.sh [OUTDIR]      (default /var/tmp/juice-bench)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/var/tmp/juice-bench}
mkdir -p "$out"
export PATH=/var/cache/juice/venv/bin:$PATH
(while sleep 30; do echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; done > "$out/load.log") &
logger=$!
trap 'kill $logger 2>/dev/null || true' EXIT
for s in nova keystone; do
  echo "== $s ($(date +%T))"
  ( time juice run "$here/benchmarks/verdicts/$s.yaml" --results "$out/verdicts-$s" --no-report ) 2>&1 | tail -4
done
python "$here/benchmarks/verdicts_aa.py" "$out/verdicts-nova" --orders 10 --out "$out/verdicts-nova.json"
python "$here/benchmarks/verdicts_aa.py" "$out/verdicts-keystone" --effect delay_ms=3.0 --orders 10 \
  --out "$out/verdicts-keystone.json"
echo "load average (1, 5, 15 min) during the runs:"; cat "$out/load.log"
