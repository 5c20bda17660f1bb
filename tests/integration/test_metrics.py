#!/usr/bin/env python3
"""The Prometheus file (CUMEMCAP_METRICS) as a cluster ingests it: labels
that tell processes apart across pods and nodes (the Downward API
variables, CUMEMCAP_LABELS, nvidia-smi's index and DCGM's UUID label),
`promtool check metrics` on a real file, a taken name, the files of
SIGKILLed writers swept by the next writer (and nothing else), and bad
CUMEMCAP_LABELS values refused before main. Every process runs a
`python3` program on the fake driver and its fake NVML.

Usage: test_metrics.py SHIM FAKE_DIR
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

from harness import end_all, wait_for_series

SHIM, FAKE_DIR = sys.argv[1:3]
del sys.argv[1:3]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
REQUIRE = os.environ.get("CUMEMCAP_TEST_REQUIRE_PROGRAMS") == "1"
MiB = 1 << 20
CONFIG_EXIT = 125
UUID = "GPU-fa4ec0da-0000-4000-8000-00000000000%d"
LABEL_VARS = ("NODE_NAME", "POD_NAME", "POD_NAMESPACE", "CONTAINER_NAME")
SUFFIX = ".cumemcap-lock"

# Allocate 64 MiB on the GPU given, print "ready", then hold until stdin closes.
PROGRAM = r'''
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
ctx, p = ctypes.c_void_p(), ctypes.c_uint64()
assert cu.cuInit(0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), int(sys.argv[1])) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(64 << 20)) == 0
print("ready", flush=True)
sys.stdin.read()
'''

SERIES = re.compile(r'^(cumemcap_[a-z_]+)\{(.*)\} (\d+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')


def series(text):
    """[(family, {label: value}, value)] of a metrics file's samples."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = SERIES.match(line)
        assert m, line
        labels, pos = {}, 0
        for lm in LABEL.finditer(m.group(2)):
            assert lm.start() == pos, m.group(2)
            labels[lm.group(1)] = lm.group(2)
            pos = lm.end()
        assert pos == len(m.group(2)), m.group(2)
        out.append((m.group(1), labels, int(m.group(3))))
    return out


