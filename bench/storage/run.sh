#!/usr/bin/env bash
# The storage engine (no HTTP) against fio on the same file system, in one run. Each figure is
# measured REPEAT times, fio and hots3 back to back, and the medians are compared:
#
#   sequential write, 1 MiB I/Os, queue depth 16   fio io_uring direct   vs 8 writers x 2 in flight
#   sequential read, the same                      fio io_uring direct   vs 8 readers x 2, cache off
#   random reads 4 KiB and 64 KiB, depth 32        fio io_uring direct   vs 32 ranged readers
#   durable 4 KiB puts                             fio fdatasync per write vs 64 writers (inline)
#   a hot 64 MiB object read again and again       fio buffered (page cache) vs the block cache
#   HEAD/GET p50/p99, listing, start-up            10^3 vs SCALE_MAX objects, cold and warm
#
# usage: bench/storage/run.sh [BUILD_DIR]      (default build/release)
#   env: REPEAT (3), SECONDS_EACH (10), SCALE_MAX (1000000), BENCH_TMPDIR (/var/tmp)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${1:-build/release}
REPEAT=${REPEAT:-3}
SECONDS_EACH=${SECONDS_EACH:-10}
SCALE_MAX=${SCALE_MAX:-1000000}
BENCH=$ROOT/$BUILD/bench/hots3-storage-bench
[ -x "$BENCH" ] || { echo "build $BENCH first" >&2; exit 1; }
command -v fio >/dev/null || { echo "needs fio" >&2; exit 1; }

WORK=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/hots3-bench-storage.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# fio_run METRIC fio-args... -> prints the metric (read/write bw in MB/s, or iops)
fio_run() {
  local metric=$1
  shift
  fio --output-format=json --name=bench --filename="$WORK/fio.dat" "$@" > "$WORK/fio.json" 2>/dev/null
  python3 - "$WORK/fio.json" "$metric" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
kind, what = sys.argv[2].split(".")
print(job[kind]["bw_bytes"] / 1e6 if what == "mbs" else job[kind]["iops"])
PY
}

# hots3_run FIGURE bench-args... -> prints the figure's value
hots3_run() {
  local figure=$1
  shift
  "$BENCH" "$@" --data "$WORK/hots3" > "$WORK/bench.out"
  cp "$WORK/bench.out" "$WORK/last-$figure.out"  # for the latencies printed after the table
  awk -v f="$figure" '$1 == f { print $2 }' "$WORK/bench.out"
}

