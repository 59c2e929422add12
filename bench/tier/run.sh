#!/usr/bin/env bash
# Write-back to an upstream S3, against the same work done without tiering, in one run:
#
#   save     a checkpoint of SHARDS files of SHARD bytes and a small .metadata, written with the
#            AWS CLI (its default multipart settings) into a write-back bucket and, for the
#            limit, into a bucket of the same server that is not tiered: the time to the last
#            200 (goal: the write-back save within 105% of the untiered one).
#   drain    from the save's start until `hots3 tier flush --wait` says the upstream has it all,
#            against a direct `aws s3 cp` of the same files to the same upstream (goal: the
#            drain at >= 90% of the direct copy's MB/s).
#   4 KiB    durable PUTs at SMALL_C connections into the write-back bucket, against the untiered
#            bucket, four runs each, alternating (goal: >= 95%); and the server's CPU per PUT on
#            each side, by thread.
#   read     the saved checkpoint evicted, then read back whole, one GET per file: cold (streamed
#            from the upstream and kept; goal >= 90% of the same GETs straight to the upstream),
#            then warm (goal >= 95% of the untiered bucket's).
#   ranges   the same evicted, then downloaded with `aws s3 cp` (8 MiB ranged GETs): cold (shown
#            beside the same copy from the upstream), and again once the restores the first
#            ranges asked for are done (goal >= 95% of the untiered bucket's).
#   write-through
#            the same save into a write-through bucket (acknowledged once the upstream has it),
#            against the direct `aws s3 cp` (goal: within 110% of its time); and one PUT of
#            THROUGH_BYTES through a proxy capped at THROUGH_BW bytes/s, into a write-through
#            bucket behind it and straight to the upstream behind it (goal: within 110%: the
#            body goes to both at once, so the slower path sets the time, not their sum); and a
#            checkpoint of 8 files of THROUGH_BYTES / 8 (multipart: the parts are teed) the same
#            two ways through that link. On one machine the uncapped save is bound by the CPU of
#            two servers writing every byte, not by a link: the capped rows are the goal's test.
#
# The upstream is a second hots3 on the same machine (a real one: bench/peers/radosgw.sh), so
# both servers, the uploader and the client share its cores: the ratios are of one run.
#
# usage: bench/tier/run.sh [BUILD_DIR]        (default build/release)
# env:   SHARDS (16) SHARD (128MiB) SMALL_C (64) DURATION (10s) BENCH_TMPDIR (/var/tmp)
#        DELAY ([tier.writeback] delay, 2m; longer than the nine 4 KiB runs together, so that no
#        upload runs during them: their rows measure what write-back costs a PUT's 200; the
#        drain is measured through `hots3 tier flush`, which skips the delay)
#        THROUGH_BYTES (256MiB) THROUGH_BW (52428800, 50 MiB/s)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUILD=${1:-build/release}
SHARDS=${SHARDS:-16}
SHARD=${SHARD:-128MiB}
SMALL_C=${SMALL_C:-64}
DURATION=${DURATION:-10s}
DELAY=${DELAY:-2m}
THROUGH_BYTES=${THROUGH_BYTES:-268435456}
THROUGH_BW=${THROUGH_BW:-52428800}
HOTS3=$BUILD/src/hots3
LOADGEN=$BUILD/bench/hots3-loadgen
[ -x "$HOTS3" ] && [ -x "$LOADGEN" ] || { echo "build $HOTS3 and $LOADGEN first" >&2; exit 1; }
need aws curl python3
bench_init tier

