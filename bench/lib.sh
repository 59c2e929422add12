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
# NGINX_URL and NGINX_PID.
start_nginx() {
  local port
  port=$(free_port)
  mkdir -p "$WORK/www" "$WORK/dav" "$WORK/nginx-tmp"
  cat > "$WORK/nginx.conf" <<CONF
worker_processes $1;
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

# start_hots3 HOTS3_BINARY WORKERS [extra TOML lines]: a fresh hots3 on $WORK/hots3 with the
# bench user; sets HOTS3_URL and HOTS3_PID and exports the bench credentials as AWS_*.
start_hots3() {
  local bin=$1 threads=$2 extra=${3:-}
  rm -rf "$WORK/hots3" && mkdir -p "$WORK/hots3"
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
  "$bin" serve --config "$WORK/hots3/hots3.toml" --data "$WORK/hots3/data" --listen 127.0.0.1:0 \
    --port-file "$WORK/hots3/port" > "$WORK/hots3/log" 2>&1 &
  HOTS3_PID=$!
  PIDS+=("$HOTS3_PID")
  local _
  for _ in $(seq 600); do
    [ -s "$WORK/hots3/port" ] && break
    kill -0 "$HOTS3_PID" 2>/dev/null || { echo "hots3 did not start: $(cat "$WORK/hots3/log")" >&2; exit 1; }
    sleep 0.05
  done
  HOTS3_URL="http://127.0.0.1:$(cat "$WORK/hots3/port")"
  export AWS_ACCESS_KEY_ID=$BENCH_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$BENCH_SECRET_KEY AWS_DEFAULT_REGION=us-east-1
}
stop_hots3() {
  kill "$HOTS3_PID" 2>/dev/null || true
  wait "$HOTS3_PID" 2>/dev/null || true
}

# fio_mbs read|write FIO-ARGS...: MB/s of one fio job on $WORK/fio.dat.
fio_mbs() {
  local kind=$1
  shift
  fio --output-format=json --name=bench --filename="$WORK/fio.dat" "$@" > "$WORK/fio.json" 2>/dev/null
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]["bw_bytes"] / 1e6)' \
    "$WORK/fio.json" "$kind"
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
MISSED=0
row() {
  local verdict
  verdict=$(python3 -c 'import sys; h, l, g = map(float, sys.argv[1:])
r = 100 * h / l if l > 0 else 0
print("%6.0f%%  >= %g%% %s" % (r, g, "ok" if r >= g else "MISSED"))' "$2" "$3" "$5")
  printf '%-46s %12.1f %12.1f %-22s %s\n' "$1" "$2" "$3" "$4" "$verdict"
  case "$verdict" in *MISSED) MISSED=$((MISSED + 1)) ;; esac
}
