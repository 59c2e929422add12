#!/usr/bin/env bash
# The HTTP core alone (no S3, no storage) against nginx serving the same bytes, in one run:
#   small fixed response: requests/s at 64 connections
#   64 MiB response:      MB/s at 64 connections
# Both servers get the same number of worker threads/processes and no access log; wrk runs on
# the same machine with 2 threads (so that it is not the bottleneck), so the ratios are what
# matters, not the absolute numbers. Prints PASS/FAIL against its goals: at least
# 80% of nginx's requests/s for the small response and 90% of its MB/s for 64 MiB responses.
# Exits 1 on a FAIL, and on any socket error or error status in a wrk run (a run with errors
# measures nothing); both servers must answer exactly 200 before the runs.
#
# usage: bench/http/run.sh [BUILD_DIR]      (default: build/release, what packaging/setup.sh builds)
# env:   THREADS (server workers, default 1), DURATION (default 10s), CONNECTIONS (default 64),
#        WRK_THREADS (default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
THREADS=${THREADS:-1}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
WRK_THREADS=${WRK_THREADS:-2}
SMALL_BYTES=${SMALL_BYTES:-16}
LARGE_BYTES=$((64 * 1024 * 1024))
SMALL_GOAL_PERCENT=80
LARGE_GOAL_PERCENT=90
SERVER=$BUILD/tests/hots3-http-test-server
# shellcheck source=bench/lib.sh
. bench/lib.sh
need wrk nginx curl
if [ ! -x "$SERVER" ]; then
  echo "no $SERVER: build it with the tests on, e.g. 'packaging/setup.sh test', or" >&2
  echo "  cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH3_BUILD_TESTS=ON &&" >&2
  echo "  cmake --build $BUILD --target hots3-http-test-server" >&2
  exit 1
fi
bench_init http

# The same bytes the test server produces: the repeating pattern 0123456789abcdef.
mkdir -p "$WORK/www/bytes"
python3 - "$WORK/www/bytes" "$SMALL_BYTES" "$LARGE_BYTES" <<'PY'
import sys
d = sys.argv[1]
for n in map(int, sys.argv[2:]):
    with open("%s/%d" % (d, n), "wb") as f:
        f.write((b"0123456789abcdef" * (n // 16 + 1))[:n])
PY

start_nginx "$THREADS"
NGINX_PORT=${NGINX_URL##*:}

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
[ -s "$WORK/port" ] || { echo "$SERVER did not start" >&2; exit 1; }
HOTS3_PORT=$(cat "$WORK/port")

# Both answer exactly 200 with the right length before anything is measured (wrk itself
# reports only statuses of 400 and up as errors).
for port in "$HOTS3_PORT" "$NGINX_PORT"; do
  python3 - "$port" "$SMALL_BYTES" "$LARGE_BYTES" <<'PY' || { echo "bad answer on port $port" >&2; exit 1; }
import http.client, sys, time
port = int(sys.argv[1])
for n in sys.argv[2:]:
    for attempt in range(100):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("HEAD" if int(n) > 1 << 20 else "GET", "/bytes/%s" % n)
            r = c.getresponse()
            r.read()
            if r.status != 200 or r.getheader("content-length") != n:
                sys.exit("/bytes/%s: %d, Content-Length %s" % (n, r.status, r.getheader("content-length")))
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit("no answer")
PY
done

ERRORS=0
run_wrk() {  # name url -> "requests_per_s megabytes_per_s errors" (wrk_run of lib.sh)
  wrk_run "$1" "$CONNECTIONS" "$2"
}
check_errors() {  # name: one ERROR line per wrk error report of that run
  local line
  while IFS= read -r line; do
    echo "ERROR ($1): $line"
    ERRORS=$((ERRORS + 1))
  done < <(grep -E "Socket errors|Non-2xx or 3xx responses" "$WORK/wrk-$1.out" || true)
}

VERDICTS=0
verdict() {  # label ratio goal_percent
  if python3 -c "import sys; sys.exit(0 if $2 * 100 >= $3 else 1)"; then
    echo "PASS  $1: $(python3 -c "print('%.0f' % ($2 * 100))")% of nginx (goal >= $3%)"
  else
    echo "FAIL  $1: $(python3 -c "print('%.0f' % ($2 * 100))")% of nginx (goal >= $3%)"
    VERDICTS=$((VERDICTS + 1))
  fi
}

echo "HTTP core vs nginx: $THREADS worker(s) each, wrk -t$WRK_THREADS -c$CONNECTIONS -d$DURATION, $(nproc) cores"
printf '%-28s %14s %14s %8s\n' "workload" "hots3" "nginx" "ratio"
result=$(run_wrk hots3-small "http://127.0.0.1:$HOTS3_PORT/bytes/$SMALL_BYTES")
read -r h_rps _ _ <<<"$result"
result=$(run_wrk nginx-small "http://127.0.0.1:$NGINX_PORT/bytes/$SMALL_BYTES")
read -r n_rps _ _ <<<"$result"
small_ratio=$(python3 -c "print($h_rps / $n_rps)")
printf '%-28s %14.0f %14.0f %7.0f%%\n' "${SMALL_BYTES} B response, req/s" "$h_rps" "$n_rps" \
  "$(python3 -c "print($small_ratio * 100)")"
result=$(run_wrk hots3-large "http://127.0.0.1:$HOTS3_PORT/bytes/$LARGE_BYTES")
read -r _ h_mbs _ <<<"$result"
result=$(run_wrk nginx-large "http://127.0.0.1:$NGINX_PORT/bytes/$LARGE_BYTES")
read -r _ n_mbs _ <<<"$result"
large_ratio=$(python3 -c "print($h_mbs / $n_mbs)")
printf '%-28s %14.0f %14.0f %7.0f%%\n' "64 MiB response, MB/s" "$h_mbs" "$n_mbs" \
  "$(python3 -c "print($large_ratio * 100)")"
echo
for name in hots3-small nginx-small hots3-large nginx-large; do check_errors "$name"; done
verdict "${SMALL_BYTES} B responses, requests/s at $CONNECTIONS connections" "$small_ratio" "$SMALL_GOAL_PERCENT"
verdict "64 MiB responses, MB/s at $CONNECTIONS connections" "$large_ratio" "$LARGE_GOAL_PERCENT"
if [ "$ERRORS" -gt 0 ]; then
  echo "FAIL  $ERRORS wrk run(s) had socket errors or error statuses: the figures are not valid"
  exit 1
fi
[ "$VERDICTS" -eq 0 ]
