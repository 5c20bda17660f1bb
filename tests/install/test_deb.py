#!/usr/bin/env python3
"""The Debian package built from the tree (scripts/build-deb):

  - debian/ agrees with the tree: the changelog's version is the project's,
    debian/copyright carries COPYING's license text;
  - scripts/build-deb builds it in a temporary copy (the tree gains no file)
    and its own checks pass (files, conffile, launcher paths);
  - unpacked, the launcher runs the packaged library (the baked paths moved
    under the unpacked tree), the man pages render, the completion loads,
    /etc/cumemcap.conf has no key in effect.

dpkg-buildpackage, dpkg-deb and debhelper missing: a skip, a failure under
CUMEMCAP_TEST_REQUIRE_PROGRAMS=1. Writes only in its temporary directory.

Usage: test_deb.py SOURCE_ROOT CUDA_INCLUDE FAKE_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

SRC, CUDA_INCLUDE, FAKE_DIR = (os.path.abspath(p) for p in sys.argv[1:4])
del sys.argv[1:4]
REQUIRE = os.environ.get("CUMEMCAP_TEST_REQUIRE_PROGRAMS") == "1"


def project_version():
    with open(os.path.join(SRC, "meson.build")) as f:
        return re.search(r"version:\s*'([^']+)'", f.read()).group(1)


def untracked():
    """The tree's untracked files that git does not ignore (what a package
    build in the tree would leave: debian/files, debian/cumemcap/,
    obj-*/), or None outside git. Edits of tracked files are left out: a
    developer may be editing while the suite runs."""
    r = subprocess.run(["git", "-C", SRC, "status", "--porcelain", "--untracked-files=all"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if r.returncode != 0:
        return None
    return {line[3:] for line in r.stdout.split("\n") if line.startswith("?? ")}


class Debian(unittest.TestCase):
    def test_changelog_version_is_the_project_version(self):
        with open(os.path.join(SRC, "debian", "changelog")) as f:
            first = f.readline()
        m = re.match(r"cumemcap \(([^)]+)\) ", first)
        self.assertIsNotNone(m, first)
        self.assertEqual(m.group(1).split("-")[0], project_version())

    def test_copyright_carries_copying(self):
        with open(os.path.join(SRC, "COPYING")) as f:
            copying = f.read()
        with open(os.path.join(SRC, "debian", "copyright")) as f:
            text = f.read()
        body = text.split("\nLicense: MIT\n")[-1]
        lines = [line[1:] if line != " ." else "" for line in body.rstrip("\n").split("\n")]
        self.assertIn("\n".join(lines), copying)
        self.assertIn("Permission is hereby granted", "\n".join(lines))


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = [p for p in ("dpkg-buildpackage", "dpkg-deb", "dh", "dpkg-architecture") if shutil.which(p) is None]
        if missing:
            msg = "%s: not installed here; .ci/run installs dpkg-dev and debhelper" % ", ".join(missing)
            if REQUIRE:
                raise AssertionError(msg)
            print("skip: " + msg, file=sys.stderr)
            raise unittest.SkipTest(msg)
        cls.tmp = tempfile.TemporaryDirectory(prefix="cumemcap-deb-")
        out = os.path.join(cls.tmp.name, "out")
        before = untracked()
        start = time.monotonic()
        env = dict(os.environ, TMPDIR=cls.tmp.name)
        env.pop("LD_PRELOAD", None)
        r = subprocess.run([os.path.join(SRC, "scripts", "build-deb"), "--out", out, "--cuda-include", CUDA_INCLUDE],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cls.tmp.name)
        cls.seconds = time.monotonic() - start
        cls.log = r.stdout
        cls.status = r.returncode
        cls.new_files = sorted(untracked() - before) if before is not None else []
        arch = subprocess.run(["dpkg-architecture", "-qDEB_HOST_ARCH"], stdout=subprocess.PIPE, text=True).stdout.strip()
        cls.multiarch = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], stdout=subprocess.PIPE,
                                       text=True).stdout.strip()
        cls.deb = os.path.join(out, "cumemcap_%s_%s.deb" % (project_version(), arch))
        cls.root = os.path.join(cls.tmp.name, "root")
        if r.returncode == 0:
            subprocess.run(["dpkg-deb", "-x", cls.deb, cls.root], check=True)
        print("build-deb took %.0f s" % cls.seconds, file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.assertEqual(self.status, 0, "scripts/build-deb failed:\n" + self.log[-6000:])

    def at(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def test_built_and_checked(self):
        self.assertIn("build-deb: built and checked:", self.log)
        self.assertEqual(self.new_files, [], "scripts/build-deb wrote into the source tree")

    def test_conffile(self):
        r = subprocess.run(["dpkg-deb", "-I", self.deb, "conffiles"], stdout=subprocess.PIPE, text=True)
        self.assertIn("/etc/cumemcap.conf", r.stdout.split("\n"))
        with open(self.at("/etc/cumemcap.conf")) as f:
            active = [line for line in f if line.strip() and not line.lstrip().startswith("#")]
        self.assertEqual(active, [])

    def test_slurm_plugin(self):
        """The package carries the SPANK plugin where Debian's Slurm looks
        for plugins, needing nothing but libc."""
        plugin = self.at("/usr/lib/%s/slurm-wlm/cumemcap-spank.so" % self.multiarch)
        self.assertTrue(os.path.isfile(plugin), plugin)
        r = subprocess.run(["readelf", "-d", plugin], stdout=subprocess.PIPE, text=True, check=True)
        self.assertEqual(re.findall(r"NEEDED.*\[(.*)\]", r.stdout), ["libc.so.6"])

    def test_launcher_runs_the_packaged_library(self):
        launcher = self.at("/usr/bin/cumemcap")
        with open(launcher) as f:
            baked = dict(re.findall(r'^([A-Z_]+)="\$\{CUMEMCAP_[A-Z_]+:-([^}]*)\}"$', f.read(), re.M))
        self.assertEqual(baked["LIBRARY"], "/usr/lib/%s/libcumemcap.so" % self.multiarch)
        env = dict(os.environ, CUMEMCAP_CONFIG="", CUMEMCAP_LOG="off",
                   CUMEMCAP_LIBRARY=self.at(baked["LIBRARY"]), CUMEMCAP_TOOL=self.at(baked["TOOL"]),
                   CUMEMCAP_REPORT=self.at(baked["REPORT"]), CUMEMCAP_GROUP_TOOL=self.at(baked["GROUP_TOOL"]))
        env.pop("LD_PRELOAD", None)
        r = subprocess.run(["sh", launcher, "--limit", "1GiB", "--", "sh", "-c", 'echo "$LD_PRELOAD"'],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, env["CUMEMCAP_LIBRARY"]), r.stderr)
        r = subprocess.run(["sh", launcher, "--limit", "12XB", "--", "true"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.assertEqual(r.returncode, 125, r.stderr)
        r = subprocess.run(["sh", launcher, "--check-config", self.at("/etc/cumemcap.conf")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_man_pages_and_completion(self):
        for page in ("man1/cumemcap.1.gz", "man1/cumemcap-report.1.gz", "man1/cumemcap-group.1.gz",
                     "man1/cumemcap-top.1.gz", "man5/cumemcap.conf.5.gz"):
            path = self.at("/usr/share/man/" + page)
            if shutil.which("man") is None:
                if REQUIRE:
                    self.fail("man: not installed here; .ci/run installs man-db")
                self.skipTest("man: not installed")
            r = subprocess.run(["man", "-l", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80"))
            self.assertEqual((r.returncode, r.stderr), (0, ""), page)
            self.assertIn("NAME", r.stdout)
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c", 'source "$1" && complete -p cumemcap', "bash",
                            self.at("/usr/share/bash-completion/completions/cumemcap")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.stdout.strip(), "complete -F _cumemcap cumemcap", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
