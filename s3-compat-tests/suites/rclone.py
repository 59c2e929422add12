"""rclone (Debian's), unmodified: an s3 remote of provider "Other" with only the endpoint and
the keys (given as RCLONE_CONFIG_* variables, as in a CI job), everything else at its defaults:
4 transfers and 8 checkers in parallel, path-style requests, MD5 checks of every transfer,
streaming uploads (rcat) as multipart in 5 MiB chunks, 4 parts at once, X-Amz-Meta-Mtime kept
per object, server-side copy + delete for moves, presigned links for `rclone link`.

rclone's own semantics shape what can be asked of it: a missing object under a path is an
empty directory to `rclone cat`/`copy` (S3 has no directories), and `cat --offset` past the end
sends an invalid Range that HTTP ignores; the errors are checked where rclone reports them."""

import concurrent.futures
import os
import random
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import compat  # noqa: E402
from compat import KiB, MiB, expect, expect_equal, expect_fails, run  # noqa: E402

suite = compat.Suite()
B = "rclone"
R = "hots3:" + B


def remote_env(access=compat.ACCESS_KEY, secret=compat.SECRET_KEY):
    conf = suite.path("rclone.conf")
    if not os.path.exists(conf):
        compat.write_file(conf, b"")  # no config of the caller's
    return compat.clean_env({
        "RCLONE_CONFIG": conf,
        "RCLONE_CONFIG_HOTS3_TYPE": "s3",
        "RCLONE_CONFIG_HOTS3_PROVIDER": "Other",
        "RCLONE_CONFIG_HOTS3_ACCESS_KEY_ID": access,
        "RCLONE_CONFIG_HOTS3_SECRET_ACCESS_KEY": secret,
        "RCLONE_CONFIG_HOTS3_ENDPOINT": compat.ENDPOINT,
    })


ENV = remote_env()


def rclone(*args, env=ENV, check=True, timeout=600, stdin=None):
    return run(["rclone", *args], env=env, check=check, timeout=timeout, stdin=stdin)


def cat(*args):
    return run(["rclone", "cat", *args], env=ENV, binary=True).stdout


def fails(*args, needles=(), env=ENV):
    return expect_fails(["rclone", *args], env=env, needles=needles)


def lsf(path, *flags):
    return rclone("lsf", *flags, path).stdout.splitlines()


suite.version(run(["rclone", "version"]).stdout.splitlines()[0])


@suite.check("basic", "mkdir, copyto, cat, lsf, lsjson with MD5, moveto, deletefile")
def _():
    rclone("mkdir", R)
    expect(B + "/" in lsf("hots3:", "--dirs-only"), "bucket not listed")
    data = compat.random_bytes(300 * KiB + 1, 1)
    src = suite.path("up", "one.bin")
    compat.write_file(src, data)
    rclone("copyto", src, R + "/dir/one.bin")
    rclone("copyto", src, R + "/dir/sub/two.bin")
    expect_equal(cat(R + "/dir/one.bin"), data, "cat")
    dst = suite.path("down", "one.bin")
    rclone("copyto", R + "/dir/one.bin", dst)
    expect_equal(compat.read_file(dst), data, "downloaded bytes")
    expect_equal(lsf(R + "/dir"), ["one.bin", "sub/"], "lsf of a directory")
    expect_equal(lsf(R, "-R", "--files-only"), ["dir/one.bin", "dir/sub/two.bin"], "lsf -R")
    listing = rclone("lsjson", "--hash", "--stat", R + "/dir/one.bin").stdout
    expect('"md5":"%s"' % compat.md5(data) in listing.replace(" ", ""), "MD5:\n" + listing)
    rclone("moveto", R + "/dir/sub/two.bin", R + "/moved/two.bin")
    expect_equal(lsf(R, "-R", "--files-only"), ["dir/one.bin", "moved/two.bin"], "after moveto")
    rclone("deletefile", R + "/moved/two.bin")
    expect_equal(lsf(R, "-R", "--files-only"), ["dir/one.bin"], "after deletefile")


@suite.check("basic", "cat --offset --count (ranged GETs)")
def _():
    data = compat.random_bytes(300 * KiB + 1, 1)
    for offset, count in ((0, 1), (4096, 10000), (300 * KiB - 5, 6)):
        got = cat("--offset", str(offset), "--count", str(count), R + "/dir/one.bin")
        expect_equal(got, data[offset:offset + count], "range %d+%d" % (offset, count))


