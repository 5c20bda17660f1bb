#!/usr/bin/env python3
"""Hardening checks that need their own programs: a stack overflow still
writes the exit record (alternate signal stacks); a setuid program run by
another user (AT_SECURE) takes no path and no limit from the environment.

As root, it runs in the private namespace of users.py: the probe that
another user runs lies in a directory that user can traverse (the private
/tmp), wherever the checkout is.

Usage: test_hardening.py SHIM FAKE_DIR OVERFLOW SECURE_PROBE
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

import users

SHIM, FAKE_DIR, OVERFLOW, SECURE_PROBE = sys.argv[1:5]
del sys.argv[1:5]
NOBODY = 65534
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")


def shim_env(add):
    env = {k: v for k, v in os.environ.items() if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
    env.update({"LD_PRELOAD": (EXTRA + ":" if EXTRA else "") + SHIM, "LD_LIBRARY_PATH": FAKE_DIR,
                "FAKECUDA_DEVICES": "4GiB", "CUMEMCAP_LIMIT": "1GiB",
                # The sanitizers must leave SIGSEGV to the program (and the shim).
                "ASAN_OPTIONS": "detect_leaks=0:handle_segv=0:use_sigaltstack=0",
                "TSAN_OPTIONS": "handle_segv=0:report_signal_unsafe=0"})
    env.update(add)
    return env


class StackOverflow(unittest.TestCase):
    def test_exit_record_after_stack_overflow(self):
        for where in ("main", "thread"):
            with self.subTest(where=where), tempfile.TemporaryDirectory() as d:
                log = os.path.join(d, "log.jsonl")
                p = subprocess.run([OVERFLOW, where], env=shim_env({"CUMEMCAP_LOG": log}),
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(p.stdout, "overflowing\n", p.stderr)
                self.assertEqual(p.returncode, -signal.SIGSEGV, p.stderr)
                with open(log) as f:
                    recs = [json.loads(line) for line in f]
                self.assertEqual(recs[0]["type"], "start")
                self.assertEqual(recs[-1]["type"], "exit", recs[-1])
                self.assertEqual((recs[-1]["reason"], recs[-1]["signal_name"]), ("signal", "SIGSEGV"))


class SecureExecution(unittest.TestCase):
    """What an unprivileged user could try on a setuid-root program that
    loads the shim (as from /etc/ld.so.preload): make it read and print a
    root-only file, write a file of their choosing, or change its limit."""

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to make a setuid-root program and run it as another user")
        if EXTRA:
            self.skipTest("a sanitizer runtime cannot be preloaded into a setuid program")
        if os.path.lexists("/etc/cumemcap.conf"):
            self.skipTest("this machine has an /etc/cumemcap.conf, which would apply")
        # Not under the build directory: NOBODY must reach the probe.
        self.tmp = tempfile.TemporaryDirectory(dir="/tmp")
        self.dir = self.tmp.name
        os.chmod(self.dir, 0o755)
        self.secret = os.path.join(self.dir, "secret")
        with open(self.secret, "w") as f:
            f.write("root-only-first-line\n")
        os.chmod(self.secret, 0o600)
        self.probe = os.path.join(self.dir, "probe")
        with open(SECURE_PROBE, "rb") as src, open(self.probe, "wb") as dst:
            dst.write(src.read())
        os.chown(self.probe, 0, 0)
        os.chmod(self.probe, 0o4755)
        self.chosen = os.path.join(self.dir, "chosen.jsonl")
        self.env = {k: v for k, v in os.environ.items() if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
        self.env.update({"FAKECUDA_DEVICES": "4GiB", "CUMEMCAP_CONFIG": self.secret,
                         "CUMEMCAP_LOG": self.chosen, "CUMEMCAP_METRICS": self.chosen,
                         "CUMEMCAP_LIMIT": "1GiB",
                         # an unknown variable, named only where the environment counts
                         "CUMEMCAP_LIMITS": "1GiB"})

    def tearDown(self):
        self.tmp.cleanup()

    def run_probe(self, as_user):
        kw = {"user": NOBODY, "group": NOBODY, "extra_groups": []} if as_user else {}
        return subprocess.run([self.probe], env=self.env, capture_output=True, text=True, timeout=60, **kw)

    def test_environment_ignored_under_setuid(self):
        # Run by root itself (not secure), the same environment is read:
        # the file named is a bad configuration, and its line is shown.
        p = self.run_probe(False)
        self.assertEqual(p.returncode, 125, p.stderr)
        self.assertIn("root-only-first-line", p.stderr)
        # Run by another user (secure): nothing of the environment counts.
        p = self.run_probe(True)
        self.assertEqual(p.stdout, "secure=1\nallocated=2048MiB\n", p.stderr)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertFalse(os.path.lexists(self.chosen))
        self.assertEqual(sorted(os.listdir(self.dir)), ["probe", "secret"])


if __name__ == "__main__":
    users.main()
