# Bash helpers sourced by the per-capability benchmark scripts (scripts/bench/bench-*.sh):
# temp folders, a release build of litectl, and side-by-side hyperfine comparisons.
# Usage: source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_DIR="$BENCH_ROOT/scripts/bench"
BENCH_GENERATE="$BENCH_DIR/generate.py"

# bench_tmpdir: create a temp folder under ${BENCH_TMP:-/tmp} (once), store it in $BENCH_TMPDIR and
# remove it on exit. Call it directly (not as $(bench_tmpdir)): the trap must live in the calling shell.
bench_tmpdir() {
  if [[ $BASHPID != "$$" ]]; then
    echo "bench_tmpdir: call it directly, not in a subshell; then use \$BENCH_TMPDIR" >&2
    return 1
  fi
  [[ -n ${BENCH_TMPDIR:-} && -d $BENCH_TMPDIR ]] && return  # one folder per script
  BENCH_TMPDIR=$(mktemp -d "${BENCH_TMP:-/tmp}/litectl-bench.XXXXXX") || exit 1
  trap 'rm -rf "$BENCH_TMPDIR"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# bench_litectl: build litectl in release mode as scripts/install does (the Swift runtime linked
# in: what users run), build log on stderr, and print the binary's path.
# Set LITECTL=/path/to/litectl to skip the build.
bench_litectl() {
  if [[ -n ${LITECTL:-} ]]; then echo "$LITECTL"; return; fi
  (cd "$BENCH_ROOT" && swift build -c release --product litectl --static-swift-stdlib >&2) || return
  echo "$BENCH_ROOT/.build/release/litectl"
}

# bench_compare NAME CMD NAME2 CMD2 [hyperfine args, e.g. --prepare 'rm -f out.db']
# Runs both commands side by side in one hyperfine session, then prints one summary line with the
# median times and the ratio CMD2/CMD (the first command is litectl, the second its peer).
bench_compare() {
  local name=$1 cmd=$2 name2=$3 cmd2=$4 json rc
  shift 4
  json=$(mktemp "${BENCH_TMPDIR:-${BENCH_TMP:-/tmp}}/hyperfine.XXXXXX.json") || return
  hyperfine --warmup 1 --runs "${BENCH_RUNS:-5}" --export-json "$json" "$@" \
    --command-name "$name" "$cmd" --command-name "$name2" "$cmd2" >&2
  rc=$?
  if ((rc == 0)); then
    python3 - "$json" <<'EOF'
import json, statistics, sys
(a, b) = json.load(open(sys.argv[1]))["results"]
ma, mb = statistics.median(a["times"]), statistics.median(b["times"])
fmt = lambda t: f"{t:.2f} s" if t >= 0.1 else f"{t * 1000:.1f} ms"
verdict = f"{mb / ma:.2f}x faster" if mb >= ma else f"{ma / mb:.2f}x slower"
print(f"{a['command']}: median {fmt(ma)} | {b['command']}: median {fmt(mb)} | {a['command']} is {verdict}")
EOF
    rc=$?
  fi
  rm -f "$json"
  return "$rc"
}

# bench_alternate [--prepare CMD] NAME CMD NAME2 CMD2 [NAME3 CMD3 ...]
# Runs the commands in alternation (alternate.py): one untimed round, then ${BENCH_RUNS:-7} rounds,
# each running every command once in a shuffled order, --prepare untimed before each run. Prints one
# line per command after the first: median wall and CPU times, the ratio to the first command, and
# the range of the per-round ratios. On a shared machine, prefer it to bench_compare for commands of
# seconds: a change of load falls on every command alike.
bench_alternate() {
  python3 "$BENCH_DIR/alternate.py" --rounds "${BENCH_RUNS:-7}" "$@"
}

# bench_require CMD...: exit 2 naming the Debian package for each command that is missing.
bench_require() {
  local cmd pkg missing=0
  for cmd in "$@"; do
    command -v "$cmd" >/dev/null && continue
    case $cmd in
      sqldiff | sqlite3_analyzer) pkg=sqlite3-tools ;;
      *) pkg=$cmd ;;
    esac
    echo "bench: '$cmd' not found; install it with: apt-get install $pkg" >&2
    missing=1
  done
  ((missing == 0)) || exit 2
}
