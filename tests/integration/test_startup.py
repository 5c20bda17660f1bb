#!/usr/bin/env python3
"""A process nothing configures (no CUMEMCAP_ variable, no file at the
default path, not setuid) leaves most of its start to its first CUDA call
(src/entry/shim.c): its policy is built then, from what it had at start.
What the program does to its environment in between must change nothing,
as when everything was done in the constructor; a fork before the first
call must leave parent and child each their own log. A configured process
without a group builds its policy and sets the framework hints before
main, and leaves the rest (the log's snapshot, the fork handlers) to its
first CUDA call the same way.

Usage: test_startup.py SHIM FAKE_DIR EARLY_CUDA
"""
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

SHIM, FAKE_DIR, EARLY_CUDA = sys.argv[1:4]
del sys.argv[1:4]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
MiB = 1 << 20

# Steps from argv; one JSON line per allocation.
PROBE = r'''
import ctypes, json, os, sys
args = sys.argv[1:]
def use_gpu(n):
    cu = ctypes.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0
    ctx = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    p = ctypes.c_uint64()
    r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))
    print(json.dumps({"pid": os.getpid(), "alloc": r}), flush=True)
while args:
    op = args.pop(0)
    if op == "setenv":                  # setenv(3), as os.environ does it
        k, v = args.pop(0), args.pop(0)
        os.environ[k] = v
    elif op == "env":                   # what the program sees of a variable
        k = args.pop(0)
        print(json.dumps({"env": k, "value": os.environ.get(k)}), flush=True)
    elif op == "where":                 # the mapping libc's environment string of a variable is in,
        k = args.pop(0)                 # and the one before it (a library's .bss follows its file)
        getenv = ctypes.CDLL(None).getenv
        getenv.restype = ctypes.c_void_p
        at, place, before, last = getenv(k.encode()), None, None, None
        with open("/proc/self/maps") as f:
            for line in f:
                f5 = line.split(maxsplit=5)
                lo, hi = (int(x, 16) for x in f5[0].split("-"))
                name = f5[5].strip() if len(f5) > 5 else ""
                if at is not None and lo <= at < hi:
                    place, before = name, last
                last = name
        print(json.dumps({"where": k, "place": place, "before": before}), flush=True)
    elif op == "alloc":
        use_gpu(int(args.pop(0)))
    elif op == "fork":                  # the child allocates, then the parent waits for it
        n = int(args.pop(0))
        pid = os.fork()
        if pid == 0:
            use_gpu(n)
            sys.exit(0)                 # exit(3): the shim writes its exit record
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"child": pid, "status": status}), flush=True)
'''


