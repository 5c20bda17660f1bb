#!/usr/bin/env python3
"""Process-level checks of the shim: bad configuration stops a program
before main with one line; no driver or no CUDA use leaves a program
untouched; only the intended symbols are exported; dlsym(RTLD_NEXT) keeps
working for other interposers.

Usage: test_env.py SHIM FAKE_DIR HOOKS_DEF NOCUDA NODRIVER RTLD_NEXT LAUNCHER LIMIT_PROG TOOL
(meson passes the built paths). LD_PRELOAD_EXTRA, when set, is put in
front of the shim in LD_PRELOAD (the sanitizer runtime in ASan builds).
"""
import os
import json
import re
import subprocess
import sys
import tempfile
import unittest

SHIM, FAKE_DIR, HOOKS_DEF, NOCUDA, NODRIVER, RTLD_NEXT, LAUNCHER, LIMIT_PROG, TOOL = sys.argv[1:10]
# src/, two levels above src/driver/hooks.def
SRC = os.path.dirname(os.path.dirname(os.path.abspath(HOOKS_DEF)))
del sys.argv[1:10]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
CONFIG_EXIT = 125


def shim_env(env_add=None, with_fake=True):
    env = {k: v for k, v in os.environ.items()
           if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_", "TF_", "XLA_", "PYTORCH_"))}
    env["LD_PRELOAD"] = (EXTRA + ":" if EXTRA else "") + SHIM
    if with_fake:
        env["LD_LIBRARY_PATH"] = FAKE_DIR
    env.update(env_add or {})
    return env


def run(argv, env_add=None, with_fake=True):
    return subprocess.run(argv, env=shim_env(env_add, with_fake), capture_output=True, text=True,
                          timeout=60)


class BadConfiguration(unittest.TestCase):
    """A wrong value stops the process before main, with one line naming
    the variable, the value and the accepted forms."""

    CASES = [
        ("CUMEMCAP_LIMIT", "banana"),
        ("CUMEMCAP_LIMIT", "-1G"),
        ("CUMEMCAP_LIMIT", "12XB"),
        ("CUMEMCAP_LIMIT", "150%"),
        ("CUMEMCAP_LIMIT", "0"),
        ("CUMEMCAP_LIMIT", ""),
        ("CUMEMCAP_LIMIT", "8 GiB"),
        ("CUMEMCAP_DEVICE_LIMITS", "foo=4GiB"),
        ("CUMEMCAP_DEVICE_LIMITS", "0=banana"),
        ("CUMEMCAP_DEVICE_LIMITS", "0"),
        ("CUMEMCAP_DEVICE_LIMITS", "GPU-123=1G"),
        ("CUMEMCAP_DEVICE_LIMITS", "0=1G,0=2G"),
        ("CUMEMCAP_DEVICE_LIMITS", "0000:3b:00=1G"),
        ("CUMEMCAP_GROWTH", "preallocate:lots"),
        ("CUMEMCAP_LOG", "/tmp/cumemcap-%z.log"),
        ("CUMEMCAP_POOL", "maybe"),
        ("CUMEMCAP_RELEASE", "idle:-1"),
        ("CUMEMCAP_FRAMEWORK_HINTS", "1"),
        ("CUMEMCAP_LOG_INTERVAL", "0"),
        ("CUMEMCAP_METRICS", "%"),
        ("CUMEMCAP_CONFIG", "/nonexistent/cumemcap.conf"),
        ("CUMEMCAP_DEBUG", "everything"),
    ]

    def test_refused_before_main(self):
        for var, value in self.CASES:
            with self.subTest(var=var, value=value):
                p = run(["/bin/echo", "main ran"], {var: value})
                self.assertEqual(p.returncode, CONFIG_EXIT, p.stderr)
                self.assertEqual(p.stdout, "", "main must not run")
                lines = p.stderr.splitlines()
                self.assertEqual(len(lines), 1, p.stderr)
                self.assertIn(var, lines[0])
                self.assertIn('"%s"' % value, lines[0])
                self.assertRegex(lines[0], "accepted|expected|same GPU|not built yet|cannot open")

    def test_refused_for_python_too(self):
        p = run([sys.executable, "-c", "print('main ran')"], {"CUMEMCAP_LIMIT": "12XB"})
        self.assertEqual(p.returncode, CONFIG_EXIT)
        self.assertEqual(p.stdout, "")

    def test_good_values_run(self):
        for env in ({"CUMEMCAP_LIMIT": "8GiB"}, {"CUMEMCAP_LIMIT": "1.5G"},
                    {"CUMEMCAP_LIMIT": "75%"}, {"CUMEMCAP_LIMIT": "536870912"},
                    {"CUMEMCAP_DEVICE_LIMITS": "0=4GiB,GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f=12GiB,0000:3b:00.0=50%"},
                    {"CUMEMCAP_GROWTH": "ondemand", "CUMEMCAP_LOG": "off"}):
            with self.subTest(env=env):
                p = run(["/bin/echo", "main ran"], env)
                self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "main ran\n", ""))


