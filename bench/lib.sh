# shellcheck shell=bash
# What the bench/*/run.sh scripts share: a work directory and processes that go away on exit,
# nginx and hots3 on ephemeral ports of 127.0.0.1, fio figures, and the table of hots3 figures
# next to the machine's limits. Source it after `cd` to the repository root.

BENCH_ACCESS_KEY=HOTS3BENCHACCESSKEY1
BENCH_SECRET_KEY=hots3-bench-secret-key-0123456789abcdef

# bench_init NAME: $WORK (under $BENCH_TMPDIR, default /var/tmp: a disk, not tmpfs), removed on
# exit with every process recorded in PIDS.
bench_init() {
  WORK=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/hots3-bench-$1.XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT
}
bench_cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}

# need TOOL...: stops with the Debian package to install when a tool is missing.
need() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] || { echo "needs $t (apt-get install $t)" >&2; exit 1; }
  done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_nginx WORKERS: nginx serving $WORK/www read-only and $WORK/dav/ by WebDAV PUT; sets
# NGINX_URL and NGINX_PID. NGINX_ACCESS_LOG, when set, is a file its access log goes to (in its
# default format, written every second or 64 KiB as hots3's is); otherwise it logs nothing.
start_nginx() {
  local port access_log=off
  port=$(free_port)
  [ -z "${NGINX_ACCESS_LOG:-}" ] || access_log="$NGINX_ACCESS_LOG combined buffer=64k flush=1s"
  mkdir -p "$WORK/www" "$WORK/dav" "$WORK/nginx-tmp"
  cat > "$WORK/nginx.conf" <<CONF
worker_processes $1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
user root;
events { worker_connections 4096; }
http {
  access_log $access_log;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  client_max_body_size 0;
  client_body_buffer_size 1m;
  client_body_temp_path $WORK/nginx-tmp;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$port reuseport;
    root $WORK/www;
    location /dav/ {
      root $WORK;
      dav_methods PUT DELETE;
      create_full_put_path on;
    }
  }
}
CONF
  "$(command -v nginx || echo /usr/sbin/nginx)" -c "$WORK/nginx.conf" -p "$WORK" &
  NGINX_PID=$!
  PIDS+=("$NGINX_PID")
  NGINX_URL="http://127.0.0.1:$port"
  local _
  for _ in $(seq 100); do
    curl -s -o /dev/null "$NGINX_URL/" && return 0
    sleep 0.05
  done
  echo "nginx did not start: $(cat "$WORK/nginx-error.log")" >&2
  exit 1
}

# BENCH_DEVICE (optional): the device file or block device that fio and hots3 both use, so
# that the limits and hots3 are measured on the same bytes of the same disk. A block device is
# overwritten (fio writes to it; hots3 formats it). Unset: fio uses $WORK/fio.dat and hots3
# its default DATA/device.img, both on the file system of $WORK.
bench_device_reset() {  # the device as new: a file is removed, a block device's start zeroed
  [ -n "${BENCH_DEVICE:-}" ] || return 0
  if [ -b "$BENCH_DEVICE" ]; then
    dd if=/dev/zero of="$BENCH_DEVICE" bs=1M count=4 oflag=direct status=none
  else
    rm -f "$BENCH_DEVICE"
  fi
}
fio_file() { echo "${FIO_FILE:-${BENCH_DEVICE:-$WORK/fio.dat}}"; }

