#!/usr/bin/env bash
# A restart of a busy server: SCALE objects in the store, clients reading, SIGTERM to the
# server, and a new process started on the same data directory and port as soon as the old one
# has exited (as systemd restarts a unit: stop, then start; the two cannot own the port at once).
#
#   in flight   the requests sent and not yet answered at the moment of SIGTERM: BIG_COUNT GETs
#               of BIG_SIZE objects read slowly (BIG_RATE a second each, the signal a quarter of
#               the way in) and the small GETs of SMALL_C busy clients. Goal: every one answered
#               completely and correctly (its length, and the SHA-256 of a slow GET's bytes or
#               the MD5 of a small object's against its ETag), within [http] shutdown_grace.
#   kept alive  requests that clients sent on open connections after the signal, before they
#               saw the close: answered, or the connection closed under them (shown).
#   drain       what new connections get from the signal until the new process listens. Goal:
#               refused at once, never reset, never left hanging; whatever is accepted answered.
#   stop        the old process: SIGTERM to exit (goal: within the grace), its exit status.
#   start       the new process: exec to the port file, to the first 200 of /health/ready and to
#               the first 200 of a signed GET of an existing object (goal: 2 s or less each).
#   gap         the last answer of the old process to the first of the new one, with every
#               client retrying every RETRY_MS; then every request to the new one must succeed.
#
# The objects are filled as bench/run.sh's scaling rows fill them (the generator's PUTs at 128
# connections, SCALE_SIZE objects over 1000 directories); the slow GETs' objects are uploaded by
# the script with known bytes. The server is then stopped and started once, so that the process
# restarted is one that opened a store of SCALE objects and has served reads since (its catalog
# not just written by the fill). The clients are one Python process (asyncio, SigV4 signed by
# hand so that every connection's fate is seen, with no SDK retrying underneath); the signal,
# the exec of the new process and its start-up are timed by another, which waits for the old
# process's exit on a pidfd. A process's answers are told apart by when their connection was
# opened: before the old process exited (its), or after (the new one's).
#
# usage: bench/s3/busy_restart.sh [BUILD_DIR]      (default build/release)
# env:   SCALE (1000000) SCALE_SIZE (1KiB) BIG_COUNT (4) BIG_SIZE (256MiB) BIG_RATE (64MiB, per
#        reader per second) SMALL_C (32) PROBES (4: clients opening a new connection for each
#        GET) RETRY_MS (10) WARM (3: seconds of load before the signal) AFTER (2: seconds of
#        load after the new process is ready) GRACE (10s: [http] shutdown_grace)
#        THREADS (server workers, default cores) WORK (default a new directory under
#        BENCH_TMPDIR, default /tmp) KEEP=1 (keep WORK: logs, the data directory, the records)
# Takes about a minute and a half at SCALE=1000000 on 2 cores (the fill is most of it).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUILD=${1:-build/release}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
LOADGEN=$BUILD/bench/hots3-loadgen
if [ ! -x "$BUILD/src/hots3" ] || [ ! -x "$LOADGEN" ]; then
  echo "build $BUILD/src/hots3 and $LOADGEN first" >&2
  exit 1
fi
need curl
SCALE=${SCALE:-1000000}
SCALE_SIZE=${SCALE_SIZE:-1KiB}
BIG_COUNT=${BIG_COUNT:-4}
BIG_SIZE=${BIG_SIZE:-256MiB}
BIG_RATE=${BIG_RATE:-64MiB}
SMALL_C=${SMALL_C:-32}
PROBES=${PROBES:-4}
RETRY_MS=${RETRY_MS:-10}
WARM=${WARM:-3}
AFTER=${AFTER:-2}
GRACE=${GRACE:-10s}
THREADS=${THREADS:-$(nproc)}
COMMAND="$(printf '%q ' env SCALE="$SCALE" "$0" "$@")"