class HostileEnvironments(unittest.TestCase):
    def test_no_driver_program_untouched(self):
        p = run(["/bin/true"], with_fake=False)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        p = run([sys.executable, "-c", "print(1)"], {"CUMEMCAP_LIMIT": "4GiB"}, with_fake=False)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "1\n", ""))

    def test_no_driver_cuda_client(self):
        p = run([NODRIVER], {"CUMEMCAP_LIMIT": "4GiB"}, with_fake=False)
        if p.returncode == 77:
            self.skipTest("this machine has a libcuda.so.1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")

    def test_driver_untouched_without_cuda_use(self):
        p = run([NOCUDA], {"CUMEMCAP_LIMIT": "4GiB", "CUMEMCAP_DEVICE_LIMITS": "0=1GiB"})
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_stderr_nobody_reads_raises_no_sigpipe(self):
        # CUMEMCAP_LOG=stderr, a refusal line and the exit summary, into a
        # pipe whose reader is gone: the program's exit status is its own.
        r, w = os.pipe()
        os.close(r)
        env = {"FAKECUDA_DEVICES": "4GiB", "CUMEMCAP_LIMIT": "1GiB", "CUMEMCAP_LOG": "stderr",
               "CUMEMCAP_RELEASE": "immediate"}
        try:
            p = subprocess.run([LIMIT_PROG, "dlsym"], env=shim_env(env), stdout=subprocess.PIPE,
                               stderr=w, timeout=60)
        finally:
            os.close(w)
        self.assertEqual(p.returncode, 0, "killed by signal %d" % -p.returncode if p.returncode < 0 else "")

    def test_rule_for_an_absent_gpu_is_reported_once(self):
        # The same settings may serve machines with other cards: not fatal,
        # one line when CUDA is first used, and the other rules still hold.
        p = run([LIMIT_PROG, "dlsym"], {
            "FAKECUDA_DEVICES": "4GiB", "CUMEMCAP_LIMIT": "1GiB", "CUMEMCAP_RELEASE": "immediate",
            "CUMEMCAP_DEVICE_LIMITS": "GPU-00000000-1111-2222-3333-444444444444=2GiB,5=3GiB"})
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 2, p.stderr)
        self.assertIn("GPU-00000000-1111-2222-3333-444444444444", lines[0])
        self.assertIn('"5"', lines[1])
        for line in lines:
            self.assertIn("matches none of the 1 GPU", line)

    def test_rtld_next_relative_to_caller(self):
        p = run([RTLD_NEXT])
        self.assertEqual(p.returncode, 0, p.stderr)


