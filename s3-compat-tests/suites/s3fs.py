"""s3fs-fuse (Debian's s3fs) mounting a bucket, and ordinary file tools working through it:
cp, ls, cat, mv, rm, mkdir, find, and Python's open/seek/read/write/os.rename, as a training
script that thinks it writes to a local disk does. Mounted with only what a non-AWS endpoint
needs (url, use_path_request_style, a passwd_file); everything else at s3fs's defaults
(SigV4, 10 MB multipart parts, 5 parallel requests, ranged GETs for reads, copy + delete for
rename). What s3fs stored is checked behind its back with signed requests."""

import concurrent.futures
import os
import random
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import compat  # noqa: E402
from compat import KiB, MiB, expect, expect_equal, run  # noqa: E402

suite = compat.Suite()
B = "s3fs-fuse"


class Mount:
    """`s3fs BUCKET DIR -f ...` as a child process; unmounted with fusermount -u."""

    def __init__(self, bucket, mountpoint, access=compat.ACCESS_KEY, secret=compat.SECRET_KEY):
        self.mountpoint = mountpoint
        os.makedirs(mountpoint, exist_ok=True)
        passwd = suite.path("passwd-%s" % os.path.basename(mountpoint))
        compat.write_file(passwd, ("%s:%s\n" % (access, secret)).encode())
        os.chmod(passwd, 0o600)
        self.log = suite.path("s3fs-%s.log" % os.path.basename(mountpoint))
        self.args = ["s3fs", bucket, mountpoint, "-f", "-o", "url=" + compat.ENDPOINT, "-o",
                     "use_path_request_style", "-o", "passwd_file=" + passwd]
        self.proc = None

    def start(self, timeout_s=20):
        """True once mounted; False when s3fs exits first (e.g. refused credentials)."""
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                         env=compat.clean_env())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if os.path.ismount(self.mountpoint):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        self.stop()
        raise compat.CheckFailed("s3fs did not mount within %d s:\n%s" % (timeout_s, self.output()))

    def output(self):
        return compat.read_file(self.log).decode(errors="replace")[-3000:]

    def stop(self):
        if os.path.ismount(self.mountpoint):
            run(["fusermount", "-u", self.mountpoint], check=False)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


MNT = os.path.join(suite.tmp, "mnt")
mount = Mount(B, MNT)


def at(*parts):
    return os.path.join(MNT, *parts)


def sh(*args, **kw):
    return run(list(args), **kw)


suite.version("s3fs-fuse " + run(["s3fs", "--version"]).stdout.split(" V", 1)[1].split()[0])


@suite.check("basic", "mount a bucket")
def _():
    compat.raw_ok("PUT", "/" + B)
    expect(mount.start(), "s3fs exited:\n" + mount.output())
    expect_equal(os.listdir(MNT), [], "a new bucket is an empty directory")


@suite.check("basic", "cp, ls, cat, mv, rm, mkdir, rmdir with the shell's tools")
def _():
    data = compat.random_bytes(700 * KiB + 9, 1)
    src = suite.path("up", "one.bin")
    compat.write_file(src, data)
    sh("mkdir", "-p", at("dir", "sub"))
    sh("cp", src, at("dir", "one.bin"))
    ls = sh("ls", "-l", at("dir")).stdout
    expect(str(len(data)) in ls and "one.bin" in ls and "sub" in ls, "ls -l:\n" + ls)
    expect_equal(sh("cat", at("dir", "one.bin"), binary=True).stdout, data, "cat")
    sh("cp", at("dir", "one.bin"), at("dir", "sub", "copy.bin"))
    sh("mv", at("dir", "sub", "copy.bin"), at("dir", "moved.bin"))
    expect_equal(sorted(os.listdir(at("dir"))), ["moved.bin", "one.bin", "sub"], "after mv")
    expect_equal(os.listdir(at("dir", "sub")), [], "sub/ after mv")
    # Behind s3fs: real objects with the right sizes; directories are "dir/" objects.
    keys = compat.list_keys(B, "dir/")
    expect_equal(keys.get("dir/one.bin"), len(data), "size of dir/one.bin in the bucket")
    expect_equal(keys.get("dir/moved.bin"), len(data), "size of dir/moved.bin in the bucket")
    expect("dir/sub/copy.bin" not in keys, "the renamed object is still in the bucket")
    sh("rm", at("dir", "moved.bin"))
    sh("rmdir", at("dir", "sub"))
    expect_equal(sorted(compat.list_keys(B, "dir/")), ["dir/", "dir/one.bin"], "objects after rm and rmdir")


