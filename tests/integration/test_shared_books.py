#!/usr/bin/env python3
"""The shared books on a node with several users: what one user (or a
member of a group) can do to a group's book or to another user's registry,
and a full file system. Each test runs the shim over the fake driver as the
unprivileged users of users.py, in its private mount namespace.

Checked: a full tmpfs stops a group member before main with one line and
quietly leaves a process with only a limit out of the registry, never a
SIGBUS, and no temporary file stays; temporary names another user planted
block nobody, and only this user's stale temporaries are swept; a registry
another user planted under this user's name is refused with one line;
CUMEMCAP_GROUP_ACCESS names the Unix group it trusts, and a book of another
group, or made by a user outside the group, is refused; a member survives
its book being truncated; a removed book is made anew, and a book renamed
over it is taken up, holding what the members still hold.

Usage: test_shared_books.py SHIM FAKE_DIR
"""
import json
import os
import subprocess
import sys
import threading
import time
import unittest

import users
from harness import CUDA_START, end_all, group_env

SHIM, FAKE_DIR = sys.argv[1:3]
del sys.argv[1:3]
OOM = 2  # CUDA_ERROR_OUT_OF_MEMORY
# The users' interpreter: the test's own may live where they cannot go.
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
TEAM = "cmcap-team"  # a Unix group of ALICE only (SHARED holds both, as video does)

# Allocates each MiB figure of argv in turn and prints the results.
ONCE = CUDA_START + r'''
import json, sys
out = []
for mib in sys.argv[1:]:
    p = ctypes.c_uint64()
    out.append(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(int(float(mib) * (1 << 20)))))
print(json.dumps(out), flush=True)
'''

# Takes `alloc MIB` and `exit` on stdin, answers one JSON line each.
MEMBER = CUDA_START + r'''
import json, os, sys
print(json.dumps({"op": "ready"}), flush=True)
held = []
for line in sys.stdin:
    w = line.split()
    if w and w[0] == "alloc":
        p = ctypes.c_uint64()
        r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(int(float(w[1]) * (1 << 20))))
        if r == 0:
            held.append(p.value)
        print(json.dumps({"op": "alloc", "r": r}), flush=True)
    elif w and w[0] == "free":
        r = cu.cuMemFree_v2(ctypes.c_uint64(held.pop()))
        print(json.dumps({"op": "free", "r": r}), flush=True)
    elif w and w[0] == "exit":
        break
'''


BIG = "cmcap-big"  # ALICE's group with 4000 more members: its entry is 50 KB


def _add_team():
    subprocess.run(["groupadd", TEAM], check=True)
    subprocess.run(["usermod", "-a", "-G", TEAM, users.ALICE], check=True)
    subprocess.run(["groupadd", BIG], check=True)
    subprocess.run(["usermod", "-a", "-G", BIG, users.ALICE], check=True)
    with open("/etc/group") as f:   # the namespace's own copy
        lines = f.read().splitlines()
    extra = ",".join("cmcap-member-%04d" % i for i in range(4000))
    lines = [l + "," + extra if l.startswith(BIG + ":") else l for l in lines]
    with open("/etc/group", "w") as f:
        f.write("\n".join(lines) + "\n")


