#!/usr/bin/env python3
"""NVML asked from inside a capped process tells the same story as
cuMemGetInfo: total = the limit, used = the process's footprint
(for now what the ledger reserves: the fake driver's own record of this
process's allocations), free = the rest, and the process's own entry in
the compute-process lists says the footprint. Through every door: the
linked symbols, dlsym(RTLD_DEFAULT), dlopen + dlsym in C, and ctypes as
pynvml does it. A GPU without a limit, a process that never used CUDA, and
an NVML that fails get the fake NVML's own answers.

Usage: test_nvml.py SHIM FAKE_DIR PROBE
"""
import json
import os
import subprocess
import sys
import unittest

SHIM, FAKE_DIR, PROBE = sys.argv[1:4]
del sys.argv[1:4]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
MiB = 1 << 20
GiB = 1 << 30
OVERHEAD = 300 * MiB  # FAKECUDA_CTX_OVERHEAD: in NVML's figure and in the footprint

# The C probe's output, from Python through ctypes: pynvml's way.
CTYPES_PROBE = r'''
import ctypes, json, os, sys
nv = ctypes.CDLL("libnvidia-ml.so.1")
cu = ctypes.CDLL("libcuda.so.1")
cu.fakecuda_reserved.restype = ctypes.c_uint64
class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
class Mem2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
class Proc1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]
class Proc(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]
V2 = ctypes.sizeof(Mem2) | (2 << 24)
args = sys.argv[1:]
while args:
    op = args.pop(0)
    if op == "init":
        assert cu.cuInit(0) == 0
    elif op == "alloc":
        dev, n = int(args.pop(0)), int(args.pop(0))
        ctx, p = ctypes.c_void_p(), ctypes.c_uint64()
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0
        assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) == 0
def mine(fn, rec):
    arr, n = (rec * 8)(), ctypes.c_uint(8)
    r = fn(None if dev is None else dev, ctypes.byref(n), arr)
    m = -2
    for i in range(n.value if r == 0 else 0):
        if arr[i].pid == os.getpid():
            m = arr[i].usedGpuMemory if arr[i].usedGpuMemory != (1 << 64) - 1 else -1
    return {"r": r, "n": n.value, "mine": m}
dev = None
m0, m20 = Mem(), Mem2(version=V2)
out = {"pre": [nv.nvmlDeviceGetMemoryInfo(None, ctypes.byref(m0)),
               nv.nvmlDeviceGetMemoryInfo_v2(None, ctypes.byref(m20)),
               mine(nv.nvmlDeviceGetComputeRunningProcesses_v3, Proc)["r"]]}
out["init"] = nv.nvmlInit_v2()
out["reserved"] = [cu.fakecuda_reserved(0), cu.fakecuda_reserved(1)]
out["gpus"] = []
count = ctypes.c_uint(0)
if out["init"] != 0 or nv.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
    count.value = 0
for i in range(count.value):
    dev = ctypes.c_void_p()
    assert nv.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(dev)) == 0
    uuid = ctypes.create_string_buffer(96)
    assert nv.nvmlDeviceGetUUID(dev, uuid, 96) == 0
    m, m2 = Mem(), Mem2(version=V2)
    rm, rm2 = nv.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(m)), nv.nvmlDeviceGetMemoryInfo_v2(dev, ctypes.byref(m2))
    out["gpus"].append({"uuid": uuid.value.decode(),
        "mem": {"r": rm, "total": m.total, "free": m.free, "used": m.used},
        "mem2": {"r": rm2, "total": m2.total, "reserved": m2.reserved, "free": m2.free, "used": m2.used},
        "procs1": mine(nv.nvmlDeviceGetComputeRunningProcesses, Proc1),
        "procs2": mine(nv.nvmlDeviceGetComputeRunningProcesses_v2, Proc),
        "procs3": mine(nv.nvmlDeviceGetComputeRunningProcesses_v3, Proc)})
print(json.dumps(out))
'''

DOORS = ["linked", "default", "handle", "ctypes"]


