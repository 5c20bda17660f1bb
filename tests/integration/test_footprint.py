#!/usr/bin/env python3
"""The footprint cap end to end: a `python3` program drives the
fake driver through ctypes under the shim, fills a GPU to refusal, and the
fake driver's own record of what it holds for the process (allocations,
contexts and driver-side growth: fakecuda_reserved + fakecuda_driver_held,
which are not hooked) and its NVML's per-process figure are checked against
the limit, for each source of the overhead: NVML listing the process,
NVML not seeing its pid (the GPU's used memory before and after the first
context), and no NVML (the configured estimate). Also: what cuMemGetInfo
and cuDeviceTotalMem tell, CUMEMCAP_COUNT=allocations, the overhead's
refresh by the worker and before a refusal, and that nothing the program
holds is freed when the overhead grows.

Usage: test_footprint.py SHIM FAKE_DIR
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

SHIM, FAKE_DIR = sys.argv[1:3]
del sys.argv[1:3]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
MiB = 1 << 20
GiB = 1 << 30
CONTEXT = 300 * MiB          # FAKECUDA_CTX_OVERHEAD below
NOPID_OFFSET = 4194304       # the fake NVML's pid for this process under nopid

# Steps from argv; each prints one JSON line.
PROBE = r'''
import ctypes, json, os, sys, time
cu = ctypes.CDLL("libcuda.so.1")
for f in ("fakecuda_reserved", "fakecuda_driver_held"):
    getattr(cu, f).restype = ctypes.c_uint64
def nvml_figure():
    """The fake NVML's usedGpuMemory for this process on GPU 0 (under its
    own pid or, with nopid, the host's), None when it is not listed."""
    try:
        nv = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nv.nvmlInit_v2() != 0:
        return None
    class P(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong),
                    ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]
    h = ctypes.c_void_p()
    assert nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0
    n = ctypes.c_uint(16)
    arr = (P * 16)()
    assert nv.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), arr) == 0
    mine = [p.used for p in arr[:n.value] if p.pid in (os.getpid(), os.getpid() + 4194304)
            and p.used != (1 << 64) - 1]    # NVML_VALUE_NOT_AVAILABLE
    nv.nvmlShutdown()
    return mine[0] if mine else None
def truth():
    return {"reserved": cu.fakecuda_reserved(0), "held": cu.fakecuda_driver_held(0)}
ptrs = []
args = sys.argv[1:]
while args:
    op = args.pop(0)
    if op == "init":
        assert cu.cuInit(0) == 0
    elif op == "ctx":                    # the primary context of GPU 0, current
        ctx = ctypes.c_void_p()
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0
        ctx_primary = ctx
    elif op == "create":                 # cuCtxCreate_v2 on GPU 0 (made current)
        ctx = ctypes.c_void_p()
        print(json.dumps({"op": "create", "r": cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0)}), flush=True)
    elif op == "destroy":                # destroy the current context, back to the primary
        cur = ctypes.c_void_p()
        assert cu.cuCtxGetCurrent(ctypes.byref(cur)) == 0
        print(json.dumps({"op": "destroy", "r": cu.cuCtxDestroy_v2(cur)}), flush=True)
        assert cu.cuCtxSetCurrent(ctx_primary) == 0
    elif op == "info":
        f, t, d = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_size_t()
        r1 = cu.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t))
        r2 = cu.cuDeviceTotalMem_v2(ctypes.byref(d), 0)
        print(json.dumps({"op": "info", "r": [r1, r2], "free": f.value, "total": t.value,
                          "device_total": d.value}), flush=True)
    elif op == "fill":                   # allocate CHUNK until refused
        chunk, n = int(args.pop(0)), 0
        while True:
            p = ctypes.c_uint64()
            r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(chunk))
            if r != 0:
                break
            ptrs.append(p.value)
            n += 1
        print(json.dumps(dict(truth(), op="fill", n=n, r=r, nvml=nvml_figure())), flush=True)
    elif op == "alloc":
        p = ctypes.c_uint64()
        r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(int(args.pop(0))))
        if r == 0:
            ptrs.append(p.value)
        print(json.dumps(dict(truth(), op="alloc", r=r)), flush=True)
    elif op == "grow":                   # the driver takes (or gives back) memory for us
        print(json.dumps({"op": "grow", "r": cu.fakecuda_driver_grow(0, ctypes.c_int64(int(args.pop(0))))}),
              flush=True)
    elif op == "sleep":
        time.sleep(float(args.pop(0)))
    else:
        raise SystemExit("unknown step " + op)
