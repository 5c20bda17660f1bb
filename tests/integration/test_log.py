#!/usr/bin/env python3
"""The per-process footprint log (CUMEMCAP_LOG, CUMEMCAP_METRICS) end to
end: a `python3` program drives the fake driver through ctypes under the
shim, and every record is checked against what the fake driver (and the
fake NVML next to it) really held at that time. Also: how the file is
created (mode, O_EXCL, links, shared directories), failures that must turn
logging off with one line and leave the program alone, the exit summary
after exit() from a thread and after fatal signals, lines never torn by
racing threads, the Prometheus file, fork, and the fake NVML itself.

Usage: test_log.py SHIM FAKE_DIR
"""
import ctypes.util
import glob
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

SHIM, FAKE_DIR = sys.argv[1:3]
del sys.argv[1:3]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
MiB = 1 << 20
# The signals the shim's exit record handles (src/log/log.c, fatal[]).
FATAL_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT,
                 signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
GiB = 1 << 30
UUID0 = "GPU-fa4ec0da-0000-4000-8000-000000000000"
# The Downward API variables the metrics take labels from (and the extra ones).
LABEL_VARS = ("NODE_NAME", "POD_NAME", "POD_NAMESPACE", "CONTAINER_NAME")
RFC3339 = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"


def gpu_objects(rec):
    """Every per-GPU object of a record (the record itself when it has "gpu")."""
    if "gpu" in rec and rec["type"] != "group_change":
        yield rec
    for g in rec.get("gpus", []):
        yield g

# A program made of steps (argv), printing one JSON object per step that
# reports something. "res" is fakecuda_reserved(0) right after the step.
PROBE = r'''
import ctypes, json, os, signal, sys, threading, time
cu = ctypes.CDLL("libcuda.so.1")
cu.fakecuda_reserved.restype = ctypes.c_uint64
cu.fakecuda_peak_reserved.restype = ctypes.c_uint64
def out(**kw):
    kw["t"] = time.time()
    kw["res"] = cu.fakecuda_reserved(0)
    print(json.dumps(kw), flush=True)
ptrs = []
def alloc(n):
    p = ctypes.c_uint64()
    r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))
    if r == 0:
        ptrs.append(p.value)
    return r
args = sys.argv[1:]
while args:
    op = args.pop(0)
    if op == "init":
        assert cu.cuInit(0) == 0
    elif op == "ctx":
        ctx = ctypes.c_void_p()
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), int(args.pop(0))) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0
    elif op == "alloc":
        out(op="alloc", r=alloc(int(args.pop(0))))
    elif op == "free":
        out(op="free", r=cu.cuMemFree_v2(ctypes.c_uint64(ptrs.pop())))
    elif op == "sleep":
        time.sleep(float(args.pop(0)))
    elif op == "fsize":                  # RLIMIT_FSIZE from now on, the log already open
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)   # Python ignores it; a C program would not
        n = int(args.pop(0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    elif op == "mark":
        out(op="mark", peak=cu.fakecuda_peak_reserved(0))
    elif op == "threads":                # T threads, N refused requests of B bytes each
        t, n, b = int(args.pop(0)), int(args.pop(0)), int(args.pop(0))
        ctxs = ctypes.c_void_p()
        cu.cuCtxGetCurrent(ctypes.byref(ctxs))
        codes = []
        def body():
            cu.cuCtxSetCurrent(ctxs)
            p = ctypes.c_uint64()
            codes.extend(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(b)) for _ in range(n))
        ts = [threading.Thread(target=body) for _ in range(t)]
        [x.start() for x in ts]
        [x.join() for x in ts]
        out(op="threads", refused=codes.count(2), other=len(codes) - codes.count(2))
    elif op == "exitthread":            # C exit() from another thread
        code = int(args.pop(0))
        libc = ctypes.CDLL(None)
        threading.Thread(target=lambda: libc.exit(code)).start()
        time.sleep(30)
    elif op == "wait":
        out(op="ready")
        time.sleep(30)
    elif op == "segv":
        ctypes.string_at(0)
    elif op == "sigint":                # KeyboardInterrupt must still work
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
            out(op="sigint", caught=False)
        except KeyboardInterrupt:
            out(op="sigint", caught=True)
    elif op == "handlers":
        out(op="handlers", int=signal.getsignal(signal.SIGINT) is signal.default_int_handler,
            term=signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
    elif op == "fork":
        pid = os.fork()
        if pid == 0:
            p = ctypes.c_uint64()
            r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20))
            sys.exit(0 if r != 0 else 1)   # the fake is unusable after fork, like the real driver
        out(op="fork", status=os.waitpid(pid, 0)[1])
    elif op == "reusefd":               # close the log's descriptor, reuse its number, fork
        links = {}
        for fd in os.listdir("/proc/self/fd"):
            try:
                links[int(fd)] = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                pass                     # listdir's own descriptor
        logfd = next(fd for fd, target in links.items() if target.endswith(".jsonl"))
        os.close(logfd)
        tmp = os.open(args.pop(0), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        mine = os.dup2(tmp, logfd)
        if tmp != mine:                  # open() may have given the freed number itself
            os.close(tmp)
        pid = os.fork()
        if pid == 0:
            try:
                os.write(mine, b"child\n")
                os._exit(0)
            except OSError:
                os._exit(3)
        out(op="reusefd", status=os.waitpid(pid, 0)[1])
    elif op == "readmetrics":           # read the metrics file for S seconds
        path, secs = args.pop(0), float(args.pop(0))
        seen, end = [], time.time() + secs
        while time.time() < end:
            try:
                st = os.stat(path)
                with open(path) as f:
                    seen.append([st.st_ino, f.read(), cu.fakecuda_reserved(0)])
            except FileNotFoundError:
                pass
            time.sleep(0.01)
        out(op="metrics", seen=seen)
    elif op == "release":                # cuDevicePrimaryCtxRelease_v2(DEV)
        out(op="release", r=cu.cuDevicePrimaryCtxRelease_v2(int(args.pop(0))))
        ptrs.clear()                     # what it held died with the context
    elif op == "reset":                  # cuDevicePrimaryCtxReset_v2(DEV)
        out(op="reset", r=cu.cuDevicePrimaryCtxReset_v2(int(args.pop(0))))
        ptrs.clear()
    elif op == "print":
        print(args.pop(0), flush=True)
    elif op == "hup":                    # SIGHUP to itself
        os.kill(os.getpid(), signal.SIGHUP)
    else:
        raise SystemExit("unknown step " + op)
'''


