#!/usr/bin/env bash
# The server's CPU per small request, hots3 against nginx on the same machine, in one run.
#
# Both servers run one worker and are driven by the same generator (hots3-loadgen; --plain for
# nginx, whose files it puts there by WebDAV PUT) at C connections.
# A request's CPU is the server's user + system time from /proc/PID/stat over the measured
# DURATION (after the warm-up), divided by the requests answered in it: for hots3 the whole
# process (every thread: workers, the catalog's writer and syncer, io_uring's), for nginx its
# worker. Each figure is the median of ROUNDS runs, the two servers taking turns.
#
#   GET 4 KiB      hots3 (SigV4 verified) against nginx (sendfile)          goal <= 150%
#   HEAD 4 KiB     hots3 against nginx's 4 KiB GET                          goal <= 120%
#   PUT 4 KiB      hots3, durable, against nginx's WebDAV PUT (no fsync)    goal <= 300%
#   LIST           hots3, ListObjectsV2 pages of 1000 keys                  shown
#   range 1 MiB    hots3 against nginx, 1 MiB ranges of 64 MiB objects      shown
#   access log     the 4 KiB GET with both servers writing an access log to a file (nginx's
#                  buffered as hots3's is, flushed every second): the ratio (goal <= 150%), and
#                  what the log costs each per request
#   stages         where hots3's CPU goes in each of these workloads, by stage and by kind of work
#   scaling        hots3's 4 KiB GET at 1, 2, ... workers up to the cores: req/s and CPU per
#                  GET. With the generator on the same cores, req/s can only grow while a core
#                  is left for it: the rate is judged (>= 85% of N times one worker's) where
#                  2N <= cores, and elsewhere the CPU per GET, which must stay within 1/0.85 of
#                  one worker's (the same work per request is what linear scaling needs)
#
# usage: bench/s3/cpu.sh [BUILD_DIR]       (default build/release)
# env:   C (32) DURATION (5s) WARMUP (1s) ROUNDS (3) BENCH_TMPDIR (/var/tmp)
#        STAGES (1: with perf installed, also the share of each stage of hots3's CPU per workload,
#        from perf's call graphs and bench/s3/stages.py; 0: not)
# Takes about 5 minutes. Exits 1 if a goal was missed or a run had errors.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUILD=${1:-build/release}
case "$BUILD" in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
HOTS3=$BUILD/src/hots3
LOADGEN=$BUILD/bench/hots3-loadgen
[ -x "$HOTS3" ] && [ -x "$LOADGEN" ] || { echo "build $HOTS3 and $LOADGEN first" >&2; exit 1; }
need nginx curl
C=${C:-32}
DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
ROUNDS=${ROUNDS:-3}
CORES=$(nproc)
bench_init cpu
ERRORS=0

# ---- the servers --------------------------------------------------------------------------------
nginx_worker() { pgrep -P "$NGINX_PID" | head -1; }  # its one worker
stop_nginx() {
  kill "$NGINX_PID" 2>/dev/null || true
  wait "$NGINX_PID" 2>/dev/null || true
}

