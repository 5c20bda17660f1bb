#!/usr/bin/env python3
"""own_program.py SRC BUILD: runs the line of README.md's "Your own program
without a GPU" as it stands, from a folder where build-demo is BUILD and
your_program.py is a small driver-API program, and checks what the README
says of it: the program runs under a 4 GiB limit, is told 3796 MiB free of
4096 (the fake context's 300 MiB inside the limit), its memory holds data,
and a module image fails with CUDA_ERROR_NO_BINARY_FOR_GPU. It also checks
the lines on numba's failure against numba itself where the system has
numba 0.56 (skipped otherwise)."""
import os
import re
import subprocess
import sys
import tempfile

SRC, BUILD = (os.path.abspath(p) for p in sys.argv[1:3])

PROGRAM = r'''
import ctypes
cuda = ctypes.CDLL("libcuda.so.1")
ctx, dptr = ctypes.c_void_p(), ctypes.c_uint64()
free, total = ctypes.c_size_t(), ctypes.c_size_t()
assert cuda.cuInit(0) == 0 and cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
assert cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
print("free %d MiB of %d" % (free.value >> 20, total.value >> 20))
assert cuda.cuMemAlloc_v2(ctypes.byref(dptr), 512 << 20) == 0
data = bytes(range(256)) * 16
back = ctypes.create_string_buffer(len(data))
assert cuda.cuMemcpyHtoD_v2(dptr, data, len(data)) == 0
assert cuda.cuMemcpyDtoH_v2(back, dptr, len(data)) == 0
print("copy", "ok" if back.raw == data else "differs")
module = ctypes.c_void_p()
print("module", cuda.cuModuleLoadData(ctypes.byref(module), b"\x7fELF" + bytes(64)))
assert cuda.cuMemFree_v2(dptr) == 0
'''

failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def readme_section(title):
    with open(os.path.join(SRC, "README.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## %s\n(.*?)(?=^## )" % re.escape(title), text, re.M | re.S)
    if not m:
        sys.exit("README.md has no section \"## %s\"" % title)
    return m.group(1)


section = readme_section("Your own program without a GPU")
blocks = re.findall(r"^```\n(.*?)^```", section, re.M | re.S)
if len(blocks) != 1 or len(blocks[0].splitlines()) != 1:
    sys.exit("README.md: \"Your own program without a GPU\" should hold one block of one line")
line = blocks[0].strip()

env = {k: v for k, v in os.environ.items()
       if not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
with tempfile.TemporaryDirectory() as tmp:
    os.symlink(BUILD, os.path.join(tmp, "build-demo"))
    with open(os.path.join(tmp, "your_program.py"), "w") as f:
        f.write(PROGRAM)
    env.update(TMPDIR=tmp, CUMEMCAP_CONFIG="", PWD=tmp)
    print("$ " + line)
    run = subprocess.run(["sh", "-c", line], cwd=tmp, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=120)
    print(run.stdout, end="")
    check(run.returncode == 0, "the line runs the program (exit status %d)" % run.returncode)
    check("free 3796 MiB of 4096" in run.stdout, "told 3796 MiB free of 4096 under --limit 4GiB")
    check("copy ok" in run.stdout, "device memory holds data")
    check("module 209" in run.stdout, "a module image: CUDA_ERROR_NO_BINARY_FOR_GPU (209)")
    logs = [n for d, _, names in os.walk(tmp) for n in names if n.endswith(".jsonl")]
    check(len(logs) == 1, "one footprint log under TMPDIR (%s)" % logs)

# numba: what the README says of Debian's numba, where it is installed.
numba_py = "/usr/bin/python3"
probe = subprocess.run([numba_py, "-c", "import numba; print(numba.__version__)"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) \
    if os.path.exists(numba_py) else None
if probe and probe.returncode == 0 and probe.stdout.startswith("0.56"):
    claim = " ".join(section.split())
    check("CUDA_ERROR_INVALID_CONTEXT" in claim, "the README names numba's error")
    script = ("from numba import cuda\nimport numpy\nprint('available', cuda.is_available())\n"
              "try:\n    cuda.to_device(numpy.arange(4))\nexcept Exception as e:\n    print('error', e)\n")
    fake_env = dict(env, LD_LIBRARY_PATH=os.path.join(BUILD, "tests", "fake"), FAKECUDA_DEVICES="16GiB")
    r = subprocess.run([numba_py, "-c", script], env=fake_env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    print(r.stdout, end="")
    check("available False" in r.stdout, "numba 0.56, without cumemcap: cuda.is_available() is False")
    check("cuCtxGetDevice results in CUDA_ERROR_INVALID_CONTEXT" in r.stdout,
          "numba 0.56, without cumemcap: cuCtxGetDevice fails with CUDA_ERROR_INVALID_CONTEXT")
else:
    print("skip: numba 0.56 is not installed for %s" % numba_py)

sys.exit(1 if failures else 0)
