#!/usr/bin/env python3
"""Groups end to end: several processes under the shim share one
budget per GPU through a book in their own temporary CUMEMCAP_GROUP_DIR.

Each member is a `python3` program that drives the fake driver through
ctypes and takes commands on stdin, one per line, answering one JSON line
each, so a test can order what the members do: `alloc MIB [DEV]`, `free`
(the last block), `hold` (answer and wait for the next line), `exit`.
Checked: a budget shared by processes started with exec and with fork, and
by processes that see the GPUs in different orders (CUDA_VISIBLE_DEVICES:
the books are per UUID); a member SIGKILLed while holding memory and while
allocating from several threads; 64 members at once; waiting at the limit
(woken by a free, by a death, by the per-process limit's free; timing
out); a book that may not be used (another owner, a group-readable mode, a
corrupt or foreign-version file, a symbolic link) stopping the program
before main; the log's and the metrics' group figures.

Usage: test_group.py SHIM FAKE_DIR LAUNCHER
"""
import glob
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from harness import end_all, group_env

SHIM, FAKE_DIR, LAUNCHER = sys.argv[1:4]
del sys.argv[1:4]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
MiB = 1 << 20
GiB = 1 << 30
OOM = 2  # CUDA_ERROR_OUT_OF_MEMORY

MEMBER = r'''
import ctypes, json, os, sys, threading, time
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
n = ctypes.c_int()
assert cu.cuDeviceGetCount(ctypes.byref(n)) == 0
ctxs = []
for d in range(n.value):
    c = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), d) == 0
    ctxs.append(c)
ptrs = []
lock = threading.Lock()
def alloc(mib, dev=0):
    assert cu.cuCtxSetCurrent(ctxs[dev]) == 0
    p = ctypes.c_uint64()
    t = time.monotonic()
    r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(int(mib * (1 << 20))))
    if r == 0:
        with lock:
            ptrs.append((dev, p.value))
    return r, time.monotonic() - t
def free():
    with lock:
        dev, p = ptrs.pop()
    assert cu.cuCtxSetCurrent(ctxs[dev]) == 0
    return cu.cuMemFree_v2(ctypes.c_uint64(p))
said = threading.Lock()
def say(**kw):
    # One write per line, under a lock: a `bg` thread's answer and the
    # main loop's must not interleave (print writes the text and the
    # newline separately: two answers once shared a line under TSan).
    with said:
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()
say(op="ready", pid=os.getpid(), devices=n.value)
for line in sys.stdin:
    w = line.split()
    if not w:
        continue
    if w[0] == "alloc":
        r, took = alloc(float(w[1]), int(w[2]) if len(w) > 2 else 0)
        say(op="alloc", r=r, took=took)
    elif w[0] == "free":
        say(op="free", r=free())
    elif w[0] == "spin":          # N threads allocate and free MIB forever
        def loop(mib):
            while True:
                r, _ = alloc(mib)
                if r == 0:
                    free()
        for _ in range(int(w[1])):
            threading.Thread(target=loop, args=(float(w[2]),), daemon=True).start()
        say(op="spin")
    elif w[0] == "bg":            # allocate in a thread; answer when it returns
        def later(mib):
            r, took = alloc(mib)
            say(op="bg", r=r, took=took)
        threading.Thread(target=later, args=(float(w[1]),)).start()
        say(op="started")
    elif w[0] == "info":          # cuMemGetInfo on GPU 0
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        assert cu.cuCtxSetCurrent(ctxs[0]) == 0
        r = cu.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t))
        say(op="info", r=r, free=f.value, total=t.value)
    elif w[0] == "nvml":          # NVML's memory info of GPU 0, as pynvml asks
        ml = ctypes.CDLL("libnvidia-ml.so.1")
        assert ml.nvmlInit_v2() == 0
        h = ctypes.c_void_p()
        assert ml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0
        m = (ctypes.c_ulonglong * 3)()   # nvmlMemory_t: total, free, used
        r = ml.nvmlDeviceGetMemoryInfo(h, m)
        say(op="nvml", r=r, total=m[0], free=m[1], used=m[2])
    elif w[0] == "total":         # cuDeviceTotalMem of GPU 0
        b = ctypes.c_size_t()
        r = cu.cuDeviceTotalMem_v2(ctypes.byref(b), 0)
        say(op="total", r=r, bytes=b.value)
    elif w[0] == "getenv":
        say(op="getenv", value=os.environ.get(w[1]))
    elif w[0] == "fork":          # before cuInit in the child? no: fork, child allocates, parent waits
        pass
    elif w[0] == "exit":
        break
'''