bytes() { python3 -c 'import re, sys
n, u = re.fullmatch(r"(\d+)\s*([KMGT]i?B?)?", sys.argv[1]).groups()
print(int(n) * 1024 ** " KMGT".index((u or " ")[0]))' "$1"; }

# The work directory: WORK if given (new or empty), else a new one under BENCH_TMPDIR (/tmp).
# On exit every process started here is stopped by its id (the new server's id is in new.pid
# while the Python side runs it) and the directory removed, unless KEEP=1.
if [ -n "${WORK:-}" ]; then
  if [ -e "$WORK" ] && [ -n "$(ls -A "$WORK")" ]; then echo "WORK=$WORK is not empty" >&2; exit 1; fi
  mkdir -p "$WORK"
  PIDS=()
else
  BENCH_TMPDIR=${BENCH_TMPDIR:-/tmp} bench_init busy-restart
fi
cleanup() {
  local p _
  [ -s "$WORK/new.pid" ] && PIDS+=("$(cat "$WORK/new.pid")")
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# forget PID: a process waited for is no longer signalled at exit (its id may be reused).
forget() {
  local p kept=()
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
  PIDS=("${kept[@]}")
}

# The binary is copied: the restart execs it a second time, and a rebuild in between must not
# put another hots3 on the same data.
HOTS3=$WORK/hots3-bin
cp "$BUILD/src/hots3" "$HOTS3"
# The port is fixed (the new process takes the old one's) and below the ephemeral range: a
# client retrying against a port of that range while nobody listens can be handed it as its own
# local port and connect to itself, and the new process's bind then fails.
PORT=$(python3 -c 'import random, socket
for port in random.sample(range(20000, 32000), 200):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port)); print(port); break
    except OSError:
        pass
    finally:
        s.close()')
URL=http://127.0.0.1:$PORT
GiB=$((1024 * 1024 * 1024))
DATA=$WORK/hots3/data
mkdir -p "$WORK/hots3"
cat > "$WORK/hots3/hots3.toml" <<CONF
[http]
threads = $THREADS
shutdown_grace = "$GRACE"
[log]
access_log = ""
level = "info"
[storage]
device_size = $((2 * BIG_COUNT * $(bytes "$BIG_SIZE") + 2 * SCALE * $(bytes "$SCALE_SIZE") + 2 * GiB))
cache_size = 0
[[users]]
name = "bench"
access_key = "$BENCH_ACCESS_KEY"
secret_key = "$BENCH_SECRET_KEY"
admin = true
CONF
# launch: hots3 on DATA at PORT (what the Python side also runs for the restart); sets
# HOTS3_PID and READY_S, exec to the first 200 of /health/ready.
launch() {
  HOTS3_BIN=$HOTS3 HOTS3_LISTEN=127.0.0.1:$PORT HOTS3_DATA=$DATA relaunch_hots3
  READY_S=$HOTS3_READY_S
}

SMALL_BYTES=$(bytes "$SCALE_SIZE")
BIG_BYTES=$(bytes "$BIG_SIZE")
BIG_RATE_BYTES=$(bytes "$BIG_RATE")
export PORT AK=$BENCH_ACCESS_KEY SK=$BENCH_SECRET_KEY BUCKET=busy PREFIX=lg/ DIRS=1000 SCALE \
  SMALL_BYTES BIG_COUNT BIG_SIZE BIG_BYTES BIG_RATE BIG_RATE_BYTES SMALL_C PROBES RETRY_MS WARM \
  AFTER GRACE HOTS3 CONF=$WORK/hots3/hots3.toml DATA PORT_FILE=$WORK/hots3/port \
  LOG=$WORK/hots3/log WORK
cat > "$WORK/busy.py" <<'PY'
# The clients, the restart and the report; see the head of bench/s3/busy_restart.sh.
import asyncio, hashlib, hmac, json, multiprocessing, os, random, select, signal, socket
import subprocess, sys, time

E = os.environ
PORT, HOST = int(E["PORT"]), "127.0.0.1:" + E["PORT"]
BUCKET, PREFIX, DIRS, SCALE = E["BUCKET"], E["PREFIX"], int(E["DIRS"]), int(E["SCALE"])
SMALL_BYTES, BIG_COUNT = int(E["SMALL_BYTES"]), int(E["BIG_COUNT"])
BIG_BYTES, BIG_RATE = int(E["BIG_BYTES"]), int(E["BIG_RATE_BYTES"])
SMALL_C, PROBES, RETRY = int(E["SMALL_C"]), int(E["PROBES"]), int(E["RETRY_MS"]) / 1000
WARM, AFTER = float(E["WARM"]), float(E["AFTER"])
def seconds(d):  # a configuration duration: "250ms", "10s", "1m", or a bare number of seconds
    if d.endswith("ms"):
        return float(d[:-2]) / 1000
    return float(d[:-1]) * {"s": 1, "m": 60, "h": 3600}[d[-1]] if d[-1] in "smh" else float(d)
GRACE = seconds(E["GRACE"])
CONNECT_TIMEOUT, SMALL_TIMEOUT = 2.0, 5.0
BIG_TIMEOUT = BIG_BYTES / BIG_RATE + GRACE + 30
LEAD = BIG_BYTES / BIG_RATE / 4  # the signal comes a quarter of the way into the slow GETs
now = time.monotonic  # CLOCK_MONOTONIC: one clock for the client process and this one

_keys = {}
def head(method, path, extra=""):
    """The request head, signed (SigV4, UNSIGNED-PAYLOAD) by the bench user."""
    amz = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    day = amz[:8]
    if day not in _keys:
        k = ("AWS4" + E["SK"]).encode()
        for part in (day, "us-east-1", "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        _keys[day] = k
    signed = "host;x-amz-content-sha256;x-amz-date"
    canonical = (f"{method}\n{path}\n\nhost:{HOST}\nx-amz-content-sha256:UNSIGNED-PAYLOAD\n"
                 f"x-amz-date:{amz}\n\n{signed}\nUNSIGNED-PAYLOAD")
    scope = f"{day}/us-east-1/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    sig = hmac.new(_keys[day], to_sign.encode(), hashlib.sha256).hexdigest()
    return (f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD\r\n"
            f"x-amz-date: {amz}\r\nAuthorization: AWS4-HMAC-SHA256 Credential={E['AK']}/{scope}, "
            f"SignedHeaders={signed}, Signature={sig}\r\n{extra}\r\n").encode()

def small_key(i):  # the generator's key of object i with --dirs
    return f"{PREFIX}d{i % DIRS:04}/obj-{i:07}"

def parse_head(raw):
    lines = raw.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), headers

# ---- put-big: the slow GETs' objects, bytes known here -----------------------------------------
def put_big():
    body = os.urandom(BIG_BYTES) if BIG_COUNT else b""
    for i in range(BIG_COUNT):
        s = socket.create_connection(("127.0.0.1", PORT))
        s.sendall(head("PUT", f"/{BUCKET}/big/obj-{i}", f"Content-Length: {len(body)}\r\n"))
        s.sendall(body)
        raw = b""
        while b"\r\n\r\n" not in raw:
            chunk = s.recv(65536)
            if not chunk:
                sys.exit("PUT big/obj-%d: connection closed" % i)
            raw += chunk
        status, _ = parse_head(raw.split(b"\r\n\r\n")[0])
        if status != 200:
            sys.exit("PUT big/obj-%d: %d %s" % (i, status, raw[:500]))
        s.close()
    with open(os.path.join(E["WORK"], "big.sha256"), "w") as f:
        f.write(hashlib.sha256(body).hexdigest())

# ---- the clients (one process, asyncio) -------------------------------------------------------
# connects: (kind, start, end, result); requests: (kind, connection's start, sent, done,
# outcome, requests before it on its connection, answered with Connection: close).
def clients(stop, big_started, out):
    connects, requests = [], []
    big_sha = open(os.path.join(E["WORK"], "big.sha256")).read()

    async def connect(kind, limit=65536):
        t0 = now()
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", PORT, limit=limit),
                                          CONNECT_TIMEOUT)
            connects.append((kind, t0, now(), "accepted"))
            return r, w, t0
        except ConnectionRefusedError:
            result = "refused"
        except ConnectionResetError:
            result = "reset"
        except asyncio.TimeoutError:
            result = "timeout"
        except OSError as e:
            result = "error " + (os.strerror(e.errno) if e.errno else str(e))
        connects.append((kind, t0, now(), result))
        return None

    def failure(e):
        if isinstance(e, asyncio.TimeoutError):
            return "timeout"
        if isinstance(e, asyncio.IncompleteReadError):
            return "closed"  # an orderly close before the whole answer
        if isinstance(e, (ConnectionResetError, BrokenPipeError)):
            return "reset"
        return "error " + repr(e)

    async def small_get(r, w, key):
        w.write(head("GET", f"/{BUCKET}/{key}"))
        await w.drain()
        status, headers = parse_head((await r.readuntil(b"\r\n\r\n"))[:-4])
        body = await r.readexactly(int(headers.get("content-length", "0")))
        close = headers.get("connection", "").lower() == "close"
        if status != 200:
            return f"status {status}", close
        if len(body) != SMALL_BYTES or hashlib.md5(body).hexdigest() != headers.get("etag", "").strip('"'):
            return "corrupt", close
        return "ok", close

    async def small_client(seed, kind):
        # kind "small": one connection kept while it lasts, requests back to back; "probe": a new
        # connection for each GET, one every RETRY. Both retry every RETRY after a failure.
        rng = random.Random(seed)
        conn, n = None, 0
        while not stop.is_set():
            t_start = now()
            if conn is None:
                conn, n = await connect(kind), 0
                if conn is None:
                    await asyncio.sleep(RETRY)
                    continue
            r, w, t0 = conn
            sent = now()
            try:
                outcome, close = await asyncio.wait_for(small_get(r, w, small_key(rng.randrange(SCALE))),
                                                        SMALL_TIMEOUT)
            except Exception as e:  # noqa: BLE001 (every way a request ends is counted)
                outcome, close = failure(e), True
            requests.append((kind, t0, sent, now(), outcome, n, close))
            n += 1
            if close or outcome != "ok" or kind == "probe":
                w.close()
                conn = None
            if outcome != "ok":
                await asyncio.sleep(RETRY)
            elif kind == "probe":
                await asyncio.sleep(max(0.0, RETRY - (now() - t_start)))

    async def big_get(i):
        conn = await connect("big", limit=1 << 20)
        if conn is None:
            requests.append(("big", now(), now(), now(), "no connection", 0, True))
            return
        r, w, t0 = conn
        sent = now()
        try:
            async def read():
                w.write(head("GET", f"/{BUCKET}/big/obj-{i}"))
                await w.drain()
                status, headers = parse_head((await r.readuntil(b"\r\n\r\n"))[:-4])
                if status != 200:
                    return f"status {status}"
                with big_started.get_lock():
                    big_started.value += 1
                size, got, sha, first = int(headers["content-length"]), 0, hashlib.sha256(), now()
                while got < size:
                    chunk = await r.read(min(1 << 20, size - got))
                    if not chunk:
                        raise asyncio.IncompleteReadError(b"", size - got)
                    sha.update(chunk)
                    got += len(chunk)
                    ahead = got / BIG_RATE - (now() - first)  # read no faster than BIG_RATE
                    if ahead > 0:
                        await asyncio.sleep(ahead)
                return "ok" if size == BIG_BYTES and sha.hexdigest() == big_sha else "corrupt"
            outcome = await asyncio.wait_for(read(), BIG_TIMEOUT)
        except Exception as e:  # noqa: BLE001
            outcome = failure(e)
        requests.append(("big", t0, sent, now(), outcome, 0, True))
        w.close()

    async def main():
        tasks = [asyncio.create_task(small_client(i, "small")) for i in range(SMALL_C)]
        tasks += [asyncio.create_task(small_client(1000 + i, "probe")) for i in range(PROBES)]
        await asyncio.sleep(max(0.0, WARM - LEAD))
        tasks += [asyncio.create_task(big_get(i)) for i in range(BIG_COUNT)]
        while not stop.is_set():
            await asyncio.sleep(0.05)
        await asyncio.gather(*tasks)

    asyncio.run(main())
    with open(out, "w") as f:
        json.dump({"connects": connects, "requests": requests}, f)

