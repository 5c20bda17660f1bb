#!/usr/bin/env python3
"""cumemcap-spank.so on a real Slurm (docs/slurm.md): a single-node cluster
on localhost, started once for the module from a temporary directory with
its own munged (own key and socket), slurmctld and slurmd (own ports, own
slurm.conf through SLURM_CONF), and stopped by pid whatever happens. It
touches nothing in /etc. The node has one GPU, a character device the test
makes, with 8 shards (gres.conf AutoDetect=off); the plugin's line says
shards_per_gpu=4, so shard:2 would get half the GPU instead of a quarter
if gres.conf were not read.

Jobs run slurm-client over the fake driver (a 16 GiB GPU whose context
costs nothing), which prints what cuMemGetInfo told it and what it got.

Root only (the daemons run as root): skipped with that reason otherwise.
The programs (munged, slurmctld, slurmd, srun, sbatch, scancel, sinfo) or
the plugin missing: a skip, a failure under CUMEMCAP_TEST_REQUIRE_PROGRAMS=1
(a build that leaves the plugin out on purpose, -Dslurm=disabled or a
sanitizer build, is a skip).

Usage: test_slurm.py SHIM FAKE_DIR CLIENT PLUGIN REPORT
PLUGIN is the plugin's path, or why this build has none: 'disabled',
'sanitizer', or '' (no slurm/spank.h).
"""
import ctypes
import glob
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

SHIM, FAKE_DIR, CLIENT, PLUGIN, REPORT = sys.argv[1:6]
del sys.argv[1:6]
REQUIRE = os.environ.get("CUMEMCAP_TEST_REQUIRE_PROGRAMS") == "1"
PROGRAMS = ["munged", "slurmctld", "slurmd", "srun", "sbatch", "scancel", "sinfo", "squeue"]
MiB = 1 << 20
GiB = 1 << 30
CHUNK_MIB = 256

cluster = None


PR_SET_PDEATHSIG = 1


def die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def stop_on_signal(signum, frame):
    """SIGTERM (meson's timeout) or SIGINT: the daemons go first."""
    if cluster:
        cluster.stop()
    os._exit(128 + signum)


