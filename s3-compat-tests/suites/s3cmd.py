"""s3cmd (Debian's), unmodified: a config file with only the keys and the endpoint, everything
else at its defaults (SigV4, 15 MiB multipart chunks uploaded one after another, MD5 kept in
x-amz-meta-s3cmd-attrs, batch deletes with DeleteObjects, SigV2 `signurl`)."""

import os
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import compat  # noqa: E402
from compat import KiB, MiB, expect, expect_equal, expect_fails, run  # noqa: E402

suite = compat.Suite()
B = "s3cmd"


def config(path, access=compat.ACCESS_KEY, secret=compat.SECRET_KEY):
    # What `s3cmd --configure` writes for a non-AWS endpoint, minus everything left at its
    # default. host_bucket without %(bucket)s means path-style requests.
    compat.write_file(path, ("[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\n"
                             "host_bucket = %s\nuse_https = False\n"
                             % (access, secret, compat.HOST_PORT, compat.HOST_PORT)).encode())
    return path


CFG = config(suite.path("s3cfg"))
ENV = compat.clean_env()


def s3cmd(*args, cfg=CFG, check=True, timeout=300):
    return run(["s3cmd", "-c", cfg, *args], env=ENV, check=check, timeout=timeout)


def fails(*args, needles=(), cfg=CFG):
    return expect_fails(["s3cmd", "-c", cfg, *args], env=ENV, needles=needles)


def keys(prefix):
    """Keys under prefix from `s3cmd ls --recursive` (the last column)."""
    out = s3cmd("ls", "--recursive", "s3://%s/%s" % (B, prefix)).stdout
    return [line.split("s3://%s/" % B, 1)[1] for line in out.splitlines() if "s3://" in line]


suite.version(run(["s3cmd", "--version"]).stdout.replace(" version", ""))


@suite.check("basic", "mb, put, get, info, ls (buckets and directories)")
def _():
    s3cmd("mb", "s3://" + B)
    expect("s3://%s" % B in s3cmd("ls").stdout, "bucket not listed")
    data = compat.random_bytes(200 * KiB + 3, 1)
    src = suite.path("up", "one.bin")
    compat.write_file(src, data)
    s3cmd("put", "--add-header=x-amz-meta-owner:s3cmd", src, "s3://%s/dir/one.bin" % B)
    s3cmd("put", "--mime-type=text/plain", src, "s3://%s/dir/sub/two.txt" % B)
    dst = suite.path("down", "one.bin")
    s3cmd("get", "s3://%s/dir/one.bin" % B, dst)
    expect_equal(compat.read_file(dst), data, "downloaded bytes")
    info = s3cmd("info", "s3://%s/dir/one.bin" % B).stdout
    expect("File size: %d" % len(data) in info, "size in info:\n" + info)
    expect("MD5 sum:   %s" % compat.md5(data) in info, "MD5 in info:\n" + info)
    expect("x-amz-meta-owner: s3cmd" in info, "metadata in info:\n" + info)
    expect("MIME type: text/plain" in s3cmd("info", "s3://%s/dir/sub/two.txt" % B).stdout, "mime type")
    top = s3cmd("ls", "s3://%s/dir/" % B).stdout
    expect("DIR  s3://%s/dir/sub/" % B in top and "s3://%s/dir/one.bin" % B in top, "ls of a directory:\n" + top)
    expect_equal(keys("dir/"), ["dir/one.bin", "dir/sub/two.txt"], "ls --recursive")
    # To standard output, as in `s3cmd get s3://b/k - | tar x`.
    text = suite.path("up", "hello.txt")
    compat.write_file(text, b"hello from s3cmd\n")
    s3cmd("put", text, "s3://%s/dir/hello.txt" % B)
    expect_equal(s3cmd("get", "s3://%s/dir/hello.txt" % B, "-").stdout, "hello from s3cmd\n", "get to stdout")


@suite.check("basic", "cp, mv (copy + delete), del")
def _():
    s3cmd("cp", "s3://%s/dir/one.bin" % B, "s3://%s/copies/one.bin" % B)
    s3cmd("mv", "s3://%s/copies/one.bin" % B, "s3://%s/moved/one.bin" % B)
    expect_equal(keys("copies/"), [], "keys left after mv")
    dst = suite.path("down", "moved.bin")
    s3cmd("get", "s3://%s/moved/one.bin" % B, dst)
    expect_equal(compat.read_file(dst), compat.random_bytes(200 * KiB + 3, 1), "moved bytes")
    s3cmd("del", "s3://%s/moved/one.bin" % B)
    expect_equal(keys("moved/"), [], "keys after del")