'''


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class Footprint(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.script = os.path.join(self.dir, "fprobe.py")
        with open(self.script, "w") as f:
            f.write(PROBE)
        # A directory with the fake driver and no NVML at all.
        self.nonvml = os.path.join(self.dir, "nonvml")
        os.mkdir(self.nonvml)
        os.symlink(os.path.join(FAKE_DIR, "libcuda.so.1"), os.path.join(self.nonvml, "libcuda.so.1"))

    def tearDown(self):
        self.tmp.cleanup()

    def run_probe(self, steps, add=None, lib_dir=FAKE_DIR):
        env = {k: v for k, v in os.environ.items() if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
        env.update({"LD_LIBRARY_PATH": lib_dir, "FAKECUDA_DEVICES": "16GiB",
                    "FAKECUDA_CTX_OVERHEAD": "300MiB", "FAKECUDA_OTHER_USED": "2GiB",
                    "CUMEMCAP_LIMIT": "1GiB", "CUMEMCAP_LOG_INTERVAL": "0.1",
                    "CUMEMCAP_LOG": os.path.join(self.dir, "%p.jsonl"),
                    "LD_PRELOAD": (EXTRA + ":" if EXTRA else "") + SHIM})
        env.update(add or {})
        p = subprocess.run([sys.executable, self.script, *steps], env=env, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual((p.returncode, p.stderr), (0, ""), steps)
        p.lines = [json.loads(l) for l in p.stdout.splitlines()]
        logs = glob.glob(os.path.join(self.dir, "*.jsonl"))
        self.assertEqual(len(logs), 1)
        p.log = records(logs[0])
        os.unlink(logs[0])
        return p

    def exit_gpu(self, p):
        ex = p.log[-1]
        self.assertEqual(ex["type"], "exit")
        return ex["gpus"][0]

    # Each source: (its name, the environment, the library directory, the
    # overhead the shim counts per context).
    SOURCES = [
        ("nvml", {}, None, CONTEXT),
        ("delta", {"FAKECUDA_NVML": "nopid"}, None, CONTEXT),
        ("delta", {"FAKECUDA_NVML": "na"}, None, CONTEXT),   # listed, but no figure
        ("estimate", {"FAKECUDA_NVML": "off"}, None, 512 * MiB),
        ("estimate", {"CUMEMCAP_OVERHEAD_ESTIMATE": "320MiB"}, "nonvml", 320 * MiB),
    ]

    def test_fill_to_refusal_stays_within_the_limit(self):
        chunk = 16 * MiB
        for source, add, lib, counted in self.SOURCES:
            for pool in ("on", "off"):
                with self.subTest(source=source, env=add, pool=pool):
                    p = self.run_probe(["init", "ctx", "info", "fill", str(chunk)],
                                       dict(add, CUMEMCAP_POOL=pool),
                                       lib_dir=self.nonvml if lib else FAKE_DIR)
                    info, fill = p.lines
                    # told: a GPU of the limit, free = the limit less the footprint
                    self.assertEqual((info["r"], info["total"], info["device_total"]), ([0, 0], GiB, GiB))
                    self.assertEqual(info["free"], GiB - counted)
                    # refused at the limit, by the shim
                    self.assertEqual(fill["r"], 2)
                    held = fill["reserved"] + fill["held"]     # the fake's own record
                    self.assertEqual(fill["held"], CONTEXT)
                    self.assertLessEqual(held, GiB)
                    # and no further from it than a chunk, when the overhead is known
                    self.assertGreater(fill["reserved"] + counted, GiB - chunk)
                    if source != "estimate" and add.get("FAKECUDA_NVML") != "na":
                        self.assertIsNotNone(fill["nvml"])
                        self.assertLessEqual(fill["nvml"], GiB)
                        self.assertEqual(fill["nvml"], held)
                    g = self.exit_gpu(p)
                    self.assertEqual(g["overhead_source"], source)
                    self.assertEqual(g["overhead"], counted)
                    self.assertLessEqual(g["peak_footprint"], GiB)
                    self.assertEqual(g["footprint"], g["reserved"] + counted)
                    learned = [r for r in p.log if r["type"] == "overhead"]
                    self.assertEqual([(r["gpu"], r["source"]) for r in learned], [(0, source)])
                    start = p.log[0]
                    self.assertEqual(start["rules"]["count"], {"value": "footprint", "source": "default"})
                    self.assertEqual(start["overhead"]["nvml"], lib is None and add.get("FAKECUDA_NVML") != "off")

    def test_count_allocations_keeps_the_old_rule(self):
        p = self.run_probe(["init", "ctx", "info", "fill", str(16 * MiB)],
                           {"CUMEMCAP_COUNT": "allocations", "CUMEMCAP_POOL": "off"})
        info, fill = p.lines
        self.assertEqual((info["total"], info["free"]), (GiB, GiB))
        self.assertEqual(fill["reserved"], GiB)
        self.assertEqual(fill["reserved"] + fill["held"], GiB + CONTEXT)   # over, as before
        # NVML's per-process figure is still the footprint, past the limit that
        # cuMemGetInfo was told: the two disagree by the overhead here.
        self.assertEqual(fill["nvml"], GiB + CONTEXT)
        g = self.exit_gpu(p)
        # the footprint is still learned and shown
        self.assertEqual((g["overhead_source"], g["overhead"], g["footprint"]), ("nvml", CONTEXT, GiB + CONTEXT))
        self.assertEqual(p.log[0]["rules"]["count"], {"value": "allocations", "source": "CUMEMCAP_COUNT"})

    def test_growth_is_refused_and_nothing_is_freed(self):
        # 512 MiB held + 300 MiB context; the driver takes 150 MiB more for
        # the process (a module, a library handle). The worker learns it at
        # the log interval; what the program holds stays.
        steps = ["init", "ctx", "alloc", str(512 * MiB), "grow", str(150 * MiB), "sleep", "0.5",
                 "info", "alloc", str(128 * MiB), "alloc", str(60 * MiB)]
        p = self.run_probe(steps, {"CUMEMCAP_POOL": "off"})
        first, grow, info, big, small = p.lines
        self.assertEqual((first["r"], grow["r"]), (0, 0))
        self.assertEqual(info["free"], GiB - 512 * MiB - 450 * MiB)
        self.assertEqual(big["r"], 2)                       # 128 MiB would pass the limit
        self.assertEqual(big["reserved"], 512 * MiB)        # nothing freed to make room
        self.assertEqual(small["r"], 0)                     # 60 MiB fits
        self.assertLessEqual(small["reserved"] + small["held"], GiB)
        ref = [r for r in p.log if r["type"] == "refusal"]
        self.assertEqual([r["footprint"] for r in ref], [512 * MiB + 450 * MiB])
        samples = [r["gpus"][0]["overhead"] for r in p.log if r["type"] == "sample"]
        self.assertIn(450 * MiB, samples)

    def test_refresh_before_refusal(self):
        # No worker refresh in between (an interval of a day): between
        # refreshes the overhead the shim knows is stale, and the refusal
        # path looks again before it refuses.
        day = {"CUMEMCAP_POOL": "off", "CUMEMCAP_LOG_INTERVAL": "86400"}
        steps = ["init", "ctx", "sleep", "0.3",
                 "grow", str(200 * MiB),      # the driver holds 500 MiB for us; the shim knows 300
                 "alloc", str(700 * MiB),     # fits by the stale figure: granted (the window)
                 "info",                      # still the stale figure
                 "alloc", str(30 * MiB),      # refused; the refusal path learns 500
                 "info",
                 "grow", str(-200 * MiB),     # the driver gives it back: 300 again
                 "alloc", str(20 * MiB)]      # a reading never lowers the overhead: refused
        p = self.run_probe(steps, day)
        _, stale, info1, refused, info2, _, low = p.lines
        self.assertEqual((stale["r"], refused["r"], low["r"]), (0, 2, 2))
        self.assertEqual(info1["free"], GiB - 700 * MiB - CONTEXT)
        self.assertEqual(info2["free"], 0)            # 1200 MiB held of 1 GiB: clamped
        ref = [r for r in p.log if r["type"] == "refusal"]
        self.assertEqual([r["footprint"] for r in ref], [1200 * MiB, 1200 * MiB])
        self.assertEqual(low["reserved"], 700 * MiB)  # nothing freed to make room
        g = self.exit_gpu(p)
        self.assertEqual((g["overhead"], g["peak_footprint"]), (500 * MiB, 1200 * MiB))

    def test_a_context_gone_starts_afresh(self):
        # The overhead learned from NVML only rises while the contexts stay;
        # when one dies it is read again from scratch.
        steps = ["init", "ctx", "create", "grow", str(200 * MiB), "sleep", "0.4", "info",
                 "destroy", "sleep", "0.4", "info"]
        p = self.run_probe(steps, {"CUMEMCAP_POOL": "off"})
        _, _, before, _, after = p.lines
        self.assertEqual(before["free"], GiB - 2 * CONTEXT - 200 * MiB)
        # the created context's own 300 MiB went with it (the fake keeps what
        # grew per GPU, not per context)
        self.assertEqual(after["free"], GiB - CONTEXT - 200 * MiB)

    def test_each_context_counts(self):
        # NVML does not see the pid: the first context's cost is learned from
        # the GPU's used memory, and a second context costs the same again.
        p = self.run_probe(["init", "ctx", "create", "info", "fill", str(16 * MiB)],
                           {"FAKECUDA_NVML": "nopid", "CUMEMCAP_POOL": "off"})
        create, info, fill = p.lines
        self.assertEqual(create["r"], 0)
        self.assertEqual(info["free"], GiB - 2 * CONTEXT)
        self.assertEqual(fill["held"], 2 * CONTEXT)
        self.assertLessEqual(fill["reserved"] + fill["held"], GiB)
        self.assertEqual(self.exit_gpu(p)["overhead"], 2 * CONTEXT)

    def test_without_nvml_the_card_bounds_the_estimate(self):
        # No NVML: the overhead is the smaller of the estimate (512 MiB a
        # context) and what the card shows used beyond the process's own
        # allocations (cuMemGetInfo). Alone on the GPU that is the true
        # context cost, so a 1 GiB limit leaves the program 1 GiB less that
        # cost; another tenant only adds to it, never past the estimate.
        chunk = 16 * MiB
        cases = [  # (context cost, other tenants, counted overhead, source)
            (0, 0, 0, "meminfo"),
            (300 * MiB, 0, 300 * MiB, "meminfo"),
            (300 * MiB, 100 * MiB, 400 * MiB, "meminfo"),
            (0, 2 * GiB, 512 * MiB, "estimate"),
        ]
        for ctx_cost, other, counted, source in cases:
            for lib, add in ((self.nonvml, {}), (FAKE_DIR, {"FAKECUDA_NVML": "off"})):
                with self.subTest(ctx=ctx_cost, other=other, lib=lib, add=add):
                    env = dict(add, CUMEMCAP_POOL="off", FAKECUDA_CTX_OVERHEAD=str(ctx_cost),
                               FAKECUDA_OTHER_USED=str(other))
                    p = self.run_probe(["init", "ctx", "info", "fill", str(chunk), "sleep", "0.25"], env,
                                       lib_dir=lib)
                    info, fill = p.lines
                    self.assertEqual(info["free"], GiB - counted)
                    self.assertEqual((fill["r"], fill["held"]), (2, ctx_cost))
                    self.assertEqual(fill["reserved"], (GiB - counted) // chunk * chunk)
                    self.assertLessEqual(fill["reserved"] + fill["held"], GiB)
                    g = self.exit_gpu(p)
                    self.assertEqual((g["overhead_source"], g["overhead"]), (source, counted))
                    samples = [r["gpus"][0]["overhead_source"] for r in p.log if r["type"] == "sample"]
                    self.assertEqual(set(samples), {source})
                    # the first context's record names the rule, and the estimate
                    learned = [(r["source"], r["per_context"]) for r in p.log if r["type"] == "overhead"]
                    self.assertEqual(learned, [("estimate", 512 * MiB)])

    def test_without_nvml_the_card_is_read_at_every_sample(self):
        # The driver takes 200 MiB more for the process after its context
        # (a module): the next sample's reading of the card sees it. And
        # with NVML the rule is NVML's, as before.
        steps = ["init", "ctx", "info", "grow", str(200 * MiB), "sleep", "0.5", "info"]
        p = self.run_probe(steps, {"CUMEMCAP_POOL": "off", "FAKECUDA_OTHER_USED": "0"}, lib_dir=self.nonvml)
        before, _, after = p.lines
        self.assertEqual(before["free"], GiB - CONTEXT)
        self.assertEqual(after["free"], GiB - CONTEXT - 200 * MiB)
        self.assertEqual(self.exit_gpu(p)["overhead_source"], "meminfo")
        p = self.run_probe(steps, {"CUMEMCAP_POOL": "off", "FAKECUDA_OTHER_USED": "0"})
        before, _, after = p.lines
        self.assertEqual((before["free"], after["free"]), (GiB - CONTEXT, GiB - CONTEXT - 200 * MiB))
        self.assertEqual(self.exit_gpu(p)["overhead_source"], "nvml")

    def test_bad_values_stop_the_program(self):
        for var, value in (("CUMEMCAP_COUNT", "everything"), ("CUMEMCAP_OVERHEAD_ESTIMATE", "10%"),
                           ("CUMEMCAP_OVERHEAD_ESTIMATE", "-1")):
            with self.subTest(var=var, value=value):
                env = {k: v for k, v in os.environ.items() if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "LD_"))}
                env.update({"LD_LIBRARY_PATH": FAKE_DIR, var: value,
                            "LD_PRELOAD": (EXTRA + ":" if EXTRA else "") + SHIM})
                p = subprocess.run([sys.executable, "-c", "print('ran')"], env=env, capture_output=True,
                                   text=True, timeout=30)
                self.assertNotEqual(p.returncode, 0)
                self.assertEqual(p.stdout, "")
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
                self.assertIn(var, p.stderr)
                self.assertIn(value, p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
