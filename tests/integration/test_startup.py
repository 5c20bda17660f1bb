#!/usr/bin/env python3
"""A process nothing configures (no CUMEMCAP_ variable, no file at the
default path, not setuid) leaves most of its start to its first CUDA call
(src/entry/shim.c): its policy is built then, from what it had at start.
What the program does to its environment in between must change nothing,
as when everything was done in the constructor; a fork before the first
call must leave parent and child each their own log. A configured process
without a group builds its policy and sets the framework hints before
main, and leaves the rest (the log's snapshot, the fork handlers) to its
first CUDA call the same way.

Usage: test_startup.py SHIM FAKE_DIR EARLY_CUDA
"""
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

SHIM, FAKE_DIR, EARLY_CUDA = sys.argv[1:4]
del sys.argv[1:4]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
MiB = 1 << 20

# Steps from argv; one JSON line per allocation.
PROBE = r'''
import ctypes, json, os, sys
args = sys.argv[1:]
def use_gpu(n):
    cu = ctypes.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0
    ctx = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    p = ctypes.c_uint64()
    r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))
    print(json.dumps({"pid": os.getpid(), "alloc": r}), flush=True)
while args:
    op = args.pop(0)
    if op == "setenv":                  # setenv(3), as os.environ does it
        k, v = args.pop(0), args.pop(0)
        os.environ[k] = v
    elif op == "env":                   # what the program sees of a variable
        k = args.pop(0)
        print(json.dumps({"env": k, "value": os.environ.get(k)}), flush=True)
    elif op == "where":                 # the mapping libc's environment string of a variable is in
        k = args.pop(0)
        getenv = ctypes.CDLL(None).getenv
        getenv.restype = ctypes.c_void_p
        at, place = getenv(k.encode()), None
        with open("/proc/self/maps") as f:
            for line in f:
                f5 = line.split(maxsplit=5)
                lo, hi = (int(x, 16) for x in f5[0].split("-"))
                if at is not None and lo <= at < hi:
                    place = f5[5].strip() if len(f5) > 5 else ""
        print(json.dumps({"where": k, "place": place}), flush=True)
    elif op == "alloc":
        use_gpu(int(args.pop(0)))
    elif op == "fork":                  # the child allocates, then the parent waits for it
        n = int(args.pop(0))
        pid = os.fork()
        if pid == 0:
            use_gpu(n)
            sys.exit(0)                 # exit(3): the shim writes its exit record
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"child": pid, "status": status}), flush=True)
'''