# Forks before touching CUDA (a child forked after cuInit cannot use the
# driver), then parent and child each allocate and report.
FORKER = r'''
import ctypes, json, os, sys, time
mib = float(sys.argv[1])
pid = os.fork()
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
c = ctypes.c_void_p()
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), 0) == 0
assert cu.cuCtxSetCurrent(c) == 0
if pid:
    time.sleep(0.3)               # the child first
p = ctypes.c_uint64()
r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(int(mib * (1 << 20))))
print(json.dumps({"who": "parent" if pid else "child", "r": r}), flush=True)
if pid:
    os.waitpid(pid, 0)
else:
    time.sleep(0.6)               # hold it while the parent asks
    os._exit(0)
'''


class Group(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="cumemcap-group-")
        self.dir = self.tmp.name
        self.procs = []

    def tearDown(self):
        end_all(self.procs)
        self.tmp.cleanup()

    def env(self, **extra):
        return group_env(SHIM, FAKE_DIR, self.dir, **extra)

    def member(self, **extra):
        env = self.env(**extra)
        p = subprocess.Popen([sys.executable, "-c", MEMBER], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        ready = self.read(p)
        self.assertEqual(ready["op"], "ready", ready)
        return p

    def read(self, p, timeout=20):
        box = []
        t = threading.Thread(target=lambda: box.append(p.stdout.readline()))
        t.start()
        t.join(timeout)
        if not box or not box[0]:
            err = ""
            if p.poll() is not None:
                err = p.stderr.read()
            self.fail("member %d said nothing (stderr: %s)" % (p.pid, err))
        return json.loads(box[0])

    def ask(self, p, line, timeout=20):
        p.stdin.write(line + "\n")
        p.stdin.flush()
        return self.read(p, timeout)

    # ---- a shared budget --------------------------------------------------------------------

    def test_budget_shared_by_exec(self):
        """Two members of a 1 GiB group: the second's 600 MiB does not fit
        beside the first's until the first frees."""
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        b = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(a, "alloc 600")["r"], 0)
        self.assertEqual(self.ask(b, "alloc 600")["r"], OOM)
        self.assertEqual(self.ask(b, "alloc 400")["r"], 0)        # what is left fits
        self.assertEqual(self.ask(a, "free")["r"], 0)
        self.assertEqual(self.ask(b, "alloc 600")["r"], 0)
        self.assertEqual(self.ask(a, "alloc 100")["r"], OOM)      # 1000 MiB of 1024 held by b

    def test_refusal_line_names_the_group(self):
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB", CUMEMCAP_LOG="stderr")
        self.assertEqual(self.ask(a, "alloc 800")["r"], 0)
        self.assertEqual(self.ask(a, "alloc 800")["r"], OOM)
        a.stdin.write("exit\n")
        a.stdin.flush()
        a.wait()
        err = a.stderr.read()
        self.assertIn("refused 800 MiB (cuMemAlloc_v2) at the limit of group g: its members hold", err)

    def test_other_group_and_no_group_are_apart(self):
        """Another group's and a non-member's allocations are not counted."""
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        b = self.member(CUMEMCAP_GROUP="h", CUMEMCAP_GROUP_LIMIT="1GiB")
        c = self.member(CUMEMCAP_LIMIT="1GiB")
        for p in (a, b, c):
            self.assertEqual(self.ask(p, "alloc 900")["r"], 0)

    def test_process_limit_and_group_limit_both_hold(self):
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="2GiB", CUMEMCAP_LIMIT="512MiB")
        self.assertEqual(self.ask(a, "alloc 600")["r"], OOM)      # its own limit
        self.assertEqual(self.ask(a, "alloc 500")["r"], 0)
        b = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="2GiB")
        self.assertEqual(self.ask(b, "alloc 1600")["r"], OOM)     # the group's
        self.assertEqual(self.ask(b, "alloc 1500")["r"], 0)

    def test_members_are_told_the_groups_capacity(self):
        """cuMemGetInfo and NVML tell a member the group's budget as the
        total and what the other members leave of it as free, with or
        without a limit of its own; the framework hints apply as under a
        process limit."""
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(a, "alloc 700")["r"], 0)
        for own in ({}, {"CUMEMCAP_LIMIT": "1GiB"}):
            with self.subTest(own=own):
                b = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB", **own)
                info = self.ask(b, "info")
                self.assertEqual((info["r"], info["total"]), (0, GiB), info)
                # a holds 700 MiB and at most two chunks of spare (4 MiB
                # each under a 1 GiB budget); b's own spare is b's.
                self.assertLessEqual(info["free"], GiB - 700 * MiB + 8 * MiB, info)
                self.assertGreaterEqual(info["free"], GiB - 700 * MiB - 8 * MiB, info)
                self.assertEqual(self.ask(b, "total")["bytes"], GiB)
                nvml = self.ask(b, "nvml")
                self.assertEqual((nvml["r"], nvml["total"], nvml["free"]), (0, GiB, info["free"]), nvml)
                self.assertEqual(nvml["used"], GiB - info["free"], nvml)
                self.assertEqual(self.ask(b, "alloc 400")["r"], OOM)   # what it was told is true
                self.assertEqual(self.ask(b, "alloc %d" % (info["free"] // MiB - 8))["r"], 0)
                self.assertEqual(self.ask(b, "getenv XLA_PYTHON_CLIENT_PREALLOCATE")["value"], "false")
                self.assertEqual(self.ask(b, "free")["r"], 0)
                b.stdin.write("exit\n")
                b.stdin.flush()
                self.assertEqual(b.wait(20), 0)

    def test_a_later_members_other_budget_is_named(self):
        """The book's budget holds for a member that gives another: one
        line says so, with both values; the same budget says nothing."""
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(a, "alloc 100")["r"], 0)
        for mine, line in (("2GiB", "cumemcap: CUMEMCAP_GROUP=g: GPU 0: the group's budget holds: 1 GiB, "
                                    "not the 2 GiB of CUMEMCAP_GROUP_LIMIT (the group's first member "
                                    "set it; cumemcap group set changes it)\n"),
                           ("1GiB", "")):
            with self.subTest(mine=mine):
                b = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT=mine)
                self.assertEqual(self.ask(b, "alloc 1000")["r"], OOM)    # 1 GiB less a's 100 MiB
                b.stdin.write("exit\n")
                b.stdin.flush()
                self.assertEqual(b.wait(20), 0)
                self.assertEqual(b.stderr.read(), line)

    def test_budget_shared_after_fork(self):
        """A child forked from a member takes a slot of its own: parent and
        child together stay within the budget."""
        env = self.env(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        out = subprocess.run([sys.executable, "-c", FORKER, "600"], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        said = {d["who"]: d["r"] for d in map(json.loads, out.stdout.split("\n")[:-1])}
        self.assertEqual(said, {"child": 0, "parent": OOM}, out.stdout + out.stderr)
        # Each alone would fit: the refusal is the group's.
        out = subprocess.run([sys.executable, "-c", FORKER, "400"], env=env, capture_output=True,
                             text=True, timeout=60)
        said = {d["who"]: d["r"] for d in map(json.loads, out.stdout.split("\n")[:-1])}
        self.assertEqual(said, {"child": 0, "parent": 0}, out.stdout + out.stderr)

    def test_books_follow_the_uuid_not_the_ordinal(self):
        """Members that see the GPUs in different orders charge the same
        physical GPU's budget."""
        two = dict(FAKECUDA_DEVICES="8GiB,8GiB", CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        a = self.member(CUDA_VISIBLE_DEVICES="1", **two)          # its 0 is physical 1
        b = self.member(CUDA_VISIBLE_DEVICES="1,0", **two)        # its 0 is physical 1, its 1 physical 0
        self.assertEqual(self.ask(a, "alloc 600 0")["r"], 0)
        self.assertEqual(self.ask(b, "alloc 600 0")["r"], OOM)
        self.assertEqual(self.ask(b, "alloc 600 1")["r"], 0)

    # ---- members that die ----------------------------------------------------------------------

    def test_killed_member_share_comes_back(self):
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        b = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(a, "alloc 800")["r"], 0)
        self.assertEqual(self.ask(b, "alloc 800")["r"], OOM)
        a.send_signal(signal.SIGKILL)
        a.wait()
        # The next refusal reaps: the whole budget is b's.
        self.assertEqual(self.ask(b, "alloc 1024")["r"], 0)

    def test_killed_while_allocating(self):
        """SIGKILL lands while four threads allocate and free: nothing of
        the dead member stays counted."""
        for _ in range(3):
            a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
            self.assertEqual(self.ask(a, "spin 4 3")["op"], "spin")
            time.sleep(0.3)
            a.send_signal(signal.SIGKILL)
            a.wait()
        b = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(b, "alloc 1024")["r"], 0)

    def test_sixty_four_members_at_once(self):
        """64 members start together, each takes 8 MiB of a 600 MiB budget
        (their spare would not all fit: the last ones wait until the others
        hand it back); all run, within seconds."""
        env = self.env(CUMEMCAP_GROUP="many", CUMEMCAP_GROUP_LIMIT="600MiB", CUMEMCAP_ON_LIMIT="wait:20")
        prog = MEMBER.replace('for line in sys.stdin:', 'r, _ = alloc(8)\nsay(op="got", r=r)\nsys.stdin.readline()\nfor line in []:')
        t = time.monotonic()
        ps = [subprocess.Popen([sys.executable, "-c", prog], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(64)]
        self.procs.extend(ps)
        got = []
        for p in ps:
            self.assertEqual(self.read(p, 60)["op"], "ready")
            got.append(self.read(p, 60)["r"])
        took = time.monotonic() - t
        for p in ps:
            p.stdin.write("\n")
            p.stdin.flush()
        for p in ps:
            self.assertEqual(p.wait(30), 0, p.stderr.read())
        self.assertEqual(got, [0] * 64)
        # Two slow cores start 64 Pythons (about 10 s); the books add little.
        # A sanitizer's runtime (LD_PRELOAD_EXTRA) makes each start slower.
        self.assertLess(took, 45 if not EXTRA else 240)
        # 64 more after them: the slots of those that exited are free again.
        ps2 = [subprocess.Popen([sys.executable, "-c", prog], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
        self.procs.extend(ps2)
        for p in ps2:
            self.assertEqual(p.wait(60), 0, p.stderr.read())

    # ---- waiting ---------------------------------------------------------------------------------

    def test_wait_woken_by_a_free(self):
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        b = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB", CUMEMCAP_ON_LIMIT="wait:30")
        self.assertEqual(self.ask(a, "alloc 800")["r"], 0)
        self.assertEqual(self.ask(b, "bg 800")["op"], "started")
        time.sleep(1.3)   # between two of its looks (a second apart)
        self.assertEqual(self.ask(a, "free")["r"], 0)
        t = time.monotonic()
        done = self.read(b)
        self.assertEqual(done["r"], 0)
        self.assertGreater(done["took"], 0.4)         # it did wait
        # Woken by the free, not by its next look (a second apart).
        self.assertLess(time.monotonic() - t, 0.6)

    def test_wait_woken_by_a_death(self):
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        b = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB", CUMEMCAP_ON_LIMIT="wait:30")
        self.assertEqual(self.ask(a, "alloc 800")["r"], 0)
        self.assertEqual(self.ask(b, "bg 800")["op"], "started")
        time.sleep(0.5)
        a.send_signal(signal.SIGKILL)
        a.wait()
        t = time.monotonic()
        self.assertEqual(self.read(b)["r"], 0)
        self.assertLess(time.monotonic() - t, 5)

    def test_wait_times_out(self):
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        b = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB", CUMEMCAP_ON_LIMIT="wait:0.7")
        self.assertEqual(self.ask(a, "alloc 800")["r"], 0)
        said = self.ask(b, "alloc 800")
        self.assertEqual(said["r"], OOM)
        self.assertGreater(said["took"], 0.65)
        self.assertLess(said["took"], 5)

    def test_wait_on_the_process_limit(self):
        """Without a group, a thread waits for the process's other threads."""
        a = self.member(CUMEMCAP_LIMIT="1GiB", CUMEMCAP_ON_LIMIT="wait:30")
        self.assertEqual(self.ask(a, "alloc 800")["r"], 0)
        self.assertEqual(self.ask(a, "bg 800")["op"], "started")
        time.sleep(0.5)
        a.stdin.write("free\n")
        a.stdin.flush()
        said = [self.read(a), self.read(a)]
        by = {d["op"]: d for d in said}
        self.assertEqual(by["free"]["r"], 0)
        self.assertEqual(by["bg"]["r"], 0)
        self.assertGreater(by["bg"]["took"], 0.4)
        self.assertLess(by["bg"]["took"], 1.0)        # woken by the free (it looks every second)

    def test_fail_is_the_default(self):
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(a, "alloc 800")["r"], 0)
        said = self.ask(a, "alloc 800")
        self.assertEqual(said["r"], OOM)
        self.assertLess(said["took"], 0.5)

    # ---- resizing while running -------------------------------------------------------------------

    def set_limit(self, size):
        out = subprocess.run([LAUNCHER, "group", "set", "g", "--limit", size, "--dir", self.dir],
                             capture_output=True, text=True, timeout=60, env=self.env())
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_growing_wakes_a_waiter(self):
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB", CUMEMCAP_ON_LIMIT="wait:30")
        self.assertEqual(self.ask(a, "alloc 800")["r"], 0)
        self.assertEqual(self.ask(a, "bg 800")["op"], "started")
        time.sleep(1.3)   # between two of its looks
        self.set_limit("2GiB")
        t = time.monotonic()
        self.assertEqual(self.read(a)["r"], 0)
        self.assertLess(time.monotonic() - t, 0.6)   # woken by the change

    def test_shrinking_refuses_growth_frees_nothing_live(self):
        log = os.path.join(self.dir, "a.jsonl")
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="2GiB", CUMEMCAP_POOL="on",
                        CUMEMCAP_LOG=log, CUMEMCAP_RELEASE="never")
        self.assertEqual(self.ask(a, "alloc 600")["r"], 0)
        self.assertEqual(self.ask(a, "alloc 600")["r"], 0)
        self.assertEqual(self.ask(a, "free")["r"], 0)      # 600 MiB cached in its arena
        self.set_limit("700MiB")
        # Within a second or two its worker gives the cached segment back;
        # what is live stays.
        deadline = time.monotonic() + 5
        cached_gone = False
        while time.monotonic() < deadline and not cached_gone:
            time.sleep(0.3)
            recs = [json.loads(l) for l in open(log)]
            cached_gone = any(r.get("type") == "segment" and r.get("op") == "release" for r in recs)
        self.assertTrue(cached_gone, "the cached segment was not released after the shrink")
        self.assertEqual(self.ask(a, "alloc 200")["r"], OOM)   # 600 + 200 > 700
        self.assertEqual(self.ask(a, "alloc 50")["r"], 0)
        self.set_limit("100MiB")                                # below what is live
        self.assertEqual(self.ask(a, "alloc 1")["r"], OOM)
        self.assertEqual(self.ask(a, "free")["r"], 0)           # the live blocks are still its own
        self.assertEqual(self.ask(a, "free")["r"], 0)
        a.stdin.write("exit\n")
        a.stdin.flush()
        a.wait()
        changes = [r for r in map(json.loads, open(log)) if r.get("type") == "group_change"]
        self.assertEqual([(c["old_limit"], c["new_limit"]) for c in changes],
                         [(2 * GiB, 700 * MiB), (700 * MiB, 100 * MiB)])
        self.assertEqual(changes[0]["by_uid"], os.getuid())
        self.assertEqual(changes[0]["group"], "g")

    # ---- books that may not be used ----------------------------------------------------------------

    def start_refused(self, why_part, **extra):
        env = self.env(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB", **extra)
        out = subprocess.run([sys.executable, "-c", "print('main ran')"], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 125, out.stderr)
        self.assertEqual(out.stdout, "")                     # stopped before main
        lines = out.stderr.strip().split("\n")
        self.assertEqual(len(lines), 1, out.stderr)
        self.assertIn("CUMEMCAP_GROUP=g", lines[0])
        self.assertIn(os.path.join(extra.get("CUMEMCAP_GROUP_DIR", self.dir), "cumemcap-group.g"), lines[0])
        self.assertIn(why_part, lines[0])

    def make_book(self):
        """A real book, made by a member that exits."""
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.ask(a, "alloc 1")
        a.stdin.write("exit\n")
        a.stdin.flush()
        a.wait()
        return os.path.join(self.dir, "cumemcap-group.g")

    def test_book_of_another_user(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to give the book away")
        path = self.make_book()
        os.chown(path, 65534, -1)
        self.start_refused("owned by uid 65534")

    def test_book_readable_by_others(self):
        path = self.make_book()
        os.chmod(path, 0o644)
        self.start_refused("mode 0644")

    def test_corrupt_book(self):
        path = self.make_book()
        with open(path, "r+b") as f:
            f.write(b"garbage!")
        self.start_refused("not a cumemcap book")

    def test_book_of_another_version(self):
        path = self.make_book()
        with open(path, "r+b") as f:
            f.seek(8)
            f.write(struct.pack("<I", 99))
        self.start_refused("version 99")

    def test_book_cut_short(self):
        path = self.make_book()
        os.truncate(path, 4096)
        self.start_refused("bytes")

    def test_book_is_a_symlink(self):
        other = os.path.join(self.dir, "elsewhere")
        open(other, "w").close()
        os.symlink(other, os.path.join(self.dir, "cumemcap-group.g"))
        self.start_refused("symbolic link")

    def test_directory_missing(self):
        self.start_refused("No such file", CUMEMCAP_GROUP_DIR=os.path.join(self.dir, "nope"))

    def test_book_is_private(self):
        path = self.make_book()
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        self.assertEqual([f for f in os.listdir(self.dir) if f.startswith(".")], [])   # no temporary left

    # ---- the node registry ------------------------------------------------------------------------

    def test_registry_only_once_a_gpu_is_used(self):
        """A capped process in no group registers for `cumemcap top` at its
        first GPU use; one that never uses CUDA writes nothing (a node-wide
        limit must leave such programs as they were)."""
        env = self.env(CUMEMCAP_LIMIT="1GiB")
        out = subprocess.run([sys.executable, "-c", "print('no CUDA')"], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(os.listdir(self.dir), [])
        a = self.member(CUMEMCAP_LIMIT="1GiB")
        self.assertEqual(self.ask(a, "alloc 1")["r"], 0)
        self.assertEqual(os.listdir(self.dir), ["cumemcap-node.%d" % os.geteuid()])

    # ---- what the log and the metrics say ---------------------------------------------------------

    def test_log_and_metrics(self):
        log = os.path.join(self.dir, "m.jsonl")
        prom = os.path.join(self.dir, "m.prom")
        a = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(a, "alloc 700")["r"], 0)
        b = self.member(CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB", CUMEMCAP_ON_LIMIT="wait:0.3",
                        CUMEMCAP_LOG=log, CUMEMCAP_METRICS=prom, CUMEMCAP_LOG_INTERVAL="0.1")
        self.assertEqual(self.ask(b, "alloc 200")["r"], 0)
        self.assertEqual(self.ask(b, "alloc 400")["r"], OOM)
        time.sleep(0.4)
        metrics = open(prom).read()
        b.stdin.write("exit\n")
        b.stdin.flush()
        b.wait()
        recs = [json.loads(l) for l in open(log)]
        start = recs[0]
        self.assertEqual(start["group"]["name"], "g")
        self.assertEqual(start["rules"]["on_limit"]["value"], "wait:0.3")
        wait = [r for r in recs if r.get("type") == "wait"]
        self.assertEqual(len(wait), 1, recs)
        self.assertEqual(wait[0]["outcome"], "timeout")
        exit_ = [r for r in recs if r.get("type") == "exit"][0]
        gpu = exit_["gpus"][0]
        self.assertEqual(gpu["group_limit"], GiB)
        self.assertEqual(gpu["waits"], 1)
        self.assertEqual(gpu["wait_timeouts"], 1)
        self.assertGreaterEqual(gpu["group_held"], 200 * MiB)
        samples = [r for r in recs if r.get("type") == "sample"]
        self.assertTrue(samples)
        s = samples[-1]["gpus"][0]
        self.assertGreaterEqual(s["group_used"], 900 * MiB)       # a's 700 and b's 200, and spare
        self.assertLessEqual(s["group_used"], GiB)
        self.assertIn('cumemcap_group_limit_bytes{', metrics)
        self.assertIn('group="g"', metrics)


if __name__ == "__main__":
    unittest.main(verbosity=2)
