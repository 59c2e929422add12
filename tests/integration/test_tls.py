"""TLS end to end with the clients people use, against a certificate issued the way a real
deployment has one: a private CA (made here with openssl) signs the server's certificate for
127.0.0.1 and localhost, and clients trust that CA, not the server's certificate itself.

- The handshake: the server presents the configured certificate, valid for the IP address and
  the DNS name it names, and unverifiable against a CA that did not sign it.
- The AWS CLI, trusting the CA through --ca-bundle and through AWS_CA_BUNDLE: mb, a multipart
  cp up and back down (SHA-256 compared), ls; and a certificate verification error with another
  CA. Both CLIs a deployment meets are run: v1 in this interpreter (`python3 -m awscli`) and
  Debian's v2 (/usr/bin/aws); one that is not installed is skipped and says so.
- boto3 with verify=<CA bundle>: put, get, ranged get, head, list, a multipart upload_file and a
  download; botocore's SSLError with another CA.
- Certificate rotation as certbot and cert-manager do it (new files renamed over the configured
  paths), then SIGHUP: new connections get the new certificate, a connection kept alive from
  before goes on working, the server keeps running. A certificate file that is not PEM leaves
  the last good certificate in service and is named in the log.

Clients verify against the CA as they would in production; nothing here turns verification off,
so a server presenting the wrong certificate (or none) fails the test."""

import hashlib
import http.client
import importlib.util
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import s3_support as s3  # noqa: E402

import boto3  # noqa: E402
import botocore.exceptions  # noqa: E402
from boto3.s3.transfer import TransferConfig  # noqa: E402
from botocore.config import Config  # noqa: E402

MIB = 1024 * 1024
# Above the CLI's and boto3's default multipart threshold (8 MiB): three parts of 8 MiB.
LARGE_SIZE = 20 * MIB + 3
RELOAD_LOG_LINE = "SIGHUP: reload finished"
RELOAD_WAIT_S = 15.0


def data(n, seed=0):
    return (hashlib.sha256(b"%d" % seed).digest() * (n // 32 + 1))[:n]


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            h.update(block)
    return h.hexdigest()


def der_of(pem_path):
    with open(pem_path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


class Pki:
    """A private CA and the certificates it signs, as files in `directory` (openssl)."""

    # What a CA-issued server certificate carries; key identifiers too, which strict verifiers
    # (Python 3.13's default X509_STRICT) require.
    LEAF_EXTENSIONS = ("subjectAltName = IP:127.0.0.1, DNS:localhost\n"
                       "basicConstraints = critical, CA:FALSE\n"
                       "keyUsage = critical, digitalSignature\n"
                       "extendedKeyUsage = serverAuth\n"
                       "subjectKeyIdentifier = hash\n"
                       "authorityKeyIdentifier = keyid, issuer\n")

    def __init__(self, directory):
        self.dir = directory
        self.extensions = os.path.join(directory, "leaf.ext")
        with open(self.extensions, "w") as f:
            f.write(self.LEAF_EXTENSIONS)

    @staticmethod
    def openssl(*args):
        r = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("openssl %s failed:\n%s%s" % (" ".join(args), r.stdout, r.stderr))

    def ca(self, name):
        """A self-signed CA: (certificate path, key path)."""
        cert, key = os.path.join(self.dir, name + ".pem"), os.path.join(self.dir, name + ".key")
        self.openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-days", "2", "-subj", "/CN=hots3 test %s" % name,
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                     "-keyout", key, "-out", cert)
        return cert, key

    def leaf(self, ca, name, common_name, serial):
        """A server certificate for 127.0.0.1 and localhost with a key of its own, signed by
        `ca` (a pair from ca()): (certificate path, key path)."""
        cert, key = os.path.join(self.dir, name + ".pem"), os.path.join(self.dir, name + ".key")
        csr = os.path.join(self.dir, name + ".csr")
        self.openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-subj", "/CN=%s" % common_name, "-keyout", key, "-out", csr)
        self.openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-set_serial", str(serial),
                     "-days", "2", "-extfile", self.extensions, "-out", cert)
        return cert, key


def tls_config(cert, key):
    return '\n[http.tls]\ncertificate = "%s"\nprivate_key = "%s"\n' % (cert, key)


def handshake(port, cafile, server_hostname="127.0.0.1"):
    """A new TLS connection, verified against `cafile` for `server_hostname`: the peer's
    certificate (DER) and its decoded form."""
    context = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=server_hostname) as tls:
            return tls.getpeercert(binary_form=True), tls.getpeercert()


def common_name(decoded):
    return dict(pair for rdn in decoded["subject"] for pair in rdn)["commonName"]