class FrameworkHints(unittest.TestCase):
    """Under a limit, with ondemand growth, the shim asks TensorFlow and JAX
    to grow, in the process environment, before main; never without a
    limit (an observe-only run changes nothing), and never over any memory
    setting the user gave that framework (src/config/hints.c)."""

    TF = ("TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR", "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC",
          "TF_FORCE_UNIFIED_MEMORY")
    JAX = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
           "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR")
    USER_VALUE = {"TF_FORCE_GPU_ALLOW_GROWTH": "false", "TF_GPU_ALLOCATOR": "cuda_malloc_async",
                  "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC": "-1", "TF_FORCE_UNIFIED_MEMORY": "1",
                  "XLA_PYTHON_CLIENT_PREALLOCATE": "true", "XLA_CLIENT_PREALLOCATE": "true",
                  "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5", "XLA_CLIENT_MEM_FRACTION": ".5",
                  "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def env_of(self, env_add):
        env_add = dict({"CUMEMCAP_GROUP_DIR": self.tmp.name, "CUMEMCAP_CONFIG": ""}, **env_add)
        p = run(["/usr/bin/env"], env_add)
        self.assertEqual(p.returncode, 0, p.stderr)
        return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)

    def assert_hints(self, e, tf, jax):
        self.assertEqual(e.get("TF_FORCE_GPU_ALLOW_GROWTH") == "true" and "TF_FORCE_GPU_ALLOW_GROWTH", tf and "TF_FORCE_GPU_ALLOW_GROWTH")
        self.assertEqual(e.get("XLA_PYTHON_CLIENT_PREALLOCATE") == "false" and "XLA", jax and "XLA")
        # JAX raises when both fraction names are set: cumemcap sets neither.
        for var in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_PREALLOCATE"):
            if var not in self.given:
                self.assertNotIn(var, e)

    def check(self, env_add, tf, jax):
        self.given = env_add
        e = self.env_of(env_add)
        self.assert_hints(e, tf, jax)
        return e

    def test_observe_only_without_a_limit(self):
        e = self.check({}, False, False)
        self.assertNotIn("TF_FORCE_GPU_ALLOW_GROWTH", e)
        self.assertNotIn("XLA_PYTHON_CLIENT_PREALLOCATE", e)

    def test_set_when_a_limit_applies(self):
        conf = os.path.join(self.tmp.name, "c.conf")
        with open(conf, "w") as f:
            f.write("[device 0]\nlimit = 1GiB\n")
        for env_add in ({"CUMEMCAP_LIMIT": "4GiB"}, {"CUMEMCAP_DEVICE_LIMITS": "0=4GiB"},
                        {"CUMEMCAP_GROUP": "g"}, {"CUMEMCAP_CONFIG": conf}):
            with self.subTest(**env_add):
                self.check(env_add, True, True)

    def test_user_settings_are_never_overridden(self):
        for var in self.TF + self.JAX:
            with self.subTest(var=var):
                e = self.check({"CUMEMCAP_LIMIT": "4GiB", var: self.USER_VALUE[var]},
                               var not in self.TF, var not in self.JAX)
                self.assertEqual(e[var], self.USER_VALUE[var])

    def test_fraction_means_preallocation_is_wanted(self):
        e = self.check({"CUMEMCAP_LIMIT": "4GiB", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}, True, False)
        self.assertNotIn("XLA_PYTHON_CLIENT_PREALLOCATE", e)
        self.assertNotIn("XLA_CLIENT_MEM_FRACTION", e)

    def test_not_set_when_off_or_preallocating(self):
        for env_add in ({"CUMEMCAP_FRAMEWORK_HINTS": "off"}, {"CUMEMCAP_GROWTH": "preallocate"}):
            with self.subTest(**env_add):
                self.check(dict(env_add, CUMEMCAP_LIMIT="4GiB"), False, False)

    def test_print_config_says_what_the_shim_does(self):
        cases = ({}, {"CUMEMCAP_LIMIT": "4GiB"}, {"CUMEMCAP_LIMIT": "4GiB", "XLA_CLIENT_MEM_FRACTION": ".5"},
                 {"CUMEMCAP_LIMIT": "4GiB", "TF_GPU_ALLOCATOR": "cuda_malloc_async"},
                 {"CUMEMCAP_LIMIT": "4GiB", "CUMEMCAP_FRAMEWORK_HINTS": "off"})
        for env_add in cases:
            with self.subTest(**env_add):
                self.given = env_add
                e = self.env_of(env_add)
                env = shim_env(dict(env_add, CUMEMCAP_CONFIG=""))
                del env["LD_PRELOAD"]
                p = subprocess.run([TOOL, "--print-config", "--json"], env=env, capture_output=True,
                                   text=True, timeout=60)
                self.assertEqual(p.returncode, 0, p.stderr)
                plan = json.loads(p.stdout)["framework_hints"]
                said = {h["variable"] for h in plan["hints"] if h["set"]}
                done = {v for v in ("TF_FORCE_GPU_ALLOW_GROWTH", "XLA_PYTHON_CLIENT_PREALLOCATE")
                        if v in e and v not in env_add}
                self.assertEqual(said, done)
                for h in plan["hints"]:
                    if not h["set"]:
                        self.assertIn(h["user"], env_add)


