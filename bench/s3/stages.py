#!/usr/bin/env python3
"""Where a server's CPU went, by stage of a request, from `perf script` output (call graphs).

usage: perf script -i perf.data | bench/s3/stages.py [--cpu-us US] [--title TEXT]

Each sample is given to the stage of the outermost frame of its call chain that names a stage
(the entry point of that stage: everything it calls, allocations and system calls included,
is its cost). Samples with no such frame go to what their frames show: the event loop, the
HTTP session or the S3 handler's own code, the kernel. A second table sorts the same samples by
the kind of work at the leaf (hashing, allocation, copying, the socket's send and receive
paths, ...), whatever stage asked for it. With --cpu-us (the CPU per request the bench measured),
each share is also shown in microseconds per request.
"""
import argparse
import collections
import re
import sys

# (stage, pattern on a frame's symbol). The outermost matching frame decides.
STAGES = [
    ("access log", r"log_access|format_access_line|hots3::log::access|spdlog::"),
    ("request metrics", r"RequestMetrics::record|Service::handle\b.*record"),
    ("HTTP: request head (recv, parse)", r"Session<.*>::read_head|put_head|basic_parser"),
    ("HTTP: request set-up (headers, id)", r"Session<.*>::serve\b"),
    ("SigV4 (canonical request, hashes, HMAC)", r"Authenticator::authenticate"),
    ("S3: request parse and routing", r"hots3::s3::Request::Request|hots3::s3::locate|hots3::s3::route"),
    ("catalog / metadata look-up",
     r"ObjectStore::(open_reader|head|find_bucket|list|put|commit)|MetadataCache|Catalog::|sqlite3"),
    ("tier hit bookkeeping", r"ReadThrough::|FillFlights::|revalidation_due|pinned"),
    ("response head", r"add_object_headers|Service::response|write_head|prepare_head|http_date"),
    ("body: device / cache read", r"ObjectReader::|BlockCache::|Device::|io_uring"),
    ("body: receive and write (PUT)", r"hots3::s3::Body::|ObjectWriter::|read_body"),
    ("send (write, sendmsg)", r"Session<.*>::send\b|async_write|sendmsg"),
    ("list: XML", r"list_objects|ListObjects|xml|Xml"),
]
STAGE_RES = [(name, re.compile(p)) for name, p in STAGES]

# (kind, pattern on the leaf frame's symbol): what the CPU was doing.
KINDS = [
    ("hashing (SHA-256, MD5, CRC, xxHash)", r"sha256|sha1|md5|crc|xxh|XXH|SHA|MD5"),
    ("HMAC / OpenSSL calls", r"HMAC|EVP_|ossl_|OSSL|CRYPTO_|evp_|OPENSSL"),
    ("allocation (malloc, free)", r"^(mi_|_mi_|malloc|free|cfree|operator new|operator delete|_int_|tcache)"),
    ("memcpy, memset, string compare", r"^(__memcpy|__memmove|__memset|memcpy|memmove|memset|__strlen|strlen|__memcmp|memcmp|__strncasecmp|strcmp)"),
    ("kernel: socket send (tcp, loopback)", r"tcp_sendmsg|tcp_write|__tcp_transmit|ip_|__dev_queue|loopback|tcp_v4_|tcp_rcv|__netif|net_rx|__napi|skb_|sock_def_readable"),
    ("kernel: socket receive", r"tcp_recvmsg|tcp_cleanup_rbuf|skb_copy_datagram|__skb_datagram"),
    ("kernel: epoll, wakeups, scheduling", r"ep_|epoll|schedule|__wake_up|try_to_wake_up|finish_task_switch|pick_next|enqueue|dequeue|update_curr"),
    ("kernel: syscall entry and exit", r"entry_SYSCALL|syscall_exit|do_syscall|syscall_return|__x64_sys|exit_to_user"),
    ("kernel: io_uring, block, file", r"io_uring|io_|blk_|bio_|ext4|iomap|__fdget|fput|vfs_"),
]
KIND_RES = [(name, re.compile(p)) for name, p in KINDS]


def stage_of(frames):
    for sym, dso in reversed(frames):  # outermost first
        for name, rx in STAGE_RES:
            if rx.search(sym):
                return name
    syms = " ".join(sym for sym, _ in frames)
    if "hots3::s3::" in syms or "hots3::tier::" in syms:
        return "S3 handler, other"
    if "hots3::http::" in syms:
        return "HTTP session, other"
    if "asio::" in syms:
        return "event loop (asio), other"
    if frames and frames[0][1].startswith("[kernel"):
        return "kernel, outside any request stage"
    return "other"


def kind_of(frames):
    if not frames:
        return "other"
    sym = frames[0][0]
    # An inlined frame names no object file: the first frame out of it that does.
    dso = next((d for _, d in frames if d != "inlined"), "")
    for name, rx in KIND_RES:
        if rx.search(sym):
            return name
    if dso.startswith("[kernel"):
        return "kernel: other"
    if "hots3" in dso or "hots3::" in sym:
        return "hots3's own code"
    return "other libraries (" + dso.rsplit("/", 1)[-1] + ")"


def samples(lines):
    frames = []
    in_sample = False
    for line in lines:
        if not line.strip():
            if in_sample:
                yield frames
            frames, in_sample = [], False
            continue
        if not line[0].isspace():
            if in_sample:
                yield frames
            frames, in_sample = [], True
            continue
        m = re.match(r"\s+[0-9a-f]+\s+(.*)\s+\(([^()]*)\)\s*$", line)
        if m:
            sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
            frames.append((sym, m.group(2)))
    if in_sample:
        yield frames


def table(title, counts, total, per_request_us):
    print(f"  {title}")
    for name, n in counts.most_common():
        share = 100.0 * n / total
        us = f"{per_request_us * n / total:8.2f} us" if per_request_us else ""
        print(f"    {name:<46} {share:5.1f}%  {us}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu-us", type=float, default=0, help="the server's CPU per request, us")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    stages, kinds = collections.Counter(), collections.Counter()
    total = 0
    for frames in samples(sys.stdin):
        total += 1
        stages[stage_of(frames)] += 1
        kinds[kind_of(frames)] += 1
    if total == 0:
        sys.exit("no samples")
    print(f"== {args.title}: {total} samples" + (f", {args.cpu_us:.2f} us of CPU per request" if args.cpu_us else ""))
    table("by stage (the outermost frame that names one)", stages, total, args.cpu_us)
    table("by kind of work (the leaf frame)", kinds, total, args.cpu_us)


if __name__ == "__main__":
    main()
