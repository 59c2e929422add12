#!/usr/bin/env bash
# Cold reads through the tier (objects evicted from a write-back bucket, read back from the
# upstream), against the same reads straight from the upstream, in one run:
#
#   whole    one GET of a SIZE object (1 GiB): fetched from the upstream in 8 MiB ranges, several
#            at once, passed on in order and kept; against one GET of it straight from the
#            upstream (goal >= 1.0x) and its download in 8 MiB ranges, 10 at once, straight from
#            the upstream (goal >= 0.9x). The median of ROUNDS, each side in every round. With
#            the goals: through the fault proxy, whose connections each pass STREAM_BW bytes/s
#            (as one stream of a remote S3 is slower than the link to it). Beside them, on
#            loopback: there two servers and the client share the machine's cores, and the one
#            that keeps and passes on every byte does the most work.
#            The first byte of the cold GET against the first byte of one GET straight from the
#            upstream (goal: within 5 ms of it).
#   ttfb     the first byte of an 8 MiB range at three quarters of 64 MiB, 1 GiB and 4 GiB
#            objects, off the 8 MiB chunk grid (so it covers two chunks), cold every time (its
#            chunks evicted before each of 15 reads; goal: flat within 20%, the median of 15 each);
#            the bytes the upstream sent per cold range (goal <= 24 MiB); and the same range read
#            again once its chunks are committed (a hit).
#   readers  16 GETs at once of one 256 MiB object: the bytes the upstream sent for it (goal
#            <= 1.05x the object) and the GETs that failed or differ (goal 0).
#   kill     a cold GET of the SIZE object through the proxy's streams, cut by a kill -9 of the
#            server halfway; after the restart, a GET of it again: the bytes the upstream sent for
#            that one against what the first did not keep (goal <= 1.05x: the chunks that came
#            before the kill are kept, and only the rest is fetched).
#   prefetch a dataset of PF_N objects of 32 MiB fetched back by `hots3 tier prefetch --wait`,
#            against its download straight from the upstream in 8 MiB ranges, 10 at once (goal
#            >= 0.9x through the proxy's streams; on loopback beside it).
#
# Every client is curl (one process per GET, signed with --aws-sigv4), so that the client's own
# cost is small and alike on both sides. The upstream is a second hots3 on the same machine:
# both servers and the clients share its cores, and each row's ratio is of one run.
#
# usage: bench/tier/cold.sh [BUILD_DIR]       (default build/release)
# env:   SIZE (1GiB) ROUNDS (5) STREAM_BW (40000000) PF_N (16) BENCH_TMPDIR (/var/tmp)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUILD=${1:-build/release}
SIZE=${SIZE:-1GiB}
ROUNDS=${ROUNDS:-5}
STREAM_BW=${STREAM_BW:-40000000}
HOTS3=$BUILD/src/hots3
[ -x "$HOTS3" ] || { echo "build $HOTS3 first" >&2; exit 1; }
need curl python3 sha256sum
bench_init tier-cold
ACCESS_LOG=1

