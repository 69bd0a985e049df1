#!/usr/bin/env bash
# Self-test of the benchmark scaffold: generates a small database and a 1%-mutated copy in a temp
# folder and checks integrity, determinism (same seed => same dump) and that the mutation shows;
# then that bench_alternate times, prepares and fails as it says.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require python3 sqlite3 sqldiff
bench_tmpdir
cd "$BENCH_TMPDIR"

fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
gen() { python3 "$BENCH_GENERATE" "$@"; }
dump_hash() { sqlite3 "$1" .dump | sha256sum | cut -d' ' -f1; }

gen a.db --rows 1000 --seed 7
gen a2.db --rows 1000 --seed 7
gen other.db --rows 1000 --seed 8
gen --mutate 0.01 --from a.db m.db --seed 7
gen --mutate 0.01 --from a.db m2.db --seed 7
gen w.db --rows 1000 --journal wal --page-size 8192

for db in a.db m.db w.db; do
  [[ $(sqlite3 "$db" 'PRAGMA integrity_check') == ok ]] || fail "integrity_check of $db"
  [[ -z $(sqlite3 "$db" 'PRAGMA foreign_key_check') ]] || fail "foreign_key_check of $db"
done
[[ $(sqlite3 w.db 'PRAGMA journal_mode; PRAGMA page_size' | tr '\n' ' ') == "wal 8192 " ]] ||
  fail "--journal wal --page-size 8192 not applied"
[[ $(dump_hash a.db) == "$(dump_hash a2.db)" ]] || fail "same seed gave different content"
[[ $(dump_hash m.db) == "$(dump_hash m2.db)" ]] || fail "same mutation seed gave different content"
[[ $(dump_hash a.db) != "$(dump_hash other.db)" ]] || fail "different seeds gave the same content"
[[ -n $(sqldiff a.db m.db) ]] || fail "sqldiff sees no change in the mutated copy"
[[ $(sqlite3 a.db 'SELECT min(length(data)) > 4096 FROM attachments') == 1 ]] || fail "blobs not > 4 KB"
if gen a.db --rows 10 2>/dev/null; then fail "overwrote an existing file without --force"; fi

# bench_alternate: --prepare before every run (each command needs the file it makes), one line
# per round on stderr, the faster command found faster by about the right ratio, and a failing
# command fails the comparison.
out=$(BENCH_RUNS=2 bench_alternate --prepare "touch fresh" fast "rm fresh && sleep 0.02" slow "rm fresh && sleep 0.2" 2>alternate.err) ||
  fail "bench_alternate failed: $(cat alternate.err)"
[[ $out =~ ^fast:\ median.*\|\ slow:\ median.*\|\ fast\ is\ ([0-9.]+)x\ faster\;\ 2\ rounds\ alternated ]] ||
  fail "bench_alternate printed: $out"
ratio=${BASH_REMATCH[1]}
(( ${ratio%.*} >= 3 )) || fail "bench_alternate found fast only ${ratio}x faster than slow (sleeps of 0.02 s and 0.2 s)"
[[ $(grep -c '^round [12]/2: ' alternate.err) == 2 ]] || fail "bench_alternate did not print 2 timed rounds: $(cat alternate.err)"
if BENCH_RUNS=1 bench_alternate ok true broken false >/dev/null 2>&1; then fail "bench_alternate ignored a failing command"; fi

echo "smoke: ok"
