#!/usr/bin/env bash
# The tier's cache survives restarts, and its size does not slow the start:
#
#   start    a write-back bucket holds OBJECTS objects of SIZE, uploaded and still here (clean).
#            The server is killed (-9) and started again, then stopped cleanly and started
#            again: the time from exec to the first 200 of /health/ready each time (goal: 2 s or
#            less), beside the same server's start on an empty store.
#   reads    after each restart, every object downloaded with `aws s3 cp --recursive` (goal: no
#            request for an object reaches the upstream, counted in its access log, and no
#            download fails).
#
# The upstream is a second hots3 on the same machine.
#
# usage: bench/tier/restart.sh [BUILD_DIR]       (default build/release)
# env:   OBJECTS (10000) SIZE (8KiB: above the inline limit, so each has data on the device)
#        BENCH_TMPDIR (/var/tmp)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUILD=${1:-build/release}
HOTS3=$BUILD/src/hots3
LOADGEN=$BUILD/bench/hots3-loadgen
[ -x "$HOTS3" ] && [ -x "$LOADGEN" ] || { echo "build $HOTS3 and $LOADGEN first" >&2; exit 1; }
OBJECTS=${OBJECTS:-10000}
SIZE=${SIZE:-8KiB}
DEVICE_BYTES=$((2 * 1024 * 1024 * 1024))
need curl aws
bench_init tier-restart
export AWS_ACCESS_KEY_ID=$BENCH_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$BENCH_SECRET_KEY AWS_DEFAULT_REGION=us-east-1

ACCESS_LOG=1 start_tier_server up ""
aws --endpoint-url "$URL_up" s3api create-bucket --bucket team-ckpt > /dev/null
printf 'access_key = "%s"\nsecret_key = "%s"\n' "$BENCH_ACCESS_KEY" "$BENCH_SECRET_KEY" > "$WORK/golden.toml"
LOCAL_TOML="[[tier.upstream]]
name = \"golden\"
endpoint = \"$URL_up\"
credentials_file = \"$WORK/golden.toml\"
[[tier.bucket]]
bucket = \"ckpt\"
upstream = \"golden\"
upstream_bucket = \"team-ckpt\""

# launch_local: starts the local server on its store (new or kept); READY_MS is the time from
# exec to the first 200 of /health/ready.
launch_local() {
  rm -f "$WORK/local/port"
  local t0 now
  t0=$(date +%s.%N)
  start_tier_server local "$LOCAL_TOML"
  await_ready "$URL_local" "$PID_local" "$WORK/local/log"
  now=$(date +%s.%N)
  READY_MS=$(python3 -c "print(round(1000 * ($now - $t0)))")
}
# read_all: downloads every object; prints the reads of objects (GET, HEAD: not the bucket's
# start-up probes, nor the lines of uploads the upstream's log writes late) that reached the
# upstream meanwhile, and the downloads that failed or are missing.
read_all() {
  local before failed=0 got
  before=$(wc -l < "$WORK/up/access")
  rm -rf "$WORK/back" && mkdir -p "$WORK/back"
  aws --endpoint-url "$URL_local" s3 cp --recursive --quiet "s3://ckpt/objects/" "$WORK/back/" || failed=1
  got=$(find "$WORK/back" -type f | wc -l)
  echo "$(tail -n +$((before + 1)) "$WORK/up/access" | grep -cE '"method":"(GET|HEAD)","target":"/team-ckpt/') $((failed + OBJECTS - got))"
}

echo "tier restart: $OBJECTS objects of $SIZE cached; $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
launch_local
EMPTY_MS=$READY_MS
"$LOADGEN" --endpoint "$URL_local" --access-key "$BENCH_ACCESS_KEY" --secret-key "$BENCH_SECRET_KEY" \
  --bucket ckpt --prefix objects/ --workload get --size "$SIZE" --objects "$OBJECTS" --ops 1 > /dev/null 2>&1
"$HOTS3" tier flush --endpoint "$URL_local" --bucket ckpt --wait > /dev/null
STATE=$(curl -sS -I --aws-sigv4 "aws:amz:us-east-1:s3" --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$URL_local/ckpt/objects/obj-0000000" |
  tr -d '\r' | sed -n 's/^x-hots3-tier: //Ip')

MISSED=0
kill -9 "$PID_local"
wait "$PID_local" 2>/dev/null || true
launch_local
KILLED_MS=$READY_MS
read -r KILLED_UP KILLED_FAILED < <(read_all)
kill "$PID_local"
wait "$PID_local" 2>/dev/null || true
launch_local
STOPPED_MS=$READY_MS
read -r STOPPED_UP STOPPED_FAILED < <(read_all)

printf '%-46s %12s %12s\n' "" "hots3" "limit"
row_info "start-up, empty store: exec to ready, ms" "$EMPTY_MS" "ms"
row_max "start-up after kill -9, $OBJECTS cached, ms" "$KILLED_MS" 2000 "ms"
row_max "start-up after a stop, $OBJECTS cached, ms" "$STOPPED_MS" 2000 "ms"
row_max "object reads upstream, after kill -9" "$KILLED_UP" 0 "requests"
row_max "object reads upstream, after a stop" "$STOPPED_UP" 0 "requests"
row_max "downloads failed or missing, both restarts" "$((KILLED_FAILED + STOPPED_FAILED))" 0 "objects"
echo "a cached object before the restarts: x-hots3-tier: ${STATE:-?}"
[ "$MISSED" = 0 ] || echo "$MISSED goal(s) missed"
