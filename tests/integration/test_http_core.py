"""The HTTP core (src/http) over real sockets, through hots3-http-test-server.

Timeouts are set short in the test configuration; the assertions leave wide margins because
CI machines are shared and noisy."""

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402

BINARY = harness.find_binary("HOTS3_HTTP_TEST_SERVER", "hots3-http-test-server")

CONFIG = """
[http]
threads = 2
header_bytes_max = "64KiB"
header_timeout = "1s"
idle_timeout = "2s"
body_stall_timeout = "1s"
send_stall_timeout = "2s"
connections_max = 400
shutdown_grace = "5s"
"""


def pattern(n):
    return (b"0123456789abcdef" * (n // 16 + 1))[:n]


def send_request(sock, method, target, headers=None, body=b""):
    hdrs = {"Host": "127.0.0.1"}
    hdrs.update(headers or {})
    if body and "Transfer-Encoding" not in hdrs and "Content-Length" not in hdrs:
        hdrs["Content-Length"] = str(len(body))
    head = "%s %s HTTP/1.1\r\n" % (method, target)
    head += "".join("%s: %s\r\n" % kv for kv in hdrs.items()) + "\r\n"
    sock.sendall(head.encode() + body)


def sink_answer(data):
    return ("%d %08x\n" % (len(data), zlib.crc32(data))).encode()


class HttpCoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = harness.ServerProcess(BINARY, config=CONFIG).start()
        cls.port = cls.server.port

    @classmethod
    def tearDownClass(cls):
        try:
            code = cls.server.stop()
            assert code == 0, "test server exited with %r" % code
        finally:
            cls.server.cleanup()

    def conn(self):
        return harness.connect(self.port)

    def test_keep_alive_serves_many_requests_on_one_connection(self):
        with self.conn() as s:
            r = harness.Reader(s)
            for n in (0, 1, 100, 70000, 3):
                send_request(s, "GET", "/bytes/%d" % n)
                resp = r.read_response()
                self.assertEqual(resp.status, 200)
                self.assertEqual(resp.body, pattern(n))
                self.assertIsNone(resp.header("connection"))
                self.assertIsNotNone(resp.header("date"))

    def test_pipelined_requests_are_answered_in_order(self):
        with self.conn() as s:
            wire = b""
            expected = []
            for i in range(12):
                if i % 3 == 0:
                    body = pattern(1000 + i)
                    wire += ("PUT /sink HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" %
                             len(body)).encode() + body
                    expected.append(sink_answer(body))
                else:
                    wire += ("GET /bytes/%d HTTP/1.1\r\nHost: x\r\n\r\n" % (i * 10)).encode()
                    expected.append(pattern(i * 10))
            s.sendall(wire)
            r = harness.Reader(s)
            for want in expected:
                resp = r.read_response()
                self.assertEqual(resp.status, 200)
                self.assertEqual(resp.body, want)

    def test_chunked_request_body_is_decoded(self):
        data = os.urandom(300000)
        with self.conn() as s:
            head = b"PUT /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            s.sendall(head)
            pos = 0
            sizes = [1, 7, 4096, 65536, 100000, 12345]
            while pos < len(data):
                n = sizes[pos % len(sizes)] if pos < len(data) else 0
                piece = data[pos:pos + n]
                ext = b";name=value" if pos % 2 else b""
                s.sendall(b"%x%s\r\n%s\r\n" % (len(piece), ext, piece))
                pos += len(piece)
            s.sendall(b"0\r\nX-Trailer: yes\r\n\r\n")
            resp = harness.Reader(s).read_response()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.body, sink_answer(data))

    def test_broken_chunked_framing_is_a_client_error(self):
        with self.conn() as s:
            s.sendall(b"PUT /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"zz\r\nhello\r\n")
            r = harness.Reader(s)
            resp = r.read_response()
            self.assertEqual(resp.status, 400)
            self.assertTrue(r.closed())

    def test_large_body_with_content_length(self):
        data = os.urandom(24 * 1024 * 1024)
        resp = harness.request(self.port, "PUT", "/sink", body=data)
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.body, sink_answer(data))

    def test_streamed_responses_content_length_and_chunked(self):
        n = 64 * 1024 * 1024 + 5
        resp = harness.request(self.port, "GET", "/bytes/%d" % n)
        self.assertEqual(int(resp.header("content-length")), n)
        self.assertEqual(resp.body, pattern(n))
        resp = harness.request(self.port, "GET", "/chunked/%d" % (3 * 1024 * 1024 + 17))
        self.assertEqual(resp.header("transfer-encoding"), "chunked")
        self.assertEqual(resp.body, pattern(3 * 1024 * 1024 + 17))

    def test_head_sends_length_but_no_body(self):
        with self.conn() as s:
            r = harness.Reader(s)
            send_request(s, "HEAD", "/bytes/1000")
            resp = r.read_response(head_request=True)
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.header("content-length"), "1000")
            # If a body had been sent, it would be read as the next response's status line.
            send_request(s, "GET", "/bytes/5")
            self.assertEqual(r.read_response().body, b"01234")

    def test_expect_100_continue_accepted(self):
        data = pattern(5000)
        with self.conn() as s:
            send_request(s, "PUT", "/sink", {"Content-Length": str(len(data)),
                                             "Expect": "100-continue"})
            r = harness.Reader(s)
            interim = r.read_response()
            self.assertEqual(interim.status, 100)
            s.sendall(data)
            resp = r.read_response()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.body, sink_answer(data))
            # The connection stays usable.
            send_request(s, "GET", "/bytes/3")
            self.assertEqual(r.read_response().body, b"012")

    def test_expect_100_continue_rejected_without_reading_body(self):
        with self.conn() as s:
            send_request(s, "PUT", "/limited", {"Content-Length": str(10 * 1024 * 1024),
                                                "Expect": "100-Continue"})
            r = harness.Reader(s)
            resp = r.read_response()
            self.assertEqual(resp.status, 413)  # final answer, no 100 first
            self.assertEqual(resp.header("connection"), "close")
            self.assertTrue(r.closed())

    def test_small_unread_body_is_drained_and_connection_kept(self):
        with self.conn() as s:
            r = harness.Reader(s)
            send_request(s, "PUT", "/nowhere", body=pattern(10000))
            self.assertEqual(r.read_response().status, 404)
            send_request(s, "GET", "/bytes/4")
            self.assertEqual(r.read_response().body, b"0123")

    def test_headers_larger_than_beast_default_are_accepted(self):
        with self.conn() as s:
            send_request(s, "GET", "/bytes/2", {"X-Amz-Meta-Big": "v" * 40000})
            self.assertEqual(harness.Reader(s).read_response().status, 200)

    def test_oversize_headers_are_refused(self):
        with self.conn() as s:
            send_request(s, "GET", "/bytes/2", {"X-Amz-Meta-Big": "v" * (100 * 1024)})
            r = harness.Reader(s)
            resp = r.read_response()
            self.assertEqual(resp.status, 431)
            self.assertTrue(r.closed())

    def test_malformed_request_line(self):
        with self.conn() as s:
            s.sendall(b"THIS IS NOT HTTP\r\n\r\n")
            r = harness.Reader(s)
            self.assertEqual(r.read_response().status, 400)
            self.assertTrue(r.closed())

    def test_http_1_0_closes_after_response(self):
        with self.conn() as s:
            s.sendall(b"GET /bytes/10 HTTP/1.0\r\n\r\n")
            r = harness.Reader(s)
            resp = r.read_response()
            self.assertEqual(resp.body, pattern(10))
            self.assertTrue(r.closed())

    def test_handler_exception_becomes_500_and_close(self):
        with self.conn() as s:
            send_request(s, "GET", "/fail")
            r = harness.Reader(s)
            self.assertEqual(r.read_response().status, 500)
            self.assertTrue(r.closed())

    def test_health_endpoints(self):
        self.assertEqual(harness.request(self.port, "GET", "/health/live").status, 200)
        self.assertEqual(harness.request(self.port, "GET", "/health/ready").status, 200)
        # A signed request for the same path belongs to the handler (an S3 bucket "health").
        signed = harness.request(self.port, "GET", "/health/live", {"Authorization": "AWS4-..."})
        self.assertEqual(signed.status, 404)

    def test_slowloris_is_cut_off_at_header_timeout(self):
        with self.conn() as s:
            start = time.monotonic()
            line = b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
            closed_at = None
            try:
                for byte in line:
                    s.sendall(bytes([byte]))
                    time.sleep(0.2)
                    if time.monotonic() - start > 6:
                        break
            except (BrokenPipeError, ConnectionResetError):
                closed_at = time.monotonic()
            r = harness.Reader(s)
            if closed_at is None:
                resp = r.read_response()
                self.assertEqual(resp.status, 408)
                self.assertTrue(r.closed(5))
                closed_at = time.monotonic()
            elapsed = closed_at - start
            self.assertGreater(elapsed, 0.9)
            self.assertLess(elapsed, 3.5, "slow client kept for %.1f s" % elapsed)

    def test_idle_keep_alive_connection_is_closed(self):
        with self.conn() as s:
            send_request(s, "GET", "/bytes/1")
            r = harness.Reader(s)
            r.read_response()
            start = time.monotonic()
            self.assertTrue(r.closed(8))
            elapsed = time.monotonic() - start
            self.assertGreater(elapsed, 1.5)
            self.assertLess(elapsed, 4.0)

    def test_stalled_body_times_out(self):
        with self.conn() as s:
            send_request(s, "PUT", "/sink", {"Content-Length": "1000"})
            s.sendall(b"x" * 10)
            start = time.monotonic()
            r = harness.Reader(s)
            resp = r.read_response()
            self.assertEqual(resp.status, 408)
            self.assertLess(time.monotonic() - start, 4.0)
            self.assertTrue(r.closed())

    def test_many_concurrent_connections(self):
        socks = [self.conn() for _ in range(300)]
        try:
            for i, s in enumerate(socks):
                send_request(s, "GET", "/bytes/%d" % (i % 50))
            for i, s in enumerate(socks):
                resp = harness.Reader(s).read_response()
                self.assertEqual(resp.body, pattern(i % 50))
        finally:
            for s in socks:
                s.close()