class Nvml(unittest.TestCase):
    def run_door(self, door, steps, env_add, shim=True):
        env = {k: v for k, v in os.environ.items() if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
        env.update({"LD_LIBRARY_PATH": FAKE_DIR, "FAKECUDA_CTX_OVERHEAD": "300MiB",
                    "CUMEMCAP_LOG": "off", "ASAN_OPTIONS": "detect_leaks=0"})
        preload = [EXTRA] if EXTRA else []
        if shim:
            preload.append(SHIM)
        if preload:
            env["LD_PRELOAD"] = ":".join(preload)
        env.update(env_add)
        argv = ([sys.executable, "-c", CTYPES_PROBE] if door == "ctypes" else [PROBE, door]) + steps
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, "%s %s: %s" % (door, steps, p.stderr))
        return json.loads(p.stdout)

    def assert_capped(self, gpu, limit, used):
        want = {"total": limit, "used": used, "free": max(limit - used, 0)}
        self.assertEqual(gpu["mem"], dict(want, r=0))
        self.assertEqual(gpu["mem2"], dict(want, r=0, reserved=0))
        for key in ("procs1", "procs2", "procs3"):
            self.assertEqual(gpu[key], {"r": 0, "n": 1, "mine": used}, key)

    def assert_real(self, gpu, total, mine):
        """The fake NVML's own figures: this process alone on the GPU."""
        used = mine if mine >= 0 else 0
        want = {"total": total, "used": used, "free": total - used}
        self.assertEqual(gpu["mem"], dict(want, r=0))
        self.assertEqual(gpu["mem2"], dict(want, r=0, reserved=0))
        for key in ("procs1", "procs2", "procs3"):
            self.assertEqual(gpu[key], {"r": 0, "n": 1 if mine >= 0 else 0,
                                        "mine": mine if mine >= 0 else -2}, key)

    def test_capped_gpu(self):
        env = {"FAKECUDA_DEVICES": "16GiB", "CUMEMCAP_LIMIT": "1GiB"}
        for door in DOORS:
            with self.subTest(door=door):
                out = self.run_door(door, ["init", "alloc", "0", str(256 * MiB)], env)
                self.assertEqual(out["init"], 0)
                self.assertEqual(out["reserved"][0], 256 * MiB)
                self.assertEqual(len(out["gpus"]), 1)
                self.assert_capped(out["gpus"][0], GiB, 256 * MiB + OVERHEAD)

    def test_uncapped_gpu_is_real(self):
        env = {"FAKECUDA_DEVICES": "16G,16G", "CUMEMCAP_DEVICE_LIMITS": "0=1GiB"}
        steps = ["init", "alloc", "0", str(64 * MiB), "alloc", "1", str(128 * MiB)]
        for door in DOORS:
            with self.subTest(door=door):
                out = self.run_door(door, steps, env)
                self.assert_capped(out["gpus"][0], GiB, out["reserved"][0] + OVERHEAD)
                self.assert_real(out["gpus"][1], 16 * GiB, out["reserved"][1] + OVERHEAD)
                self.assertEqual(out["reserved"][1], 128 * MiB)

    def test_known_gpu_not_used_yet(self):
        # CUDA reported GPU 1 (limit 1GiB) but the process holds nothing there.
        env = {"FAKECUDA_DEVICES": "16G,16G", "CUMEMCAP_LIMIT": "1GiB"}
        for door in ("linked", "ctypes"):
            with self.subTest(door=door):
                out = self.run_door(door, ["init", "alloc", "0", str(64 * MiB)], env)
                self.assert_capped(out["gpus"][0], GiB, 64 * MiB + OVERHEAD)
                g = out["gpus"][1]
                self.assertEqual(g["mem"], {"r": 0, "total": GiB, "used": 0, "free": GiB})
                self.assertEqual(g["procs3"], {"r": 0, "n": 0, "mine": -2})

    def test_no_cuda_in_process_is_real(self):
        env = {"FAKECUDA_DEVICES": "16GiB", "CUMEMCAP_LIMIT": "1GiB", "FAKECUDA_OTHER_USED": "2GiB"}
        for door in DOORS:
            with self.subTest(door=door):
                out = self.run_door(door, [], env)
                self.assertEqual(out, self.run_door(door, [], env, shim=False))
                self.assertEqual(out["gpus"][0]["mem"]["total"], 16 * GiB)

    def test_nvml_failing_same_errors(self):
        env = {"FAKECUDA_DEVICES": "16GiB", "CUMEMCAP_LIMIT": "1GiB", "FAKECUDA_NVML": "off"}
        for door in DOORS:
            with self.subTest(door=door):
                out = self.run_door(door, ["init", "alloc", "0", str(64 * MiB)], env)
                self.assertNotEqual(out["init"], 0)
                self.assertEqual(out["pre"], [1, 1, 1])  # NVML_ERROR_UNINITIALIZED
                alone = self.run_door(door, ["init", "alloc", "0", str(64 * MiB)], env, shim=False)
                self.assertEqual((out["pre"], out["init"], out["gpus"]),
                                 (alone["pre"], alone["init"], alone["gpus"]))

    def test_not_available_stays(self):
        env = {"FAKECUDA_DEVICES": "16GiB", "CUMEMCAP_LIMIT": "1GiB", "FAKECUDA_NVML": "na"}
        for door in ("linked", "ctypes"):
            with self.subTest(door=door):
                out = self.run_door(door, ["init", "alloc", "0", str(64 * MiB)], env)
                g = out["gpus"][0]
                self.assertEqual(g["mem"]["total"], GiB)
                for key in ("procs1", "procs2", "procs3"):
                    self.assertEqual(g[key], {"r": 0, "n": 1, "mine": -1}, key)

    def test_other_pid_untouched(self):
        # nopid: this process is listed under a host pid; its entry is not ours.
        env = {"FAKECUDA_DEVICES": "16GiB", "CUMEMCAP_LIMIT": "1GiB", "FAKECUDA_NVML": "nopid"}
        out = self.run_door("linked", ["init", "alloc", "0", str(64 * MiB)], env)
        self.assertEqual(out["gpus"][0]["procs3"], {"r": 0, "n": 1, "mine": -2})
        # the footprint: what the calls hold and the context, learned
        # from the GPU's used memory around it (NVML does not list us)
        self.assertEqual(out["gpus"][0]["mem"]["used"], 64 * MiB + OVERHEAD)


if __name__ == "__main__":
    unittest.main(verbosity=2)