class BareStart(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.script = os.path.join(self.dir, "startprobe.py")
        with open(self.script, "w") as f:
            f.write(PROBE)

    def tearDown(self):
        self.tmp.cleanup()

    def run_probe(self, steps, tmpdir, after_shim="", config=None):
        # No CUMEMCAP_ variable at all (the bare start), or those of config.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
        env.update(config or {})
        env.update({"LD_LIBRARY_PATH": FAKE_DIR, "FAKECUDA_DEVICES": "4GiB", "TMPDIR": tmpdir,
                    "LD_PRELOAD": (EXTRA + ":" if EXTRA else "") + SHIM + after_shim,
                    "ASAN_OPTIONS": "detect_leaks=0"})
        p = subprocess.run([sys.executable, self.script, *steps], env=env, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]

    def logs(self, tmpdir):
        return sorted(glob.glob(os.path.join(tmpdir, "cumemcap-%d" % os.geteuid(), "*.jsonl")))

    def records(self, path):
        with open(path) as f:
            return [json.loads(l) for l in f]

    def test_a_limit_set_after_start_does_not_apply(self):
        # As when the constructor built the policy: a variable the program
        # sets later is not read.
        out = self.run_probe(["setenv", "CUMEMCAP_LIMIT", "1MiB", "alloc", str(2 * MiB)], self.dir)
        self.assertEqual(out[-1]["alloc"], 0)
        [log] = self.logs(self.dir)
        start = self.records(log)[0]
        self.assertEqual(start["type"], "start")
        self.assertEqual(start["gpus"][0]["limit"], None, start)

    def test_the_log_stays_under_the_tmpdir_of_the_start(self):
        later = os.path.join(self.dir, "later")
        os.mkdir(later)
        out = self.run_probe(["setenv", "TMPDIR", later, "alloc", str(2 * MiB)], self.dir)
        self.assertEqual(out[-1]["alloc"], 0)
        self.assertEqual(self.logs(later), [])
        [log] = self.logs(self.dir)
        recs = self.records(log)
        self.assertEqual([r["type"] for r in recs][0], "start")
        self.assertEqual((recs[0]["pid"], recs[0]["program"], recs[0]["host"]),
                         (out[-1]["pid"], "startprobe.py", socket.gethostname()))

    def test_fork_before_the_first_call(self):
        # Parent and child each start at their first call: each its own
        # log, with its own pid in every record.
        out = self.run_probe(["fork", str(2 * MiB), "alloc", str(2 * MiB)], self.dir)
        child, parent = out[0]["pid"], out[-1]["pid"]
        self.assertEqual((out[0]["alloc"], out[1]["status"], out[-1]["alloc"]), (0, 0, 0))
        logs = self.logs(self.dir)
        self.assertEqual(len(logs), 2, logs)
        pids = set()
        for log in logs:
            recs = self.records(log)
            self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))
            self.assertEqual(len({r["pid"] for r in recs}), 1, recs)
            pids.add(recs[0]["pid"])
        self.assertEqual(pids, {child, parent})

    def test_cuda_before_the_constructor(self):
        # Another preloaded library's constructor calls cuInit before the
        # shim's constructor runs: the first hook found no start to run,
        # so the constructor runs it itself; the exit record is written.
        out = self.run_probe(["alloc", str(2 * MiB)], self.dir, ":" + EARLY_CUDA)
        self.assertEqual(out[-1]["alloc"], 0)
        [log] = self.logs(self.dir)
        recs = self.records(log)
        self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))


class ConfiguredStart(BareStart):
    """A limit set, no group: the policy and the hints before main, the
    rest at the first CUDA call."""

    LIMIT = {"CUMEMCAP_LIMIT": "1GiB"}

    def test_the_hints_are_there_before_any_cuda_call(self):
        out = self.run_probe(["env", "TF_FORCE_GPU_ALLOW_GROWTH", "env", "XLA_PYTHON_CLIENT_PREALLOCATE"],
                             self.dir, config=self.LIMIT)
        self.assertEqual([o["value"] for o in out], ["true", "false"])
        self.assertEqual(self.logs(self.dir), [], "no CUDA call, no log")

    def test_the_hints_are_put_not_copied(self):
        # putenv of the library's own strings: setenv would copy each into
        # the heap and record it in a tree of libc's, two pages a start that
        # never uses CUDA does not otherwise touch (docs/benchmarks.md, Start).
        out = self.run_probe(["where", "TF_FORCE_GPU_ALLOW_GROWTH", "where", "XLA_PYTHON_CLIENT_PREALLOCATE",
                              "setenv", "TF_FORCE_GPU_ALLOW_GROWTH", "false", "env", "TF_FORCE_GPU_ALLOW_GROWTH"],
                             self.dir, config=self.LIMIT)
        for o in out[:2]:
            self.assertTrue(o["place"] and os.path.samefile(o["place"], SHIM), o)
        self.assertEqual(out[2]["value"], "false", "the program can still set the variable")

    def test_the_log_stays_under_the_tmpdir_of_the_start(self):
        later = os.path.join(self.dir, "later")
        os.mkdir(later)
        out = self.run_probe(["setenv", "TMPDIR", later, "alloc", str(2 * MiB)], self.dir, config=self.LIMIT)
        self.assertEqual(out[-1]["alloc"], 0)
        self.assertEqual(self.logs(later), [])
        [log] = self.logs(self.dir)
        recs = self.records(log)
        self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))
        self.assertEqual(recs[0]["gpus"][0]["limit"], 1 << 30, recs[0])

    def test_a_log_path_set_is_kept_over_tmpdir(self):
        # The log's start takes the TMPDIR template only for the default
        # path: a CUMEMCAP_LOG given wins, as when the snapshot was taken
        # whole in the constructor.
        path = os.path.join(self.dir, "given.jsonl")
        out = self.run_probe(["alloc", str(2 * MiB)], self.dir, config=dict(self.LIMIT, CUMEMCAP_LOG=path))
        self.assertEqual(out[-1]["alloc"], 0)
        self.assertEqual(self.logs(self.dir), [])
        recs = self.records(path)
        self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))

    def test_fork_before_the_first_call(self):
        out = self.run_probe(["fork", str(2 * MiB), "alloc", str(2 * MiB)], self.dir, config=self.LIMIT)
        child, parent = out[0]["pid"], out[-1]["pid"]
        self.assertEqual((out[0]["alloc"], out[1]["status"], out[-1]["alloc"]), (0, 0, 0))
        logs = self.logs(self.dir)
        self.assertEqual(len(logs), 2, logs)
        self.assertEqual({self.records(l)[0]["pid"] for l in logs}, {child, parent})
        for log in logs:
            recs = self.records(log)
            self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))
            self.assertEqual(recs[0]["gpus"][0]["limit"], 1 << 30, recs[0])

    def test_a_limit_set_after_start_does_not_apply(self):
        out = self.run_probe(["setenv", "CUMEMCAP_LIMIT", "1MiB", "alloc", str(2 * MiB)], self.dir,
                             config=self.LIMIT)
        self.assertEqual(out[-1]["alloc"], 0)
        [log] = self.logs(self.dir)
        self.assertEqual(self.records(log)[0]["gpus"][0]["limit"], 1 << 30)

    def test_cuda_before_the_constructor(self):
        out = self.run_probe(["alloc", str(2 * MiB)], self.dir, ":" + EARLY_CUDA, config=self.LIMIT)
        self.assertEqual(out[-1]["alloc"], 0)
        [log] = self.logs(self.dir)
        recs = self.records(log)
        self.assertEqual((recs[0]["type"], recs[-1]["type"]), ("start", "exit"))