@users.needs_users
class SharedBooks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.shim, cls.fake = users.reachable(SHIM, FAKE_DIR)
        _add_team()

    def setUp(self):
        self.procs = []
        self.mounts = []

    def tearDown(self):
        end_all(self.procs)
        for m in self.mounts:
            subprocess.run(["umount", m])

    def env(self, d, **extra):
        # A sanitizer must leave SIGBUS to the shim (a book cut under its
        # mapping).
        return group_env(self.shim, self.fake, d, **{"FAKECUDA_DEVICES": "4GiB",
                                                     "ASAN_OPTIONS": "detect_leaks=0:handle_sigbus=0",
                                                     "TSAN_OPTIONS": "handle_sigbus=0", **extra})

    def once(self, who, d, mibs, **extra):
        return users.run_as(who, [PYTHON, "-c", ONCE] + [str(m) for m in mibs], env=self.env(d, **extra))

    def member(self, who, d, **extra):
        p = users.popen_as(who, [PYTHON, "-c", MEMBER], env=self.env(d, **extra),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        self.assertEqual(self.read(p)["op"], "ready")
        return p

    def read(self, p, timeout=20):
        box = []
        t = threading.Thread(target=lambda: box.append(p.stdout.readline()))
        t.start()
        t.join(timeout)
        if not box or not box[0]:
            p.kill()
            p.wait()
            self.fail("member said nothing (exit %s, stderr: %s)" % (p.returncode, p.stderr.read()))
        return json.loads(box[0])

    def ask(self, p, line):
        p.stdin.write(line + "\n")
        p.stdin.flush()
        return self.read(p)

    def finish(self, p):
        p.stdin.write("exit\n")
        p.stdin.flush()
        rc = p.wait(60)
        err = p.stderr.read()
        self.assertEqual(rc, 0, err[-4000:])
        return err

    def full_tmpfs(self):
        """A sticky tmpfs of 1 MiB with no byte left, as a full /dev/shm."""
        d = users.shared_dir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=1777", "cmcap-full", d], check=True)
        self.mounts.append(d)
        fd = os.open(os.path.join(d, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        os.close(fd)
        return d

    def book(self, d, name="g"):
        return os.path.join(d, "cumemcap-group." + name)

    # ---- a full file system -------------------------------------------------------------------

    def test_full_tmpfs_stops_a_member_before_main(self):
        d = self.full_tmpfs()
        out = self.once(users.ALICE, d, [100], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(out.returncode, 125, "signal or run: %d %s" % (out.returncode, out.stderr))
        self.assertEqual(out.stdout, "")
        lines = out.stderr.splitlines()
        self.assertEqual(len(lines), 1, out.stderr)
        self.assertIn("CUMEMCAP_GROUP=g: %s: " % self.book(d), lines[0])
        self.assertIn("No space left on device", lines[0])
        self.assertEqual(sorted(os.listdir(d)), ["filler"])   # no temporary left

    def test_full_tmpfs_quietly_leaves_the_registry(self):
        d = self.full_tmpfs()
        out = self.once(users.ALICE, d, [100], CUMEMCAP_LIMIT="1GiB")
        self.assertEqual(out.returncode, 0, "%d %s" % (out.returncode, out.stderr))
        self.assertEqual(json.loads(out.stdout), [0])
        self.assertEqual(out.stderr, "")
        self.assertEqual(sorted(os.listdir(d)), ["filler"])

    # ---- temporary names ------------------------------------------------------------------------

    def test_planted_temporary_names_block_nobody(self):
        """BOB occupies every name the old scheme (.cumemcap-new.PID.N) could
        give a first member that is pid 1 to 64 of its namespace; ALICE, pid
        1 of a new one, makes the group's book all the same, and BOB's files
        stay."""
        d = users.shared_dir()
        planted = [".cumemcap-new.%d.%d" % (pid, n) for pid in range(1, 65) for n in range(4)]
        users.run_as(users.BOB, ["touch"] + planted, cwd=d, check=True)
        pw = __import__("pwd").getpwnam(users.ALICE)
        env = self.env(d, CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        preload = env.pop("LD_PRELOAD")   # for the program only, not for unshare and setpriv
        argv = ["unshare", "--pid", "--fork", "--mount-proc", "setpriv", "--reuid=%d" % pw.pw_uid,
                "--regid=%d" % pw.pw_gid, "--init-groups", "env", "LD_PRELOAD=" + preload,
                PYTHON, "-c", ONCE, "100"]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout), [0])
        self.assertEqual(os.stat(self.book(d)).st_uid, pw.pw_uid)
        self.assertEqual(sorted(os.listdir(d)), sorted(planted + ["cumemcap-group.g"]))

    def test_only_own_stale_temporaries_are_swept(self):
        d = users.shared_dir()
        users.run_as(users.ALICE, ["touch", ".cumemcap-new.1.0", ".cumemcap-new.2.0"], cwd=d, check=True)
        users.run_as(users.BOB, ["touch", ".cumemcap-new.3.0"], cwd=d, check=True)
        users.run_as(users.ALICE, ["ln", "-s", "cumemcap-group.x", ".cumemcap-new.4.0"], cwd=d, check=True)
        hour_ago = time.time() - 3600
        for name in (".cumemcap-new.1.0", ".cumemcap-new.3.0"):
            os.utime(os.path.join(d, name), (hour_ago, hour_ago))
        out = self.once(users.ALICE, d, [100], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(out.returncode, 0, out.stderr)
        # Gone: ALICE's own old one. Kept: her fresh one (a member may be
        # making its book now), BOB's, and her link (not a file cumemcap made).
        self.assertEqual(sorted(os.listdir(d)), [".cumemcap-new.2.0", ".cumemcap-new.3.0", ".cumemcap-new.4.0",
                                                 "cumemcap-group.g"])

    # ---- the registry ----------------------------------------------------------------------------

    def test_registry_planted_under_another_uid_is_refused_once(self):
        d = users.shared_dir()
        out = self.once(users.BOB, d, [100], CUMEMCAP_LIMIT="1GiB")
        self.assertEqual(out.returncode, 0, out.stderr)
        bobs = os.path.join(d, "cumemcap-node.%d" % users.uid(users.BOB))
        alices = os.path.join(d, "cumemcap-node.%d" % users.uid(users.ALICE))
        self.assertTrue(os.path.exists(bobs))
        users.run_as(users.BOB, ["cp", bobs, alices], check=True)
        for mode in ("600", "666"):
            users.run_as(users.BOB, ["chmod", mode, alices], check=True)
            out = self.once(users.ALICE, d, [100, 100], CUMEMCAP_LIMIT="1GiB")
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(json.loads(out.stdout), [0, 0])
            lines = out.stderr.splitlines()
            self.assertEqual(len(lines), 1, out.stderr)
            self.assertIn("the registry %s cannot be used" % alices, lines[0])
            self.assertIn("runs under its own limits", lines[0])
            if mode == "666":   # readable: refused for its owner, not for want of access
                self.assertIn("owned by uid %d, not by this process's uid %d);" %
                              (users.uid(users.BOB), users.uid(users.ALICE)), lines[0])
            self.assertEqual(os.stat(alices).st_uid, users.uid(users.BOB))   # untouched

    # ---- group access ------------------------------------------------------------------------------

    def test_plain_gid_is_refused(self):
        d = users.shared_dir()
        out = self.once(users.ALICE, d, [100], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_ACCESS="gid")
        self.assertEqual(out.returncode, 125, out.stderr)
        lines = out.stderr.splitlines()
        self.assertEqual(len(lines), 1, out.stderr)
        self.assertIn('CUMEMCAP_GROUP_ACCESS="gid" names no Unix group', lines[0])
        self.assertIn("gid:GROUP", lines[0])

    def test_gid_access_makes_the_book_with_the_named_group(self):
        d = users.shared_dir()
        out = self.once(users.ALICE, d, [100], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB",
                        CUMEMCAP_GROUP_ACCESS="gid:" + TEAM)
        self.assertEqual(out.returncode, 0, out.stderr)
        st = os.stat(self.book(d))
        self.assertEqual(st.st_gid, users.gid(TEAM))
        self.assertEqual(st.st_mode & 0o7777, 0o660)
        # BOB, in no group TEAM, cannot name it.
        out = self.once(users.BOB, d, [100], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_ACCESS="gid:" + TEAM)
        self.assertEqual(out.returncode, 125, out.stderr)

    def bobs_book(self, d, limit="1MiB"):
        """BOB's own valid book of group g (user access, in his own dir),
        copied by him to d as cumemcap-group.g, 0660."""
        own = users.shared_dir()
        out = self.once(users.BOB, own, [], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT=limit)
        self.assertEqual(out.returncode, 0, out.stderr)
        users.run_as(users.BOB, ["cp", self.book(own), self.book(d)], check=True)
        users.run_as(users.BOB, ["chmod", "660", self.book(d)], check=True)

    def test_book_of_another_group_is_refused(self):
        """BOB's book with the group SHARED (both are in it, as in video):
        ALICE, who shares her group's budget with TEAM, does not join it."""
        d = users.shared_dir()
        self.bobs_book(d)
        users.run_as(users.BOB, ["chgrp", users.SHARED, self.book(d)], check=True)
        out = self.once(users.ALICE, d, [100], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_ACCESS="gid:" + TEAM)
        self.assertEqual(out.returncode, 125, out.stderr)
        self.assertIn("its group is %d, not %d" % (users.gid(users.SHARED), users.gid(TEAM)), out.stderr)

    def test_book_made_by_a_non_member_is_refused(self):
        """In a set-group-ID directory of group TEAM, BOB's file gets the
        group TEAM though BOB is not in it: its owner is checked."""
        d = users.shared_dir(0o3777)
        os.chown(d, 0, users.gid(TEAM))
        os.chmod(d, 0o3777)
        self.bobs_book(d)
        self.assertEqual(os.stat(self.book(d)).st_gid, users.gid(TEAM))
        out = self.once(users.ALICE, d, [100], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_ACCESS="gid:" + TEAM)
        self.assertEqual(out.returncode, 125, out.stderr)
        self.assertIn("owned by uid %d, who is not a member of its group" % users.uid(users.BOB), out.stderr)

    def test_a_group_of_many_members_is_read_whole(self):
        """A group whose entry does not fit a small buffer (video on a
        large node) is found by name, and its member list is read whole:
        BOB, not in it, is refused as the owner of a book of that group."""
        d = users.shared_dir()
        out = self.once(users.ALICE, d, [100], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB",
                        CUMEMCAP_GROUP_ACCESS="gid:" + BIG)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(os.stat(self.book(d)).st_gid, users.gid(BIG))
        d = users.shared_dir(0o3777)
        os.chown(d, 0, users.gid(BIG))
        os.chmod(d, 0o3777)
        self.bobs_book(d)
        out = self.once(users.ALICE, d, [100], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_ACCESS="gid:" + BIG)
        self.assertEqual(out.returncode, 125, out.stderr)
        self.assertIn("owned by uid %d, who is not a member of its group" % users.uid(users.BOB), out.stderr)

    # ---- a book truncated or removed under its members --------------------------------------------

    def test_member_survives_a_truncated_book(self):
        d = users.shared_dir()
        a = self.member(users.ALICE, d, CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB", CUMEMCAP_LIMIT="2GiB")
        self.assertEqual(self.ask(a, "alloc 100")["r"], 0)
        os.truncate(self.book(d), 0)       # what any member that may write it can do
        self.assertEqual(self.ask(a, "alloc 600")["r"], 0)
        time.sleep(1.5)                    # the worker's look, too
        self.assertEqual(self.ask(a, "alloc 600")["r"], 0)   # out of the group: 1300 MiB
        self.assertEqual(self.ask(a, "alloc 800")["r"], OOM)  # its own limit still holds
        err = self.finish(a)
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertIn("CUMEMCAP_GROUP=g: %s was cut to 0 bytes by another process" % self.book(d), lines[0])

    def test_member_survives_touching_a_truncated_book(self):
        """The first touch after the truncation is a free that hands spare
        back to the book, with no look at the file before it: the page is
        gone, and the touch must not kill the member."""
        d = users.shared_dir()
        for log in ("off", "stderr"):      # with and without the log's signal handlers
            with self.subTest(log=log):
                a = self.member(users.ALICE, d, CUMEMCAP_GROUP="t" + log, CUMEMCAP_GROUP_LIMIT="1GiB",
                                CUMEMCAP_LIMIT="2GiB", CUMEMCAP_LOG=log)
                self.assertEqual(self.ask(a, "alloc 100")["r"], 0)
                os.truncate(self.book(d, "t" + log), 0)
                self.assertEqual(self.ask(a, "free")["r"], 0)
                self.assertEqual(self.ask(a, "alloc 1500")["r"], 0)   # out of the group: its own 2 GiB
                self.assertEqual(self.ask(a, "alloc 600")["r"], OOM)
                err = self.finish(a)
                self.assertIn("CUMEMCAP_GROUP=t%s: %s was cut to 0 bytes by another process" % (log, self.book(d, "t" + log)),
                              err)

    def test_removed_book_is_made_anew_with_what_members_hold(self):
        d = users.shared_dir()
        a = self.member(users.ALICE, d, CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(a, "alloc 600")["r"], 0)
        os.unlink(self.book(d))
        # a's worker looks once a second: it makes the book anew.
        deadline = time.monotonic() + 60
        while not os.path.exists(self.book(d)):
            self.assertLess(time.monotonic(), deadline, "no member made the removed book anew")
            time.sleep(0.05)
        b = self.member(users.ALICE, d, CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(b, "alloc 600")["r"], OOM)   # a's 600 MiB are counted
        self.assertEqual(self.ask(b, "alloc 300")["r"], 0)
        self.assertEqual(self.ask(a, "alloc 200")["r"], OOM)   # and b's, in a's new book
        self.assertEqual(self.finish(a), "")
        self.assertEqual(self.ask(b, "alloc 600")["r"], 0)     # a's share came back
        self.assertEqual(self.finish(b), "")

    def test_replaced_book_gets_what_members_hold(self):
        """Another book renamed over the group's: the members go on in it,
        carrying what they hold."""
        d, elsewhere = users.shared_dir(), users.shared_dir()
        a = self.member(users.ALICE, d, CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(a, "alloc 600")["r"], 0)
        out = self.once(users.ALICE, elsewhere, [], CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(out.returncode, 0, out.stderr)
        os.rename(self.book(elsewhere), self.book(d))
        # a looks before it asks the group for more: it moves, carrying 600.
        self.assertEqual(self.ask(a, "alloc 100")["r"], 0)
        b = self.member(users.ALICE, d, CUMEMCAP_GROUP="g", CUMEMCAP_GROUP_LIMIT="1GiB")
        self.assertEqual(self.ask(b, "alloc 400")["r"], OOM)   # a holds 700 of 1024 there
        self.assertEqual(self.ask(b, "alloc 300")["r"], 0)
        self.assertEqual(self.finish(a), "")
        self.assertEqual(self.finish(b), "")


if __name__ == "__main__":
    users.main()
