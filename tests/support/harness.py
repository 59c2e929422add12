"""Test support: start a real server binary on 127.0.0.1 with an ephemeral port, and speak raw
HTTP/1.1 to it. Standard library only, so it runs under any python3.

Every process started here is stopped by the test that started it (context managers)."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


class ServerProcess:
    """A server binary started with --listen 127.0.0.1:0 --port-file; stopped on exit."""

    def __init__(self, binary, args=(), config=None, env=None, workdir=None, port_wait_s=20.0,
                 port_poll_s=0.02):
        self.binary = binary
        self.args = list(args)
        self.config = config
        self.extra_env = env or {}
        self.port_wait_s = port_wait_s
        # 0: poll the port file without pause, so start() returns the instant it appears (tests
        # of signals sent at that moment).
        self.port_poll_s = port_poll_s
        self.owned_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix="hots3-test-")
        self.proc = None
        self.port = None
        self.returncode = None

    def start(self, on_port_file=None):
        """Starts the server and waits for its port file. `on_port_file(pid)`, if given, is
        called the instant the file appears (with port_poll_s=0), before it is even read."""
        port_file = os.path.join(self.dir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        args = [self.binary] + self.args
        if self.config is not None:
            path = os.path.join(self.dir, "test.toml")
            with open(path, "w") as f:
                f.write(self.config)
            args += ["--config", path]
        args += ["--listen", "127.0.0.1:0", "--port-file", port_file]
        # Credentials come only from what the test passes, never from the caller's environment.
        env = {k: v for k, v in os.environ.items()
               if k not in ("HOTS3_ACCESS_KEY", "HOTS3_SECRET_KEY")}
        env.update(self.extra_env)
        for f in ("stdout", "stderr"):  # of a run before a restart
            handle = getattr(self, f, None)
            if handle:
                handle.close()
        self.stdout = open(os.path.join(self.dir, "stdout.log"), "wb")
        self.stderr = open(os.path.join(self.dir, "stderr.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.stdout, stderr=self.stderr, env=env,
                                     cwd=self.dir)
        deadline = time.monotonic() + self.port_wait_s
        if not self.port_poll_s:
            # Spin on the file's existence alone, so that start() returns within microseconds
            # of its appearance; look at the process and the clock now and then.
            exists, spins = os.path.exists, 0
            while not exists(port_file):
                spins += 1
                if spins % 4096 == 0 and (self.proc.poll() is not None or
                                          time.monotonic() > deadline):
                    break
            else:
                if on_port_file:
                    on_port_file(self.proc.pid)
        while time.monotonic() < deadline:
            # The port file first: a server told to stop by on_port_file may be gone already.
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    return self
            except FileNotFoundError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("server exited with %d before listening:\n%s" %
                                   (self.proc.returncode, self.read_stderr()))
            if self.port_poll_s:
                time.sleep(self.port_poll_s)
        self.kill()
        raise RuntimeError("server did not write its port file in time")

    def read_stderr(self):
        with open(os.path.join(self.dir, "stderr.log"), "rb") as f:
            return f.read().decode(errors="replace")

    def read_stdout(self):
        with open(os.path.join(self.dir, "stdout.log"), "rb") as f:
            return f.read().decode(errors="replace")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout_s):
        self.returncode = self.proc.wait(timeout=timeout_s)
        return self.returncode

    def stop(self, timeout_s=30.0):
        """SIGTERM and wait; returns the exit code (kills after timeout_s and fails)."""
        if self.proc is None or self.proc.poll() is not None:
            self.returncode = None if self.proc is None else self.proc.returncode
            return self.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.returncode = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError("server did not stop within %.0f s of SIGTERM" % timeout_s)
        return self.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def cleanup(self):
        self.kill()
        for f in ("stdout", "stderr"):
            handle = getattr(self, f, None)
            if handle:
                handle.close()
        if self.owned_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        try:
            self.stop()
        finally:
            self.cleanup()
        return False


def connect(port, timeout_s=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value)
        self.body = body

    def header(self, name, default=None):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return default

    def __repr__(self):
        return "Response(%d %s, %r, %d bytes)" % (self.status, self.reason, self.headers,
                                                 len(self.body))


class Reader:
    """Reads HTTP/1.1 responses from a socket, keeping leftover bytes between responses."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("connection closed by the server")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_response(self, head_request=False):
        status_line = self._line().decode()
        version, status, reason = (status_line.split(" ", 2) + [""])[:3]
        assert version.startswith("HTTP/1."), status_line
        headers = []
        while True:
            line = self._line()
            if not line:
                break
            name, value = line.decode().split(":", 1)
            headers.append((name, value.strip()))
        resp = Response(int(status), reason, headers, b"")
        code = resp.status
        if head_request or 100 <= code < 200 or code in (204, 304):
            return resp
        if resp.header("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    while self._line():
                        pass
                    break
                body += self._exact(size)
                assert self._exact(2) == b"\r\n"
            resp.body = body
        elif resp.header("content-length") is not None:
            resp.body = self._exact(int(resp.header("content-length")))
        else:
            while True:  # delimited by close
                try:
                    self._fill()
                except ConnectionError:
                    break
            resp.body, self.buf = self.buf, b""
        return resp

    def closed(self, timeout_s=5.0):
        """True if the server closes the connection (EOF or reset) within timeout_s."""
        self.sock.settimeout(timeout_s)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
                self.buf += data
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False


def request(port, method, target, headers=None, body=b"", timeout_s=30.0):
    """One request on a fresh connection; returns the Response."""
    with connect(port, timeout_s) as s:
        hdrs = {"Host": "127.0.0.1:%d" % port, "Connection": "close"}
        hdrs.update(headers or {})
        if body and "Content-Length" not in hdrs and "Transfer-Encoding" not in hdrs:
            hdrs["Content-Length"] = str(len(body))
        head = "%s %s HTTP/1.1\r\n" % (method, target)
        head += "".join("%s: %s\r\n" % kv for kv in hdrs.items()) + "\r\n"
        s.sendall(head.encode() + body)
        return Reader(s).read_response(head_request=(method == "HEAD"))


def find_binary(env_name, default_name):
    path = os.environ.get(env_name)
    if path:
        return path
    found = shutil.which(default_name)
    if found:
        return found
    raise RuntimeError("set %s to the %s binary" % (env_name, default_name))