bytes() { python3 -c 'import re, sys
n, u = re.fullmatch(r"(\d+)\s*([KMGT]i?B?)?", sys.argv[1]).groups()
print(int(n) * 1024 ** " KMGT".index((u or " ")[0]))' "$1"; }
MiB=$((1024 * 1024))
SIZE_BYTES=$(bytes "$SIZE")
SIZES="$((64 * MiB)) $((1024 * MiB)) $((4096 * MiB))"
# A few ms each, with a spread of as much again on a shared machine: the median of 15.
TTFB_READS=15
READERS_BYTES=$((256 * MiB))
PF_N=${PF_N:-16}
PF_BYTES=$((PF_N * 32 * MiB))
# Every object twice (the local copy and the upstream's), and slack.
DEVICE_BYTES=$((2 * SIZE_BYTES + 5184 * MiB + READERS_BYTES + 2 * PF_BYTES + 1024 * MiB))
free=$(df -B1 --output=avail "$WORK" | tail -1)
[ "$free" -gt $((DEVICE_BYTES * 2 + 4096 * MiB)) ] || { echo "needs $((DEVICE_BYTES * 2 + 4096 * MiB)) bytes free in $WORK" >&2; exit 1; }

# get URL PATH [RANGE]: one signed GET into /dev/null; prints its status, size, seconds to the
# first byte and seconds in all.
get() {
  curl -sS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" ${3:+-r "$3"} -o /dev/null \
    -w '%{http_code} %{size_download} %{time_starttransfer} %{time_total}\n' "$1/$2"
}
put() {  # URL PATH FILE
  curl -sS -f --aws-sigv4 "aws:amz:us-east-1:s3" --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$3" -o /dev/null "$1/$2"
}
mb() { curl -sS -f --aws-sigv4 "aws:amz:us-east-1:s3" --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X PUT -o /dev/null "$1/$2"; }
export AWS_ACCESS_KEY_ID=$BENCH_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$BENCH_SECRET_KEY AWS_DEFAULT_REGION=us-east-1
now() { date +%s.%N; }
median() { python3 -c 'import statistics, sys; print(statistics.median(map(float, sys.argv[1:])))' "$@"; }
tier() { "$HOTS3" tier "$@" --endpoint "$URL_local" > /dev/null; }
evict() {  # BUCKET PREFIX
  tier flush --bucket "$1" --prefix "$2" --wait
  tier evict --bucket "$1" --prefix "$2"
}

start_tier_server up
mb "$URL_up" team
printf 'access_key = "%s"\nsecret_key = "%s"\n' "$BENCH_ACCESS_KEY" "$BENCH_SECRET_KEY" > "$WORK/golden.toml"
# The same upstream through the proxy: each connection's answers at STREAM_BW bytes/s.
python3 tests/support/fault_proxy.py "${URL_up##*:}" 0 "$STREAM_BW" > "$WORK/proxy.port" &
PIDS+=("$!")
while [ ! -s "$WORK/proxy.port" ]; do sleep 0.01; done
URL_far=http://127.0.0.1:$(cat "$WORK/proxy.port")
LOCAL_TOML="[[tier.upstream]]
name = \"golden\"
endpoint = \"$URL_up\"
credentials_file = \"$WORK/golden.toml\"
[[tier.upstream]]
name = \"far\"
endpoint = \"$URL_far\"
credentials_file = \"$WORK/golden.toml\"
[[tier.bucket]]
bucket = \"far\"
upstream = \"far\"
upstream_bucket = \"team\"
upstream_prefix = \"far/\"
[[tier.bucket]]
bucket = \"cold\"
upstream = \"golden\"
upstream_bucket = \"team\"
upstream_prefix = \"rack/\"
[tier.writeback]
delay = \"0s\"
max_dirty = $DEVICE_BYTES"
start_tier_server local "$LOCAL_TOML"
mb "$URL_local" cold
mb "$URL_local" far
echo "tier, cold reads: $SIZE object, $ROUNDS rounds, streams of $STREAM_BW B/s; $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"

# The objects, from /dev/urandom (nothing compresses them), written through the tiered bucket.
head -c "$SIZE_BYTES" /dev/urandom > "$WORK/body"
put "$URL_local" cold/whole "$WORK/body"
put "$URL_local" far/whole "$WORK/body"
WANT=$(sha256sum < "$WORK/body" | cut -d' ' -f1)
for s in $SIZES; do
  head -c "$s" /dev/urandom > "$WORK/obj"
  put "$URL_local" "cold/ttfb/$s" "$WORK/obj"
done
head -c "$READERS_BYTES" /dev/urandom > "$WORK/obj"
put "$URL_local" cold/readers "$WORK/obj"
READERS_WANT=$(sha256sum < "$WORK/obj" | cut -d' ' -f1)
for i in $(seq -w "$PF_N"); do
  head -c $((32 * MiB)) /dev/urandom > "$WORK/obj"
  put "$URL_local" "cold/pf/$i" "$WORK/obj"
  put "$URL_local" "far/pf/$i" "$WORK/obj"
done
rm -f "$WORK/obj"

# ---- whole: one cold GET, against one GET and 10-way ranges straight from the upstream, on
# loopback and through the proxy's streams of STREAM_BW bytes/s --------------------------------
ranges() {  # URL PATH: the object in 8 MiB ranges, 10 at once; prints the seconds
  local t0 t1
  t0=$(now)
  python3 -c 'import sys
size, step = int(sys.argv[1]), 8 << 20
for a in range(0, size, step):
    print("%d-%d" % (a, min(a + step, size) - 1))' "$SIZE_BYTES" |
    xargs -P 10 -I{} curl -sS -f --aws-sigv4 "aws:amz:us-east-1:s3" \
      --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
      -r {} -o /dev/null "$1/$2"
  t1=$(now)
  python3 -c "print($t1 - $t0)"
}
one() {  # URL PATH: prints the seconds to the first byte and in all of one whole GET, checked
  local code size first total
  read -r code size first total < <(get "$1" "$2")
  [ "$code" = 200 ] && [ "$size" = "$SIZE_BYTES" ] || { echo "GET $2: $code, $size bytes" >&2; exit 1; }
  echo "$first $total"
}
mbs() { python3 -c "print($SIZE_BYTES / 1e6 / $1)"; }
# whole NAME BUCKET UPSTREAM_URL UPSTREAM_PATH: sets NAME_COLD, NAME_ONE and NAME_TEN (MB/s,
# medians), NAME_COLD_TTFB and NAME_ONE_TTFB (ms, medians) and NAME_RUNS (the seconds of every
# run).
whole() {
  local cold=() cold_first=() up_one=() up_first=() up_ten=() r got
  for r in $(seq "$ROUNDS"); do
    evict "$2" whole
    r=$(one "$3" "$4")
    up_first+=("${r% *}") up_one+=("${r#* }")
    r=$(one "$URL_local" "$2/whole")
    cold_first+=("${r% *}") cold+=("${r#* }")
    up_ten+=("$(ranges "$3" "$4")")
  done
  # What was kept is the object.
  got=$(curl -sS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$URL_local/$2/whole" | sha256sum | cut -d' ' -f1)
  [ "$got" = "$WANT" ] || { echo "the object read back from $2 differs" >&2; exit 1; }
  printf -v "$1_COLD" '%s' "$(mbs "$(median "${cold[@]}")")"
  printf -v "$1_ONE" '%s' "$(mbs "$(median "${up_one[@]}")")"
  printf -v "$1_TEN" '%s' "$(mbs "$(median "${up_ten[@]}")")"
  printf -v "$1_COLD_TTFB" '%s' "$(python3 -c "print(1000 * $(median "${cold_first[@]}"))")"
  printf -v "$1_ONE_TTFB" '%s' "$(python3 -c "print(1000 * $(median "${up_first[@]}"))")"
  printf -v "$1_RUNS" 'cold %s; one from the upstream %s; 10-way ranges from it %s' \
    "${cold[*]}" "${up_one[*]}" "${up_ten[*]}"
}
whole LOOP cold "$URL_up" team/rack/whole
whole FAR far "$URL_far" team/far/whole

# upstream_sent PATH: the body bytes the upstream has sent for PATH so far, by its access log
# (flushed every second: wait that long after the reads to count).
upstream_sent() {
  python3 - "$WORK/up/access" "$1" <<'PY'
import json, sys
print(sum(json.loads(l)["bytes_out"] for l in open(sys.argv[1]) if '"' + sys.argv[2] in l))
PY
}

# ---- ttfb: an 8 MiB range at three quarters of each size, across two chunks ----------------------
TTFB=()
RANGE_UP=()
HIT_TTFB=()
for s in $SIZES; do
  firsts=()
  hits=()
  sent_before=$(upstream_sent "/team/rack/ttfb/$s")
  a=$(((s / 4 * 3 / MiB) * MiB + MiB / 2))
  for _ in $(seq "$TTFB_READS"); do
    evict cold "ttfb/$s"
    for kind in cold hit; do
      read -r code size first total < <(get "$URL_local" "cold/ttfb/$s" "$a-$((a + 8 * MiB - 1))")
      [ "$code" = 206 ] && [ "$size" = $((8 * MiB)) ] || { echo "range of $s: $code, $size bytes" >&2; exit 1; }
      if [ "$kind" = cold ]; then
        firsts+=("$first")
        # The chunks are committed apart from the response: a read at once would wait for that.
        sleep 0.3
      else
        hits+=("$first")
      fi
    done
  done
  sleep 1.2
  TTFB+=("$(median "${firsts[@]}")")
  HIT_TTFB+=("$(median "${hits[@]}")")
  RANGE_UP+=("$(python3 -c "print(($(upstream_sent "/team/rack/ttfb/$s") - $sent_before) / $TTFB_READS / $MiB)")")
done

# ---- readers: 16 GETs at once of one cold object ----------------------------------------------
evict cold readers
sent_before=$(upstream_sent /team/rack/readers)
for _ in $(seq 16); do
  curl -sS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$URL_local/cold/readers" | sha256sum | cut -d' ' -f1 &
done > "$WORK/readers" 2>&1
wait_readers() { while [ "$(wc -l < "$WORK/readers")" -lt 16 ]; do sleep 0.05; done; }
wait_readers
READER_ERRORS=$(grep -vc "^$READERS_WANT\$" "$WORK/readers" || true)
sleep 1.2  # the access log flushes every second
READER_UP_BYTES=$(($(upstream_sent /team/rack/readers) - sent_before))

# ---- kill: a cold GET cut by a kill -9 of the server; the next GET fetches only the rest -------
evict far whole
curl -sS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -o /dev/null "$URL_local/far/whole" 2> /dev/null &
client=$!
sleep "$(python3 -c "print($SIZE_BYTES / 1e6 / $FAR_COLD / 2)")"  # about halfway
kill -9 "$PID_local"
wait "$client" || true
rm -f "$WORK/local/port"
start_tier_server local "$LOCAL_TOML"
KILL_KEPT=$(python3 - "$WORK/local/data/catalog.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(db.execute("SELECT coalesce(sum(c.size), 0) FROM tier_chunks c JOIN objects o ON o.id = c.object_id "
                 "WHERE o.key = 'whole'").fetchone()[0])
PY
)
sleep 1.2  # the upstream's access log flushes every second
sent_before=$(upstream_sent /team/far/whole)
one "$URL_local" far/whole > /dev/null
sleep 1.2
KILL_REST_UP=$(($(upstream_sent /team/far/whole) - sent_before))

