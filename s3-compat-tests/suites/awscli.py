"""The AWS CLI, unmodified: S3COMPAT_AWS_CLI names it (the image's v1, `python3 -m awscli`, with
botocore 1.43's checksum defaults; or Debian's v2.9, /usr/bin/aws, with the older defaults).
Configured as a user does it: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_DEFAULT_REGION and
--endpoint-url, no config file. `aws s3` keeps its transfer defaults: 8 MiB multipart threshold
and chunks, 10 concurrent requests, sync by size and time, DeleteObjects for rm --recursive."""

import concurrent.futures
import datetime
import json
import os
import random
import re
import shlex
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import compat  # noqa: E402
from compat import KiB, MiB, expect, expect_equal, expect_fails, run  # noqa: E402

CLI = shlex.split(os.environ.get("S3COMPAT_AWS_CLI", "aws"))
suite = compat.Suite()
B = suite.client  # "awscli-v1" / "awscli-v2"
ENV = compat.aws_env()


def aws(*args, env=ENV, check=True, timeout=600):
    return run(CLI + ["--endpoint-url", compat.ENDPOINT, *args], env=env, check=check, timeout=timeout)


def api(*args, env=ENV):
    out = aws("s3api", *args, "--output", "json", env=env).stdout
    return json.loads(out) if out.strip() else {}


def fails(*args, needles=(), env=ENV):
    return expect_fails(CLI + ["--endpoint-url", compat.ENDPOINT, *args], env=env, needles=needles)


def ls(path, *flags):
    """(directories, files) of `aws s3 ls`: "PRE name/" lines and the last column of the rest."""
    dirs, files = [], []
    for line in aws("s3", "ls", *flags, path).stdout.splitlines():
        if line.strip().startswith("PRE "):
            dirs.append(line.strip()[4:])
        elif line.strip():
            files.append(line.split(None, 3)[3])
    return dirs, files


def put_option_exists(option):
    r = run(CLI + ["s3api", "put-object", "help"], env=dict(ENV, PAGER="cat", MANPAGER="cat"), check=False)
    return option in r.stdout


_version = run(CLI + ["--version"], env=ENV)
suite.version(" ".join(t for t in (_version.stdout + _version.stderr).split()
                       if t.startswith(("aws-cli/", "botocore/"))))


@suite.check("basic", "s3 mb, ls, cp up and down, s3api put-object/head-object with metadata")
def _():
    aws("s3", "mb", "s3://" + B)
    expect(B in aws("s3", "ls").stdout, "bucket not listed")
    data = compat.random_bytes(300 * KiB + 1, 1)
    src = suite.path("up", "one.bin")
    compat.write_file(src, data)
    aws("s3", "cp", src, "s3://%s/dir/one.bin" % B)
    dst = suite.path("down", "one.bin")
    aws("s3", "cp", "s3://%s/dir/one.bin" % B, dst)
    expect_equal(compat.read_file(dst), data, "downloaded bytes")
    api("put-object", "--bucket", B, "--key", "dir/meta.bin", "--body", src, "--content-type", "application/x-test",
        "--metadata", "owner=awscli,step=7")
    head = api("head-object", "--bucket", B, "--key", "dir/meta.bin")
    expect_equal((head["ContentLength"], head["ContentType"], head["Metadata"], head["ETag"]),
                 (len(data), "application/x-test", {"owner": "awscli", "step": "7"}, '"%s"' % compat.md5(data)), "head")
    out = suite.path("down", "range.bin")
    r = api("get-object", "--bucket", B, "--key", "dir/one.bin", "--range", "bytes=1000-1999", out)
    expect_equal((r["ContentRange"], compat.read_file(out)), ("bytes 1000-1999/%d" % len(data), data[1000:2000]), "range")


@suite.check("basic", "s3 cp (server-side copy), mv, rm, s3api list-objects-v2 with a delimiter")
def _():
    aws("s3", "cp", "s3://%s/dir/one.bin" % B, "s3://%s/dir/sub/copy.bin" % B)
    aws("s3", "mv", "s3://%s/dir/sub/copy.bin" % B, "s3://%s/dir/sub/moved.bin" % B)
    expect_equal(ls("s3://%s/dir/" % B), (["sub/"], ["meta.bin", "one.bin"]), "ls dir/")
    expect_equal(ls("s3://%s/dir/sub/" % B), ([], ["moved.bin"]), "ls dir/sub/")
    r = api("list-objects-v2", "--bucket", B, "--prefix", "dir/", "--delimiter", "/")
    expect_equal(([p["Prefix"] for p in r["CommonPrefixes"]], [o["Key"] for o in r["Contents"]]),
                 (["dir/sub/"], ["dir/meta.bin", "dir/one.bin"]), "list-objects-v2")
    aws("s3", "rm", "s3://%s/dir/sub/moved.bin" % B)
    expect_equal(ls("s3://%s/dir/" % B), ([], ["meta.bin", "one.bin"]), "after rm")