# lg NAME SERVER LOADGEN-ARGS...: one measured run against SERVER (nginx or hots3), its JSON in
# $WORK/lg-NAME.json. A failed run or one with errors is reported and counted. loadgen_once is
# the same without the run's length and connections (the preparing runs).
lg() {
  local name=$1 server=$2
  shift 2
  loadgen_once "$name" "$server" -c "$C" --duration "$DURATION" --warmup "$WARMUP" "$@"
}
loadgen_once() {
  local name=$1 server=$2 rc=0 pid url auth=()
  shift 2
  if [ "$server" = nginx ]; then
    pid=$(nginx_worker) url=$NGINX_URL auth=(--plain)
  else
    pid=$HOTS3_PID url=$HOTS3_URL auth=(--access-key "$BENCH_ACCESS_KEY" --secret-key "$BENCH_SECRET_KEY")
  fi
  timeout 300 "$LOADGEN" --endpoint "$url" "${auth[@]}" --server-pid "$pid" --json "$WORK/lg-$name.json" \
    "$@" > "$WORK/lg-$name.out" 2>&1 || rc=$?
  if [ "$rc" != 0 ] || [ "$(python3 -c 'import json, sys
print(sum(o["errors"] for o in json.load(open(sys.argv[1]))["ops"].values()))' "$WORK/lg-$name.json" 2>/dev/null)" != 0 ]; then
    echo "ERROR: loadgen $name: $(tail -3 "$WORK/lg-$name.out")"
    rm -f "$WORK/lg-$name.json"
    ERRORS=$((ERRORS + 1))
  fi
}
# prepare SERVER BUCKET PREFIX SIZE OBJECTS: the objects a workload reads, put once.
prepare() {
  local bucket=$2
  [ "$1" = nginx ] && bucket=dav
  loadgen_once "prepare-$1-${3%/}" "$1" --bucket "$bucket" --prefix "$3" --size "$4" --objects "$5" \
    --workload head --ops 1 -c 16
}
# us NAME OP: the server's CPU per request of a run, in microseconds (nan if the run failed).
us() {
  [ -s "$WORK/lg-$1.json" ] || { echo nan; return; }
  python3 -c 'import json, sys
j = json.load(open(sys.argv[1])); op = j["ops"][sys.argv[2]]
print(1e6 * j["server_cpu_s"] / max(op["ops"], 1))' "$WORK/lg-$1.json" "$2"
}
# median NAME OP FIELD: the median over the rounds of runs NAME-1.. of FIELD (cpu or ops_per_s).
median() {
  local name=$1 op=$2 field=$3 r values=()
  for r in $(seq "$ROUNDS"); do
    if [ "$field" = cpu ]; then
      values+=("$(us "$name-$r" "$op")")
    elif [ -s "$WORK/lg-$name-$r.json" ]; then
      values+=("$(json_get "$WORK/lg-$name-$r.json" "ops.$op.$field")")
    else
      values+=(nan)
    fi
  done
  python3 -c 'import statistics, sys; print(statistics.median(map(float, sys.argv[1:])))' "${values[@]}"
}

echo "== server CPU per request, hots3 vs nginx: $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "   $CORES cores; one worker each; $C connections; $DURATION per run after $WARMUP; $ROUNDS rounds"
start_nginx 1
start_hots3 "$HOTS3" 1 "[storage]
device_size = $((8 * 1024 * 1024 * 1024))
cache_size = \"1GiB\""
GET=(--workload get --size 4KiB --objects 1000 --no-prepare)
RANGE=(--workload range --range-size 1MiB --size 64MiB --objects 4 --no-prepare)
for s in nginx hots3; do
  prepare "$s" small small/ 4KiB 1000
  prepare "$s" range range/ 64MiB 4
done
prepare hots3 list list/ 1KiB 1000

# ---- the rows without access logs ----------------------------------------------------------------
for r in $(seq "$ROUNDS"); do
  lg "get-nginx-$r" nginx --bucket dav --prefix small/ "${GET[@]}"
  lg "get-hots3-$r" hots3 --bucket small --prefix small/ "${GET[@]}"
  lg "head-hots3-$r" hots3 --bucket small --prefix small/ --workload head --objects 1000 --no-prepare
  lg "put-nginx-$r" nginx --bucket dav --prefix "put$r/" --workload put --size 4KiB
  lg "put-hots3-$r" hots3 --bucket put --prefix "put$r/" --workload put --size 4KiB
  lg "range-nginx-$r" nginx --bucket dav --prefix range/ "${RANGE[@]}"
  lg "range-hots3-$r" hots3 --bucket range --prefix range/ "${RANGE[@]}"
  lg "list-hots3-$r" hots3 --bucket list --prefix list/ --workload list --list-root --max-keys 1000 \
    --objects 1000 --no-prepare
done

# ---- where hots3's CPU goes, by stage (perf, call graphs) ------------------------------------------
# perf samples the server while the same runs go on again; the figures above come from runs
# without it.
stages() {  # NAME OP LOADGEN-ARGS...
  local name=$1 op=$2
  shift 2
  "$LOADGEN" --endpoint "$HOTS3_URL" --access-key "$BENCH_ACCESS_KEY" --secret-key "$BENCH_SECRET_KEY" \
    -c "$C" --duration "$DURATION" "$@" > "$WORK/stages-$name.out" 2>&1 &
  local lg_pid=$!
  sleep 1
  perf record -q -F 499 --call-graph dwarf,16384 -p "$HOTS3_PID" -o "$WORK/perf-$name.data" -- sleep 3 \
    > /dev/null 2>&1 || true
  wait "$lg_pid" || true
  perf script -i "$WORK/perf-$name.data" 2> /dev/null |
    python3 bench/s3/stages.py --cpu-us "$(median "$name-hots3" "$op" cpu)" --title "hots3 $name" || true
  rm -f "$WORK/perf-$name.data"
}
if [ "${STAGES:-1}" = 1 ] && command -v perf > /dev/null; then
  echo
  echo "-- where hots3's CPU goes (perf record of the same runs, shares of its samples)"
  stages get GET --bucket small --prefix small/ "${GET[@]}"
  stages head HEAD --bucket small --prefix small/ --workload head --objects 1000 --no-prepare
  stages put PUT --bucket put --prefix stages/ --workload put --size 4KiB
  stages list LIST --bucket list --prefix list/ --workload list --list-root --max-keys 1000 --objects 1000 \
    --no-prepare
  stages range GET-RANGE --bucket range --prefix range/ "${RANGE[@]}"
fi

# ---- both servers writing an access log ----------------------------------------------------------
stop_nginx
NGINX_ACCESS_LOG=$WORK/nginx-access.log start_nginx 1
stop_hots3
sed -i "s|^access_log = \"\"|access_log = \"$WORK/hots3/access.log\"|" "$WORK/hots3/hots3.toml"
relaunch_hots3
for r in $(seq "$ROUNDS"); do
  lg "logged-get-nginx-$r" nginx --bucket dav --prefix small/ "${GET[@]}"
  lg "logged-get-hots3-$r" hots3 --bucket small --prefix small/ "${GET[@]}"
done
LOG_LINES_NGINX=$(wc -l < "$WORK/nginx-access.log")
LOG_LINES_HOTS3=$(wc -l < "$WORK/hots3/access.log" || echo 0)
stop_nginx

# ---- hots3 at 1, 2, ... workers ------------------------------------------------------------------
SCALE=()
for n in $(seq "$CORES"); do
  stop_hots3
  sed -i "s|^threads = .*|threads = $n|; s|^access_log = .*|access_log = \"\"|" "$WORK/hots3/hots3.toml"
  relaunch_hots3
  for r in $(seq "$ROUNDS"); do
    lg "scale-$n-$r" hots3 --bucket small --prefix small/ "${GET[@]}"
  done
  SCALE+=("$n")
done
stop_hots3

# ---- the table ---------------------------------------------------------------------------------
echo
table_head
N_GET=$(median get-nginx GET cpu)
row_flat "GET 4 KiB x$C, CPU per request, us" "$N_GET" "$(median get-hots3 GET cpu)" 50 "nginx GET"
row_flat "HEAD 4 KiB x$C, CPU per request, us" "$N_GET" "$(median head-hots3 HEAD cpu)" 20 "nginx GET"
row_flat "PUT 4 KiB x$C durable, CPU per request, us" "$(median put-nginx PUT cpu)" "$(median put-hots3 PUT cpu)" \
  200 "nginx PUT, no fsync"
row_ratio "range 1 MiB x$C, CPU per request, us" "$(median range-hots3 GET-RANGE cpu)" \
  "$(median range-nginx GET-RANGE cpu)" "nginx range"
row_info "LIST 1000 keys x$C, CPU per request, us" "$(median list-hots3 LIST cpu)" "us (no nginx counterpart)"
N_LOGGED=$(median logged-get-nginx GET cpu)
H_LOGGED=$(median logged-get-hots3 GET cpu)
row_flat "GET 4 KiB x$C, both logging, CPU per req, us" "$N_LOGGED" "$H_LOGGED" 50 "nginx GET, logging"
row_ratio "  access log's CPU per request, us" "$(python3 -c "print($H_LOGGED - $(median get-hots3 GET cpu))")" \
  "$(python3 -c "print($N_LOGGED - $N_GET)")" "nginx's"
ONE_RATE=$(median scale-1 GET ops_per_s)
ONE_CPU=$(median scale-1 GET cpu)
for n in "${SCALE[@]}"; do
  row_info "GET 4 KiB x$C, $n worker(s), req/s" "$(median "scale-$n" GET ops_per_s)" "req/s"
  [ "$n" = 1 ] && continue
  if [ $((2 * n)) -le "$CORES" ]; then
    row "GET 4 KiB x$C, $n workers, req/s vs $n x 1 worker" "$(median "scale-$n" GET ops_per_s)" \
      "$(python3 -c "print($n * $ONE_RATE)")" "$n x 1 worker's" 85
  else
    row_flat "GET 4 KiB x$C, $n workers, CPU per request, us" "$ONE_CPU" "$(median "scale-$n" GET cpu)" 18 \
      "1 worker"
  fi
done
row_info "  (access log lines written: nginx, hots3)" "$LOG_LINES_NGINX" "$LOG_LINES_HOTS3 (hots3)"
echo
echo "== $MISSED goal(s) missed, $ERRORS run(s) with errors"
[ "$MISSED" = 0 ] && [ "$ERRORS" = 0 ]
