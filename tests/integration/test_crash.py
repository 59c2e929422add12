"""kill -9 of the real hots3 process under concurrent PUT / overwrite / DELETE / multipart.

After each restart: every acknowledged write reads back byte-exact, an operation that was in
flight shows its old or its new state (never a mix), nothing never attempted is visible, and
`hots3 check` finds the catalog and the device consistent with every checksum valid."""

import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

HOTS3 = harness.find_binary("HOTS3_BIN", "hots3")
WRITERS = 6
ROUNDS = 3


def payload(tag, size):
    seed = hashlib.sha256(tag.encode()).digest()
    return (seed * (size // 32 + 1))[:size]


class Worker(threading.Thread):
    """Owns its keys, so its operations on a key are ordered: the last acknowledged one decides
    what the key must hold; one in flight at the crash may or may not have happened."""

    def __init__(self, index, port, stop):
        super().__init__(daemon=True)
        self.index = index
        self.port = port
        self.stop_flag = stop
        self.random = random.Random(index * 7919 + int(time.time()))
        self.acked = {}      # key -> sha256 hex of content, or None when deleted
        self.in_flight = {}  # key -> (possible new state) while a request is outstanding
        self.seq = 0

    def request(self, method, key, query=(), body=b"", headers=None):
        req = s3.SignedRequest(method, "/crash/" + key, query, headers, body=body, port=self.port)
        return s3.send(self.port, req.wire(), timeout_s=20)

    def put(self, key, body):
        self.in_flight[key] = hashlib.sha256(body).hexdigest()
        r = self.request("PUT", key, body=body)
        if r.status == 200:
            self.acked[key] = self.in_flight.pop(key)
        return r.status

    def delete(self, key):
        self.in_flight[key] = None
        r = self.request("DELETE", key)
        if r.status == 204:
            self.acked[key] = self.in_flight.pop(key)

    def multipart(self, key):
        r = self.request("POST", key, query=[("uploads", "")])
        upload = re.search(rb"<UploadId>([^<]+)</UploadId>", r.body).group(1).decode()
        parts = [payload("%s-%d-p%d" % (key, self.seq, n), 5 * 1024 * 1024 if n < 3 else 70000) for n in (1, 2, 3)]
        etags = []
        for n, body in enumerate(parts, start=1):
            r = self.request("PUT", key, query=[("partNumber", str(n)), ("uploadId", upload)], body=body)
            if r.status != 200:
                return
            etags.append(r.header("etag"))
        xml = "<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
            "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, e) for n, e in enumerate(etags, 1))
        self.in_flight[key] = hashlib.sha256(b"".join(parts)).hexdigest()
        r = self.request("POST", key, query=[("uploadId", upload)], body=xml.encode())
        if r.status == 200 and b"<Error>" not in r.body:
            self.acked[key] = self.in_flight.pop(key)

    def run(self):
        keys = ["w%d/k%d" % (self.index, i) for i in range(8)]
        try:
            while not self.stop_flag.is_set():
                self.seq += 1
                key = self.random.choice(keys)
                op = self.random.random()
                if op < 0.55:
                    size = self.random.choice([100, 3000, 65536, 700000, 4 * 1024 * 1024])
                    self.put(key, payload("%s-%d" % (key, self.seq), size))
                elif op < 0.8:
                    self.delete(key)
                else:
                    self.multipart(key)
        except Exception:  # noqa: BLE001 - the server was killed under us
            pass


class CrashTest(unittest.TestCase):
    def test_kill_9_under_load_loses_nothing_acknowledged(self):
        workdir = tempfile.mkdtemp(prefix="hots3-crash-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
        data_dir = os.path.join(workdir, "data")
        expected = {}  # key -> set of acceptable sha256 (None = absent)
        for round_number in range(ROUNDS):
            server = s3.hots3_server(device_size="2GiB", workdir=workdir).start()
            try:
                port = server.port
                self.verify(port, expected, round_number)
                if round_number == 0:
                    req = s3.SignedRequest("PUT", "/crash", port=port)
                    self.assertEqual(s3.send(port, req.wire()).status, 200)
                stop = threading.Event()
                workers = [Worker(i, port, stop) for i in range(WRITERS)]
                for w in workers:
                    w.start()
                time.sleep(1.5 + random.random() * 2)
                server.proc.send_signal(signal.SIGKILL)
                server.proc.wait()
                stop.set()
                for w in workers:
                    w.join(timeout=30)
                for w in workers:
                    for key in set(w.acked) | set(w.in_flight):
                        states = set()
                        if key in w.acked:
                            states.add(w.acked[key])
                        elif key in expected:
                            states |= expected[key]
                        else:
                            states.add(None)
                        if key in w.in_flight:
                            states.add(w.in_flight[key])
                        expected[key] = states
                acked = sum(len(w.acked) for w in workers)
                sys.stderr.write("round %d: %d keys acknowledged, %d operations in flight at the kill\n"
                                 % (round_number, acked, sum(len(w.in_flight) for w in workers)))
                self.assertGreater(acked, 0, "no write was acknowledged")
            finally:
                server.kill()
        server = s3.hots3_server(device_size="2GiB", workdir=workdir)
        with server:
            self.verify(server.port, expected, ROUNDS)
        check = subprocess.run([HOTS3, "check", "--data", data_dir], capture_output=True, text=True, timeout=600)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertIn("OK: catalog and device are consistent", check.stdout)
        server.cleanup()
        subprocess.run(["rm", "-rf", workdir])

    def verify(self, port, expected, round_number):
        listed = set()
        marker = ""
        while True:
            query = [("prefix", "w")] + ([("marker", marker)] if marker else [])
            req = s3.SignedRequest("GET", "/crash", query, port=port)
            r = s3.send(port, req.wire())
            if r.status == 404:
                break  # before the bucket exists
            keys = re.findall(rb"<Key>([^<]+)</Key>", r.body)
            listed.update(k.decode() for k in keys)
            if b"<IsTruncated>true</IsTruncated>" not in r.body:
                break
            marker = keys[-1].decode()
        for key in listed:
            self.assertIn(key, expected, "round %d: %s is visible but was never written" % (round_number, key))
        for key, states in expected.items():
            req = s3.SignedRequest("GET", "/crash/" + key, port=port)
            r = s3.send(port, req.wire())
            if r.status == 404:
                self.assertIn(None, states, "round %d: acknowledged %s is gone" % (round_number, key))
                expected[key] = {None}
            else:
                self.assertEqual(r.status, 200, key)
                digest = hashlib.sha256(r.body).hexdigest()
                self.assertIn(digest, states, "round %d: %s holds bytes nobody wrote" % (round_number, key))
                expected[key] = {digest}


if __name__ == "__main__":
    unittest.main(verbosity=2)
