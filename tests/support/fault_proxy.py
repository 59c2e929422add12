"""A fault-injecting HTTP/1.1 proxy between hots3 and its upstream, for the tier tests: it
passes requests through, or answers some with 503 SlowDown, or resets a connection after some
bytes of a request body, and counts requests and body bytes. Standard library only; it runs in
the test's own process on 127.0.0.1 with an ephemeral port, and stop() ends every thread.
Request bodies are passed on as they arrive (held whole only when refused or hung).

    with FaultProxy(upstream_port) as proxy:
        proxy.slowdown = 0.3          # 30% of requests answered 503 SlowDown, never forwarded
        proxy.reset_after = 64 * 1024 # the next request's connection reset after 64 KiB of body
        proxy.hang = True             # requests read and never answered
        proxy.hang_object_gets = True # GETs of objects (no query) read and never answered
        proxy.lose_answer = True      # the next request with a body reaches the upstream; its
                                      # answer does not come back (the connection is reset)
        proxy.withhold_answer = True  # the next request with a body reaches the upstream; its
                                      # answer is never passed on (the connection stays open)
        proxy.fail_answer = True      # the next request with a body reaches the upstream; its
                                      # answer is replaced by 500 InternalError
        proxy.refuse_heads = 2        # the next 2 HEAD requests answered 503, never forwarded
        proxy.refuse_if_match = "quoted"  # requests whose If-Match is quoted ("any": with any
                                      # If-Match) answered 412, never forwarded, as an upstream
                                      # that compares the header's text with its ETag does
        proxy.stream_bandwidth = 40e6 # answer bodies pass at most this many bytes/s, each
                                      # connection's (streamed as they come)
        proxy.bandwidth = 50 << 20    # request bodies pass at most this many bytes/s, in all
        proxy.delay_listings = 1.5    # a ListMultipartUploads is forwarded after this many seconds
        proxy.delay_object_gets = 1.0 # a GET of an object (no query) is forwarded after this many
                                      # seconds
        proxy.delay_heads = 0.5       # a HEAD is forwarded after this many seconds
        proxy.hold_writes = True      # PUT, POST and DELETE requests wait until it is False
                                      # again, then go on (other requests pass meanwhile)
        proxy.flip_answer_byte = 100  # the next GET of an object (no query) reaches hots3 with
                                      # this byte of its answer's body flipped
        proxy.stall_gets_beyond = 4 << 20  # GETs of objects pass the object's first 4 MiB (of
                                      # what they ask for), then hold the rest
        proxy.refuse_gets_from = 8 << 20  # GETs of objects whose Range starts at or after 8 MiB
                                      # answered 503 SlowDown
        proxy.ignore_ranges = True    # GETs of objects lose their Range on the way (whole answers)
        ... proxy.port, proxy.requests, proxy.body_bytes, proxy.refused ...
        ... proxy.lines: the request lines received, in order ...
        ... proxy.object_gets: (path, Range or None) of each GET of an object, in order ...
        ... proxy.object_get_conditions: (path, If-Match or None) of each GET of an object ...
        ... proxy.object_bytes: {path: body bytes of the 2xx answers to its GETs passed on} ...
        ... proxy.object_gets_at_once: the most GETs of objects it served together ..."""

import random
import socket
import struct
import threading
import time

SLOWDOWN = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
            b"<Message>Please reduce your request rate.</Message></Error>")

PRECONDITION = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>PreconditionFailed</Code>"
                b"<Message>At least one of the pre-conditions you specified did not hold</Message></Error>")

INTERNAL = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError</Code>"
            b"<Message>We encountered an internal error. Please try again.</Message></Error>")