def records(path):
    """Every line of a log, parsed; each must be whole."""
    with open(path, "rb") as f:
        data = f.read()
    assert data.endswith(b"\n"), "the last line is cut: %r" % data[-80:]
    return [json.loads(line) for line in data.decode().splitlines()]


class Log(unittest.TestCase):
    maxDiff = None
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.script = os.path.join(self.dir, "logprobe.py")
        with open(self.script, "w") as f:
            f.write(PROBE)

    def tearDown(self):
        self.tmp.cleanup()

    def env(self, add, lib_dir=FAKE_DIR):
        env = {k: v for k, v in os.environ.items()
               if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_")) and k not in LABEL_VARS}
        env.update({"LD_LIBRARY_PATH": lib_dir, "FAKECUDA_DEVICES": "4GiB,2GiB",
                    "FAKECUDA_DRIVER_VERSION": "12080",
                    "FAKECUDA_CTX_OVERHEAD": "300MiB", "CUMEMCAP_LOG_INTERVAL": "0.1",
                    "CUMEMCAP_LOG": os.path.join(self.dir, "%n.%p.jsonl"),
                    "LD_PRELOAD": (EXTRA + ":" if EXTRA else "") + SHIM,
                    # Fatal-signal tests: the sanitizer must leave SIGSEGV to the program.
                    "ASAN_OPTIONS": "detect_leaks=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0"})
        env.update(add)
        return env

    @staticmethod
    def default_signals():
        # What a program started from a terminal gets. The runner may hand
        # down ignored ones (nohup ignores SIGHUP; some CI runners do), and
        # the shim rightly leaves an ignored signal ignored.
        for sig in FATAL_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)

    def start(self, steps, env_add=None, lib_dir=FAKE_DIR, preexec_fn=None):
        return subprocess.Popen([sys.executable, self.script, *steps], env=self.env(env_add or {}, lib_dir),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=preexec_fn or self.default_signals)

    def run_probe(self, steps, env_add=None, timeout=30, **kw):
        p = self.start(steps, env_add, **kw)
        out, err = p.communicate(timeout=timeout)
        p.stdout_lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        p.out, p.err = out, err
        # What the program saw, without the times it printed.
        p.seen = (p.returncode, [{k: v for k, v in s.items() if k != "t"} for s in p.stdout_lines],
                  [l for l in out.splitlines() if not l.startswith("{")])
        return p

    def the_log(self, p):
        files = glob.glob(os.path.join(self.dir, "*.jsonl*"))
        self.assertEqual(files, [os.path.join(self.dir, "logprobe.py.%d.jsonl" % p.pid)],
                         getattr(p, "err", None))
        return records(files[0])

    def check_common(self, recs, pid):
        self.assertEqual(recs[0]["type"], "start")
        self.assertEqual(recs[-1]["type"], "exit")
        program = recs[0]["program"]
        for r in recs:
            # Schema 2: every record names its process, host and time on its own.
            self.assertEqual(r["v"], 2)
            self.assertEqual(r["pid"], pid)
            self.assertEqual((r["program"], r["host"]), (program, socket.gethostname()), r)
            self.assertAlmostEqual(r["t"], time.time(), delta=60)
            self.assertRegex(r["time"], RFC3339)
            # "time" is "t" as a UTC date, to the millisecond.
            self.assertEqual(r["time"], time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(r["t"])))
                             + ".%03dZ" % round(r["t"] * 1000 % 1000), r)
            # Every per-GPU object names the GPU by UUID and nvidia-smi's index.
            for g in gpu_objects(r):
                self.assertEqual((g["uuid"], g["index"]), (UUID0[:-1] + str(g["gpu"]), g["gpu"]), r)
        # In file order, give or take threads racing between clock and write.
        for a, b in zip(recs, recs[1:]):
            self.assertGreaterEqual(b["t"], a["t"] - 0.05)

    # ---- what the records say ----

    def test_start_record_says_which_hints_were_left(self):
        # The user's JAX fraction keeps JAX's preallocation; with no limit nothing is set.
        p = self.run_probe(["init", "ctx", "0"], {"CUMEMCAP_LIMIT": "1GiB", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"})
        self.assertEqual(p.returncode, 0, p.err)
        hints = self.the_log(p)[0]["framework_hints"]
        self.assertEqual(hints["state"], "apply")
        self.assertEqual({(h["variable"], h["set"], h["user"]) for h in hints["hints"]},
                         {("TF_FORCE_GPU_ALLOW_GROWTH", True, None),
                          ("XLA_PYTHON_CLIENT_PREALLOCATE", False, "XLA_PYTHON_CLIENT_MEM_FRACTION")})
        os.unlink(glob.glob(os.path.join(self.dir, "*.jsonl"))[0])
        p = self.run_probe(["init", "ctx", "0"])
        self.assertEqual(p.returncode, 0, p.err)
        self.assertEqual(self.the_log(p)[0]["framework_hints"], {"state": "no_limit", "hints": []})

    def test_every_record_matches_the_driver(self):
        steps = ["init", "ctx", "0", "mark", "alloc", str(512 * MiB), "sleep", "0.45",
                 "alloc", str(768 * MiB), "free", "sleep", "0.45", "mark"]
        p = self.run_probe(steps, {"CUMEMCAP_LIMIT": "1GiB", "CUMEMCAP_RELEASE": "immediate"})
        self.assertEqual(p.returncode, 0, p.err)
        self.assertEqual(p.err, "")
        steps_out = p.stdout_lines
        self.assertEqual([s.get("r") for s in steps_out], [None, 0, 2, 0, None])
        recs = self.the_log(p)
        self.check_common(recs, p.pid)
        st = os.stat(os.path.join(self.dir, "logprobe.py.%d.jsonl" % p.pid))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)

        start = recs[0]
        self.assertEqual(start["program"], "logprobe.py")
        self.assertEqual(start["argv"], [sys.executable, self.script] + steps)
        self.assertEqual(start["host"], socket.gethostname())
        self.assertEqual(start["driver_version"], 12080)  # the fake's cuDriverGetVersion
        self.assertRegex(start["cumemcap"], r"^\d+\.\d+\.\d+")
        self.assertEqual(start["interval"], 0.1)
        self.assertEqual(start["gpus"], [
            {"gpu": 0, "uuid": UUID0, "index": 0, "pci": "0000:10:00.0", "capacity": 4 * GiB,
             "limit": GiB, "limit_source": "CUMEMCAP_LIMIT"},
            {"gpu": 1, "uuid": UUID0[:-1] + "1", "index": 1, "pci": "0000:11:00.0", "capacity": 2 * GiB,
             "limit": GiB, "limit_source": "CUMEMCAP_LIMIT"}])
        self.assertEqual(start["rules"]["growth"], {"value": "ondemand", "source": "default"})
        self.assertEqual(start["rules"]["release"], {"value": "immediate", "source": "CUMEMCAP_RELEASE"})
        self.assertEqual(start["rules"]["pool"]["value"], "auto")
        self.assertEqual(start["rules"]["framework_hints"]["value"], "on")
        self.assertEqual(start["rules"]["log_interval"], {"value": 0.1, "source": "CUMEMCAP_LOG_INTERVAL"})
        # Under a limit, with no framework variable of the user's, both hints were set.
        self.assertEqual(start["framework_hints"]["state"], "apply")
        self.assertEqual({(h["variable"], h["value"], h["set"], h["user"]) for h in start["framework_hints"]["hints"]},
                         {("TF_FORCE_GPU_ALLOW_GROWTH", "true", True, None),
                          ("XLA_PYTHON_CLIENT_PREALLOCATE", "false", True, None)})

        segs = [r for r in recs if r["type"] == "segment"]
        self.assertEqual([(s["gpu"], s["op"], s["bytes"], s["reserved"]) for s in segs],
                         [(0, "take", 512 * MiB, 512 * MiB), (0, "release", 512 * MiB, 0)])
        ref = [r for r in recs if r["type"] == "refusal"]
        self.assertEqual(len(ref), 1)
        self.assertEqual({k: ref[0][k] for k in ("gpu", "requested", "door", "live", "pooled", "reserved", "limit")},
                         {"gpu": 0, "requested": 768 * MiB, "door": "cuMemAlloc_v2", "live": 512 * MiB,
                          "pooled": 0, "reserved": 512 * MiB, "limit": GiB})

        # Each sample against the fake's own figures in the phase it fell
        # in (samples within 30 ms of a change may see either side).
        changes = [s["t"] for s in steps_out if s["op"] in ("alloc", "free")]
        held = {0: 0}
        phases = [(steps_out[0]["t"], 0), (steps_out[1]["t"], steps_out[1]["res"]),
                  (steps_out[3]["t"], steps_out[3]["res"])]
        self.assertEqual([ph[1] for ph in phases], [0, 512 * MiB, 0])
        checked = {0: 0, 512 * MiB: 0}
        for s in (r for r in recs if r["type"] == "sample"):
            self.assertEqual([g["gpu"] for g in s["gpus"]], [0])  # only the GPU in use
            g = s["gpus"][0]
            if any(abs(s["t"] - c) < 0.03 for c in changes):
                continue
            want = [res for t0, res in phases if t0 <= s["t"] + 0.001][-1]
            self.assertEqual(g["reserved"], want, s)
            self.assertEqual(g["live"], want, s)
            self.assertEqual(g["pooled"], 0, s)
            self.assertEqual(g["async_reserved"], 0, s)
            self.assertEqual(g["driver_used"], want + 300 * MiB, s)
            self.assertEqual(g["context_overhead"], 300 * MiB, s)
            checked[want] += 1
        self.assertGreaterEqual(checked[512 * MiB], 2, recs)
        self.assertGreaterEqual(checked[0], 2, recs)

        ex = recs[-1]
        self.assertEqual(ex["reason"], "exit")
        self.assertEqual(ex["samples"], sum(r["type"] == "sample" for r in recs))
        self.assertEqual(len(ex["gpus"]), 1)
        want = {"gpu": 0, "limit": GiB, "peak_live": 512 * MiB, "peak_pooled": 512 * MiB,
                "peak_reserved": steps_out[-1]["peak"], "peak_driver_used": 512 * MiB + 300 * MiB,
                "allocs": 1, "frees": 1, "refusals": 1, "driver_oom": 0, "segments_taken": 1,
                "segments_released": 1, "largest_request": 768 * MiB, "reserved": 0}
        self.assertEqual({k: ex["gpus"][0][k] for k in want}, want)
        self.assertEqual(steps_out[-1]["peak"], 512 * MiB)

    def test_context_records_say_what_went(self):
        steps = ["init", "ctx", "0", "alloc", str(256 * MiB), "alloc", str(MiB), "alloc", str(MiB), "free",
                 "release", "0",
                 "ctx", "0", "alloc", str(64 * MiB), "reset", "0", "alloc", str(MiB), "release", "0"]
        p = self.run_probe(steps, {"CUMEMCAP_LIMIT": "1GiB", "CUMEMCAP_RELEASE": "never"})
        self.assertEqual(p.returncode, 0, p.err)
        self.assertEqual([s.get("r") for s in p.stdout_lines], [0, 0, 0, 0, 0, 0, 0, 0, 0])
        self.assertEqual([s["res"] for s in p.stdout_lines if s["op"] in ("release", "reset")], [0, 0, 0])
        recs = self.the_log(p)
        ctx = [{k: r[k] for k in ("gpu", "event", "freed_live", "freed_segments", "blocks", "live", "pooled",
                                  "reserved")} for r in recs if r["type"] == "context"]
        self.assertEqual(ctx, [
            # 256 MiB and 1 MiB still held; a whole 256 MiB segment and a packed 2 MiB one
            {"gpu": 0, "event": "released", "freed_live": 257 * MiB, "freed_segments": 258 * MiB,
             "blocks": 2, "live": 0, "pooled": 0, "reserved": 0},
            {"gpu": 0, "event": "reset", "freed_live": 64 * MiB, "freed_segments": 64 * MiB,
             "blocks": 1, "live": 0, "pooled": 0, "reserved": 0},
            {"gpu": 0, "event": "released", "freed_live": MiB, "freed_segments": 2 * MiB,
             "blocks": 1, "live": 0, "pooled": 0, "reserved": 0}])
        gpus = recs[-1]["gpus"]
        self.assertEqual((gpus[0]["live"], gpus[0]["reserved"]), (0, 0))

    def test_largest_request_is_the_request(self):
        # Pooled, 1 MiB + 1 byte gets a segment of 1 MiB + 64 KiB; the exit
        # record names what the program asked for.
        for pool in ("on", "off"):
            p = self.run_probe(["init", "ctx", "0", "alloc", str(MiB + 1), "alloc", str(4096)],
                               {"CUMEMCAP_POOL": pool})
            self.assertEqual(p.returncode, 0, p.err)
            gpus = self.the_log(p)[-1]["gpus"]
            self.assertEqual(gpus[0]["largest_request"], MiB + 1, pool)
            os.unlink(os.path.join(self.dir, "logprobe.py.%d.jsonl" % p.pid))

    def test_driver_oom_record(self):
        p = self.run_probe(["init", "ctx", "1", "alloc", str(3 * GiB)], {})
        self.assertEqual(p.returncode, 0, p.err)
        self.assertEqual(p.stdout_lines[0]["r"], 2)
        recs = self.the_log(p)
        oom = [r for r in recs if r["type"] == "driver_oom"]
        self.assertEqual(len(oom), 1, recs)
        self.assertEqual((oom[0]["gpu"], oom[0]["requested"], oom[0]["door"], oom[0]["reserved"]),
                         (1, 3 * GiB, "cuMemAlloc_v2", 0))
        self.assertIsNone(oom[0]["limit"])
        self.assertEqual(recs[-1]["gpus"][0]["driver_oom"], 1)
        self.assertIsNone(recs[-1]["gpus"][0]["limit"])

    def test_without_nvml_driver_used_is_null(self):
        # NVML that fails to start, then no NVML at all: no message either way.
        nolib = os.path.join(self.dir, "nonvml")
        os.mkdir(nolib)
        os.symlink(os.path.join(FAKE_DIR, "libcuda.so.1"), os.path.join(nolib, "libcuda.so.1"))
        cases = [({"FAKECUDA_NVML": "off"}, FAKE_DIR), ({"FAKECUDA_NVML": "na"}, FAKE_DIR)]
        if not ctypes.util.find_library("nvidia-ml"):
            cases.append(({}, nolib))
        for add, lib_dir in cases:
            with self.subTest(env=add, lib=lib_dir):
                for f in glob.glob(os.path.join(self.dir, "*.jsonl")):
                    os.unlink(f)
                p = self.start(["init", "ctx", "0", "alloc", str(64 * MiB), "sleep", "0.35"], add,
                               lib_dir=lib_dir)
                out, err = p.communicate(timeout=30)
                self.assertEqual((p.returncode, err), (0, ""))
                recs = self.the_log(p)
                samples = [r["gpus"][0] for r in recs if r["type"] == "sample"]
                self.assertGreaterEqual(len(samples), 2)
                for g in samples:
                    self.assertIsNone(g["driver_used"])
                    self.assertIsNone(g["context_overhead"])
                    self.assertEqual(g["reserved"], 64 * MiB)
                self.assertIsNone(recs[-1]["gpus"][0]["peak_driver_used"])
                # nvidia-smi's index comes from NVML: absent from every
                # per-GPU object when NVML cannot start, there when it runs
                # without per-process figures.
                no_nvml = add.get("FAKECUDA_NVML") == "off" or lib_dir == nolib
                per_gpu = [g for r in recs for g in r.get("gpus") or []] + [r for r in recs if "gpu" in r]
                self.assertGreater(len(per_gpu), 3)
                for g in per_gpu:
                    self.assertEqual("index" in g, not no_nvml, g)

    # ---- the file ----

    def test_default_path(self):
        # No CUMEMCAP_LOG: $TMPDIR/cumemcap-UID/PROGRAM.HOST.PID.jsonl (here
        # TMPDIR is this test's directory), in a 0700 directory.
        env = self.env({"TMPDIR": self.dir + "//"})
        del env["CUMEMCAP_LOG"]
        p = subprocess.Popen([sys.executable, self.script, "init", "ctx", "0", "alloc", str(2 * MiB)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=30)
        self.assertEqual((p.returncode, err), (0, ""))
        d = os.path.join(self.dir, "cumemcap-%d" % os.geteuid())
        path = os.path.join(d, "logprobe.py.%s.%d.jsonl" % (socket.gethostname(), p.pid))
        st = os.lstat(d)
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode) & 0o077), (os.geteuid(), 0))
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        recs = records(path)
        # No limit: the allocation went to the driver, no pooled segment.
        self.assertEqual([r["type"] for r in recs], ["start", "overhead", "exit"])
        self.assertEqual(recs[0]["argv"][1], self.script)
        self.assertEqual(recs[0]["log"], path)
        # A TMPDIR that is not an absolute path is not a directory anyone
        # meant: the default stays under /tmp (not run: it would write there).
        # A TMPDIR with a '%' is taken as it is, not as a template.
        pct = os.path.join(self.dir, "100%p")
        os.mkdir(pct)
        env["TMPDIR"] = pct
        p = subprocess.run([sys.executable, self.script, "init", "ctx", "0", "alloc", str(2 * MiB)],
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(os.listdir(pct), ["cumemcap-%d" % os.geteuid()])

    def test_existing_file_and_planted_link_are_not_touched(self):
        fixed = os.path.join(self.dir, "fixed.jsonl")
        with open(fixed, "w") as f:
            f.write("someone else's\n")
        victim = os.path.join(self.dir, "victim")
        open(victim, "w").close()
        link = os.path.join(self.dir, "link.jsonl")
        os.symlink(victim, link)
        for path in (fixed, link):
            p = self.run_probe(["init", "ctx", "0", "alloc", str(2 * MiB)], {"CUMEMCAP_LOG": path})
            self.assertEqual((p.returncode, p.err), (0, ""))
            # The suffix goes before .jsonl, so that *.jsonl globs still match.
            taken = path[:-len(".jsonl")] + ".1.jsonl"
            recs = records(taken)
            self.assertEqual((recs[0]["type"], recs[0]["pid"], recs[-1]["type"]), ("start", p.pid, "exit"))
            self.assertEqual(recs[0]["log"], taken)
            self.assertEqual(stat.S_IMODE(os.stat(taken).st_mode), 0o600)
        with open(fixed) as f:
            self.assertEqual(f.read(), "someone else's\n")
        self.assertEqual(os.path.getsize(victim), 0)
        self.assertTrue(os.path.islink(link))
        # and the next process takes .2
        p = self.run_probe(["init", "ctx", "0", "alloc", str(2 * MiB)], {"CUMEMCAP_LOG": fixed})
        self.assertEqual(records(os.path.join(self.dir, "fixed.2.jsonl"))[0]["pid"], p.pid)
        # A name without an extension takes its suffix at the end.
        bare = os.path.join(self.dir, "bare")
        open(bare, "w").close()
        p = self.run_probe(["init", "ctx", "0", "alloc", str(2 * MiB)], {"CUMEMCAP_LOG": bare})
        self.assertEqual(records(bare + ".1")[0]["pid"], p.pid)

    def test_shared_directory_must_hold_a_private_one(self):
        shared = os.path.join(self.dir, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o1777)                       # like /tmp
        elsewhere = os.path.join(self.dir, "elsewhere")
        os.mkdir(elsewhere)
        mine = os.path.join(shared, "cm-%d" % os.geteuid())
        tmpl = os.path.join(shared, "cm-%u", "%n.%p.jsonl")
        steps = ["init", "ctx", "0", "alloc", str(2 * MiB), "print", "done"]
        base = self.run_probe(steps, {"CUMEMCAP_LOG": "off"})
        # 1. made 0700 and used
        p = self.run_probe(steps, {"CUMEMCAP_LOG": tmpl})
        self.assertEqual((p.returncode, p.err), (0, ""))
        self.assertEqual(stat.S_IMODE(os.lstat(mine).st_mode), 0o700)
        self.assertEqual(records(os.path.join(mine, "logprobe.py.%d.jsonl" % p.pid))[0]["type"], "start")
        # 2. someone else's, 3. a link, 4. writable by others: refused, one line, program unchanged
        for setup, says in ((lambda: os.chown(mine, 65534, 65534), "is owned by uid 65534, not %d" % os.geteuid()),
                            (lambda: os.symlink(elsewhere, mine), "is a symbolic link"),
                            (lambda: os.chmod(mine, 0o777), "is writable by other users")):
            with self.subTest(says=says):
                subprocess.run(["rm", "-rf", mine], check=True)
                os.mkdir(mine, 0o700) if "link" not in says else None
                setup()
                p = self.run_probe(steps, {"CUMEMCAP_LOG": tmpl})
                self.assertEqual(p.seen, base.seen)
                self.assertEqual(p.err.count("\n"), 1, p.err)
                self.assertRegex(p.err, r"^cumemcap: log %s: %s %s" % (
                    re.escape(os.path.join(mine, "logprobe.py.%d.jsonl" % p.pid)), re.escape(mine), says))
                self.assertTrue(p.err.endswith("; logging is off\n"), p.err)
                self.assertEqual(os.listdir(elsewhere), [])
                if "link" not in says:
                    self.assertEqual(os.listdir(mine), [])

    def test_no_spelling_of_a_path_escapes_the_shared_directory_check(self):
        # Another user's link where our private directory should be: no
        # spelling of the template ("//", "/./", a link to the shared
        # directory) may reach through it, for the log or the metrics.
        shared = os.path.join(self.dir, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o1777)
        elsewhere = os.path.join(self.dir, "elsewhere")
        os.mkdir(elsewhere)
        os.symlink(elsewhere, os.path.join(shared, "cm-%d" % os.geteuid()))
        via = os.path.join(self.dir, "via")
        os.symlink(shared, via)              # a link in a private directory is followed, then checked
        steps = ["init", "ctx", "0", "alloc", str(2 * MiB), "sleep", "0.3", "print", "done"]
        base = self.run_probe(steps, {"CUMEMCAP_LOG": "off"})
        for tmpl in (shared + "/cm-%u//%p.jsonl", shared + "/cm-%u/./%p.jsonl",
                     shared + "//cm-%u/%p.jsonl", shared + "/./cm-%u/.//%p.jsonl",
                     via + "/cm-%u/%p.jsonl", via + "/../shared/cm-%u/%p.jsonl"):
            for var in ("CUMEMCAP_LOG", "CUMEMCAP_METRICS"):
                with self.subTest(tmpl=tmpl, var=var):
                    env = {var: tmpl}
                    if var == "CUMEMCAP_METRICS":
                        env.update({"CUMEMCAP_LOG": "off", "CUMEMCAP_LOG_INTERVAL": "0.1"})
                    p = self.run_probe(steps, env)
                    self.assertEqual(p.seen, base.seen)
                    self.assertEqual(p.err.count("\n"), 1, p.err)
                    self.assertIn("is a symbolic link (a shared directory must hold a private one)", p.err)
                    self.assertEqual(os.listdir(elsewhere), [])

    def test_unwritable_path_one_line_program_unchanged(self):
        afile = os.path.join(self.dir, "afile")
        open(afile, "w").close()
        steps = ["init", "ctx", "0", "alloc", str(2 * MiB), "alloc", str(8 * GiB), "print", "done"]
        base = self.run_probe(steps, {"CUMEMCAP_LOG": "off"})
        p = self.run_probe(steps, {"CUMEMCAP_LOG": os.path.join(afile, "sub", "%p.jsonl")})
        self.assertEqual(p.seen, base.seen)
        self.assertTrue(p.out.endswith("done\n"))
        self.assertEqual(p.err, "cumemcap: log %s/sub/%d.jsonl: cannot create %s/sub: not a directory; "
                         "logging is off\n" % (afile, p.pid, afile))

    def test_unwritable_metrics_path_one_line_program_unchanged(self):
        # As the log's: one line naming the path, why, and the errno text
        # when there is one (the same sentence as the log's, made by one
        # function since the log was split).
        afile = os.path.join(self.dir, "afile")
        open(afile, "w").close()
        os.mkdir(os.path.join(self.dir, "m.prom.tmp"))
        steps = ["init", "ctx", "0", "alloc", str(2 * MiB), "sleep", "0.5", "print", "done"]
        base = self.run_probe(steps, {"CUMEMCAP_LOG": "off"})
        for path, why in [(os.path.join(afile, "sub", "m.prom"),
                           "cannot create %s/sub: not a directory" % afile),
                          (os.path.join(afile, "m.prom"), "cannot create %s: not a directory" % afile),
                          # The temporary file's name is taken by a directory: no sentence,
                          # only the errno text.
                          (os.path.join(self.dir, "m.prom"), "file exists")]:
            with self.subTest(path=path):
                p = self.run_probe(steps, {"CUMEMCAP_LOG": "off", "CUMEMCAP_METRICS": path,
                                           "CUMEMCAP_LOG_INTERVAL": "0.1"})
                self.assertEqual(p.seen, base.seen)
                self.assertEqual(p.err, "cumemcap: metrics %s: %s; metrics are off\n" % (path, why))

    def test_full_disk_turns_logging_off_once(self):
        # The file may grow to 4000 bytes (RLIMIT_FSIZE): the start record
        # fits, then the events do not. SIGXFSZ keeps its default (it
        # would kill the program): only the log may notice.
        import resource
        def limit():
            resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))
        steps = ["init", "ctx", "0", "threads", "1", "60", str(8 * GiB), "print", "done"]
        p = self.run_probe(steps, {"CUMEMCAP_LIMIT": "1GiB"}, preexec_fn=limit)
        self.assertEqual(p.returncode, 0, p.err)
        self.assertTrue(p.out.endswith("done\n"))
        self.assertEqual(p.stdout_lines[0]["refused"], 60)
        self.assertEqual(p.err.count("\n"), 1, p.err)
        self.assertRegex(p.err, r"^cumemcap: log .*logprobe\.py\.%d\.jsonl: "
                         r"(file too large|short write .*); logging is off\n$" % p.pid)
        path = os.path.join(self.dir, "logprobe.py.%d.jsonl" % p.pid)
        self.assertLessEqual(os.path.getsize(path), 4000)
        with open(path) as f:
            lines = f.read().split("\n")
        whole = [json.loads(l) for l in lines[:-1]]     # a cut last line is allowed
        self.assertEqual(whole[0]["type"], "start")
        self.assertGreater(sum(r["type"] == "refusal" for r in whole), 3)

    def test_file_size_limit_set_later_turns_logging_off(self):
        # The limit comes after the log was opened, below the file's size:
        # the program still never gets the SIGXFSZ a record's write raises.
        steps = ["init", "ctx", "0", "alloc", str(2 * MiB), "sleep", "0.3", "fsize", "1",
                 "threads", "1", "60", str(8 * GiB), "print", "done"]
        p = self.run_probe(steps, {"CUMEMCAP_LIMIT": "1GiB"})
        self.assertEqual(p.returncode, 0, p.err)
        self.assertTrue(p.out.endswith("done\n"))
        self.assertRegex(p.err, r"^cumemcap: log .*logprobe\.py\.%d\.jsonl: "
                         r"(file too large|short write .*); logging is off\n$" % p.pid)

    def test_off_and_no_cuda_write_nothing(self):
        p = self.run_probe(["init", "ctx", "0", "alloc", str(2 * MiB), "handlers"], {"CUMEMCAP_LOG": "off"})
        self.assertEqual((p.returncode, p.err), (0, ""))
        self.assertEqual(os.listdir(self.dir), ["logprobe.py"])
        # off: no handlers either
        self.assertEqual((p.stdout_lines[-1]["int"], p.stdout_lines[-1]["term"]), (True, True))
        p = self.run_probe(["handlers", "print", "done"], {})
        self.assertEqual((p.returncode, p.err, p.out.splitlines()[-1]), (0, "", "done"))
        self.assertEqual(os.listdir(self.dir), ["logprobe.py"])
        # a process that never used CUDA keeps its signal dispositions
        self.assertEqual((p.stdout_lines[0]["int"], p.stdout_lines[0]["term"]), (True, True))

    def test_stderr_keeps_todays_lines(self):
        p = self.run_probe(["init", "ctx", "0", "alloc", str(512 * MiB), "alloc", str(768 * MiB)],
                           {"CUMEMCAP_LOG": "stderr", "CUMEMCAP_LIMIT": "1GiB"})
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.err,
                         "cumemcap: device 0: refused 768 MiB (cuMemAlloc_v2) at the limit: 812 MiB held (300 MiB of it "
                         "the driver's overhead) of 1 GiB\n"
                         "cumemcap: device 0 (0000:10:00.0): limit 1 GiB of 4 GiB; peak held 512 MiB; peak footprint "
                         "812 MiB, held at exit 512 MiB; 1 allocations, 0 frees, 1 refused at the limit\n")
        self.assertEqual(os.listdir(self.dir), ["logprobe.py"])
        # and after SIGTERM, from the handler
        p = self.start(["init", "ctx", "0", "alloc", str(1536 * MiB), "wait"],
                       {"CUMEMCAP_LOG": "stderr"})
        p.stdout.readline()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, -signal.SIGTERM)
        self.assertEqual(err, "cumemcap: device 0 (0000:10:00.0): limit none of 4 GiB; peak held 1.50 GiB; "
                         "peak footprint 1.79 GiB, held at exit 1.50 GiB; 1 allocations, 0 frees, 0 refused at the limit\n")

    # ---- the exit summary ----

    def exit_record(self, p):
        recs = self.the_log(p)
        self.check_common(recs, p.pid)
        self.assertEqual(sum(r["type"] == "exit" for r in recs), 1)
        return recs[-1]

    def test_exit_from_another_thread(self):
        p = self.run_probe(["init", "ctx", "0", "alloc", str(256 * MiB), "exitthread", "3"])
        self.assertEqual(p.returncode, 3, p.err)
        ex = self.exit_record(p)
        self.assertEqual((ex["reason"], ex["gpus"][0]["peak_reserved"], ex["gpus"][0]["allocs"]),
                         ("exit", 256 * MiB, 1))

    def test_fatal_signals(self):
        for sig in (signal.SIGTERM, signal.SIGSEGV, signal.SIGHUP):
            with self.subTest(signal=sig.name):
                for f in glob.glob(os.path.join(self.dir, "*.jsonl")):
                    os.unlink(f)
                steps = ["init", "ctx", "0", "alloc", str(256 * MiB), "sleep", "0.25"]
                p = self.start(steps + (["segv"] if sig == signal.SIGSEGV else ["wait"]))
                if sig != signal.SIGSEGV:
                    p.stdout.readline()
                    p.stdout.readline()
                    p.send_signal(sig)
                out, err = p.communicate(timeout=30)
                self.assertEqual(p.returncode, -sig, err)   # still killed by the signal
                ex = self.exit_record(p)
                self.assertEqual((ex["reason"], ex["signal"], ex["signal_name"]), ("signal", sig, sig.name))
                g = ex["gpus"][0]
                self.assertEqual((g["peak_reserved"], g["reserved"], g["live"], g["allocs"]),
                                 (256 * MiB, 256 * MiB, 256 * MiB, 1))
                self.assertEqual(g["peak_driver_used"], 256 * MiB + 300 * MiB)

    def test_ignored_signal_stays_ignored(self):
        # Under nohup, SIGHUP is ignored: the shim's handlers must not make
        # it fatal. The program lives on and exits normally.
        def ignore_hup():
            self.default_signals()
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
        p = self.start(["init", "ctx", "0", "alloc", str(2 * MiB), "sleep", "0.3", "hup", "sleep", "0.3",
                        "print", "alive"], preexec_fn=ignore_hup)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out.splitlines()[-1], "alive")
        self.assertEqual(self.exit_record(p)["reason"], "exit")

    def test_python_keeps_keyboardinterrupt(self):
        # Handlers go in at the first GPU use, over Python's own: Ctrl-C
        # still raises KeyboardInterrupt (chained), and is no exit.
        p = self.run_probe(["handlers", "init", "ctx", "0", "alloc", str(2 * MiB), "sigint", "handlers"])
        self.assertEqual((p.returncode, p.err), (0, ""))
        self.assertEqual([p.stdout_lines[0]["int"], p.stdout_lines[2]["caught"]], [True, True])
        ex = self.exit_record(p)
        self.assertEqual(ex["reason"], "exit")

    # ---- threads, fork, metrics ----

    def test_lines_never_torn_by_threads(self):
        p = self.run_probe(["init", "ctx", "0", "threads", "8", "110", str(2 * GiB)],
                           {"CUMEMCAP_LIMIT": "1GiB", "CUMEMCAP_LOG_INTERVAL": "0.1"})
        self.assertEqual((p.returncode, p.err), (0, ""))
        self.assertEqual((p.stdout_lines[0]["refused"], p.stdout_lines[0]["other"]), (880, 0))
        recs = self.the_log(p)            # every line parses and ends with \n
        self.check_common(recs, p.pid)
        ref = [r for r in recs if r["type"] == "refusal"]
        self.assertEqual(len(ref), 880)
        self.assertTrue(all(r["requested"] == 2 * GiB and r["limit"] == GiB for r in ref))
        self.assertEqual((recs[-1]["gpus"][0]["refusals"], recs[-1]["events_dropped"]), (880, 0))

    def test_event_storm_is_capped_and_counted(self):
        # 1000 event records a second at most; the rest are counted.
        p = self.run_probe(["init", "ctx", "0", "threads", "2", "4000", str(2 * GiB)], {"CUMEMCAP_LIMIT": "1GiB"})
        self.assertEqual((p.returncode, p.err), (0, ""))
        self.assertEqual(p.stdout_lines[0]["refused"], 8000)
        recs = self.the_log(p)
        ex = recs[-1]
        written = sum(r["type"] == "refusal" for r in recs)
        seconds = ex["t"] - recs[0]["t"]
        self.assertEqual(written + ex["events_dropped"], 8000)
        self.assertEqual(ex["gpus"][0]["refusals"], 8000)
        # the budget is for every event record: the overhead learned is one
        events = sum(r["type"] not in ("start", "sample", "exit") for r in recs)
        self.assertGreaterEqual(events, 1000)
        self.assertLessEqual(events, 1000 * (int(seconds) + 2) + 50)

    def test_fork_child_writes_its_own_or_none(self):
        p = self.run_probe(["init", "ctx", "0", "alloc", str(2 * MiB), "fork", "sleep", "0.2"])
        self.assertEqual((p.returncode, p.err), (0, ""))
        self.assertEqual(p.stdout_lines[1]["status"], 0)   # the child's alloc failed, as on a real driver
        recs = self.the_log(p)             # only the parent's file, only the parent's records
        self.check_common(recs, p.pid)
        self.assertEqual(sum(r["type"] == "exit" for r in recs), 1)

    def test_fork_child_keeps_a_reused_descriptor(self):
        # The program closed the log's descriptor and opened its own file
        # under the same number: the child's copy is the program's.
        log = os.path.join(self.dir, "%p.jsonl")
        mine = os.path.join(self.dir, "mine.txt")
        p = self.run_probe(["init", "ctx", "0", "alloc", str(2 * MiB), "reusefd", mine],
                           {"CUMEMCAP_LOG": log})
        self.assertEqual(p.returncode, 0, p.err)
        self.assertEqual(p.stdout_lines[-1]["status"], 0, "the child's write failed")
        with open(mine) as f:
            self.assertEqual(f.read(), "child\n")

    def test_metrics_file_well_formed_and_replaced_whole(self):
        steps = ["init", "ctx", "0", "alloc", str(512 * MiB), "readmetrics", "@", "0.7"]
        # The probe learns its own path from its pid: %p expands to it.
        script = os.path.join(self.dir, "metricsprobe.py")
        with open(script, "w") as f:
            f.write(PROBE.replace('path, secs = args.pop(0), float(args.pop(0))',
                                  'path, secs = args.pop(0).replace("@", os.environ["M"] % os.getpid()), '
                                  'float(args.pop(0))'))
        env = self.env({"CUMEMCAP_METRICS": os.path.join(self.dir, "m-%p.prom"),
                        "M": os.path.join(self.dir, "m-%d.prom"), "CUMEMCAP_LIMIT": "1GiB"})
        p = subprocess.Popen([sys.executable, script, *steps], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=30)
        self.assertEqual((p.returncode, err), (0, ""))
        seen = json.loads(out.splitlines()[-1])["seen"]
        self.assertGreaterEqual(len(seen), 20)
        # replaced by rename (a new inode each time), not rewritten in place
        self.assertGreaterEqual(sum(a[0] != b[0] for a, b in zip(seen, seen[1:])), 3)
        families = ["live_bytes", "pooled_bytes", "reserved_bytes", "async_reserved_bytes",
                    "driver_used_bytes", "context_overhead_bytes", "limit_bytes", "capacity_bytes",
                    "peak_reserved_bytes", "allocations_total", "frees_total", "refusals_total",
                    "driver_oom_total", "footprint_bytes", "overhead_bytes",
                    "peak_footprint_bytes"]
        for ino, text, res in seen:
            self.assertTrue(text.endswith("\n"), text)         # never a partial file
            values = {}
            for line in text.splitlines():
                if line.startswith("# HELP ") or line.startswith("# TYPE "):
                    continue
                m = re.fullmatch(r'(cumemcap_[a-z_]+)\{pid="%d",program="metricsprobe\.py",host="%s",gpu="0",'
                                 r'cuda_device="0",uuid="%s",UUID="%s"\} (\d+)'
                                 % (p.pid, re.escape(socket.gethostname()), UUID0, UUID0), line)
                self.assertTrue(m, line)
                values[m.group(1)[len("cumemcap_"):]] = int(m.group(2))
            for fam in families:
                self.assertIn("# TYPE cumemcap_%s %s\n" % (fam, "counter" if fam.endswith("_total") else "gauge"),
                              text)
                self.assertIn("# HELP cumemcap_%s " % fam, text)
            self.assertEqual(values["reserved_bytes"], 512 * MiB)
            self.assertEqual(values["reserved_bytes"], res)
            self.assertEqual(values["driver_used_bytes"], res + 300 * MiB)
            self.assertEqual(values["context_overhead_bytes"], 300 * MiB)
            # The footprint cap: what the limit counts, the fake's 300 MiB context included.
            self.assertEqual(values["overhead_bytes"], 300 * MiB)
            self.assertEqual(values["footprint_bytes"], res + values["overhead_bytes"])
            self.assertGreaterEqual(values["peak_footprint_bytes"], values["footprint_bytes"])
            self.assertEqual((values["limit_bytes"], values["capacity_bytes"], values["allocations_total"]),
                             (GiB, 4 * GiB, 1))
        # removed at exit, with the companion its lock was on
        self.assertEqual([f for f in os.listdir(self.dir) if "m-" in f], [])