# ---- run: the load, the signal, the new process -------------------------------------------------
def run():
    old_pid = int(sys.argv[2])
    ctx = multiprocessing.get_context("fork")
    stop, big_started = ctx.Event(), ctx.Value("i", 0)
    records = os.path.join(E["WORK"], "records.json")
    client = ctx.Process(target=clients, args=(stop, big_started, records))
    t = {"clients": now()}
    client.start()
    new = None
    try:
        # SIGTERM once the load has run WARM seconds and the slow GETs are under way.
        time.sleep(WARM)
        while big_started.value < BIG_COUNT:
            if now() - t["clients"] > WARM + 30:
                sys.exit("the slow GETs did not start")
            time.sleep(0.01)
        pidfd = os.pidfd_open(old_pid)
        t["term"] = now()
        os.kill(old_pid, signal.SIGTERM)
        if not select.select([pidfd], [], [], GRACE + 120)[0]:
            sys.exit("the old process did not exit")
        t["exit"] = now()
        # The start, as a service manager does it once the old process is gone.
        cmd = [E["HOTS3"], "serve", "--config", E["CONF"], "--data", E["DATA"], "--listen",
               f"127.0.0.1:{PORT}", "--port-file", E["PORT_FILE"]]
        try:
            os.unlink(E["PORT_FILE"])
        except FileNotFoundError:
            pass
        log = open(E["LOG"], "ab")
        t["exec"] = now()
        new = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        with open(os.path.join(E["WORK"], "new.pid"), "w") as f:
            f.write(str(new.pid))
        while not (os.path.exists(E["PORT_FILE"]) and os.path.getsize(E["PORT_FILE"]) > 0):
            if new.poll() is not None:
                sys.exit("the new process exited: %d" % new.returncode)
            time.sleep(0.001)
        t["port"] = now()
        ready_req = f"GET /health/ready HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode()
        while "ready" not in t:
            try:
                with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
                    s.sendall(ready_req)
                    if s.recv(64).startswith(b"HTTP/1.1 200"):
                        t["ready"] = now()
                        break
            except OSError:
                pass
            if new.poll() is not None:
                sys.exit("the new process exited: %d" % new.returncode)
            time.sleep(0.002)
        # The clients run on until AFTER seconds after the ready answer (their first answers
        # from the new process come about then).
        time.sleep(AFTER)
        stop.set()
        client.join(SMALL_TIMEOUT + BIG_TIMEOUT)
        if client.exitcode != 0:
            sys.exit("the client process failed: %s" % client.exitcode)
        t["new_term"] = now()
        new.send_signal(signal.SIGTERM)
        new_rc = new.wait(GRACE + 120)
        t["new_exit"] = now()
    finally:
        if client.is_alive():
            client.kill()
        if new is not None:
            if new.poll() is None:
                new.kill()
                new.wait()
            os.unlink(os.path.join(E["WORK"], "new.pid"))
    with open(os.path.join(E["WORK"], "times.json"), "w") as f:
        json.dump({"t": t, "new_rc": new_rc}, f)

