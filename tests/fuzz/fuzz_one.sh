#!/usr/bin/env bash
# One fuzz harness: replays its regression inputs (every crash found so far, kept in
# tests/fuzz/regressions/<harness>/), then fuzzes for H3_FUZZ_SECONDS (default 30) from the seed
# corpus (tests/fuzz/seeds.py) and what earlier runs of this build directory found. A crash
# leaves its input in WORK/crashes/ and fails the test; copy it into regressions/<harness>/.
#
# usage: fuzz_one.sh BINARY HARNESS WORK
set -euo pipefail
binary=$1 harness=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
seconds=${H3_FUZZ_SECONDS:-30}
regressions=$here/regressions/$harness  # may not exist: no crash found yet
corpus=$work/corpus/$harness
mkdir -p "$corpus" "$work/crashes"
[ -d "$work/seeds/$harness" ] || python3 "$here/seeds.py" "$work/seeds"
mkdir -p "$work/seeds/$harness"

# Sanitizer reports end the run with an error; leaks too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

replayed=0
if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
  "$binary" -runs=0 "$regressions"/* >/dev/null 2>"$work/$harness.replay.log" || {
    cat "$work/$harness.replay.log" >&2
    echo "fuzz $harness: a regression input fails again" >&2
    exit 1
  }
  replayed=$(ls "$regressions" | wc -l)
fi

log=$work/$harness.log
status=0
"$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$work/crashes/$harness-" "$corpus" "$work/seeds/$harness" >/dev/null 2>"$log" || status=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
echo "fuzz $harness: ${runs:-0} runs in ${seconds} s, corpus $(ls "$corpus" | wc -l) inputs, $replayed regression inputs replayed"
if [ "$status" -ne 0 ]; then
  tail -60 "$log" >&2
  echo "fuzz $harness: FAILED (exit $status); the input is in $work/crashes/" >&2
  exit 1
fi
