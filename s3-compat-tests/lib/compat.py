"""What every Python suite of s3-compat-tests shares: the connection settings the runner hands
over, the results protocol, and deterministic test data (WebDataset shards, small files,
checkpoints). Standard library only: the suites run under the image's python3 and Debian's.

A suite is a script that builds a `Suite`, registers checks with `@suite.check(area, name)` and
calls `suite.main()`. The runner (s3-compat-tests/run) sets:

  S3COMPAT_ENDPOINT    http://127.0.0.1:<port> of a fresh hots3
  S3COMPAT_ACCESS_KEY / S3COMPAT_SECRET_KEY / S3COMPAT_REGION
  S3COMPAT_CLIENT      the client's name in the table ("boto3", "s3cmd", ...)
  S3COMPAT_RESULTS     a JSON-lines file each record is appended to
  S3COMPAT_TMP         a scratch directory of this suite (removed by the runner)
  S3COMPAT_DATA        a directory shared by the suites of one run (generated data, cached)
  S3COMPAT_ONLY        optional: run only the checks whose name contains one of these texts
                       (separated by "|")

Records: {"type": "client", "client": ..., "version": ...} once, then one
{"type": "check", "client", "area", "name", "ok", "seconds", "detail"} per check. A check
fails when it raises; there is no skip."""

import hashlib
import io
import json
import os
import random
import sys
import tarfile
import time
import traceback

# The columns of the README table, in order. A check belongs to exactly one.
AREAS = ("basic", "multipart", "dataset", "small-files", "checkpoint", "errors", "concurrency",
         "presign", "reuse")

# The connection-reuse soak ("reuse"): one client with a small connection pool runs a long random
# mix of operations, successes and errors alike, and none may take longer than this. A request
# that leaves a pooled connection in a state the client misreads shows up as one operation
# waiting for the client's read timeout.
SOAK_OPERATIONS = int(os.environ.get("S3COMPAT_SOAK_OPERATIONS", "600"))
SOAK_BOUND_SECONDS = float(os.environ.get("S3COMPAT_SOAK_BOUND_SECONDS", "2"))

ENDPOINT = os.environ.get("S3COMPAT_ENDPOINT", "")
ACCESS_KEY = os.environ.get("S3COMPAT_ACCESS_KEY", "")
SECRET_KEY = os.environ.get("S3COMPAT_SECRET_KEY", "")
REGION = os.environ.get("S3COMPAT_REGION", "us-east-1")
HOST_PORT = ENDPOINT.split("://", 1)[-1]
KiB = 1024
MiB = 1024 * KiB


class CheckFailed(AssertionError):
    pass


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def expect_equal(actual, expected, what):
    if actual != expected:
        a, e = repr(actual), repr(expected)
        raise CheckFailed("%s: got %s, expected %s" % (what, a[:300], e[:300]))


