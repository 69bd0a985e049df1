#!/usr/bin/env bash
# Benchmarks `litectl diff` against sqldiff on generated pairs: 1% of rows
# changed (a copy of A, then changed: the pair shares history, as a backup and
# its source do) and identical copies, at 100k and 1M rows (BENCH_DIFF_ROWS to
# change the sizes), with and without the shared-pages shortcut, plus peak
# memory (/usr/bin/time -v) of each tool.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require hyperfine sqlite3 sqldiff python3
[[ -x /usr/bin/time ]] || { echo "bench: /usr/bin/time not found; install it with: apt-get install time" >&2; exit 2; }
bench_tmpdir
LITECTL=$(bench_litectl)

peak() {  # peak RSS in MB of a command
  /usr/bin/time -v "$@" >/dev/null 2>"$BENCH_TMPDIR/time.txt" || true
  awk -F': ' '/Maximum resident/ {printf "%.1f MB", $2 / 1024}' "$BENCH_TMPDIR/time.txt"
}

for rows in ${BENCH_DIFF_ROWS:-100000 1000000}; do
  a="$BENCH_TMPDIR/a-$rows.db" b="$BENCH_TMPDIR/b-$rows.db" c="$BENCH_TMPDIR/c-$rows.db"
  python3 "$BENCH_GENERATE" "$a" --rows "$rows"
  python3 "$BENCH_GENERATE" --mutate 0.01 --from "$a" "$b"
  sqlite3 "$a" ".backup '$c'"
  echo "== $rows rows, 1% changed ($(du -m "$a" | cut -f1) MB each)"
  # litectl diff exits 1 when the databases differ: -i lets hyperfine accept it.
  bench_compare "litectl diff --format sql" "$LITECTL diff --format sql $a $b >/dev/null" \
                "sqldiff" "sqldiff $a $b >/dev/null" -i
  bench_compare "litectl diff --summary" "$LITECTL diff --summary $a $b >/dev/null" \
                "sqldiff --summary" "sqldiff --summary $a $b >/dev/null" -i
  # Without the shared-pages shortcut: every row of both sides read and compared
  # (what a pair that shares no history costs).
  bench_compare "litectl diff --full-scan --format sql" "$LITECTL diff --full-scan --format sql $a $b >/dev/null" \
                "sqldiff" "sqldiff $a $b >/dev/null" -i
  echo "== $rows rows, identical copies"
  bench_compare "litectl diff --format sql" "$LITECTL diff --format sql $a $c >/dev/null" \
                "sqldiff" "sqldiff $a $c >/dev/null" -i
  echo "peak memory, 1% changed: litectl diff --format sql $(peak "$LITECTL" diff --format sql "$a" "$b")" \
       "| sqldiff $(peak sqldiff "$a" "$b")"
done
