#!/usr/bin/env bash
# Benchmarks `litectl stats` on a ~1 GB generated database against sqlite3_analyzer
# (target: at least 1.5x faster) and against one bare aggregate scan of dbstat in the
# sqlite3 CLI (the floor; target: within 1.3x), side by side in one hyperfine session.
# BENCH_DB=path reuses an existing database; BENCH_ROWS (default 3000000) sizes a new one.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require hyperfine sqlite3 sqlite3_analyzer python3
bench_tmpdir
LITECTL=$(bench_litectl)

db=${BENCH_DB:-}
if [[ -z $db ]]; then
  db=$BENCH_TMPDIR/big.db
  python3 "$BENCH_GENERATE" "$db" --rows "${BENCH_ROWS:-3000000}" >&2
fi
echo "database: $db ($(du -h "$db" | cut -f1))" >&2

floor="SELECT name, count(*), sum(pagetype = 'leaf'), sum(pagetype = 'internal'), sum(pagetype = 'overflow'),
  sum(ncell), sum(payload), sum(unused), max(mx_payload) FROM dbstat GROUP BY name"
json=$BENCH_TMPDIR/stats.json
hyperfine --warmup 1 --runs "${BENCH_RUNS:-3}" --export-json "$json" \
  --command-name "litectl stats" "$LITECTL stats --format json $db" \
  --command-name "sqlite3_analyzer" "sqlite3_analyzer $db" \
  --command-name "dbstat scan" "sqlite3 $db \"$floor\"" >&2
python3 - "$json" <<'PY'
import json, statistics, sys
r = {x["command"]: statistics.median(x["times"]) for x in json.load(open(sys.argv[1]))["results"]}
l, a, f = r["litectl stats"], r["sqlite3_analyzer"], r["dbstat scan"]
print(f"litectl stats: median {l:.2f} s | sqlite3_analyzer: median {a:.2f} s | dbstat scan: median {f:.2f} s")
print(f"litectl stats is {a / l:.2f}x faster than sqlite3_analyzer, and takes {l / f:.2f}x the bare dbstat scan")
PY