# ---- report: the table ----------------------------------------------------------------------
def report():
    old_rc, start_s = int(sys.argv[2]), float(sys.argv[3])
    r = json.load(open(os.path.join(E["WORK"], "records.json")))
    times = json.load(open(os.path.join(E["WORK"], "times.json")))
    t, new_rc = times["t"], times["new_rc"]
    connects, requests = r["connects"], r["requests"]
    term, exit_, exec_ = t["term"], t["exit"], t["exec"]
    ms = lambda x: "%.1f" % (1000 * x)
    old = lambda q: q[1] < exit_   # a request's connection was opened before the old one exited
    ok = [q for q in requests if q[4] == "ok"]
    rows, missed = [], []

    def row(figure, value, goal="", passed=None):
        verdict = "" if passed is None else ("pass" if passed else "**missed**")
        if passed is False:
            missed.append(figure)
        rows.append((figure, value, goal, verdict))

    def tally(items, key):
        c = {}
        for x in items:
            c[key(x)] = c.get(key(x), 0) + 1
        return c

    def kinds(c, order):
        return " / ".join(str(c.get(k, 0)) for k in order) + \
            "".join(f", {n} {k}" for k, n in sorted(c.items()) if k not in order)

    before = [q for q in ok if term - 1 <= q[3] < term and q[0] != "big"]
    row("busy load in the last second before SIGTERM, small GETs/s", str(len(before)))
    for kind, name in (("big", f"slow GETs of {E['BIG_SIZE']} at {E['BIG_RATE']}/s"),
                       ("small", "small GETs (kept-alive and new connections)")):
        if kind == "big" and BIG_COUNT == 0:
            continue
        flight = [q for q in requests if (q[0] == "big") == (kind == "big") and q[2] < term < q[3]]
        good = [q for q in flight if q[4] == "ok"]
        within = [q for q in good if q[3] - term <= GRACE]
        bad = tally([q for q in flight if q[4] != "ok"], lambda q: q[4])
        row(f"in flight at SIGTERM, {name}: answered completely and correctly",
            f"{len(within)} of {len(flight)}" + "".join(f"; {n} {k}" for k, n in bad.items()),
            f"all, within {GRACE:g} s", len(within) == len(flight) and len(flight) > 0)
        if kind == "big" and flight:
            row("  the last of them answered, s after SIGTERM", "%.2f" % (max(q[3] for q in flight) - term))
    after = [q for q in requests if q[2] >= term and q[5] > 0 and old(q)]
    c = tally(after, lambda q: q[4])
    row("sent on kept-alive connections after SIGTERM: answered / closed unanswered / reset",
        kinds(c, ("ok", "closed", "reset")), "(shown: clients retry these)")
    drain = [x for x in connects if term <= x[1] < exit_]
    c = tally(drain, lambda x: x[3])
    row("new connections while the old process drains: refused / reset / timed out / accepted",
        kinds(c, ("refused", "reset", "timeout", "accepted")), "refused; no reset, no timeout",
        c.get("reset", 0) == 0 and c.get("timeout", 0) == 0 and set(c) <= {"refused", "accepted"})
    accepted = [q for q in requests if term <= q[1] < exit_]
    if accepted:
        ca = tally(accepted, lambda q: q[4])
        row("  the requests on those accepted: answered / closed unanswered / reset",
            kinds(ca, ("ok", "closed", "reset")) + " (connected %s-%s ms after SIGTERM)"
            % (ms(min(q[1] for q in accepted) - term), ms(max(q[1] for q in accepted) - term)),
            "answered", set(ca) == {"ok"})
    first_refusal = min([x[1] for x in drain if x[3] == "refused"], default=float("nan"))
    row("  the first refusal (the listeners closed by then), ms after SIGTERM", ms(first_refusal - term))
    refused = sorted(x[2] - x[1] for x in connects if term <= x[1] < t["port"] and x[3] == "refused")
    if refused:
        # Timed in the clients' event loop: its own delays are in the figure.
        row("  a refusal took, ms: median / at most", "%s / %s" % (ms(refused[len(refused) // 2]), ms(refused[-1])),
            "at most 100", refused[-1] <= 0.1)
    gone = [x for x in connects if exit_ <= x[1] < t["port"]]
    c = tally(gone, lambda x: x[3])
    row("new connections from the old exit to the new port file: refused / reset / timed out / accepted",
        kinds(c, ("refused", "reset", "timeout", "accepted")), "no reset, no timeout",
        c.get("reset", 0) == 0 and c.get("timeout", 0) == 0)
    row("old process: SIGTERM to exit, s", "%.3f" % (exit_ - term), f"<= {GRACE:g} (grace)",
        exit_ - term <= GRACE)
    row("  its exit status", str(old_rc), "0", old_rc == 0)
    row("the restart: old exit to exec of the new, ms", ms(exec_ - exit_))
    new_ok = [q for q in ok if not old(q)]
    first_new = min(q[3] for q in new_ok) if new_ok else float("nan")
    row("new process: exec to port file, ms", ms(t["port"] - exec_))
    row("new process: exec to first 200 of /health/ready, ms", ms(t["ready"] - exec_), "<= 2000",
        t["ready"] - exec_ <= 2)
    first_get = [q[3] for q in new_ok if q[0] != "big"]
    row("new process: exec to first 200 of a signed GET (existing object), ms",
        ms(min(first_get) - exec_) if first_get else "none", "<= 2000",
        bool(first_get) and min(first_get) - exec_ <= 2)
    # The gap as the small GETs' clients see it. The slow GETs are left out: the old process has
    # sent their last bytes before it exits, but they sit in socket buffers and are read later.
    last_old = max([q[3] for q in ok if old(q) and q[0] != "big"], default=float("nan"))
    row("the old process's last answer to a small GET, ms after SIGTERM", ms(last_old - term))
    row(f"the gap: last answer of the old to first of the new, ms (retries every {E['RETRY_MS']} ms)",
        ms(first_new - last_old))
    row("  SIGTERM to the first answer of the new, ms", ms(first_new - term))
    later = [q for q in requests if not old(q) and new_ok and q[2] >= first_new]
    c = tally(later, lambda q: q[4])
    row("requests to the new process after its first answer: ok / failed",
        f"{c.get('ok', 0)} / {len(later) - c.get('ok', 0)}" + "".join(f" ({n} {k})" for k, n in c.items() if k != "ok"),
        "none failed", len(later) > 0 and len(later) == c.get("ok", 0))
    row("new process: SIGTERM to exit when it is stopped at the end, s (exit status)",
        "%.3f (%d)" % (t["new_exit"] - t["new_term"], new_rc))

    print("start of the old process before the measured restart (exec to ready): %.3f s" % start_s)
    print("timeline, ms after SIGTERM: old exit %s, exec %s, port file %s, ready %s, first answer %s"
          % tuple(ms(x - term) for x in (exit_, exec_, t["port"], t["ready"], first_new)))
    print()
    print("| figure | measured | goal | |")
    print("|---|---:|---|---|")
    for figure, value, goal, verdict in rows:
        print(f"| {figure} | {value} | {goal} | {verdict} |")
    print()
    print("%d goal(s) missed%s" % (len(missed), "".join("\n   MISSED: " + m for m in missed)))
    sys.exit(1 if missed else 0)

{"put-big": put_big, "run": run, "report": report}[sys.argv[1]]()
PY

echo "== busy restart: $(date -u +%Y-%m-%dT%H:%MZ), $(git describe --always --dirty 2>/dev/null || echo '?'), $("$HOTS3" --version) built $(date -u -r "$BUILD/src/hots3" +%Y-%m-%dT%H:%MZ)"
echo "command: $COMMAND"
bench/machine.sh "$WORK"
echo "memory available: $(awk '/MemAvailable/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo); $THREADS server workers;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg) (a shared machine's other work is in the figures)"
echo "store: $SCALE objects of $SCALE_SIZE over 1000 directories and $BIG_COUNT of $BIG_SIZE; port $PORT; grace $GRACE"
echo "load: $SMALL_C clients of small GETs back to back, $PROBES on a new connection each $RETRY_MS ms,"
echo "  $BIG_COUNT slow GETs at $BIG_RATE/s each; retries every $RETRY_MS ms"

launch
t0=$(date +%s)
"$LOADGEN" --endpoint "$URL" --access-key "$BENCH_ACCESS_KEY" --secret-key "$BENCH_SECRET_KEY" --bucket busy \
  --dirs 1000 --size "$SCALE_SIZE" --workload head --objects "$SCALE" -c 128 --ops 1 > "$WORK/fill.out" 2>&1 ||
  { echo "the fill failed: $(tail -5 "$WORK/fill.out")" >&2; exit 1; }
python3 "$WORK/busy.py" put-big
sync -f "$WORK"
echo "fill: $(grep -o 'prepared .*' "$WORK/fill.out"), and the $BIG_COUNT large ones: $(($(date +%s) - t0)) s in all"
stop_hots3
forget "$HOTS3_PID"
launch
echo
python3 "$WORK/busy.py" run "$HOTS3_PID"
OLD_RC=0
wait "$HOTS3_PID" || OLD_RC=$?
forget "$HOTS3_PID"
python3 "$WORK/busy.py" report "$OLD_RC" "$READY_S"
