#!/usr/bin/env python3
"""A shared node: what one user can and cannot do to another through
cumemcap. Two parts, each run inside users.py's private mount namespace
(its own /etc, /tmp and /dev/shm, and two users ALICE and BOB):

- a shared metrics directory (node_exporter's textfile directory, sticky
  and world-writable): a writer's sweep removes only files its own user
  wrote, whoever planted a companion, and whether it runs as a user or as
  root; and a writer never writes over another user's file;
- a setuid-root CUDA program with the shim in /etc/ld.so.preload and a
  root-owned /etc/cumemcap.conf (both the namespace's copies): the caller
  picks neither the [program] section (argv[0]), nor a label (the Downward
  API variables), nor a part of a path (%n).

Usage: test_shared_secure.py SHIM FAKE_DIR SECURE_HOLD
(SECURE_HOLD: a CUDA client that holds its memory until stdin closes.)
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

import users
from harness import end_all, wait_for_series

SHIM, FAKE_DIR, SECURE_HOLD = sys.argv[1:4]
del sys.argv[1:4]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
SUFFIX = ".cumemcap-lock"
MAGIC = "cumemcap metrics writer lock 1\n"
LABEL_VARS = ("NODE_NAME", "POD_NAME", "POD_NAMESPACE", "CONTAINER_NAME")

LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def clean_env(add):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_")) and k not in LABEL_VARS}
    env.update(add)
    return env


def textfile_dir():
    """node_exporter's textfile directory: sticky and world-writable, owned
    by root, under a directory only root can write (a world-writable parent
    would make the writers refuse it)."""
    base = users.shared_dir(0o755)
    d = os.path.join(base, "textfile")
    os.mkdir(d)
    os.chmod(d, 0o1777)
    return d


@users.needs_users
class SharedMetricsDirectory(unittest.TestCase):
    """Anyone can create a companion `.NAME.cumemcap-lock` next to any NAME
    in a sticky world-writable directory. A writer's sweep must still remove
    only files its own user wrote."""

    def setUp(self):
        assert users.inside()
        if os.path.lexists("/etc/cumemcap.conf"):   # the namespace's copy of /etc
            os.unlink("/etc/cumemcap.conf")
        self.shim, self.fake, self.writer = users.reachable(SHIM, FAKE_DIR, SECURE_HOLD)
        self.dir = textfile_dir()
        self.procs = []

    def tearDown(self):
        end_all(self.procs)

    def start(self, user, name="cumemcap-%p.prom", expect=None):
        """A capped writer run by USER (None: root) of metrics file NAME
        (a template), once the file EXPECT (default: NAME for its pid) has
        a series: it has taken its name and swept the directory."""
        env = clean_env({"LD_PRELOAD": (EXTRA + ":" if EXTRA else "") + self.shim,
                         "LD_LIBRARY_PATH": self.fake, "FAKECUDA_DEVICES": "4GiB",
                         "CUMEMCAP_LOG": "off", "CUMEMCAP_LOG_INTERVAL": "0.1", "CUMEMCAP_LIMIT": "1GiB",
                         "CUMEMCAP_METRICS": os.path.join(self.dir, name),
                         "ASAN_OPTIONS": "detect_leaks=0"})
        argv = [self.writer]   # not setuid here: a plain capped program
        kw = dict(env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p = users.popen_as(user, argv, **kw) if user else subprocess.Popen(argv, **kw)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), b"secure=0\n", p.stderr.read1(4096) if p.poll() is not None else "")
        self.assertEqual(p.stdout.readline(), b"allocated=1024MiB\n")
        wait_for_series(os.path.join(self.dir, expect) if expect else self.name_of(p), p)
        return p

    def name_of(self, p, companion=False):
        name = "cumemcap-%d.prom" % p.pid
        return os.path.join(self.dir, "." + name + SUFFIX if companion else name)

    def stop(self, p):
        p.stdin.close()
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertEqual(p.stderr.read(), b"")

    def plant(self, name, text, owner, age=0):
        """A file NAME in the directory, with TEXT, owned by OWNER (None:
        root), last modified AGE seconds ago."""
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        if owner:
            os.chown(path, users.uid(owner), users.gid(owner))
        if age:
            t = time.time() - age
            os.utime(path, (t, t))
        return path

    def assert_kept(self, *paths):
        left = sorted(os.listdir(self.dir))
        for path in paths:
            self.assertTrue(os.path.lexists(path), "%s was removed; left: %s" % (path, left))

    def test_a_companion_planted_by_another_user_removes_nothing(self):
        # BOB's own file, with a companion ALICE made (the magic content, no lock).
        bob_file = self.plant("bob.prom", "bob's\n", users.BOB)
        bob_bait = self.plant(".bob.prom" + SUFFIX, MAGIC, users.ALICE)
        # Root's files (another collector's), with companions ALICE made:
        # the magic, or empty and older than a minute.
        smartmon = self.plant("smartmon.prom", "root's\n", None)
        smartmon_bait = self.plant(".smartmon.prom" + SUFFIX, MAGIC, users.ALICE)
        node = self.plant("node.prom", "root's\n", None)
        node_bait = self.plant(".node.prom" + SUFFIX, "", users.ALICE, age=120)
        # A root-owned file, and as its companion a second name of an empty,
        # old root-owned file (a hard link, which ALICE could make where
        # fs.protected_hardlinks is 0).
        disk = self.plant("disk.prom", "root's\n", None)
        spare = os.path.join(os.path.dirname(self.dir), "spare")
        with open(spare, "w"):
            pass
        os.utime(spare, (time.time() - 120, time.time() - 120))
        disk_bait = os.path.join(self.dir, ".disk.prom" + SUFFIX)
        os.link(spare, disk_bait)
        # A dead root writer's companion (its own) next to files ALICE made
        # under that name: the companion goes, her files stay.
        alice_file = self.plant("alice.prom", "alice's\n", users.ALICE)
        alice_tmp = self.plant("alice.prom.tmp", "alice's\n", users.ALICE)
        root_companion = self.plant(".alice.prom" + SUFFIX, MAGIC, None)

        bob = self.start(users.BOB)
        self.assert_kept(bob_file, bob_bait)
        root = self.start(None)
        self.assert_kept(smartmon, smartmon_bait, node, node_bait, disk, disk_bait, bob_file,
                         alice_file, alice_tmp)
        self.assertFalse(os.path.lexists(root_companion))
        self.stop(bob)
        self.stop(root)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         sorted(os.path.basename(p) for p in (bob_file, bob_bait, smartmon, smartmon_bait,
                                                              node, node_bait, disk, disk_bait,
                                                              alice_file, alice_tmp)))

    def test_a_writer_never_replaces_another_users_file(self):
        # ALICE's files at the name root's writer is told to write, and at
        # the next name's .tmp: root takes the name after, and leaves hers.
        gpu = self.plant("gpu.prom", "alice's\n", users.ALICE)
        gpu1_tmp = self.plant("gpu.1.prom.tmp", "alice's\n", users.ALICE)
        root = self.start(None, "gpu.prom", expect="gpu.2.prom")
        time.sleep(0.3)                                  # a few more rewrites
        self.stop(root)
        for path in (gpu, gpu1_tmp):
            with open(path) as f:
                self.assertEqual(f.read(), "alice's\n")
            self.assertEqual(os.stat(path).st_uid, users.uid(users.ALICE))
        self.assertEqual(sorted(os.listdir(self.dir)), ["gpu.1.prom.tmp", "gpu.prom"])

    def test_root_leaves_another_users_dead_writer_to_that_user(self):
        dead = self.start(users.ALICE)
        mine = [self.name_of(dead), self.name_of(dead, companion=True)]
        dead.send_signal(signal.SIGKILL)                # what the OOM killer sends
        dead.wait()
        self.assert_kept(*mine)
        # Root's writer: not its files.
        root = self.start(None)
        self.assert_kept(*mine)
        # BOB's writer: not his either (the sticky bit would refuse anyway).
        bob = self.start(users.BOB)
        self.assert_kept(*mine)
        # ALICE's next writer sweeps them: they are hers.
        alice = self.start(users.ALICE)
        left = os.listdir(self.dir)
        self.assertFalse({os.path.basename(p) for p in mine} & set(left), left)
        for p in (root, bob, alice):
            self.stop(p)
        self.assertEqual(os.listdir(self.dir), [])


@users.needs_users
class SecureExecution(unittest.TestCase):
    """A setuid-root CUDA program run by ALICE, with the shim preloaded from
    /etc/ld.so.preload and a root-owned /etc/cumemcap.conf (the namespace's
    copies). The caller chooses argv[0] and the environment: neither may
    pick the limit, a label or a part of a path."""

    CONF = "limit = 1GiB\nlog_interval = 0.1\nmetrics = %s\n[program big*]\nlimit = 3GiB\n"

    def setUp(self):
        assert users.inside()
        if EXTRA:
            self.skipTest("a sanitizer runtime cannot be preloaded into a setuid program")
        shim, fake = users.reachable(SHIM, FAKE_DIR)
        # The fake driver where ld.so looks under secure execution: a
        # directory of ld.so.cache (the namespace's copy), as a real
        # driver's is. -X: write the cache, create no links anywhere.
        with open("/etc/ld.so.conf.d/cumemcap-test-fake.conf", "w") as f:
            f.write(fake + "\n")
        subprocess.run(["ldconfig", "-X"], check=True)
        base = users.shared_dir(0o755)
        self.probe = os.path.join(base, "probe")
        self.bigprobe = os.path.join(base, "bigprobe")
        for path in (self.probe, self.bigprobe):
            shutil.copy(SECURE_HOLD, path)
            os.chown(path, 0, 0)
            os.chmod(path, 0o4755)
        # Root's textfile directory.
        self.dir = os.path.join(base, "textfile")
        os.mkdir(self.dir, 0o755)
        with open("/etc/cumemcap.conf", "w") as f:
            f.write(self.CONF % os.path.join(self.dir, "%n.prom"))
        os.chmod("/etc/cumemcap.conf", 0o644)
        with open("/etc/ld.so.preload", "w") as f:
            f.write(shim + "\n")
        self.procs = []

    def tearDown(self):
        os.unlink("/etc/ld.so.preload")
        end_all(self.procs)
        os.unlink("/etc/cumemcap.conf")

    def run_probe(self, exe, argv0, user=users.ALICE, add=None):
        env = clean_env({"FAKECUDA_DEVICES": "4GiB"})
        env.update(add or {})
        kw = dict(executable=exe, env=env, stdin=subprocess.DEVNULL)
        if user:
            return users.run_as(user, [argv0], **kw)
        return subprocess.run([argv0], capture_output=True, text=True, timeout=60, **kw)

    def test_program_section_is_the_executables_not_argv0s(self):
        # `exec -a bigjob ./probe`: the global limit, whatever argv[0] says.
        p = self.run_probe(self.probe, "bigjob")
        self.assertEqual((p.stdout, p.stderr, p.returncode), ("secure=1\nallocated=1024MiB\n", "", 0))
        # An executable whose own name matches gets its section, whatever argv[0] says.
        p = self.run_probe(self.bigprobe, "small")
        self.assertEqual((p.stdout, p.stderr, p.returncode), ("secure=1\nallocated=2048MiB\n", "", 0))
        # Outside secure execution (root runs it: no AT_SECURE) argv[0]
        # names the program, as for any other program.
        p = self.run_probe(self.probe, "bigjob", user=None)
        self.assertEqual((p.stdout, p.stderr, p.returncode), ("secure=0\nallocated=2048MiB\n", "", 0))

    def test_no_label_and_no_path_from_the_caller(self):
        add = {v: "caller-" + v.lower() for v in LABEL_VARS}
        add["CUMEMCAP_LABELS"] = "team=caller"
        env = clean_env(dict(add, FAKECUDA_DEVICES="4GiB"))
        p = users.popen_as(users.ALICE, ["evil"], executable=self.probe, env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), "secure=1\n")
        self.assertEqual(p.stdout.readline(), "allocated=1024MiB\n")
        # %n is the executable's name, not argv[0]: root's file is probe.prom.
        text = wait_for_series(os.path.join(self.dir, "probe.prom"), p)
        self.assertNotIn("evil", " ".join(os.listdir(self.dir)))
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            labels = dict(LABEL.findall(line.split("{", 1)[1].rsplit("}", 1)[0]))
            self.assertEqual(labels["program"], "probe", line)
            self.assertFalse({"node", "pod", "namespace", "container", "team"} & set(labels), line)
            self.assertNotIn("caller", line)
        p.stdin.close()
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertEqual(p.stderr.read(), "")
        self.assertEqual(os.listdir(self.dir), [])


if __name__ == "__main__":
    users.main()
