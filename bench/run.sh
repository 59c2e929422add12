#!/usr/bin/env bash
# hots3 against the machine's own limits, side by side, in one run on one device.
#
#   limits  fio (io_uring, direct=1) on the device for each pattern, at the queue depth hots3
#           itself reaches; nginx on loopback serving the same sizes from files (GET, page
#           cache) and taking them by WebDAV PUT
#   hots3   the same patterns through hots3-loadgen (SigV4, full S3 path):
#             large GET cold (block cache off: every byte from the device), large PUT,
#             hot large GET (cache on, the same objects read again), 4 KiB GET (and in a
#             directory bucket with S3 Express sessions, vs the general bucket's),
#             4 KiB durable PUT (vs fio's one-flush-per-write rate, goal x10),
#             checkpoint save/load (bench/checkpoint/run.sh)
#   cpu     the server's CPU per request vs nginx's for small GET, HEAD, PUT, ranges and a
#           list page, one worker each (bench/s3/cpu.sh)
#   scaling HEAD/GET p50/p99 and one list page (1000 keys, with and without delimiter) at
#           10^3, 10^5, 10^6 objects; start-up time with the largest catalog; RSS at 1000 idle
#           connections and at 256 concurrent streaming GETs of STREAM_SIZE objects
#   loadgen the generator's CPU per 4 KiB GET against hots3's (it must be the cheaper side), and
#           the generator against nginx next to wrk
#   peers   PEERS=radosgw: the same loadgen rows against Ceph's radosgw (bench/peers/radosgw.sh)
#
# Queue depth: hots3 keeps stream_depth (4) device I/Os of io_buffer_size (1 MiB) in flight per
# stream, bounded by io_buffers (32) per worker; with LARGE_C streams that is
# min(LARGE_C * 4, THREADS * 32) I/Os, and fio runs its large patterns at exactly that depth
# with bs=1M. The durable 4 KiB limit is fio at depth 1 with fdatasync after every write (the
# rate of a server that flushes once per PUT); hots3 must beat it tenfold by group commit.
#
# Prints every figure with its limit, the ratio, the goal and PASS/MISSED; writes all rows
# as JSON to RESULTS (default bench-results.json). Exits 1 if a goal is missed or a run had
# errors.
#
# usage: bench/run.sh [BUILD_DIR]        (default build/release, what packaging/setup.sh builds)
# env:   QUICK=1        a smoke run of a minute or two (tiny sizes, 10^3/10^4 objects)
#        BENCH_DEVICE   a block device to use instead of a file under BENCH_TMPDIR (ERASED)
#        BENCH_TMPDIR   where the work directory and device file go (default /var/tmp)
#        THREADS (server workers and nginx workers, default: cores) DURATION (10s) PEERS
#        RESULTS, SCALES ("1000 100000 1000000"), LARGE (64MiB), LARGE_OBJECTS (32),
#        LARGE_C (8), SMALL_C (64), SCALE_C (16), SCALE_SIZE (1KiB), STREAM_SIZE (1GiB),
#        LG_TIMEOUT (seconds one loadgen run may take: 900, QUICK 60), STREAM_TIMEOUT (600)
# Takes about 20 minutes (QUICK=1: about 3); PEERS=radosgw adds about 3.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUILD=${1:-build/release}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
HOTS3=$BUILD/src/hots3
LOADGEN=$BUILD/bench/hots3-loadgen
[ -x "$HOTS3" ] && [ -x "$LOADGEN" ] || { echo "build $HOTS3 and $LOADGEN first" >&2; exit 1; }
need fio wrk nginx curl

THREADS=${THREADS:-$(nproc)}
if [ "${QUICK:-0}" = 1 ]; then
  DURATION=${DURATION:-2s} WARMUP=${WARMUP:-1s} LARGE=${LARGE:-16MiB} LARGE_OBJECTS=${LARGE_OBJECTS:-8}
  SCALES=${SCALES:-"1000 10000"} STREAM_SIZE=${STREAM_SIZE:-16MiB} STREAM_OBJECTS=${STREAM_OBJECTS:-4}
  CKPT_ENV=(WRITERS=2 SHARD=64MiB PART=8MiB ROUNDS=1 READERS=2)
  LG_TIMEOUT=${LG_TIMEOUT:-60}