class ConnectionLimitTest(unittest.TestCase):
    def test_connections_over_the_limit_get_503(self):
        config = CONFIG.replace("connections_max = 400", "connections_max = 4")
        with harness.ServerProcess(BINARY, config=config) as server:
            held = [harness.connect(server.port) for _ in range(4)]
            try:
                for s in held:  # make sure all four are accepted before the fifth
                    send_request(s, "GET", "/bytes/1")
                    harness.Reader(s).read_response()
                with harness.connect(server.port) as extra:
                    r = harness.Reader(extra)
                    resp = r.read_response()
                    self.assertEqual(resp.status, 503)
                    self.assertTrue(r.closed())
            finally:
                for s in held:
                    s.close()
            # Once they are gone, new connections are served again.
            deadline = time.monotonic() + 5
            while True:
                resp = harness.request(server.port, "GET", "/bytes/2")
                if resp.status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            self.assertEqual(resp.status, 200)


class ShutdownTest(unittest.TestCase):
    def test_sigterm_finishes_requests_in_flight(self):
        server = harness.ServerProcess(BINARY, config=CONFIG).start()
        try:
            busy = self.enterContext(harness.connect(server.port))
            idle = self.enterContext(harness.connect(server.port))
            send_request(idle, "GET", "/bytes/1")
            harness.Reader(idle).read_response()
            send_request(busy, "GET", "/slow/1500")
            time.sleep(0.3)
            start = time.monotonic()
            server.signal(signal.SIGTERM)
            # The idle connection is closed promptly ...
            self.assertTrue(harness.Reader(idle).closed(3))
            # ... new connections are refused ...
            time.sleep(0.2)
            with self.assertRaises(OSError):
                harness.connect(server.port, timeout_s=2).recv(1)
            # ... and the request in flight completes, with Connection: close.
            r = harness.Reader(busy)
            resp = r.read_response()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.body, b"done\n")
            self.assertEqual(resp.header("connection"), "close")
            self.assertEqual(server.wait(10), 0)
            self.assertLess(time.monotonic() - start, 5)
        finally:
            server.cleanup()

    def test_grace_period_bounds_shutdown(self):
        config = CONFIG.replace('shutdown_grace = "5s"', 'shutdown_grace = "1s"')
        server = harness.ServerProcess(BINARY, config=config).start()
        try:
            busy = self.enterContext(harness.connect(server.port))
            send_request(busy, "GET", "/slow/20000")
            time.sleep(0.3)
            start = time.monotonic()
            server.signal(signal.SIGTERM)
            self.assertEqual(server.wait(15), 0)
            # grace (1 s) + at most 2 s for handlers that do not notice the closed socket
            self.assertLess(time.monotonic() - start, 5)
            self.assertTrue(harness.Reader(busy).closed(2))
        finally:
            server.cleanup()


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="hots3-tls-")
        cls.cert = os.path.join(cls.dir, "cert.pem")
        cls.key = os.path.join(cls.dir, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", cls.key, "-out", cls.cert],
                       check=True, capture_output=True)

    def config(self, allow_plaintext):
        return CONFIG + '\n[http.tls]\ncertificate = "%s"\nprivate_key = "%s"\n' \
            'allow_plaintext = %s\n' % (self.cert, self.key, "true" if allow_plaintext else "false")

    def tls_get(self, port, target):
        context = ssl.create_default_context(cafile=self.cert)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                r = harness.Reader(s)
                for _ in range(2):  # keep-alive over TLS
                    send_request(s, "GET", target)
                    resp = r.read_response()
                    self.assertEqual(resp.status, 200)
                return resp

    def test_tls_only(self):
        with harness.ServerProcess(BINARY, config=self.config(False)) as server:
            self.assertEqual(self.tls_get(server.port, "/bytes/100000").body, pattern(100000))
            with harness.connect(server.port) as plain:
                send_request(plain, "GET", "/bytes/1")
                self.assertTrue(harness.Reader(plain).closed())

    def test_tls_and_plaintext_on_one_listener(self):
        with harness.ServerProcess(BINARY, config=self.config(True)) as server:
            self.assertEqual(self.tls_get(server.port, "/bytes/10").body, pattern(10))
            self.assertEqual(harness.request(server.port, "GET", "/bytes/10").body, pattern(10))