@suite.check("basic", "Python open: write, append, seek, read, truncate, os.rename")
def _():
    p = at("py", "notes.txt")
    os.makedirs(at("py"), exist_ok=True)
    with open(p, "w") as f:
        f.write("line 1\n")
    with open(p, "a") as f:
        f.write("line 2\n")
    with open(p) as f:
        expect_equal(f.read(), "line 1\nline 2\n", "after append")
    with open(p, "r+b") as f:
        f.seek(5)
        f.write(b"X")
    with open(p, "rb") as f:
        f.seek(3)
        expect_equal(f.read(4), b"e X\n", "seek + read after an in-place write")
    # Truncated through an open file: s3fs 1.90 uploads zeros when a file that is not open is
    # truncated (os.truncate(path)), whatever the server (s3fs-fuse PR #1887).
    with open(p, "r+b") as f:
        f.truncate(6)
    expect_equal(os.path.getsize(p), 6, "size after truncate")
    os.rename(p, at("py", "renamed.txt"))
    expect_equal(os.listdir(at("py")), ["renamed.txt"], "after os.rename")
    got = compat.raw_ok("GET", "/%s/py/renamed.txt" % B).body
    expect_equal(got, b"line X", "the object behind the file")


@suite.check("multipart", "cp of a 40 MiB file (multipart), read back, ranged reads")
def _():
    data = compat.random_bytes(40 * MiB + 3, 2)
    src = suite.path("up", "big.bin")
    compat.write_file(src, data)
    sh("cp", src, at("big.bin"))
    head = compat.raw_ok("HEAD", "/%s/big.bin" % B)
    expect_equal(int(head.header("content-length")), len(data), "object size")
    expect("-" in head.header("etag", ""), "not a multipart upload, ETag %s" % head.header("etag"))
    expect_equal(compat.sha256(sh("cat", at("big.bin"), binary=True).stdout), compat.sha256(data), "cat")
    with open(at("big.bin"), "rb") as f:
        for offset in (0, 10 * MiB - 3, 33 * MiB + 17, len(data) - 100):
            f.seek(offset)
            expect_equal(f.read(4096), data[offset:offset + 4096], "read at %d" % offset)


def _read_samples(args):
    """A data-loader worker: random samples of tar shards through the mount (seek + read)."""
    picks, root = args
    bad = []
    for rel, name, offset, size in picks:
        with open(os.path.join(MNT, "dataset", rel), "rb") as f:
            f.seek(offset)
            got = f.read(size)
        with open(os.path.join(root, rel), "rb") as f:
            f.seek(offset)
            if f.read(size) != got:
                bad.append("%s:%s" % (rel, name))
    return bad


@suite.check("dataset", "cp -r of 200 shards, ls, samples read by 4 processes at once")
def _():
    root = os.path.join(suite.data_dir, "dataset")
    layout = [(rel, size) for rel, size in compat.dataset(root) if rel.startswith("val/")]
    os.makedirs(at("dataset"), exist_ok=True)
    sh("cp", "-r", os.path.join(root, "val"), at("dataset", "val"), timeout=600)
    names = sorted(os.listdir(at("dataset", "val")))
    expect_equal(names, sorted(rel.split("/")[1] for rel, _ in layout), "ls of the directory")
    for rel, size in layout:
        expect_equal(os.path.getsize(at("dataset", rel)), size, "size of " + rel)
    rng = random.Random(3)
    jobs = []
    for _ in range(4):
        picks = []
        for rel, _ in rng.sample(layout, 8):
            name, offset, size = rng.choice(compat.shard_members(os.path.join(root, rel)))
            picks.append((rel, name, offset, size))
        jobs.append((picks, root))
    with concurrent.futures.ProcessPoolExecutor(4) as ex:
        bad = [b for r in ex.map(_read_samples, jobs) for b in r]
    expect_equal(bad, [], "samples that differ")
    keys = compat.list_keys(B, "dataset/val/")
    expect_equal(len([k for k in keys if k.endswith(".tar")]), len(layout), "shard objects in the bucket")