class BareStart(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.script = os.path.join(self.dir, "startprobe.py")
        with open(self.script, "w") as f:
            f.write(PROBE)

    def tearDown(self):
        self.tmp.cleanup()

    def run_probe(self, steps, tmpdir, after_shim="", config=None):
        # No CUMEMCAP_ variable at all (the bare start), or those of config.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
        env.update(config or {})
        env.update({"LD_LIBRARY_PATH": FAKE_DIR, "FAKECUDA_DEVICES": "4GiB", "TMPDIR": tmpdir,
                    "LD_PRELOAD": (EXTRA + ":" if EXTRA else "") + SHIM + after_shim,
                    "ASAN_OPTIONS": "detect_leaks=0"})
        p = subprocess.run([sys.executable, self.script, *steps], env=env, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]

    def logs(self, tmpdir):
        return sorted(glob.glob(os.path.join(tmpdir, "cumemcap-%d" % os.geteuid(), "*.jsonl")))

    def records(self, path):
        with open(path) as f:
            return [json.loads(l) for l in f]

    def test_a_limit_set_after_start_does_not_apply(self):
        # As when the constructor built the policy: a variable the program
        # sets later is not read.
        out = self.run_probe(["setenv", "CUMEMCAP_LIMIT", "1MiB", "alloc", str(2 * MiB)], self.dir)
        self.assertEqual(out[-1]["alloc"], 0)
        [log] = self.logs(self.dir)
        start = self.records(log)[0]
        self.assertEqual(start["type"], "start")
        self.assertEqual(start["gpus"][0]["limit"], None, start)

    def test_the_log_stays_under_the_tmpdir_of_the_start(self):
        later = os.path.join(self.dir, "later")
        os.mkdir(later)
        out = self.run_probe(["setenv", "TMPDIR", later, "alloc", str(2 * MiB)], self.dir)
        self.assertEqual(out[-1]["alloc"], 0)
        self.assertEqual(self.logs(later), [])
        [log] = self.logs(self.dir)
        recs = self.records(log)
        self.assertEqual([r["type"] for r in recs][0], "start")
        self.assertEqual((recs[0]["pid"], recs[0]["program"], recs[0]["host"]),
                         (out[-1]["pid"], "startprobe.py", socket.gethostname()))

    def test_fork_before_the_first_call(self):
        # Parent and child each start at their first call: each its own
        # log, with its own pid in every record.
        out = self.run_probe(["fork", str(2 * MiB), "alloc", str(2 * MiB)], self.dir)
        child, parent = out[0]["pid"], out[-1]["pid"]
        self.assertEqual((out[0]["alloc"], out[1]["status"], out[-1]["alloc"]), (0, 0, 0))
        logs = self.logs(self.dir)
        self.assertEqual(len(logs), 2, logs)
        pids = set()
        for log in logs:
            recs = self.records(log)
            self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))
            self.assertEqual(len({r["pid"] for r in recs}), 1, recs)
            pids.add(recs[0]["pid"])
        self.assertEqual(pids, {child, parent})

    def test_cuda_before_the_constructor(self):
        # Another preloaded library's constructor calls cuInit before the
        # shim's constructor runs: the first hook found no start to run,
        # so the constructor runs it itself; the exit record is written.
        out = self.run_probe(["alloc", str(2 * MiB)], self.dir, ":" + EARLY_CUDA)
        self.assertEqual(out[-1]["alloc"], 0)
        [log] = self.logs(self.dir)
        recs = self.records(log)
        self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))


class ConfiguredStart(BareStart):
    """A limit set, no group: the policy and the hints before main, the
    rest at the first CUDA call."""

    LIMIT = {"CUMEMCAP_LIMIT": "1GiB"}

    def test_the_hints_are_there_before_any_cuda_call(self):
        out = self.run_probe(["env", "TF_FORCE_GPU_ALLOW_GROWTH", "env", "XLA_PYTHON_CLIENT_PREALLOCATE"],
                             self.dir, config=self.LIMIT)
        self.assertEqual([o["value"] for o in out], ["true", "false"])
        self.assertEqual(self.logs(self.dir), [], "no CUDA call, no log")

    def test_the_hints_are_put_not_copied(self):
        # putenv of the library's own strings: setenv would copy each into
        # the heap and record it in a tree of libc's, two pages a start that
        # never uses CUDA does not otherwise touch (docs/benchmarks.md, Start).
        out = self.run_probe(["where", "TF_FORCE_GPU_ALLOW_GROWTH", "where", "XLA_PYTHON_CLIENT_PREALLOCATE",
                              "setenv", "TF_FORCE_GPU_ALLOW_GROWTH", "false", "env", "TF_FORCE_GPU_ALLOW_GROWTH"],
                             self.dir, config=self.LIMIT)
        for o in out[:2]:
            # In the library's data or in its .bss, the anonymous mapping
            # right after the library's file.
            mine = o["place"] or (o["place"] == "" and o["before"])
            self.assertTrue(mine and os.path.samefile(mine, SHIM), o)
        self.assertEqual(out[2]["value"], "false", "the program can still set the variable")

    def test_the_log_stays_under_the_tmpdir_of_the_start(self):
        later = os.path.join(self.dir, "later")
        os.mkdir(later)
        out = self.run_probe(["setenv", "TMPDIR", later, "alloc", str(2 * MiB)], self.dir, config=self.LIMIT)
        self.assertEqual(out[-1]["alloc"], 0)
        self.assertEqual(self.logs(later), [])
        [log] = self.logs(self.dir)
        recs = self.records(log)
        self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))
        self.assertEqual(recs[0]["gpus"][0]["limit"], 1 << 30, recs[0])

    def test_a_log_path_set_is_kept_over_tmpdir(self):
        # The log's start takes the TMPDIR template only for the default
        # path: a CUMEMCAP_LOG given wins, as when the snapshot was taken
        # whole in the constructor.
        path = os.path.join(self.dir, "given.jsonl")
        out = self.run_probe(["alloc", str(2 * MiB)], self.dir, config=dict(self.LIMIT, CUMEMCAP_LOG=path))
        self.assertEqual(out[-1]["alloc"], 0)
        self.assertEqual(self.logs(self.dir), [])
        recs = self.records(path)
        self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))

    def test_fork_before_the_first_call(self):
        out = self.run_probe(["fork", str(2 * MiB), "alloc", str(2 * MiB)], self.dir, config=self.LIMIT)
        child, parent = out[0]["pid"], out[-1]["pid"]
        self.assertEqual((out[0]["alloc"], out[1]["status"], out[-1]["alloc"]), (0, 0, 0))
        logs = self.logs(self.dir)
        self.assertEqual(len(logs), 2, logs)
        self.assertEqual({self.records(l)[0]["pid"] for l in logs}, {child, parent})
        for log in logs:
            recs = self.records(log)
            self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))
            self.assertEqual(recs[0]["gpus"][0]["limit"], 1 << 30, recs[0])

    def test_a_limit_set_after_start_does_not_apply(self):
        out = self.run_probe(["setenv", "CUMEMCAP_LIMIT", "1MiB", "alloc", str(2 * MiB)], self.dir,
                             config=self.LIMIT)
        self.assertEqual(out[-1]["alloc"], 0)
        [log] = self.logs(self.dir)
        self.assertEqual(self.records(log)[0]["gpus"][0]["limit"], 1 << 30)

    def test_cuda_before_the_constructor(self):
        out = self.run_probe(["alloc", str(2 * MiB)], self.dir, ":" + EARLY_CUDA, config=self.LIMIT)
        self.assertEqual(out[-1]["alloc"], 0)
        [log] = self.logs(self.dir)
        recs = self.records(log)
        self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))


