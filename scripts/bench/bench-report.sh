#!/usr/bin/env bash
# Benchmarks `litectl report DB -o FILE.html` on a generated database of 1,000,000 rows (~340 MB)
# against `litectl stats --format json` followed by `litectl check`, the two commands whose work
# the report shows (target: less than 1.5x their time; the report runs its check beside the stats
# scan, so on 2 cores it can take less); then `litectl report A B` on a 1%-mutated copy against
# `litectl diff --summary A B` (the same diff engine; the report keeps sample rows and writes a page).
# Runs alternate (bench_alternate), medians of ${BENCH_RUNS:-5} rounds; on a loaded machine compare
# the CPU ratio too (it prints both).
# BENCH_DB=path reuses an existing database; BENCH_ROWS (default 1000000) sizes a new one.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require python3 sqlite3
bench_tmpdir
LITECTL=$(bench_litectl)

db=${BENCH_DB:-}
if [[ -z $db ]]; then
  db=$BENCH_TMPDIR/big.db
  python3 "$BENCH_GENERATE" "$db" --rows "${BENCH_ROWS:-1000000}" >&2
fi
echo "database: $db ($(du -h "$db" | cut -f1))" >&2
out=$BENCH_TMPDIR/report.html

# check exits 1 on a failing finding; the generated database has warnings only (a table without
# a primary key), so every command here exits 0 and alternate.py would stop on anything else.
BENCH_RUNS=${BENCH_RUNS:-5} bench_alternate \
  "litectl report" "$LITECTL report $db -o $out --force" \
  "stats + check" "$LITECTL stats --format json $db >/dev/null && $LITECTL check $db"
echo "report: $(du -h "$out" | cut -f1) of HTML" >&2

mutated=$BENCH_TMPDIR/mutated.db
python3 "$BENCH_GENERATE" --mutate 0.01 --from "$db" "$mutated" >&2
# Both exit 1 (the databases differ): `|| [[ $? == 1 ]]` keeps that from stopping the timing.
BENCH_RUNS=${BENCH_RUNS:-5} bench_alternate \
  "litectl report A B" "$LITECTL report $db $mutated -o $out --force || [[ \$? == 1 ]]" \
  "diff --summary" "$LITECTL diff --summary $db $mutated >/dev/null || [[ \$? == 1 ]]"
echo "comparison report: $(du -h "$out" | cut -f1) of HTML" >&2