@suite.check("multipart", "s3 cp of 40 MiB (8 MiB parts in parallel), down again (parallel ranges)")
def _():
    data = compat.random_bytes(40 * MiB + 5, 2)
    src = suite.path("up", "big.bin")
    compat.write_file(src, data)
    aws("s3", "cp", src, "s3://%s/big/big.bin" % B)
    head = api("head-object", "--bucket", B, "--key", "big/big.bin")
    expect(head["ETag"].endswith('-6"'), "ETag of six parts: %s" % head["ETag"])
    dst = suite.path("down", "big.bin")
    aws("s3", "cp", "s3://%s/big/big.bin" % B, dst)
    expect_equal(compat.sha256(compat.read_file(dst)), compat.sha256(data), "downloaded")
    aws("s3", "cp", "s3://%s/big/big.bin" % B, "s3://%s/big/copy.bin" % B)  # multipart copy (UploadPartCopy)
    dst2 = suite.path("down", "copy.bin")
    aws("s3", "cp", "s3://%s/big/copy.bin" % B, dst2)
    expect_equal(compat.sha256(compat.read_file(dst2)), compat.sha256(data), "copied object")
    expect_equal(api("list-multipart-uploads", "--bucket", B).get("Uploads", []), [], "uploads left")


@suite.check("multipart", "s3api create-multipart-upload, upload-part, list-parts, complete")
def _():
    parts = [compat.random_bytes(5 * MiB, 20), b"last part"]
    uid = api("create-multipart-upload", "--bucket", B, "--key", "mp/manual.bin")["UploadId"]
    etags = []
    for n, p in enumerate(parts, 1):
        f = suite.path("parts", "%d" % n)
        compat.write_file(f, p)
        etags.append(api("upload-part", "--bucket", B, "--key", "mp/manual.bin", "--upload-id", uid,
                         "--part-number", str(n), "--body", f)["ETag"])
    listed = api("list-parts", "--bucket", B, "--key", "mp/manual.bin", "--upload-id", uid)["Parts"]
    expect_equal([(p["PartNumber"], p["Size"]) for p in listed], [(1, 5 * MiB), (2, len(parts[1]))], "parts")
    mpu = json.dumps({"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]})
    api("complete-multipart-upload", "--bucket", B, "--key", "mp/manual.bin", "--upload-id", uid,
        "--multipart-upload", mpu)
    out = suite.path("down", "manual.bin")
    api("get-object", "--bucket", B, "--key", "mp/manual.bin", out)
    expect_equal(compat.read_file(out), b"".join(parts), "assembled")


# --- Dataset --------------------------------------------------------------------------------------

def dataset():
    root = os.path.join(suite.data_dir, "dataset")
    return root, compat.dataset(root)


@suite.check("dataset", "s3 sync of 1,000 shards; ls per directory; a second sync does nothing")
def _():
    root, layout = dataset()
    aws("s3", "sync", root, "s3://%s/dataset/" % B, "--exclude", ".complete")
    expect_equal(ls("s3://%s/dataset/" % B), (["train/", "val/"], ["manifest.json"]), "top level")
    expect_equal(ls("s3://%s/dataset/train/" % B)[0], ["part-%d/" % i for i in range(8)], "train/")
    for d in compat.DATASET_DIRS:
        want = sorted(rel.split("/")[-1] for rel, _ in layout if rel.rsplit("/", 1)[0] == d)
        expect_equal(ls("s3://%s/dataset/%s/" % (B, d)), ([], want), "ls " + d)
    listing = aws("s3", "ls", "--recursive", "s3://%s/dataset/" % B).stdout.splitlines()
    sizes = {line.split(None, 3)[3][len("dataset/"):]: int(line.split()[2]) for line in listing}
    expect_equal(len(sizes), len(layout) + 1, "objects (ls --recursive, two pages)")
    for rel, size in layout:
        expect_equal(sizes.get(rel), size, "size of " + rel)
    again = aws("s3", "sync", root, "s3://%s/dataset/" % B, "--exclude", ".complete").stdout
    expect_equal(again, "", "a second sync")


def _ranged_reader(args):
    """One process of a data loader: `s3api get-object --range` for a few samples."""
    picks, root, out_dir = args
    bad = []
    for i, (rel, name, offset, size) in enumerate(picks):
        out = os.path.join(out_dir, "%d" % i)
        r = run(CLI + ["--endpoint-url", compat.ENDPOINT, "s3api", "get-object", "--bucket", B, "--key",
                       "dataset/" + rel, "--range", "bytes=%d-%d" % (offset, offset + size - 1), out],
                env=ENV, check=False)
        with open(os.path.join(root, rel), "rb") as f:
            f.seek(offset)
            if r.returncode != 0 or compat.read_file(out) != f.read(size):
                bad.append("%s:%s %s" % (rel, name, r.stderr[-300:]))
    return bad


@suite.check("dataset", "random samples by s3api get-object --range from 4 processes at once")
def _():
    root, layout = dataset()
    rng = random.Random(11)
    jobs = []
    for p in range(4):
        picks = []
        for rel, _ in rng.sample(layout, 3):
            name, offset, size = rng.choice(compat.shard_members(os.path.join(root, rel)))
            picks.append((rel, name, offset, size))
        jobs.append((picks, root, suite.dir("ranges", "%d" % p)))
    with concurrent.futures.ThreadPoolExecutor(4) as ex:  # each call is its own aws process
        bad = [b for r in ex.map(_ranged_reader, jobs) for b in r]
    expect_equal(bad, [], "samples that differ")


@suite.check("dataset", "s3 sync of a directory down; bytes as uploaded")
def _():
    root, layout = dataset()
    down = suite.dir("val")
    aws("s3", "sync", "s3://%s/dataset/val/" % B, down)
    got = compat.files_under(down)
    expect_equal(len(got), 200, "shards synced down")
    for name, data in got.items():
        expect(data == compat.read_file(os.path.join(root, "val", name)), "shard %s differs" % name)


# --- Many small files -----------------------------------------------------------------------------

@suite.check("small-files", "s3 sync of 2,000 small files, ls --recursive (pages), rm --recursive")
def _():
    up = suite.dir("small")
    files = compat.write_small_files(up, 2000)
    aws("s3", "sync", up, "s3://%s/small/" % B)
    listed = [line.split(None, 3)[3] for line in aws("s3", "ls", "--recursive", "s3://%s/small/" % B).stdout.splitlines()]
    expect_equal(sorted(listed), sorted("small/" + k for k in files), "keys")
    expect_equal(ls("s3://%s/small/a0/" % B)[0], ["b%02d/" % i for i in range(20)], "directories of a0/")
    r = api("list-objects-v2", "--bucket", B, "--prefix", "small/", "--max-items", "1500", "--page-size", "400")
    expect_equal(len(r["Contents"]), 1500, "--max-items over pages of 400")
    expect("NextToken" in r, "no NextToken after --max-items")
    r2 = api("list-objects-v2", "--bucket", B, "--prefix", "small/", "--starting-token", r["NextToken"])
    expect_equal([o["Key"] for o in r["Contents"] + r2["Contents"]], sorted("small/" + k for k in files),
                 "resumed with --starting-token")
    aws("s3", "rm", "--recursive", "s3://%s/small/" % B)
    left = aws("s3", "ls", "--recursive", "s3://%s/small/" % B, check=False)  # exit 1: nothing found
    expect_equal((left.returncode, left.stdout), (1, ""), "left after rm --recursive")


@suite.check("small-files", "awkward file names: sync up, list (encoding-type=url), sync down")
def _():
    names = [n for n in compat.AWKWARD_NAMES if "//" not in n]
    d = suite.dir("odd")
    for i, n in enumerate(names):
        compat.write_file(os.path.join(d, n), b"body %d" % i)
    aws("s3", "sync", d, "s3://%s/odd/" % B)
    r = api("list-objects-v2", "--bucket", B, "--prefix", "odd/")
    expect_equal(sorted(o["Key"] for o in r["Contents"]), sorted("odd/" + n for n in names), "keys")
    back = suite.dir("odd-back")
    aws("s3", "sync", "s3://%s/odd/" % B, back)
    expect(compat.files_under(back) == compat.files_under(d), "synced-down names or bodies differ")


# --- Checkpoint -----------------------------------------------------------------------------------

def step_dir(step):
    d = suite.dir("ckpt", "step-%d" % step)
    for rank in range(2):
        compat.write_file(os.path.join(d, "rank-%d.pt" % rank), compat.checkpoint_bytes(step + rank, 12 * MiB))
    return d


@suite.check("checkpoint", "save with s3 cp --recursive, load, rotate (rm --recursive), rename (mv)")
def _():
    for step in (100, 200, 300):
        aws("s3", "cp", "--recursive", step_dir(step), "s3://%s/ckpt/step-%d/" % (B, step))
    expect_equal(ls("s3://%s/ckpt/" % B)[0], ["step-100/", "step-200/", "step-300/"], "steps")
    load = suite.dir("load")
    aws("s3", "cp", "--recursive", "s3://%s/ckpt/step-300/" % B, load)
    expect(compat.files_under(load) == compat.files_under(step_dir(300)), "loaded checkpoint differs")
    aws("s3", "rm", "--recursive", "s3://%s/ckpt/step-100/" % B)
    aws("s3", "mv", "--recursive", "s3://%s/ckpt/step-300/" % B, "s3://%s/ckpt/best/" % B)
    expect_equal(ls("s3://%s/ckpt/" % B)[0], ["best/", "step-200/"], "after rotate and rename")
    best = suite.dir("best")
    aws("s3", "cp", "--recursive", "s3://%s/ckpt/best/" % B, best)
    expect(compat.files_under(best) == compat.files_under(step_dir(300)), "renamed checkpoint differs")


if put_option_exists("--if-none-match"):
    # AWS CLI v2.9 (Debian) predates conditional writes: it has no --if-none-match.
    @suite.check("checkpoint", "commit marker: s3api put-object --if-none-match '*', then 412")
    def _():
        marker = suite.path("COMMIT")
        compat.write_file(marker, b"step 300")
        api("put-object", "--bucket", B, "--key", "ckpt/best/COMMIT", "--body", marker, "--if-none-match", "*")
        fails("s3api", "put-object", "--bucket", B, "--key", "ckpt/best/COMMIT", "--body", marker,
              "--if-none-match", "*", needles=["PreconditionFailed"])


# --- Errors ---------------------------------------------------------------------------------------

@suite.check("errors", "NoSuchKey, 404, NoSuchBucket, BucketNotEmpty, InvalidRange")
def _():
    fails("s3api", "get-object", "--bucket", B, "--key", "no/such/key", suite.path("x"), needles=["NoSuchKey"])
    fails("s3", "cp", "s3://%s/no/such/key" % B, suite.path("x"), needles=["404"])
    fails("s3", "ls", "s3://awscli-no-such-bucket/", needles=["NoSuchBucket"])
    fails("s3", "cp", suite.path("up", "one.bin"), "s3://awscli-no-such-bucket/k", needles=["NoSuchBucket"])
    fails("s3", "rb", "s3://" + B, needles=["BucketNotEmpty"])
    fails("s3api", "get-object", "--bucket", B, "--key", "dir/one.bin", "--range", "bytes=%d-" % MiB, suite.path("x"),
          needles=["InvalidRange"])


@suite.check("errors", "SignatureDoesNotMatch with a wrong secret; AccessDenied for a read-only user")
def _():
    wrong = compat.aws_env(secret=compat.SECRET_KEY + "x")
    fails("s3", "ls", "s3://%s/" % B, env=wrong, needles=["SignatureDoesNotMatch"])
    fails("s3", "cp", suite.path("up", "one.bin"), "s3://%s/x" % B, env=wrong, needles=["SignatureDoesNotMatch"])
    shared = "shared-" + B
    aws("s3", "mb", "s3://" + shared)
    aws("s3", "cp", suite.path("up", "one.bin"), "s3://%s/one.bin" % shared)
    reader = compat.clean_env({"AWS_ACCESS_KEY_ID": os.environ["S3COMPAT_READER_ACCESS_KEY"],
                               "AWS_SECRET_ACCESS_KEY": os.environ["S3COMPAT_READER_SECRET_KEY"],
                               "AWS_DEFAULT_REGION": compat.REGION})
    aws("s3", "cp", "s3://%s/one.bin" % shared, suite.path("reader.bin"), env=reader)
    fails("s3", "cp", suite.path("up", "one.bin"), "s3://%s/two.bin" % shared, env=reader, needles=["AccessDenied"])
    fails("s3", "rm", "s3://%s/one.bin" % shared, env=reader, needles=["AccessDenied"])
    aws("s3", "rb", "--force", "s3://" + shared)


@suite.check("presign", "s3 presign: the URL works for another program, and expires")
def _():
    url = aws("s3", "presign", "s3://%s/dir/one.bin" % B, "--expires-in", "120").stdout.strip()
    with urllib.request.urlopen(url, timeout=30) as r:
        expect_equal(r.read(), compat.random_bytes(300 * KiB + 1, 1), "presigned GET")
    short = aws("s3", "presign", "s3://%s/dir/one.bin" % B, "--expires-in", "1").stdout.strip()
    time.sleep(2.1)
    try:
        urllib.request.urlopen(short, timeout=30)
        raise compat.CheckFailed("an expired URL was served")
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        expect_equal(e.code, 403, "status of an expired URL")
        expect("<Code>AccessDenied</Code>" in body and "expired" in body.lower(), "body: " + body)


# --- Connection reuse -----------------------------------------------------------------------------

_DEBUG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - (\S+) - "
                         r"botocore\.(endpoint|parsers) - DEBUG - (Sending http request|Response headers)")


def request_times(debug_log):
    """[(seconds, thread)] from sending each request to reading its response head, from the
    CLI's --debug log (each thread of the transfer manager sends one request at a time)."""
    sent, out = {}, []
    for line in debug_log.splitlines():
        m = _DEBUG_LINE.match(line)
        if not m:
            continue
        at = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if m.group(4) == "Sending http request":
            sent[m.group(2)] = at
        elif m.group(2) in sent:
            out.append((at - sent.pop(m.group(2)), m.group(2)))
    return out


RB = B + "-reuse"


@suite.check("reuse", "s3 sync up and down, cp --recursive, rm --recursive of 300 files, a third "
                      "of them empty, on 2 connections: each request under %g s" % compat.SOAK_BOUND_SECONDS)
def _():
    rng = random.Random(28)
    up = suite.dir("reuse-up")
    files = {}
    for i in range(300):
        name = "d%d/f%03d" % (i % 3, i)
        files[name] = b"" if rng.random() < 1 / 3 else compat.random_bytes(rng.randrange(1, 70 * KiB), i)
        compat.write_file(os.path.join(up, name), files[name])
    config = suite.path("reuse-config")
    with open(config, "w") as f:
        f.write("[default]\ns3 =\n  max_concurrent_requests = 2\n")
    env = dict(ENV, AWS_CONFIG_FILE=config)
    aws("s3", "mb", "s3://" + RB)
    down = suite.dir("reuse-down")
    longest = (0.0, "")
    for command in (["s3", "sync", up, "s3://%s/reuse/" % RB],
                    ["s3", "sync", "s3://%s/reuse/" % RB, down],
                    ["s3", "cp", "--recursive", "s3://%s/reuse/" % RB, "s3://%s/reuse-copy/" % RB],
                    ["s3", "rm", "--recursive", "s3://%s/reuse-copy/" % RB],
                    ["s3", "rm", "--recursive", "s3://%s/reuse/" % RB]):
        # A request waiting for a read timeout (60 s) fails the check within the command's limit.
        r = aws("--debug", *command, env=env, timeout=120)
        times = request_times(r.stderr)
        expect(times, "no requests found in the --debug log of %s" % " ".join(command[:2]))
        worst = max(times)
        expect(worst[0] <= compat.SOAK_BOUND_SECONDS, "%s: a request took %.1f s"
               % (" ".join(command[:3]), worst[0]))
        longest = max(longest, (worst[0], " ".join(command[:2])))
    for name, data in files.items():
        expect_equal(compat.read_file(os.path.join(down, name)), data, "downloaded " + name)
    aws("s3", "rb", "s3://" + RB)
    print("soak: the longest request %.3f s (%s)" % longest)


@suite.check("basic", "clean up: s3 rb --force")
def _():
    aws("s3", "rb", "--force", "s3://" + B)
    expect(B not in aws("s3", "ls").stdout.split(), "bucket still listed")


suite.main()