# ---- prefetch: the dataset fetched back by a job, against its download in ranges ---------------
# prefetch NAME BUCKET UPSTREAM_URL UPSTREAM_PREFIX: sets NAME_PF and NAME_PF_TEN (MB/s, medians).
prefetch() {
  local job=() up=() r t0 t1
  for r in $(seq "$ROUNDS"); do
    evict "$2" pf/
    t0=$(now)
    "$HOTS3" tier prefetch --bucket "$2" --prefix pf/ --wait --endpoint "$URL_local" > "$WORK/pf.out"
    t1=$(now)
    grep -q "^prefetch .*: $PF_N/$PF_N objects, .* 0 failed" "$WORK/pf.out" ||
      { echo "prefetch of $2/pf/: $(tail -1 "$WORK/pf.out")" >&2; exit 1; }
    job+=("$(python3 -c "print($t1 - $t0)")")
    t0=$(now)
    python3 -c 'import sys
for i in range(1, int(sys.argv[1]) + 1):
    for a in range(0, 32 << 20, 8 << 20):
        print("%s%0*d %d-%d" % (sys.argv[2], len(sys.argv[1]), i, a, a + (8 << 20) - 1))' \
      "$PF_N" "$4" |
      xargs -P 10 -L 1 sh -c 'curl -sS -f --aws-sigv4 "aws:amz:us-east-1:s3" \
        --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
        -r "$2" -o /dev/null "$0/$1"' "$3"
    t1=$(now)
    up+=("$(python3 -c "print($t1 - $t0)")")
  done
  printf -v "$1_PF" '%s' "$(python3 -c "print($PF_BYTES / 1e6 / $(median "${job[@]}"))")"
  printf -v "$1_PF_TEN" '%s' "$(python3 -c "print($PF_BYTES / 1e6 / $(median "${up[@]}"))")"
  printf -v "$1_PF_RUNS" 'prefetch %s; 10-way ranges from the upstream %s' "${job[*]}" "${up[*]}"
}
export BENCH_ACCESS_KEY BENCH_SECRET_KEY
prefetch FAR far "$URL_far" team/far/pf/
prefetch LOOP cold "$URL_up" team/rack/pf/