median() { python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

# The host's share of this VM's CPU time (steal, from /proc/stat): hots3 needs the cores, fio
# mostly waits on the disk, so a host that takes CPU lowers hots3's side of a ratio alone.
cpu_ticks() { awk '/^cpu / { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }

ROWS=()
row() {  # name hots3 fio goal stolen%
  ROWS+=("$(python3 -c 'import sys; n, h, f, g, st = sys.argv[1:]; h, f = float(h), float(f)
print("%-44s %10.0f %10.0f %7.0f%% %7s%%   %s" % (n, h, f, 100 * h / f, st, g))' "$1" "$2" "$3" "$4" "$5")")
}

# compare NAME GOAL "fio args" "hots3 args" [setup command run before each repetition]
compare() {
  local name=$1 goal=$2 fio_args=$3 hots3_args=$4 setup=${5:-}
  local f=() h=() stolen=0 ticks=0 s0 t0 s1 t1
  for _ in $(seq "$REPEAT"); do
    [ -z "$setup" ] || eval "$setup"
    # shellcheck disable=SC2086
    f+=("$(fio_run $fio_args)")
    read -r s0 t0 < <(cpu_ticks)
    # shellcheck disable=SC2086
    h+=("$(hots3_run $hots3_args)")
    read -r s1 t1 < <(cpu_ticks)
    stolen=$((stolen + s1 - s0)) ticks=$((ticks + t1 - t0))
  done
  row "$name" "$(median "${h[@]}")" "$(median "${f[@]}")" "$goal" "$(awk -v s=$stolen -v t=$ticks 'BEGIN { printf "%.1f", t ? 100 * s / t : 0 }')"
}

T=$SECONDS_EACH
DIRECT="--direct=1 --ioengine=io_uring"
FRESH='rm -rf "$WORK/hots3" "$WORK/fio.dat"'

compare "sequential write 1 MiB x16, MB/s" ">= 90%" \
  "write.mbs --rw=write --bs=1M --size=4G --iodepth=16 $DIRECT" \
  "seqwrite_MBps seqwrite --streams 8 --depth 2 --objects 16 --size 256MiB" "$FRESH"
compare "sequential read 1 MiB x16, cache off, MB/s" ">= 90%" \
  "read.mbs --rw=read --bs=1M --size=4G --iodepth=16 $DIRECT" \
  "seqread_MBps seqread --streams 8 --depth 2 --objects 16 --size 256MiB"
rm -rf "$WORK/hots3" "$WORK/fio.dat"
compare "random read 4 KiB x32, IOPS" ">= 80%" \
  "read.iops --rw=randread --bs=4k --size=4G --iodepth=32 --time_based --runtime=$T $DIRECT" \
  "randread_4KiB_IOPS randread --bs 4KiB --size 4GiB --concurrency 32 --seconds $T"
compare "random read 64 KiB x32, IOPS" ">= 80%" \
  "read.iops --rw=randread --bs=64k --size=4G --iodepth=32 --time_based --runtime=$T $DIRECT" \
  "randread_64KiB_IOPS randread --bs 64KiB --size 4GiB --concurrency 32 --seconds $T"
compare "durable 4 KiB puts x64 vs fdatasync/write, /s" ">= 1000%" \
  "write.iops --rw=write --bs=4k --size=256M --fdatasync=1 --iodepth=1 --time_based --runtime=$T --direct=1" \
  "smallput_ops smallput --size 4KiB --concurrency 64 --seconds $T" "$FRESH"
HOT_FIO="read.mbs --rw=read --bs=1M --size=64M --time_based --runtime=$T --ioengine=psync --invalidate=0 --pre_read=1"
compare "hot 64 MiB object vs page cache, MB/s" ">= 85%" "$HOT_FIO" \
  "hotread_MBps hotread --size 64MiB --cache 1GiB --seconds $T" "$FRESH"

echo "hots3 storage engine vs fio on the same file system: $(nproc) cores, median of $REPEAT, $(date +%F)"
printf '%-44s %10s %10s %8s %8s   %s\n' workload hots3 fio ratio stolen goal
echo "(stolen: the share of this VM's CPU time the host took while hots3 ran, from /proc/stat)"
printf '%s\n' "${ROWS[@]}"
echo "latencies in the last round of each, µs:"
for figure in randread_4KiB_IOPS randread_64KiB_IOPS smallput_ops; do
  awk '$1 ~ /_p[0-9]+_us$/ { printf "  %-28s %10s\n", $1, $2 }' "$WORK/last-$figure.out"
done

# ---- scale: the same figures with 10^3 and SCALE_MAX objects (8 KiB, on the device) ----------
# HEAD/GET of random keys just after a start, then of the same keys again (warm_), with the
# metadata cache off (every record through SQLite) and then on (cached_warm_: records from the
# cache, 1 GiB here; the server's default is an eighth of memory). Block cache off: every GET
# reads its 8 KiB from the device, so beside them fio reads 8 KiB at random, at depth 1, from the
# same device file over the span the objects occupy (8 MB at 10^3, 8 GB at 10^6): the device's own
# latency at each size.
echo
echo "scale (8 KiB objects in 1000-key directories; HEAD/GET through the catalog, cached_: metadata cache on):"
declare -A SCALE
for count in 1000 "$SCALE_MAX"; do
  rm -rf "$WORK/hots3"
  for cache in 0 1GiB; do
    prefix=; [ "$cache" = 0 ] || prefix=cached_
    "$BENCH" scale --data "$WORK/hots3" --count "$count" --size 8KiB --device-size 16GiB --metadata-cache "$cache" \
      > "$WORK/scale-$count.out"
    while read -r name value _; do SCALE[$prefix$name,$count]=$value; done < "$WORK/scale-$count.out"
  done
  span=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT max(device_offset + device_length) FROM extents").fetchone()[0])' "$WORK/hots3/catalog.db")
  fio --output-format=json --name=lat --filename="$WORK/hots3/device.img" --readonly --rw=randread --bs=8k \
    --iodepth=1 --direct=1 --ioengine=psync --size="$span" --time_based --runtime="$T" > "$WORK/fio-lat.json" 2>/dev/null
  read -r p50 p99 < <(python3 - "$WORK/fio-lat.json" <<'PY'
import json, sys
clat = json.load(open(sys.argv[1]))["jobs"][0]["read"]["clat_ns"]["percentile"]
print(clat["50.000000"] / 1e3, clat["99.000000"] / 1e3)
PY
)
  SCALE[fio_read_8k_p50_us,$count]=$p50
  SCALE[fio_read_8k_p99_us,$count]=$p99
done
printf '%-28s %12s %12s\n' figure 1000 "$SCALE_MAX"
for name in startup_ms startup_rebuild_ms head_p50_us head_p99_us warm_head_p50_us warm_head_p99_us \
  cached_warm_head_p50_us cached_warm_head_p99_us get_p50_us get_p99_us warm_get_p50_us warm_get_p99_us \
  cached_warm_get_p50_us cached_warm_get_p99_us fio_read_8k_p50_us fio_read_8k_p99_us list_directory_ms \
  list_root_ms fill_puts_per_s; do
  printf '%-28s %12s %12s\n' "$name" "${SCALE[$name,1000]:-}" "${SCALE[$name,$SCALE_MAX]:-}"
done
echo "(list_root: one common prefix per directory: 1 at 10^3, $(( (SCALE_MAX + 999) / 1000 )) at $SCALE_MAX)"
