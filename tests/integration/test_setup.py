"""The README's commands (packaging/setup.sh run | test | bench) in the orders a user runs them.

Each command must leave its build directories configured exactly as on a fresh clone, whatever
ran before: run then test, test then run, test twice, a build directory configured by hand with
other options or another generator. The commands run here on a copy of the repository's tracked
files (what a clone holds) with H3_SETUP_STOP=configure: they configure, print what they would
build and start, and stop, so that no extra build is paid for."""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# The cache entries that decide what a build directory builds and how.
OPTIONS = ("CMAKE_BUILD_TYPE", "CMAKE_CXX_COMPILER", "CMAKE_GENERATOR", "H3_BUILD_BENCH", "H3_BUILD_TESTS",
           "H3_FUZZ", "H3_MIMALLOC", "H3_SANITIZE", "H3_WERROR")


def copy_of_repository(dest):
    """The tracked files of the repository as they are in the work tree: a clone with the
    changes not yet committed."""
    files = subprocess.run(["git", "-C", SOURCE, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], check=True,
                           capture_output=True).stdout.split(b"\0")
    for name in filter(None, files):
        rel = name.decode()
        src = os.path.join(SOURCE, rel)
        if not os.path.lexists(src):
            continue  # deleted in the work tree
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)


def cache(build_dir):
    values = {}
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_]+):[A-Z]+=(.*)$", line.rstrip("\n"))
            if m and m.group(1) in OPTIONS:
                values[m.group(1)] = m.group(2)
    return values


def listed_tests(build_dir):
    """The tests ctest would run there (integration tests are known after configuring)."""
    out = subprocess.run(["ctest", "-N"], cwd=build_dir, capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"Total Tests: (\d+)", out)
    return int(m.group(1)) if m else 0


class SetupCommands(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="hots3-setup-test-")
        # The reference: a fresh clone, `test` alone.
        cls.fresh = os.path.join(cls.tmp, "fresh")
        copy_of_repository(cls.fresh)
        cls.run_setup(cls.fresh, "test")
        cls.reference = {d: cache(os.path.join(cls.fresh, "build", d)) for d in ("release", "asan", "fuzz")}
        cls.reference_tests = listed_tests(os.path.join(cls.fresh, "build", "release"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @staticmethod
    def run_setup(root, *args, expect=0):
        env = dict(os.environ, H3_SETUP_STOP="configure")
        r = subprocess.run(["bash", os.path.join(root, "packaging", "setup.sh"), *args], cwd=root,
                           env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != expect:
            raise AssertionError("setup.sh %s exited %d (expected %d):\n%s\n%s" %
                                 (" ".join(args), r.returncode, expect, r.stdout, r.stderr))
        return r

    def clone(self, name):
        root = os.path.join(self.tmp, name)
        copy_of_repository(root)
        return root

    def assert_like_a_fresh_clone(self, root, dirs=("release", "asan", "fuzz")):
        for d in dirs:
            self.assertEqual(cache(os.path.join(root, "build", d)), self.reference[d], d)
        if "release" in dirs:
            self.assertEqual(listed_tests(os.path.join(root, "build", "release")),
                             self.reference_tests)

    def test_the_reference_has_tests_and_the_options_ci_relies_on(self):
        release, asan = self.reference["release"], self.reference["asan"]
        self.assertEqual(release["H3_BUILD_TESTS"], "ON")
        self.assertEqual(release["H3_WERROR"], "ON")
        self.assertEqual(release["CMAKE_BUILD_TYPE"], "RelWithDebInfo")
        self.assertEqual(release["H3_SANITIZE"], "")
        self.assertEqual(asan["H3_SANITIZE"], "address,undefined")
        self.assertEqual(asan["CMAKE_BUILD_TYPE"], "Debug")
        self.assertEqual(self.reference["fuzz"]["H3_FUZZ"], "ON")
        self.assertEqual(release["H3_FUZZ"], "OFF")
        self.assertGreater(self.reference_tests, 10)

    def test_run_then_test_then_test_then_run(self):
        root = self.clone("sequence")
        # Port 0 everywhere: a test never touches a fixed port (run checks the one it will use).
        r = self.run_setup(root, "run", "--listen", "127.0.0.1:0")
        self.assertEqual(cache(os.path.join(root, "build", "release")), self.reference["release"])
        # run builds the server alone, and starts it on ./data.
        self.assertRegex(r.stdout, r"would run: cmake --build \S+/build/release -j \d+ --target hots3\n")
        self.assertIn("would run: %s/build/release/src/hots3 serve --data %s/data --listen 127.0.0.1:0"
                      % (root, root), r.stdout)
        self.run_setup(root, "test")  # after run: the tests are configured, as on a fresh clone
        self.assert_like_a_fresh_clone(root)
        r = self.run_setup(root, "test")  # twice
        self.assert_like_a_fresh_clone(root)
        self.assertRegex(r.stdout, r"would run: cmake --build \S+/build/release -j \d+\n")
        # The sanitizer pass leaves the client suites to the release build.
        self.assertRegex(r.stdout, r"would run: ctest --test-dir \S+/build/asan -L \S+ -LE clients\n")
        self.run_setup(root, "run", "--listen", "127.0.0.1:0")  # after test: the same configuration, nothing to rebuild
        self.assert_like_a_fresh_clone(root)
        self.run_setup(root, "bench")
        self.assert_like_a_fresh_clone(root)

    def test_directories_configured_otherwise_are_set_right(self):
        root = self.clone("by-hand")
        release = os.path.join(root, "build", "release")
        asan = os.path.join(root, "build", "asan")
        # What an older `run` left (the tests off), and a by-hand build with Makefiles.
        subprocess.run(["cmake", "-S", root, "-B", release, "-G", "Ninja", "-DH3_BUILD_TESTS=OFF",
                        "-DH3_BUILD_BENCH=OFF", "-DH3_WERROR=OFF"], check=True,
                       capture_output=True)
        subprocess.run(["cmake", "-S", root, "-B", asan, "-G", "Unix Makefiles",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
        self.run_setup(root, "test")
        self.assert_like_a_fresh_clone(root)

    def test_a_taken_port_is_named_before_the_build_with_the_way_out(self):
        root = self.clone("port")
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            r = self.run_setup(root, "run", "--listen", "127.0.0.1:%d" % port, expect=1)
        self.assertIn("Port %d on 127.0.0.1 is already taken" % port, r.stderr)
        self.assertIn("packaging/setup.sh run --listen 127.0.0.1:%d" % (port + 1), r.stderr)
        self.assertFalse(os.path.exists(os.path.join(root, "build")), "checked before configuring")
        # The port is free again: the same command goes on.
        r = self.run_setup(root, "run", "--listen=127.0.0.1:%d" % port)
        self.assertIn("serve --data %s/data --listen=127.0.0.1:%d" % (root, port), r.stdout)

    def test_run_again_says_it_reuses_the_data(self):
        root = self.clone("again")
        r = self.run_setup(root, "run", "--listen", "127.0.0.1:0")
        self.assertNotIn("Reusing", r.stderr)
        os.makedirs(os.path.join(root, "data"))  # what the first run's server made
        r = self.run_setup(root, "run", "--listen", "127.0.0.1:0")
        self.assertIn("Reusing ./data", r.stderr)
        self.assertIn("./data/credentials", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