class FakeNvml(unittest.TestCase):
    """The fake libnvidia-ml.so.1 itself, without the shim."""

    PROG = r'''
import ctypes, json, os
cu = ctypes.CDLL("libcuda.so.1")
nv = ctypes.CDLL("libnvidia-ml.so.1")
class Proc(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong), ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]
class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
out = {}
n = ctypes.c_uint()
out["before_init"] = nv.nvmlDeviceGetCount_v2(ctypes.byref(n))
assert nv.nvmlInit_v2() == 0
assert nv.nvmlDeviceGetCount_v2(ctypes.byref(n)) == 0
out["count"] = n.value
def procs(h):
    cnt = ctypes.c_uint(4)
    arr = (Proc * 4)()
    assert nv.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(cnt), arr) == 0
    return [[arr[i].pid, arr[i].used] for i in range(cnt.value)]
def state():
    res = []
    for i in range(n.value):
        h = ctypes.c_void_p()
        assert nv.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0
        buf = ctypes.create_string_buffer(96)
        assert nv.nvmlDeviceGetUUID(h, buf, 96) == 0
        h2 = ctypes.c_void_p()
        assert nv.nvmlDeviceGetHandleByUUID(buf.value, ctypes.byref(h2)) == 0 and h2.value == h.value
        m = Mem()
        assert nv.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) == 0
        res.append({"uuid": buf.value.decode(), "total": m.total, "used": m.used, "free": m.free,
                    "procs": procs(h)})
    return res
out["idle"] = state()
h = ctypes.c_void_p()
out["unknown_uuid"] = nv.nvmlDeviceGetHandleByUUID(b"GPU-00000000-0000-0000-0000-000000000000", ctypes.byref(h))
assert cu.cuInit(0) == 0
ctx = ctypes.c_void_p()
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 1) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
p = ctypes.c_uint64()
assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(100 << 20)) == 0
out["busy"] = state()
nv.nvmlDeviceGetHandleByIndex_v2(1, ctypes.byref(h))
cnt = ctypes.c_uint(0)
out["too_small"] = [nv.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(cnt), None), cnt.value]
out["pid"] = os.getpid()
out["shutdown"] = [nv.nvmlShutdown(), nv.nvmlShutdown()]
print(json.dumps(out))
'''

    def test_fake_nvml_reports_the_fake_driver(self):
        env = {k: v for k, v in os.environ.items()
               if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_")) and k not in LABEL_VARS}
        u0, u1 = "GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f", "GPU-1c0ffee0-0000-4000-8000-000000000002"
        env.update({"LD_LIBRARY_PATH": FAKE_DIR, "FAKECUDA_DEVICES": "4GiB,1.5GiB",
                    "FAKECUDA_UUIDS": "%s,%s" % (u0, u1), "FAKECUDA_OTHER_USED": "0,256MiB",
                    "FAKECUDA_CTX_OVERHEAD": "300MiB"})
        if EXTRA:
            env["LD_PRELOAD"] = EXTRA
        p = subprocess.run([sys.executable, "-c", self.PROG], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        o = json.loads(p.stdout)
        self.assertEqual((o["before_init"], o["count"], o["unknown_uuid"]), (1, 2, 6))
        self.assertEqual(o["idle"], [
            {"uuid": u0, "total": 4 * GiB, "used": 0, "free": 4 * GiB, "procs": []},
            {"uuid": u1, "total": 1536 * MiB, "used": 256 * MiB, "free": 1280 * MiB, "procs": []}])
        self.assertEqual(o["busy"][0]["procs"], [])                 # no context there
        mine = 100 * MiB + 300 * MiB
        self.assertEqual(o["busy"][1], {"uuid": u1, "total": 1536 * MiB, "used": 256 * MiB + mine,
                                        "free": 1536 * MiB - 256 * MiB - mine, "procs": [[o["pid"], mine]]})
        self.assertEqual(o["too_small"], [7, 1])                    # NVML_ERROR_INSUFFICIENT_SIZE
        self.assertEqual(o["shutdown"], [0, 1])


if __name__ == "__main__":
    unittest.main(verbosity=2)
