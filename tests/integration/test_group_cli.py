#!/usr/bin/env python3
"""The command-line side of groups: `cumemcap group list|show|set`
and `cumemcap top`, run through the launcher against real processes under
the shim (python3 + ctypes over the fake driver), each test in a directory
of its own (CUMEMCAP_GROUP_DIR) with CUMEMCAP_LOG=off.

Usage: test_group_cli.py SHIM FAKE_DIR LAUNCHER
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from harness import end_all

SHIM, FAKE_DIR, LAUNCHER = sys.argv[1:4]
del sys.argv[1:4]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
MiB = 1 << 20
GiB = 1 << 30

# A member: reads steps from stdin, one per line, answers each with a JSON line.
#   dev N        retain GPU N's primary context and make it current
#   alloc MIB    cuMemAlloc_v2 of MIB MiB on the current context
#   ping 0       nothing (the member is in its group's book once cuInit is done)
PROBE = r'''
import ctypes, json, sys
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
ptrs = []
for line in sys.stdin:
    op, arg = line.split()
    if op == "dev":
        ctx = ctypes.c_void_p()
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), int(arg)) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0
        print(json.dumps({"op": op, "r": 0}), flush=True)
    elif op == "ping":                   # cuInit done: the member has joined
        print(json.dumps({"op": op, "r": 0}), flush=True)
    elif op == "alloc":
        p = ctypes.c_uint64()
        r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(int(arg) << 20))
        if r == 0:
            ptrs.append(p.value)
        print(json.dumps({"op": op, "r": r}), flush=True)
'''


class GroupCli(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "books")
        os.mkdir(self.dir)
        self.script = os.path.join(self.tmp.name, "probe.py")
        with open(self.script, "w") as f:
            f.write(PROBE)
        self.procs = []

    def tearDown(self):
        end_all(self.procs)
        self.tmp.cleanup()

    def env(self, add=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
        env.update({"CUMEMCAP_GROUP_DIR": self.dir, "CUMEMCAP_LOG": "off", "TMPDIR": self.tmp.name})
        env.update(add or {})
        return env

    def member(self, add, steps=(("dev", 0),)):
        """A process under the shim with `add` in its environment, after `steps`."""
        env = self.env({"LD_PRELOAD": (EXTRA + ":" if EXTRA else "") + SHIM, "LD_LIBRARY_PATH": FAKE_DIR,
                        "FAKECUDA_DEVICES": "16GiB", "CUMEMCAP_POOL": "off"})
        env.update(add)
        p = subprocess.Popen([sys.executable, self.script], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        for op, arg in (("ping", 0),) + tuple(steps):
            self.assertEqual(self.step(p, op, arg)["r"], 0, (op, arg))
        return p

    def step(self, p, op, arg):
        p.stdin.write(f"{op} {arg}\n")
        p.stdin.flush()
        line = p.stdout.readline()
        self.assertTrue(line, f"the member {p.pid} died at {op} {arg}")
        return json.loads(line)

    def cli(self, *args, env=None):
        return subprocess.run([LAUNCHER, *args], env=env or self.env(), capture_output=True, text=True,
                              timeout=30)

    def ok(self, *args):
        r = self.cli(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        return r.stdout

    def jcli(self, *args):
        return json.loads(self.ok(*args, "--json"))

    def fails(self, status, *args, want=()):
        r = self.cli(*args)
        self.assertEqual(r.returncode, status, (args, r.stdout, r.stderr))
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertRegex(lines[0], r"^cumemcap (group|top): ")
        for w in want:
            self.assertIn(w, lines[0])
        return lines[0]

    def top_until(self, ready, what):
        """`top --once --json` until ready(view) (the members publish once a second)."""
        deadline = time.monotonic() + 10
        while True:
            view = self.jcli("top", "--once")
            if ready(view) or time.monotonic() > deadline:
                self.assertTrue(ready(view), f"{what}: {json.dumps(view, indent=1)}")
                return view
            time.sleep(0.2)

    def book(self, name):
        return os.path.join(self.dir, "cumemcap-group." + name)

    # ---- top ------------------------------------------------------------------------------

    def test_top_lists_every_capped_process(self):
        a = self.member({"CUMEMCAP_GROUP": "g", "CUMEMCAP_GROUP_LIMIT": "2GiB"}, [("dev", 0), ("alloc", 512)])
        b = self.member({"CUMEMCAP_GROUP": "g"}, [("dev", 0), ("alloc", 256)])
        c = self.member({"CUMEMCAP_LIMIT": "1GiB"}, [("dev", 0), ("alloc", 100)])
        want = {a.pid: 512 * MiB, b.pid: 256 * MiB, c.pid: 100 * MiB}

        def published(view):
            got = {p["pid"]: p for p in view["processes"]}
            # Both figures: a charge reserves before the driver call and
            # counts the block live after it, so a member preempted
            # between the two (a loaded machine) publishes its
            # reservation with no live bytes yet; seen once in a full run.
            return set(got) == set(want) and all(got[pid]["reserved"] == n and got[pid]["live"] == n
                                                 for pid, n in want.items())
        view = self.top_until(published, "every member published its reservation and its live bytes")
        self.assertEqual(len(view["processes"]), 3)
        rows = {p["pid"]: p for p in view["processes"]}
        uuid0 = "GPU-fa4ec0da-0000-4000-8000-000000000000"
        for pid, row in rows.items():
            self.assertEqual(row["program"], "probe.py")
            self.assertEqual(row["state"], "alive")
            self.assertEqual(row["gpu"], {"uuid": uuid0, "ordinal": 0})
            self.assertEqual(row["live"], want[pid])
            self.assertGreaterEqual(row["footprint"], row["reserved"])
        self.assertEqual(rows[a.pid]["group"], "g")
        self.assertEqual(rows[b.pid]["group"], "g")
        self.assertIsNone(rows[c.pid]["group"])
        self.assertEqual(rows[c.pid]["limit"], GiB)
        self.assertIsNone(rows[a.pid]["limit"])  # the member's own: none, the group's is 2 GiB
        self.assertEqual(view["groups"], [{"name": "g", "members": 2, "dead": 0, "gpus": [
            {"uuid": uuid0, "limit": 2 * GiB, "used": rows[a.pid]["held"] + rows[b.pid]["held"]}]}])
        self.assertGreaterEqual(view["groups"][0]["gpus"][0]["used"], 768 * MiB)
        [gpu] = view["gpus"]
        self.assertEqual((gpu["uuid"], gpu["processes"], gpu["reserved"], gpu["total"]),
                         (uuid0, 3, 868 * MiB, 16 * GiB))
        # The text view: a row per process, with its group and sizes.
        text = self.ok("top", "--once")
        for pid, group, size in ((a.pid, "g", "512 MiB"), (b.pid, "g", "256 MiB"), (c.pid, "-", "100 MiB")):
            [row] = [line for line in text.splitlines() if line.split()[:1] == [str(pid)]]
            self.assertEqual(row.split()[1:3], ["probe.py", group], row)
            self.assertIn(size, row)
            self.assertTrue(row.endswith("alive"), row)

    def test_top_member_without_gpu(self):
        # A group's member is in its book from the start (a capped process
        # in no group registers only at its first GPU use).
        p = self.member({"CUMEMCAP_GROUP": "g", "CUMEMCAP_LIMIT": "1GiB"}, steps=())
        view = self.top_until(lambda v: [r["pid"] for r in v["processes"]] == [p.pid], "the member is listed")
        self.assertIsNone(view["processes"][0]["gpu"])
        self.assertEqual(view["gpus"], [])

    def test_top_shows_a_dead_member_once_then_reaps_it(self):
        p = self.member({"CUMEMCAP_GROUP": "solo", "CUMEMCAP_GROUP_LIMIT": "1GiB"}, [("dev", 0), ("alloc", 300)])
        self.top_until(lambda v: [r["reserved"] for r in v["processes"]] == [300 * MiB], "published")
        p.send_signal(signal.SIGKILL)
        p.wait()
        # Nobody is left to reap it: show (which only reads) sees it dead, holding its share.
        shown = self.jcli("group", "show", "solo")
        self.assertEqual([m["state"] for m in shown["members"]], ["dead"])
        self.assertGreaterEqual(shown["gpus"][0]["used"], 300 * MiB)
        view = self.jcli("top", "--once")
        self.assertEqual([(r["pid"], r["state"]) for r in view["processes"]], [(p.pid, "dead")])
        self.assertEqual(view["groups"][0]["dead"], 1)
        self.assertNotIn(str(p.pid), [line.split()[0] for line in self.ok("top", "--once").splitlines() if line])
        self.assertEqual(self.jcli("top", "--once")["processes"], [])
        shown = self.jcli("group", "show", "solo")
        self.assertEqual((shown["members"], shown["gpus"][0]["used"]), ([], 0))

    def test_top_skips_unreadable_books(self):
        self.member({"CUMEMCAP_LIMIT": "1GiB"}, [("dev", 0)])
        with open(self.book("broken"), "wb") as f:
            f.write(b"not a book")
        view = self.jcli("top", "--once")
        self.assertEqual(len(view["processes"]), 1)
        r = self.cli("top", "--once", "--debug")
        self.assertEqual(r.returncode, 0)
        self.assertIn("cumemcap-group.broken", r.stderr)

    # ---- group list / show ----------------------------------------------------------------

    def test_show_figures(self):
        a = self.member({"CUMEMCAP_GROUP": "g", "CUMEMCAP_GROUP_LIMIT": "2GiB"}, [("dev", 0), ("alloc", 512)])
        b = self.member({"CUMEMCAP_GROUP": "g"}, [("dev", 0), ("alloc", 128)])
        deadline = time.monotonic() + 10
        while True:
            shown = self.jcli("group", "show", "g")
            res = sorted(m["gpus"][0]["reserved"] for m in shown["members"] if m["gpus"])
            if res == [128 * MiB, 512 * MiB] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(res, [128 * MiB, 512 * MiB], shown)
        self.assertEqual(sorted(m["pid"] for m in shown["members"]), sorted([a.pid, b.pid]))
        [gpu] = shown["gpus"]
        self.assertEqual((gpu["uuid"], gpu["total"], gpu["limit"]),
                         ("GPU-fa4ec0da-0000-4000-8000-000000000000", 16 * GiB, 2 * GiB))
        held = [m["gpus"][0]["held"] for m in shown["members"]]
        self.assertEqual(gpu["used"], sum(held))
        for m in shown["members"]:
            self.assertEqual((m["state"], m["program"], m["uid"]), ("alive", "probe.py", os.geteuid()))
            f = m["gpus"][0]
            self.assertGreaterEqual(f["held"], f["reserved"])
        self.assertEqual(shown["changes"], [])
        text = self.ok("group", "show", "g")
        self.assertIn("2 live members, 0 dead", text)
        self.assertIn(gpu["pci"], text)

        listed = self.jcli("group", "list")["groups"]
        self.assertEqual(listed, [{"name": "g", "path": self.book("g"), "members": 2, "dead": 0, "gpus": [
            {"uuid": gpu["uuid"], "pci": gpu["pci"], "total": 16 * GiB, "limit": 2 * GiB, "used": gpu["used"]}]}])

    def test_list_names_books_it_cannot_read(self):
        self.member({"CUMEMCAP_GROUP": "good", "CUMEMCAP_GROUP_LIMIT": "1GiB"})
        size = os.path.getsize(self.book("good"))
        with open(self.book("bad"), "wb") as f:
            f.write(b"\0" * size)
        os.chmod(self.book("bad"), 0o600)
        groups = {g["name"]: g for g in self.jcli("group", "list")["groups"]}
        self.assertEqual(set(groups), {"good", "bad"})
        self.assertEqual(groups["good"]["members"], 1)
        self.assertIn("wrong magic", groups["bad"]["error"])
        text = self.ok("group", "list")
        self.assertIn("wrong magic", text)
        self.fails(1, "group", "show", "bad", want=(self.book("bad"), "wrong magic"))
        self.fails(1, "group", "set", "bad", "--limit", "1GiB", want=(self.book("bad"), "wrong magic"))
        self.fails(1, "group", "show", "nosuch", want=(self.book("nosuch"), "does not exist"))

    def test_show_opens_no_link_and_no_other_file(self):
        # Under a book's name: a link to a good book is not followed, and
        # a FIFO or a directory is named for what it is (the FIFO without
        # waiting for a writer).
        self.member({"CUMEMCAP_GROUP": "good", "CUMEMCAP_GROUP_LIMIT": "1GiB"})
        os.symlink(self.book("good"), self.book("link"))
        os.mkfifo(self.book("pipe"), 0o600)
        os.mkdir(self.book("dir"), 0o700)
        self.fails(1, "group", "show", "link", want=(self.book("link"), "a symbolic link; a book is a regular file"))
        self.fails(1, "group", "set", "link", "--limit", "2GiB", want=("a symbolic link",))
        self.fails(1, "group", "show", "pipe", want=("not a regular file (a FIFO)",))
        self.fails(1, "group", "set", "pipe", "--limit", "2GiB", want=("not a regular file",))
        self.fails(1, "group", "show", "dir", want=("not a regular file (a directory)",))
        self.assertEqual(self.jcli("group", "show", "good")["gpus"][0]["limit"], GiB)

    # ---- group set ------------------------------------------------------------------------

    def test_set_limit_binds_running_members(self):
        a = self.member({"CUMEMCAP_GROUP": "g", "CUMEMCAP_GROUP_LIMIT": "2GiB"}, [("dev", 0), ("alloc", 512)])
        out = self.ok("group", "set", "g", "--limit", "1GiB")
        self.assertIn("2 GiB -> 1 GiB", out)
        shown = self.jcli("group", "show", "g")
        self.assertEqual(shown["gpus"][0]["limit"], GiB)
        [change] = shown["changes"]
        self.assertEqual((change["uid"], change["gpu"], change["old"], change["new"]),
                         (os.geteuid(), shown["gpus"][0]["uuid"], 2 * GiB, GiB))
        self.assertIn("2 GiB -> 1 GiB", self.ok("group", "show", "g"))
        # 512 + 768 MiB no longer fits the group's budget ...
        self.assertEqual(self.step(a, "alloc", 768)["r"], 2)  # CUDA_ERROR_OUT_OF_MEMORY
        # ... and fits again at 12.5% of the 16 GiB GPU (2 GiB).
        self.assertIn("1 GiB -> 2 GiB", self.ok("group", "set", "g", "--limit", "12.5%"))
        self.assertEqual(self.step(a, "alloc", 768)["r"], 0)
        self.assertIn("2 GiB -> none", self.ok("group", "set", "g", "--limit", "none"))
        self.assertIsNone(self.jcli("group", "show", "g")["gpus"][0]["limit"])
        self.assertEqual(len(self.jcli("group", "show", "g")["changes"]), 3)

    def test_set_one_gpu(self):
        self.member({"CUMEMCAP_GROUP": "g", "CUMEMCAP_GROUP_LIMIT": "2GiB", "FAKECUDA_DEVICES": "16GiB,8GiB"},
                    [("dev", 0), ("dev", 1)])
        gpus = self.jcli("group", "show", "g")["gpus"]
        self.assertEqual([g["total"] for g in gpus], [16 * GiB, 8 * GiB])
        out = self.ok("group", "set", "g", "--gpu", gpus[1]["uuid"], "--limit", "1GiB")
        self.assertEqual(out.count("->"), 1, out)
        self.assertEqual([g["limit"] for g in self.jcli("group", "show", "g")["gpus"]], [2 * GiB, GiB])
        self.ok("group", "set", "g", "--gpu", gpus[0]["pci"], "--limit", "3GiB")
        self.assertEqual([g["limit"] for g in self.jcli("group", "show", "g")["gpus"]], [3 * GiB, GiB])
        # A percentage is of each GPU's own total.
        self.ok("group", "set", "g", "--limit", "50%")
        self.assertEqual([g["limit"] for g in self.jcli("group", "show", "g")["gpus"]], [8 * GiB, 4 * GiB])
        self.fails(1, "group", "set", "g", "--gpu", "GPU-00000000-0000-0000-0000-000000000000", "--limit", "1GiB",
                   want=("no such GPU", gpus[0]["uuid"]))
        self.fails(2, "group", "set", "g", "--gpu", "1", "--limit", "1GiB", want=("ordinal", "ambiguous"))
        self.assertEqual([g["limit"] for g in self.jcli("group", "show", "g")["gpus"]], [8 * GiB, 4 * GiB])

    def test_set_no_gpu_yet(self):
        self.member({"CUMEMCAP_GROUP": "empty"}, steps=())
        self.fails(1, "group", "set", "empty", "--limit", "1GiB", want=("no GPU known yet",))

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give a book to another uid")
    def test_set_refuses_a_book_no_member_could_open(self):
        self.member({"CUMEMCAP_GROUP": "g", "CUMEMCAP_GROUP_LIMIT": "2GiB"})
        path = self.book("g")
        os.chown(path, 65534, 65534)
        self.fails(1, "group", "set", "g", "--limit", "1GiB", want=(path, "owned by uid 65534", "not changed"))
        os.chown(path, 0, 0)
        os.chmod(path, 0o644)
        self.fails(1, "group", "set", "g", "--limit", "1GiB", want=(path, "mode 0644", "not changed"))
        os.chmod(path, 0o600)
        self.assertEqual(self.jcli("group", "show", "g")["gpus"][0]["limit"], 2 * GiB)
        self.ok("group", "set", "g", "--limit", "1GiB")
        self.assertEqual(self.jcli("group", "show", "g")["gpus"][0]["limit"], GiB)

    # ---- arguments and the launcher --------------------------------------------------------

    def test_bad_arguments(self):
        self.fails(2, "group", "list", "--bogus", want=('"--bogus"',))
        self.fails(2, "group", "frobnicate", want=("frobnicate",))
        self.fails(2, "group", "set", "g", "--limit", "12XB", want=('"12XB"', "accepted", "GiB"))
        self.fails(2, "group", "set", "g", "--limit", "0", want=('"0"',))
        self.fails(2, "group", "set", "g", want=("--limit",))
        self.fails(2, "group", "set", "g", "--gpu", "0", "--limit", "1GiB", want=("ordinal",))
        self.fails(2, "group", "set", "g", "--gpu", "GPU-12", "--limit", "1GiB", want=('"GPU-12"',))
        self.fails(2, "group", "show", "../etc", want=('"../etc"', "group name"))
        self.fails(2, "group", "show", want=("NAME",))
        self.fails(2, "top", "--interval", "soon", want=('"soon"',))
        self.fails(2, "top", "--bogus", want=('"--bogus"',))
        self.fails(1, "group", "list", "--dir", os.path.join(self.dir, "nope"), want=("nope",))

    def test_launcher(self):
        usage = self.ok("--help")
        for cmd in ("cumemcap group list", "cumemcap group show NAME", "cumemcap group set NAME",
                    "cumemcap top", "CUMEMCAP_GROUP_TOOL"):
            self.assertIn(cmd, usage)
        fake = os.path.join(self.tmp.name, "fake-tool")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\necho "args: $*"\n')
        os.chmod(fake, 0o755)
        env = self.env({"CUMEMCAP_GROUP_TOOL": fake})
        self.assertEqual(self.cli("group", "list", "--json", env=env).stdout, "args: group list --json\n")
        self.assertEqual(self.cli("top", "--once", env=env).stdout, "args: top --once\n")


if __name__ == "__main__":
    unittest.main(verbosity=2)
