#!/usr/bin/env bash
# The S3 API against the machine's limits, in one run:
#   GET 64 MiB objects at 8 connections (MB/s)      vs nginx (page cache) and fio O_DIRECT read
#   GET 4 KiB objects at 64 connections (req/s)     vs nginx
#   PUT 4 KiB objects at 64 connections (req/s)     vs nginx WebDAV PUT
#   ranged 1 MiB GETs at random offsets of 1 GiB    vs nginx
#   PUT 64 MiB objects at 8 connections (MB/s)      vs nginx WebDAV PUT and fio O_DIRECT write
# hots3 is measured twice for GETs: with its cache off (every byte from the device) and on.
# wrk drives both servers with presigned URLs (SigV4, signed by boto3), so the request path
# includes hots3's full authentication.
#
# usage: bench/s3/run.sh [BUILD_DIR]  (default build/release)   env: THREADS (server workers, default 2), DURATION (10s)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUILD=${1:-build/release}
THREADS=${THREADS:-2}
DURATION=${DURATION:-10s}
WRK_THREADS=$THREADS
export DURATION WRK_THREADS
HOTS3=$PWD/$BUILD/src/hots3
[ -x "$HOTS3" ] || { echo "build $HOTS3 first" >&2; exit 1; }
need wrk fio nginx curl
bench_init s3
MiB=$((1024 * 1024))

# ---- the same bytes for both servers ------------------------------------------------------
mkdir -p "$WORK/www/bench"
head -c $((64 * MiB)) /dev/urandom > "$WORK/www/bench/large"
head -c 4096 /dev/urandom > "$WORK/www/bench/small"
head -c $((1024 * MiB)) /dev/urandom > "$WORK/www/bench/gig"
cp "$WORK/www/bench/large" "$WORK/large.body"
cp "$WORK/www/bench/small" "$WORK/small.body"

# ---- wrk scripts ------------------------------------------------------------------------------
PUT_LUA=$(wrk_put_lua)
cat > "$WORK/range.lua" <<'LUA'
local chunk = 1048576
request = function()
  local offset = math.random(0, 1023) * chunk
  return wrk.format("GET", nil, {["Range"] = "bytes=" .. offset .. "-" .. (offset + chunk - 1)})
end
LUA
run_wrk() { wrk_run s3 "$@"; }  # connections url [script] -> "requests_per_s megabytes_per_s errors"

# ---- nginx: GET from the page cache, WebDAV PUT ---------------------------------------------------
start_nginx "$THREADS"
N=$NGINX_URL

# ---- hots3 --------------------------------------------------------------------------------------
hots3_with_cache() {  # cache_size -> sets H (endpoint)
  start_hots3 "$HOTS3" "$THREADS" "[storage]
device_size = \"8GiB\"
cache_size = \"$1\""
  H=$HOTS3_URL
}

# Uploads the objects and prints presigned URLs (GET large/small/gig, PUT large/small).
presign() {
  python3 - "$H" "$WORK/www/bench" <<'PY'
import sys, boto3
from botocore.config import Config
endpoint, src = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="HOTS3BENCHACCESSKEY1",
                  aws_secret_access_key="hots3-bench-secret-key-0123456789abcdef", region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
s3.create_bucket(Bucket="bench")
for name in ("large", "small", "gig"):
    s3.upload_file("%s/%s" % (src, name), "bench", name)
for method, key in (("get_object", "large"), ("get_object", "small"), ("get_object", "gig"),
                    ("put_object", "put-large"), ("put_object", "put-small")):
    print(s3.generate_presigned_url(method, Params={"Bucket": "bench", "Key": key}, ExpiresIn=3600))
PY
}

ratio() { python3 -c "print('%.0f%%' % (100.0 * $1 / $2) if $2 > 0 else 'n/a')"; }
row() {  # label hots3 limit limit_name (this script's own table: no goals)
  printf '%-44s %12.0f %12.0f %-16s %6s\n' "$1" "$2" "$3" "$4" "$(ratio "$2" "$3")"
}

