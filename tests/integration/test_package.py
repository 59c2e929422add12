"""The Debian package as an operator installs it: cpack builds it from the build directory
(HOTS3_BUILD_DIR), dpkg installs it on this machine, the installed binary runs with the shipped
configuration, systemd-analyze accepts the unit, and dpkg removes and purges it again. It needs
root and a machine without a hots3 package of its own (CI is both); it never skips."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402


def run(*args, check=True, **kwargs):
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)
    if check and done.returncode != 0:
        raise AssertionError("%s: exit %d\n%s%s" % (" ".join(args), done.returncode, done.stdout, done.stderr))
    return done


class PackageTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hots3-package-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))

    def tearDown(self):
        if run("dpkg-query", "-W", "-f=${Status}", "hots3", check=False).stdout.startswith("install ok"):
            run("dpkg", "--purge", "hots3", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_the_package_installs_runs_and_goes_away(self):
        self.assertEqual(os.geteuid(), 0, "installing a package needs root (CI runs as root)")
        installed = run("dpkg-query", "-W", "-f=${Status}", "hots3", check=False).stdout
        self.assertFalse(installed.startswith("install ok"),
                         "this machine has a hots3 package of its own: this test would replace it")
        build = os.environ["HOTS3_BUILD_DIR"]
        run("cpack", "-G", "DEB", "-B", self.dir, "--config", os.path.join(build, "CPackConfig.cmake"))
        debs = [f for f in os.listdir(self.dir) if f.endswith(".deb")]
        self.assertEqual(len(debs), 1, os.listdir(self.dir))
        deb = os.path.join(self.dir, debs[0])

        contents = run("dpkg-deb", "-c", deb).stdout
        for path in ("./usr/bin/hots3", "./etc/hots3/hots3.toml", "./etc/logrotate.d/hots3",
                     "./usr/lib/systemd/system/hots3.service",
                     "./usr/share/hots3/prometheus/hots3-rules.yml",
                     "./usr/share/hots3/grafana/hots3-dashboard.json"):
            self.assertIn(path + "\n", contents + "\n")
        self.assertEqual(run("dpkg-deb", "-f", deb, "Package").stdout.strip(), "hots3")
        control = os.path.join(self.dir, "control")
        run("dpkg-deb", "-e", deb, control)
        with open(os.path.join(control, "conffiles")) as f:
            self.assertEqual(f.read().split(), ["/etc/hots3/hots3.toml", "/etc/logrotate.d/hots3"])

        run("dpkg", "-i", deb)
        version = run("/usr/bin/hots3", "--version").stdout
        self.assertIn(run("dpkg-deb", "-f", deb, "Version").stdout.strip(), version)
        self.assertEqual(run("getent", "passwd", "hots3").stdout.split(":")[5], "/var/lib/hots3")
        verify = run("systemd-analyze", "verify", "/usr/lib/systemd/system/hots3.service", check=False)
        self.assertEqual(verify.returncode, 0, verify.stdout + verify.stderr)
        self.assertNotIn("hots3.service:", verify.stdout + verify.stderr)
        rotate = run("logrotate", "--debug", "/etc/logrotate.d/hots3", check=False)
        self.assertEqual(rotate.returncode, 0, rotate.stdout + rotate.stderr)
        self.assertNotIn("error", (rotate.stdout + rotate.stderr).lower())

        # The installed binary serves with the shipped configuration (its port and data moved
        # to the test's), and stops cleanly.
        server = harness.ServerProcess("/usr/bin/hots3", ["serve", "--config", "/etc/hots3/hots3.toml",
                                                          "--data", os.path.join(self.dir, "data"),
                                                          "--device-size", "64MiB"], workdir=self.dir)
        try:
            server.start()
            with open(os.path.join(self.dir, "data", "credentials")) as f:
                self.assertIn("access_key", f.read())  # the development key pair of a fresh start
        finally:
            self.assertEqual(server.stop(), 0)
            server.cleanup()

        # A changed conffile survives removal; purge takes it.
        with open("/etc/hots3/hots3.toml", "a") as f:
            f.write("# changed by the operator\n")
        run("dpkg", "--remove", "hots3")
        self.assertFalse(os.path.exists("/usr/bin/hots3"))
        with open("/etc/hots3/hots3.toml") as f:
            self.assertIn("changed by the operator", f.read())
        run("dpkg", "--purge", "hots3")
        self.assertFalse(os.path.exists("/etc/hots3/hots3.toml"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