# start_hots3 HOTS3_BINARY WORKERS [extra TOML lines]: a fresh hots3 (new data directory, new
# device) with the bench user; sets HOTS3_URL and HOTS3_PID and exports the bench credentials
# as AWS_*. relaunch_hots3 starts it again on the same data with the same configuration.
start_hots3() {
  rm -rf "$WORK/hots3" && mkdir -p "$WORK/hots3"
  bench_device_reset
  hots3_config "$2" "${3:-}"
  HOTS3_BIN=$1
  relaunch_hots3
}
# hots3_config THREADS [extra TOML lines]: $WORK/hots3/hots3.toml, with THREADS workers, no access
# log, and the bench user (an admin).
hots3_config() {
  local threads=$1 extra=${2:-}
  mkdir -p "$WORK/hots3"
  cat > "$WORK/hots3/hots3.toml" <<CONF
[http]
threads = $threads
[log]
access_log = ""
level = "warn"
[[users]]
name = "bench"
access_key = "$BENCH_ACCESS_KEY"
secret_key = "$BENCH_SECRET_KEY"
admin = true
$extra
CONF
}
# start_tier_server NAME [extra TOML lines]: a hots3 ($HOTS3) of its own in $WORK/NAME, with a
# device of $DEVICE_BYTES, the bench user, and an access log in $WORK/NAME/access when
# ACCESS_LOG=1 (the tier benches' upstream and local servers); sets URL_<NAME> and PID_<NAME>.
start_tier_server() {
  local name=$1 dir=$WORK/$1 access=""
  [ "${ACCESS_LOG:-0}" = 1 ] && access=$dir/access
  mkdir -p "$dir"
  cat > "$dir/hots3.toml" <<CONF
[http]
threads = $(nproc)
[log]
access_log = "$access"
level = "warn"
[storage]
device_size = $DEVICE_BYTES
cache_size = "256MiB"
[[users]]
name = "bench"
access_key = "$BENCH_ACCESS_KEY"
secret_key = "$BENCH_SECRET_KEY"
admin = true
${2:-}
CONF
  "$HOTS3" serve --config "$dir/hots3.toml" --data "$dir/data" --listen 127.0.0.1:0 \
    --port-file "$dir/port" >> "$dir/log" 2>&1 &
  PIDS+=("$!")
  printf -v "PID_$name" '%s' "$!"
  while [ ! -s "$dir/port" ]; do
    kill -0 "$!" 2>/dev/null || { echo "hots3 $name did not start: $(cat "$dir/log")" >&2; exit 1; }
    sleep 0.01
  done
  printf -v "URL_$name" 'http://127.0.0.1:%s' "$(cat "$dir/port")"
}
# relaunch_hots3: sets HOTS3_START_S (exec to port file) and HOTS3_READY_S (exec to the first
# 200 of /health/ready). HOTS3_LISTEN and HOTS3_DATA, when set, replace a free port and
# WORK/hots3/data.
relaunch_hots3() {
  rm -f "$WORK/hots3/port"
  local t0 now
  t0=$(date +%s.%N)
  "$HOTS3_BIN" serve --config "$WORK/hots3/hots3.toml" --data "${HOTS3_DATA:-$WORK/hots3/data}" \
    --listen "${HOTS3_LISTEN:-127.0.0.1:0}" \
    ${BENCH_DEVICE:+--device "$BENCH_DEVICE"} --port-file "$WORK/hots3/port" >> "$WORK/hots3/log" 2>&1 &
  HOTS3_PID=$!
  PIDS+=("$HOTS3_PID")
  while [ ! -s "$WORK/hots3/port" ]; do
    kill -0 "$HOTS3_PID" 2>/dev/null || { echo "hots3 did not start: $(cat "$WORK/hots3/log")" >&2; exit 1; }
    sleep 0.01
  done
  now=$(date +%s.%N)
  HOTS3_START_S=$(python3 -c "print($now - $t0)")
  HOTS3_URL="http://127.0.0.1:$(cat "$WORK/hots3/port")"
  await_ready "$HOTS3_URL" "$HOTS3_PID" "$WORK/hots3/log"
  now=$(date +%s.%N)
  HOTS3_READY_S=$(python3 -c "print($now - $t0)")
  export AWS_ACCESS_KEY_ID=$BENCH_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$BENCH_SECRET_KEY AWS_DEFAULT_REGION=us-east-1
}
# await_ready URL PID LOG: until the server at URL answers /health/ready with 200; exits with
# its LOG if process PID ends first.
await_ready() {
  until curl -sf -o /dev/null "$1/health/ready"; do
    kill -0 "$2" 2>/dev/null || { echo "hots3 died: $(cat "$3")" >&2; exit 1; }
    sleep 0.01
  done
}
stop_hots3() {
  kill "$HOTS3_PID" 2>/dev/null || true
  wait "$HOTS3_PID" 2>/dev/null || true
}

# fio_mbs read|write FIO-ARGS...: MB/s of one fio job on $(fio_file); fio_iops likewise, I/Os per
# second. Each run's JSON is kept as $WORK/fio-N.json.
FIO_RUNS=0
fio_run() {
  local kind=$1 what=$2
  shift 2
  FIO_RUNS=$((FIO_RUNS + 1))
  fio --output-format=json --name=bench --filename="$(fio_file)" "$@" > "$WORK/fio-$FIO_RUNS.json" 2>"$WORK/fio.err" ||
    { echo "fio $*: $(cat "$WORK/fio.err")" >&2; exit 1; }
  python3 -c 'import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]
print(job["bw_bytes"] / 1e6 if sys.argv[3] == "mbs" else job["iops"])' "$WORK/fio-$FIO_RUNS.json" "$kind" "$what"
}
fio_mbs() { fio_run "$1" mbs "${@:2}"; }
fio_iops() { fio_run "$1" iops "${@:2}"; }
fio_done() { [ -b "$(fio_file)" ] || rm -f "$(fio_file)"; }

# wrk_run NAME CONNECTIONS URL [LUA_SCRIPT]: one wrk run of $DURATION with $WRK_THREADS threads
# (default 2); prints "requests_per_s response_megabytes_per_s errors" (socket errors plus
# non-2xx/3xx responses; wrk's own output kept in $WORK/wrk-NAME.out).
wrk_run() {
  local name=$1 c=$2 url=$3 script=${4:-}
  local out="$WORK/wrk-$name.out"
  wrk -t"${WRK_THREADS:-2}" -c"$c" -d"${DURATION:-10s}" --timeout 60s ${script:+-s "$script"} "$url" > "$out" 2>&1 || true
  python3 - "$out" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
rps = re.search(r"Requests/sec:\s+([\d.]+)", t)
m = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", t)
if not rps or not m:
    sys.exit("wrk failed:\n" + t)
mbs = float(m.group(1)) * {"B": 1e-6, "KB": 1024 / 1e6, "MB": 1024**2 / 1e6, "GB": 1024**3 / 1e6}[m.group(2)]
errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", t))
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print(rps.group(1), mbs, errors + (int(bad.group(1)) if bad else 0))
PY
}
# wrk_put_lua: a wrk script that PUTs the bytes of the file $BODY_FILE (set it when running wrk).
wrk_put_lua() {
  cat > "$WORK/put.lua" <<'LUA'
wrk.method = "PUT"
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "application/octet-stream"
LUA
  echo "$WORK/put.lua"
}