class Elf:
    """The library's ELF file, as readelf shows it."""

    def readelf(self, *args):
        try:
            return subprocess.run(["readelf", "-W", *args, SHIM], capture_output=True, text=True,
                                  check=True).stdout
        except FileNotFoundError:
            self.skipTest("no readelf")

    def sections(self):
        """name: (address, size, file offset)"""
        sections = {}
        for line in self.readelf("-S").splitlines():
            f = line.replace("[ ", "[").split()
            if len(f) > 5 and f[0].startswith("[") and f[0][1:-1].isdigit():
                sections[f[1]] = (int(f[3], 16), int(f[5], 16), int(f[4], 16))
        return sections

    def symbols(self):
        """name: (address, size) of the functions and objects"""
        syms = {}
        for line in self.readelf("-s").splitlines():
            f = line.split()
            if len(f) >= 8 and f[0].endswith(":") and f[3] in ("FUNC", "OBJECT"):
                syms.setdefault(f[7].split("@")[0], (int(f[1], 16), int(f[2], 0)))
        return syms


class Layout(Elf, unittest.TestCase):
    """What keeps the start cheap in the library's ELF file (src/meson.build,
    src/platform/start.h)."""

    def test_no_dt_fini(self):
        # crti's _fini does nothing and ends .text: calling it at exit
        # cost a page fault. Destructors run from .fini_array.
        dynamic = self.readelf("-d")
        self.assertIn("(FINI_ARRAY)", dynamic)
        self.assertNotIn("(FINI)", dynamic)

    def test_no_load_time_lookup_of_its_own_names(self):
        # The hook table and the figure list hold no pointer, and the
        # library binds its own functions: no relocation at load names one
        # of its own exported symbols (each was a lookup through every
        # library in the process, and the tables a page the start copied).
        own = set()
        for line in self.readelf("--dyn-syms").splitlines():
            f = line.split()
            if len(f) >= 8 and f[0].endswith(":") and f[6] != "UND":
                own.add(f[7].split("@")[0])
        self.assertIn("cuMemAlloc_v2", own)
        named = []
        for line in self.readelf("-r").splitlines():
            f = line.split()
            if len(f) >= 5 and f[2].startswith("R_X86_64_") and f[4].split("@")[0] in own:
                named.append(f[4])
        self.assertEqual(named, [])
        syms = self.symbols()
        for table in ("cumemcap_hooks", "cumemcap_hook_names", "cumemcap_figure_info"):
            self.assertIn(table, syms)
        relocated = {int(line.split()[0], 16) for line in self.readelf("-r").splitlines()
                     if line.split() and line.split()[0][:1].isdigit()}
        for name in ("cumemcap_hooks", "cumemcap_figure_info"):
            at, size = syms[name]
            self.assertFalse([r for r in relocated if at <= r < at + size], name + " is relocated")

    def test_start_data_between_data_and_bss(self):
        # The constructor's variables follow .data and precede .bss: in the
        # page ld.so writes when it clears the start of .bss.
        sections = self.sections()
        data, hot, large, bss = (sections[n] for n in (".data", "cumemcap_start_data",
                                                        "cumemcap_start_large", ".bss"))
        self.assertLessEqual(data[0] + data[1], hot[0])
        self.assertLessEqual(hot[0] + hot[1], large[0])
        self.assertLessEqual(large[0] + large[1], bss[0])
        self.assertLess(hot[1], 4096)

    def test_a_configured_start_runs_in_the_first_pages_of_text(self):
        # A process configured by a variable or a file builds its policy
        # and sets the hints before main: that code sits in .text.startup
        # (CUMEMCAP_START_CODE), which ld places at the head of .text with
        # _init, before every function of plain .text (the hooks), in the
        # pages loading the library faults in; not spread over .text (a
        # fault each). Pages.test_a_configured_start_reads_no_rodata_and_
        # no_more_text counts the pages themselves.
        syms = {name: at for name, (at, size) in self.symbols().items()}
        init = syms["_init"]
        plain = min(syms[n] for n in ("cuMemGetInfo_v2", "cuMemAlloc_v2", "cumemcap_version"))
        # (Static helpers the compiler may inline are left out.)
        for name in ("cumemcap_policy", "cumemcap_policy_start", "finish", "cumemcap_policy_resolve_group",
                     "cumemcap_policy_parse_limit", "cumemcap_parse_amount", "cumemcap_hints_apply",
                     "cumemcap_hints_plan", "cumemcap_policy_any_limit", "cumemcap_log_policy_env",
                     "log_file_init", "cumemcap_config_read", "cumemcap_config_parse", "on_entry",
                     "cumemcap_setting_by_key"):
            with self.subTest(name=name):
                self.assertTrue(name in syms, name + " is not in the symbol table")
                self.assertTrue(init < syms[name] < plain, name + " is not start code")

    def test_the_policy_has_pages_of_its_own_after_bss(self):
        # A start configured by a variable writes the first page of the
        # process's policy and no other (src/config/policy.h): the policy
        # is page-aligned, in a section after .bss so that its alignment
        # does not move .bss off the page ld.so writes anyway.
        policy, _ = self.symbols()["the_policy"]
        bss = self.sections()[".bss"]
        self.assertEqual(policy % 4096, 0)
        self.assertGreaterEqual(policy, bss[0] + bss[1])
        self.assertNotEqual(bss[0] % 4096, 0, ".bss starts a page of its own")


