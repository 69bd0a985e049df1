#!/usr/bin/env bash
# Benchmarks `litectl backup` on a generated ~1 GB database (BENCH_ROWS, default 3,000,000 rows)
# against cp + fsync (the physical limit), `sqlite3 .backup` and VACUUM INTO; with default
# verification; with --gzip-level 1 against gzip -1; then, while a writer commits every few
# milliseconds (WAL and rollback mode), whether each tool finishes and how long writers waited.
# Usage: scripts/bench/bench-backup.sh   (BENCH_RUNS=3 BENCH_ROWS=300000 for a quicker run)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require hyperfine sqlite3 python3 gzip
bench_tmpdir
LITECTL=$(bench_litectl)
T=$BENCH_TMPDIR
ROWS=${BENCH_ROWS:-3000000}

echo "== generating $ROWS rows" >&2
python3 "$BENCH_GENERATE" "$T/src.db" --rows "$ROWS" >&2
# Flush the generated file now: its writeback would otherwise compete with the first runs.
sync "$T/src.db"
size=$(stat -c %s "$T/src.db")
echo "source: $((size / 1000000)) MB, $(sqlite3 "$T/src.db" 'PRAGMA journal_mode')"
mkdir "$T/out"
clean="rm -f $T/out/* $T/out/.[!.]*"

echo "== no writer"
bench_compare "litectl backup --verify none" "$LITECTL backup --verify none $T/src.db $T/out/l.db" \
  "cp + fsync" "cp $T/src.db $T/out/c.db && sync $T/out/c.db" --prepare "$clean"
bench_compare "litectl backup --verify none" "$LITECTL backup --verify none $T/src.db $T/out/l.db" \
  "sqlite3 .backup" "sqlite3 $T/src.db '.backup $T/out/s.db'" --prepare "$clean"
bench_compare "litectl backup --vacuum --verify none" "$LITECTL backup --vacuum --verify none $T/src.db $T/out/l.db" \
  "sqlite3 VACUUM INTO" "sqlite3 $T/src.db \"VACUUM INTO '$T/out/v.db'\"" --prepare "$clean"
bench_compare "litectl backup (quick_check)" "$LITECTL backup $T/src.db $T/out/l.db" \
  "cp + fsync" "cp $T/src.db $T/out/c.db && sync $T/out/c.db" --prepare "$clean"
gz=$(bench_compare "litectl backup --gzip-level 1 --verify none" "$LITECTL backup --gzip-level 1 --verify none $T/src.db $T/out/l.db.gz" \
  "gzip -1 + fsync" "gzip -1 -c $T/src.db > $T/out/g.gz && sync $T/out/g.gz" --prepare "$clean")
echo "$gz"
# The issue's gzip target is a rate: database bytes per second of the median run.
echo "$gz" | python3 -c '
import re, sys
size = int(sys.argv[1])
times = [float(v) / (1000 if unit == "ms" else 1) for v, unit in re.findall(r"median ([0-9.]+) (m?s)", sys.stdin.read())]
print(f"gzip level 1, database bytes per second of the median: litectl {size / times[0] / 1e6:.0f} MB/s, gzip -1 {size / times[1] / 1e6:.0f} MB/s")
' "$size"

# A writer that commits a small transaction every ~3 ms and reports its commits and its longest
# wait for a commit (busy timeout 60 s) when the stop file appears.
cat >"$T/writer.py" <<'PY'
import sqlite3, sys, os, time
db, stop, report = sys.argv[1:4]
c = sqlite3.connect(db, timeout=60, isolation_level=None)
n, worst = 0, 0.0
while not os.path.exists(stop):
    t = time.monotonic()
    c.execute("BEGIN IMMEDIATE")
    c.execute("UPDATE customers SET balance = balance + 1 WHERE id = ?", (n % 1000 + 1,))
    c.execute("COMMIT")
    worst = max(worst, time.monotonic() - t); n += 1
    time.sleep(0.003)
open(report, "w").write(f"{n} commits, longest commit wait {worst:.2f} s")
PY

# under_writer MODE NAME CMD: runs CMD (limit 60 s) while the writer runs, prints the outcome.
under_writer() {
  local mode=$1 name=$2 cmd=$3 start end rc
  rm -f "$T/stop" "$T/report"
  python3 "$T/writer.py" "$T/w.db" "$T/stop" "$T/report" & local wpid=$!
  sleep 1
  start=$(date +%s.%N)
  set +e; timeout 60 bash -c "$cmd" >/dev/null 2>"$T/err"; rc=$?; set -e
  end=$(date +%s.%N)
  touch "$T/stop"; wait "$wpid"
  local verdict="finished in $(python3 -c "print(f'{$end - $start:.2f}')") s"
  ((rc == 124)) && verdict="did NOT finish within 60 s (killed)"
  ((rc != 0 && rc != 124)) && verdict="failed (exit $rc: $(head -c 200 "$T/err"))"
  echo "$mode writer | $name: $verdict | writer: $(cat "$T/report")"
  if [[ -f $T/out/l.db.json ]]; then
    echo "  litectl manifest: $(grep -h -E '"(strategy|restarts|writers_blocked_seconds)"' "$T/out/l.db.json" | tr -d '\n ')"
  fi
  eval "$clean"
}

for mode in wal delete; do
  echo "== writer committing every ~3 ms, $mode mode"
  cp "$T/src.db" "$T/w.db"
  sqlite3 "$T/w.db" "PRAGMA journal_mode=$mode" >/dev/null
  sync "$T/w.db"  # a live database is on disk; the copy's writeback would slow every tool
  under_writer "$mode" "litectl backup" "$LITECTL backup --timeout 60 $T/w.db $T/out/l.db"
  under_writer "$mode" "sqlite3 .backup" "sqlite3 $T/w.db '.timeout 60000' '.backup $T/out/s.db'"
  under_writer "$mode" "sqlite3 VACUUM INTO" "sqlite3 $T/w.db '.timeout 60000' \"VACUUM INTO '$T/out/v.db'\""
  rm -f "$T/w.db" "$T/w.db-wal" "$T/w.db-shm"
done