echo
table_head
row "cold GET of $SIZE, $STREAM_BW B/s streams, MB/s" "$FAR_COLD" "$FAR_ONE" "one GET from upstream" 100
row "cold GET of $SIZE, $STREAM_BW B/s streams, MB/s" "$FAR_COLD" "$FAR_TEN" "8 MiB ranges x10 from it" 90
row_ratio "cold GET of $SIZE, loopback, MB/s" "$LOOP_COLD" "$LOOP_ONE" "one GET from upstream"
row_ratio "cold GET of $SIZE, loopback, MB/s" "$LOOP_COLD" "$LOOP_TEN" "8 MiB ranges x10 from it"
row_max "cold GET of $SIZE, $STREAM_BW B/s streams, TTFB ms" "$FAR_COLD_TTFB" \
  "$(python3 -c "print($FAR_ONE_TTFB + 5)")" "the upstream's + 5 ms"
row_max "cold GET of $SIZE, loopback, TTFB ms" "$LOOP_COLD_TTFB" \
  "$(python3 -c "print($LOOP_ONE_TTFB + 5)")" "the upstream's + 5 ms"
read -r t64 t1g t4g <<< "${TTFB[*]}"
row_flat "cold 8 MiB range TTFB at 4 GiB vs 64 MiB, ms" "$(python3 -c "print($t64 * 1000)")" \
  "$(python3 -c "print($t4g * 1000)")" 20