@suite.check("multipart", "put of 40 MiB: three 15 MiB parts, get, MD5 kept")
def _():
    data = compat.random_bytes(40 * MiB + 11, 2)
    src = suite.path("up", "big.bin")
    compat.write_file(src, data)
    # --progress only prints the parts (s3cmd shows no meter without a terminal).
    out = s3cmd("put", "--progress", src, "s3://%s/big/big.bin" % B).stdout
    expect("part 3 of 3" in out, "no three-part upload:\n" + out)
    info = s3cmd("info", "s3://%s/big/big.bin" % B).stdout
    expect("File size: %d" % len(data) in info, "size:\n" + info)
    dst = suite.path("down", "big.bin")
    out = s3cmd("get", "s3://%s/big/big.bin" % B, dst)
    expect("WARNING" not in out.stdout + out.stderr, "get warned (MD5 mismatch?):\n" + out.stderr)
    expect_equal(compat.sha256(compat.read_file(dst)), compat.sha256(data), "downloaded bytes")
    uploads = s3cmd("multipart", "s3://" + B).stdout.split("Initiated\tPath\tId", 1)[1]
    expect_equal(uploads.strip(), "", "unfinished uploads left")


@suite.check("multipart", "get --continue: ranged GET of the rest of a partial file")
def _():
    data = compat.random_bytes(40 * MiB + 11, 2)
    dst = suite.path("down", "partial.bin")
    compat.write_file(dst, data[:7 * MiB + 5])
    s3cmd("get", "--continue", "s3://%s/big/big.bin" % B, dst)
    expect_equal(compat.sha256(compat.read_file(dst)), compat.sha256(data), "resumed download")


@suite.check("small-files", "sync 1,200 small files up and down, ls across pages, del --recursive")
def _():
    up = suite.dir("small-up")
    files = compat.write_small_files(up, 1200)
    s3cmd("sync", up + "/", "s3://%s/small/" % B, timeout=600)
    listed = keys("small/")
    expect_equal(len(listed), len(files), "objects listed (two pages)")
    expect_equal(sorted(listed), sorted("small/" + k for k in files), "keys")
    again = s3cmd("sync", up + "/", "s3://%s/small/" % B).stdout
    expect("upload:" not in again, "a second sync uploaded again:\n" + again[-800:])
    dirs = s3cmd("ls", "s3://%s/small/a0/" % B).stdout
    expect_equal(dirs.count(" DIR "), 12, "directories under small/a0/:\n" + dirs)
    down = suite.dir("small-down")
    s3cmd("sync", "s3://%s/small/" % B, down + "/", timeout=600)
    got = compat.files_under(down)
    expect_equal(len(got), len(files), "files synced down")
    expect(got == files, "a synced-down file differs")
    s3cmd("del", "--recursive", "--force", "s3://%s/small/" % B, timeout=600)
    expect_equal(keys("small/"), [], "keys after del --recursive")


@suite.check("small-files", "awkward file names: put, ls, get")
def _():
    # File names, not paths (no "//"); and no tab: s3cmd itself turns control characters of
    # local names into "^I" ("non-printable characters replaced"), as it does against AWS.
    names = [n for n in compat.AWKWARD_NAMES if "//" not in n and "\t" not in n]
    d = suite.dir("odd")
    for i, n in enumerate(names):
        compat.write_file(os.path.join(d, n), b"body %d" % i)
    s3cmd("sync", d + "/", "s3://%s/odd/" % B)
    expect_equal(sorted(keys("odd/")), sorted("odd/" + n for n in names), "listed keys")
    for i, n in enumerate(names):
        dst = suite.path("odd-down", "%d" % i)
        s3cmd("get", "s3://%s/odd/%s" % (B, n), dst)
        expect_equal(compat.read_file(dst), b"body %d" % i, "body of %r" % n)


