#!/usr/bin/env bash
# Reads of the tier that need nothing from the upstream, against untiered ones, and the same
# while the upstream is down, in one run:
#
#   hits    GETs of SMALL (4 KiB) and LARGE (1 MiB) objects of a write-back bucket, uploaded and
#           still here (hits: no upstream request), against the same GETs of an untiered bucket
#           of the same server, for DURATION a run:
#           - over one connection: p50 and p99, what one read costs in time with nothing queued
#             before it (goal: within 5% of the untiered ones);
#           - over C connections: the server's CPU per GET (goal: within 5%), req/s, and p50 and
#             p99 shown. Generator and servers share the cores, and which connections wait on
#             which is decided by the scheduler: p50 at C flips between runs of the same bucket
#             (0.045 and 0.208 ms in two runs of the untiered one), so there it is shown only.
#           Side-run plain, tiered, tiered, plain, ROUNDS times, each run after 2 s of its own
#           warm-up; each side's figure is the median of its runs.
#   outage  the upstream stopped (SIGSTOP: it takes connections and never answers, the worst
#           case): the hits again, against the untiered reads side-run with them (goal: p99
#           over one connection within 5%); the time a miss (a GET of an evicted object) takes to
#           fail (goal: 10 s or less), and the median of the next 10 misses, answered without
#           asking the silent upstream (goal: 50 ms or less). Both answers must be 503.
#
# The upstream is a second hots3 on the same machine; the client is hots3's own load generator
# (and curl for the misses).
#
# usage: bench/tier/hits.sh [BUILD_DIR]       (default build/release)
# env:   C (16) DURATION (10s) ROUNDS (2) OBJECTS (200) BENCH_TMPDIR (/var/tmp)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUILD=${1:-build/release}
HOTS3=$BUILD/src/hots3
LOADGEN=$BUILD/bench/hots3-loadgen
[ -x "$HOTS3" ] && [ -x "$LOADGEN" ] || { echo "build $HOTS3 and $LOADGEN first" >&2; exit 1; }
C=${C:-16}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
OBJECTS=${OBJECTS:-200}
DEVICE_BYTES=$((4 * 1024 * 1024 * 1024))
need curl
bench_init tier-hits
export AWS_ACCESS_KEY_ID=$BENCH_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$BENCH_SECRET_KEY  # (hots3 tier)

# signed CURL-ARGS...: curl with the bench user's SigV4 (S3 asks for the payload's hash header).
signed() {
  curl -sS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}
start_tier_server up ""
signed -f -o /dev/null -X PUT "$URL_up/team-ckpt"
printf 'access_key = "%s"\nsecret_key = "%s"\n' "$BENCH_ACCESS_KEY" "$BENCH_SECRET_KEY" > "$WORK/golden.toml"
start_tier_server local "[[tier.upstream]]
name = \"golden\"
endpoint = \"$URL_up\"
credentials_file = \"$WORK/golden.toml\"
[[tier.bucket]]
bucket = \"ckpt\"
upstream = \"golden\"
upstream_bucket = \"team-ckpt\"
upstream_prefix = \"rack/\""
# The upstream is stopped, not ended, during the outage: let it go on first whatever happens,
# or the cleanup's kill would wait on it.
trap 'kill -CONT "$PID_up" 2>/dev/null || true; bench_cleanup' EXIT

lg() { "$LOADGEN" --endpoint "$URL_local" --access-key "$BENCH_ACCESS_KEY" --secret-key "$BENCH_SECRET_KEY" "$@"; }
signed -f -o /dev/null -X PUT "$URL_local/plain"
echo "tier hits: GETs of 4 KiB and 1 MiB objects x$C for $DURATION, $ROUNDS rounds; $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"

# The objects: OBJECTS of each size in each bucket (the loadgen's own keys), the tiered ones
# uploaded (clean); and one more to be a miss, uploaded and evicted.
for b in plain ckpt; do
  for size in 4KiB 1MiB; do
    lg --bucket "$b" --prefix "$size/" --workload get --size "$size" --objects "$OBJECTS" --ops 1 \
      > /dev/null 2>&1
  done
done
head -c $((1024 * 1024)) /dev/urandom > "$WORK/miss.bin"
signed -f -o /dev/null -T "$WORK/miss.bin" "$URL_local/ckpt/cold/miss"
"$HOTS3" tier flush --endpoint "$URL_local" --bucket ckpt --wait > /dev/null
"$HOTS3" tier evict --endpoint "$URL_local" --bucket ckpt --prefix cold/ > /dev/null
# What one of them says it is (clean: here and upstream; a GET of it is a hit).
STATE=$(signed -I "$URL_local/ckpt/4KiB/obj-0000000" | tr -d '\r' | sed -n 's/^x-hots3-tier: //Ip')

