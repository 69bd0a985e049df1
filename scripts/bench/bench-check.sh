#!/usr/bin/env bash
# Benchmarks `litectl check`: on one ~1 GB generated database against
# `sqlite3 DB 'PRAGMA integrity_check'` (target: not slower), and `check -j 2` over
# 100 small databases against a shell loop of the same sqlite3 command (target: at
# least 1.7x faster on 2 cores). litectl also runs foreign_key_check and its lints.
# Also `check --connections 2` (integrity_check split over two connections).
# BENCH_DB=path reuses an existing large database; BENCH_ROWS (default 3000000) sizes a new one.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require hyperfine sqlite3 python3
bench_tmpdir
LITECTL=$(bench_litectl)

db=${BENCH_DB:-}
if [[ -z $db ]]; then
  db=$BENCH_TMPDIR/big.db
  python3 "$BENCH_GENERATE" "$db" --rows "${BENCH_ROWS:-3000000}" >&2
fi
echo "database: $db ($(du -h "$db" | cut -f1))" >&2
BENCH_RUNS=${BENCH_RUNS:-3} bench_compare "litectl check" "$LITECTL check $db" \
  "sqlite3 integrity_check" "sqlite3 $db 'PRAGMA integrity_check'"
BENCH_RUNS=${BENCH_RUNS:-3} bench_compare "litectl check --connections 2" "$LITECTL check --connections 2 $db" \
  "sqlite3 integrity_check" "sqlite3 $db 'PRAGMA integrity_check'"

many=$BENCH_TMPDIR/many
mkdir -p "$many"
python3 "$BENCH_GENERATE" "$many/seed.db" --rows "${BENCH_SMALL_ROWS:-20000}" >&2
for i in $(seq -w 1 100); do cp "$many/seed.db" "$many/db$i.db"; done
rm "$many/seed.db"
echo "100 databases of $(du -h "$many/db001.db" | cut -f1) each" >&2
bench_compare "litectl check -j 2" "$LITECTL check -j 2 $many/*.db" \
  "sqlite3 loop" "for f in $many/*.db; do sqlite3 \$f 'PRAGMA integrity_check' >/dev/null; done"