# json_get FILE EXPR: a value out of a loadgen --json file ("ops.PUT.mb_per_s", "read_gb_per_s").
json_get() {
  python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$1" "$2"
}

min() { python3 -c 'import sys; print(min(float(x) for x in sys.argv[1:]))' "$@"; }

# The table: one row per figure, hots3 next to its limit, the ratio and the goal.
table_head() {
  printf '%-46s %12s %12s %-22s %7s  %s\n' "figure" "hots3" "limit" "(limit is)" "ratio" "goal"
}
# row LABEL HOTS3 LIMIT LIMIT_NAME GOAL_PERCENT: prints the row; counts a missed goal in MISSED.
# With BENCH_ROWS set (a file), also appends the row there as one JSON line.
MISSED=0
row() {
  local verdict
  verdict=$(python3 -c 'import sys; h, l, g = map(float, sys.argv[1:])
r = 100 * h / l if l > 0 else 0
print("%6.0f%%  >= %g%% %s" % (r, g, "PASS" if r >= g else "MISSED"))' "$2" "$3" "$5")
  printf '%-46s %12.1f %12.1f %-22s %s\n' "$1" "$2" "$3" "$4" "$verdict"
  case "$verdict" in *MISSED) MISSED=$((MISSED + 1)) ;; esac
  row_json "$1" "$2" "$3" "$4" ">=" "$5%" "${verdict##* }"
}
# row_max LABEL VALUE BOUND UNIT: a figure that must stay at or under BOUND (peak RSS, ...).
row_max() {
  local verdict=PASS
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$2" "$3" || verdict=MISSED
  printf '%-46s %12.1f %12.1f %-22s %7s  <= %s %s\n' "$1" "$2" "$3" "$4" "" "$3" "$verdict"
  [ "$verdict" = PASS ] || MISSED=$((MISSED + 1))
  row_json "$1" "$2" "$3" "$4" "<=" "$3" "$verdict"
}
# row_ratio LABEL HOTS3 OTHER OTHER_NAME: hots3 beside another server, the ratio, no goal.
row_ratio() {
  local r
  r=$(python3 -c 'import sys; h, o = map(float, sys.argv[1:]); print("%6.0f%%" % (100 * h / o) if o > 0 else "   n/a")' "$2" "$3")
  printf '%-46s %12.1f %12.1f %-22s %s\n' "$1" "$2" "$3" "$4" "$r"
  row_json "$1" "$2" "$3" "$4" "" "" "info"
}
# row_info LABEL VALUE UNIT: a figure with no goal (shown, never judged).
row_info() {
  printf '%-46s %12.3f %12s %-22s\n' "$1" "$2" "" "$3"
  row_json "$1" "$2" "" "$3" "" "" "info"
}
# row_flat LABEL SMALL LARGE PERCENT [SMALL_NAME]: LARGE within PERCENT% of SMALL (latency at
# 10^3 vs 10^6, a hit's against an untiered GET's).
row_flat() {
  local verdict name=${5:-the smallest size}
  verdict=$(python3 -c 'import sys; a, b, g = map(float, sys.argv[1:])
r = 100 * b / a if a > 0 else 0
print("%6.0f%%  <= %g%% %s" % (r, 100 + g, "PASS" if r <= 100 + g else "MISSED"))' "$2" "$3" "$4")
  printf '%-46s %12.3f %12.3f %-22s %s\n' "$1" "$3" "$2" "($name)" "$verdict"
  case "$verdict" in *MISSED) MISSED=$((MISSED + 1)) ;; esac
  row_json "$1" "$3" "$2" "$name" "<=" "$((100 + $4))%" "${verdict##* }"
}
row_json() {  # label value limit limit_name goal_kind goal verdict
  [ -n "${BENCH_ROWS:-}" ] || return 0
  python3 -c 'import json, sys
label, value, limit, limit_name, kind, goal, verdict = sys.argv[2:]
num = lambda x: float(x) if x else None
print(json.dumps({"figure": label, "hots3": num(value), "limit": num(limit), "limit_is": limit_name,
                  "ratio_percent": 100 * float(value) / float(limit) if limit and float(limit) > 0 else None,
                  "goal": (kind + " " + goal) if kind else None, "verdict": verdict}))' \
    "$BENCH_ROWS" "$@" >> "$BENCH_ROWS"
}
