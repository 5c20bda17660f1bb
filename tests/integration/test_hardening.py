#!/usr/bin/env python3
"""Hardening checks that need their own programs: a stack overflow still
writes the exit record (alternate signal stacks).

Usage: test_hardening.py SHIM FAKE_DIR OVERFLOW
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

SHIM, FAKE_DIR, OVERFLOW = sys.argv[1:4]
del sys.argv[1:4]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")


def shim_env(add):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