else
  DURATION=${DURATION:-10s} WARMUP=${WARMUP:-2s} LARGE=${LARGE:-64MiB} LARGE_OBJECTS=${LARGE_OBJECTS:-32}
  SCALES=${SCALES:-"1000 100000 1000000"} STREAM_SIZE=${STREAM_SIZE:-1GiB} STREAM_OBJECTS=${STREAM_OBJECTS:-4}
  CKPT_ENV=()
  LG_TIMEOUT=${LG_TIMEOUT:-900}
  STREAM_TIMEOUT=${STREAM_TIMEOUT:-600}
fi
export DURATION
LARGE_C=${LARGE_C:-8}
SMALL_C=${SMALL_C:-64}
SCALE_C=${SCALE_C:-16}
SCALE_SIZE=${SCALE_SIZE:-1KiB}
SCALE_DIRS=1000
STREAMS=256
IDLE_CONNECTIONS=1000
RESULTS=${RESULTS:-$ROOT/bench-results.json}
STREAM_DEPTH=4 IO_BUFFERS=32  # hots3's defaults (conf/hots3.toml), which this run keeps
DEPTH=$(( LARGE_C * STREAM_DEPTH < THREADS * IO_BUFFERS ? LARGE_C * STREAM_DEPTH : THREADS * IO_BUFFERS ))

