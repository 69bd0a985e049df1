#!/usr/bin/env bash
# Benchmarks `litectl diff` against sqldiff on generated pairs, 1% of rows
# changed: a pair that shares history (B is a copy of A, then changed, as a
# backup and its source are) and a pair that shares no pages (that B passed
# through VACUUM INTO: same rows, other pages, as a restored or VACUUMed copy),
# plus identical files of each kind (a .backup copy; A passed through VACUUM
# INTO). For each: `--format sql` and `--summary`, medians of BENCH_RUNS (3)
# runs with their CPU time, the ratio to sqldiff with each target marked met
# or not met, and peak memory (/usr/bin/time -f %M). BENCH_ROWS sets the sizes
# (default 1000000; "1000000 10000000" adds 10M rows, which takes long).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require hyperfine sqlite3 sqldiff python3
[[ -x /usr/bin/time ]] || { echo "bench: /usr/bin/time not found; install it with: apt-get install time" >&2; exit 2; }
bench_tmpdir
LITECTL=$(bench_litectl)
RUNS=${BENCH_RUNS:-3}
echo "cores: $(nproc), load average: $(cut -d' ' -f1-3 /proc/loadavg), runs per command: $RUNS (medians)"

peak() {  # peak RSS in MB of a command
  /usr/bin/time -f %M "$@" >/dev/null 2>"$BENCH_TMPDIR/time.txt" || true
  awk 'END {printf "%.1f", $1 / 1024}' "$BENCH_TMPDIR/time.txt"
}

# compare LABEL TARGET CMD CMD2: litectl's CMD beside sqldiff's CMD2 in one
# hyperfine session; prints medians, CPU (user + system, mean) and the ratio,
# marked against TARGET (the least speed-up wanted; "-" for none).
compare() {
  local label=$1 target=$2 cmd=$3 cmd2=$4 json
  json=$(mktemp "$BENCH_TMPDIR/hyperfine.XXXXXX.json")
  # Both tools exit 1 when the databases differ: -i lets hyperfine accept it.
  hyperfine -i --warmup 1 --runs "$RUNS" --export-json "$json" \
    --command-name litectl "$cmd" --command-name sqldiff "$cmd2" >&2
  python3 - "$json" "$label" "$target" <<'EOF'
import json, statistics, sys
(a, b), label, target = json.load(open(sys.argv[1]))["results"], sys.argv[2], sys.argv[3]
ma, mb = statistics.median(a["times"]), statistics.median(b["times"])
fmt = lambda t: f"{t:.2f} s" if t >= 0.1 else f"{t * 1000:.1f} ms"
ratio = mb / ma
verdict = f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
mark = "" if target == "-" else f" [target >= {target}x: {'met' if ratio >= float(target) else 'NOT met'}]"
print(f"{label}: litectl {fmt(ma)} (CPU {fmt(a['user'] + a['system'])}) | sqldiff {fmt(mb)} "
      f"(CPU {fmt(b['user'] + b['system'])}) | litectl {verdict}{mark}")
EOF
  rm -f "$json"
}

for rows in ${BENCH_ROWS:-1000000}; do
  a="$BENCH_TMPDIR/a-$rows.db" b="$BENCH_TMPDIR/b-$rows.db" c="$BENCH_TMPDIR/c-$rows.db"
  bv="$BENCH_TMPDIR/bv-$rows.db" av="$BENCH_TMPDIR/av-$rows.db"
  python3 "$BENCH_GENERATE" "$a" --rows "$rows"
  python3 "$BENCH_GENERATE" --mutate 0.01 --from "$a" "$b"
  sqlite3 "$a" ".backup '$c'"
  sqlite3 "$b" "VACUUM INTO '$bv'"
  sqlite3 "$a" "VACUUM INTO '$av'"
  same=$(python3 "$BENCH_DIR/pagediff.py" "$a" "$bv" | python3 -c "import json, sys; d = json.load(sys.stdin)
print(d['pages_new'] - d['pages_changed'], 'of', d['pages_new'], 'pages equal to the page of A at the same number')")
  echo "== $rows rows ($(du -m "$a" | cut -f1) MB each)"
  echo "no-shared-pages B: $same"
  echo "-- shared history, 1% changed"
  compare "--format sql" 4.7 "$LITECTL diff --format sql $a $b >/dev/null" "sqldiff $a $b >/dev/null"
  compare "--summary" - "$LITECTL diff --summary $a $b >/dev/null" "sqldiff --summary $a $b >/dev/null"
  echo "-- shared history, identical (.backup copy)"
  compare "--format sql" - "$LITECTL diff --format sql $a $c >/dev/null" "sqldiff $a $c >/dev/null"
  compare "--summary" - "$LITECTL diff --summary $a $c >/dev/null" "sqldiff --summary $a $c >/dev/null"
  echo "-- no shared pages (B through VACUUM INTO), 1% changed"
  compare "--format sql" 3 "$LITECTL diff --format sql $a $bv >/dev/null" "sqldiff $a $bv >/dev/null"
  compare "--summary" 10 "$LITECTL diff --summary $a $bv >/dev/null" "sqldiff --summary $a $bv >/dev/null"
  echo "-- no shared pages, identical (A through VACUUM INTO)"
  compare "--format sql" - "$LITECTL diff --format sql $a $av >/dev/null" "sqldiff $a $av >/dev/null"
  compare "--summary" - "$LITECTL diff --summary $a $av >/dev/null" "sqldiff --summary $a $av >/dev/null"
  sql=$(peak "$LITECTL" diff --format sql "$a" "$bv") summary=$(peak "$LITECTL" diff --summary "$a" "$bv")
  worst=$(python3 -c "print(max($sql, $summary))")
  echo "peak memory, no shared pages: litectl --format sql $sql MB, --summary $summary MB," \
       "sqldiff $(peak sqldiff "$a" "$bv") MB [target <= 32 MB: $(python3 -c "print('met' if $worst <= 32 else 'NOT met')")]"
  echo "peak memory, shared history: litectl --format sql $(peak "$LITECTL" diff --format sql "$a" "$b") MB," \
       "sqldiff $(peak sqldiff "$a" "$b") MB"
done
