#!/usr/bin/env python3
"""What one user can plant for another user's (or root's) readers on a
shared node: `cumemcap top`, `cumemcap group list|show|set` over a sticky,
world-writable directory of books, and `cumemcap report DIR` over a shared
log directory. The attacker is ALICE (or BOB), the reader root, each case
in a directory of its own, through users.py (a private mount namespace:
the machine's /etc, /tmp and /dev/shm are never touched).

A reader must not block (a FIFO under a book's name; every run has a short
timeout, so a hang fails), crash (a book truncated while it is read), be
blinded (junk files hiding real books), or trust a book whose owner is not
the one a member would have used, or another user's link to a log.

Valid books are copies of books made by real members under the shim (over
the fake driver), each given the owner and name the case needs.

Usage: test_shared_readers.py GROUP_TOOL REPORT_TOOL SHIM FAKE_DIR FIXTURES
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import users  # noqa: E402
from harness import CUDA_START  # noqa: E402

GROUP_TOOL, REPORT_TOOL, SHIM, FAKE_DIR, FIXTURES = sys.argv[1:6]
del sys.argv[1:6]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
TIMEOUT = 10  # seconds; a reader that takes longer is hung
# The users' python: one they can run (the test's own may live in root's home).
USER_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable

# The offset of the name in a book's header (group/book.h).
NAME_OFF, NAME_LEN = 80, 65

# A member: joins its group's book (or its user's registry) at cuInit and
# its first GPU, says "ready", then waits for stdin to close.
MEMBER = CUDA_START + r'''
import sys
p = ctypes.c_uint64()
assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(64 << 20)) == 0
print("ready", flush=True)
sys.stdin.read()
'''

# Run as the owner of a book: truncate it and put it back, again and
# again, for SECONDS.
TRUNCATE = r'''
import os, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
fd = os.open(path, os.O_RDWR)
data = os.pread(fd, os.fstat(fd).st_size, 0)
end = time.monotonic() + seconds
while time.monotonic() < end:
    os.ftruncate(fd, len(data))
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, 0)
os.ftruncate(fd, len(data))
os.pwrite(fd, data, 0)
'''


def make_template(kind_env, book_name):
    """The bytes of a book made by a live member (its slot live; once the
    member is gone, readers find it dead)."""
    d = tempfile.mkdtemp()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
    env.update({"CUMEMCAP_GROUP_DIR": d, "CUMEMCAP_LOG": "off", "CUMEMCAP_POOL": "off",
                "FAKECUDA_DEVICES": "16GiB", "LD_LIBRARY_PATH": FAKE_DIR,
                "LD_PRELOAD": (EXTRA + ":" if EXTRA else "") + SHIM})
    env.update(kind_env)
    p = subprocess.Popen([sys.executable, "-c", MEMBER], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready", "the member did not start"
        with open(os.path.join(d, book_name), "rb") as f:
            data = f.read()
    finally:
        p.stdin.close()
        p.wait(timeout=TIMEOUT)
        p.stdout.close()
    return data, p.pid


def with_name(data, name):
    raw = name.encode()
    assert len(raw) < NAME_LEN
    return data[:NAME_OFF] + raw + b"\0" * (NAME_LEN - len(raw)) + data[NAME_OFF + NAME_LEN:]


@users.needs_users

def catches(pid, sig):
    """Whether process PID has a handler for SIG (SigCgt of its status)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False