class AccessLogTest(unittest.TestCase):
    def test_one_structured_line_per_request(self):
        workdir = tempfile.mkdtemp(prefix="hots3-log-")
        log_path = os.path.join(workdir, "access.log")
        config = CONFIG + '\n[log]\naccess_log = "%s"\n' % log_path
        with harness.ServerProcess(BINARY, config=config, workdir=workdir) as server:
            harness.request(server.port, "PUT", "/sink", body=b"x" * 123)
            harness.request(server.port, "GET", "/bytes/77?X-Amz-Signature=secret&a=b")
        with open(log_path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        self.assertEqual(len(lines), 2)
        put, get = lines
        self.assertEqual((put["method"], put["target"], put["status"], put["bytes_in"]),
                         ("PUT", "/sink", 200, 123))
        self.assertEqual((get["status"], get["bytes_out"]), (200, 77))
        self.assertNotIn("secret", get["target"])
        self.assertIn("X-Amz-Signature=REDACTED", get["target"])
        for line in lines:
            self.assertEqual(len(line["id"]), 16)
            self.assertGreaterEqual(line["duration_ms"], 0)
            self.assertTrue(line["remote"].startswith("127.0.0.1:"))
        self.assertNotEqual(put["id"], get["id"])

    def test_lines_reach_the_file_while_the_server_runs(self):
        # Buffered, but flushed every second: `tail -f` sees each request within about a second.
        workdir = tempfile.mkdtemp(prefix="hots3-log-")
        log_path = os.path.join(workdir, "access.log")
        config = CONFIG + '\n[log]\naccess_log = "%s"\n' % log_path
        with harness.ServerProcess(BINARY, config=config, workdir=workdir) as server:
            harness.request(server.port, "GET", "/bytes/5")
            deadline = time.monotonic() + 5
            text = ""
            while time.monotonic() < deadline and not text.endswith("\n"):
                time.sleep(0.1)
                with open(log_path) as f:
                    text = f.read()
            self.assertEqual(json.loads(text)["target"], "/bytes/5")


if __name__ == "__main__":
    unittest.main(verbosity=2)