class ObserveOnly(unittest.TestCase):
    """Without a limit or a group on a GPU, the default pool (auto) serves
    nothing there: every cuMemAlloc reaches the driver at its own size, and
    the exit record counts no driver call avoided. A limit, a group or
    CUMEMCAP_POOL=on turns pooling on; the log is written either way."""

    # Allocates 1000 bytes on each GPU in argv and prints what the fake
    # driver holds there for allocations.
    PROBE = r"""
import ctypes, json, sys
cu = ctypes.CDLL("libcuda.so.1")
cu.fakecuda_reserved.restype = ctypes.c_uint64
assert cu.cuInit(0) == 0
held = {}
for d in map(int, sys.argv[1:]):
    ctx = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), d) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    p = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1000)) == 0
    held[d] = cu.fakecuda_reserved(d)
print(json.dumps(held))
"""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def held(self, env_add, gpus=(0,)):
        log = os.path.join(self.tmp.name, "%p.jsonl")
        env_add = dict({"CUMEMCAP_GROUP_DIR": self.tmp.name, "CUMEMCAP_CONFIG": "", "CUMEMCAP_LOG": log,
                        "FAKECUDA_DEVICES": "4GiB,4GiB"}, **env_add)
        p = run([sys.executable, "-c", self.PROBE] + [str(g) for g in gpus], env_add)
        self.assertEqual(p.returncode, 0, p.stderr)
        held = {int(k): v for k, v in json.loads(p.stdout).items()}
        logs = [f for f in os.listdir(self.tmp.name) if f.endswith(".jsonl")]
        self.assertEqual(len(logs), 1, "the footprint log is written, limit or not")
        with open(os.path.join(self.tmp.name, logs[0])) as f:
            records = [json.loads(line) for line in f]
        os.unlink(os.path.join(self.tmp.name, logs[0]))
        exits = [r for r in records if r["type"] == "exit"]
        self.assertEqual(len(exits), 1)
        avoided = {g["gpu"]: g["avoided"] for g in exits[0]["gpus"]}
        return held, avoided

    def test_no_limit_every_call_reaches_the_driver(self):
        held, avoided = self.held({}, (0, 1))
        self.assertEqual(held, {0: 1000, 1: 1000})
        self.assertEqual(avoided, {0: 0, 1: 0})

    def test_a_limit_or_a_group_pools_its_gpus_only(self):
        for env_add, pooled in (({"CUMEMCAP_LIMIT": "1GiB"}, {0, 1}),
                                ({"CUMEMCAP_DEVICE_LIMITS": "1=1GiB"}, {1}),
                                ({"CUMEMCAP_GROUP": "g"}, {0, 1}),
                                ({"CUMEMCAP_POOL": "on"}, {0, 1}),
                                ({"CUMEMCAP_LIMIT": "1GiB", "CUMEMCAP_POOL": "off"}, set())):
            with self.subTest(**env_add):
                held, _ = self.held(env_add, (0, 1))
                # A pooled 1000-byte request takes a 2 MiB segment.
                self.assertEqual({g for g, b in held.items() if b == 2 << 20}, pooled)
                self.assertEqual({g for g, b in held.items() if b == 1000}, {0, 1} - pooled)