class FaultProxy:
    def __init__(self, upstream_port, seed=7):
        self.upstream_port = upstream_port
        self.slowdown = 0.0      # the share of requests answered 503 SlowDown
        self.reset_after = None  # reset the next request with a body after this many body bytes
        self.hang = False        # read requests and never answer them
        self.down = False        # reset every connection at its next request, as if nothing listened
        self.hang_object_gets = False  # the same for GETs of objects only
        self.stall_gets_beyond = None  # object GETs deliver the object's bytes before this offset, then hold
        self.refuse_gets_from = None  # object GETs of a range starting at or after this offset answer 503
        self.ignore_ranges = False  # object GETs reach the upstream without their Range (answered whole)
        self.lose_answer = False  # forward the next request with a body, then reset, unanswered
        self.lost = 0             # answers lost that way
        self.withhold_answer = False  # forward the next request with a body, never answer it
        self.fail_answer = False  # forward the next request with a body, answer 500 instead
        self.refuse_heads = 0     # how many HEAD requests to come are answered 503
        self.refuse_if_match = None  # "quoted" or "any": which If-Match headers are answered 412
        self.if_match_refused = 0    # requests answered 412 that way
        self.requests = 0        # requests received
        self.refused = 0         # answered 503 by the proxy
        self.resets = 0
        self.body_bytes = 0      # request body bytes passed to the upstream
        self.bandwidth = None    # bytes/s of request bodies, for all connections together
        self.stream_bandwidth = None  # bytes/s of each connection's answer bodies (one stream of
                                      # a remote S3 is slower than the link to it)
        self.delay_listings = 0.0  # seconds a ListMultipartUploads waits before it is forwarded
        self.delay_object_gets = 0.0  # seconds a GET of an object waits before it is forwarded
        self.delay_heads = 0.0   # seconds a HEAD waits before it is forwarded
        self.hold_writes = False  # PUT, POST and DELETE requests wait while it is True
        self.flip_answer_byte = None  # flip this byte of the next object GET answer's body
        self.lines = []          # request lines ("GET /bucket/key?query HTTP/1.1"), in order
        self.object_gets = []    # (path, Range header or None) of each object GET, in order
        self.object_get_conditions = []  # (path, If-Match header or None) of each, in order
        self.object_bytes = {}   # path: body bytes of object GET answers sent to the client
        self.object_gets_at_once = 0  # the most object GETs under way together so far
        self.object_gets_now = 0      # object GETs under way now
        self._next_send = 0.0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._threads = []
        self._sockets = set()
        self._stopping = False

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        self._spawn(self._accept)
        return self

    def stop(self):
        self._stopping = True
        self._listener.close()
        with self._lock:
            for s in list(self._sockets):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        for t in self._threads:
            t.join(timeout=5)

    def _pace(self, n):
        """Holds `n` bytes back until the bandwidth allows them."""
        if not self.bandwidth:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_send)
            self._next_send = start + n / self.bandwidth
        if start > now:
            time.sleep(start - now)

    def _got_one(self):
        with self._lock:
            self.object_gets_now -= 1

    def _count(self, path, n):
        if path is not None:
            with self._lock:
                self.object_bytes[path] = self.object_bytes.get(path, 0) + n

    def _spawn(self, target, *args):
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self._threads.append(t)

    def _track(self, s):
        with self._lock:
            self._sockets.add(s)
        return s

    def _accept(self):
        while not self._stopping:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._spawn(self._serve, self._track(client))

    def _serve(self, client):
        upstream = None
        buf = b""
        serving_get = False
        try:
            while True:
                if serving_get:
                    self._got_one()
                    serving_get = False
                head, buf = _read_head(client, buf)
                if head is None:
                    return
                if self.down:
                    _reset(client)
                    return
                length = _content_length(head)
                with self._lock:
                    self.requests += 1
                    self.lines.append(head.split(b"\r\n", 1)[0].decode("latin-1"))
                    line = head.split(b"\r\n", 1)[0].split(b" ")
                    object_get = line[0] == b"GET" and len(line) > 1 and b"?" not in line[1]
                    asked = _header(head, b"range")
                    condition = _header(head, b"if-match")
                    first = int(asked.split(b"=")[1].split(b"-")[0]) if asked else 0
                    path = line[1].decode("latin-1") if object_get else None
                    if object_get:
                        self.object_gets.append((path, asked.decode("latin-1") if asked else None))
                        self.object_get_conditions.append(
                            (path, condition.decode("latin-1") if condition is not None else None))
                        serving_get = True
                        self.object_gets_now += 1
                        self.object_gets_at_once = max(self.object_gets_at_once, self.object_gets_now)
                    refuse_range = (object_get and self.refuse_gets_from is not None
                                    and first >= self.refuse_gets_from)
                    flip = self.flip_answer_byte if object_get else None
                    if flip is not None:
                        self.flip_answer_byte = None
                    refuse = self._random.random() < self.slowdown or refuse_range
                    reset_at = self.reset_after if length > 0 else None
                    if reset_at is not None:
                        self.reset_after = None
                    lose = self.lose_answer and length > 0
                    if lose:
                        self.lose_answer = False
                    withhold = self.withhold_answer and length > 0
                    if withhold:
                        self.withhold_answer = False
                    replace = self.fail_answer and length > 0
                    if replace:
                        self.fail_answer = False
                    refuse_head = head.startswith(b"HEAD ") and self.refuse_heads > 0
                    refuse_condition = condition is not None and (
                        self.refuse_if_match == "any"
                        or (self.refuse_if_match == "quoted" and condition.startswith(b'"')))
                    if refuse_condition:
                        self.if_match_refused += 1
                    if refuse_head:
                        self.refuse_heads -= 1
                        self.refused += 1
                hang = self.hang or (self.hang_object_gets and object_get)
                stall = (max(0, self.stall_gets_beyond - first)
                         if object_get and self.stall_gets_beyond is not None else None)
                if hang or refuse or refuse_condition:
                    body, buf = _read_exactly(client, buf, length)
                    if body is None:
                        return
                if hang:
                    while not self._stopping and client.recv(65536):
                        pass
                    return
                if refuse_head:
                    client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
                    continue
                if refuse_condition:
                    client.sendall(b"HTTP/1.1 412 Precondition Failed\r\nContent-Type: application/xml\r\n"
                                   b"Content-Length: %d\r\n\r\n%s" % (len(PRECONDITION), PRECONDITION))
                    continue
                if refuse:
                    with self._lock:
                        self.refused += 1
                    client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
                                   b"Content-Length: %d\r\n\r\n%s" % (len(SLOWDOWN), SLOWDOWN))
                    continue
                if self.delay_listings and _lists_uploads(head):
                    time.sleep(self.delay_listings)
                if self.delay_object_gets and object_get:
                    time.sleep(self.delay_object_gets)
                if self.delay_heads and head.startswith(b"HEAD "):
                    time.sleep(self.delay_heads)
                while (self.hold_writes and not self._stopping
                       and head.split(b" ", 1)[0] in (b"PUT", b"POST", b"DELETE")):
                    time.sleep(0.01)
                if upstream is None:
                    upstream = self._track(socket.create_connection(("127.0.0.1", self.upstream_port)))
                if (_header(head, b"expect") or b"").lower() == b"100-continue":
                    # Answered here: the upstream's interim answer would come before its own.
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    head = b"\r\n".join(line for line in head.split(b"\r\n")
                                         if not line.lower().startswith(b"expect:"))
                if self.ignore_ranges and object_get:
                    head = b"\r\n".join(line for line in head.split(b"\r\n")
                                         if not line.lower().startswith(b"range:"))
                upstream.sendall(head)
                passed = 0
                while passed < length:
                    if buf:
                        chunk, buf = buf[:length - passed], buf[length - passed:]
                    else:
                        chunk = client.recv(min(65536, length - passed))
                        if not chunk:
                            return
                    if reset_at is not None and passed + len(chunk) >= reset_at:
                        upstream.sendall(chunk[:reset_at - passed])
                        with self._lock:
                            self.resets += 1
                            self.body_bytes += reset_at - passed
                        _reset(client)
                        return
                    self._pace(len(chunk))
                    upstream.sendall(chunk)
                    passed += len(chunk)
                    with self._lock:
                        self.body_bytes += len(chunk)
                if withhold:
                    _relay_response(upstream, _Sink(), False)  # the upstream has acted on it
                    with self._lock:
                        self.lost += 1
                    while not self._stopping and client.recv(65536):
                        pass
                    return
                if replace:
                    _relay_response(upstream, _Sink(), False)  # the upstream has acted on it
                    client.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/xml\r\n"
                                   b"Content-Length: %d\r\n\r\n%s" % (len(INTERNAL), INTERNAL))
                    continue
                if lose:
                    _relay_response(upstream, _Sink(), False)  # the upstream has acted on it
                    with self._lock:
                        self.lost += 1
                    _reset(client)
                    return
                relayed = _relay_response(upstream, client, head.startswith(b"HEAD "), flip, stall,
                                          lambda n, path=path: self._count(path, n), self.stream_bandwidth)
                if relayed == "stalled":
                    while not self._stopping and client.recv(65536):
                        pass
                    return
                if not relayed:
                    return
        except OSError:
            return
        finally:
            if serving_get:
                self._got_one()
            for s in (client, upstream):
                if s is not None:
                    with self._lock:
                        self._sockets.discard(s)
                    s.close()


