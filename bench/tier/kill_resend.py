#!/usr/bin/env python3
"""kill -9 in the middle of a large write-back upload, and what the restart sends again.

One object of SIZE bytes is written into a write-back bucket whose upstream (a second hots3)
sits behind a counting proxy (tests/support/fault_proxy.py). Once the proxy has passed KILL_AT
of the object's bytes, the server is killed with SIGKILL and started again on the same store; a
`hots3 tier flush --wait` then waits for the upload to end. Figures: the bytes that crossed to
the upstream in all, against the object's size and the bound the uploader promises (the parts
in flight at the kill are all it sends twice: size + parallelism x part_size); and checks: the
upstream's ETag and SHA-256 equal the local ones, and no multipart upload is left open there.

usage: bench/tier/kill_resend.py [BUILD_DIR]      (default build/release)
env:   SIZE (2GiB) KILL_AT (0.6) PART (16MiB) PARALLELISM (8) BW (proxy cap in bytes/s, 256MiB)
       BENCH_TMPDIR (/var/tmp)"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import fault_proxy  # noqa: E402
import s3_support  # noqa: E402
from test_tier_writeback import tier_config  # noqa: E402


def size_of(text):
    number, unit = re.fullmatch(r"(\d+)\s*([KMGT]i?B?)?", text).groups()
    return int(number) * 1024 ** " KMGT".index((unit or " ")[0])


def client(port):
    import boto3
    return boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % port,
                        aws_access_key_id=s3_support.ACCESS_KEY,
                        aws_secret_access_key=s3_support.SECRET_KEY, region_name=s3_support.REGION)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "release")
    binary = os.path.abspath(os.path.join(build, "src", "hots3"))
    os.environ["HOTS3_BIN"] = binary
    size = size_of(os.environ.get("SIZE", "2GiB"))
    kill_at = float(os.environ.get("KILL_AT", "0.6"))
    part = size_of(os.environ.get("PART", "16MiB"))
    parallelism = int(os.environ.get("PARALLELISM", "8"))
    bandwidth = size_of(os.environ.get("BW", "256MiB"))
    work = tempfile.mkdtemp(prefix="hots3-kill-resend-", dir=os.environ.get("BENCH_TMPDIR", "/var/tmp"))
    device = "%dGiB" % (size * 2 // 2**30 + 2)
    upstream = local = proxy = None
    try:
        credentials = os.path.join(work, "golden.toml")
        with open(credentials, "w") as f:
            f.write('access_key = "%s"\nsecret_key = "%s"\n' % (s3_support.ACCESS_KEY, s3_support.SECRET_KEY))
        for name in ("up", "local"):
            os.makedirs(os.path.join(work, name))
        upstream = s3_support.hots3_server(device_size=device, workdir=os.path.join(work, "up")).start()
        up = client(upstream.port)
        up.create_bucket(Bucket="team-ckpt")
        proxy = fault_proxy.FaultProxy(upstream.port).start()
        proxy.bandwidth = bandwidth
        config = tier_config("http://127.0.0.1:%d" % proxy.port, credentials, prefix="rack/",
                             delay="0s",
                             writeback="part_size = %d\nparallelism = %d" % (part, parallelism))

        def start_local():
            return s3_support.hots3_server(config, device_size=device,
                                           workdir=os.path.join(work, "local")).start()

        local = start_local()
        path = os.path.join(work, "object")
        digest = hashlib.sha256()
        with open(path, "wb") as f:
            for _ in range(size // (16 * 2**20)):
                block = os.urandom(16 * 2**20)
                digest.update(block)
                f.write(block)
        # A multipart upload of PART-sized parts: the uploader keeps its parts, so that the
        # upstream's ETag is ours.
        from boto3.s3.transfer import TransferConfig
        client(local.port).upload_file(path, "ckpt", "big", Config=TransferConfig(
            multipart_threshold=part, multipart_chunksize=part))
        os.unlink(path)
        target = int(size * kill_at)
        deadline = time.monotonic() + 600
        while proxy.body_bytes < target:
            if time.monotonic() > deadline:
                raise SystemExit("the upload never reached %d bytes" % target)
            time.sleep(0.01)
        local.proc.kill()
        local.proc.wait()
        at_kill = proxy.body_bytes
        local = start_local()
        started = time.monotonic()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=s3_support.ACCESS_KEY,
                   AWS_SECRET_ACCESS_KEY=s3_support.SECRET_KEY)
        done = subprocess.run([binary, "tier", "flush", "--endpoint", "http://127.0.0.1:%d" % local.port,
                               "--bucket", "ckpt", "--prefix", "big", "--wait"],
                              env=env, capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            raise SystemExit("flush failed: " + done.stdout + done.stderr)
        finished = time.monotonic() - started
        sent = proxy.body_bytes
        ours = client(local.port).head_object(Bucket="ckpt", Key="big")["ETag"]
        held = up.get_object(Bucket="team-ckpt", Key="rack/big")
        theirs = held["ETag"]
        upstream_digest = hashlib.sha256()
        for chunk in iter(lambda: held["Body"].read(16 * 2**20), b""):
            upstream_digest.update(chunk)
        open_uploads = up.list_multipart_uploads(Bucket="team-ckpt").get("Uploads", [])
        bound = size + parallelism * part
        print("kill -9 at %.0f%% of a %d B write-back upload (part %d B, parallelism %d, link %d B/s)"
              % (100 * at_kill / size, size, part, parallelism, bandwidth))
        print("  sent to the upstream in all: %d B = %.3f x the object; bound %d B (size + "
              "parallelism x part): %s" % (sent, sent / size, bound, "PASS" if sent <= bound else "MISSED"))
        print("  sent again after the restart beyond what was owed: %d B (%.2f parts)"
              % (sent - size, (sent - size) / part))
        print("  the rest after the restart: %.1f s; ETag here %s, upstream %s: %s; SHA-256 %s; "
              "open upstream uploads: %d" % (finished, ours, theirs, "same" if ours == theirs else "DIFFERENT",
                                             "same" if upstream_digest.digest() == digest.digest() else "DIFFERENT",
                                             len(open_uploads)))
        ok = sent <= bound and ours == theirs and upstream_digest.digest() == digest.digest() and not open_uploads
        return 0 if ok else 1
    finally:
        for server in (local, upstream):
            if server is not None:
                server.stop()
        if proxy is not None:
            proxy.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