class UnknownVariables(unittest.TestCase):
    """A CUMEMCAP_ variable cumemcap does not know is named, once per
    process, with the setting it is closest to; the program still runs (a
    job's environment may be newer than the library). Under the launcher it
    is named once in all, before the program starts; --print-config names
    it too."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.base = {"CUMEMCAP_GROUP_DIR": self.tmp.name, "CUMEMCAP_CONFIG": "", "CUMEMCAP_LOG": "off"}

    def tearDown(self):
        self.tmp.cleanup()

    def test_named_with_the_closest_setting(self):
        for var, hint in (("CUMEMCAP_LIMITS", " (did you mean CUMEMCAP_LIMIT?)"),
                          ("CUMEMCAP_MEM_LIMIT", " (did you mean CUMEMCAP_LIMIT?)"),
                          ("CUMEMCAP_GROUPLIMIT", " (did you mean CUMEMCAP_GROUP_LIMIT?)"),
                          ("CUMEMCAP_WHATEVER_ELSE", " (cumemcap --help lists the variables)")):
            with self.subTest(var=var):
                p = run([sys.executable, "-c", ObserveOnly.PROBE, "0"], dict(self.base, **{var: "2GiB"}))
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stderr, "cumemcap: unknown variable %s, ignored%s\n" % (var, hint))

    def test_variables_that_are_not_settings_are_known(self):
        # Each is read by a part of cumemcap (src/config/settings-table.c).
        known = {"CUMEMCAP_LIBRARY": SHIM, "CUMEMCAP_TOOL": TOOL, "CUMEMCAP_REPORT": "x",
                 "CUMEMCAP_GROUP_TOOL": "x", "CUMEMCAP_NODE_ETC": "x", "CUMEMCAP_TEST_REQUIRE_PROGRAMS": "0"}
        p = run([NOCUDA], dict(self.base, **known))
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    def test_every_variable_the_tree_reads_is_known(self):
        # The CUMEMCAP_ variables the project's code and scripts read from
        # the environment; each must be a setting or one the shim knows.
        root = os.path.dirname(SRC)
        read = set()
        pattern = re.compile(r'(?:getenv\("|environ\.get\("|environ\["|\$\{|- name: )(CUMEMCAP_[A-Z0-9_]+)')
        for top in ("src", "scripts", "deploy", "tests", "debian"):
            for d, _, files in os.walk(os.path.join(root, top)):
                for name in files:
                    try:
                        with open(os.path.join(d, name), encoding="utf-8") as f:
                            read |= set(pattern.findall(f.read()))
                    except (UnicodeDecodeError, OSError):
                        pass
        self.assertIn("CUMEMCAP_LIBRARY", read)
        self.assertIn("CUMEMCAP_NODE_ETC", read)
        env = shim_env(dict(self.base, **{v: "x" for v in read}))
        for setting in re.findall(r"^#? ?(CUMEMCAP_[A-Z_]+)=", subprocess.run(
                [TOOL, "--print-example", "env"], capture_output=True, text=True).stdout, re.M):
            env.pop(setting, None)
        env.update(self.base)
        p = subprocess.run([NOCUDA], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    @unittest.skipIf(EXTRA, "the launcher preloads the shim alone; sanitizer builds need their runtime first")
    def test_the_launcher_names_it_once(self):
        env = shim_env(dict(self.base, CUMEMCAP_LIMITS="2GiB"))
        del env["LD_PRELOAD"]
        p = subprocess.run([LAUNCHER, "--", sys.executable, "-c", ObserveOnly.PROBE, "0"],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "cumemcap: unknown variable CUMEMCAP_LIMITS, ignored "
                         "(did you mean CUMEMCAP_LIMIT?)\n")

    def test_print_config_names_it(self):
        env = shim_env(dict(self.base, CUMEMCAP_MEM_LIMIT="2GiB"))
        del env["LD_PRELOAD"]
        p = subprocess.run([LAUNCHER, "--print-config"], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "cumemcap: unknown variable CUMEMCAP_MEM_LIMIT, ignored "
                         "(did you mean CUMEMCAP_LIMIT?)\n")
        self.assertIn("limit none", p.stdout)


@unittest.skipIf(EXTRA, "the launcher preloads the shim alone; sanitizer builds need their runtime first")
class Launcher(unittest.TestCase):
    def launch(self, args, env_add=None):
        env = {k: v for k, v in os.environ.items() if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "LD_PRELOAD"))}
        env.update(env_add or {})
        return subprocess.run([LAUNCHER] + args, env=env, capture_output=True, text=True, timeout=60)

    def test_sets_variables_and_prepends_preload(self):
        p = self.launch(["--limit", "1GiB", "--device-limits", "0=512MiB", "--log", "stderr", "--",
                         "/usr/bin/env"], {"LD_PRELOAD": "/lib/x86_64-linux-gnu/libc.so.6"})
        self.assertEqual(p.returncode, 0, p.stderr)
        env = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
        self.assertEqual(env["CUMEMCAP_LIMIT"], "1GiB")
        self.assertEqual(env["CUMEMCAP_DEVICE_LIMITS"], "0=512MiB")
        self.assertEqual(env["CUMEMCAP_LOG"], "stderr")
        self.assertEqual(env["LD_PRELOAD"], SHIM + ":/lib/x86_64-linux-gnu/libc.so.6")

    def test_bad_limit_stops_before_the_program(self):
        p = self.launch(["--limit", "banana", "--", "/bin/echo", "main ran"])
        self.assertEqual(p.returncode, CONFIG_EXIT)
        self.assertEqual(p.stdout, "")
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertIn('--limit "banana"', p.stderr)

    def test_usage_errors(self):
        for args in (["--limit"], ["--bogus", "--", "/bin/true"], ["--limit", "1G"]):
            with self.subTest(args=args):
                p = self.launch(args)
                self.assertEqual(p.returncode, CONFIG_EXIT)
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)

    # Allocates on GPU 0 in a child process (a log of its own), then in itself.
    PARENT = ("import subprocess, sys\n"
              "subprocess.run([sys.executable, '-c', sys.argv[1], '0'], check=True)\n"
              "sys.argv[1:] = ['0']\n"
              "exec(compile(%r, 'probe', 'exec'))\n")

    def test_says_where_the_footprint_log_went(self):
        with tempfile.TemporaryDirectory() as d:
            env = {"LD_LIBRARY_PATH": FAKE_DIR, "CUMEMCAP_CONFIG": "", "CUMEMCAP_LOG": os.path.join(d, "%p.jsonl")}
            parent = self.PARENT % ObserveOnly.PROBE
            p = self.launch(["--", sys.executable, "-c", parent, ObserveOnly.PROBE], env)
            self.assertEqual(p.returncode, 0, p.stderr)
            logs = [os.path.join(d, f) for f in os.listdir(d)]
            self.assertEqual(len(logs), 2, "the child's and the program's")
            mine = []
            for log in logs:
                with open(log) as f:
                    if json.loads(f.readline())["argv"][2] == parent:
                        mine.append(log)
            # The program names its own log, once; its child says nothing.
            self.assertEqual(p.stderr, "cumemcap: footprint log: %s (cumemcap report summarizes it)\n" % mine[0])
            p = self.launch(["--quiet", "--", sys.executable, "-c", ObserveOnly.PROBE, "0"], env)
            self.assertEqual((p.returncode, p.stderr), (0, ""))
            p = self.launch(["--", NOCUDA], env)
            self.assertEqual((p.returncode, p.stderr), (0, "cumemcap: no footprint log: the program used no GPU\n"))
            p = self.launch(["--log", "off", "--", sys.executable, "-c", ObserveOnly.PROBE, "0"], env)
            self.assertEqual((p.returncode, p.stderr), (0, ""))

    def test_help_documents_every_variable(self):
        p = self.launch(["--help"])
        self.assertEqual(p.returncode, 0)
        with open(os.path.join(SRC, "config", "settings-table.c")) as f:
            variables = set(re.findall(r'\{ "(CUMEMCAP_[A-Z_]+)", "[a-z_]+"', f.read()))
        self.assertGreaterEqual(len(variables), 6)
        for var in variables:
            self.assertIn(var, p.stdout)
        for opt in ("--limit", "--device-limits", "--config", "--log", "--help", "--log-interval", "--metrics", "--pool", "--release"):
            self.assertIn(opt, p.stdout)


class ShippedConfiguration(unittest.TestCase):
    def test_every_conf_env_file_is_accepted(self):
        # As shipped (every line commented: nothing changes) and with every
        # commented variable in force (test_cli.py checks the defaults).
        conf = os.path.join(SRC, "..", "conf")
        files = [f for f in os.listdir(conf) if f.endswith(".env")]
        self.assertTrue(files)
        for name in files:
            env, commented = {}, {}
            with open(os.path.join(conf, name)) as f:
                lines = f.readlines()
            for n, line in enumerate(lines, 1):
                line = line.strip()
                if not line or line.startswith("# ") or line == "#":
                    continue
                key, sep, value = line.lstrip("#").partition("=")
                self.assertTrue(sep and key.startswith("CUMEMCAP_"), "%s:%d: %s" % (name, n, line))
                (commented if line.startswith("#") else env)[key] = value
            with tempfile.TemporaryDirectory() as tmp:
                commented.update(env)
                commented.update({"CUMEMCAP_GROUP_DIR": tmp, "CUMEMCAP_CONFIG": "",
                                  "CUMEMCAP_LOG": os.path.join(tmp, "%n.jsonl")})
                for e in (env, commented):
                    with self.subTest(file=name, variables=len(e)):
                        p = run(["/bin/echo", "main ran"], e)
                        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "main ran\n", ""))


class Exports(unittest.TestCase):
    def test_only_hooks_doors_and_api(self):
        with open(HOOKS_DEF) as f:
            hooks = re.findall(r"^HOOK\((\w+),", f.read(), re.M)
        self.assertGreater(len(hooks), 30)
        # The NVML hooks: src/entry/hooks-nvml.c.
        nvml = {"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2",
                "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2",
                "nvmlDeviceGetComputeRunningProcesses_v3"}
        expected = set(hooks) | nvml | {"dlsym", "dlvsym", "cumemcap_get_stats", "cumemcap_version"}
        out = subprocess.run(["nm", "-D", "--defined-only", SHIM], capture_output=True,
                             text=True, check=True).stdout
        exported = {line.split()[-1] for line in out.splitlines() if line.strip()}
        self.assertEqual(exported - expected, set(), "exported but not intended")
        self.assertEqual(expected - exported, set(), "intended but not exported")

    def test_links_only_libc(self):
        out = subprocess.run(["readelf", "-d", SHIM], capture_output=True, text=True,
                             check=True).stdout
        needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out))
        allowed = {"libc.so.6", "libdl.so.2", "libpthread.so.0", "ld-linux-x86-64.so.2",
                   "ld-linux-aarch64.so.1", "libasan.so.8", "libubsan.so.1", "libtsan.so.2"}
        self.assertEqual(needed - allowed, set(), "the shim must not link the driver")


if __name__ == "__main__":
    unittest.main(verbosity=2)