class Pages(Elf, unittest.TestCase):
    """What a start configured by a variable or a file touches of the library, seen
    in the smaps of a program that never uses CUDA (cat /proc/self/smaps):
    the same text pages as an unconfigured start, and nothing of .rodata
    (its strings and constants are among .data.rel.ro: platform/start.h)."""

    def run_preloaded(self, argv, **env):
        """argv's output, run with the library alone preloaded and no CUMEMCAP_
        variable but those in env."""
        if EXTRA:
            self.skipTest("another preloaded library (sanitizers) has pages of its own")
        base = {k: v for k, v in os.environ.items() if not k.startswith("CUMEMCAP_")}
        base.update(env, LD_PRELOAD=SHIM)
        return subprocess.run(argv, env=base, capture_output=True, text=True, check=True).stdout

    def rss(self, **env):
        out = self.run_preloaded(["cat", "/proc/self/smaps"], **env)
        maps, current = {}, None
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 6 and "-" in f[0] and os.path.realpath(f[5]) == os.path.realpath(SHIM):
                current = (f[1], int(f[2], 16))
            elif len(f) >= 6 and "-" in f[0]:
                current = None
            elif current and f[0] == "Rss:":
                maps[current] = int(f[1])
        return maps

    # A program that never uses CUDA, in Python: how many pages of each
    # range (offsets from the library's first mapping) are mapped, read or
    # written, by /proc/self/pagemap's present bit.
    PAGES = r'''
import os, struct, sys
shim, ranges = sys.argv[1], [int(a) for a in sys.argv[2:]]
base = None
for line in open("/proc/self/maps"):
    f = line.split()
    if len(f) >= 6 and f[2] == "00000000" and os.path.realpath(f[5]) == os.path.realpath(shim):
        base = int(f[0].split("-")[0], 16)
        break
counts = []
with open("/proc/self/pagemap", "rb") as pm:
    for lo, hi in zip(ranges[::2], ranges[1::2]):
        first, last = (base + lo) // 4096, (base + hi - 1) // 4096
        pm.seek(first * 8)
        entries = struct.unpack("%dQ" % (last - first + 1), pm.read((last - first + 1) * 8))
        counts.append(sum(1 for e in entries if e >> 63))
print(*counts)
'''

    def bss_and_policy_pages(self, **env):
        """Pages touched of .bss past the page it shares with .data, and of the policy."""
        at, size = self.symbols()["the_policy"]
        bss = self.sections()[".bss"]
        bss_from = (bss[0] + 4095) // 4096 * 4096
        args = [str(x) for x in (bss_from, bss[0] + bss[1], at, at + size)]
        out = self.run_preloaded([sys.executable, "-c", self.PAGES, SHIM, *args], **env)
        return tuple(int(x) for x in out.split())

    def test_a_configured_start_reads_no_rodata_and_no_more_text(self):
        rodata = self.sections()[".rodata"][2]
        with tempfile.NamedTemporaryFile("w", suffix=".conf") as conf:
            conf.write("limit = 4GiB\n")
            conf.flush()
            bare = self.rss()
            for how, env in (("CUMEMCAP_LIMIT", {"CUMEMCAP_LIMIT": "4GiB"}),
                             ("a file", {"CUMEMCAP_CONFIG": conf.name})):
                with self.subTest(how=how):
                    configured = self.rss(**env)
                    text = [k for k in bare if k[0] == "r-xp"]
                    ro = max(k for k in configured if k[0] == "r--p" and k[1] <= rodata)
                    self.assertEqual(configured[ro], 0, "a start configured by %s read .rodata" % how)
                    self.assertEqual([configured[k] for k in text], [bare[k] for k in text])

    def test_a_configured_start_writes_one_page_of_the_policy(self):
        # The heads of the environment's layer and of the file's lie in
        # the policy's first page with the values after precedence
        # (src/config/policy.h); the layers' long values after it. A
        # limit given by a variable or by a file's global part touches
        # that page and no other page of the policy or of .bss; a process
        # nothing configures touches no page of the policy before its
        # first CUDA call. (Pages are counted present, read or written:
        # a first read of a .bss page is a fault as a write is.)
        with tempfile.NamedTemporaryFile("w", suffix=".conf") as conf:
            conf.write("limit = 4GiB\n")
            conf.flush()
            bss, policy = self.bss_and_policy_pages()
            self.assertEqual(policy, 0)
            for how, env in (("CUMEMCAP_LIMIT", {"CUMEMCAP_LIMIT": "4GiB"}),
                             ("a file", {"CUMEMCAP_CONFIG": conf.name})):
                with self.subTest(how=how):
                    self.assertEqual(self.bss_and_policy_pages(**env), (bss, 1))


if __name__ == "__main__":
    unittest.main(verbosity=2)