def free_ports(n):
    """n distinct free ports: every socket is held until all are chosen, so
    the kernel cannot hand the same port out twice."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Cluster:
    """munged, slurmctld and slurmd in the foreground, children of this
    process, in one temporary directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="cumemcap-slurm.")
        os.chmod(self.dir, 0o755)
        self.procs = []
        d = self.dir
        self.conf = os.path.join(d, "slurm.conf")
        self.books = os.path.join(d, "books")
        self.logs = os.path.join(d, "logs")
        for sub in ("state", "spool", "daemon-logs", "books", "logs"):
            os.mkdir(os.path.join(d, sub))
        # As a site would make them for every user: like /dev/shm and /tmp.
        os.chmod(self.books, 0o1777)
        os.chmod(self.logs, 0o1777)
        self.gpu = os.path.join(d, "nvidia0")
        os.mknod(self.gpu, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        with open(os.path.join(d, "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(d, "munge.key"), 0o400)
        self.node = "node0"
        ctld_port, slurmd_port = free_ports(2)
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=cumemcap
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
AuthInfo=socket={d}/munge.sock
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/daemon-logs/slurmctld.log
SlurmdLogFile={d}/daemon-logs/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu,shard
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
PlugStackConfig={d}/plugstack.conf
NodeName={self.node} NodeAddr=127.0.0.1 CPUs=4 Gres=gpu:1,shard:8 State=UNKNOWN
PartitionName=main Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""")
        with open(os.path.join(d, "gres.conf"), "w") as f:
            f.write(f"AutoDetect=off\nName=gpu File={self.gpu}\nName=shard Count=8 File={self.gpu}\n")
        self.write_plugstack()

    def write_plugstack(self, extra=""):
        with open(os.path.join(self.dir, "plugstack.conf"), "w") as f:
            f.write(f"required {PLUGIN} shards_per_gpu=4 log={self.logs} library={SHIM} books={self.books}"
                    f"{extra}\n")

    def env(self):
        """A clean environment for the clients: nothing of the suite's own
        (no LD_PRELOAD, no CUMEMCAP_*) reaches the jobs."""
        return {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "SLURM_CONF": self.conf,
                "LD_LIBRARY_PATH": FAKE_DIR, "FAKECUDA_DEVICES": "16GiB", "FAKECUDA_CTX_OVERHEAD": "0",
                "HOME": self.dir, "LANG": "C"}

    def spawn(self, name, argv):
        """A daemon in the foreground, which gets SIGTERM should this
        process die without stopping it (PR_SET_PDEATHSIG)."""
        out = open(os.path.join(self.dir, "daemon-logs", name + ".out"), "w")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=self.env(), cwd=self.dir, preexec_fn=die_with_parent)
        out.close()
        self.procs.append((name, p))

    def start(self):
        d = self.dir
        self.spawn("munged", ["munged", "--foreground", "--force", f"--socket={d}/munge.sock",
                              f"--key-file={d}/munge.key", f"--log-file={d}/daemon-logs/munged.log",
                              f"--pid-file={d}/munged.pid", f"--seed-file={d}/munged.seed"])
        deadline = time.time() + 20
        while not os.path.exists(f"{d}/munge.sock"):
            self.check_alive()
            if time.time() > deadline:
                raise RuntimeError("munged made no socket in 20 s\n" + self.daemon_logs())
            time.sleep(0.05)
        self.spawn("slurmctld", ["slurmctld", "-D", "-f", self.conf])
        self.spawn("slurmd", ["slurmd", "-D", "-N", self.node, "-f", self.conf])
        deadline = time.time() + 60
        while True:
            self.check_alive()
            r = subprocess.run(["sinfo", "-h", "-n", self.node, "-o", "%T"], env=self.env(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode == 0 and r.stdout.strip() == "idle":
                return
            if time.time() > deadline:
                raise RuntimeError(f"the node is not idle after 60 s: {r.stdout.strip()}\n" + self.daemon_logs())
            time.sleep(0.2)

    def check_alive(self):
        for name, p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with {p.returncode}\n" + self.daemon_logs())

    def daemon_logs(self):
        text = ""
        for path in sorted(glob.glob(os.path.join(self.dir, "daemon-logs", "*"))):
            with open(path, errors="replace") as f:
                text += f"--- {path}\n" + "".join(f.readlines()[-30:])
        return text

    def stop(self):
        """Cancel what runs, then stop the daemons by pid: SIGTERM, and
        SIGKILL after 10 s. Slurm's step daemons of this cluster
        (slurmstepd) leave with slurmd's jobs."""
        try:
            subprocess.run(["scancel", "--full", "-u", "root"], env=self.env(), timeout=10,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Jobs' step daemons outlive slurmd: let them end first.
            deadline = time.time() + 15
            while time.time() < deadline:
                r = subprocess.run(["squeue", "-h"], env=self.env(), timeout=10, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)
                if r.returncode != 0 or not r.stdout.strip():
                    break
                time.sleep(0.2)
        except (OSError, subprocess.SubprocessError):
            pass
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def srun(self, *args, timeout=60):
        return subprocess.run(["srun", "--quiet", *args], env=self.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout, cwd=self.dir)

    def srun_bg(self, *args):
        return subprocess.Popen(["srun", "--quiet", *args], env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=self.dir)


def setUpModule():
    global cluster
    if os.geteuid() != 0:
        raise unittest.SkipTest("not root: the test runs its own munged, slurmctld and slurmd as root")
    missing = [p for p in PROGRAMS if not shutil.which(p)]
    why = None
    if missing:
        why = f"not installed: {' '.join(missing)} (Debian: munge, slurmctld, slurmd, slurm-client)"
    elif not PLUGIN.startswith("/"):
        if PLUGIN in ("disabled", "sanitizer"):
            raise unittest.SkipTest(f"cumemcap-spank.so is not built in this build ({PLUGIN})")
        why = "cumemcap-spank.so was not built: no slurm/spank.h (Debian: libslurm-dev)"
    if why:
        if REQUIRE:
            raise RuntimeError(why)
        raise unittest.SkipTest(why)
    cluster = Cluster()
    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        cluster = None
        raise


def tearDownModule():
    if cluster:
        cluster.stop()


def records(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def read_until_holding(proc, tasks, deadline=60):
    """The result lines of `tasks` clients that now hold their memory."""
    results, holding = [], 0
    end = time.time() + deadline
    while holding < tasks:
        if time.time() > end:
            raise AssertionError("the clients did not all hold their memory in time")
        line = proc.stdout.readline()
        if not line:
            raise AssertionError("srun ended before its clients held memory: " + proc.stderr.read())
        rec = json.loads(line)
        if rec.get("holding"):
            holding += 1
        else:
            results.append(rec)
    return results


class Slurm(unittest.TestCase):
    maxDiff = None

    def client(self, *srun_args):
        r = cluster.srun(*srun_args, CLIENT, str(CHUNK_MIB))
        self.assertEqual(r.returncode, 0, r.stderr)
        recs = records(r.stdout)
        self.assertEqual(len(recs), 1, r.stdout)
        return recs[0]

    def assert_held_to(self, rec, budget):
        """Told the budget, and got it within one block of it."""
        self.assertEqual(rec["told_total"], budget, rec)
        self.assertLessEqual(rec["got"], budget, rec)
        self.assertGreater(rec["got"], budget - CHUNK_MIB * MiB, rec)
        self.assertEqual(rec["refused"], 2, rec)  # CUDA_ERROR_OUT_OF_MEMORY

    def test_shards_2_of_8_get_a_quarter(self):
        rec = self.client("--gres=shard:2")
        self.assert_held_to(rec, 4 * GiB)
        job = rec["group"].removeprefix("slurm-")
        self.assertTrue(rec["group"].startswith("slurm-") and job.isdigit(), rec)
        # log=DIR: the job's footprint logs are in DIR/JOBID/, the job
        # user's own directory, and the report reads them.
        logs = os.path.join(cluster.logs, job)
        st = os.stat(logs)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (os.geteuid(), 0o700))
        self.assertEqual(len(glob.glob(os.path.join(logs, "slurm-client.*.jsonl"))), 1, os.listdir(logs))
        r = subprocess.run([REPORT, "--json", logs], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        (proc,) = json.loads(r.stdout)["processes"]
        self.assertEqual((proc["program"], proc["state"]), ("slurm-client", "exited"), proc)
        self.assertEqual((proc["gpus"][0]["peak_footprint"], proc["gpus"][0]["refusals"]), (rec["got"], 1), proc)

    def test_gpu_mem_wins_over_shards(self):
        self.assert_held_to(self.client("--gres=shard:2", "--gpu-mem=1GiB"), 1 * GiB)

    def test_gpu_mem_without_gres(self):
        self.assert_held_to(self.client("--gpu-mem=25%"), 4 * GiB)

    def test_sbatch_gpu_mem_directive(self):
        script = os.path.join(cluster.dir, "job.sh")
        out = os.path.join(cluster.dir, "job.out")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\n#SBATCH --gpu-mem=2GiB\n#SBATCH --output={out}\n"
                    f"srun --quiet {CLIENT} {CHUNK_MIB}\n")
        r = subprocess.run(["sbatch", "--parsable", "--wait", script], env=cluster.env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60, cwd=cluster.dir)
        with open(out) as f:
            text = f.read()
        self.assertEqual(r.returncode, 0, r.stderr + text)
        recs = records(text)
        self.assertEqual(len(recs), 1, text)
        self.assert_held_to(recs[0], 2 * GiB)

    def test_salloc_gpu_mem(self):
        r = subprocess.run(["salloc", "--gpu-mem=3GiB", "srun", "--quiet", CLIENT, str(CHUNK_MIB)],
                           env=cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=60, cwd=cluster.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        recs = records(r.stdout)
        self.assertEqual(len(recs), 1, r.stdout)
        self.assert_held_to(recs[0], 3 * GiB)

    def test_two_jobs_on_one_gpu_each_held_to_its_share(self):
        release = os.path.join(cluster.dir, "release-two-jobs")
        a = cluster.srun_bg("--gres=shard:2", CLIENT, str(CHUNK_MIB), release)
        b = cluster.srun_bg("--gres=shard:4", CLIENT, str(CHUNK_MIB), release)
        try:
            (ra,) = read_until_holding(a, 1)
            (rb,) = read_until_holding(b, 1)
            # Both hold their memory now, each within its own share.
            self.assert_held_to(ra, 4 * GiB)
            self.assert_held_to(rb, 8 * GiB)
            self.assertNotEqual(ra["group"], rb["group"])
        finally:
            open(release, "w").close()
            for p in (a, b):
                p.communicate(timeout=60)
        self.assertEqual((a.returncode, b.returncode), (0, 0))

    def test_two_tasks_of_a_job_share_one_budget(self):
        release = os.path.join(cluster.dir, "release-two-tasks")
        p = cluster.srun_bg("-n2", "--gres=shard:4", CLIENT, str(CHUNK_MIB), release)
        try:
            recs = read_until_holding(p, 2)
        finally:
            open(release, "w").close()
            p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0)
        self.assertEqual(len(recs), 2, recs)
        self.assertEqual(recs[0]["group"], recs[1]["group"])
        for rec in recs:
            self.assertEqual(rec["told_total"], 8 * GiB, rec)
        got = recs[0]["got"] + recs[1]["got"]
        # 8 GiB between them, not 8 GiB each (less at most a block and a
        # member's spare, a 256th of the budget, for each).
        self.assertLessEqual(got, 8 * GiB, recs)
        self.assertGreater(got, 8 * GiB - 2 * (CHUNK_MIB * MiB + 8 * GiB // 256), recs)

    def test_bad_gpu_mem_fails_the_step_with_one_line(self):
        job = [CLIENT, str(CHUNK_MIB)]
        for client in (["srun", "--quiet", *job], ["sbatch", "--wrap", " ".join(job)], ["salloc", *job]):
            r = subprocess.run([client[0], "--gres=shard:2", "--gpu-mem=12XB", *client[1:]],
                               env=cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=60, cwd=cluster.dir)
            self.assertNotEqual(r.returncode, 0, client)
            self.assertEqual(r.stdout, "", client)  # nothing ran, nothing was submitted
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            self.assertIn('cumemcap: --gpu-mem="12XB" is not a valid size; accepted: bytes (1073741824)',
                          r.stderr)

    def test_scancel_leaves_no_book(self):
        p = cluster.srun_bg("--gres=shard:2", CLIENT, str(CHUNK_MIB), os.path.join(cluster.dir, "never"))
        try:
            (rec,) = read_until_holding(p, 1)
            job = rec["group"].removeprefix("slurm-")
            book = os.path.join(cluster.books, "cumemcap-group." + rec["group"])
            self.assertTrue(os.path.isfile(book), os.listdir(cluster.books))
            subprocess.run(["scancel", job], env=cluster.env(), check=True)
        finally:
            p.communicate(timeout=60)
        deadline = time.time() + 30
        while os.path.exists(book) and time.time() < deadline:
            time.sleep(0.1)
        self.assertFalse(os.path.exists(book), "the job's book is still there 30 s after scancel")

    def test_no_gpu_gres_gets_nothing(self):
        for args in ([], ["--gres=gpu:1"]):
            r = cluster.srun(*args, "env")
            self.assertEqual(r.returncode, 0, r.stderr)
            names = [l.split("=", 1)[0] for l in r.stdout.splitlines()]
            self.assertNotIn("LD_PRELOAD", names, args)
            self.assertEqual([n for n in names if n.startswith("CUMEMCAP_")], [], args)

    def step_fails_with(self, extra, message):
        """With `extra` on the plugin's line, a shard step fails with one
        line of the plugin's, and no task runs."""
        cluster.write_plugstack(extra=extra)
        try:
            r = cluster.srun("--gres=shard:2", CLIENT, str(CHUNK_MIB))
        finally:
            cluster.write_plugstack()
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stdout, "")
        lines = [l for l in r.stderr.splitlines() if "cumemcap:" in l]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(message, lines[0])

    def test_missing_library_fails_the_step(self):
        lib = os.path.join(cluster.dir, "no-such-libcumemcap.so")
        self.step_fails_with(f" library={lib}",
                             f"cumemcap: library={lib} cannot be opened: No such file or directory; "
                             "the step is not started unfenced")

    def test_unusable_book_directory_fails_the_step(self):
        self.step_fails_with(f" books={cluster.conf}",
                             f"cumemcap: books={cluster.conf} is not a directory; the step is not started unfenced")

    def test_wrong_plugin_argument_is_one_line(self):
        cluster.write_plugstack(extra=" shards_per_gpu=0")
        try:
            r = cluster.srun("--gres=shard:2", CLIENT, str(CHUNK_MIB))
        finally:
            cluster.write_plugstack()
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stdout, "")
        lines = [l for l in r.stderr.splitlines() if "cumemcap:" in l]
        self.assertEqual(lines, ['srun: error: cumemcap: plugstack.conf argument shards_per_gpu="0" is not a '
                                 'shard count; accepted: an integer 1..1024'], r.stderr)


    def test_unreadable_gres_conf_fails_the_step(self):
        # gres.conf there but not readable is not "no gres.conf": the
        # budget is never guessed from shards_per_gpu then.
        bad = os.path.join(cluster.conf, "gres.conf")  # under a file: ENOTDIR
        self.step_fails_with(f" gres_conf={bad}", f"cumemcap: {bad}: Not a directory; the step is not started unfenced")


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    # Nothing ran (not root, no plugin in this build): a skip for meson
    # (exit status 77), not a pass.
    sys.exit(77 if result.skipped and len(result.skipped) >= result.testsRun else 0)