SHARD_BYTES=$(python3 -c 'import re, sys
n, u = re.fullmatch(r"(\d+)\s*([KMGT]i?B?)?", sys.argv[1]).groups()
print(int(n) * 1024 ** " KMGT".index((u or " ")[0]))' "$SHARD")
TOTAL_BYTES=$((SHARDS * SHARD_BYTES))
seconds() { python3 -c 'import re, sys
n, u = re.fullmatch(r"(\d+)(ms|s|m)", sys.argv[1]).groups()
print(int(n) * {"ms": 0.001, "s": 1, "m": 60}[u])' "$1"; }
# The 4 KiB runs, side-run: plain, tiered, tiered, plain, twice (see below), after one not counted.
PUT_ORDER="plain-1 ckpt-1 ckpt-2 plain-2 plain-3 ckpt-3 ckpt-4 plain-4"
python3 -c "import sys; sys.exit($(seconds "$DELAY") <= ($(wc -w <<< "$PUT_ORDER") + 1) * ($(seconds "$DURATION") + 3))" ||
  { echo "DELAY ($DELAY) must be longer than the 4 KiB runs of DURATION + 2 s warm-up together" >&2; exit 1; }
# Two checkpoints, nine runs of small PUTs (inline: in the catalog), and slack.
DEVICE_BYTES=$((TOTAL_BYTES * 3 + 8 * 1024 * 1024 * 1024))
free=$(df -B1 --output=avail "$WORK" | tail -1)
[ "$free" -gt $((DEVICE_BYTES * 2 + TOTAL_BYTES)) ] || { echo "needs $((DEVICE_BYTES * 2 + TOTAL_BYTES)) bytes free in $WORK" >&2; exit 1; }

export AWS_ACCESS_KEY_ID=$BENCH_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$BENCH_SECRET_KEY AWS_DEFAULT_REGION=us-east-1
s3() { local url=$1; shift; aws --endpoint-url "$url" s3 "$@"; }
cp() { local url=$1; shift; s3 "$url" cp --recursive --only-show-errors "$@"; }
now() { date +%s.%N; }
elapsed() { python3 -c "print($2 - $1)"; }

# The checkpoint's files, from /dev/urandom (nothing compresses or dedupes them).
mkdir -p "$WORK/ckpt"
for i in $(seq 0 $((SHARDS - 1))); do
  head -c "$SHARD_BYTES" /dev/urandom > "$WORK/ckpt/__${i}_0.distcp"
done
echo '{"step": 1}' > "$WORK/ckpt/.metadata"

start_tier_server up ""
s3 "$URL_up" mb s3://team-ckpt > /dev/null
# A bandwidth-capped way to the upstream (the write-through PUT's row).
python3 tests/support/fault_proxy.py "${URL_up##*:}" "$THROUGH_BW" > "$WORK/proxy.port" &
PIDS+=("$!")
while [ ! -s "$WORK/proxy.port" ]; do sleep 0.01; done
URL_slow=http://127.0.0.1:$(cat "$WORK/proxy.port")
printf 'access_key = "%s"\nsecret_key = "%s"\n' "$BENCH_ACCESS_KEY" "$BENCH_SECRET_KEY" > "$WORK/golden.toml"
start_tier_server local "[[tier.upstream]]
name = \"golden\"
endpoint = \"$URL_up\"
credentials_file = \"$WORK/golden.toml\"
[[tier.upstream]]
name = \"slow\"
endpoint = \"$URL_slow\"
credentials_file = \"$WORK/golden.toml\"
[[tier.bucket]]
bucket = \"ckpt\"
upstream = \"golden\"
upstream_bucket = \"team-ckpt\"
upstream_prefix = \"rack/\"
[[tier.bucket]]
bucket = \"through\"
upstream = \"golden\"
upstream_bucket = \"team-ckpt\"
upstream_prefix = \"through/\"
mode = \"writethrough\"
[[tier.bucket]]
bucket = \"capped\"
upstream = \"slow\"
upstream_bucket = \"team-ckpt\"
upstream_prefix = \"capped/\"
mode = \"writethrough\"
[tier.writeback]
delay = \"$DELAY\"
max_dirty = $DEVICE_BYTES"
s3 "$URL_local" mb s3://plain > /dev/null
echo "tier: checkpoint of $SHARDS x $SHARD and .metadata, AWS CLI $(aws --version 2>&1 | cut -d' ' -f1);"
echo "  4 KiB PUT x$SMALL_C for $DURATION; $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"

# ---- the direct copy to the upstream (the drain's limit) --------------------------------------
t0=$(now); cp "$URL_up" "$WORK/ckpt" s3://team-ckpt/direct/; t1=$(now)
DIRECT_MBS=$(python3 -c "print($TOTAL_BYTES / 1e6 / ($t1 - $t0))")
s3 "$URL_up" rm --recursive --only-show-errors s3://team-ckpt/direct/

# ---- the save: untiered, then write-back; the drain ---------------------------------------------
t0=$(now); cp "$URL_local" "$WORK/ckpt" s3://plain/step-1/; t1=$(now)
PLAIN_S=$(elapsed "$t0" "$t1")
t0=$(now); cp "$URL_local" "$WORK/ckpt" s3://ckpt/step-1/; t1=$(now)
TIERED_S=$(elapsed "$t0" "$t1")
"$HOTS3" tier flush --endpoint "$URL_local" --bucket ckpt --prefix step-1/ --wait > /dev/null
t2=$(now)
# The drain of a saved checkpoint: from the last 200 to the upstream having it all (the flush
# skips the coalescing delay); and end to end, from the save's start.
DRAIN_MBS=$(python3 -c "print($TOTAL_BYTES / 1e6 / ($t2 - $t1))")
END_TO_END_MBS=$(python3 -c "print($TOTAL_BYTES / 1e6 / ($t2 - $t0))")
# The upstream's copy is the same data, key for key.
cp "$URL_up" s3://team-ckpt/rack/step-1/ "$WORK/back"
diff -r "$WORK/ckpt" "$WORK/back" > /dev/null || { echo "the upstream's copy differs" >&2; exit 1; }
rm -rf "$WORK/back"

# ---- read-through: the saved checkpoint evicted, then read whole, file by file, as a training
# job's loader does (one GET per object, no ranges): cold (streamed from the upstream as it is
# kept), then warm; against the same GETs straight to the upstream (the cold read's limit) and
# of the untiered bucket (the warm read's).
get_all() {  # URL BUCKET PREFIX: every file of the checkpoint, one whole GET each, into $WORK/back
  mkdir -p "$WORK/back"
  local f
  for f in $(ls -A "$WORK/ckpt"); do
    aws --endpoint-url "$1" s3api get-object --bucket "$2" --key "$3$f" "$WORK/back/$f" > /dev/null
  done
}
read_s() {  # URL BUCKET PREFIX: seconds for get_all, its copy checked
  local t0 t1
  t0=$(now); get_all "$@"; t1=$(now)
  diff -r "$WORK/ckpt" "$WORK/back" > /dev/null || { echo "a read of $2/$3 differs" >&2; exit 1; }
  rm -rf "$WORK/back"
  elapsed "$t0" "$t1"
}
"$HOTS3" tier evict --endpoint "$URL_local" --bucket ckpt --prefix step-1/ > /dev/null
UP_READ_S=$(read_s "$URL_up" team-ckpt rack/step-1/)
COLD_S=$(read_s "$URL_local" ckpt step-1/)
WARM_S=$(read_s "$URL_local" ckpt step-1/)
PLAIN_READ_S=$(read_s "$URL_local" plain step-1/)

# ---- read in ranges: `aws s3 cp` reads each large file as 8 MiB ranged GETs, ten at once. Cold,
# ranges pass through, and each file's first one asks for the whole file to be restored behind
# the download, so the next download is local; against the same copy straight from the upstream
# (the cold one's limit) and from the untiered bucket (the second one's).
copy_s() {  # URL S3URL: seconds for `aws s3 cp --recursive` into $WORK/back, its copy checked
  local t0 t1
  t0=$(now); cp "$1" "$2" "$WORK/back"; t1=$(now)
  diff -r "$WORK/ckpt" "$WORK/back" > /dev/null || { echo "a copy of $2 differs" >&2; exit 1; }
  rm -rf "$WORK/back"
  elapsed "$t0" "$t1"
}
"$HOTS3" tier evict --endpoint "$URL_local" --bucket ckpt --prefix step-1/ > /dev/null
UP_COPY_S=$(copy_s "$URL_up" s3://team-ckpt/rack/step-1/)
COLD_COPY_S=$(copy_s "$URL_local" s3://ckpt/step-1/)
# Until every file is local again (HEAD: x-amz-restore ongoing-request="false"): the seconds past
# the cold copy's end.
RESTORED_S=$(python3 - "$URL_local" <<'PY'
import sys, time, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1])
start = time.monotonic()
keys = [o["Key"] for o in s3.list_objects_v2(Bucket="ckpt", Prefix="step-1/")["Contents"]]
while any(s3.head_object(Bucket="ckpt", Key=k).get("Restore") != 'ongoing-request="false"' for k in keys):
    if time.monotonic() - start > 600:
        sys.exit("files still evicted 600 s after a download in ranges")
    time.sleep(0.2)
print(time.monotonic() - start)
PY
)
WARM_COPY_S=$(copy_s "$URL_local" s3://ckpt/step-1/)
PLAIN_COPY_S=$(copy_s "$URL_local" s3://plain/step-1/)

# ---- write-through: the save, and one PUT through a capped link -------------------------------
t0=$(now); cp "$URL_local" "$WORK/ckpt" s3://through/step-1/; t1=$(now)
THROUGH_S=$(elapsed "$t0" "$t1")
cp "$URL_up" s3://team-ckpt/through/step-1/ "$WORK/back"
diff -r "$WORK/ckpt" "$WORK/back" > /dev/null || { echo "the write-through copy differs" >&2; exit 1; }
rm -rf "$WORK/back"
head -c "$THROUGH_BYTES" /dev/urandom > "$WORK/one"
put_one() { aws --endpoint-url "$1" s3api put-object --bucket "$2" --key "$3" --body "$WORK/one" > /dev/null; }
t0=$(now); put_one "$URL_slow" team-ckpt direct-one; t1=$(now)
ONE_DIRECT_S=$(elapsed "$t0" "$t1")
t0=$(now); put_one "$URL_local" capped one; t1=$(now)
ONE_THROUGH_S=$(elapsed "$t0" "$t1")
rm -f "$WORK/one"
mkdir -p "$WORK/small"
for i in $(seq 0 7); do head -c $((THROUGH_BYTES / 8)) /dev/urandom > "$WORK/small/__${i}_0.distcp"; done
t0=$(now); cp "$URL_slow" "$WORK/small" s3://team-ckpt/direct-small/; t1=$(now)
SMALL_DIRECT_S=$(elapsed "$t0" "$t1")
t0=$(now); cp "$URL_local" "$WORK/small" s3://capped/small/; t1=$(now)
SMALL_THROUGH_S=$(elapsed "$t0" "$t1")
cp "$URL_up" s3://team-ckpt/capped/small/ "$WORK/back"
diff -r "$WORK/small" "$WORK/back" > /dev/null || { echo "the capped write-through copy differs" >&2; exit 1; }
rm -rf "$WORK/back" "$WORK/small"

# ---- 4 KiB durable PUTs ------------------------------------------------------------------------
lg() { "$LOADGEN" --endpoint "$URL_local" --access-key "$BENCH_ACCESS_KEY" --secret-key "$BENCH_SECRET_KEY" "$@"; }
# In the order plain, tiered, tiered, plain, twice: the catalog grows with every run, and the
# drift that brings falls on both alike; each side's figure is its four runs' mean (on shared
# cores one run can be a fifth off the next). The first run into a catalog of a few rows is not
# drift but a step: SQLite's checkpoints of it cost a quarter of what they cost once it holds
# hundreds of thousands of rows (3 against 13-16 µs per PUT), which made that run 5-20% faster
# than the next ones; it is run first, uncounted.
# Each run's CPU by the server's threads (their names from /proc), taken around it after 2 s of
# warm-up of its own: where a write-back PUT's extra cost goes.
threads_cpu() {  # PID: {thread name: CPU ticks} of its threads, as JSON
  python3 - "$1" <<'PY'
import json, os, sys
ticks = {}
for t in os.listdir("/proc/%s/task" % sys.argv[1]):
    try:
        stat = open("/proc/%s/task/%s/stat" % (sys.argv[1], t)).read()
    except OSError:
        continue  # a thread that ended meanwhile
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    ticks[name] = ticks.get(name, 0) + int(fields[11]) + int(fields[12])  # utime + stime
print(json.dumps(ticks))
PY
}
put_run() {
  lg --bucket "$1" --prefix "warm-$2/" --workload put --size 4KiB -c "$SMALL_C" --duration 2s > /dev/null
  threads_cpu "$PID_local" > "$WORK/cpu-$1-$2.before"
  lg --bucket "$1" --prefix "small-$2/" --workload put --size 4KiB -c "$SMALL_C" --duration "$DURATION" \
    --json "$WORK/put-$1-$2.json" > /dev/null
  threads_cpu "$PID_local" > "$WORK/cpu-$1-$2.after"
}
put_run plain 0
for run in $PUT_ORDER; do put_run "${run%-*}" "${run#*-}"; done
# µs of each thread per PUT, each side's runs together; threads below 0.05 µs left out.
cpu_per_put() {  # SIDE
  python3 - "$WORK" "$1" "$(getconf CLK_TCK)" $PUT_ORDER <<'PY'
import json, sys
work, side, hz, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
ticks, puts = {}, 0
for run in runs:
    name, n = run.rsplit("-", 1)
    if name != side:
        continue
    base = "%s/cpu-%s-%s" % (work, name, n)
    before, after = json.load(open(base + ".before")), json.load(open(base + ".after"))
    for thread, t in after.items():
        ticks[thread] = ticks.get(thread, 0) + t - before.get(thread, 0)
    puts += json.load(open("%s/put-%s-%s.json" % (work, name, n)))["ops"]["PUT"]["ops"]
us = {thread: t * 1e6 / hz / puts for thread, t in ticks.items()}
print("%.1f µs (%s)" % (sum(us.values()), ", ".join(
    "%s %.1f" % (thread, v) for thread, v in sorted(us.items(), key=lambda kv: -kv[1]) if v >= 0.05)))
PY
}
run_put() { json_get "$WORK/put-$1-$2.json" ops.PUT.ops_per_s; }
mean_put() {  # SIDE: the mean of its runs' rates
  local run rates=()
  for run in $PUT_ORDER; do [ "${run%-*}" != "$1" ] || rates+=("$(run_put "$1" "${run#*-}")"); done
  python3 -c 'import sys; print(sum(map(float, sys.argv[1:])) / (len(sys.argv) - 1))' "${rates[@]}"
}
PLAIN_PUT=$(mean_put plain)
TIERED_PUT=$(mean_put ckpt)

echo
table_head
row "checkpoint save to write-back, MB/s acked" "$(python3 -c "print($TOTAL_BYTES / 1e6 / $TIERED_S)")" \
  "$(python3 -c "print($TOTAL_BYTES / 1e6 / $PLAIN_S)")" "the same, untiered" 95
row "checkpoint drain to the upstream, MB/s" "$DRAIN_MBS" "$DIRECT_MBS" "aws s3 cp to it" 90
row_ratio "  save + drain end to end, MB/s" "$END_TO_END_MBS" "$DIRECT_MBS" "aws s3 cp to it"
row "PUT 4 KiB x$SMALL_C durable, write-back, req/s" "$TIERED_PUT" "$PLAIN_PUT" "the same, untiered" 95
row "checkpoint save to write-through, MB/s acked" "$(python3 -c "print($TOTAL_BYTES / 1e6 / $THROUGH_S)")" \
  "$DIRECT_MBS" "aws s3 cp to the upstream" 91
row "PUT of $THROUGH_BYTES B at $THROUGH_BW B/s, write-through, MB/s" \
  "$(python3 -c "print($THROUGH_BYTES / 1e6 / $ONE_THROUGH_S)")" \
  "$(python3 -c "print($THROUGH_BYTES / 1e6 / $ONE_DIRECT_S)")" "the same PUT to the upstream" 91
row "8-file save at $THROUGH_BW B/s, write-through, MB/s" \
  "$(python3 -c "print($THROUGH_BYTES / 1e6 / $SMALL_THROUGH_S)")" \
  "$(python3 -c "print($THROUGH_BYTES / 1e6 / $SMALL_DIRECT_S)")" "aws s3 cp to the upstream" 91
row "checkpoint read cold (evicted), MB/s" "$(python3 -c "print($TOTAL_BYTES / 1e6 / $COLD_S)")" \
  "$(python3 -c "print($TOTAL_BYTES / 1e6 / $UP_READ_S)")" "the same GETs upstream" 90
row "checkpoint read warm (read before), MB/s" "$(python3 -c "print($TOTAL_BYTES / 1e6 / $WARM_S)")" \
  "$(python3 -c "print($TOTAL_BYTES / 1e6 / $PLAIN_READ_S)")" "the same, untiered" 95
row_ratio "checkpoint download in ranges cold, MB/s" "$(python3 -c "print($TOTAL_BYTES / 1e6 / $COLD_COPY_S)")" \
  "$(python3 -c "print($TOTAL_BYTES / 1e6 / $UP_COPY_S)")" "aws s3 cp from upstream"
row "checkpoint download in ranges again, MB/s" "$(python3 -c "print($TOTAL_BYTES / 1e6 / $WARM_COPY_S)")" \
  "$(python3 -c "print($TOTAL_BYTES / 1e6 / $PLAIN_COPY_S)")" "the same, untiered" 95
echo "downloads in ranges (aws s3 cp): cold $COLD_COPY_S s (then $RESTORED_S s until all was local), again $WARM_COPY_S s, untiered $PLAIN_COPY_S s, straight from the upstream $UP_COPY_S s"
echo "whole-object reads: cold $COLD_S s, warm $WARM_S s, untiered $PLAIN_READ_S s, straight from the upstream $UP_READ_S s"
echo "save: untiered $PLAIN_S s, write-back $TIERED_S s, write-through $THROUGH_S s; direct copy to the upstream $DIRECT_MBS MB/s"
echo "one capped PUT: write-through $ONE_THROUGH_S s, straight to the upstream $ONE_DIRECT_S s (goals of 91% in MB/s: within 110% of the time)"
echo "capped 8-file save: write-through $SMALL_THROUGH_S s, straight to the upstream $SMALL_DIRECT_S s"
echo "4 KiB PUT, server CPU per PUT: untiered $(cpu_per_put plain); write-back $(cpu_per_put ckpt)"
echo "4 KiB PUT runs in their order, req/s: $(for run in $PUT_ORDER; do printf '%s %s; ' "${run%-*}" "$(run_put "${run%-*}" "${run#*-}")"; done)"
[ "$MISSED" -eq 0 ]
