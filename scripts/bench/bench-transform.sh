#!/usr/bin/env bash
# Benchmarks `litectl transform`: a column's type changed (TEXT → REAL, every value
# converted) on a 1M-row table with three indexes, against the same 12 steps run by
# hand in the sqlite3 shell (target: within 1.2x) and against `sqlite-utils transform`
# (target: faster). Each run starts from a fresh copy of the same database (not timed).
# litectl also compares the converted column with the old rows, runs foreign_key_check
# and quick_check of the table, and keeps sqlite_stat1; a fourth command times
# --compare-all (every kept column compared, not only the converted one).
# BENCH_RUNS (default 7) rounds, after one untimed round.
# BENCH_ROWS (default 1000000) sizes the table. Needs sqlite-utils (pip install sqlite-utils).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require sqlite3 python3 sqlite-utils
bench_tmpdir
LITECTL=$(bench_litectl)
rows=${BENCH_ROWS:-1000000}
base=$BENCH_TMPDIR/base.db
work=$BENCH_TMPDIR/work.db

python3 - "$base" "$rows" <<'EOF'
import random, sqlite3, sys
path, rows = sys.argv[1], int(sys.argv[2])
rnd = random.Random(13)
c = sqlite3.connect(path)
c.executescript("""
CREATE TABLE items (id INTEGER PRIMARY KEY, sku TEXT NOT NULL, name TEXT NOT NULL, price TEXT,
                    qty INTEGER NOT NULL DEFAULT 0, created TEXT NOT NULL);
""")
words = ["red", "blue", "large", "small", "steel", "oak", "linen", "glass", "café", "naïve"]
def row(i):
    return (i, "SKU-%08d" % rnd.randrange(10**8), " ".join(rnd.choice(words) for _ in range(3)) + " %d" % i,
            "%d.%02d" % (rnd.randrange(1000), rnd.randrange(100)), rnd.randrange(500),
            "2024-%02d-%02dT%02d:%02d:00Z" % (1 + rnd.randrange(12), 1 + rnd.randrange(28), rnd.randrange(24), rnd.randrange(60)))
with c:
    c.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)", (row(i) for i in range(1, rows + 1)))
c.executescript("""
CREATE INDEX items_sku ON items(sku);
CREATE INDEX items_name ON items(name);
CREATE INDEX items_created ON items(created);
""")
c.close()
EOF
echo "database: $rows rows, three indexes, $(du -h "$base" | cut -f1)" >&2

# The 12 steps of https://www.sqlite.org/lang_altertable.html#otheralter for this change, by hand.
cat >"$BENCH_TMPDIR/by-hand.sql" <<'EOF'
PRAGMA foreign_keys=OFF;
BEGIN;
CREATE TABLE items_new (id INTEGER PRIMARY KEY, sku TEXT NOT NULL, name TEXT NOT NULL, price REAL,
                        qty INTEGER NOT NULL DEFAULT 0, created TEXT NOT NULL);
INSERT INTO items_new (id, sku, name, price, qty, created) SELECT id, sku, name, price, qty, created FROM items;
DROP TABLE items;
ALTER TABLE items_new RENAME TO items;
CREATE INDEX items_sku ON items(sku);
CREATE INDEX items_name ON items(name);
CREATE INDEX items_created ON items(created);
PRAGMA foreign_key_check;
COMMIT;
EOF

# The three results agree: the same rows (the table's data hash) and three indexes.
for tool in litectl hand sqlite-utils; do
  cp "$base" "$work"
  case $tool in
    litectl) "$LITECTL" transform "$work" items --type price=REAL --allow-conversion ;;
    hand) sqlite3 "$work" <"$BENCH_TMPDIR/by-hand.sql" ;;
    sqlite-utils) sqlite-utils transform "$work" items --type price float ;;
  esac
  [[ $(sqlite3 "$work" 'PRAGMA integrity_check') == ok ]] || { echo "bench: $tool: integrity_check failed" >&2; exit 1; }
  "$LITECTL" hash --data-only --per-table "$work" | tail -n +2 >"$BENCH_TMPDIR/$tool.hash"
  sqlite3 "$work" "SELECT count(*) FROM sqlite_schema WHERE type = 'index'" >>"$BENCH_TMPDIR/$tool.hash"
done
cmp -s "$BENCH_TMPDIR/litectl.hash" "$BENCH_TMPDIR/hand.hash" || { echo "bench: litectl and the shell disagree" >&2; exit 1; }
cmp -s "$BENCH_TMPDIR/litectl.hash" "$BENCH_TMPDIR/sqlite-utils.hash" || { echo "bench: litectl and sqlite-utils disagree" >&2; exit 1; }

# The commands alternate, round after round (bench_alternate): each run is seconds long, and on a
# shared machine a change of load would otherwise fall on one tool's runs only. The fresh copy is
# made and flushed before each run, untimed.
# Paths quoted for the shell that runs each command.
L=$(printf %q "$LITECTL") W=$(printf %q "$work") B=$(printf %q "$base") H=$(printf %q "$BENCH_TMPDIR/by-hand.sql")
bench_alternate --prepare "cp $B $W && sync $W" \
  "litectl transform" "$L transform $W items --type price=REAL --allow-conversion" \
  "12 steps in sqlite3" "sqlite3 $W < $H" \
  "sqlite-utils transform" "sqlite-utils transform $W items --type price float" \
  "litectl transform --compare-all" "$L transform $W items --type price=REAL --allow-conversion --compare-all"
