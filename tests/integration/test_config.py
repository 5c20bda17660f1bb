#!/usr/bin/env python3
"""Configuration files end to end: a real `python3 train.py` (ctypes on
libcuda.so.1, as frameworks load the driver) runs under the shim with a
configuration file on two fake GPUs, and must get the rules the file gives
it; bad files stop it before main; the launcher checks and prints rules.

Usage: test_config.py SHIM FAKE_DIR LAUNCHER CONF_DIR
"""
import os
import subprocess
import sys
import tempfile
import unittest

SHIM, FAKE_DIR, LAUNCHER, CONF_DIR = sys.argv[1:5]
del sys.argv[1:5]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
GiB = 1 << 30
UUID1 = "GPU-fa4ec0da-0000-4000-8000-000000000001"

PROBE = r'''
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
n = ctypes.c_int()
assert cu.cuDeviceGetCount(ctypes.byref(n)) == 0
for i in range(n.value):
    t = ctypes.c_size_t()
    assert cu.cuDeviceTotalMem_v2(ctypes.byref(t), i) == 0
    print("gpu", i, t.value)
if len(sys.argv) > 1:          # try to take that many bytes on GPU 0
    ctx = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    p = ctypes.c_uint64()
    print("alloc", cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(int(sys.argv[1]))))
'''


