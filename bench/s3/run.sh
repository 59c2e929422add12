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
# usage: bench/s3/run.sh [BUILD_DIR]    env: THREADS (server workers, default 2), DURATION (10s)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${1:-build}
THREADS=${THREADS:-2}
DURATION=${DURATION:-10s}
HOTS3=$ROOT/$BUILD/src/hots3
[ -x "$HOTS3" ] || { echo "build $HOTS3 first" >&2; exit 1; }
for tool in wrk fio; do command -v $tool >/dev/null || { echo "needs $tool" >&2; exit 1; }; done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

WORK=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/hots3-bench-s3.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
MiB=$((1024 * 1024))

# ---- the same bytes for both servers ------------------------------------------------------
mkdir -p "$WORK/www/bench" "$WORK/dav"
head -c $((64 * MiB)) /dev/urandom > "$WORK/www/bench/large"
head -c 4096 /dev/urandom > "$WORK/www/bench/small"
head -c $((1024 * MiB)) /dev/urandom > "$WORK/www/bench/gig"
cp "$WORK/www/bench/large" "$WORK/large.body"
cp "$WORK/www/bench/small" "$WORK/small.body"

# ---- wrk scripts ------------------------------------------------------------------------------
cat > "$WORK/put.lua" <<'LUA'
wrk.method = "PUT"
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "application/octet-stream"
LUA
cat > "$WORK/range.lua" <<'LUA'
local chunk = 1048576
request = function()
  local offset = math.random(0, 1023) * chunk
  return wrk.format("GET", nil, {["Range"] = "bytes=" .. offset .. "-" .. (offset + chunk - 1)})
end
LUA

run_wrk() {  # connections url [script] -> "requests_per_s megabytes_per_s errors"
  local c=$1 url=$2 script=${3:-}
  wrk -t"$THREADS" -c"$c" -d"$DURATION" --timeout 60s ${script:+-s "$script"} "$url" > "$WORK/wrk.out" 2>&1 || true
  python3 - "$WORK/wrk.out" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
m = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", t)
mbs = float(m.group(1)) * {"B": 1e-6, "KB": 1024 / 1e6, "MB": 1024**2 / 1e6, "GB": 1024**3 / 1e6}[m.group(2)]
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print(rps, mbs, bad.group(1) if bad else 0)
PY
}

# ---- nginx: GET from the page cache, WebDAV PUT ---------------------------------------------------
NGINX_PORT=$(free_port)
cat > "$WORK/nginx.conf" <<CONF
worker_processes $THREADS;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
user root;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_requests 1000000;
  client_max_body_size 0;
  client_body_buffer_size 1m;
  client_body_temp_path $WORK/nginx-tmp;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$NGINX_PORT reuseport;
    root $WORK/www;
    location /dav/ {
      root $WORK;
      dav_methods PUT;
      create_full_put_path on;
    }
  }
}
CONF
"$NGINX" -c "$WORK/nginx.conf" -p "$WORK" &
PIDS+=($!)
N="http://127.0.0.1:$NGINX_PORT"

# ---- hots3 --------------------------------------------------------------------------------------
start_hots3() {  # cache_size -> sets H (endpoint) and HPID
  local cache=$1
  rm -rf "$WORK/hots3" && mkdir -p "$WORK/hots3"
  cat > "$WORK/hots3.toml" <<CONF
[http]
threads = $THREADS
[storage]
device_size = "8GiB"
cache_size = "$cache"
[log]
access_log = ""
level = "warn"
[[users]]
name = "bench"
access_key = "HOTS3BENCHACCESSKEY1"
secret_key = "hots3-bench-secret-key-0123456789abcdef"
admin = true
CONF
  "$HOTS3" serve --config "$WORK/hots3.toml" --data "$WORK/hots3/data" --listen 127.0.0.1:0 \
    --port-file "$WORK/hots3/port" > "$WORK/hots3/log" 2>&1 &
  HPID=$!
  PIDS+=($HPID)
  for _ in $(seq 200); do [ -s "$WORK/hots3/port" ] && break; sleep 0.05; done
  H="http://127.0.0.1:$(cat "$WORK/hots3/port")"
}
stop_hots3() { kill "$HPID"; wait "$HPID" 2>/dev/null || true; }

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
row() {  # label hots3 limit limit_name unit
  printf '%-44s %12.0f %12.0f %-16s %6s\n' "$1" "$2" "$3" "$4" "$(ratio "$2" "$3")"
}

echo "hots3 S3 API vs the machine's limits: $(nproc) cores, $THREADS server workers, wrk -t$THREADS -d$DURATION, $(date -u +%Y-%m-%d)"
printf '%-44s %12s %12s %-16s %6s\n' "workload" "hots3" "limit" "(limit)" "ratio"

# fio on the same file system as the device file: O_DIRECT, 1 MiB, queue depth 8 (= 8 streams).
FIO_FILE="$WORK/fio.img"
fio --name=w --filename="$FIO_FILE" --ioengine=io_uring --direct=1 --rw=write --bs=1M --iodepth=8 \
  --size=2G --output-format=json > "$WORK/fio-w.json" 2>/dev/null
fio --name=r --filename="$FIO_FILE" --ioengine=io_uring --direct=1 --rw=read --bs=1M --iodepth=8 \
  --size=2G --runtime=10 --time_based --output-format=json > "$WORK/fio-r.json" 2>/dev/null
FIO_W=$(python3 -c "import json; print(json.load(open('$WORK/fio-w.json'))['jobs'][0]['write']['bw_bytes']/1e6)")
FIO_R=$(python3 -c "import json; print(json.load(open('$WORK/fio-r.json'))['jobs'][0]['read']['bw_bytes']/1e6)")
rm -f "$FIO_FILE"

read -r _ n_large_mbs _ < <(run_wrk 8 "$N/bench/large")
read -r n_small_rps _ _ < <(run_wrk 64 "$N/bench/small")
read -r n_range_rps n_range_mbs _ < <(run_wrk 8 "$N/bench/gig" "$WORK/range.lua")
read -r n_put_small _ _ < <(BODY_FILE=$WORK/small.body run_wrk 64 "$N/dav/small" "$WORK/put.lua")
# PUT throughput is requests/s times the body: wrk's Transfer/sec counts only response bytes.
read -r n_put_large_rps _ _ < <(BODY_FILE=$WORK/large.body run_wrk 8 "$N/dav/large" "$WORK/put.lua")
n_put_large=$(python3 -c "print($n_put_large_rps * 64 * 1048576 / 1e6)")

for cache in 0 auto; do
  start_hots3 "$cache"
  mapfile -t URLS < <(presign)
  read -r _ h_large_mbs e1 < <(run_wrk 8 "${URLS[0]}")
  read -r h_range_rps h_range_mbs e3 < <(run_wrk 8 "${URLS[2]}" "$WORK/range.lua")
  if [ "$cache" = 0 ]; then
    low=$(python3 -c "print(min($FIO_R, $n_large_mbs))")
    row "GET 64 MiB x8, cache off, MB/s" "$h_large_mbs" "$low" "min(fio,nginx)"
    row "ranged 1 MiB GET x8, cache off, MB/s" "$h_range_mbs" "$(python3 -c "print(min($FIO_R, $n_range_mbs))")" "min(fio,nginx)"
    read -r h_put_small _ e4 < <(BODY_FILE=$WORK/small.body run_wrk 64 "${URLS[4]}" "$WORK/put.lua")
    read -r h_put_large_rps _ e5 < <(BODY_FILE=$WORK/large.body run_wrk 8 "${URLS[3]}" "$WORK/put.lua")
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
