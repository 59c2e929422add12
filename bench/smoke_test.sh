#!/usr/bin/env bash
# The bench smoke test (ctest bench.loadgen_smoke): hots3-loadgen drives a freshly started
# hots3 for a second with the mixed workload (GET, HEAD, PUT, DELETE of 64 KiB objects) and
# its JSON must show operations of each kind and no errors, then GETs in a directory bucket with
# S3 Express sessions (--express), without errors. It shows the generator and the
# shared bench helpers (bench/lib.sh) work; it measures nothing.
# usage: bench/smoke_test.sh HOTS3_BINARY LOADGEN_BINARY
set -euo pipefail
HOTS3=$(realpath "$1")
LOADGEN=$(realpath "$2")
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_init smoke
start_hots3 "$HOTS3" 1 "[storage]
device_size = \"256MiB\""
"$LOADGEN" --endpoint "$HOTS3_URL" --bucket smoke --workload mixed --size 64KiB --objects 20 -c 4 \
  --duration 1s --server-pid "$HOTS3_PID" --json "$WORK/smoke.json"
python3 - "$WORK/smoke.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ops = r["ops"]
problems = ["%s: %d errors" % (k, v["errors"]) for k, v in ops.items() if v["errors"] != 0]
problems += ["no %s operations" % k for k in ("GET", "HEAD", "PUT", "DELETE") if ops.get(k, {}).get("ops", 0) == 0]
if sum(v["ops"] for v in ops.values()) == 0 or r.get("server_peak_rss_bytes", 0) <= 0:
    problems.append("no operations, or no server RSS")
if problems:
    sys.exit("loadgen smoke: " + "; ".join(problems))
print("loadgen smoke: ok, %d operations" % sum(v["ops"] for v in ops.values()))
PY
# S3 Express: a directory bucket, every request signed with a session.
"$LOADGEN" --endpoint "$HOTS3_URL" --bucket smoke--z1--x-s3 --express --workload get --size 4KiB \
  --objects 8 -c 2 --duration 1s --json "$WORK/express.json"
python3 - "$WORK/express.json" <<'PY'
import json, sys
get = json.load(open(sys.argv[1]))["ops"]["GET"]
if get["ops"] == 0 or get["errors"] != 0:
    sys.exit("loadgen smoke --express: %d GETs, %d errors" % (get["ops"], get["errors"]))
print("loadgen smoke --express: ok, %d GETs" % get["ops"])
PY
