#!/usr/bin/env bash
# The checkpoint path of a distributed training job, against the machine's limits, in one run:
#
#   save   WRITERS ranks each save a SHARD-byte shard by multipart at once (PART-byte parts,
#          PART_CONCURRENCY in flight per rank), then one rank commits a small manifest with
#          If-None-Match: *, then the previous checkpoint is removed with DeleteObjects.
#          Time to durable (last 200) and GB/s, the best of ROUNDS checkpoints,
#          vs fio: sequential O_DIRECT write of the same bytes at the same total queue depth,
#             nginx: WebDAV PUT of PART-byte bodies at the same number of connections.
#   load   READERS ranks read the shards back in READ-byte ranged GETs (as s3torchconnector does),
#          hots3's cache off, so every byte comes from the device,
#          vs fio: sequential O_DIRECT read at the same queue depth,
#             nginx: the same ranged GETs of files in the page cache.
# Goal: at least 85% of the lower limit for both.
#
# usage: bench/checkpoint/run.sh [BUILD_DIR]        (default build/release)
# env:   WRITERS (8) SHARD (1GiB) PART (8MiB) PART_CONCURRENCY (2) ROUNDS (3) READERS (8)
#        READ (8MiB) THREADS (server workers, default: cores) BENCH_TMPDIR (/var/tmp)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUILD=${1:-build/release}
WRITERS=${WRITERS:-8}
SHARD=${SHARD:-1GiB}
PART=${PART:-8MiB}
PART_CONCURRENCY=${PART_CONCURRENCY:-2}
ROUNDS=${ROUNDS:-3}
READERS=${READERS:-8}
READ=${READ:-8MiB}
THREADS=${THREADS:-$(nproc)}
HOTS3=$BUILD/src/hots3
LOADGEN=$BUILD/bench/hots3-loadgen
[ -x "$HOTS3" ] && [ -x "$LOADGEN" ] || { echo "build $HOTS3 and $LOADGEN first" >&2; exit 1; }
need fio nginx curl
bench_init checkpoint

bytes() { python3 -c 'import re, sys
n, u = re.fullmatch(r"(\d+)\s*([KMGT]i?B?)?", sys.argv[1]).groups()
print(int(n) * 1024 ** " KMGT".index((u or " ")[0]))' "$1"; }
SHARD_BYTES=$(bytes "$SHARD")
PART_BYTES=$(bytes "$PART")
DEPTH=$((WRITERS * PART_CONCURRENCY))
TOTAL_BYTES=$((WRITERS * SHARD_BYTES))
# The device holds two checkpoints (the new one is written before the old one goes) and slack.
DEVICE_BYTES=$((TOTAL_BYTES * 2 + 2 * 1024 * 1024 * 1024))
free=$(df -B1 --output=avail "$WORK" | tail -1)
[ "$free" -gt $((DEVICE_BYTES + TOTAL_BYTES)) ] || { echo "needs $((DEVICE_BYTES + TOTAL_BYTES)) bytes free in $WORK" >&2; exit 1; }

echo "checkpoint: $WRITERS x $SHARD shards, $PART parts, $PART_CONCURRENCY in flight per rank (queue depth $DEPTH);"
echo "  load: $READERS readers x $READ ranges; $(nproc) cores, $THREADS server workers, $(date -u +%Y-%m-%dT%H:%MZ)"

# ---- the limits -------------------------------------------------------------------------------
FIO_W=$(fio_mbs write --rw=write --bs=1M --size="$TOTAL_BYTES" --iodepth="$DEPTH" --direct=1 --ioengine=io_uring --end_fsync=1)
FIO_R=$(fio_mbs read --rw=read --bs=1M --size="$TOTAL_BYTES" --iodepth="$READERS" --direct=1 --ioengine=io_uring)
fio_done

start_nginx "$THREADS"
"$LOADGEN" --plain --endpoint "$NGINX_URL" --bucket dav --prefix ckpt/ --workload put --overwrite \
  --objects "$DEPTH" --size "$PART" -c "$DEPTH" --duration 10s --warmup 2s --json "$WORK/nginx-put.json" > /dev/null
NGINX_W=$(json_get "$WORK/nginx-put.json" ops.PUT.mb_per_s)
"$LOADGEN" --plain --endpoint "$NGINX_URL" --bucket dav --prefix shard/ --workload range --objects "$WRITERS" \
  --size "$SHARD" --range-size "$READ" -c "$READERS" --duration 10s --warmup 2s --json "$WORK/nginx-get.json" > /dev/null
NGINX_R=$(json_get "$WORK/nginx-get.json" ops.GET-RANGE.mb_per_s)
rm -rf "$WORK/dav"

# ---- hots3 --------------------------------------------------------------------------------------
start_hots3 "$HOTS3" "$THREADS" "[storage]
device_size = $DEVICE_BYTES
cache_size = 0"
"$LOADGEN" --endpoint "$HOTS3_URL" --bucket ckpt --workload checkpoint --writers "$WRITERS" \
  --shard-size "$SHARD" --part-size "$PART" --part-concurrency "$PART_CONCURRENCY" --rounds "$ROUNDS" \
  --readers "$READERS" --read-size "$READ" --server-pid "$HOTS3_PID" --json "$WORK/hots3.json"
CKPT_W=$(python3 -c "print(1000 * $(json_get "$WORK/hots3.json" best_write_gb_per_s))")
CKPT_R=$(python3 -c "print(1000 * $(json_get "$WORK/hots3.json" read_gb_per_s))")
stop_hots3

echo
table_head
row "checkpoint save, MB/s to durable" "$CKPT_W" "$(min "$FIO_W" "$NGINX_W")" "min(fio, nginx PUT)" 85
row "checkpoint load, MB/s (cache off)" "$CKPT_R" "$(min "$FIO_R" "$NGINX_R")" "min(fio, nginx GET)" 85
echo "limits: fio O_DIRECT write $FIO_W MB/s (qd $DEPTH, fsync at end), read $FIO_R MB/s (qd $READERS);"
echo "        nginx WebDAV PUT $NGINX_W MB/s ($DEPTH connections), ranged GET $NGINX_R MB/s ($READERS connections)"
[ "$MISSED" -eq 0 ]
