#!/usr/bin/env bash
# Benchmarks `litectl dump`, `load` and `vacuum` side by side with the sqlite3 shell on one
# generated database (BENCH_ROWS rows, default 3000000: about 1 GB):
#   dump          litectl dump DB > file      vs  sqlite3 DB .dump > file          (target: not slower)
#   load          litectl load NEW FILE       vs  sqlite3 NEW < FILE (the same script)
#   vacuum        litectl vacuum COPY         vs  sqlite3 COPY VACUUM              (a copy with rows deleted)
#   vacuum into   litectl vacuum DB --into F  vs  sqlite3 DB "VACUUM INTO 'F'"
# plus the peak resident memory of both dumps (GNU time), and a check that the loaded
# database hashes as the original. BENCH_DB=path reuses a database; BENCH_PARTS (default
# "dump load vacuum") picks the comparisons to run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require hyperfine sqlite3 python3
bench_tmpdir
LITECTL=$(bench_litectl)
T=$BENCH_TMPDIR
export BENCH_RUNS=${BENCH_RUNS:-3}
parts=" ${BENCH_PARTS:-dump load vacuum} "

db=${BENCH_DB:-}
if [[ -z $db ]]; then
  db=$T/big.db
  python3 "$BENCH_GENERATE" "$db" --rows "${BENCH_ROWS:-3000000}" >&2
fi
echo "database: $db ($(du -h "$db" | cut -f1))" >&2

# Peak memory of one dump each (the dumps are kept for the load comparison).
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
rss_litectl=$(peak sh -c "$LITECTL dump '$db' > '$T/litectl.sql'")
rss_shell=$(peak sh -c "sqlite3 '$db' .dump > '$T/shell.sql'")
echo "dump size: litectl $(du -h "$T/litectl.sql" | cut -f1), sqlite3 .dump $(du -h "$T/shell.sql" | cut -f1)"
echo "dump peak RSS: litectl $((rss_litectl / 1024)) MiB, sqlite3 .dump $((rss_shell / 1024)) MiB"

if [[ $parts == *" dump "* ]]; then
  bench_compare "litectl dump" "$LITECTL dump $db > $T/out-a.sql" \
    "sqlite3 .dump" "sqlite3 $db .dump > $T/out-b.sql"
fi

if [[ $parts == *" load "* ]]; then
  bench_compare "litectl load" "$LITECTL load $T/load-a.db $T/litectl.sql" \
    "sqlite3 < dump" "sqlite3 $T/load-b.db < $T/litectl.sql" \
    --prepare "rm -f $T/load-a.db $T/load-b.db"
  rss_load=$(peak "$LITECTL" load "$T/check.db" "$T/litectl.sql")
  echo "load peak RSS: litectl $((rss_load / 1024)) MiB"
  a=$("$LITECTL" hash "$db" | cut -d' ' -f1)
  b=$("$LITECTL" hash "$T/check.db" | cut -d' ' -f1)
  [[ $a == "$b" ]] && echo "round trip: dump | load hashes as the original" || { echo "round trip: HASH DIFFERS" >&2; exit 1; }
fi
rm -f "$T"/out-*.sql "$T"/load-*.db "$T/check.db" "$T/shell.sql" "$T/litectl.sql"

[[ $parts == *" vacuum "* ]] || exit 0

frag=$T/frag.db
cp "$db" "$frag"
# Free pages (the newer half of events) and half-empty pages (every third order line).
sqlite3 "$frag" "DELETE FROM events WHERE rowid > (SELECT max(rowid) / 2 FROM events); DELETE FROM order_items WHERE line % 3 = 0;"
echo "fragmented copy: $(du -h "$frag" | cut -f1), $(sqlite3 "$frag" 'PRAGMA freelist_count') free pages" >&2
bench_compare "litectl vacuum" "$LITECTL vacuum -q $T/work-a.db" \
  "sqlite3 VACUUM" "sqlite3 $T/work-b.db VACUUM" \
  --prepare "cp $frag $T/work-a.db; cp $frag $T/work-b.db; sync"
bench_compare "litectl vacuum --into" "$LITECTL vacuum -q $frag --into $T/into-a.db" \
  "sqlite3 VACUUM INTO" "sqlite3 $frag \"VACUUM INTO '$T/into-b.db'\"" \
  --prepare "rm -f $T/into-a.db $T/into-b.db"
