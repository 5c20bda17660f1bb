#!/usr/bin/env python3
"""Every version and per-thread-default-stream variant that the CUDA
Toolkit's cudaTypedefs.h defines for a base name the shim hooks is in
src/driver/hooks.def (so a new toolkit's version of a hooked entry point cannot
slip past the shim), and the shim's cuGetProcAddress_v2 answers each with
its own hook of exactly that symbol, over the fake driver.

Usage: test_versions.py SHIM FAKE_DIR HOOKS_DEF CUDA_INCLUDE
"""
import ctypes
import os
import re
import subprocess
import sys

SHIM, FAKE_DIR, HOOKS_DEF, CUDA_INCLUDE = sys.argv[1:5]
PTDS_FLAG = 2  # CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM


def hooked():
    out = {}
    for m in re.finditer(r"^HOOK\((\w+),\s*(\w+),\s*(\d+),\s*(\w+)\)", open(HOOKS_DEF).read(), re.M):
        sym, base, ver, var = m.groups()
        out[(base, int(ver), var)] = sym
    return out


def defined(bases):
    out = set()
    text = open(os.path.join(CUDA_INCLUDE, "cudaTypedefs.h")).read()
    for m in re.finditer(r"\*\s*PFN_(\w+?)_v(\d+)(_ptsz|_ptds)?\)\s*\(", text):
        base, ver, suf = m.groups()
        if base in bases:
            out.add((base, int(ver), {"_ptsz": "PTSZ", "_ptds": "PTDS", None: "LEGACY"}[suf]))
    return out


table = hooked()
header = defined({b for b, _, _ in table})
missing = sorted(header - set(table))
unknown = sorted(set(table) - header)
assert header, "no PFN typedef found for any hooked base in %s" % CUDA_INCLUDE
assert not missing, "cudaTypedefs.h defines these for hooked names; hooks.def lacks them: %s" % missing
assert not unknown, "hooks.def has entries cudaTypedefs.h does not define: %s" % unknown

# Ask each through the shim: the answer must be the hook of that symbol.
PROBE = r'''
import ctypes, os, sys
cu = ctypes.CDLL("libcuda.so.1")
shim = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
gpa = cu.cuGetProcAddress_v2
gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64,
                ctypes.POINTER(ctypes.c_int)]
assert cu.cuInit(0) == 0
bad = []
for line in sys.argv[2:]:
    base, ver, flags, sym = line.split(":")
    p, st = ctypes.c_void_p(), ctypes.c_int(-1)
    r = gpa(base.encode(), ctypes.byref(p), int(ver), int(flags), ctypes.byref(st))
    want = ctypes.cast(getattr(shim, sym), ctypes.c_void_p).value
    if r != 0 or p.value != want:
        bad.append("%s@%s flags %s: got %s (status %d, r %d), want %s's %s" % (base, ver, flags,
                   hex(p.value or 0), st.value, r, sym, hex(want)))
print("\n".join(bad) if bad else "ok %d" % (len(sys.argv) - 2))
sys.exit(1 if bad else 0)
'''
asks = ["%s:%d:%d:%s" % (b, v, PTDS_FLAG if var != "LEGACY" else 0, sym) for (b, v, var), sym in sorted(table.items())]
env = {k: v for k, v in os.environ.items() if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
extra = os.environ.get("LD_PRELOAD_EXTRA", "")
env.update({"LD_LIBRARY_PATH": FAKE_DIR, "LD_PRELOAD": (extra + ":" if extra else "") + SHIM,
            "CUMEMCAP_LOG": "off"})
p = subprocess.run([sys.executable, "-c", PROBE, SHIM] + asks, env=env, capture_output=True, text=True,
                   timeout=60)
assert p.returncode == 0, p.stdout + p.stderr
print("versions: %d (base, version, variant) entries from cudaTypedefs.h, each answered with its hook (%s)"
      % (len(table), p.stdout.strip()))
