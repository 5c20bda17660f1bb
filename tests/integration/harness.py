"""What several integration tests share: the environment of a group
member under the shim over the fake driver, the start of a CUDA client
script, the end of its processes, and the wait for a metrics file's
first series."""
import os
import time

# The start of a client script run under the shim: the driver initialized
# and GPU 0's primary context current (cu: libcuda.so.1, ctx: the context).
CUDA_START = r'''
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
ctx = ctypes.c_void_p()
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
'''


def group_env(shim, fake_dir, group_dir, **extra):
    """The caller's environment without its CUMEMCAP_ and FAKECUDA_
    variables and CUDA_VISIBLE_DEVICES, with the shim preloaded (after
    LD_PRELOAD_EXTRA, the sanitizer runtime), the fake driver, the books in
    group_dir, no log and no pool; then extra, each value as a string."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMCAP_", "FAKECUDA_")) and k != "CUDA_VISIBLE_DEVICES"}
    first = os.environ.get("LD_PRELOAD_EXTRA", "")
    env.update({
        "LD_PRELOAD": (first + ":" if first else "") + shim,
        "LD_LIBRARY_PATH": fake_dir,
        "CUMEMCAP_GROUP_DIR": group_dir,
        "CUMEMCAP_LOG": "off",
        "CUMEMCAP_POOL": "off",
    })
    env.update({k: str(v) for k, v in extra.items()})
    return env


def end_all(procs):
    """Kill those of procs still running, reap each, close its pipes."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
        for f in (p.stdin, p.stdout, p.stderr):
            if f:
                f.close()


def wait_for_series(path, proc=None):
    """The text of the metrics file at path once it holds a series; an
    AssertionError after 10 seconds, or once proc (when given) ended."""
    for _ in range(500):
        try:
            with open(path) as f:
                text = f.read()
            if "{" in text:
                return text
        except FileNotFoundError:
            pass
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.02)
    raise AssertionError("no metrics at %s: %s" % (path, sorted(os.listdir(os.path.dirname(path)))))
