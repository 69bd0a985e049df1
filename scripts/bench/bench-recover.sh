#!/usr/bin/env bash
# Benchmarks `litectl recover` on a sound generated database (BENCH_SIZE_MB, default 300; the
# issue's figure is BENCH_SIZE_MB=1000) against `sqlite3 DB "VACUUM INTO ..."`, the floor for
# rewriting every row into a new file (target: within 2x of it), and, when the sqlite3 shell
# with sqlite_dbpage that scripts/build-sqlite-shell caches exists, against its `.recover`
# piped into a new database. Medians of BENCH_RUNS (default 3) runs measured side by side in
# one hyperfine session, the ratios to litectl, and each tool's peak memory.
# recover reads every page itself; SQLite copies the tables it proves sound record by record
# with their indexes (as VACUUM INTO does) on a second thread while it reads, the others are
# salvaged row by row (on a sound database: none); then it fsyncs. VACUUM INTO does not fsync.
# Then the damaged-file case: a copy of a small database (BENCH_DAMAGED_SOURCE, default the real
# corpus's 1 MB Chinook) with 3 pages garbled from a random offset to their end (BENCH_DAMAGE_SEED
# picks them),
# recovered by litectl and by the shell's `.recover`, run in alternation (median wall and CPU
# times; target: under 0.2 s).
# Usage: scripts/bench/bench-recover.sh   (BENCH_SIZE_MB=50 for a quick run; BENCH_DB=path
# to time an existing database instead of a generated one; BENCH_SOUND=0 times only the damaged case)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_require hyperfine sqlite3 python3
bench_tmpdir
LITECTL=$(bench_litectl)
T=$BENCH_TMPDIR

# The shell of the system's SQLite version built with sqlite_dbpage, if it was built (the
# recover tests build it; this script does not: that needs the network and minutes).
shell=${LITECTL_SQLITE_SHELL:-}
if [[ -z $shell ]]; then
  version=$(dpkg-query -W -f='${Version}' libsqlite3-0 2>/dev/null || true)
  shell=${LITECTL_SQLITE_SHELL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/litectl/sqlite-shell}/$version/sqlite3
fi
[[ -x $shell ]] || { echo "no sqlite3 shell with sqlite_dbpage ($shell): .recover is left out; scripts/build-sqlite-shell builds it" >&2; shell=; }

if [[ ${BENCH_SOUND:-1} != 0 ]]; then
db=${BENCH_DB:-}
if [[ -z $db ]]; then
  size_mb=${BENCH_SIZE_MB:-300}
  # generate.py makes about 340 MB per million rows.
  rows=$((size_mb * 1000000 / 340))
  echo "== generating $rows rows (~$size_mb MB)" >&2
  db=$T/src.db
  python3 "$BENCH_GENERATE" "$db" --rows "$rows" >&2
  # Flush the generated file now: its writeback would otherwise compete with the first runs.
  sync "$db"
fi
echo "source: $(($(stat -c %s "$db") / 1000000)) MB, $(sqlite3 "$db" 'PRAGMA page_count') pages"

mkdir "$T/out"
clean="rm -f $T/out/* $T/out/.[!.]*"

# The recovered copy must be the same database, and sound, before it is timed.
"$LITECTL" recover --json "$db" "$T/out/r.db" | python3 -c '
import json, sys
tables = json.load(sys.stdin)["tables"]
copied = [t["name"] for t in tables if t["tree_copied"]]
names = ", ".join(copied)
print(f"tables copied b-tree by b-tree: {len(copied)} of {len(tables)} ({names})")'
[[ $("$LITECTL" hash "$db" | cut -d' ' -f1) == $("$LITECTL" hash "$T/out/r.db" | cut -d' ' -f1) ]] \
  || { echo "bench-recover: the recovered copy differs from the source" >&2; exit 1; }
[[ $(sqlite3 "$T/out/r.db" 'PRAGMA integrity_check') == ok ]] \
  || { echo "bench-recover: the recovered copy fails integrity_check" >&2; exit 1; }
eval "$clean"