class Config(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        for name in ("train.py", "other.py"):
            with open(os.path.join(self.dir.name, name), "w") as f:
                f.write(PROBE)

    def tearDown(self):
        self.dir.cleanup()

    def write_conf(self, text):
        path = os.path.join(self.dir.name, "cumemcap.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def env(self, add):
        env = {k: v for k, v in os.environ.items() if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
        env.update({"LD_LIBRARY_PATH": FAKE_DIR, "FAKECUDA_DEVICES": "16GiB,8GiB"})
        env.update(add)
        return env

    def run_probe(self, script, conf, env_add=None, args=()):
        env = self.env(dict(env_add or {}, CUMEMCAP_CONFIG=conf))
        env["LD_PRELOAD"] = (EXTRA + ":" if EXTRA else "") + SHIM
        return subprocess.run([sys.executable, os.path.join(self.dir.name, script), *args],
                              env=env, capture_output=True, text=True, timeout=60)

    def totals(self, p):
        self.assertEqual(p.returncode, 0, p.stderr)
        return [int(line.split()[2]) for line in p.stdout.splitlines() if line.startswith("gpu")]

    RULES = ("limit = 4GiB\n"
             "[device %s]\nlimit = 25%%\n"
             "[program train*.py]\nlimit = 6GiB\n" % UUID1)

    def test_global_and_device_section(self):
        conf = self.write_conf(self.RULES)
        self.assertEqual(self.totals(self.run_probe("other.py", conf)), [4 * GiB, 2 * GiB])

    def test_program_section_for_the_script(self):
        conf = self.write_conf(self.RULES)
        self.assertEqual(self.totals(self.run_probe("train.py", conf)), [6 * GiB, 6 * GiB])

    def test_the_file_limit_is_enforced(self):
        conf = self.write_conf(self.RULES)
        p = self.run_probe("train.py", conf, args=[str(6 * GiB + 1)])
        self.assertIn("alloc 2\n", p.stdout)  # CUDA_ERROR_OUT_OF_MEMORY
        p = self.run_probe("train.py", conf, args=[str(6 * GiB)])
        self.assertIn("alloc 0\n", p.stdout)

    def test_environment_beats_the_file(self):
        conf = self.write_conf(self.RULES)
        p = self.run_probe("train.py", conf, {"CUMEMCAP_LIMIT": "1GiB"})
        self.assertEqual(self.totals(p), [1 * GiB, 1 * GiB])
        p = self.run_probe("other.py", conf, {"CUMEMCAP_DEVICE_LIMITS": "1=3GiB"})
        self.assertEqual(self.totals(p), [4 * GiB, 3 * GiB])

    def test_bad_file_stops_before_main(self):
        conf = self.write_conf("limit = 4GiB\n\nlimt = 2GiB\n")
        p = self.run_probe("train.py", conf)
        self.assertEqual(p.returncode, 125)
        self.assertEqual(p.stdout, "")
        self.assertEqual(p.stderr, 'cumemcap: %s:3: unknown key "limt" (did you mean "limit"?)\n' % conf)

    def test_missing_file_named_by_variable(self):
        p = self.run_probe("train.py", "/nonexistent/cumemcap.conf")
        self.assertEqual(p.returncode, 125)
        self.assertEqual(p.stdout, "")
        self.assertIn('CUMEMCAP_CONFIG="/nonexistent/cumemcap.conf"', p.stderr)

    def test_fifo_or_directory_refused_without_hanging(self):
        fifo = os.path.join(self.dir.name, "rules.fifo")
        os.mkfifo(fifo)
        for path in (fifo, self.dir.name):
            with self.subTest(path=path):
                p = self.run_probe("train.py", path)     # timeout=60: a hang fails
                self.assertEqual((p.returncode, p.stdout), (125, ""))
                self.assertEqual(p.stderr, 'cumemcap: CUMEMCAP_CONFIG="%s": %s: not a regular file\n'
                                 % (path, path))
                c = subprocess.run([LAUNCHER, "--check-config", path], env=self.env({}),
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(c.returncode, 1)
                self.assertEqual(c.stderr, "cumemcap: %s: not a regular file\n" % path)

    def test_long_path_refused_not_cut(self):
        # The first 1023 bytes of the path name a file with another limit.
        d = self.dir.name
        while len(d) < 1023 - 250:
            d = os.path.join(d, "d" * 200)
            os.mkdir(d)
        cut = os.path.join(d, "x" * (1023 - len(d) - 1))
        self.assertEqual(len(cut), 1023)
        with open(cut, "w") as f:
            f.write("limit = 7GiB\n")
        p = self.run_probe("train.py", cut + ".real.conf", args=[str(2 * GiB)])
        self.assertEqual((p.returncode, p.stdout), (125, ""), p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn("CUMEMCAP_CONFIG=", p.stderr)
        self.assertIn("longer than 1023 bytes", p.stderr)

    def test_selector_for_an_absent_gpu_reported_once(self):
        conf = self.write_conf("limit = 4GiB\n[device 7]\nlimit = 1GiB\n")
        p = self.run_probe("other.py", conf)
        self.assertEqual(self.totals(p), [4 * GiB, 4 * GiB])
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn("%s:2: \"7\" matches none of the 2 GPU(s)" % conf, p.stderr)  # the [device 7] header

    def test_a_hash_in_a_value_is_refused_not_taken_for_a_path(self):
        conf = self.write_conf("log = off#x\n")
        p = self.run_probe("train.py", conf)
        self.assertEqual((p.returncode, p.stdout), (125, ""))
        self.assertEqual(p.stderr, "cumemcap: %s:1: log = \"off#x\": a value cannot contain '#'; accepted: a value "
                         "without one (for a comment, put a blank before the '#')\n" % conf)
        # A comment after a blank is one.
        conf = self.write_conf("log = off # x\n")
        self.assertEqual(self.run_probe("train.py", conf).returncode, 0)
        p = self.run_probe("train.py", "", {"CUMEMCAP_LOG": "off#x"})
        self.assertEqual((p.returncode, p.stdout), (125, ""))
        self.assertEqual(p.stderr, "cumemcap: CUMEMCAP_LOG=\"off#x\": a value cannot contain '#'; "
                         "accepted: a value without one\n")

    def test_quotes_are_named_as_not_part_of_the_syntax(self):
        for text, line in (('limit = "2GiB"', 'limit = "2GiB"'), ("[device 0]\nlimit = '2GiB'", "limit = '2GiB'")):
            with self.subTest(text=text):
                conf = self.write_conf(text + "\n")
                p = self.run_probe("train.py", conf)
                self.assertEqual((p.returncode, p.stdout), (125, ""))
                self.assertEqual(p.stderr, "cumemcap: %s:%d: %s: quotes are not part of the syntax; "
                                 "accepted without them: limit = 2GiB\n" % (conf, text.count("\n") + 1, line))
        p = self.run_probe("train.py", "", {"CUMEMCAP_LIMIT": "'2GiB'"})
        self.assertEqual((p.returncode, p.stdout), (125, ""))
        self.assertEqual(p.stderr, "cumemcap: CUMEMCAP_LIMIT='2GiB': quotes are not part of the syntax; "
                         "accepted without them: CUMEMCAP_LIMIT=2GiB\n")

    # ---- the launcher ----

    def launch(self, args, env_add=None):
        return subprocess.run([LAUNCHER, *args], env=self.env(env_add or {}), capture_output=True,
                              text=True, timeout=60)

    def test_check_config_every_shipped_file(self):
        files = [f for f in os.listdir(CONF_DIR) if f.endswith(".conf")]
        self.assertTrue(files)
        for name in files:
            with self.subTest(file=name):
                p = self.launch(["--check-config", os.path.join(CONF_DIR, name)])
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("valid", p.stdout)

    def test_check_config_counts_both_kinds_of_section(self):
        conf = self.write_conf(self.RULES + "[program eval.py]\nlimit = 1GiB\n")
        p = self.launch(["--check-config", conf])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "%s: valid (1 [device] section, 2 [program] sections)\n" % conf)

    def test_check_config_reports_the_line(self):
        conf = self.write_conf("[device 0]\nlimit = 1GiB\n[gpu 1]\n")
        p = self.launch(["--check-config", conf])
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.strip(), 'cumemcap: %s:3: unknown section kind "gpu"; accepted: '
                         '[device SELECTOR], [program GLOB]' % conf)
        p = self.launch(["--check-config"], {"CUMEMCAP_CONFIG": conf})
        self.assertEqual(p.returncode, 1)
        # No file at all: 2, as --help says (1 is for a file that is wrong).
        p = self.launch(["--check-config", "/nonexistent.conf"])
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr, "cumemcap: /nonexistent.conf: cannot open: no such file\n")
        dangling = os.path.join(self.dir.name, "dangling.conf")
        os.symlink(os.path.join(self.dir.name, "gone"), dangling)
        p = self.launch(["--check-config", dangling])
        self.assertEqual(p.returncode, 1, "a link to nothing is there, and wrong")

    def test_print_config_says_where_values_come_from(self):
        conf = self.write_conf(self.RULES + "log = stderr\n")
        p = self.launch(["--print-config", "--", "python3", "train.py"], {"CUMEMCAP_CONFIG": conf})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("program:        train.py", p.stdout)
        self.assertIn("[program] section at line 4 applies", p.stdout)
        self.assertIn("log:            stderr     (%s:6)" % conf, p.stdout)
        self.assertIn("GPU 0:", p.stdout)
        self.assertIn("limit 6 GiB (%s:5)" % conf, p.stdout)
        p = self.launch(["--limit", "1GiB", "--print-config", "--", "python3", "other.py"],
                        {"CUMEMCAP_CONFIG": conf})
        self.assertIn("limit 1 GiB (CUMEMCAP_LIMIT)", p.stdout)
        p = self.launch(["--print-config", "--", "python3", "other.py"], {"CUMEMCAP_CONFIG": conf})
        self.assertIn("limit 4 GiB (%s:1)" % conf, p.stdout)
        self.assertIn("limit 2 GiB (%s:3)" % conf, p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
