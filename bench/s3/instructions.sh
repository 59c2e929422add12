#!/usr/bin/env bash
# User-space instructions per small request of one hots3 binary, counted by callgrind: a figure
# a shared machine does not move (CPU times move by about 10% from one run to the next there), for
# judging a change to the request path by its old and new binaries.
#
# hots3 runs under valgrind (one worker); the generator prepares OBJECTS 4 KiB objects, warms up,
# and only then is counting switched on, for OPS requests of WORKLOAD at 8 connections.
# Valgrind's CPU has no SHA extensions: OpenSSL's SHA-256 runs its plain code there, so hashing's
# share reads several times what it is on the machine.
#
# usage: bench/s3/instructions.sh [BINARY]   (default build/release/src/hots3)
# env:   WORKLOAD (head; get, put...) OPS (5000) OBJECTS (200) BENCH_TMPDIR (/var/tmp)
#        LOADGEN (build/release/bench/hots3-loadgen)
#        KEEP (a path: the callgrind output is copied there, for callgrind_annotate)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
HOTS3_BIN=${1:-build/release/src/hots3}
LOADGEN=${LOADGEN:-build/release/bench/hots3-loadgen}
[ -x "$HOTS3_BIN" ] && [ -x "$LOADGEN" ] || { echo "build $HOTS3_BIN and $LOADGEN first" >&2; exit 1; }
need valgrind callgrind_control callgrind_annotate
WORKLOAD=${WORKLOAD:-head}
OPS=${OPS:-5000}
OBJECTS=${OBJECTS:-200}
bench_init instructions
hots3_config 1 '[storage]
device_size = "8GiB"
cache_size = "1GiB"'
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/callgrind.out" \
  "$HOTS3_BIN" serve --config "$WORK/hots3/hots3.toml" --data "$WORK/hots3/data" \
  --listen 127.0.0.1:0 --port-file "$WORK/hots3/port" 2> "$WORK/valgrind.log" &
VALGRIND_PID=$!
PIDS+=("$VALGRIND_PID")
for _ in $(seq 600); do [ -s "$WORK/hots3/port" ] && break; sleep 0.1; done
[ -s "$WORK/hots3/port" ] || { echo "hots3 did not start under valgrind: $(cat "$WORK/valgrind.log")" >&2; exit 1; }
gen() {
  "$LOADGEN" --endpoint "http://127.0.0.1:$(cat "$WORK/hots3/port")" --access-key "$BENCH_ACCESS_KEY" \
    --secret-key "$BENCH_SECRET_KEY" --bucket small --prefix s/ --size 4KiB --objects "$OBJECTS" "$@" > /dev/null
}
gen --workload head --ops 1 -c 4                                  # prepares the objects
gen --workload "$WORKLOAD" --no-prepare -c 8 --ops 500            # warms the caches up
callgrind_control -i on "$VALGRIND_PID" > /dev/null 2>&1
gen --workload "$WORKLOAD" --no-prepare -c 8 --ops "$OPS" --duration 3600s --json "$WORK/measured.json"
callgrind_control -i off "$VALGRIND_PID" > /dev/null 2>&1
kill "$VALGRIND_PID"
wait "$VALGRIND_PID" || true
[ -n "${KEEP:-}" ] && cp "$WORK/callgrind.out" "$KEEP"
# (Divided by the requests the generator made, errors refused: a request refused early costs less.)
DONE=$(python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
op = list(j["ops"].values())[0]
if op.get("errors"): sys.exit("%d requests failed" % op["errors"])
print(op["ops"])' "$WORK/measured.json")
callgrind_annotate "$WORK/callgrind.out" 2>/dev/null | awk -v ops="$DONE" -v w="$WORKLOAD" \
  '/PROGRAM TOTALS/ { gsub(",", "", $1); printf "%.0f user-space instructions per %s (%d requests)\n", $1 / ops, w, ops }'