@suite.check("small-files", "500 small files: write, find, read back, rm -r")
def _():
    files = {}
    for rel, seed, size in compat.small_files_layout(500):
        data = compat.random_bytes(size, seed)
        path = at("small", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        files[rel] = data
    found = sh("find", at("small"), "-type", "f").stdout.split()
    expect_equal(len(found), len(files), "find")
    for rel, data in files.items():
        with open(at("small", rel), "rb") as f:
            expect_equal(f.read(), data, "content of " + rel)
    keys = compat.list_keys(B, "small/")
    expect_equal(len([k for k in keys if not k.endswith("/")]), len(files), "objects in the bucket")
    sh("rm", "-r", at("small"))
    expect(not os.path.exists(at("small")), "small/ still exists")
    expect_equal(compat.list_keys(B, "small/"), {}, "objects left after rm -r")


@suite.check("small-files", "awkward file names through the mount")
def _():
    names = [n for n in compat.AWKWARD_NAMES if "//" not in n]
    for i, n in enumerate(names):
        p = at("odd", n)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(b"body %d" % i)
    found = sorted(os.path.relpath(os.path.join(d, n), at("odd")) for d, _, fs in os.walk(at("odd")) for n in fs)
    expect_equal(found, sorted(names), "names listed")
    for i, n in enumerate(names):
        expect_equal(compat.raw_ok("GET", "/%s/odd/%s" % (B, n)).body, b"body %d" % i, "object of %r" % n)


@suite.check("checkpoint", "save (write temp, rename), load, rotate with rm")
def _():
    os.makedirs(at("ckpt"), exist_ok=True)
    for step in (100, 200, 300):
        data = compat.checkpoint_bytes(step, 12 * MiB)
        tmp = at("ckpt", ".step-%d.pt.tmp" % step)
        with open(tmp, "wb") as f:
            for i in range(0, len(data), 1 * MiB):
                f.write(data[i:i + 1 * MiB])
        os.rename(tmp, at("ckpt", "step-%d.pt" % step))
    expect_equal(sorted(os.listdir(at("ckpt"))), ["step-100.pt", "step-200.pt", "step-300.pt"], "checkpoints")
    with open(at("ckpt", "step-300.pt"), "rb") as f:
        expect_equal(compat.sha256(f.read()), compat.sha256(compat.checkpoint_bytes(300, 12 * MiB)), "loaded")
    os.remove(at("ckpt", "step-100.pt"))
    expect_equal(sorted(compat.list_keys(B, "ckpt/")), ["ckpt/", "ckpt/step-200.pt", "ckpt/step-300.pt"],
                 "objects after rotation")


@suite.check("errors", "a missing file is ENOENT; wrong secret and missing bucket refuse to mount")
def _():
    try:
        open(at("no", "such", "file"), "rb")
        raise compat.CheckFailed("opened a missing file")
    except FileNotFoundError:
        pass
    bad = Mount(B, os.path.join(suite.tmp, "mnt-wrong"), secret=compat.SECRET_KEY + "x")
    mounted = bad.start()
    bad.stop()
    expect(not mounted, "mounted with a wrong secret")
    # s3fs answers a 403 to SigV4 by retrying with SigV2 header signing, which hots3 refuses as
    # AWS does for buckets made since 2020 (400 InvalidRequest); it reports both.
    expect("Failed to connect by sigv4" in bad.output(), "no credential error in s3fs's output:\n" + bad.output())
    missing = Mount("s3fs-no-such-bucket", os.path.join(suite.tmp, "mnt-missing"))
    mounted = missing.start()
    missing.stop()
    expect(not mounted, "mounted a missing bucket")
    expect("bucket or key not found" in missing.output(),
           "no missing-bucket error in s3fs's output:\n" + missing.output())


@suite.check("basic", "rm -rf everything, unmount, delete the bucket")
def _():
    for name in os.listdir(MNT):
        p = at(name)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    expect_equal(os.listdir(MNT), [], "left in the mount")
    mount.stop()
    expect(not os.path.ismount(MNT), "still mounted")
    expect_equal(compat.list_keys(B), {}, "objects left in the bucket")
    compat.raw_ok("DELETE", "/" + B)


try:
    suite.main()
finally:
    mount.stop()