def boto3_client(port, verify):
    return boto3.client("s3", endpoint_url="https://127.0.0.1:%d" % port, aws_access_key_id=s3.ACCESS_KEY,
                        aws_secret_access_key=s3.SECRET_KEY, region_name=s3.REGION, verify=verify,
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                                      signature_version="s3v4"))


def signed_get(conn, port, path="/"):
    """A signed GET on an http.client connection (which reuses its socket if still open)."""
    req = s3.SignedRequest("GET", path, port=port)
    conn.request("GET", req.target(), headers=req.headers)
    response = conn.getresponse()
    return response.status, response.read()


# The AWS CLIs a deployment meets: v1 in this interpreter (the image's pip install), and
# Debian's v2 package.
AWS_CLIS = {
    "v1": ([sys.executable, "-m", "awscli"],
           lambda: importlib.util.find_spec("awscli") is not None,
           "AWS CLI v1 is not installed for %s (no awscli module)" % sys.executable),
    "v2": (["/usr/bin/aws"],
           lambda: os.access("/usr/bin/aws", os.X_OK),
           "Debian's AWS CLI v2 (/usr/bin/aws) is not installed"),
}


class TlsClientsTest(unittest.TestCase):
    """One server with a CA-signed certificate, and the clients that trust the CA."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="hots3-tls-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
        try:
            pki = Pki(cls.tmp)
            cls.ca = pki.ca("ca")
            # A CA trusted by nobody's configuration here: it signed nothing the server presents.
            cls.other_ca = pki.ca("other-ca")
            cls.cert, cls.key = pki.leaf(cls.ca, "server", "hots3 test server", 1001)
            cls.large = os.path.join(cls.tmp, "large.bin")
            with open(cls.large, "wb") as f:
                f.write(data(LARGE_SIZE, seed=1))
            cls.large_sha256 = sha256_file(cls.large)
            cls.server = s3.hots3_server(tls_config(cls.cert, cls.key)).start()
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise
        cls.port = cls.server.port
        cls.endpoint = "https://127.0.0.1:%d" % cls.port

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.server.stop() == 0, cls.server.read_stderr()
        finally:
            cls.server.cleanup()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    # ---- the handshake ------------------------------------------------------------------------

    def test_presents_the_configured_certificate(self):
        der, decoded = handshake(self.port, self.ca[0])
        self.assertEqual(der, der_of(self.cert))
        self.assertEqual(common_name(decoded), "hots3 test server")
        # The DNS name in the certificate verifies too (the connection still goes to 127.0.0.1).
        self.assertEqual(handshake(self.port, self.ca[0], server_hostname="localhost")[0], der)
        with self.assertRaises(ssl.SSLCertVerificationError):
            handshake(self.port, self.other_ca[0])
        # A name the certificate does not carry is refused by the client's hostname check.
        with self.assertRaises(ssl.SSLCertVerificationError):
            handshake(self.port, self.ca[0], server_hostname="not-this-server.example")

    # ---- the AWS CLI --------------------------------------------------------------------------

    def cli_env(self, **extra):
        # Only what the test says: no profile, config or credentials file of the caller, and no
        # CA bundle of the caller's (AWS_CA_BUNDLE is often set machine-wide).
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update({
            "AWS_ACCESS_KEY_ID": s3.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": s3.SECRET_KEY,
            "AWS_DEFAULT_REGION": s3.REGION,
            "AWS_CONFIG_FILE": os.path.join(self.tmp, "no-config"),
            "AWS_SHARED_CREDENTIALS_FILE": os.path.join(self.tmp, "no-credentials"),
            "AWS_MAX_ATTEMPTS": "1",
            "AWS_PAGER": "",
        })
        env.update(extra)
        return env

    def aws(self, cli, args, env, flags=(), check=True):
        r = subprocess.run(cli + ["--endpoint-url", self.endpoint, *flags, *args], capture_output=True,
                           text=True, env=env, timeout=300)
        if check and r.returncode != 0:
            self.fail("aws %s exited %d:\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def cli_round_trip(self, cli, bucket, env, flags=()):
        """mb, a multipart cp up, cp down, ls, with the CA given by `flags` or `env`."""
        self.aws(cli, ["s3", "mb", "s3://" + bucket], env, flags)
        self.aws(cli, ["s3", "cp", self.large, "s3://%s/large.bin" % bucket], env, flags)
        # The ETag of a multipart upload counts its parts: proof that the CLI went multipart.
        head = self.aws(cli, ["s3api", "head-object", "--bucket", bucket, "--key", "large.bin", "--output",
                              "text", "--query", "[ContentLength, ETag]"], env, flags).stdout.split()
        self.assertEqual(head[0], str(LARGE_SIZE))
        self.assertRegex(head[1], r'^"[0-9a-f]{32}-3"$')
        down = os.path.join(self.tmp, bucket + ".down")
        self.aws(cli, ["s3", "cp", "s3://%s/large.bin" % bucket, down], env, flags)
        self.assertEqual(sha256_file(down), self.large_sha256)
        os.unlink(down)
        self.assertIn(bucket, self.aws(cli, ["s3", "ls"], env, flags).stdout.split())
        listing = self.aws(cli, ["s3", "ls", "s3://%s/" % bucket], env, flags).stdout
        self.assertRegex(listing, r"\b%d large\.bin\b" % LARGE_SIZE)

    def assert_certificate_refused(self, r):
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("SSL", r.stderr)
        self.assertIn("certificate verify failed", r.stderr.lower())

    def run_cli(self, name):
        cli, installed, why_not = AWS_CLIS[name]
        if not installed():
            self.skipTest(why_not)
        version = subprocess.run(cli + ["--version"], capture_output=True, text=True, env=self.cli_env(),
                                 timeout=60, check=True)
        print("AWS CLI:", (version.stdout + version.stderr).strip(), file=sys.stderr)
        with self.subTest("--ca-bundle"):
            self.cli_round_trip(cli, "tls-cli-%s-flag" % name, self.cli_env(), flags=["--ca-bundle", self.ca[0]])
        with self.subTest("AWS_CA_BUNDLE"):
            self.cli_round_trip(cli, "tls-cli-%s-env" % name, self.cli_env(AWS_CA_BUNDLE=self.ca[0]))
        with self.subTest("another CA, --ca-bundle"):
            self.assert_certificate_refused(
                self.aws(cli, ["s3", "ls"], self.cli_env(), flags=["--ca-bundle", self.other_ca[0]], check=False))
        with self.subTest("another CA, AWS_CA_BUNDLE"):
            self.assert_certificate_refused(
                self.aws(cli, ["s3", "ls"], self.cli_env(AWS_CA_BUNDLE=self.other_ca[0]), check=False))

    def test_aws_cli_v1(self):
        self.run_cli("v1")

    def test_aws_cli_v2(self):
        self.run_cli("v2")

    # ---- boto3 --------------------------------------------------------------------------------

    def test_boto3_with_the_ca_bundle(self):
        c = boto3_client(self.port, verify=self.ca[0])
        c.create_bucket(Bucket="tls-boto3")
        body = data(MIB + 7, seed=2)
        put = c.put_object(Bucket="tls-boto3", Key="dir/small.bin", Body=body)
        self.assertEqual(put["ETag"], '"%s"' % hashlib.md5(body).hexdigest())
        self.assertEqual(c.get_object(Bucket="tls-boto3", Key="dir/small.bin")["Body"].read(), body)
        ranged = c.get_object(Bucket="tls-boto3", Key="dir/small.bin", Range="bytes=1000-1999")
        self.assertEqual(ranged["ContentRange"], "bytes 1000-1999/%d" % len(body))
        self.assertEqual(ranged["Body"].read(), body[1000:2000])
        head = c.head_object(Bucket="tls-boto3", Key="dir/small.bin")
        self.assertEqual((head["ContentLength"], head["ETag"]), (len(body), put["ETag"]))

        c.upload_file(self.large, "tls-boto3", "dir/large.bin",
                      Config=TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB))
        self.assertRegex(c.head_object(Bucket="tls-boto3", Key="dir/large.bin")["ETag"], r'^"[0-9a-f]{32}-3"$')
        down = os.path.join(self.tmp, "boto3.down")
        c.download_file("tls-boto3", "dir/large.bin", down)
        self.assertEqual(sha256_file(down), self.large_sha256)
        os.unlink(down)

        listed = c.list_objects_v2(Bucket="tls-boto3", Prefix="dir/")
        self.assertEqual([(o["Key"], o["Size"]) for o in listed["Contents"]],
                         [("dir/large.bin", LARGE_SIZE), ("dir/small.bin", len(body))])

    def test_boto3_with_another_ca_refuses_the_server(self):
        c = boto3_client(self.port, verify=self.other_ca[0])
        with self.assertRaises(botocore.exceptions.SSLError) as e:
            c.list_buckets()
        self.assertIn("certificate verify failed", str(e.exception).lower())


class TlsReloadTest(unittest.TestCase):
    """Certificate rotation while serving: files replaced, then SIGHUP."""

    def wait_for_log(self, server, text, since):
        """Waits for `text` in the server's log after offset `since`; returns that part."""
        deadline = time.monotonic() + RELOAD_WAIT_S
        while True:
            log = server.read_stderr()[since:]
            if text in log:
                return log
            if server.proc.poll() is not None:
                self.fail("the server exited (%s) before logging %r; its log since:\n%s"
                          % (server.proc.returncode, text, log))
            if time.monotonic() > deadline:
                self.fail("the server did not log %r within %.0f s of SIGHUP; its log since:\n%s"
                          % (text, RELOAD_WAIT_S, log))
            time.sleep(0.05)

    def assert_presents(self, port, cafile, expected_der, why):
        """A new connection gets the certificate whose DER is `expected_der`."""
        der, decoded = handshake(port, cafile)
        if der != expected_der:
            self.fail("%s: the server presented %r (serial %s)" % (why, common_name(decoded), decoded["serialNumber"]))
        return decoded

    def sighup(self, server):
        since = len(server.read_stderr())
        server.signal(signal.SIGHUP)
        return self.wait_for_log(server, RELOAD_LOG_LINE, since)

    @staticmethod
    def replace(path, content):
        """Writes `content` next to `path` and renames it over `path`: a reader of `path` sees
        the old file or the new one, never half of either."""
        tmp = path + ".new"
        with open(tmp, "wb") as f:
            f.write(content)
        os.replace(tmp, path)

    @staticmethod
    def read(path):
        with open(path, "rb") as f:
            return f.read()

    def test_sighup_reloads_the_certificate(self):
        with tempfile.TemporaryDirectory(prefix="hots3-tls-reload-", dir=os.environ.get("HOTS3_TEST_TMPDIR")) as d:
            pki = Pki(d)
            ca = pki.ca("ca")
            first = pki.leaf(ca, "first", "hots3 first certificate", 2001)
            second = pki.leaf(ca, "second", "hots3 second certificate", 2002)
            # The configured paths: what the server reads at start and, on SIGHUP, again.
            cert, key = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
            shutil.copyfile(first[0], cert)
            shutil.copyfile(first[1], key)
            first_der, second_der = der_of(first[0]), der_of(second[0])
            self.assertNotEqual(first_der, second_der)

            server = s3.hots3_server(tls_config(cert, key)).start()
            kept = None
            try:
                port = server.port
                self.assert_presents(port, ca[0], first_der, "before the reload")
                # A keep-alive connection opened before the rotation.
                kept = http.client.HTTPSConnection("127.0.0.1", port, timeout=10,
                                                   context=ssl.create_default_context(cafile=ca[0]))
                self.assertEqual(signed_get(kept, port)[0], 200)
                kept_sock = kept.sock
                self.assertEqual(kept_sock.getpeercert(binary_form=True), first_der)

                # A SIGHUP that changes nothing (logrotate's) loads nothing: no context per SIGHUP.
                self.assertIn("TLS certificate %s unchanged" % cert, self.sighup(server))
                self.assert_presents(port, ca[0], first_der, "after a SIGHUP with the same files")

                # Rotation: a new certificate with a new key, renamed over the configured paths.
                self.replace(key, self.read(second[1]))
                self.replace(cert, self.read(second[0]))
                self.sighup(server)
                self.assertIsNone(server.proc.poll(), "SIGHUP stopped the server")
                decoded = self.assert_presents(port, ca[0], second_der, "a new connection after the reload")
                self.assertEqual(common_name(decoded), "hots3 second certificate")
                # The connection from before carries on with the certificate it was opened with.
                status, body = signed_get(kept, port)
                self.assertEqual(status, 200, body)
                self.assertIs(kept.sock, kept_sock, "the kept-alive connection was not reused")
                self.assertEqual(kept.sock.getpeercert(binary_form=True), first_der)
                # And new connections serve requests, not just handshakes.
                fresh = http.client.HTTPSConnection("127.0.0.1", port, timeout=10,
                                                    context=ssl.create_default_context(cafile=ca[0]))
                try:
                    self.assertEqual(signed_get(fresh, port)[0], 200)
                finally:
                    fresh.close()

                # A certificate file that is not PEM (a botched copy): the last good one stays.
                self.replace(cert, b"this is not a certificate\n")
                log = self.sighup(server)
                self.assertIsNone(server.proc.poll(), "a bad certificate file on SIGHUP stopped the server")
                self.assert_presents(port, ca[0], second_der,
                                     "after a failed reload, new connections must get the last good certificate")
                # Log lines are "<time> <level> [<thread>] <message>": an error naming the file.
                naming = [line for line in log.splitlines() if cert in line]
                self.assertTrue(naming, "no log line names %s after the failed reload; the log since:\n%s"
                                % (cert, log))
                self.assertTrue(any(line.split()[1] == "error" for line in naming),
                                "the lines naming %s are not errors:\n%s" % (cert, "\n".join(naming)))
                status, body = signed_get(kept, port)
                self.assertEqual(status, 200, body)
            finally:
                if kept is not None:
                    kept.close()
                try:
                    stopped = server.stop()
                    log = server.read_stderr()
                finally:
                    server.cleanup()
            self.assertEqual(stopped, 0, log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
