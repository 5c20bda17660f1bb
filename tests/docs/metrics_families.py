#!/usr/bin/env python3
"""metrics_families.py SRC BUILD: every metric family that a real metrics
file has (# TYPE lines, from a program run over the fake driver with a
limit and CUMEMCAP_METRICS) is named in docs/metrics.md; exit 1 naming
the families the page leaves out."""
import glob
import os
import subprocess
import sys
import tempfile

SRC, BUILD = (os.path.abspath(p) for p in sys.argv[1:3])

PROGRAM = r'''
import ctypes, glob, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
ctx, d = ctypes.c_void_p(), ctypes.c_uint64()
assert cuda.cuInit(0) == 0 and cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
assert cuda.cuMemAlloc_v2(ctypes.byref(d), 1 << 20) == 0
for _ in range(200):
    files = glob.glob(sys.argv[1] + "/m.*.prom")
    if files:
        sys.stdout.write(open(files[0]).read())
        break
    time.sleep(0.05)
'''

env = {k: v for k, v in os.environ.items() if not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
env.update(LD_LIBRARY_PATH=os.path.join(BUILD, "tests", "fake"), CUMEMCAP_CONFIG="", CUMEMCAP_LOG="off")
with tempfile.TemporaryDirectory() as tmp:
    with open(os.path.join(tmp, "p.py"), "w") as f:
        f.write(PROGRAM)
    run = subprocess.run(["sh", os.path.join(BUILD, "scripts", "cumemcap"), "--limit", "2GiB",
                          "--log-interval", "0.1", "--metrics", tmp + "/m.%p.prom", "--",
                          sys.executable, os.path.join(tmp, "p.py"), tmp],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
families = [line.split()[2] for line in run.stdout.splitlines() if line.startswith("# TYPE ")]
if run.returncode != 0 or len(families) < 10:
    sys.exit("no metrics file read (exit status %d):\n%s" % (run.returncode, run.stdout))
with open(os.path.join(SRC, "docs", "metrics.md"), encoding="utf-8") as f:
    page = f.read()
missing = [name for name in families if "`%s`" % name not in page]
for name in missing:
    print("docs/metrics.md does not name the family %s" % name)
print("%d families, %d named in docs/metrics.md" % (len(families), len(families) - len(missing)))
sys.exit(1 if missing else 0)
