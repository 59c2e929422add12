#!/usr/bin/env python3
"""Memory of hots3 while it streams huge objects: PUT of a 5 GiB object (the single-PUT limit),
then GET of a 10 GiB object (built by multipart upload). The server's peak RSS (VmHWM) is read
from /proc after each phase, with the block cache off (every byte streamed through the I/O
buffers) and on (256 MiB). While the PUT is half sent, the device file's allocated size shows
that the data goes to the device while the body is still arriving.

usage: bench/s3/memory.py [BUILD_DIR]  (default build/release; standard library only; needs ~16 GiB free in /var/tmp)
"""

import hashlib
import os
import re
import shutil
import socket
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

GiB = 1024 ** 3
MiB = 1024 ** 2
PIECE = hashlib.sha256(b"memory").digest() * (MiB // 32)  # 1 MiB of non-zero bytes


def vm(pid, field):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^%s:\s+(\d+) kB" % field, f.read(), re.M).group(1)) * 1024


def reset_peak(pid):
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


def put_streamed(port, path, size, query=(), on_half=None):
    """A PUT of `size` bytes sent 1 MiB at a time (UNSIGNED-PAYLOAD, Content-Length)."""
    req = s3.SignedRequest("PUT", path, query, {"content-length": str(size)}, payload_hash="UNSIGNED-PAYLOAD",
                           port=port)
    with harness.connect(port, timeout_s=600) as sock:
        sock.sendall(req.wire(b""))
        sent = 0
        while sent < size:
            n = min(len(PIECE), size - sent)
            sock.sendall(PIECE[:n])
            sent += n
            if on_half and sent == size // 2:
                on_half()
        r = harness.Reader(sock).read_response()
    if r.status != 200:
        raise RuntimeError("PUT %s: %r %s" % (path, r, r.body[:300]))
    return r


def get_streamed(port, path):
    req = s3.SignedRequest("GET", path, port=port)
    with harness.connect(port, timeout_s=600) as sock:
        sock.sendall(req.wire())
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += sock.recv(65536)
        head, rest = buf.split(b"\r\n\r\n", 1)
        length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))
        got = len(rest)
        while got < length:
            chunk = sock.recv(4 * MiB)
            if not chunk:
                raise RuntimeError("GET %s cut at %d of %d" % (path, got, length))
            got += len(chunk)
    return length


def run(build, cache):
    work = tempfile.mkdtemp(prefix="hots3-memory-", dir=os.environ.get("BENCH_TMPDIR", "/var/tmp"))
    os.environ["HOTS3_BIN"] = os.path.join(ROOT, build, "src", "hots3")
    server = s3.hots3_server(device_size="16GiB", cache_size=cache, workdir=work)
    try:
        server.start()
        pid, port = server.proc.pid, server.port
        device = os.path.join(work, "data", "device.img")
        s3.send(port, s3.SignedRequest("PUT", "/mem", port=port).wire())
        idle = vm(pid, "VmRSS")

        reset_peak(pid)
        at_half = {}

        def half():
            time.sleep(0.5)  # let the server drain what is in the socket buffers
            at_half["device"] = os.stat(device).st_blocks * 512

        before = os.stat(device).st_blocks * 512
        t = time.monotonic()
        put_streamed(port, "/mem/five", 5 * GiB, on_half=half)
        put_s = time.monotonic() - t
        put_peak = vm(pid, "VmHWM")

        # 10 GiB by multipart: 10 parts of 1 GiB.
        r = s3.send(port, s3.SignedRequest("POST", "/mem/ten", [("uploads", "")], port=port).wire())
        upload = re.search(rb"<UploadId>([^<]+)</UploadId>", r.body).group(1).decode()
        parts = []
        for n in range(1, 11):
            r = put_streamed(port, "/mem/ten", GiB, [("partNumber", str(n)), ("uploadId", upload)])
            parts.append("<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, r.header("etag")))
        xml = ("<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(parts)).encode()
        r = s3.send(port, s3.SignedRequest("POST", "/mem/ten", [("uploadId", upload)], body=xml, port=port).wire())
        if r.status != 200:
            raise RuntimeError("complete: %r" % r)

        reset_peak(pid)
        t = time.monotonic()
        got = get_streamed(port, "/mem/ten")
        get_s = time.monotonic() - t
        get_peak = vm(pid, "VmHWM")
        assert got == 10 * GiB
        return {
            "idle": idle, "put_peak": put_peak, "get_peak": get_peak, "put_s": put_s, "get_s": get_s,
            "device_at_half": at_half["device"] - before,
        }
    finally:
        server.stop()
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    print("hots3 memory while streaming (%d cores, %s)" % (os.cpu_count(), time.strftime("%Y-%m-%d")))
    print("%-10s %10s %16s %16s %22s" % ("cache", "idle RSS", "PUT 5 GiB peak", "GET 10 GiB peak",
                                          "on device at half PUT"))
    for cache in ("0", "256MiB"):
        m = run(build, cache)
        print("%-10s %8.0f MiB %9.0f MiB %s %9.0f MiB %s %14.2f GiB" % (
            cache, m["idle"] / MiB, m["put_peak"] / MiB, "(%4.0f MB/s)" % (5 * GiB / m["put_s"] / 1e6),
            m["get_peak"] / MiB, "(%4.0f MB/s)" % (10 * GiB / m["get_s"] / 1e6), m["device_at_half"] / GiB))


if __name__ == "__main__":
    main()