# get_run SIDE SIZE CONNS TAG: one measured run of GETs (after 2 s of warm-up), the server's CPU
# read around it, into $WORK/get-SIDE-SIZE-CONNS-TAG.json.
get_run() {
  lg --bucket "$1" --prefix "$2/" --workload get --size "$2" --objects "$OBJECTS" --no-prepare -c "$3" \
    --duration 2s > /dev/null
  lg --bucket "$1" --prefix "$2/" --workload get --size "$2" --objects "$OBJECTS" --no-prepare -c "$3" \
    --duration "$DURATION" --server-pid "$PID_local" --json "$WORK/get-$1-$2-$3-$4.json" > /dev/null
}
# median FIELD SIDE SIZE CONNS TAGS...: the median of FIELD (ops.GET.p50_ms, ..., or cpu_us: the
# server's CPU per GET) over those runs.
median() {
  local field=$1 side=$2 size=$3 conns=$4 tag file values=()
  shift 4
  for tag in "$@"; do
    file=$WORK/get-$side-$size-$conns-$tag.json
    if [ "$field" = cpu_us ]; then
      values+=("$(python3 -c "print(1e6 * $(json_get "$file" server_cpu_s) / max($(json_get "$file" ops.GET.ops), 1))")")
    else
      values+=("$(json_get "$file" "$field")")
    fi
  done
  python3 -c 'import statistics, sys; print(statistics.median(map(float, sys.argv[1:])))' "${values[@]}"
}
errors() {  # SIDE SIZE TAGS...: the GETs that failed over those runs, every connection count
  local side=$1 size=$2 tag conns n=0
  shift 2
  for tag in "$@"; do
    for conns in 1 "$C"; do
      n=$((n + $(json_get "$WORK/get-$side-$size-$conns-$tag.json" ops.GET.errors)))
    done
  done
  echo "$n"
}

side_run() {  # SIZE ROUND: plain, tiered, tiered, plain; each side's runs tagged ROUNDa, ROUNDb
  local run conns
  for conns in 1 "$C"; do
    for run in plain-a ckpt-a ckpt-b plain-b; do get_run "${run%-*}" "$1" "$conns" "$2${run#*-}"; done
  done
}
TAGS=()
for r in $(seq "$ROUNDS"); do
  for size in 4KiB 1MiB; do side_run "$size" "$r"; done
  TAGS+=("${r}a" "${r}b")
done

# The outage: the upstream silent; the hits and the untiered reads side-run again, once each way.
kill -STOP "$PID_up"
for size in 4KiB 1MiB; do side_run "$size" o; done
miss() {  # prints "HTTP_CODE SECONDS" of one GET of the evicted object
  signed --max-time 60 -o /dev/null -w '%{http_code} %{time_total}\n' "$URL_local/ckpt/cold/miss"
}
read -r FIRST_CODE FIRST_S < <(miss)
NEXT=()
NEXT_CODES=""
NOT_503=$([ "$FIRST_CODE" = 503 ] && echo 0 || echo 1)
for _ in $(seq 10); do
  read -r code s < <(miss)
  NEXT+=("$s")
  NEXT_CODES="$NEXT_CODES $code"
  [ "$code" = 503 ] || NOT_503=$((NOT_503 + 1))
done
kill -CONT "$PID_up"
NEXT_MS=$(python3 -c 'import statistics, sys; print(1000 * statistics.median(map(float, sys.argv[1:])))' "${NEXT[@]}")

echo
table_head
for size in 4KiB 1MiB; do
  for p in p50 p99; do
    row_flat "hit GET $size x1, $p ms" "$(median "ops.GET.${p}_ms" plain "$size" 1 "${TAGS[@]}")" \
      "$(median "ops.GET.${p}_ms" ckpt "$size" 1 "${TAGS[@]}")" 5 "untiered"
  done
  row_flat "hit GET $size x$C, server CPU per GET, us" "$(median cpu_us plain "$size" "$C" "${TAGS[@]}")" \
    "$(median cpu_us ckpt "$size" "$C" "${TAGS[@]}")" 5 "untiered"
  row_ratio "hit GET $size x$C, req/s" "$(median ops.GET.ops_per_s ckpt "$size" "$C" "${TAGS[@]}")" \
    "$(median ops.GET.ops_per_s plain "$size" "$C" "${TAGS[@]}")" "the same, untiered"
  for p in p50 p99; do  # (in us: the table shows one decimal)
    row_ratio "hit GET $size x$C, $p us" \
      "$(python3 -c "print(1000 * $(median "ops.GET.${p}_ms" ckpt "$size" "$C" "${TAGS[@]}"))")" \
      "$(python3 -c "print(1000 * $(median "ops.GET.${p}_ms" plain "$size" "$C" "${TAGS[@]}"))")" \
      "the same, untiered"
  done
done
for size in 4KiB 1MiB; do
  row_flat "upstream silent: hit GET $size x1, p99 ms" "$(median ops.GET.p99_ms plain "$size" 1 oa ob)" \
    "$(median ops.GET.p99_ms ckpt "$size" 1 oa ob)" 5 "untiered"
  row_ratio "upstream silent: hit GET $size x$C, req/s" "$(median ops.GET.ops_per_s ckpt "$size" "$C" oa ob)" \
    "$(median ops.GET.ops_per_s plain "$size" "$C" oa ob)" "the same, untiered"
done
row_max "upstream silent: the first miss fails, s" "$FIRST_S" 10 "seconds"
row_max "upstream silent: the next misses fail, ms" "$NEXT_MS" 50 "ms (median of 10)"
echo
echo "hit GETs failed: $(errors ckpt 4KiB "${TAGS[@]}" oa ob) of 4 KiB, $(errors ckpt 1MiB "${TAGS[@]}" oa ob) of 1 MiB; untiered: $(errors plain 4KiB "${TAGS[@]}" oa ob), $(errors plain 1MiB "${TAGS[@]}" oa ob)"
echo "misses while the upstream was silent: first HTTP $FIRST_CODE in $FIRST_S s, then HTTP$NEXT_CODES"
echo "a tiered object before the runs: x-hots3-tier: ${STATE:-?}"
[ "$NOT_503" = 0 ] || { echo "$NOT_503 miss(es) not answered 503" >&2; MISSED=$((MISSED + 1)); }
[ "$MISSED" = 0 ] || echo "$MISSED goal(s) missed"
