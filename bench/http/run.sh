#!/usr/bin/env bash
# The HTTP core alone (no S3, no storage) against nginx serving the same bytes, in one run:
#   small fixed response: requests/s at 64 connections
#   64 MiB response:      MB/s at 64 connections
# Both servers get the same number of worker threads/processes and no access log; wrk runs on
# the same machine, so the ratios are what matters, not the absolute numbers.
#
# usage: bench/http/run.sh [BUILD_DIR]      (default: build)
# env:   THREADS (server workers, default 1), DURATION (default 10s), CONNECTIONS (default 64)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
THREADS=${THREADS:-1}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
SMALL_BYTES=${SMALL_BYTES:-16}
LARGE_BYTES=$((64 * 1024 * 1024))
SERVER=$BUILD/tests/hots3-http-test-server
for tool in wrk nginx; do
  command -v $tool >/dev/null || command -v /usr/sbin/$tool >/dev/null || {
    echo "needs $tool (apt-get install wrk nginx)" >&2; exit 1; }
done
[ -x "$SERVER" ] || { echo "build $SERVER first" >&2; exit 1; }

WORK=$(mktemp -d /tmp/hots3-bench-http.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The same bytes the test server produces: the repeating pattern 0123456789abcdef.
mkdir -p "$WORK/www/bytes"
python3 - "$WORK/www/bytes" "$SMALL_BYTES" "$LARGE_BYTES" <<'PY'
import sys
d = sys.argv[1]
for n in map(int, sys.argv[2:]):
    with open("%s/%d" % (d, n), "wb") as f:
        f.write((b"0123456789abcdef" * (n // 16 + 1))[:n])
PY

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
  keepalive_timeout 60s;
  open_file_cache max=100 inactive=60s;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$NGINX_PORT reuseport;
    root $WORK/www;
  }
}
CONF
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
"$NGINX" -c "$WORK/nginx.conf" -p "$WORK" &
PIDS+=($!)

cat > "$WORK/hots3.toml" <<CONF
[http]
threads = $THREADS
[log]
access_log = ""
level = "warn"
CONF
"$SERVER" --config "$WORK/hots3.toml" --listen 127.0.0.1:0 --port-file "$WORK/port" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.05; done
HOTS3_PORT=$(cat "$WORK/port")
sleep 0.5

# wrk prints "Requests/sec: N" and "Transfer/sec: N{KB,MB,GB}".
run_wrk() {  # url -> "requests_per_s megabytes_per_s"
  wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --timeout 60s --latency "$1" > "$WORK/wrk.out" 2>&1
  python3 - "$WORK/wrk.out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
m = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", text)
scale = {"B": 1e-6, "KB": 1024 / 1e6, "MB": 1024**2 / 1e6, "GB": 1024**3 / 1e6}[m.group(2)]
errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", text)
print(rps, float(m.group(1)) * scale, "errors" if errors else "ok")
PY
}

echo "HTTP core vs nginx: $THREADS worker(s) each, wrk -t1 -c$CONNECTIONS -d$DURATION, $(nproc) cores"
printf '%-28s %14s %14s %8s\n' "workload" "hots3" "nginx" "ratio"
read -r h_rps _ h_ok < <(run_wrk "http://127.0.0.1:$HOTS3_PORT/bytes/$SMALL_BYTES")
read -r n_rps _ n_ok < <(run_wrk "http://127.0.0.1:$NGINX_PORT/bytes/$SMALL_BYTES")
printf '%-28s %14.0f %14.0f %7.0f%%  %s/%s\n' "${SMALL_BYTES} B response, req/s" "$h_rps" "$n_rps" \
  "$(python3 -c "print($h_rps/$n_rps*100)")" "$h_ok" "$n_ok"
read -r _ h_mbs h_ok < <(run_wrk "http://127.0.0.1:$HOTS3_PORT/bytes/$LARGE_BYTES")
read -r _ n_mbs n_ok < <(run_wrk "http://127.0.0.1:$NGINX_PORT/bytes/$LARGE_BYTES")
printf '%-28s %14.0f %14.0f %7.0f%%  %s/%s\n' "64 MiB response, MB/s" "$h_mbs" "$n_mbs" \
  "$(python3 -c "print($h_mbs/$n_mbs*100)")" "$h_ok" "$n_ok"