class SharedReaders(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.group_book, cls.group_pid = make_template({"CUMEMCAP_GROUP": "tmpl"}, "cumemcap-group.tmpl")
        cls.registry_book, cls.registry_pid = make_template({"CUMEMCAP_LIMIT": "1GiB"}, "cumemcap-node.0")
        assert cls.group_book[NAME_OFF:NAME_OFF + 5] == b"tmpl\0"
        assert cls.registry_book[NAME_OFF:NAME_OFF + 2] == b"0\0"
        cls.alice, cls.bob = users.uid(users.ALICE), users.uid(users.BOB)

    def setUp(self):
        self.dir = users.shared_dir()

    def plant(self, name, data, owner, mode=0o600, kind="group"):
        """A book `name` (cumemcap-KIND.NAME) owned by `owner`, its header
        naming it `name`."""
        path = os.path.join(self.dir, "cumemcap-%s.%s" % (kind, name))
        template = self.group_book if kind == "group" else self.registry_book
        with open(path, "wb") as f:
            f.write(with_name(template if data is None else data, name))
        os.chown(path, owner, owner)
        os.chmod(path, mode)
        return path

    def as_user(self, who, code, *args):
        r = users.run_as(who, [USER_PYTHON, "-c", code, *args], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)

    def tool(self, *args, timeout=TIMEOUT):
        try:
            return subprocess.run([GROUP_TOOL, *args], capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail("hung: cumemcap-group %s" % " ".join(args))

    def top(self, *extra):
        r = self.tool("top", "--once", "--json", "--dir", self.dir, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout), r.stderr

    def group_list(self):
        r = self.tool("group", "list", "--json", "--dir", self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {g["name"]: g for g in json.loads(r.stdout)["groups"]}

    def one_line(self, r, status, *words):
        self.assertEqual(r.returncode, status, (r.stdout, r.stderr))
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for w in words:
            self.assertIn(w, lines[0])

    # ---- books ------------------------------------------------------------------------------

    def plant_fifos(self):
        """BOB's group "real", and FIFOs by ALICE under a registry's and two
        groups' names (one read before "real", one after)."""
        self.plant("real", None, self.bob)
        names = ["cumemcap-node.%d" % self.alice, "cumemcap-group.aaa", "cumemcap-group.zzz"]
        self.as_user(users.ALICE, "import os, sys\nfor p in sys.argv[1:]: os.mkfifo(p, 0o666)",
                     *[os.path.join(self.dir, n) for n in names])

    def test_fifos_block_no_top(self):
        self.plant_fifos()
        view, _ = self.top()
        self.assertEqual([g["name"] for g in view["groups"]], ["real"])

    def test_fifos_block_no_list_or_show(self):
        """A FIFO is refused with its reason; the books beside it are read."""
        self.plant_fifos()
        groups = self.group_list()
        self.assertNotIn("error", groups["real"])
        self.assertIn("not a regular file", groups["aaa"]["error"])
        self.assertEqual(self.tool("group", "show", "real", "--dir", self.dir).returncode, 0)
        self.one_line(self.tool("group", "show", "aaa", "--dir", self.dir), 1, "not a regular file")
        self.one_line(self.tool("group", "set", "aaa", "--limit", "1GiB", "--dir", self.dir), 1,
                      "not a regular file")

    def test_fifos_keep_no_top_from_sigterm(self):
        """top, refreshing, stops at SIGTERM."""
        self.plant_fifos()
        p = subprocess.Popen([GROUP_TOOL, "top", "--dir", self.dir, "--interval", "0.1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # Once top catches SIGTERM (its handler is in), and a little
        # longer, so that it is among the FIFOs when the signal comes.
        deadline = time.monotonic() + TIMEOUT
        while not catches(p.pid, signal.SIGTERM):
            self.assertLess(time.monotonic(), deadline, "top never installed its SIGTERM handler")
            time.sleep(0.02)
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.fail("top did not stop at SIGTERM")
        self.assertEqual(p.returncode, 0, err)

    def plant_junk(self, count):
        """BOB's group "real", then COUNT empty files by ALICE under group
        names (made after it: readdir lists them first on tmpfs)."""
        self.plant("real", None, self.bob)
        self.as_user(users.ALICE, "import os, sys\n"
                     "for i in range(int(sys.argv[2])):\n"
                     "    open(os.path.join(sys.argv[1], 'cumemcap-group.junk%04d' % i), 'w')",
                     self.dir, str(count))

    def test_junk_hides_no_book_from_top(self):
        self.plant_junk(1100)
        view, _ = self.top()
        self.assertEqual([g["name"] for g in view["groups"]], ["real"])

    def test_junk_hides_no_book_from_list(self):
        self.plant_junk(4200)
        groups = self.group_list()
        self.assertEqual(len(groups), 4201)
        self.assertEqual([n for n, g in groups.items() if "error" not in g], ["real"])

    @unittest.skipIf("tsan" in os.environ.get("LD_PRELOAD_EXTRA", ""),
                     "ThreadSanitizer loses track of a siglongjmp out of the SIGBUS handler and can "
                     "leave every signal blocked, so top never sees SIGTERM (llvm-project issue 215833)")
    def test_truncating_a_book_crashes_no_reader(self):
        """ALICE truncates and restores her own registry again and again
        while root's top reads (and reaps) it: top never dies of SIGBUS."""
        path = self.plant(str(self.alice), None, self.alice, kind="node")
        seconds = 4
        attacker = users.popen_as(users.ALICE, [USER_PYTHON, "-c", TRUNCATE, path, str(seconds)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        watcher = subprocess.Popen([GROUP_TOOL, "top", "--json", "--dir", self.dir, "--interval", "0.1"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        runs = []
        end = time.monotonic() + seconds - 0.5
        while time.monotonic() < end:
            r = self.tool("top", "--once", "--json", "--dir", self.dir)
            runs.append(r.returncode)
        watcher.send_signal(signal.SIGTERM)
        try:
            _, werr = watcher.communicate(timeout=TIMEOUT)
        finally:
            _, aerr = attacker.communicate(timeout=TIMEOUT + seconds)
        self.assertEqual(attacker.returncode, 0, aerr)
        self.assertEqual([rc for rc in runs if rc != 0], [], "top --once failed in %d of %d runs" %
                         (sum(rc != 0 for rc in runs), len(runs)))
        self.assertEqual(watcher.returncode, 0, werr)
        self.assertGreater(len(runs), 5)

    def test_registry_owned_by_another_uid_is_refused(self):
        """A registry named for BOB but owned by ALICE is not read; ALICE's
        own registry is."""
        self.plant(str(self.bob), None, self.alice, kind="node")
        view, err = self.top("--debug")
        self.assertEqual(view["processes"], [])
        self.assertIn("owned by uid %d, not by uid %d" % (self.alice, self.bob), err)

        self.plant(str(self.alice), None, self.alice, kind="node")
        view, _ = self.top()
        self.assertEqual([(p["pid"], p["uid"]) for p in view["processes"]], [(self.registry_pid, 0)])

    def test_group_books_no_member_would_use_are_refused(self):
        """A group's book open to every user, and a book under another
        group's name, are not read as groups."""
        self.plant("open", None, self.alice, mode=0o666)
        path = os.path.join(self.dir, "cumemcap-group.fake")
        with open(path, "wb") as f:
            f.write(with_name(self.group_book, "real"))
        os.chown(path, self.alice, self.alice)
        os.chmod(path, 0o600)

        view, err = self.top("--debug")
        self.assertEqual(view["groups"], [])
        self.assertIn("mode 0666", err)
        groups = self.group_list()
        self.assertIn("mode 0666", groups["open"]["error"])
        self.assertIn('not "fake"', groups["fake"]["error"])
        self.one_line(self.tool("group", "show", "open", "--dir", self.dir), 1, "mode 0666")

    # ---- logs -------------------------------------------------------------------------------

    def report(self, *args):
        try:
            return subprocess.run([REPORT_TOOL, *args], capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.fail("hung: cumemcap-report %s" % " ".join(args))

    def pids(self, r):
        self.assertEqual(r.returncode, 0, r.stderr)
        return sorted(p["pid"] for p in json.loads(r.stdout)["processes"])

    def plant_logs(self):
        """A shared log directory: root's a.jsonl (pid 4242); ALICE's link
        zz.jsonl to a log only root may read (pid 7001), and her FIFO."""
        with open(os.path.join(FIXTURES, "normal.jsonl")) as f:
            normal = f.read()
        with open(os.path.join(FIXTURES, "multi-a.jsonl")) as f:
            secret_log = f.read()
        with open(os.path.join(self.dir, "a.jsonl"), "w") as f:
            f.write(normal)
        self.secret = os.path.join(tempfile.mkdtemp(), "secret.jsonl")  # in a 0700 directory of root's
        with open(self.secret, "w") as f:
            f.write(secret_log)
        self.link = os.path.join(self.dir, "zz.jsonl")
        self.fifo = os.path.join(self.dir, "pipe.jsonl")
        self.as_user(users.ALICE, "import os, sys\nos.symlink(sys.argv[1], sys.argv[2])\n"
                     "os.mkfifo(sys.argv[3], 0o666)", self.secret, self.link, self.fifo)

    def test_report_follows_no_link_of_another_user(self):
        """ALICE's link in the directory is skipped with one line."""
        self.plant_logs()
        r = self.report("--json", self.dir)
        self.assertEqual(self.pids(r), [4242])
        self.one_line(r, 0, self.link, "skipped", "uid %d" % self.alice)

    def test_report_follows_links_of_the_caller_and_typed_paths(self):
        """root's own link in the directory is followed, and so is a link
        root names on the command line."""
        self.plant_logs()
        self.assertEqual(self.pids(self.report("--json", self.link)), [7001])
        os.symlink(self.secret, os.path.join(self.dir, "mine.jsonl"))
        self.assertEqual(self.pids(self.report("--json", self.dir)), [4242, 7001])

    def test_report_reads_nothing_of_proc(self):
        """A file of /proc (regular, but reading some has effects: /proc/kmsg)
        is refused with one line, even named on the command line."""
        self.one_line(self.report("/proc/self/status"), 1, "/proc/self/status", "a file of /proc")

    def test_report_waits_on_no_fifo(self):
        """A FIFO named on the command line is refused with one line."""
        self.plant_logs()
        self.one_line(self.report(self.fifo), 1, self.fifo, "a FIFO")


if __name__ == "__main__":
    users.main()