@suite.check("multipart", "rcat of a 30 MiB stream (multipart, 5 MiB chunks), copy back, check")
def _():
    data = compat.random_bytes(30 * MiB + 7, 2)
    src = suite.path("up", "stream.bin")
    compat.write_file(src, data)
    with open(src, "rb") as f:
        rclone("rcat", R + "/big/stream.bin", stdin=f)
    dst = suite.path("down", "stream.bin")
    rclone("copyto", R + "/big/stream.bin", dst)
    expect_equal(compat.sha256(compat.read_file(dst)), compat.sha256(data), "content")
    rclone("check", "--download", suite.dir("up"), R + "/big", "--include", "stream.bin")


@suite.check("dataset", "copy 1,000 shards up, check (MD5), lsf per directory")
def _():
    root = os.path.join(suite.data_dir, "dataset")
    layout = compat.dataset(root)
    rclone("copy", root, R + "/dataset", "--exclude", ".complete")
    rclone("check", root, R + "/dataset", "--exclude", ".complete")
    expect_equal(lsf(R + "/dataset"), ["manifest.json", "train/", "val/"], "top level")
    expect_equal(lsf(R + "/dataset/train"), ["part-%d/" % i for i in range(8)], "train/")
    for d in compat.DATASET_DIRS:
        want = sorted(rel.split("/")[-1] for rel, _ in layout if rel.rsplit("/", 1)[0] == d)
        expect_equal(lsf(R + "/dataset/" + d), want, "lsf of " + d)
    sizes = {line.rsplit(";", 1)[0]: int(line.rsplit(";", 1)[1])
             for line in lsf(R + "/dataset", "-R", "--files-only", "--format", "ps")}
    expect_equal(len(sizes), len(layout) + 1, "objects")
    for rel, size in layout:
        expect_equal(sizes.get(rel), size, "size of " + rel)


def _read_samples(args):
    """One reader process: fetches samples (tar members) with `rclone cat --offset --count`."""
    seed, picks, root = args
    bad = []
    for rel, name, offset, size in picks:
        r = run(["rclone", "cat", "--offset", str(offset), "--count", str(size), R + "/dataset/" + rel],
                env=ENV, check=False, binary=True)
        with open(os.path.join(root, rel), "rb") as f:
            f.seek(offset)
            want = f.read(size)
        if r.returncode != 0 or r.stdout != want:
            bad.append("%s:%s (exit %d, %d bytes)" % (rel, name, r.returncode, len(r.stdout)))
    return bad


@suite.check("dataset", "random samples by ranged reads from 4 processes at once")
def _():
    root = os.path.join(suite.data_dir, "dataset")
    layout = compat.dataset(root)
    rng = random.Random(5)
    jobs = []
    for p in range(4):
        picks = []
        for rel, _ in rng.sample(layout, 6):
            name, offset, size = rng.choice(compat.shard_members(os.path.join(root, rel)))
            picks.append((rel, name, offset, size))
        jobs.append((p, picks, root))
    with concurrent.futures.ProcessPoolExecutor(4) as ex:
        bad = [b for result in ex.map(_read_samples, jobs) for b in result]
    expect_equal(bad, [], "samples that differ")


@suite.check("dataset", "sync: a removed and a changed shard propagate, then nothing to do")
def _():
    root = os.path.join(suite.data_dir, "dataset")
    compat.dataset(root)
    mirror = suite.dir("mirror")
    rclone("sync", R + "/dataset/val", mirror)
    expect_equal(len(os.listdir(mirror)), 200, "shards synced down")
    os.unlink(os.path.join(mirror, "shard-000007.tar"))
    compat.write_file(os.path.join(mirror, "shard-000008.tar"), b"replaced shard")
    rclone("sync", mirror, R + "/dataset/val")
    names = lsf(R + "/dataset/val")
    expect("shard-000007.tar" not in names and len(names) == 199, "removed shard still listed")
    expect_equal(cat(R + "/dataset/val/shard-000008.tar"), b"replaced shard", "changed shard")
    out = rclone("sync", "-v", mirror, R + "/dataset/val").stderr
    expect("Copied" not in out and "Deleted" not in out, "a second sync changed something:\n" + out[-1500:])
    rclone("check", mirror, R + "/dataset/val")


@suite.check("small-files", "copy 5,000 small files, lsf -R (pages), check, delete")
def _():
    up = suite.dir("small")
    files = compat.write_small_files(up, 5000)
    rclone("copy", up, R + "/small")
    listed = lsf(R + "/small", "-R", "--files-only")
    expect_equal(sorted(listed), sorted(files), "keys listed")
    expect_equal(lsf(R + "/small"), ["a%d/" % i for i in range(3)], "top directories")
    expect_equal(len(lsf(R + "/small/a1")), 20, "directories under a1/")
    rclone("check", up, R + "/small")
    rclone("delete", R + "/small")
    expect_equal(lsf(R + "/small", "-R"), [], "left after delete")


