#!/usr/bin/env bash
# Benchmark of `litectl info` beside the sqlite3 shell reading the same facts
# through pragmas, on a generated database (the scaffold's first case).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require hyperfine sqlite3 python3
bench_tmpdir
LITECTL=$(bench_litectl)
rows=${ROWS:-100000}

python3 "$BENCH_GENERATE" "$BENCH_TMPDIR/a.db" --rows "$rows"
pragmas="PRAGMA page_size; PRAGMA page_count; PRAGMA freelist_count; PRAGMA schema_version; PRAGMA user_version;
PRAGMA application_id; PRAGMA journal_mode; PRAGMA auto_vacuum; PRAGMA encoding;
SELECT type, count(*) FROM sqlite_schema GROUP BY type;"
bench_compare "litectl info --json" "$LITECTL info --json $BENCH_TMPDIR/a.db" \
  "sqlite3 pragmas" "sqlite3 $BENCH_TMPDIR/a.db '$pragmas'" -N
