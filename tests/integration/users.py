"""Two unprivileged users, for the tests of what one user on a shared node
can do to another.

`main()` takes the place of unittest.main() in such a test program. Run as
root, it runs the program again inside a private mount namespace
(`unshare -m`), where:
  - /tmp and /dev/shm are new, empty tmpfs mounts (mode 1777, like the real
    ones), so nothing the test does lands in the machine's;
  - /etc is a copy (on that /tmp), bind-mounted over /etc, and the two users
    ALICE and BOB, and a group SHARED that holds both (as `video` holds every
    user on a GPU node), are added to the copy with useradd.
When the program ends, the namespace and all of it are gone: the machine's
/etc, /tmp and /dev/shm are never written, and there is nothing to remove.

Without root (or without unshare and useradd), the classes marked with
@needs_users are skipped with that reason.

Inside, `reachable(path...)` copies files a user must run or load (the shim,
the fake driver, a test program) into a directory every user can traverse:
the checkout may live in a 0700 home that another user cannot enter.
"""
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import unittest

ALICE = "cmcap-alice"
BOB = "cmcap-bob"
SHARED = "cmcap-shared"
_INSIDE = "CUMEMCAP_TEST_USERS_NAMESPACE"
# The command line as the program got it: test programs take their
# arguments out of sys.argv before unittest reads it.
_ARGV = list(sys.argv)


def inside():
    """True in the private namespace, with the users made."""
    return os.environ.get(_INSIDE) == "1"


def _why_not():
    if os.geteuid() != 0:
        return "needs root to make two users in a private mount namespace"
    for tool in ("unshare", "useradd", "groupadd", "mount"):
        if not shutil.which(tool):
            return "needs %s (util-linux, passwd)" % tool
    return None


def needs_users(cls):
    """Skip the class unless the program runs inside the namespace."""
    if inside():
        return cls
    return unittest.skip(_why_not() or "not run through users.main()")(cls)


def _sh(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def _set_up_namespace():
    _sh("mount", "-t", "tmpfs", "-o", "mode=1777,size=256m", "cumemcap-test-tmp", "/tmp")
    _sh("mount", "-t", "tmpfs", "-o", "mode=1777,size=64m", "cumemcap-test-shm", "/dev/shm")
    copy = "/tmp/.etc"
    _sh("cp", "-a", "/etc/.", copy + "/")
    _sh("mount", "--bind", copy, "/etc")
    _sh("groupadd", SHARED)
    for name in (ALICE, BOB):
        _sh("useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
            "--groups", SHARED, name)
    tempfile.tempdir = "/tmp"


def main():
    """unittest.main(), in the private namespace when it can be made."""
    if inside():
        _set_up_namespace()
        os.environ["TMPDIR"] = "/tmp"
        unittest.main(verbosity=2)
        return
    if _why_not() is None:
        env = dict(os.environ, **{_INSIDE: "1"})
        p = subprocess.run(["unshare", "--mount", "--propagation", "private",
                            sys.executable, os.path.abspath(_ARGV[0])] + _ARGV[1:], env=env)
        sys.exit(p.returncode)
    unittest.main(verbosity=2)


def uid(name):
    return pwd.getpwnam(name).pw_uid


def gid(name):
    return grp.getgrnam(name).gr_gid


def run_as(name, argv, **kw):
    """subprocess.run(argv) as user NAME, with its primary and extra groups."""
    pw = pwd.getpwnam(name)
    groups = [g for g in os.getgrouplist(name, pw.pw_gid) if g != pw.pw_gid]
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 60)
    return subprocess.run(argv, user=pw.pw_uid, group=pw.pw_gid, extra_groups=groups, **kw)


def popen_as(name, argv, **kw):
    pw = pwd.getpwnam(name)
    groups = [g for g in os.getgrouplist(name, pw.pw_gid) if g != pw.pw_gid]
    return subprocess.Popen(argv, user=pw.pw_uid, group=pw.pw_gid, extra_groups=groups, **kw)


def shared_dir(mode=0o1777):
    """A new directory under /tmp, sticky and world-writable by default, as
    /dev/shm, /tmp and a textfile collector's directory are."""
    d = tempfile.mkdtemp(dir="/tmp")
    os.chmod(d, mode)
    return d


def reachable(*paths):
    """Copies of PATHS (files or directories) in a new directory every user
    can traverse and read; returns the copies' paths in order."""
    d = tempfile.mkdtemp(dir="/tmp")
    os.chmod(d, 0o755)
    out = []
    for p in paths:
        dst = os.path.join(d, os.path.basename(p.rstrip("/")))
        if os.path.isdir(p):
            shutil.copytree(p, dst, symlinks=True)
        else:
            shutil.copy2(p, dst)
        out.append(dst)
    return out