@suite.check("checkpoint", "save, commit marker with If-None-Match: *, rotate, rename")
def _():
    for step in (100, 200, 300):
        d = suite.dir("ckpt", "step-%d" % step)
        for rank in range(2):
            compat.write_file(os.path.join(d, "rank-%d.pt" % rank), compat.checkpoint_bytes(step + rank, 5 * MiB))
        s3cmd("put", "--recursive", d, "s3://%s/ckpt/" % B)
        marker = suite.path("ckpt", "COMMIT-%d" % step)
        compat.write_file(marker, b"step %d" % step)
        s3cmd("put", "--add-header=If-None-Match:*", marker, "s3://%s/ckpt/step-%d/COMMIT" % (B, step))
    fails("put", "--add-header=If-None-Match:*", suite.path("ckpt", "COMMIT-100"), "s3://%s/ckpt/step-300/COMMIT" % B,
          needles=["412", "PreconditionFailed"])
    expect_equal(sorted(keys("ckpt/step-300/")), ["ckpt/step-300/COMMIT", "ckpt/step-300/rank-0.pt",
                                                 "ckpt/step-300/rank-1.pt"], "step 300")
    # Load the latest step.
    dst = suite.path("load", "rank-1.pt")
    s3cmd("get", "s3://%s/ckpt/step-300/rank-1.pt" % B, dst)
    expect_equal(compat.read_file(dst), compat.checkpoint_bytes(301, 5 * MiB), "loaded shard")
    # Rotate: drop the oldest (DeleteObjects), rename the latest.
    s3cmd("del", "--recursive", "--force", "s3://%s/ckpt/step-100/" % B)
    s3cmd("mv", "--recursive", "s3://%s/ckpt/step-300/" % B, "s3://%s/ckpt/best/" % B)
    steps = s3cmd("ls", "s3://%s/ckpt/" % B).stdout
    expect_equal(sorted(line.split()[-1] for line in steps.splitlines()),
                 ["s3://%s/ckpt/best/" % B, "s3://%s/ckpt/step-200/" % B], "steps after rotation")
    dst = suite.path("load", "best-0.pt")
    s3cmd("get", "s3://%s/ckpt/best/rank-0.pt" % B, dst)
    expect_equal(compat.read_file(dst), compat.checkpoint_bytes(300, 5 * MiB), "renamed shard")


@suite.check("errors", "missing key, missing bucket, BucketNotEmpty")
def _():
    fails("get", "s3://%s/no/such/key" % B, suite.path("x"), needles=["does not exist"])
    fails("info", "s3://%s/no/such/key" % B, needles=["404"])
    fails("ls", "s3://s3cmd-no-such-bucket/", needles=["NoSuchBucket"])
    fails("put", suite.path("up", "one.bin"), "s3://s3cmd-no-such-bucket/k", needles=["NoSuchBucket"])
    fails("rb", "s3://" + B, needles=["BucketNotEmpty"])


@suite.check("errors", "wrong secret: SignatureDoesNotMatch; read-only user: AccessDenied")
def _():
    wrong = config(suite.path("s3cfg-wrong"), secret=compat.SECRET_KEY + "x")
    fails("ls", "s3://%s/" % B, cfg=wrong, needles=["SignatureDoesNotMatch"])
    fails("get", "s3://%s/dir/one.bin" % B, suite.path("x2"), cfg=wrong, needles=["403"])
    s3cmd("mb", "s3://shared-s3cmd")
    reader = config(suite.path("s3cfg-reader"), access=os.environ["S3COMPAT_READER_ACCESS_KEY"],
                    secret=os.environ["S3COMPAT_READER_SECRET_KEY"])
    s3cmd("put", suite.path("up", "one.bin"), "s3://shared-s3cmd/one.bin")
    s3cmd("get", "--force", "s3://shared-s3cmd/one.bin", suite.path("reader.bin"), cfg=reader)
    fails("put", suite.path("up", "one.bin"), "s3://shared-s3cmd/two.bin", cfg=reader, needles=["AccessDenied"])
    s3cmd("del", "s3://shared-s3cmd/one.bin")
    s3cmd("rb", "s3://shared-s3cmd")


@suite.check("presign", "signurl (SigV2) fetched by another program; expiry")
def _():
    url = s3cmd("signurl", "s3://%s/dir/sub/two.txt" % B, "+120").stdout.strip()
    with urllib.request.urlopen(url, timeout=30) as r:
        expect_equal(r.read(), compat.random_bytes(200 * KiB + 3, 1), "presigned GET body")
    short = s3cmd("signurl", "s3://%s/dir/sub/two.txt" % B, "+1").stdout.strip()
    time.sleep(2.1)
    try:
        urllib.request.urlopen(short, timeout=30)
        raise compat.CheckFailed("an expired URL was served")
    except urllib.error.HTTPError as e:
        expect_equal(e.code, 403, "status of an expired URL")
        body = e.read().decode()
        expect("<Code>AccessDenied</Code>" in body and "expired" in body.lower(), "expired URL body: " + body)


@suite.check("basic", "clean up: del --recursive, rb")
def _():
    s3cmd("del", "--recursive", "--force", "s3://%s/" % B)
    s3cmd("rb", "s3://" + B)
    expect("s3://%s" % B not in s3cmd("ls").stdout, "bucket still listed")


suite.main()