class Suite:
    def __init__(self, client=None):
        self.client = client or os.environ.get("S3COMPAT_CLIENT", "unnamed")
        self.results_path = os.environ.get("S3COMPAT_RESULTS")
        self.tmp = os.environ.get("S3COMPAT_TMP") or os.path.join("/tmp", "s3compat-" + self.client)
        os.makedirs(self.tmp, exist_ok=True)
        self.data_dir = os.environ.get("S3COMPAT_DATA") or os.path.join(self.tmp, "data")
        os.makedirs(self.data_dir, exist_ok=True)
        self.only = os.environ.get("S3COMPAT_ONLY", "")
        self.checks = []
        self.failed = 0

    def _record(self, record):
        record["client"] = self.client
        line = json.dumps(record)
        if self.results_path:
            with open(self.results_path, "a") as f:
                f.write(line + "\n")
        else:
            print(line)

    def version(self, text):
        """The client's version as the table shows it."""
        self._record({"type": "client", "version": text.strip()})

    def check(self, area, name):
        assert area in AREAS, area

        def register(fn):
            self.checks.append((area, name, fn))
            return fn
        return register

    def main(self):
        for area, name, fn in self.checks:
            if self.only and not any(t in name for t in self.only.split("|")):
                continue
            start = time.monotonic()
            detail = ""
            try:
                fn()
                ok = True
            except Exception as e:  # a check fails by raising anything: report it, go on
                ok = False
                if isinstance(e, CheckFailed):
                    detail = str(e)
                else:
                    detail = "".join(traceback.format_exception_only(type(e), e)).strip()
                    traceback.print_exc()
            seconds = time.monotonic() - start
            if not ok:
                self.failed += 1
            print("%-4s %-12s %-50s %6.1fs %s" % ("ok" if ok else "FAIL", area, name, seconds,
                                                 detail[:2000]), flush=True)
            self._record({"type": "check", "area": area, "name": name, "ok": ok,
                          "seconds": round(seconds, 2), "detail": detail[:2000]})
        sys.exit(1 if self.failed else 0)

    def path(self, *parts):
        """A file path in the scratch directory (its directory exists)."""
        p = os.path.join(self.tmp, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def dir(self, *parts):
        """A directory in the scratch directory (created)."""
        p = os.path.join(self.tmp, *parts)
        os.makedirs(p, exist_ok=True)
        return p


def clean_env(extra=None):
    """The caller's environment without any AWS_* setting or AWS config file, so that only what
    the suite says reaches the client."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = "/nonexistent/aws-config"
    env["AWS_SHARED_CREDENTIALS_FILE"] = "/nonexistent/aws-credentials"
    env.update(extra or {})
    return env


def aws_env(secret=None):
    """What a user exports to point an AWS SDK or the AWS CLI at hots3 (the endpoint goes on the
    command line: the older SDKs and CLIs do not read AWS_ENDPOINT_URL)."""
    return clean_env({
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": secret or SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_PAGER": "",
    })


class SoakTimer:
    """Times every attempt a botocore client makes, from its send to its response, for the
    connection-reuse soak: a retry the client chooses to make (legacy mode retries BadDigest) is
    not a wait on the server, so attempts are timed, not calls."""

    def __init__(self, client):
        self.calls = []
        self.longest = (0.0, "", "")
        self._sent = 0.0
        client.meta.events.register("before-send.s3", self._attempt_sent)
        client.meta.events.register("response-received.s3", self._attempt_answered)

    def _attempt_sent(self, **_):
        self._sent = time.monotonic()

    def _attempt_answered(self, event_name, response_dict=None, exception=None, **_):
        status = str(response_dict["status_code"]) if response_dict else repr(exception)
        self.calls.append((time.monotonic() - self._sent, event_name.split(".")[-1], status))

    def run(self, operations, keys, rng):
        """SOAK_OPERATIONS steps, each an operation (a function of a key) on a key: no attempt
        may take longer than SOAK_BOUND_SECONDS."""
        for n in range(SOAK_OPERATIONS):
            op, key = rng.choice(operations), rng.choice(keys)
            del self.calls[:]
            op(key)
            for took, name, status in self.calls:
                expect(took <= SOAK_BOUND_SECONDS, "step %d (%s of %s): %s answered %s after %.1f s"
                       % (n, op.__name__, key, name, status, took))
                self.longest = max(self.longest, (took, name, status))
        print("soak: %d steps, the longest request %.3f s (%s, %s)" % (SOAK_OPERATIONS, *self.longest))


def random_bytes(n, seed):
    return random.Random(seed).randbytes(n)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def md5(data):
    return hashlib.md5(data).hexdigest()


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def write_file(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


# --- The dataset: WebDataset-style tar shards -------------------------------------------------
#
# 1,000 shards in "directories" as a training job lays them out: train/part-0 .. part-7 with 100
# shards each, val/ with 200, and a manifest at the top. Each shard is a tar of samples
# (<id>.jpg, <id>.cls, <id>.json), 64 KiB to 512 KiB: small enough for the CI budget, large
# enough that a sample read is a ranged GET in the middle of an object.

DATASET_DIRS = ["train/part-%d" % i for i in range(8)] + ["val"]


def dataset_layout(scale=1.0):
    """[(relative path, seed, target bytes)] of every shard, deterministic."""
    rng = random.Random(1234)
    out = []
    for d in DATASET_DIRS:
        count = 200 if d == "val" else 100
        count = max(1, int(count * scale))
        for i in range(count):
            out.append(("%s/shard-%06d.tar" % (d, i), rng.randrange(1 << 30),
                        rng.randrange(64 * KiB, 512 * KiB)))
    return out


def _make_shard(seed, target_bytes):
    rng = random.Random(seed)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        sample = 0
        while buf.tell() < target_bytes:
            sid = "%08d" % (seed % 100000 * 1000 + sample)
            jpg = rng.randbytes(rng.randrange(2 * KiB, 48 * KiB))
            members = [(sid + ".jpg", jpg), (sid + ".cls", b"%d\n" % rng.randrange(1000)),
                       (sid + ".json", json.dumps({"id": sid, "sha256": sha256(jpg)}).encode())]
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = 1700000000
                tar.addfile(info, io.BytesIO(data))
            sample += 1
    return buf.getvalue()


def dataset(root, scale=1.0):
    """Writes the shards under root (once; later calls reuse them) and returns their layout:
    [(relative path, size)]. A manifest.json at the top lists them."""
    layout = dataset_layout(scale)
    done = os.path.join(root, ".complete")
    if not os.path.exists(done):
        for rel, seed, target in layout:
            write_file(os.path.join(root, rel), _make_shard(seed, target))
        manifest = [{"path": rel, "size": os.path.getsize(os.path.join(root, rel))}
                    for rel, _, _ in layout]
        write_file(os.path.join(root, "manifest.json"), json.dumps(manifest).encode())
        write_file(done, b"")
    return [(rel, os.path.getsize(os.path.join(root, rel))) for rel, _, _ in layout]


def shard_members(path):
    """[(name, data offset, size)] of a tar shard: the index a WebDataset reader keeps to fetch
    one sample with a ranged GET."""
    with tarfile.open(path) as tar:
        return [(m.name, m.offset_data, m.size) for m in tar.getmembers()]


# --- Many small files --------------------------------------------------------------------------

def small_files_layout(count):
    """[(key suffix, seed, size)]: nested prefixes a<i>/b<j>/f<k>.bin, 1 to 16 KiB each."""
    rng = random.Random(99)
    per_leaf = 100
    leaves = max(1, count // per_leaf)
    out = []
    for leaf in range(leaves):
        a, b = divmod(leaf, 20)
        for k in range(min(per_leaf, count - leaf * per_leaf)):
            out.append(("a%d/b%02d/f%03d.bin" % (a, b, k), rng.randrange(1 << 30),
                        rng.randrange(1 * KiB, 16 * KiB + 1)))
    return out


# Keys that need care: spaces, '+', '%', '//', unicode, XML metacharacters, a tab (only
# representable in XML 1.0 listings with encoding-type=url), '?', '#', '~', '='.
AWKWARD_NAMES = [
    "space name.txt",
    "plus+sign.txt",
    "percent%41%2F.txt",
    "double//slash.txt",
    "unicodé/ファイル.txt",
    "xml<&>'\".txt",
    "tab\tkey.txt",
    "question?hash#.txt",
    "tilde~equals=.txt",
    "emoji-\U0001F600.txt",
]


# --- Checkpoints --------------------------------------------------------------------------------

def checkpoint_bytes(step, size):
    """A checkpoint shard of `size` bytes for training step `step` (distinct per step)."""
    return random_bytes(size, 7000 + step)


def run(args, env=None, check=True, timeout=300, stdin=None, cwd=None, binary=False):
    """Runs a client's command; with check, a non-zero exit status fails the check with the
    command's output. Returns the CompletedProcess (text, or bytes with binary)."""
    import subprocess
    r = subprocess.run(args, capture_output=True, env=env, timeout=timeout, stdin=stdin, cwd=cwd)
    if not binary:
        r.stdout = r.stdout.decode(errors="replace")
    r.stderr = r.stderr.decode(errors="replace")
    if check and r.returncode != 0:
        raise CheckFailed("%s exited %d:\n%s%s" % (" ".join(args)[:300], r.returncode,
                                                   str(r.stdout[-1500:]), r.stderr[-1500:]))
    return r


def expect_fails(args, env=None, needles=(), timeout=300):
    """Runs a command that must fail and whose output must contain every needle (e.g. the S3
    error code the client should surface). Returns the CompletedProcess."""
    r = run(args, env=env, check=False, timeout=timeout)
    out = r.stdout + r.stderr
    if r.returncode == 0:
        raise CheckFailed("%s succeeded, expected a failure:\n%s" % (" ".join(args)[:300],
                                                                      out[-1500:]))
    for n in needles:
        if n not in out:
            raise CheckFailed("%s: %r not in its output (exit %d):\n%s" % (
                " ".join(args)[:300], n, r.returncode, out[-1500:]))
    return r


def files_under(root):
    """{relative path: bytes} of every file under root."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = read_file(p)
    return out


def write_small_files(root, count):
    """The small-files layout as files under root; returns {relative path: bytes}."""
    out = {}
    for rel, seed, size in small_files_layout(count):
        data = random_bytes(size, seed)
        write_file(os.path.join(root, rel), data)
        out[rel] = data
    return out


# --- Raw S3 requests, to set up and to look behind a client (s3fs, curl) ------------------------
# tests/support/s3_support.py signs them (SigV4, standard library).

def _s3_support():
    support = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "support")
    if support not in sys.path:
        sys.path.insert(0, support)
    import s3_support
    return s3_support


def raw(method, path, query=(), headers=None, body=b""):
    """One signed request as the admin user; returns tests/support/harness.Response."""
    s3 = _s3_support()
    port = int(HOST_PORT.rsplit(":", 1)[1])
    req = s3.SignedRequest(method, path, query=query, headers=headers, body=body, port=port,
                           access=ACCESS_KEY, secret=SECRET_KEY)
    with s3.harness.connect(port, 60) as sock:
        sock.sendall(req.wire())
        return s3.harness.Reader(sock).read_response(head_request=(method == "HEAD"))


def raw_ok(method, path, query=(), headers=None, body=b""):
    r = raw(method, path, query, headers, body)
    if r.status // 100 != 2:
        raise CheckFailed("%s %s: %d %s" % (method, path, r.status, r.body[:500]))
    return r


def list_keys(bucket, prefix=""):
    """{key: size} under prefix (ListObjectsV2, every page)."""
    import xml.etree.ElementTree as ET
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    out, token = {}, None
    while True:
        query = [("list-type", "2"), ("prefix", prefix)]
        if token:
            query.append(("continuation-token", token))
        root = ET.fromstring(raw_ok("GET", "/" + bucket, query).body)
        for c in root.findall(ns + "Contents"):
            out[c.find(ns + "Key").text] = int(c.find(ns + "Size").text)
        token = root.findtext(ns + "NextContinuationToken")
        if root.findtext(ns + "IsTruncated") != "true":
            return out


def delete_bucket(bucket):
    """Deletes every object of `bucket`, then the bucket (raw signed requests)."""
    for key in list_keys(bucket):
        raw_ok("DELETE", "/%s/%s" % (bucket, key))
    raw_ok("DELETE", "/" + bucket)