class Metrics(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "textfile")
        os.mkdir(self.dir, 0o700)
        self.script = os.path.join(self.tmp.name, "train.py")
        with open(self.script, "w") as f:
            f.write(PROGRAM)
        self.procs = []

    def tearDown(self):
        end_all(self.procs)
        self.tmp.cleanup()

    def env(self, add):
        env = {k: v for k, v in os.environ.items()
               if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))
               and k not in LABEL_VARS}
        env.update({"LD_LIBRARY_PATH": FAKE_DIR, "FAKECUDA_DEVICES": "4GiB,2GiB",
                    "LD_PRELOAD": (EXTRA + ":" if EXTRA else "") + SHIM,
                    "CUMEMCAP_LOG": "off", "CUMEMCAP_LOG_INTERVAL": "0.1", "CUMEMCAP_LIMIT": "1GiB",
                    "CUMEMCAP_METRICS": os.path.join(self.dir, "cumemcap-%p.prom"),
                    "ASAN_OPTIONS": "detect_leaks=0"})
        env.update(add)
        return env

    def start(self, add=None, gpu=0):
        """A writer, once its metrics file has its first series."""
        p = subprocess.Popen([sys.executable, self.script, str(gpu)], env=self.env(add or {}),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), b"ready\n", p.stderr.read1(4096) if p.poll() else "")
        p.before = set(os.listdir(self.dir))
        return p

    def file_of(self, p, name=None):
        """The text of p's metrics file (its name: cumemcap-PID.prom unless given), once it holds series."""
        return wait_for_series(os.path.join(self.dir, name or "cumemcap-%d.prom" % p.pid))

    def stop(self, p):
        p.stdin.close()
        self.assertEqual(p.wait(timeout=30), 0)
        err = p.stderr.read()
        self.assertEqual(err, b"")

    # ---- labels ----

    def test_labels_name_the_process_across_a_cluster(self):
        long_pod = "p" * 300
        p = self.start({"NODE_NAME": "gpu-node-7", "POD_NAME": long_pod, "POD_NAMESPACE": "",
                        "CONTAINER_NAME": "trainer",
                        "CUMEMCAP_LABELS": 'team=vision,job_id=a"b\\c,cluster=é'}, gpu=0)
        text = self.file_of(p)
        rows = series(text)
        self.assertTrue(rows)
        for fam, labels, _ in rows:
            self.assertEqual(labels, {
                "pid": str(p.pid), "program": "train.py", "host": socket.gethostname(),
                "node": "gpu-node-7",
                "pod": "p" * 253,                  # cut where no Kubernetes name reaches
                "container": "trainer",            # namespace: set but empty, so left out
                "team": "vision", "job_id": 'a\\"b\\\\c', "cluster": "é",
                "gpu": "0", "cuda_device": "0", "uuid": UUID % 0, "UUID": UUID % 0}, fam)
        self.stop(p)

    def test_index_is_nvidia_smis_not_the_cuda_ordinal(self):
        # CUDA_VISIBLE_DEVICES=1: CUDA's ordinal 0 is NVML's (nvidia-smi's) GPU 1.
        p = self.start({"CUDA_VISIBLE_DEVICES": "1"}, gpu=0)
        for fam, labels, _ in series(self.file_of(p)):
            self.assertEqual((labels["gpu"], labels["cuda_device"], labels["UUID"], labels["uuid"]),
                             ("1", "0", UUID % 1, UUID % 1), fam)
        self.stop(p)
        # and in the log: per GPU, its ordinal, UUID and index
        log = os.path.join(self.tmp.name, "log.jsonl")
        p = self.start({"CUDA_VISIBLE_DEVICES": "1", "CUMEMCAP_LOG": log}, gpu=0)
        self.stop(p)
        with open(log) as f:
            recs = [json.loads(line) for line in f]
        self.assertEqual(recs[0]["gpus"][0]["gpu"], 0)
        gpus = [g for r in recs for g in ([r] if "gpu" in r else r.get("gpus", []))]
        self.assertTrue(gpus)
        for g in gpus:
            self.assertEqual((g["gpu"], g["uuid"], g["index"]), (0, UUID % 1, 1), g)

    def test_same_program_in_two_pods_gives_distinct_series(self):
        # Two pods' processes differ in nothing but their pod (their pid is
        # 1 in both, so it is left out here): one series each, never one
        # for both, and the second takes a name of its own (a file name
        # without %p, as two pods' pid 1 would make).
        add = {"CUMEMCAP_METRICS": os.path.join(self.dir, "cumemcap.prom"), "NODE_NAME": "n1",
               "POD_NAMESPACE": "ml"}
        a = self.start(dict(add, POD_NAME="train-a"))
        b = self.start(dict(add, POD_NAME="train-b"))
        ta, tb = self.file_of(a, "cumemcap.prom"), self.file_of(b, "cumemcap.1.prom")
        ids = {}
        for who, text in (("a", ta), ("b", tb)):
            for fam, labels, _ in series(text):
                key = (fam, tuple(sorted((k, v) for k, v in labels.items() if k != "pid")))
                self.assertNotIn(key, ids, "the same series from a and b")
                ids[key] = who
        self.assertEqual(sorted(set(ids.values())), ["a", "b"])
        self.stop(a)
        self.stop(b)
        self.assertEqual(sorted(os.listdir(self.dir)), [])

    def test_promtool_accepts_the_file(self):
        promtool = shutil.which("promtool")
        if not promtool:
            msg = "promtool: not installed here; .ci/run installs it"
            if REQUIRE:
                self.fail(msg)
            self.skipTest(msg)
        p = self.start({"POD_NAME": "train-0", "CUMEMCAP_LABELS": 'team=a"b\\c'})
        text = self.file_of(p)
        self.stop(p)
        check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        self.assertEqual((check.returncode, check.stdout, check.stderr), (0, "", ""), text)
        # and promtool reads the label values: one escaped wrongly is an error
        bad = text.replace('a\\"b\\\\c', 'a\\qb')
        self.assertNotEqual(bad, text)
        self.assertNotEqual(subprocess.run([promtool, "check", "metrics"], input=bad,
                                           capture_output=True, text=True).returncode, 0)

    # ---- sweeping ----

    def test_a_sigkilled_writers_file_is_swept_by_the_next(self):
        dead = self.start()
        self.file_of(dead)
        mine = ["cumemcap-%d.prom" % dead.pid, ".cumemcap-%d.prom%s" % (dead.pid, SUFFIX)]
        dead.kill()                                  # SIGKILL: what the OOM killer sends
        dead.wait()
        left = set(os.listdir(self.dir))
        self.assertTrue(set(mine) <= left, left)     # nobody could remove them
        # Files that are not a dead writer's, or not cumemcap's, stay.
        alive = self.start()
        self.file_of(alive)
        others = {
            "node.prom": "someone else's",                            # no companion
            ".foreign.prom" + SUFFIX: "not our companion",            # not our content
            "foreign.prom": "kept",
            "linked.prom": "kept: its companion is a link",
            "target": "cumemcap metrics writer lock 1\n",
        }
        for name, text in others.items():
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(text)
        os.symlink("target", os.path.join(self.dir, ".linked.prom" + SUFFIX))
        # A companion of a dead writer whose NAME is a directory: the
        # companion goes, the directory stays.
        os.mkdir(os.path.join(self.dir, "adir.prom"))
        with open(os.path.join(self.dir, ".adir.prom" + SUFFIX), "w") as f:
            f.write("cumemcap metrics writer lock 1\n")
        nxt = self.start()
        self.file_of(nxt)
        left = set(os.listdir(self.dir))
        self.assertFalse(set(mine) & left, left)     # swept
        # the live writer's are not
        self.assertIn("cumemcap-%d.prom" % alive.pid, left)
        self.assertIn(".cumemcap-%d.prom%s" % (alive.pid, SUFFIX), left)
        for name, text in others.items():
            with open(os.path.join(self.dir, name)) as f:
                self.assertEqual(f.read(), text)
        self.assertTrue(os.path.islink(os.path.join(self.dir, ".linked.prom" + SUFFIX)))
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "adir.prom")))
        self.assertNotIn(".adir.prom" + SUFFIX, left)
        self.stop(alive)
        self.stop(nxt)
        self.assertEqual(set(os.listdir(self.dir)),
                         set(others) | {".linked.prom" + SUFFIX, "adir.prom"})

    def test_the_end_removes_the_file_and_its_companion(self):
        for how in ("exit", signal.SIGTERM):
            with self.subTest(how=how):
                p = self.start({"CUMEMCAP_LOG": os.path.join(self.tmp.name, "%p.jsonl")})
                self.file_of(p)
                self.assertEqual(len(os.listdir(self.dir)), 2, os.listdir(self.dir))
                if how == "exit":
                    self.stop(p)
                else:
                    p.send_signal(how)
                    self.assertEqual(p.wait(timeout=30), -how)
                self.assertEqual(os.listdir(self.dir), [])

    # ---- CUMEMCAP_LABELS ----

    def test_bad_labels_refused_before_main(self):
        for value in ("team", "=x", "1team=a", "__name=x", "pod=x", "UUID=x", "gpu=1", "a=1,a=2",
                      "a=", "a=b,", "a-b=1", "a=x\ty", ",".join("l%d=x" % i for i in range(33)),
                      "a=" + "x" * 1100):
            with self.subTest(value=value[:40]):
                p = subprocess.run(["/bin/echo", "main ran"], env=self.env({"CUMEMCAP_LABELS": value}),
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, CONFIG_EXIT, p.stderr)
                self.assertEqual(p.stdout, "")
                lines = p.stderr.splitlines()
                self.assertEqual(len(lines), 1, p.stderr)
                self.assertIn('CUMEMCAP_LABELS="', lines[0])
                self.assertIn("accepted: NAME=VALUE[,NAME=VALUE...]", lines[0])
        for value in ("", "team=vision", "a=1,b=2,c_3=x y", "l=é"):
            with self.subTest(value=value):
                p = subprocess.run(["/bin/echo", "main ran"], env=self.env({"CUMEMCAP_LABELS": value}),
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "main ran\n", ""))

    def test_labels_from_the_configuration_file(self):
        conf = os.path.join(self.tmp.name, "cumemcap.conf")
        with open(conf, "w") as f:
            f.write("labels = team=vision\n[program train.py]\nlabels = team=nlp,tier=batch\n")
        p = self.start({"CUMEMCAP_CONFIG": conf})
        for fam, labels, _ in series(self.file_of(p)):
            self.assertEqual((labels["team"], labels["tier"]), ("nlp", "batch"))
        self.stop(p)
        p = subprocess.run(["/bin/echo"], env=self.env({"CUMEMCAP_CONFIG": conf, "CUMEMCAP_LABELS": "x=y"}),
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(conf, "w") as f:
            f.write("\n\nlabels = host=me\n")
        p = subprocess.run(["/bin/echo"], env=self.env({"CUMEMCAP_CONFIG": conf}), capture_output=True, text=True)
        self.assertEqual(p.returncode, CONFIG_EXIT)
        self.assertRegex(p.stderr, r'^cumemcap: .*cumemcap\.conf:3: labels = "host=me": "host" is a label '
                                   r'cumemcap sets itself; accepted: ')


if __name__ == "__main__":
    unittest.main(verbosity=2)
