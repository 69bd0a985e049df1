#!/usr/bin/env bash
# Benchmarks `litectl query`: (a) --format csv of a 1M-row table against `sqlite3 -csv`
# (target: not slower); (b) --each over 1,000 small databases against a shell loop calling
# sqlite3 once per file (target: at least 5x faster); (c) peak memory for 1M and 10M rows
# streamed (should stay flat).
# Usage: scripts/bench/bench-query.sh   (BENCH_ROWS, BENCH_FILES, BENCH_RUNS to change sizes)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require hyperfine sqlite3 python3
bench_tmpdir
LITECTL=$(bench_litectl)
ROWS=${BENCH_ROWS:-1000000}
FILES=${BENCH_FILES:-1000}
T=$BENCH_TMPDIR

echo "== generating a $ROWS-row database and $FILES small databases" >&2
python3 "$BENCH_GENERATE" "$T/big.db" --rows "$ROWS" >&2
mkdir "$T/shards"
python3 - "$T/shards" "$FILES" <<'PY'
import sqlite3, sys
folder, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    db = sqlite3.connect(f"{folder}/s{i:05d}.db")
    db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, x INTEGER, y REAL, s TEXT)")
    db.executemany("INSERT INTO t(x, y, s) VALUES (?, ?, ?)",
                   [(i * 100 + j, (i * 100 + j) / 7, f"row {j} of shard {i}") for j in range(100)])
    db.commit()
    db.close()
PY

echo "== (a) query --format csv of a $ROWS-row table" >&2
bench_compare "litectl query --format csv" "$LITECTL query $T/big.db --format csv 'SELECT * FROM customers' >/dev/null" \
              "sqlite3 -csv" "sqlite3 -csv -header $T/big.db 'SELECT * FROM customers' >/dev/null"

# hyperfine runs all of one command, then all of the other: on a shared machine a change of
# load in between skews the ratio. Alternate the two, and count CPU time as well as wall time.
L=$(printf %q "$LITECTL") DB=$(printf %q "$T/big.db")
bench_alternate "litectl query --format csv" "$L query $DB --format csv 'SELECT * FROM customers'" \
                "sqlite3 -csv" "sqlite3 -csv -header $DB 'SELECT * FROM customers'"

echo "== (b) --each over $FILES small databases" >&2
SQL="SELECT count(*), sum(x), sum(y) FROM t"
bench_compare "litectl query --each" "$LITECTL query --each '$T/shards/*.db' --format csv '$SQL' >/dev/null" \
              "sqlite3 shell loop" "for f in $T/shards/*.db; do sqlite3 -csv \"\$f\" \"SELECT '\$f', count(*), sum(x), sum(y) FROM t\"; done >/dev/null"

echo "== (c) peak memory, rows streamed to /dev/null" >&2
for n in 1000000 10000000; do
  python3 - "$LITECTL" "$n" <<'PY'
import resource, subprocess, sys
litectl, n = sys.argv[1], int(sys.argv[2])
sql = f"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {n}) SELECT i, i * 0.5, 'row ' || i FROM c"
subprocess.run([litectl, "query", "--format", "csv", sql], stdout=subprocess.DEVNULL, check=True)
print(f"litectl query of {n:,} rows: peak RSS {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.1f} MB")
PY
done
