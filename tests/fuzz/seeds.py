#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz harness from what real S3 clients sent
(tests/data/wire/captures) and the shipped configuration, into OUT/<harness>/.

usage: tests/fuzz/seeds.py OUT

The harnesses split their input with FuzzedDataProvider: a string ends at a backslash followed
by another character (a backslash is written twice), and integers and booleans are taken from
the end of the input. The seeds are laid out the same way, so that mutations start from real
requests."""

import glob
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CAPTURES = os.path.join(ROOT, "tests", "data", "wire", "captures")


def fdp_string(b):
    """One FuzzedDataProvider random-length string, terminated."""
    return b.replace(b"\\", b"\\\\") + b"\\n"


def write(out, harness, data):
    folder = os.path.join(out, harness)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def split_http(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    return head, body


def main(out):
    for http_file in sorted(glob.glob(os.path.join(CAPTURES, "*", "*", "*.http"))):
        with open(http_file, "rb") as f:
            raw = f.read(64 * 1024)
        meta_file = http_file[:-5] + ".json"
        meta = json.load(open(meta_file)) if os.path.exists(meta_file) else {}
        head, body = split_http(raw)
        write(out, "fuzz_http_head", raw)
        headers = meta.get("headers", [])
        authorization = next((v for k, v in headers if k.lower() == "authorization"), "")
        target = meta.get("raw_target", "/")
        path, _, query = target.partition("?")
        seed = fdp_string(authorization.encode()) + fdp_string(query.encode()) + fdp_string(path.encode())
        for name, value in headers:
            seed += fdp_string(name.lower().encode()) + fdp_string(value.encode())
        write(out, "fuzz_sigv4", seed)
        content_sha256 = next((v for k, v in headers if k.lower() == "x-amz-content-sha256"), "")
        if content_sha256.startswith("STREAMING"):
            # Flags from the end: signed, trailer, a declared length (and its 8 bytes).
            signed = b"\x01" if "HMAC" in content_sha256 else b"\x00"
            trailer = b"\x01" if content_sha256.endswith("TRAILER") else b"\x00"
            write(out, "fuzz_aws_chunked", body + len(body).to_bytes(8, "little") + b"\x01" + trailer + signed)
        if body.lstrip().startswith(b"<"):
            write(out, "fuzz_xml", fdp_string(b"a/b\x01c") + body)
        for name, value in headers:
            if name.lower() in ("range", "if-match", "if-none-match", "if-modified-since", "x-amz-date",
                                "x-amz-copy-source", "x-amz-copy-source-range"):
                write(out, "fuzz_s3_fields", fdp_string(value.encode()) + b'"etag"' + (1 << 20).to_bytes(8, "little"))
        write(out, "fuzz_s3_fields", fdp_string(meta.get("path_decoded", "/").encode()) + b"*" + b"\x00" * 8)
    for config in [os.path.join(ROOT, "conf", "hots3.toml")]:
        with open(config, "rb") as f:
            write(out, "fuzz_config", f.read())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