def _read_head(sock, buf):
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk
    end = buf.index(b"\r\n\r\n") + 4
    return buf[:end], buf[end:]


def _read_exactly(sock, buf, n):
    while len(buf) < n:
        chunk = sock.recv(max(65536, n - len(buf)))
        if not chunk:
            return None, buf
        buf += chunk
    return buf[:n], buf[n:]


def _header(head, name):
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name:
            return v.strip()
    return None


def _lists_uploads(head):
    """Whether the request is a ListMultipartUploads (GET of a bucket with ?uploads)."""
    line = head.split(b"\r\n", 1)[0].split(b" ")
    if len(line) < 2 or line[0] != b"GET" or b"?" not in line[1]:
        return False
    return b"uploads" in [p.split(b"=", 1)[0] for p in line[1].split(b"?", 1)[1].split(b"&")]


def _content_length(head):
    value = _header(head, b"content-length")
    return int(value) if value else 0


def _relay_response(upstream, client, head_only, flip=None, stall=None, count=lambda n: None, pace=None):
    """Copies one response from upstream to client (with byte `flip` of its body flipped),
    telling `count` how many body bytes went, at most `pace` body bytes/s when set (then as it
    arrives); False when either side is gone; "stalled" when only `stall` bytes of its body were
    sent."""
    head, rest = _read_head(upstream, b"")
    if head is None:
        return False
    status = int(head.split(b" ", 2)[1])
    if head_only or status in (204, 304) or 100 <= status < 200:
        client.sendall(head + rest)
        return True
    chunked = (_header(head, b"transfer-encoding") or b"").lower() == b"chunked"
    if not chunked and flip is None and stall is None:
        # Passed on as it comes (as a real link does), and counted as it goes.
        left = _content_length(head) - len(rest)
        if 200 <= status < 300:
            count(len(rest))
        client.sendall(head + rest)
        sent, start = len(rest), time.monotonic()
        while left > 0:
            piece = upstream.recv(min(256 * 1024, left))
            if not piece:
                return False
            if 200 <= status < 300:
                count(len(piece))
            client.sendall(piece)
            left -= len(piece)
            sent += len(piece)
            ahead = start + sent / pace - time.monotonic() if pace else 0
            if ahead > 0:
                time.sleep(ahead)
        return True
    if (_header(head, b"transfer-encoding") or b"").lower() == b"chunked":
        data = rest
        while not data.endswith(b"0\r\n\r\n"):
            chunk = upstream.recv(65536)
            if not chunk:
                return False
            data += chunk
        client.sendall(head + data)
        return True
    body, _ = _read_exactly(upstream, rest, _content_length(head))
    if body is None:
        return False
    if flip is not None and flip < len(body):
        body = body[:flip] + bytes([body[flip] ^ 0xFF]) + body[flip + 1:]
    ok = 200 <= status < 300
    if stall is not None and stall < len(body) and ok:
        count(stall)
        client.sendall(head + body[:stall])
        return "stalled"
    if ok:
        count(len(body))
    client.sendall(head + body)
    return True


class _Sink:
    def sendall(self, _data):
        pass


def _reset(sock):
    """Closes with RST, as a crashed peer or a middlebox does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


if __name__ == "__main__":
    # For the benchmarks: fault_proxy.py UPSTREAM_PORT [BYTES_PER_S [STREAM_BYTES_PER_S]]
    # prints its port, then passes requests until it is terminated (BYTES_PER_S: request bodies,
    # all together, 0 for no cap; STREAM_BYTES_PER_S: each connection's answer bodies).
    import signal
    import sys
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
    proxy = FaultProxy(int(sys.argv[1])).start()
    if len(sys.argv) > 2 and int(sys.argv[2]) > 0:
        proxy.bandwidth = int(sys.argv[2])
    if len(sys.argv) > 3:
        proxy.stream_bandwidth = int(sys.argv[3])
    print(proxy.port, flush=True)
    signal.sigwait([signal.SIGTERM, signal.SIGINT])
    proxy.stop()