echo "hots3 S3 API vs the machine's limits: $(nproc) cores, $THREADS server workers, wrk -t$THREADS -d$DURATION, $(date -u +%Y-%m-%d)"
printf '%-44s %12s %12s %-16s %6s\n' "workload" "hots3" "limit" "(limit)" "ratio"

# fio on the same file system as the device file: O_DIRECT, 1 MiB, queue depth 8 (= 8 streams).
FIO_W=$(fio_mbs write --ioengine=io_uring --direct=1 --rw=write --bs=1M --iodepth=8 --size=2G)
FIO_R=$(fio_mbs read --ioengine=io_uring --direct=1 --rw=read --bs=1M --iodepth=8 --size=2G --runtime=10 --time_based)
fio_done

read -r _ n_large_mbs _ < <(run_wrk 8 "$N/bench/large")
read -r n_small_rps _ _ < <(run_wrk 64 "$N/bench/small")
read -r n_range_rps n_range_mbs _ < <(run_wrk 8 "$N/bench/gig" "$WORK/range.lua")
read -r n_put_small _ _ < <(BODY_FILE=$WORK/small.body run_wrk 64 "$N/dav/small" "$PUT_LUA")
# PUT throughput is requests/s times the body: wrk's Transfer/sec counts only response bytes.
read -r n_put_large_rps _ _ < <(BODY_FILE=$WORK/large.body run_wrk 8 "$N/dav/large" "$PUT_LUA")
n_put_large=$(python3 -c "print($n_put_large_rps * 64 * 1048576 / 1e6)")

for cache in 0 auto; do
  hots3_with_cache "$cache"
  mapfile -t URLS < <(presign)
  read -r _ h_large_mbs e1 < <(run_wrk 8 "${URLS[0]}")
  read -r h_range_rps h_range_mbs e3 < <(run_wrk 8 "${URLS[2]}" "$WORK/range.lua")
  if [ "$cache" = 0 ]; then
    low=$(python3 -c "print(min($FIO_R, $n_large_mbs))")
    row "GET 64 MiB x8, cache off, MB/s" "$h_large_mbs" "$low" "min(fio,nginx)"
    row "ranged 1 MiB GET x8, cache off, MB/s" "$h_range_mbs" "$(python3 -c "print(min($FIO_R, $n_range_mbs))")" "min(fio,nginx)"
    read -r h_put_small _ e4 < <(BODY_FILE=$WORK/small.body run_wrk 64 "${URLS[4]}" "$PUT_LUA")
    read -r h_put_large_rps _ e5 < <(BODY_FILE=$WORK/large.body run_wrk 8 "${URLS[3]}" "$PUT_LUA")
    h_put_large=$(python3 -c "print($h_put_large_rps * 64 * 1048576 / 1e6)")
    row "PUT 64 MiB x8, MB/s" "$h_put_large" "$(python3 -c "print(min($FIO_W, $n_put_large))")" "min(fio,nginx)"
    row "PUT 4 KiB x64, req/s" "$h_put_small" "$n_put_small" "nginx WebDAV"
    [ "$e4$e5" = "00" ] || echo "  (PUT errors: $e4 small, $e5 large)"
  else
    read -r h_small_rps _ e2 < <(run_wrk 64 "${URLS[1]}")
    row "GET 64 MiB x8, cache on (hot), MB/s" "$h_large_mbs" "$n_large_mbs" "nginx"
    row "ranged 1 MiB GET x8, cache on, MB/s" "$h_range_mbs" "$n_range_mbs" "nginx"
    row "GET 4 KiB x64, req/s" "$h_small_rps" "$n_small_rps" "nginx"
  fi
  [ "$e1$e3" = "00" ] || echo "  (GET errors: $e1 large, $e3 ranged)"
  stop_hots3
done
echo "limits: fio O_DIRECT write $FIO_W MB/s, read $FIO_R MB/s (bs 1 MiB, qd 8)"
