"""The hots3 command line and process contract: flags, configuration errors, the development
key pair, the port file, and a clean exit on SIGTERM / SIGINT."""

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

HOTS3 = harness.find_binary("HOTS3_BIN", "hots3")
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run(*args, env=None):
    return subprocess.run([HOTS3, *args], capture_output=True, text=True, timeout=60, env=env)


class CommandLineTest(unittest.TestCase):
    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout.strip(), r"^hots3 \d+\.\d+\.\d+$")

    def test_help_lists_serve_and_its_flags(self):
        self.assertIn("serve", run("--help").stdout)
        text = run("serve", "--help").stdout
        for flag in ("--config", "--listen", "--data", "--device", "--device-size", "--port-file",
                     "--threads"):
            self.assertIn(flag, text)

    def test_no_subcommand_is_an_error(self):
        self.assertNotEqual(run().returncode, 0)

    def test_bad_flag_values(self):
        self.assertEqual(run("serve", "--device-size", "lots").returncode, 2)
        self.assertNotEqual(run("serve", "--threads", "-3").returncode, 0)
        self.assertEqual(run("serve", "--listen", "nowhere").returncode, 2)

    def test_config_errors_name_the_file_and_key(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.toml")
            with open(path, "w") as f:
                f.write("[http]\nlisten = \"127.0.0.1:0\"\nconections_max = 5\n")
            r = run("serve", "--config", path, "--data", d)
            self.assertEqual(r.returncode, 2)
            self.assertIn("bad.toml:3: http.conections_max: unknown key", r.stderr)
            with open(path, "w") as f:
                f.write("[http]\nidle_timeout = \"forever\"\n")
            r = run("serve", "--config", path, "--data", d)
            self.assertEqual(r.returncode, 2)
            self.assertIn("bad.toml:2: http.idle_timeout", r.stderr)


class ServeTest(unittest.TestCase):
    def test_shipped_config_starts_and_sigterm_exits_zero(self):
        with tempfile.TemporaryDirectory() as d:
            server = harness.ServerProcess(
                HOTS3, ["serve", "--config", os.path.join(SOURCE, "conf", "hots3.toml"),
                        "--data", os.path.join(d, "data")], workdir=d)
            with server:
                self.assertEqual(harness.request(server.port, "GET", "/health/ready").status, 200)
            self.assertEqual(server.returncode, 0)
            self.assertIn("stopped", server.read_stderr())

    def test_development_keys_are_printed_and_kept_across_restarts(self):
        # The second start says that it reuses the store and its credentials.
        with tempfile.TemporaryDirectory() as d:
            keys, outputs = [], []
            for _ in range(2):
                server = harness.ServerProcess(HOTS3, ["serve", "--data", os.path.join(d, "data")],
                                               workdir=d)
                with server:
                    if not keys:
                        access, secret = self.dev_keys(d)
                        r = s3.send(server.port, s3.SignedRequest("PUT", "/kept", port=server.port,
                                                                  access=access, secret=secret).wire())
                        self.assertEqual(r.status, 200, r)
                out = server.read_stdout()
                m = re.search(r"AWS_ACCESS_KEY_ID=(\S+)\n.*AWS_SECRET_ACCESS_KEY=(\S+)", out, re.S)
                self.assertIsNotNone(m, out)
                self.assertIn("aws --endpoint-url http://127.0.0.1:%d s3 ls" % server.port, out)
                keys.append(m.groups())
                outputs.append(out)
            self.assertEqual(keys[0], keys[1])
            mode = os.stat(os.path.join(d, "data", "credentials")).st_mode & 0o777
            self.assertEqual(mode, 0o600)
            self.assertIn("Development credentials (new, kept in", outputs[0])
            self.assertNotIn("Reusing", outputs[0])
            self.assertIn("Development credentials (the same as before, from", outputs[1])
            self.assertIn("Reusing the store in %s (1 bucket(s)" % os.path.join(d, "data"), outputs[1])

    @staticmethod
    def dev_keys(d):
        with open(os.path.join(d, "data", "credentials")) as f:
            text = f.read()
        return (re.search(r'access_key = "(\S+)"', text).group(1), re.search(r'secret_key = "(\S+)"', text).group(1))

    def test_a_port_taken_by_another_server_is_refused_with_the_way_out(self):
        # Another process listening with SO_REUSEPORT, as a second hots3 does: binding beside it
        # would succeed and split the connections between two servers of different data.
        with tempfile.TemporaryDirectory() as d, socket.socket() as other:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            other.bind(("127.0.0.1", 0))
            other.listen()
            port = other.getsockname()[1]
            r = run("serve", "--data", os.path.join(d, "data"), "--listen", "127.0.0.1:%d" % port)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("cannot listen on 127.0.0.1:%d: the port is in use by another program" % port,
                          r.stderr)
            self.assertIn("--listen ADDRESS:PORT", r.stderr)

    def test_environment_credentials_are_not_printed(self):
        with tempfile.TemporaryDirectory() as d:
            server = harness.ServerProcess(
                HOTS3, ["serve", "--data", os.path.join(d, "data")], workdir=d,
                env={"HOTS3_ACCESS_KEY": "ENVACCESSKEY", "HOTS3_SECRET_KEY": "env-secret-key"})
            with server:
                pass
            self.assertNotIn("env-secret-key", server.read_stdout())
            self.assertFalse(os.path.exists(os.path.join(d, "data", "credentials")))

    def test_environment_credentials_sign_requests(self):
        access, secret = "ENVACCESSKEY0000TEST", "env-secret-key-0123456789"
        with tempfile.TemporaryDirectory() as d:
            server = harness.ServerProcess(
                HOTS3, ["serve", "--data", os.path.join(d, "data")], workdir=d,
                env={"HOTS3_ACCESS_KEY": access, "HOTS3_SECRET_KEY": secret})
            with server:
                port = server.port

                def signed(method, path, **keys):
                    return s3.send(port, s3.SignedRequest(method, path, port=port, **keys).wire())

                r = signed("PUT", "/env-bucket", access=access, secret=secret)
                self.assertEqual(r.status, 200, r)
                r = signed("GET", "/", access=access, secret=secret)
                self.assertEqual(r.status, 200, r)
                self.assertIn(b"<Name>env-bucket</Name>", r.body)
                # The right key with a wrong secret, and a key nobody has.
                r = signed("GET", "/", access=access, secret=secret + "x")
                self.assertEqual(r.status, 403, r)
                self.assertIn(b"<Code>SignatureDoesNotMatch</Code>", r.body)
                r = signed("GET", "/", access="NOSUCHACCESSKEY00000", secret=secret)
                self.assertEqual(r.status, 403, r)
                self.assertIn(b"<Code>InvalidAccessKeyId</Code>", r.body)
            self.assertEqual(server.returncode, 0)

    def test_sighup_opens_the_log_files_again_as_logrotate_needs(self):
        with tempfile.TemporaryDirectory() as d:
            server_log, access_log = os.path.join(d, "server.log"), os.path.join(d, "access.log")
            config = '[log]\nfile = "%s"\naccess_log = "%s"\n' % (server_log, access_log)
            server = harness.ServerProcess(HOTS3, ["serve", "--data", os.path.join(d, "data")], config=config,
                                           workdir=d).start()
            try:
                def request(path):
                    return s3.send(server.port, s3.SignedRequest("GET", path, port=server.port).wire())

                def read(path):
                    with open(path) as f:
                        return f.read()

                def wait_for(path, text):
                    deadline = time.monotonic() + 10  # the access log is flushed every second
                    while not (os.path.exists(path) and text in read(path)):
                        self.assertLess(time.monotonic(), deadline, "%r never reached %s" % (text, path))
                        time.sleep(0.1)

                request("/before-rotation")
                wait_for(access_log, "/before-rotation")
                # logrotate's way: rename, then SIGHUP (postrotate); the server writes new files.
                os.rename(server_log, server_log + ".1")
                os.rename(access_log, access_log + ".1")
                server.signal(signal.SIGHUP)
                wait_for(server_log, "received SIGHUP")
                request("/after-rotation")
                wait_for(access_log, "/after-rotation")
                self.assertNotIn("/after-rotation", read(access_log + ".1"))
                self.assertNotIn("/before-rotation", read(access_log))
                self.assertIsNone(server.proc.poll())  # SIGHUP reloads; it does not stop
                server.signal(signal.SIGTERM)
                self.assertEqual(server.wait(20), 0)
            finally:
                server.cleanup()

    def test_sigint_exits_zero(self):
        with tempfile.TemporaryDirectory() as d:
            server = harness.ServerProcess(HOTS3, ["serve", "--data", os.path.join(d, "data")],
                                           workdir=d).start()
            try:
                server.signal(signal.SIGINT)
                self.assertEqual(server.wait(20), 0)
            finally:
                server.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