bytes() { python3 -c 'import re, sys
n, u = re.fullmatch(r"(\d+)\s*([KMGT]i?B?)?", sys.argv[1]).groups()
print(int(n) * 1024 ** " KMGT".index((u or " ")[0]))' "$1"; }
secs() { python3 -c 'import sys; s = sys.argv[1]; print(float(s[:-1]) * {"s": 1, "m": 60}[s[-1]])' "$1"; }
LARGE_BYTES=$(bytes "$LARGE")
DATA_BYTES=$((LARGE_OBJECTS * LARGE_BYTES))
GiB=$((1024 * 1024 * 1024))

bench_init run
export BENCH_ROWS=$WORK/rows.jsonl
: > "$BENCH_ROWS"
export BENCH_DEVICE=${BENCH_DEVICE:-$WORK/device.img}
ERRORS=0

# lg NAME ARGS...: one hots3-loadgen run, its JSON in $WORK/lg-NAME.json, its table in
# $WORK/lg-NAME.out. A run with errors, or one that fails or outlives LG_TIMEOUT (seconds,
# default 600: a server that stops answering must not stall the whole bench), is reported and
# counted in ERRORS; its figures read as nan (and so miss their goal).
lg() {
  local name=$1 rc=0
  shift
  timeout "${LG_TIMEOUT:-600}" "$LOADGEN" --json "$WORK/lg-$name.json" "$@" > "$WORK/lg-$name.out" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    echo "ERROR: loadgen $name $([ "$rc" = 124 ] && echo "timed out after ${LG_TIMEOUT:-600} s" || echo "failed ($rc)"): $(tail -3 "$WORK/lg-$name.out")"
    rm -f "$WORK/lg-$name.json"
    ERRORS=$((ERRORS + 1))
    return 0
  fi
  local errors
  errors=$(python3 -c 'import json, sys; print(sum(o["errors"] for o in json.load(open(sys.argv[1]))["ops"].values()))' "$WORK/lg-$name.json")
  if [ "$errors" != 0 ]; then
    echo "ERROR: loadgen $name had $errors errors:" && grep -E "error" "$WORK/lg-$name.out" | head -5
    ERRORS=$((ERRORS + 1))
  fi
}
lgv() {  # lgv NAME ops.GET.mb_per_s: a figure of a loadgen run, nan when the run failed
  if [ -s "$WORK/lg-$1.json" ]; then json_get "$WORK/lg-$1.json" "$2"; else echo nan; fi
}
mean_of() {  # mean_of FIGURE NAME...: the mean of a figure over loadgen runs
  local figure=$1 name values=()
  shift
  for name in "$@"; do values+=("$(lgv "$name" "$figure")"); done
  python3 -c 'import sys; v = [float(x) for x in sys.argv[1:]]; print(sum(v) / len(v))' "${values[@]}"
}

echo "== hots3 bench: $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?'), QUICK=${QUICK:-0}"
bench/machine.sh "$(dirname "$BENCH_DEVICE")"
echo "device: $BENCH_DEVICE; $THREADS server workers; large: $LARGE_OBJECTS x $LARGE at $LARGE_C streams"
echo "  (queue depth $DEPTH, bs 1M); small: 4 KiB at $SMALL_C connections; $DURATION per run after $WARMUP warm-up"
echo

# ---- the limits: fio on the device --------------------------------------------------------
echo "-- fio on $BENCH_DEVICE"
FIO_W=$(fio_mbs write --rw=write --bs=1M --size="$DATA_BYTES" --iodepth="$DEPTH" --direct=1 --ioengine=io_uring --end_fsync=1)
FIO_READ=(--rw=read --bs=1M --size="$DATA_BYTES" --iodepth="$DEPTH" --direct=1 --ioengine=io_uring
  --runtime="$(secs "$DURATION")" --time_based)
FIO_R=$(fio_mbs read "${FIO_READ[@]}")
FIO_SYNC=$(fio_iops write --rw=write --bs=4k --size=64M --iodepth=1 --direct=1 --fdatasync=1 --ioengine=io_uring \
  --runtime="$(secs "$DURATION")" --time_based)
fio_done
echo "   write $FIO_W MB/s, read $FIO_R MB/s (bs 1M, depth $DEPTH); 4 KiB + fdatasync: $FIO_SYNC writes/s"

# ---- the limits: nginx on loopback ------------------------------------------------------------
echo "-- nginx ($THREADS workers) and wrk"
start_nginx "$THREADS"
mkdir -p "$WORK/www/bench"
head -c "$LARGE_BYTES" /dev/urandom > "$WORK/www/bench/large"
head -c 4096 /dev/urandom > "$WORK/www/bench/small"
PUT_LUA=$(wrk_put_lua)
read -r _ N_LARGE_GET e1 < <(wrk_run nginx-large-get "$LARGE_C" "$NGINX_URL/bench/large")
read -r N_SMALL_GET _ e2 < <(wrk_run nginx-small-get "$SMALL_C" "$NGINX_URL/bench/small")
# PUT throughput is requests/s times the body: wrk's Transfer/sec counts only response bytes.
read -r n_put_rps _ e3 < <(BODY_FILE=$WORK/www/bench/large wrk_run nginx-large-put "$LARGE_C" "$NGINX_URL/dav/large" "$PUT_LUA")
N_LARGE_PUT=$(python3 -c "print($n_put_rps * $LARGE_BYTES / 1e6)")
read -r N_SMALL_PUT _ e4 < <(BODY_FILE=$WORK/www/bench/small wrk_run nginx-small-put "$SMALL_C" "$NGINX_URL/dav/small" "$PUT_LUA")
[ "$e1$e2$e3$e4" = 0000 ] || { echo "ERROR: wrk errors against nginx: $e1 $e2 $e3 $e4"; ERRORS=$((ERRORS + 1)); }
# The generator itself against nginx, 4 KiB GETs (prepared by WebDAV PUT), next to wrk.
lg nginx-small-get --plain --endpoint "$NGINX_URL" --bucket dav --prefix lg-small/ --workload get --size 4KiB \
  --objects 1000 -c "$SMALL_C" --duration "$DURATION" --warmup "$WARMUP"
LG_NGINX_SMALL=$(lgv nginx-small-get ops.GET.ops_per_s)
rm -rf "$WORK/dav"
echo "   GET $LARGE: $N_LARGE_GET MB/s, PUT $LARGE: $N_LARGE_PUT MB/s; 4 KiB GET $N_SMALL_GET/s (loadgen: $LG_NGINX_SMALL/s), PUT $N_SMALL_PUT/s"

# ---- hots3 --------------------------------------------------------------------------------------
hots3_storage() {  # device_bytes cache_size -> the [storage] table
  printf '[storage]\ndevice_size = %s\ncache_size = %s\n' "$1" "$2"
}
echo "-- hots3, block cache off"
start_hots3 "$HOTS3" "$THREADS" "$(hots3_storage $((2 * DATA_BYTES + 2 * GiB)) 0)"
lg large-get-cold --endpoint "$HOTS3_URL" --bucket large --workload get --size "$LARGE" --objects "$LARGE_OBJECTS" \
  -c "$LARGE_C" --duration "$DURATION" --warmup "$WARMUP" --server-pid "$HOTS3_PID"
# A shared VM's disk drifts within minutes (the same file has read at 1.1 and 2.8 GB/s in one
# day): fio reads again right after hots3's cold GET, and that row's limit is the mean of the two.
# A file of its own (hots3's device file is in use), or the block device itself (read only).
FIO_AFTER=$WORK/fio-after.dat
[ -b "$BENCH_DEVICE" ] && FIO_AFTER=$BENCH_DEVICE
FIO_R_AFTER=$(FIO_FILE=$FIO_AFTER fio_mbs read "${FIO_READ[@]}")
[ -b "$FIO_AFTER" ] || rm -f "$FIO_AFTER"
FIO_R_BESIDE=$(python3 -c "print(($FIO_R + $FIO_R_AFTER) / 2)")
echo "   fio read before / after hots3's cold GET: $FIO_R / $FIO_R_AFTER MB/s"
lg large-put --endpoint "$HOTS3_URL" --bucket put --workload put --overwrite --objects $((2 * LARGE_C)) \
  --size "$LARGE" -c "$LARGE_C" --duration "$DURATION" --warmup "$WARMUP" --server-pid "$HOTS3_PID"
lg small-put --endpoint "$HOTS3_URL" --bucket small-put --workload put --size 4KiB -c "$SMALL_C" \
  --duration "$DURATION" --warmup "$WARMUP" --server-pid "$HOTS3_PID"
lg small-get --endpoint "$HOTS3_URL" --bucket small --workload get --size 4KiB --objects 1000 -c "$SMALL_C" \
  --duration "$DURATION" --warmup "$WARMUP" --server-pid "$HOTS3_PID"
# The same in a directory bucket, every request signed with an S3 Express session as the SDKs
# sign them; then both again, so that a drift of the machine falls on both.
SMALL_DIR=(--endpoint "$HOTS3_URL" --bucket small--use1-az4--x-s3 --express --workload get --size 4KiB
  --objects 1000 -c "$SMALL_C" --duration "$DURATION" --warmup "$WARMUP" --server-pid "$HOTS3_PID")
lg small-get-dir "${SMALL_DIR[@]}"
lg small-get-2 --endpoint "$HOTS3_URL" --bucket small --workload get --no-prepare --size 4KiB --objects 1000 \
  -c "$SMALL_C" --duration "$DURATION" --warmup "$WARMUP" --server-pid "$HOTS3_PID"
lg small-get-dir-2 "${SMALL_DIR[@]}" --no-prepare
stop_hots3
echo "-- hots3, block cache on (twice the data)"
sed -i "s/^cache_size = 0\$/cache_size = $((2 * DATA_BYTES))/" "$WORK/hots3/hots3.toml"
relaunch_hots3
# The first pass reads every object into the cache; the second is measured.
lg large-get-fill --endpoint "$HOTS3_URL" --bucket large --workload get --no-prepare --size "$LARGE" \
  --objects "$LARGE_OBJECTS" -c "$LARGE_C" --duration "$DURATION"
lg large-get-hot --endpoint "$HOTS3_URL" --bucket large --workload get --no-prepare --size "$LARGE" \
  --objects "$LARGE_OBJECTS" -c "$LARGE_C" --duration "$DURATION" --warmup "$WARMUP" --server-pid "$HOTS3_PID"
stop_hots3

echo
table_head
row "GET $LARGE x$LARGE_C cold (cache off), MB/s" "$(lgv large-get-cold ops.GET.mb_per_s)" \
  "$(min "$FIO_R_BESIDE" "$N_LARGE_GET")" "min(fio read, nginx)" 85
row "PUT $LARGE x$LARGE_C, MB/s" "$(lgv large-put ops.PUT.mb_per_s)" "$(min "$FIO_W" "$N_LARGE_PUT")" \
  "min(fio write, nginx)" 85
row "GET $LARGE x$LARGE_C hot (cache on), MB/s" "$(lgv large-get-hot ops.GET.mb_per_s)" "$N_LARGE_GET" \
  "nginx (page cache)" 85
H_SMALL_GET=$(lgv small-get ops.GET.ops_per_s)
row "GET 4 KiB x$SMALL_C, req/s" "$H_SMALL_GET" "$N_SMALL_GET" "nginx" 60
row "GET 4 KiB x$SMALL_C, directory bucket (session), req/s" \
  "$(mean_of ops.GET.ops_per_s small-get-dir small-get-dir-2)" "$(mean_of ops.GET.ops_per_s small-get small-get-2)" \
  "general bucket" 95
row "PUT 4 KiB x$SMALL_C durable, req/s" "$(lgv small-put ops.PUT.ops_per_s)" "$FIO_SYNC" "fio 4k fdatasync/write" 1000
row_info "  (PUT 4 KiB x$SMALL_C, nginx WebDAV req/s)" "$N_SMALL_PUT" "not durable: no fsync"
# The generator is not the bottleneck when a request costs it less CPU than it costs the server:
# on shared cores the server then runs out first. Both measured in the hots3 4 KiB GET run.
SMALL_GET_OPS=$(python3 -c "print($H_SMALL_GET * $(lgv small-get seconds))")
row "loadgen 4 KiB GETs per CPU s (vs hots3's)" "$(python3 -c "print($SMALL_GET_OPS / $(lgv small-get loadgen_cpu_s))")" \
  "$(python3 -c "print($SMALL_GET_OPS / $(lgv small-get server_cpu_s))")" "hots3 per CPU s" 100
row_info "  (loadgen->nginx 4 KiB GET as % of hots3's rate)" "$(python3 -c "print(100 * $LG_NGINX_SMALL / $H_SMALL_GET)")" "percent"
row_info "  (loadgen->nginx as % of wrk->nginx)" "$(python3 -c "print(100 * $LG_NGINX_SMALL / $N_SMALL_GET)")" "percent"
for name in large-get-cold large-put large-get-hot small-get small-put; do
  row_info "  (server CPU s per GB, $name)" "$(lgv "$name" server_cpu_s_per_gb)" "s/GB"
done
for name in small-get small-get-2 small-get-dir small-get-dir-2; do
  row_info "  (server CPU us per GET, $name)" \
    "$(python3 -c "print(1e6 * $(lgv "$name" server_cpu_s) / ($(lgv "$name" ops.GET.ops_per_s) * $(lgv "$name" seconds)))")" "us"
done

# ---- checkpoint --------------------------------------------------------------------------------
echo
echo "-- checkpoint (bench/checkpoint/run.sh)"
env "${CKPT_ENV[@]}" THREADS="$THREADS" bench/checkpoint/run.sh "$BUILD" || true

# ---- CPU per small request ------------------------------------------------------------------------
echo
echo "-- CPU per request vs nginx (bench/s3/cpu.sh)"
if [ "${QUICK:-0}" = 1 ]; then
  DURATION=2s WARMUP=1s ROUNDS=1 STAGES=0 bench/s3/cpu.sh "$BUILD" || true
else
  DURATION=5s WARMUP=1s bench/s3/cpu.sh "$BUILD" || true
fi

# ---- scaling ------------------------------------------------------------------------------------
echo
echo "-- scaling: $SCALE_SIZE objects over $SCALE_DIRS directories, $SCALE_C clients"
largest=${SCALES##* }
start_hots3 "$HOTS3" "$THREADS" "$(hots3_storage $(( largest * $(bytes "$SCALE_SIZE") * 2 + 2 * GiB)) 0)"
SCALE_ARGS=(--endpoint "$HOTS3_URL" --bucket scale --dirs "$SCALE_DIRS" --size "$SCALE_SIZE")
for n in $SCALES; do
  # The fill: PUTs of objects 0..n-1 at 128 connections (the smaller sizes' objects again too).
  lg "fill-$n" "${SCALE_ARGS[@]}" --workload head --objects "$n" -c 128 --ops 1
  sync -f "$WORK"  # the fill's dirty pages reach the disk before, not during, the timed runs
  lg "head-$n" "${SCALE_ARGS[@]}" --workload head --no-prepare --objects "$n" -c "$SCALE_C" --duration "$DURATION" --warmup "$WARMUP"
  lg "get-$n" "${SCALE_ARGS[@]}" --workload get --no-prepare --objects "$n" -c "$SCALE_C" --duration "$DURATION" --warmup "$WARMUP"
  lg "list-$n" "${SCALE_ARGS[@]}" --workload list --no-prepare --list-root --max-keys 1000 --objects "$n" -c 4 \
    --duration "$DURATION" --warmup "$WARMUP"
  lg "listd-$n" "${SCALE_ARGS[@]}" --workload list --no-prepare --list-root --delimiter / --max-keys 1000 \
    --objects "$n" -c 4 --duration "$DURATION" --warmup "$WARMUP"
  echo "   $n objects: $(grep -o 'prepared .*' "$WORK/lg-fill-$n.out" || echo 'fill FAILED')"
done
stop_hots3
relaunch_hots3
STARTUP_PORT=$HOTS3_START_S STARTUP_READY=$HOTS3_READY_S
# 1000 idle connections: the RSS they add (each has sent nothing; measured after a second).
IDLE=$(python3 - "$HOTS3_PID" "$(cat "$WORK/hots3/port")" "$IDLE_CONNECTIONS" <<'PY'
import re, socket, sys, time
pid, port, n = map(int, sys.argv[1:])
rss = lambda: int(re.search(r"^VmRSS:\s+(\d+) kB", open("/proc/%d/status" % pid).read(), re.M).group(1)) * 1024
before = rss()
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
time.sleep(1)
after = rss()
alive = 0
for s in socks:
    s.setblocking(False)
    try:
        alive += s.recv(1) != b""
    except BlockingIOError:
        alive += 1
print(after / 2**20, (after - before) / n / 1024, alive)
PY
)
read -r IDLE_RSS IDLE_PER IDLE_ALIVE <<<"$IDLE"
stop_hots3
# 256 concurrent streaming GETs of STREAM_SIZE objects, block cache off: one GET per client.
start_hots3 "$HOTS3" "$THREADS" "$(hots3_storage $(( STREAM_OBJECTS * $(bytes "$STREAM_SIZE") + 2 * GiB)) 0)"
LG_TIMEOUT=${STREAM_TIMEOUT:-$LG_TIMEOUT} lg streams --endpoint "$HOTS3_URL" --bucket streams --workload get --size "$STREAM_SIZE" --objects "$STREAM_OBJECTS" \
  -c "$STREAMS" --ops "$STREAMS" --duration 3600s --server-pid "$HOTS3_PID"
[ -s "$WORK/lg-streams.json" ] || echo "   (the streaming GETs did not finish: peak RSS unknown)"
stop_hots3

echo
table_head
smallest=${SCALES%% *}
for n in $SCALES; do
  for op in HEAD GET; do
    w=$(echo "$op" | tr A-Z a-z)
    row_info "$op p50 ms at $n objects" "$(lgv "$w-$n" "ops.$op.p50_ms")" "ms (x$SCALE_C)"
    row_info "$op p99 ms at $n objects" "$(lgv "$w-$n" "ops.$op.p99_ms")" "ms (x$SCALE_C)"
  done
  row_info "list 1000 keys p50 ms at $n objects" "$(lgv "list-$n" ops.LIST.p50_ms)" "ms (x4)"
  row_info "list 1000 prefixes (delim /) p50 ms, $n" "$(lgv "listd-$n" ops.LIST.p50_ms)" "ms (x4)"
done
for op in HEAD GET; do
  w=$(echo "$op" | tr A-Z a-z)
  for p in p50 p99; do
    row_flat "$op $p, $largest vs $smallest objects, ms" "$(lgv "$w-$smallest" "ops.$op.${p}_ms")" \
      "$(lgv "$w-$largest" "ops.$op.${p}_ms")" 20
  done
done
row_flat "list page p50, $largest vs $smallest, ms" "$(lgv "list-$smallest" ops.LIST.p50_ms)" "$(lgv "list-$largest" ops.LIST.p50_ms)" 20
row_flat "list page delim p50, $largest vs $smallest, ms" "$(lgv "listd-$smallest" ops.LIST.p50_ms)" \
  "$(lgv "listd-$largest" ops.LIST.p50_ms)" 20
row_info "start-up, $largest objects: exec to port, s" "$STARTUP_PORT" "s"
row_info "start-up, $largest objects: exec to ready, s" "$STARTUP_READY" "s"
row_info "RSS, $IDLE_CONNECTIONS idle connections, MiB" "$IDLE_RSS" "MiB ($IDLE_ALIVE still open)"
row_info "  RSS per idle connection, KiB" "$IDLE_PER" "KiB"
row_max "peak RSS, $STREAMS streaming $STREAM_SIZE GETs, MiB" \
  "$(python3 -c "print(float('$(lgv streams server_peak_rss_bytes)') / 2**20)")" 256 "MiB (cache off)"
row_info "  ($STREAMS streaming GETs, MB/s)" "$(lgv streams ops.GET.mb_per_s)" "MB/s"

# ---- peers --------------------------------------------------------------------------------------
for peer in ${PEERS:-}; do
  echo
  echo "-- peer: $peer (bench/peers/$peer.sh)"
  # shellcheck disable=SC1090
  . "bench/peers/$peer.sh"
  trap 'peer_stop; bench_cleanup' EXIT
  if ! peer_start; then
    echo "   $peer could not be started; see the log above"
    continue
  fi
  P=(--endpoint "$PEER_URL" --access-key "$PEER_ACCESS_KEY" --secret-key "$PEER_SECRET_KEY")
  lg "$peer-large-get" "${P[@]}" --bucket large --workload get --size "$LARGE" --objects "$LARGE_OBJECTS" \
    -c "$LARGE_C" --duration "$DURATION" --warmup "$WARMUP"
  lg "$peer-large-put" "${P[@]}" --bucket put --workload put --overwrite --objects $((2 * LARGE_C)) \
    --size "$LARGE" -c "$LARGE_C" --duration "$DURATION" --warmup "$WARMUP"
  lg "$peer-small-put" "${P[@]}" --bucket small-put --workload put --size 4KiB -c "$SMALL_C" \
    --duration "$DURATION" --warmup "$WARMUP"
  lg "$peer-small-get" "${P[@]}" --bucket small --workload get --size 4KiB --objects 1000 -c "$SMALL_C" \
    --duration "$DURATION" --warmup "$WARMUP"
  peer_stop
  echo
  table_head
  row_ratio "GET $LARGE x$LARGE_C, MB/s, vs $peer" "$(lgv large-get-cold ops.GET.mb_per_s)" \
    "$(lgv "$peer-large-get" ops.GET.mb_per_s)" "$peer"
  row_ratio "PUT $LARGE x$LARGE_C, MB/s, vs $peer" "$(lgv large-put ops.PUT.mb_per_s)" \
    "$(lgv "$peer-large-put" ops.PUT.mb_per_s)" "$peer"
  row_ratio "GET 4 KiB x$SMALL_C, req/s, vs $peer" "$H_SMALL_GET" "$(lgv "$peer-small-get" ops.GET.ops_per_s)" "$peer"
  row_ratio "PUT 4 KiB x$SMALL_C, req/s, vs $peer" "$(lgv small-put ops.PUT.ops_per_s)" \
    "$(lgv "$peer-small-put" ops.PUT.ops_per_s)" "$peer"
done

# ---- the whole table, and JSON ------------------------------------------------------------------
python3 - "$BENCH_ROWS" "$RESULTS" "$ERRORS" <<PY
import json, os, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out = {"date": "$(date -u +%Y-%m-%dT%H:%MZ)", "commit": "$(git rev-parse HEAD 2>/dev/null || true)",
       "quick": "${QUICK:-0}" == "1", "machine": subprocess.run(["bench/machine.sh", "$(dirname "$BENCH_DEVICE")"],
       capture_output=True, text=True).stdout.strip().splitlines(),
       "device": "$BENCH_DEVICE", "server_threads": $THREADS, "queue_depth": $DEPTH, "duration": "$DURATION",
       "limits": {"fio_write_mb_s": $FIO_W, "fio_read_mb_s": $FIO_R, "fio_read_after_cold_get_mb_s": $FIO_R_AFTER, "fio_4k_fdatasync_iops": $FIO_SYNC,
                  "nginx_large_get_mb_s": $N_LARGE_GET, "nginx_large_put_mb_s": $N_LARGE_PUT,
                  "nginx_small_get_rps": $N_SMALL_GET, "nginx_small_put_rps": $N_SMALL_PUT},
       "run_errors": int(sys.argv[3]), "rows": rows}
json.dump(out, open(sys.argv[2], "w"), indent=1)
judged = [r for r in rows if r["verdict"] in ("PASS", "MISSED")]
missed = [r for r in judged if r["verdict"] == "MISSED"]
print()
print("== %d goals: %d PASS, %d MISSED%s; JSON in %s" % (len(judged), len(judged) - len(missed), len(missed),
      ", %d runs with errors (figures not valid)" % int(sys.argv[3]) if int(sys.argv[3]) else "", sys.argv[2]))
for r in missed:
    print("   MISSED: %s: %.1f vs %.1f (%s), goal %s" % (r["figure"], r["hots3"], r["limit"], r["limit_is"], r["goal"]))
sys.exit(1 if missed or int(sys.argv[3]) else 0)
PY
