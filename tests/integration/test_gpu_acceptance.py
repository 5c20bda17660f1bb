#!/usr/bin/env python3
"""scripts/gpu-acceptance where there is no NVIDIA GPU: one line, exit 0,
nothing built or run; the test suite's fake libcuda.so.1 is never taken for
a GPU, even next to an nvidia-smi that lists one and a kernel driver's files.

Each run uses a copy of the script in an empty tree, an empty working folder
and an empty TMPDIR (so a build or a temporary folder would show as new
files), and a PATH whose first folder holds spies for the build tools and
interpreters: any call of them is recorded and fails the test.

Usage: test_gpu_acceptance.py SCRIPT FAKE_DIR (meson passes the paths).
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

SCRIPT, FAKE_DIR = (os.path.abspath(a) for a in sys.argv[1:3])
del sys.argv[1:3]
FAKE_LIB = os.path.join(FAKE_DIR, "libcuda.so.1")
PREFIX = "gpu-acceptance: no NVIDIA GPU on this machine ("
SUFFIX = "); nothing was checked\n"
SPIED = ["meson", "ninja", "python", "python3", "cc", "gcc", "clang", "make", "cmake", "nvcc",
         "pip", "pip3"]


def message(reason):
    return PREFIX + reason + SUFFIX


def write_exe(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def real_gpu_here():
    """What the script itself asks: nvidia-smi lists a GPU and the kernel
    driver is there."""
    if not shutil.which("nvidia-smi"):
        return False
    try:
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return (p.returncode == 0 and any(line.startswith("GPU ") for line in p.stdout.splitlines())
            and (os.path.isdir("/proc/driver/nvidia") or os.path.exists("/dev/nvidiactl")))


def ldconfig_has_libcuda():
    for ldc in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        if shutil.which(ldc):
            out = subprocess.run([ldc, "-p"], capture_output=True, text=True).stdout
            return any(line.split() and line.split()[0] == "libcuda.so.1" for line in out.splitlines())
    return False


class NoGpu(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="gpu-acceptance-test.")
        self.addCleanup(self.tmp.cleanup)
        base = self.tmp.name
        # The script in a tree of its own: anything it builds or writes shows.
        self.tree = os.path.join(base, "tree")
        os.makedirs(os.path.join(self.tree, "scripts"))
        self.script = os.path.join(self.tree, "scripts", "gpu-acceptance")
        shutil.copy2(SCRIPT, self.script)
        self.cwd = os.path.join(base, "cwd")
        os.makedirs(self.cwd)
        self.spies = os.path.join(base, "spies")
        os.makedirs(self.spies)
        self.spy_log = os.path.join(base, "spied.log")
        for name in SPIED:
            write_exe(os.path.join(self.spies, name),
                      '#!/bin/sh\necho "%s $*" >>"%s"\nexit 97\n' % (name, self.spy_log))
        self.stubs = os.path.join(base, "stubs")
        os.makedirs(self.stubs)
        self.root = os.path.join(base, "root")  # GPU_ACCEPTANCE_ROOT
        os.makedirs(self.root)
        self.tmpdir = os.path.join(base, "tmp")  # TMPDIR: a temporary folder shows too
        os.makedirs(self.tmpdir)

    def nvidia_smi(self, stdout, status=0):
        write_exe(os.path.join(self.stubs, "nvidia-smi"),
                  "#!/bin/sh\ncat <<'EOF'\n%sEOF\nexit %d\n" % (stdout, status))

    def kernel_driver(self):
        os.makedirs(os.path.join(self.root, "proc", "driver", "nvidia"))
        with open(os.path.join(self.root, "proc", "driver", "nvidia", "version"), "w") as f:
            f.write("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Release Build\n")
        os.makedirs(os.path.join(self.root, "dev"))
        open(os.path.join(self.root, "dev", "nvidiactl"), "w").close()

    def run_script(self, args=(), env_add=None, stubs=False):
        env = {k: v for k, v in os.environ.items()
               if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_", "GPU_ACCEPTANCE_"))}
        path = [self.spies] + ([self.stubs] if stubs else []) + [os.environ.get("PATH", "/usr/bin:/bin")]
        env["PATH"] = ":".join(path)
        env["TMPDIR"] = self.tmpdir
        env.update(env_add or {})
        before = self.files()
        p = subprocess.run([self.script] + list(args), env=env, cwd=self.cwd, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(self.files(), before, "the script wrote files: " + p.stdout + p.stderr)
        spied = open(self.spy_log).read() if os.path.exists(self.spy_log) else ""
        self.assertEqual(spied, "", "the script ran build tools or interpreters")
        return p

    def files(self):
        found = set()
        for top in (self.tree, self.cwd, self.tmpdir):
            for dirpath, dirnames, filenames in os.walk(top):
                found.update(os.path.join(dirpath, n) for n in dirnames + filenames)
        return found

    def assert_no_gpu(self, p, reason=None):
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(p.stderr, "")
        if reason is not None:
            self.assertEqual(p.stdout, message(reason))
        else:
            self.assertTrue(p.stdout.startswith(PREFIX) and p.stdout.endswith(SUFFIX), p.stdout)
            self.assertEqual(len(p.stdout.splitlines()), 1, p.stdout)
        for word in ("PASS", "FAIL", "passed"):
            self.assertNotIn(word, p.stdout)

    def test_this_machine(self):
        if real_gpu_here():
            self.skipTest("this machine has an NVIDIA GPU")
        p = self.run_script()
        self.assert_no_gpu(p, "nvidia-smi: not found" if not shutil.which("nvidia-smi") else None)

    def test_fake_driver_in_library_path_here(self):
        # Whatever this machine has, the fake in LD_LIBRARY_PATH is no GPU.
        self.assertTrue(os.path.exists(FAKE_LIB), FAKE_LIB)
        p = self.run_script(env_add={"LD_LIBRARY_PATH": FAKE_DIR})
        if shutil.which("nvidia-smi"):
            self.assert_no_gpu(p)
        else:
            self.assert_no_gpu(p, "nvidia-smi: not found")

    def test_fake_driver_next_to_a_gpu_lookalike(self):
        # nvidia-smi lists a GPU and the kernel driver's files are there, but
        # the libcuda.so.1 a program would load is the fake.
        self.assertTrue(os.path.exists(FAKE_LIB), FAKE_LIB)
        self.nvidia_smi("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f)\n")
        self.kernel_driver()
        for lib_path in (FAKE_DIR, "/nonexistent::" + FAKE_DIR):
            with self.subTest(LD_LIBRARY_PATH=lib_path):
                p = self.run_script(stubs=True, env_add={"LD_LIBRARY_PATH": lib_path,
                                                         "GPU_ACCEPTANCE_ROOT": self.root})
                self.assert_no_gpu(p, "libcuda.so.1 is %s, the cumemcap test suite's fake driver, "
                                      "not NVIDIA's" % FAKE_LIB)

    def test_options_do_not_change_it(self):
        self.nvidia_smi("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f)\n")
        self.kernel_driver()
        keep = os.path.join(self.cwd, "kept")
        p = self.run_script(["--limit", "2GiB", "--keep-logs", keep, "--only", "torch,jax"], stubs=True,
                            env_add={"LD_LIBRARY_PATH": FAKE_DIR, "GPU_ACCEPTANCE_ROOT": self.root})
        self.assert_no_gpu(p, "libcuda.so.1 is %s, the cumemcap test suite's fake driver, "
                              "not NVIDIA's" % FAKE_LIB)

    def test_nvidia_smi_without_driver(self):
        self.nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                        "Make sure that the latest NVIDIA driver is installed and running.\n", 9)
        p = self.run_script(stubs=True, env_add={"GPU_ACCEPTANCE_ROOT": self.root})
        self.assert_no_gpu(p, "nvidia-smi -L: exit status 9: NVIDIA-SMI has failed because it couldn't "
                              "communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
                              "driver is installed and running.")

    def test_nvidia_smi_lists_no_gpu(self):
        self.nvidia_smi("No devices were found\n")
        p = self.run_script(stubs=True, env_add={"GPU_ACCEPTANCE_ROOT": self.root})
        self.assert_no_gpu(p, "nvidia-smi -L lists no GPU")

    def test_no_kernel_driver(self):
        self.nvidia_smi("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f)\n")
        p = self.run_script(stubs=True, env_add={"LD_LIBRARY_PATH": FAKE_DIR,
                                                 "GPU_ACCEPTANCE_ROOT": self.root})
        self.assert_no_gpu(p, "nvidia-smi answers, but there is no NVIDIA kernel driver: neither "
                              "%s/proc/driver/nvidia nor %s/dev/nvidiactl exists" % (self.root, self.root))

    def test_no_libcuda(self):
        if ldconfig_has_libcuda():
            self.skipTest("this machine's ldconfig cache has a libcuda.so.1")
        self.nvidia_smi("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f)\n")
        self.kernel_driver()
        p = self.run_script(stubs=True, env_add={"LD_LIBRARY_PATH": self.stubs,
                                                 "GPU_ACCEPTANCE_ROOT": self.root})
        self.assert_no_gpu(p, "no libcuda.so.1 in LD_LIBRARY_PATH or the ldconfig cache")


class Script(unittest.TestCase):
    def test_bash_syntax(self):
        p = subprocess.run(["bash", "-n", SCRIPT], capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    def test_executable(self):
        self.assertTrue(os.access(SCRIPT, os.X_OK))

    def test_help(self):
        p = subprocess.run([SCRIPT, "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        for text in ("--limit", "--keep-logs", "--only", "nothing was checked", "SKIP",
                     "CUMEMCAP_FRAMEWORK_HINTS=off", "CUMEMCAP_POOL=nopack", "Exit status"):
            self.assertIn(text, p.stdout)

    def test_usage_errors(self):
        for args in (["--bogus"], ["--limit"], ["--keep-logs"], ["--only", "numpy"]):
            with self.subTest(args=args):
                p = subprocess.run([SCRIPT] + args, capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 2)
                self.assertEqual(p.stdout, "")
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