names=("litectl recover" "sqlite3 VACUUM INTO")
commands=("$LITECTL recover $db $T/out/r.db" "sqlite3 $db \"VACUUM INTO '$T/out/v.db'\"")
if [[ -n $shell ]]; then
  names+=("sqlite3 .recover | sqlite3")
  commands+=("$shell $db .recover | $shell $T/out/s.db")
fi
args=()
for i in "${!names[@]}"; do args+=(--command-name "${names[$i]}" "${commands[$i]}"); done

json=$T/hyperfine.json
hyperfine --warmup "${BENCH_WARMUP:-1}" --runs "${BENCH_RUNS:-3}" --export-json "$json" \
  --prepare "$clean" "${args[@]}" >&2
python3 - "$json" <<'EOF'
import json, statistics, sys
results = json.load(open(sys.argv[1]))["results"]
fmt = lambda t: f"{t:.2f} s" if t >= 0.1 else f"{t * 1000:.1f} ms"
base = statistics.median(results[0]["times"])
print(f"{results[0]['command']}: median {fmt(base)}")
for r in results[1:]:
    m = statistics.median(r["times"])
    verdict = f"{m / base:.2f}x faster" if m >= base else f"{base / m:.2f}x slower"
    print(f"{r['command']}: median {fmt(m)} | litectl recover is {verdict} (time ratio litectl/peer {base / m:.2f})")
EOF

# Peak resident memory of one run of each (KiB from GNU time, printed in MiB).
if [[ -x /usr/bin/time ]]; then
  line="peak memory:"
  for i in "${!names[@]}"; do
    eval "$clean"
    kib=$(/usr/bin/time -f %M -o "$T/time.txt" bash -c "${commands[$i]}" >/dev/null 2>&1; tail -n 1 "$T/time.txt")
    line+=" ${names[$i]} $((kib / 1024)) MiB;"
  done
  echo "${line%;}"
fi
fi

# The damaged-file case (docs/recover.md, "Damaged files"): 3 pages of a small database damaged.
damaged_source=${BENCH_DAMAGED_SOURCE:-$BENCH_ROOT/../shared/corpus/real/Chinook_Sqlite.sqlite}
if [[ ! -f $damaged_source ]]; then
  echo "no $damaged_source: the damaged-file case is left out (BENCH_DAMAGED_SOURCE=path)" >&2
  exit 0
fi
python3 - "$damaged_source" "$T/damaged.db" "${BENCH_DAMAGE_SEED:-1}" <<'EOF'
import random, sys
data = bytearray(open(sys.argv[1], "rb").read())
page_size = 65536 if data[16:18] == b"\x00\x01" else data[16] << 8 | data[17]
pages = len(data) // page_size
rng = random.Random(int(sys.argv[3]))
chosen = rng.sample(range(2, pages + 1), min(3, pages - 1))
# Each page garbled from a random offset to its end: its header stands, its cells are noise
# (cells whose records claim hundreds of fields, payload sizes no page could hold).
for p in chosen:
    start = rng.randrange(page_size)
    for i in range(start, page_size):
        data[(p - 1) * page_size + i] = rng.randrange(256)
open(sys.argv[2], "wb").write(data)
print(f"damaged copy of {sys.argv[1].rsplit('/', 1)[-1]}: {len(data) // 1000} KB, {pages} pages, "
      f"pages {sorted(chosen)} garbled from a random offset to their end")
EOF
mkdir "$T/dout"
dclean="rm -f $T/dout/*"
# recover exits 1 on a damaged file (damage found and reported): that is its success here.
dcommands=("litectl recover (damaged)" "$LITECTL recover $T/damaged.db $T/dout/r.db || [[ \$? == 1 ]]")
if [[ -n $shell ]]; then
  dcommands+=("sqlite3 .recover | sqlite3 (damaged)" "$shell $T/damaged.db .recover | $shell $T/dout/s.db >/dev/null 2>&1")
  BENCH_RUNS=${BENCH_RUNS:-7} bench_alternate --prepare "$dclean" "${dcommands[@]}"
else
  eval "$dclean"
  /usr/bin/time -f "litectl recover (damaged): %e s wall, %U s user, %S s system" bash -c "${dcommands[1]}"
fi