read -r u64 u1g u4g <<< "${RANGE_UP[*]}"
row_max "cold 8 MiB range of 4 GiB, upstream MiB" "$u4g" 24 "three chunks"
row_max "16 readers of one cold 256 MiB, upstream MiB" "$(python3 -c "print($READER_UP_BYTES / $MiB)")" \
  "$(python3 -c "print(1.05 * $READERS_BYTES / $MiB)")" "1.05x the object"
row_max "16 readers of one cold 256 MiB, failed GETs" "$READER_ERRORS" 0 "GETs"
row_max "GET after a kill -9 amid a cold GET, upstream MiB" "$(python3 -c "print($KILL_REST_UP / $MiB)")" \
  "$(python3 -c "print(1.05 * ($SIZE_BYTES - $KILL_KEPT) / $MiB)")" "1.05x what was not kept"
row "prefetch of $PF_N x 32 MiB, $STREAM_BW B/s streams, MB/s" "$FAR_PF" "$FAR_PF_TEN" \
  "8 MiB ranges x10 from it" 90
row_ratio "prefetch of $PF_N x 32 MiB, loopback, MB/s" "$LOOP_PF" "$LOOP_PF_TEN" \
  "8 MiB ranges x10 from it"
echo "cold 8 MiB range TTFB (median of $TTFB_READS): 64 MiB $t64 s, 1 GiB $t1g s, 4 GiB $t4g s"
echo "the same range read again, from its kept chunks, TTFB (median of $TTFB_READS): ${HIT_TTFB[*]} s"
echo "upstream MiB per cold 8 MiB range: 64 MiB $u64, 1 GiB $u1g, 4 GiB $u4g"
echo "kill -9 amid a cold GET of $SIZE: $((KILL_KEPT / MiB)) MiB kept as chunks; the next GET took $((KILL_REST_UP / MiB)) MiB from the upstream"
echo "whole GETs through $STREAM_BW B/s streams (s): $FAR_RUNS"
echo "whole GETs on loopback (s): $LOOP_RUNS"
echo "prefetches through $STREAM_BW B/s streams (s): $FAR_PF_RUNS"
echo "prefetches on loopback (s): $LOOP_PF_RUNS"
[ "$MISSED" -eq 0 ]