@suite.check("small-files", "awkward file names: copy, lsf, cat")
def _():
    names = [n for n in compat.AWKWARD_NAMES if "//" not in n]
    d = suite.dir("odd")
    for i, n in enumerate(names):
        compat.write_file(os.path.join(d, n), b"body %d" % i)
    rclone("copy", d, R + "/odd")
    # The keys are stored as they are (a tab is %09 on the wire), but rclone names a control
    # character by its Unicode picture (U+2409 for a tab) on its command line and in listings
    # ("restricted filename characters"), as it does against AWS.
    def rclone_name(n):
        return n.replace("\t", "\u2409")
    expect_equal(sorted(lsf(R + "/odd", "-R", "--files-only")), sorted(map(rclone_name, names)), "listed names")
    for i, n in enumerate(names):
        expect_equal(cat(R + "/odd/" + rclone_name(n)), b"body %d" % i, "body of %r" % n)
    rclone("check", d, R + "/odd")


@suite.check("checkpoint", "save steps, load, rotate (purge), rename a step (server-side move)")
def _():
    for step in (100, 200, 300):
        d = suite.dir("ckpt", "step-%d" % step)
        for rank in range(3):
            compat.write_file(os.path.join(d, "rank-%d.pt" % rank), compat.checkpoint_bytes(step + rank, 4 * MiB))
        rclone("copy", d, R + "/ckpt/step-%d" % step)
    expect_equal(lsf(R + "/ckpt"), ["step-100/", "step-200/", "step-300/"], "steps")
    load = suite.dir("load")
    rclone("copy", R + "/ckpt/step-300", load)
    for rank in range(3):
        expect_equal(compat.read_file(os.path.join(load, "rank-%d.pt" % rank)),
                     compat.checkpoint_bytes(300 + rank, 4 * MiB), "loaded rank %d" % rank)
    rclone("purge", R + "/ckpt/step-100")
    rclone("moveto", R + "/ckpt/step-300", R + "/ckpt/best")
    expect_equal(lsf(R + "/ckpt"), ["best/", "step-200/"], "steps after rotate and rename")
    rclone("check", load, R + "/ckpt/best")


@suite.check("errors", "missing object, missing bucket, wrong secret, read-only user")
def _():
    fails("deletefile", R + "/no/such/object", needles=["is a directory or doesn't exist"])
    fails("link", R + "/no/such/object", needles=["object not found"])
    fails("lsf", "hots3:rclone-no-such-bucket", needles=["directory not found"])
    fails("copyto", "--s3-no-check-bucket", suite.path("up", "one.bin"), "hots3:rclone-no-such-bucket/k",
          needles=["NoSuchBucket"])
    fails("lsf", R, env=remote_env(secret=compat.SECRET_KEY + "x"), needles=["SignatureDoesNotMatch", "403"])
    rclone("mkdir", "hots3:shared-rclone")
    rclone("copyto", suite.path("up", "one.bin"), "hots3:shared-rclone/one.bin")
    reader = remote_env(os.environ["S3COMPAT_READER_ACCESS_KEY"], os.environ["S3COMPAT_READER_SECRET_KEY"])
    rclone("copyto", "hots3:shared-rclone/one.bin", suite.path("reader", "one.bin"), env=reader)
    fails("copyto", suite.path("up", "one.bin"), "hots3:shared-rclone/two.bin", env=reader, needles=["AccessDenied"])
    rclone("purge", "hots3:shared-rclone")


@suite.check("presign", "rclone link: a presigned URL, and its expiry")
def _():
    url = rclone("link", "--expire", "2m", R + "/dir/one.bin").stdout.strip()
    with urllib.request.urlopen(url, timeout=30) as r:
        expect_equal(r.read(), compat.random_bytes(300 * KiB + 1, 1), "body through the link")
    short = rclone("link", "--expire", "1s", R + "/dir/one.bin").stdout.strip()
    time.sleep(2.1)
    try:
        urllib.request.urlopen(short, timeout=30)
        raise compat.CheckFailed("an expired link was served")
    except urllib.error.HTTPError as e:
        expect_equal(e.code, 403, "status of an expired link")


@suite.check("basic", "clean up: purge the bucket")
def _():
    rclone("purge", R)
    expect(B + "/" not in lsf("hots3:", "--dirs-only"), "bucket still listed")


suite.main()