class Layout(unittest.TestCase):
    """What keeps the start cheap in the library's ELF file (src/meson.build)."""

    def readelf(self, *args):
        try:
            return subprocess.run(["readelf", "-W", *args, SHIM], capture_output=True, text=True,
                                  check=True).stdout
        except FileNotFoundError:
            self.skipTest("no readelf")

    def symbols(self):
        """name: (address, size) of the functions and objects"""
        syms = {}
        for line in self.readelf("-s").splitlines():
            f = line.split()
            if len(f) >= 8 and f[0].endswith(":") and f[3] in ("FUNC", "OBJECT"):
                syms.setdefault(f[7].split("@")[0], (int(f[1], 16), int(f[2], 0)))
        return syms

    def test_no_dt_fini(self):
        # crti's _fini does nothing and ends .text: calling it at exit
        # cost a page fault. Destructors run from .fini_array.
        dynamic = self.readelf("-d")
        self.assertIn("(FINI_ARRAY)", dynamic)
        self.assertNotIn("(FINI)", dynamic)

    def test_no_load_time_lookup_of_its_own_names(self):
        # The hook table and the figure list hold no pointer, and the
        # library binds its own functions: no relocation at load names one
        # of its own exported symbols (each was a lookup through every
        # library in the process, and the tables a page the start copied).
        own = set()
        for line in self.readelf("--dyn-syms").splitlines():
            f = line.split()
            if len(f) >= 8 and f[0].endswith(":") and f[6] != "UND":
                own.add(f[7].split("@")[0])
        self.assertIn("cuMemAlloc_v2", own)
        named = []
        for line in self.readelf("-r").splitlines():
            f = line.split()
            if len(f) >= 5 and f[2].startswith("R_X86_64_") and f[4].split("@")[0] in own:
                named.append(f[4])
        self.assertEqual(named, [])
        syms = self.symbols()
        for table in ("cumemcap_hooks", "cumemcap_hook_names", "cumemcap_figure_info"):
            self.assertIn(table, syms)
        relocated = {int(line.split()[0], 16) for line in self.readelf("-r").splitlines()
                     if line.split() and line.split()[0][:1].isdigit()}
        for name in ("cumemcap_hooks", "cumemcap_figure_info"):
            at, size = syms[name]
            self.assertFalse([r for r in relocated if at <= r < at + size], name + " is relocated")


if __name__ == "__main__":
    unittest.main(verbosity=2)
