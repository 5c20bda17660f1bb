#!/usr/bin/env python3
"""Real third-party programs from Debian as clients of the driver API:
ffmpeg's CUDA hwcontext (hwupload_cuda / hwdownload) and GStreamer's
nvcodec cudaupload / cudadownload, and hashcat's device probe (hashcat -I:
it lists the fake GPU, and under a cap the cap as its memory). The first
two each run

  - over the fake driver alone, and its frames come back byte-identical
    to the CPU path's;
  - under the shim with a cap its frames fit in: the same output;
  - under the shim with a cap one frame does not fit in: the program
    fails with its own out-of-memory error, exits cleanly (an exit status,
    no signal), and the footprint log has the "refusal" record.

A program that is not installed is a skip (the reason is printed); CI
installs them (.ci/run) and sets CUMEMCAP_TEST_REQUIRE_PROGRAMS=1, which
turns such a skip into a failure.

Usage: test_programs.py SHIM FAKE_DIR
LD_PRELOAD_EXTRA, when set, is put first in LD_PRELOAD (the sanitizer
runtime in sanitizer builds; the fake is instrumented there too).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SHIM, FAKE_DIR, CUDA_LIB = sys.argv[1:4]
del sys.argv[1:4]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
REQUIRE = os.environ.get("CUMEMCAP_TEST_REQUIRE_PROGRAMS") == "1"
MiB = 1 << 20

# 3840x2160 NV12 is 12 MiB a frame (ffmpeg asks 13271040 bytes, GStreamer a
# 17694720-byte pitched block): a cap of 8 MiB refuses the first frame,
# 256 MiB holds every frame either program keeps in flight.
BIG_W, BIG_H = 3840, 2160
SMALL_CAP, ROOMY_CAP = "8MiB", "256MiB"


def missing(test, what):
    """Skip (locally) or fail (CI) for a program that is not there."""
    msg = f"{what}: not installed here; scripts/check installs it as root"
    if REQUIRE:
        test.fail(msg)
    print(f"skip: {msg}", file=sys.stderr)
    test.skipTest(msg)


class Program(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="cumemcap-programs-")
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def env(self, shim=False, limit=None, devices="2GiB", log=None):
        """A clean environment: the fake driver first on the library path,
        every cache and home under the test's directory."""
        env = {k: v for k, v in os.environ.items()
               if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_", "GST_"))}
        env.update({
            "LD_LIBRARY_PATH": FAKE_DIR,
            "FAKECUDA_DEVICES": devices,
            "HOME": self.dir,
            "XDG_CACHE_HOME": os.path.join(self.dir, "cache"),
            "GST_REGISTRY": os.path.join(self.dir, "gst-registry.bin"),
            "ASAN_OPTIONS": "detect_leaks=0",
        })
        if "tsan" in os.path.basename(EXTRA):
            # The programs are not built for ThreadSanitizer: GLib's futex
            # locks, and so GStreamer's, are invisible to it, and their
            # memory looks racy. Leave the calls of GLib, GStreamer and its
            # plugins out; the fake and the shim (instrumented) stay checked.
            supp = os.path.join(self.dir, "tsan.supp")
            libs = set()
            for pattern in ("/usr/lib/*/gstreamer-1.0/*.so", "/usr/lib/*/libgst*.so*", "/usr/lib/*/libglib-2.0.so*",
                            "/usr/lib/*/libgobject-2.0.so*", "/usr/lib/*/libgmodule-2.0.so*",
                            "/usr/lib/*/libgthread-2.0.so*", "/usr/lib/*/liborc-0.4.so*"):
                libs.update(os.path.basename(p).split(".so")[0] + ".so" for p in glob.glob(pattern))
            with open(supp, "w") as f:
                f.writelines(f"called_from_lib:{lib}\n" for lib in sorted(libs))
            opts = os.environ.get("TSAN_OPTIONS", "")
            env["TSAN_OPTIONS"] = (opts + ":" if opts else "") + "suppressions=" + supp
        preload = [EXTRA] if EXTRA else []
        if shim:
            preload.append(SHIM)
            env["CUMEMCAP_LIMIT"] = limit
            env["CUMEMCAP_LOG"] = log or os.path.join(self.dir, "footprint-%p.jsonl")
        if preload:
            env["LD_PRELOAD"] = ":".join(preload)
        return env

    def run_prog(self, argv, env, timeout=120):
        p = subprocess.run(argv, env=env, cwd=self.dir, capture_output=True, text=True,
                           errors="replace", timeout=timeout)
        self.assertGreaterEqual(p.returncode, 0, f"{argv[0]} died of signal {-p.returncode}:\n{p.stderr[-3000:]}")
        self.assertLess(p.returncode, 128, f"{argv[0]} exit {p.returncode}:\n{p.stderr[-3000:]}")
        return p

    def records(self):
        out = []
        for path in sorted(glob.glob(os.path.join(self.dir, "footprint-*.jsonl"))):
            with open(path) as f:
                out += [json.loads(line) for line in f if line.strip()]
        return out

    def assert_same_file(self, got, want):
        with open(got, "rb") as a, open(want, "rb") as b:
            x, y = a.read(), b.read()
        self.assertGreater(len(y), 0)
        self.assertEqual(len(x), len(y), f"{got}: {len(x)} bytes, the CPU path {len(y)}")
        self.assertTrue(x == y, f"{got} differs from the CPU path's {want}")

    def assert_served(self, limit_bytes):
        """The shim saw the program's device memory and kept it under the
        cap without refusing any."""
        recs = self.records()
        self.assertFalse([r for r in recs if r.get("type") == "refusal"])
        exits = [r for r in recs if r.get("type") == "exit"]
        self.assertEqual(len(exits), 1, f"one exit record in {[r.get('type') for r in recs]}")
        gpu = exits[0]["gpus"][0]
        self.assertGreater(gpu["allocs"], 0)
        self.assertGreater(gpu["peak_reserved"], 0)
        self.assertLessEqual(gpu["peak_reserved"], limit_bytes)

    def assert_refused(self, door, limit_bytes):
        recs = self.records()
        refusals = [r for r in recs if r.get("type") == "refusal"]
        self.assertTrue(refusals, f"no refusal record in {[r.get('type') for r in recs]}")
        for r in refusals:
            self.assertEqual(r["door"], door)
            self.assertEqual(r["limit"], limit_bytes)
            self.assertGreater(r["requested"], limit_bytes)
        exits = [r for r in recs if r.get("type") == "exit"]
        self.assertEqual(len(exits), 1, "one clean exit record")
        gpu = exits[0]["gpus"][0]
        self.assertEqual(gpu["refusals"], len(refusals))
        self.assertLessEqual(gpu["peak_reserved"], limit_bytes)


class Pipeline:
    """What ffmpeg's and GStreamer's cases share: a pipeline through CUDA
    memory (argv(out, w, h, frames, cuda)) whose output must be the CPU
    path's. A mixin, not a TestCase: its test runs in each program's class."""

    def cpu_reference(self, w, h, frames):
        ref = os.path.join(self.dir, "cpu.nv12")
        self.run_prog(self.argv(ref, w, h, frames, cuda=False), self.env())
        return ref

    def test_under_a_cap_it_fits_in(self):
        ref = self.cpu_reference(BIG_W, BIG_H, 3)
        out = os.path.join(self.dir, "cuda.nv12")
        p = self.run_prog(self.argv(out, BIG_W, BIG_H, 3), self.env(shim=True, limit=ROOMY_CAP))
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assert_same_file(out, ref)
        self.assert_served(256 * MiB)

class Ffmpeg(Pipeline, Program):
    """ffmpeg -init_hw_device cuda ... hwupload_cuda,hwdownload: every
    frame goes to device memory (cuMemAlloc_v2, cuMemcpy2DAsync_v2) and
    back."""

    def setUp(self):
        super().setUp()
        self.ffmpeg = shutil.which("ffmpeg")
        if not self.ffmpeg:
            missing(self, "ffmpeg")
        p = subprocess.run([self.ffmpeg, "-hide_banner", "-filters"], capture_output=True, text=True)
        if "hwupload_cuda" not in p.stdout:
            missing(self, "ffmpeg with the hwupload_cuda filter")

    def argv(self, out, w, h, frames, cuda=True):
        vf = "format=nv12,hwupload_cuda,hwdownload,format=nv12" if cuda else "format=nv12"
        hw = ["-init_hw_device", "cuda=cu:0", "-filter_hw_device", "cu"] if cuda else []
        return [self.ffmpeg, "-hide_banner", "-nostdin", "-y", *hw,
                "-f", "lavfi", "-i", f"testsrc=size={w}x{h}:rate=10", "-frames:v", str(frames),
                "-vf", vf, "-f", "rawvideo", out]

    def test_fake_alone_matches_cpu_path(self):
        ref = self.cpu_reference(640, 360, 8)
        out = os.path.join(self.dir, "cuda.nv12")
        p = self.run_prog(self.argv(out, 640, 360, 8), self.env())
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assert_same_file(out, ref)

    def test_fake_alone_full_card(self):
        """The frames really live in the fake's memory: a card too small
        for one frame fails ffmpeg's upload with the driver's error."""
        out = os.path.join(self.dir, "cuda.nv12")
        p = self.run_prog(self.argv(out, BIG_W, BIG_H, 2), self.env(devices="8MiB"))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("CUDA_ERROR_OUT_OF_MEMORY", p.stderr)

    def test_under_a_small_cap_fails_cleanly(self):
        out = os.path.join(self.dir, "cuda.nv12")
        p = self.run_prog(self.argv(out, BIG_W, BIG_H, 3), self.env(shim=True, limit=SMALL_CAP))
        self.assertNotEqual(p.returncode, 0)
        # ffmpeg's own words for it
        self.assertIn("CUDA_ERROR_OUT_OF_MEMORY", p.stderr)
        self.assertIn("Conversion failed!", p.stderr)
        self.assert_refused("cuMemAlloc_v2", 8 * MiB)


class Gstreamer(Pipeline, Program):
    """GStreamer's nvcodec cudaupload ! cudadownload with CUDA memory
    between them (cuMemAllocPitch_v2, cuMemcpy2DAsync_v2). nvcodec
    registers its elements only when a video codec library loads: the
    fake's directory has a stand-in libnvcuvid.so.1."""

    def setUp(self):
        super().setUp()
        self.launch = shutil.which("gst-launch-1.0")
        self.inspect = shutil.which("gst-inspect-1.0")
        if not self.launch or not self.inspect:
            missing(self, "gst-launch-1.0 / gst-inspect-1.0 (gstreamer1.0-tools)")
        for element, package in (("videotestsrc", "gstreamer1.0-plugins-base"),
                                 ("nvcodec", "gstreamer1.0-plugins-bad")):
            p = subprocess.run([self.inspect, element], capture_output=True, text=True,
                               env=self.env(), timeout=120)
            if p.returncode != 0:
                missing(self, f"GStreamer {element} ({package})")

    def argv(self, out, w, h, frames, cuda=True):
        caps = f"video/x-raw,format=NV12,width={w},height={h}"
        mid = ["cudaupload", "!", "video/x-raw(memory:CUDAMemory)", "!", "cudadownload", "!",
               "video/x-raw", "!"] if cuda else []
        return [self.launch, "-q", "videotestsrc", f"num-buffers={frames}", "!", caps, "!", *mid,
                "filesink", f"location={out}"]

    def test_elements_registered_over_the_fake(self):
        p = self.run_prog([self.inspect, "nvcodec"], self.env())
        self.assertIn("cudaupload", p.stdout)
        self.assertIn("cudadownload", p.stdout)

    def test_fake_alone_matches_cpu_path(self):
        ref = self.cpu_reference(640, 360, 8)
        out = os.path.join(self.dir, "cuda.nv12")
        p = self.run_prog(self.argv(out, 640, 360, 8), self.env())
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assert_same_file(out, ref)

    def test_under_a_small_cap_fails_cleanly(self):
        out = os.path.join(self.dir, "cuda.nv12")
        env = self.env(shim=True, limit=SMALL_CAP)
        env["GST_DEBUG"] = "cudaallocator:2"  # where GStreamer says why
        env["GST_DEBUG_NO_COLOR"] = "1"
        p = self.run_prog(self.argv(out, BIG_W, BIG_H, 3), env)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("CUDA call failed: CUDA_ERROR_OUT_OF_MEMORY", p.stderr)
        self.assertIn("ERROR: from element", p.stderr + p.stdout)
        self.assert_refused("cuMemAllocPitch_v2", 8 * MiB)


class Hashcat(Program):
    """hashcat -I: a password cracker's device probe (dlopen libcuda.so.1,
    resolve its driver entry points, list the CUDA devices). Over the fake
    it lists the fake GPU; under the shim the memory it reports is the cap,
    as cuDeviceTotalMem and cuMemGetInfo tell it."""

    def setUp(self):
        super().setUp()
        self.hashcat = shutil.which("hashcat")
        if not self.hashcat:
            missing(self, "hashcat")
        # Without NVRTC, hashcat turns its CUDA backend off and lists no
        # CUDA device at all.
        if not os.path.exists(os.path.join(CUDA_LIB, "libnvrtc.so")):
            missing(self, f"the CUDA Toolkit's libnvrtc.so in {CUDA_LIB} (hashcat's CUDA backend)")

    def env(self, **kw):
        env = super().env(**kw)
        env["LD_LIBRARY_PATH"] += ":" + CUDA_LIB
        return env

    def probe(self, env):
        p = self.run_prog([self.hashcat, "-I"], env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertNotIn("is missing from CUDA shared library", p.stdout + p.stderr)
        cuda = p.stdout.split("OpenCL Info:")[0]
        self.assertIn("CUDA Info:", cuda)
        self.assertIn("Name...........: Fake GPU 0", cuda)
        self.assertIn("Processor(s)...: 132", cuda)
        return cuda

    def test_fake_alone(self):
        cuda = self.probe(self.env(devices="16GiB"))
        self.assertIn("Memory.Total...: 16384 MB", cuda)
        self.assertIn("Memory.Free....: 16384 MB", cuda)

    def test_under_a_cap_sees_the_cap(self):
        cuda = self.probe(self.env(shim=True, limit="2GiB", devices="16GiB"))
        self.assertIn("Memory.Total...: 2048 MB", cuda)
        self.assertIn("Memory.Free....: 2048 MB", cuda)
        recs = self.records()
        self.assertEqual([r["type"] for r in recs if r["type"] in ("start", "exit")], ["start", "exit"])
        self.assertEqual(recs[0]["gpus"][0]["limit"], 2 << 30)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    # Nothing ran: a skip for meson (exit status 77), not a pass.
    sys.exit(77 if result.testsRun and len(result.skipped) == result.testsRun else 0)
