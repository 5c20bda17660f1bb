#!/usr/bin/env python3
"""The Kubernetes deployment (deploy/kubernetes) checked without a cluster.

There is no kubectl, kubeconform or API server here: the manifests' schema
is checked by the rules below, not by Kubernetes' own validation.

- Every manifest parses as YAML (several documents a file) and each
  document has apiVersion, kind and metadata.name; every volumeMount names
  a volume of its pod, every volume is mounted; hostPath volumes are
  absolute with a known type.
- The installer DaemonSet: GPU nodes (nodeSelector, toleration), small
  requests, no capability, its command is where the Dockerfile puts
  install-node.sh, its ConfigMap exists with cumemcap.conf, and the node
  paths it writes are the ones the pods and node_exporter mount.
- The pods: the Downward API variables NODE_NAME, POD_NAME, POD_NAMESPACE
  from their fieldRefs and CONTAINER_NAME equal to the container's name;
  $(VAR) references only to variables defined before (Kubernetes leaves
  any other literally); LD_PRELOAD, the launcher and every CUMEMCAP_* path
  inside a volume mount; the group's directory an emptyDir in memory; the
  configuration mounted where the shim looks by default.
- The Dockerfile's `meson setup` line: configured for real (no build) and
  its install paths (`meson introspect --installed`, and the paths written
  into the installed launcher) are the ones the manifests use.
- The ConfigMap's cumemcap.conf passes the real `cumemcap --check-config`.
- End to end in a temporary directory standing for the node: the real
  install-node.sh with the DaemonSet's settings (its hostPath mounts mapped
  into the directory) installs a tree made of this build; then the Pod's
  and the Deployment's containers run a CUDA probe (ctypes, over the fake
  driver) with their environment and their mounts mapped the same way:
  the library found through the pod's mount caps the program at what the
  ConfigMap gives it, the footprint log lands where the Fluent Bit
  snippet's glob finds it, the metrics file where node_exporter reads it
  (and is gone at exit), the group's book in the emptyDir.
- install-node.sh: a second run changes nothing, a new release is added
  beside the old one and `current` swapped, a copy that fails part way
  leaves the node as it was, a ConfigMap that fails the check is not
  installed, a directory it may not change (no capability) is said and
  left.

PyYAML is needed: when this interpreter lacks it, the test runs itself
again under /usr/bin/python3 (Debian's python3-yaml) when that has it;
otherwise it is a skip, or a failure under CUMEMCAP_TEST_REQUIRE_PROGRAMS=1.

Usage: test_kubernetes.py SRC_ROOT SHIM FAKE_DIR LAUNCHER CUDA_INCLUDE [MESON]
LD_PRELOAD_EXTRA, when set, is put first in LD_PRELOAD (a sanitizer's
runtime).
"""
import fnmatch
import glob
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

REQUIRE = os.environ.get("CUMEMCAP_TEST_REQUIRE_PROGRAMS") == "1"

try:
    import yaml
except ImportError:
    for cand in ("/usr/bin/python3", shutil.which("python3")):
        if cand and os.path.realpath(cand) != os.path.realpath(sys.executable) and \
                subprocess.run([cand, "-c", "import yaml"], capture_output=True).returncode == 0:
            os.execv(cand, [cand] + sys.argv)
    msg = "PyYAML (python3-yaml): not installed for %s nor /usr/bin/python3; .ci/run installs it" % sys.executable
    print(("FAIL: " if REQUIRE else "skip: ") + msg, file=sys.stderr)
    sys.exit(1 if REQUIRE else 77)

SRC, SHIM, FAKE_DIR, LAUNCHER, CUDA_INCLUDE = sys.argv[1:6]
MESON = sys.argv[6] if len(sys.argv) > 6 else ""
del sys.argv[1:7]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
DEPLOY = os.path.join(SRC, "deploy", "kubernetes")
GiB = 1 << 30

DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
HOSTPATH_TYPES = {"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice",
                  "BlockDevice"}
WORKLOADS = {"Pod", "Deployment", "DaemonSet", "Job", "StatefulSet", "ReplicaSet"}
# What the example pods are given by the Downward API (made-up values).
DOWNWARD = {"spec.nodeName": "gpu-node-1", "metadata.name": "train-7f9c", "metadata.namespace": "research"}

PROBE = r'''
import ctypes, os, sys, time
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
t = ctypes.c_size_t()
assert cu.cuDeviceTotalMem_v2(ctypes.byref(t), 0) == 0
print("total", t.value)
ctx = ctypes.c_void_p()
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
p = ctypes.c_uint64()
print("alloc", cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(64 << 20)))
watch = os.environ["PROBE_WATCH"]
seen, deadline = [], time.time() + 20
while not seen and time.time() < deadline:
    # What node_exporter's textfile collector reads: *.prom (the writer's
    # hidden lock companion and its temporary file are not for it).
    seen = sorted(n for n in os.listdir(watch) if n.endswith(".prom") and not n.startswith("."))
    time.sleep(0.05)
print("metrics", *seen)
'''


def load_all():
    """{file: [documents]} for every manifest."""
    out = {}
    for path in sorted(glob.glob(os.path.join(DEPLOY, "*.yaml")) + glob.glob(os.path.join(DEPLOY, "*.yml"))):
        with open(path) as f:
            out[os.path.basename(path)] = [d for d in yaml.safe_load_all(f) if d is not None]
    return out


def pod_spec(doc):
    return doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]


def env_of(container):
    """The container's variables as Kubernetes gives them: fieldRefs from
    DOWNWARD, $(VAR) expanded from the variables defined before it."""
    out = {}
    for e in container.get("env", []):
        if "valueFrom" in e:
            field = e["valueFrom"].get("fieldRef", {}).get("fieldPath", "")
            out[e["name"]] = DOWNWARD.get(field, "unknown-" + field.replace(".", "-"))
            continue
        out[e["name"]] = re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                                lambda m: "$" if m.group(0) == "$$" else out.get(m.group(1), m.group(0)),
                                e.get("value", ""))
    return out


def mount_for(spec, container, path):
    """(volumeMount, volume) whose mountPath holds `path`, the longest."""
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[0]["mountPath"].rstrip("/")):
                best = (m, vols[m["name"]])
    return best


def size_bytes(text):
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB|TiB)?", text.strip())
    assert m, text
    return int(m.group(1)) << {"KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40, None: 0}[m.group(2)]


def conf_limit_for(conf, program):
    """The `limit` of the first [program GLOB] section matching `program`."""
    section = None
    for line in conf.splitlines():
        line = line.split(" #")[0].strip()
        if line.startswith("#") or not line:
            continue
        m = re.fullmatch(r"\[(\w+)\s+(.+)\]", line)
        if m:
            if section == "match":
                return None
            section = "match" if m.group(1) == "program" and fnmatch.fnmatchcase(program, m.group(2)) else "other"
            continue
        key, _, value = (s.strip() for s in line.partition("="))
        if section == "match" and key == "limit":
            return value
    return None


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = load_all()
        cls.docs = [d for ds in cls.files.values() for d in ds]
        cls.by_kind = {}
        for d in cls.docs:
            cls.by_kind.setdefault(d["kind"], []).append(d)

    def one(self, kind, name=None):
        found = [d for d in self.by_kind.get(kind, []) if name is None or d["metadata"]["name"] == name]
        self.assertEqual(len(found), 1, f"one {kind} {name or ''} in {DEPLOY}")
        return found[0]

    def installer(self):
        return self.one("DaemonSet", "cumemcap-installer")

    def app_workloads(self):
        """The workloads that use cumemcap (not the installer, not node_exporter)."""
        out = []
        for d in self.docs:
            if d["kind"] in WORKLOADS and d["metadata"]["name"] not in ("cumemcap-installer", "node-exporter"):
                out.append(d)
        return out

    def dockerfile(self):
        with open(os.path.join(DEPLOY, "Dockerfile")) as f:
            text = f.read()
        return text, re.sub(r"\\\n", " ", text)

    def meson_setup_args(self):
        _, joined = self.dockerfile()
        m = re.search(r"meson setup (\S+)((?: +-[^\s;]+)+)", joined)
        self.assertIsNotNone(m, "Dockerfile: no `meson setup BUILD_DIR OPTIONS` line")
        args = m.group(2).split()
        opts = {}
        for a in args:
            k, _, v = a.partition("=")
            opts[k] = v
        return m.group(1), args, opts

    def prefix_layout(self):
        """prefix, and the library and launcher paths under it, from the Dockerfile."""
        _, _, opts = self.meson_setup_args()
        prefix = opts.get("--prefix")
        self.assertTrue(prefix and prefix.startswith("/"), f"Dockerfile: --prefix {prefix!r}")
        lib = os.path.join(prefix, opts.get("--libdir", "lib"), "libcumemcap.so")
        launcher = os.path.join(prefix, opts.get("--bindir", "bin"), "cumemcap")
        return prefix, lib, launcher, opts


class Manifests(Base):
    def test_every_document_parses_and_is_named(self):
        self.assertGreaterEqual(len(self.files), 5, f"manifests in {DEPLOY}: {sorted(self.files)}")
        for name, docs in self.files.items():
            self.assertTrue(docs, f"{name}: no document")
            for i, d in enumerate(docs):
                where = f"{name} document {i + 1}"
                self.assertIsInstance(d, dict, where)
                for key in ("apiVersion", "kind", "metadata"):
                    self.assertIn(key, d, where)
                self.assertRegex(d["metadata"].get("name", ""), DNS_NAME, where)
                if d["kind"] != "Namespace":
                    self.assertRegex(d["metadata"].get("namespace", "default"), DNS_NAME, where)
                self.assertEqual(d["apiVersion"], {"Deployment": "apps/v1", "DaemonSet": "apps/v1",
                                                   "Job": "batch/v1"}.get(d["kind"], "v1"), where)

    def test_mounts_and_volumes_match(self):
        for d in self.docs:
            if d["kind"] not in WORKLOADS:
                continue
            where = f"{d['kind']}/{d['metadata']['name']}"
            if d["kind"] != "Pod":
                sel = d["spec"]["selector"]["matchLabels"]
                labels = d["spec"]["template"]["metadata"]["labels"]
                self.assertTrue(sel.items() <= labels.items(), f"{where}: selector {sel} vs labels {labels}")
            spec = pod_spec(d)
            vols = {v["name"]: v for v in spec.get("volumes", [])}
            self.assertEqual(len(vols), len(spec.get("volumes", [])), f"{where}: volume names repeat")
            used = set()
            for c in spec["containers"]:
                paths = [m["mountPath"] for m in c.get("volumeMounts", [])]
                self.assertEqual(len(paths), len(set(paths)), f"{where}/{c['name']}: a mountPath repeats")
                for m in c.get("volumeMounts", []):
                    self.assertIn(m["name"], vols, f"{where}/{c['name']}: mount of no volume")
                    self.assertTrue(m["mountPath"].startswith("/"), f"{where}: {m}")
                    used.add(m["name"])
            self.assertEqual(used, set(vols), f"{where}: volumes not mounted: {set(vols) - used}")
            for v in vols.values():
                if "hostPath" in v:
                    self.assertTrue(v["hostPath"]["path"].startswith("/"), f"{where}: {v}")
                    self.assertIn(v["hostPath"].get("type", ""), HOSTPATH_TYPES, f"{where}: {v}")

    def test_installer_daemonset(self):
        ds = self.installer()
        spec = pod_spec(ds)
        self.assertEqual(spec["nodeSelector"].get("nvidia.com/gpu.present"), "true")
        self.assertIn("nvidia.com/gpu", [t.get("key") for t in spec.get("tolerations", [])])
        (c,) = spec["containers"]
        req = c["resources"]["requests"]
        self.assertLessEqual(int(req["cpu"].rstrip("m")), 100)
        self.assertLessEqual(size_bytes(req["memory"].replace("Mi", "MiB")), 128 << 20)
        sc = c["securityContext"]
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        self.assertNotIn("add", sc["capabilities"])
        self.assertFalse(sc.get("privileged", False))
        # Its command is where the Dockerfile puts install-node.sh.
        text, _ = self.dockerfile()
        m = re.search(r"^COPY deploy/kubernetes/install-node\.sh (\S+)$", text, re.M)
        self.assertIsNotNone(m, "Dockerfile: COPY deploy/kubernetes/install-node.sh DEST")
        self.assertEqual((c.get("command") or [None])[0], m.group(1))
        # The ConfigMap it installs exists beside it with cumemcap.conf.
        env = env_of(c)
        mount, vol = mount_for(spec, c, env["CUMEMCAP_CONFIGMAP"])
        cm = self.one("ConfigMap", vol["configMap"]["name"])
        self.assertEqual(cm["metadata"]["namespace"], ds["metadata"]["namespace"])
        key = os.path.relpath(env["CUMEMCAP_CONFIGMAP"], mount["mountPath"])
        items = {i["path"]: i["key"] for i in vol["configMap"].get("items", [])} or {k: k for k in cm["data"]}
        self.assertIn(items.get(key), cm["data"], f"{key} is no key of ConfigMap {cm['metadata']['name']}")
        self.assertEqual(env["CUMEMCAP_IMAGE_TREE"], self.prefix_layout()[0])
        # Every node path it writes is a hostPath mount.
        for var in ("CUMEMCAP_NODE_OPT", "CUMEMCAP_NODE_ETC"):
            self.assertIn("hostPath", mount_for(spec, c, env[var])[1], var)
        for d in env["CUMEMCAP_SHARED_DIRS"].split():
            self.assertIn("hostPath", mount_for(spec, c, d)[1], d)

    def node_path(self, ds, container_path):
        """Where a path of the installer's container is on the node."""
        spec = pod_spec(ds)
        mount, vol = mount_for(spec, spec["containers"][0], container_path)
        rel = os.path.relpath(container_path, mount["mountPath"])
        return os.path.normpath(os.path.join(vol["hostPath"]["path"], rel))

    def test_pods_use_what_the_installer_puts_on_the_node(self):
        ds = self.installer()
        denv = env_of(pod_spec(ds)["containers"][0])
        release = self.node_path(ds, denv["CUMEMCAP_NODE_OPT"] + "/cumemcap/current")
        conf = self.node_path(ds, denv["CUMEMCAP_NODE_ETC"] + "/cumemcap.conf")
        shared = {self.node_path(ds, d) for d in denv["CUMEMCAP_SHARED_DIRS"].split()}
        prefix, lib, launcher, opts = self.prefix_layout()
        default_conf = opts.get("-Ddefault-config", "/etc/cumemcap.conf")
        with open(os.path.join(SRC, "meson_options.txt")) as f:
            self.assertIn(f"'default-config', type: 'string', value: '{default_conf}'", f.read())
        apps = self.app_workloads()
        self.assertGreaterEqual(len(apps), 2)
        self.assertIn("Pod", [d["kind"] for d in apps])
        for d in apps:
            spec = pod_spec(d)
            for c in spec["containers"]:
                where = f"{d['kind']}/{d['metadata']['name']}/{c['name']}"
                env = env_of(c)
                names = [e["name"] for e in c.get("env", [])]
                for e in c.get("env", []):
                    for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", e.get("value", "")):
                        self.assertIn(ref, names[:names.index(e["name"])],
                                      f"{where}: {e['name']} uses $({ref}) before it is defined")
                # The Downward API variables the metrics' labels come from.
                fields = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
                          for e in c.get("env", [])}
                self.assertEqual(fields.get("NODE_NAME"), "spec.nodeName", where)
                self.assertEqual(fields.get("POD_NAME"), "metadata.name", where)
                self.assertEqual(fields.get("POD_NAMESPACE"), "metadata.namespace", where)
                self.assertEqual(env.get("CONTAINER_NAME"), c["name"], where)
                # The shim: preloaded, or the launcher as the command.
                entry = env.get("LD_PRELOAD") or c["command"][0]
                self.assertIn(entry, (lib, launcher), where)
                mount, vol = mount_for(spec, c, entry)
                self.assertEqual(mount["mountPath"], prefix, where)
                self.assertTrue(mount.get("readOnly"), f"{where}: {prefix} not read-only")
                self.assertEqual(vol.get("hostPath", {}).get("path"), release, where)
                self.assertEqual(vol["hostPath"].get("type"), "Directory",
                                 f"{where}: type Directory holds the pod until the node has the release")
                mount, vol = mount_for(spec, c, default_conf) or (None, None)
                self.assertIsNotNone(mount, f"{where}: nothing mounted at {default_conf}")
                self.assertEqual(mount["mountPath"], default_conf, where)
                self.assertEqual(vol.get("hostPath"), {"path": conf, "type": "File"}, where)
                for var in ("CUMEMCAP_LOG", "CUMEMCAP_METRICS"):
                    path = env.get(var, "")
                    found = mount_for(spec, c, path)
                    self.assertIsNotNone(found, f"{where}: {var}={path} is in no volume")
                    self.assertIn(found[1].get("hostPath", {}).get("path"), shared, f"{where}: {var}")
                    self.assertNotIn("$(", path, f"{where}: {var}")
                self.assertTrue(env["CUMEMCAP_LOG"].endswith(".jsonl"))
                self.assertTrue(env["CUMEMCAP_METRICS"].endswith(".prom"))
                if "CUMEMCAP_GROUP_DIR" in env:
                    mount, vol = mount_for(spec, c, env["CUMEMCAP_GROUP_DIR"])
                    self.assertEqual(mount["mountPath"], env["CUMEMCAP_GROUP_DIR"], where)
                    self.assertEqual(vol.get("emptyDir", {}).get("medium"), "Memory", where)
        self.assertTrue(any("CUMEMCAP_GROUP_DIR" in env_of(c) for d in apps for c in pod_spec(d)["containers"]),
                        "no example of a group")

    def test_node_exporter_reads_the_metrics_directory(self):
        ne = self.one("DaemonSet", "node-exporter")
        spec = pod_spec(ne)
        (c,) = spec["containers"]
        flags = dict(a.split("=", 1) for a in c["args"] if "=" in a)
        textfile = flags["--collector.textfile.directory"]
        mount, vol = mount_for(spec, c, textfile)
        self.assertTrue(mount.get("readOnly"))
        node_dir = os.path.normpath(os.path.join(vol["hostPath"]["path"], os.path.relpath(textfile, mount["mountPath"])))
        for d in self.app_workloads():
            spec = pod_spec(d)
            for c in spec["containers"]:
                path = env_of(c)["CUMEMCAP_METRICS"]
                m, v = mount_for(spec, c, os.path.dirname(path))
                self.assertEqual(m["mountPath"], os.path.dirname(path), "the metrics file in the top directory")
                self.assertEqual(v["hostPath"]["path"], node_dir)
        self.assertEqual(node_dir, "/var/lib/prometheus/node-exporter")  # Debian's textfile directory


class Dockerfile(Base):
    def test_install_paths_are_the_manifests(self):
        """`meson setup` with the Dockerfile's options, for real: what
        Meson will install where, and the paths in the installed launcher."""
        prefix, lib, launcher, opts = self.prefix_layout()
        text, _ = self.dockerfile()
        self.assertRegex(text, r"(?m)^FROM \S+ AS build$")
        self.assertIn(f"COPY --from=build /stage{prefix} {prefix}\n", text)
        build_dir, args, _ = self.meson_setup_args()
        self.assertIn(f"meson install -C {build_dir} --destdir /stage", text)
        if not MESON:
            self.skipTest("meson not found")
        # The image's CUDA headers are this machine's.
        args = [a for a in args if not a.startswith("-Dcuda-include=")]
        with tempfile.TemporaryDirectory(prefix="cumemcap-deploy-meson-") as tmp:
            b = os.path.join(tmp, "b")
            p = subprocess.run([MESON, "setup", b, SRC, *args, "-Dcuda-include=" + CUDA_INCLUDE],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
            p = subprocess.run([MESON, "introspect", "--installed", b], capture_output=True, text=True)
            installed = set(json.loads(p.stdout).values())
            self.assertIn(lib, installed)
            self.assertIn(launcher, installed)
            with open(os.path.join(b, "scripts", "cumemcap.installed")) as f:
                script = f.read()
            self.assertIn('LIBRARY="${CUMEMCAP_LIBRARY:-%s}"' % lib, script)
            for tool in re.findall(r'^\w+="\$\{CUMEMCAP_\w+:-([^}]*)\}"', script, re.M):
                self.assertIn(tool, installed)
                self.assertTrue(tool.startswith(prefix + "/"), tool)


class Node(Base):
    """install-node.sh and the example pods, in a directory standing for
    the node: each hostPath P is NODE/P."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="cumemcap-deploy-")
        self.root = self.tmp.name
        self.node = os.path.join(self.root, "node")
        self.image = os.path.join(self.root, "image")
        os.makedirs(self.node)
        self.make_image("")

    def tearDown(self):
        self.tmp.cleanup()

    def make_image(self, extra):
        """The image's install tree: this build's library and launcher (the
        launcher's tools are the build's, written into it)."""
        prefix, lib, launcher, _ = self.prefix_layout()
        shutil.rmtree(self.image, ignore_errors=True)
        for src, dst in ((SHIM, lib), (LAUNCHER, launcher)):
            d = os.path.join(self.image, os.path.relpath(dst, prefix))
            os.makedirs(os.path.dirname(d), exist_ok=True)
            shutil.copy2(src, d)
        os.makedirs(os.path.join(self.image, "share", "doc"), exist_ok=True)
        with open(os.path.join(self.image, "share", "doc", "release"), "w") as f:
            f.write("release" + extra + "\n")

    def on_node(self, path):
        return os.path.join(self.node, path.lstrip("/"))

    def configmap_text(self):
        return self.one("ConfigMap", "cumemcap-config")["data"]["cumemcap.conf"]

    def install(self, conf=None, path_prefix=None, wrap=()):
        """install-node.sh once, with the DaemonSet's environment and its
        mounts mapped into the node directory."""
        ds = self.installer()
        spec = pod_spec(ds)
        c = spec["containers"][0]
        env = env_of(c)
        cfg = os.path.join(self.root, "configmap")
        os.makedirs(cfg, exist_ok=True)
        with open(os.path.join(cfg, "cumemcap.conf"), "w") as f:
            f.write(self.configmap_text() if conf is None else conf)

        def mapped(p):
            mount, vol = mount_for(spec, c, p)
            rel = os.path.relpath(p, mount["mountPath"])
            if "configMap" in vol:
                return os.path.normpath(os.path.join(cfg, rel))
            d = self.on_node(vol["hostPath"]["path"])
            if vol["hostPath"].get("type") == "DirectoryOrCreate":
                os.makedirs(d, exist_ok=True)  # what the kubelet does
            return os.path.normpath(os.path.join(d, rel))

        run_env = {k: v for k, v in os.environ.items() if not k.startswith(("CUMEMCAP_", "LD_"))}
        run_env.update(env)
        run_env.update({
            "CUMEMCAP_IMAGE_TREE": self.image,
            "CUMEMCAP_NODE_OPT": mapped(env["CUMEMCAP_NODE_OPT"]),
            "CUMEMCAP_NODE_ETC": mapped(env["CUMEMCAP_NODE_ETC"]),
            "CUMEMCAP_CONFIGMAP": mapped(env["CUMEMCAP_CONFIGMAP"]),
            "CUMEMCAP_SHARED_DIRS": " ".join(mapped(d) for d in env["CUMEMCAP_SHARED_DIRS"].split()),
            "CUMEMCAP_INSTALL_ONCE": "1",
        })
        if path_prefix:
            run_env["PATH"] = path_prefix + ":" + run_env["PATH"]
        return subprocess.run([*wrap, "sh", os.path.join(DEPLOY, "install-node.sh")], env=run_env,
                              capture_output=True, text=True, timeout=120)

    def release_dirs(self):
        """The releases a pod could mount (not the hidden ones being made)."""
        return sorted(n for n in os.listdir(self.on_node("/opt/cumemcap/releases")) if not n.startswith("."))

    def test_install_then_again_then_upgrade(self):
        p = self.install()
        self.assertEqual(p.returncode, 0, p.stderr)
        top = self.on_node("/opt/cumemcap")
        (first,) = self.release_dirs()
        self.assertRegex(first, r"^0\.\d+\.\d+-[0-9a-f]{12}$")
        self.assertEqual(os.readlink(os.path.join(top, "current")), "releases/" + first)
        for d in ("bin", "lib"):
            self.assertEqual(os.readlink(os.path.join(top, d)), "current/" + d)
        prefix, lib, _, _ = self.prefix_layout()
        with open(os.path.join(top, "current", os.path.relpath(lib, prefix)), "rb") as a, open(SHIM, "rb") as b:
            self.assertTrue(a.read() == b.read(), "the library on the node is the image's")
        with open(self.on_node("/etc/cumemcap/cumemcap.conf")) as f:
            self.assertEqual(f.read(), self.configmap_text())
        for d in ("/var/log/cumemcap", "/var/lib/prometheus/node-exporter"):
            self.assertEqual(stat.S_IMODE(os.stat(self.on_node(d)).st_mode), 0o1777, d)
        self.assertEqual([n for n in os.listdir(self.on_node("/opt")) if n.startswith(".")], [])
        # Again: nothing changes.
        before = os.stat(os.path.join(top, "releases", first)).st_mtime_ns
        p = self.install()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.release_dirs(), [first])
        self.assertEqual(os.stat(os.path.join(top, "releases", first)).st_mtime_ns, before)
        self.assertNotIn("installed", p.stderr)
        # A new image: a release beside the old, `current` moved.
        self.make_image("-2")
        p = self.install()
        self.assertEqual(p.returncode, 0, p.stderr)
        dirs = self.release_dirs()
        self.assertEqual(len(dirs), 2, dirs)
        (second,) = set(dirs) - {first}
        self.assertEqual(os.readlink(os.path.join(top, "current")), "releases/" + second)

    def test_a_failed_copy_leaves_the_node_as_it_was(self):
        """A cp that dies part way (a killed pod, a full disk): before the
        first install there is still no /opt/cumemcap; after it, `current`
        still names the whole old release; the next run cleans up."""
        bin_dir = os.path.join(self.root, "badbin")
        os.makedirs(bin_dir)
        with open(os.path.join(bin_dir, "cp"), "w") as f:
            f.write('#!/bin/sh\n'
                    'for a; do dst=$a; done\n'
                    'mkdir -p "$dst/lib" && echo half > "$dst/lib/libcumemcap.so"\n'
                    'exit 1\n')
        os.chmod(os.path.join(bin_dir, "cp"), 0o755)
        p = self.install(path_prefix=bin_dir)
        self.assertNotEqual(p.returncode, 0)
        self.assertFalse(os.path.exists(self.on_node("/opt/cumemcap")), "a half install is visible")
        p = self.install()
        self.assertEqual(p.returncode, 0, p.stderr)
        (first,) = self.release_dirs()
        self.assertEqual([n for n in os.listdir(self.on_node("/opt")) if n.startswith(".")], [])
        self.make_image("-2")
        p = self.install(path_prefix=bin_dir)
        self.assertNotEqual(p.returncode, 0)
        top = self.on_node("/opt/cumemcap")
        self.assertEqual(os.readlink(os.path.join(top, "current")), "releases/" + first)
        self.assertEqual(self.release_dirs(), [first])  # the partial copy is hidden (.tmp.*)
        p = self.install()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([n for n in os.listdir(os.path.join(top, "releases")) if n.startswith(".")], [])

    def test_a_directory_it_cannot_change_is_said_and_left(self):
        """The textfile directory already there and owned by another user
        (Debian's prometheus-node-exporter package): as root with no
        capability the installer cannot chmod it; it says so and installs."""
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("needs root and setpriv to drop the capabilities")
        textfile = self.on_node("/var/lib/prometheus/node-exporter")
        os.makedirs(textfile)
        os.chmod(textfile, 0o755)
        os.chown(textfile, 65534, 65534)
        os.chmod(self.root, 0o755)
        p = self.install(wrap=["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(textfile + ": could not make it mode 1777", p.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(textfile).st_mode), 0o755)
        self.assertTrue(os.path.exists(self.on_node("/opt/cumemcap/current/lib")))

    def test_a_bad_configmap_is_not_installed(self):
        self.assertEqual(self.install().returncode, 0)
        p = self.install(conf="limit = 4GiB\nlimt = 2GiB\n")
        self.assertEqual(p.returncode, 1)
        self.assertIn('unknown key "limt"', p.stderr)
        self.assertIn("is left as it was", p.stderr)
        with open(self.on_node("/etc/cumemcap/cumemcap.conf")) as f:
            self.assertEqual(f.read(), self.configmap_text())

    def test_configmap_passes_check_config(self):
        with tempfile.NamedTemporaryFile("w", suffix=".conf", dir=self.root) as f:
            f.write(self.configmap_text())
            f.flush()
            p = subprocess.run([LAUNCHER, "--check-config", f.name], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("valid", p.stdout)

    def run_container(self, workload, program):
        """Run the PROBE as `program` in the workload's first container, on
        the node directory, with its environment and mounts; returns
        (completed process, the container's environment as Kubernetes
        makes it, a function mapping container paths)."""
        self.assertEqual(self.install().returncode, 0)
        spec = pod_spec(workload)
        c = spec["containers"][0]
        env = env_of(c)

        def mapped(p):
            mount, vol = mount_for(spec, c, p)
            rel = os.path.relpath(p, mount["mountPath"])
            if "emptyDir" in vol:
                base = os.path.join(self.root, "emptydir", mount["name"])
                os.makedirs(base, mode=0o777, exist_ok=True)
                os.chmod(base, 0o777)  # an emptyDir's mode
            else:
                base = self.on_node(vol["hostPath"]["path"])
                self.assertTrue(os.path.exists(base), f"{vol['hostPath']['path']}: not on the node")
            return os.path.normpath(os.path.join(base, rel))

        probe = os.path.join(self.root, program)
        with open(probe, "w") as f:
            f.write(PROBE)
        run_env = {k: v for k, v in os.environ.items()
                   if k == "CUMEMCAP_GROUP_DIR" or not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_"))}
        run_env.update(env)
        for var in ("CUMEMCAP_LOG", "CUMEMCAP_METRICS", "CUMEMCAP_GROUP_DIR"):
            if var in env:
                run_env[var] = mapped(env[var])
        run_env.update({
            "CUMEMCAP_CONFIG": mapped("/etc/cumemcap.conf"),  # the shim's default, on the node
            "CUMEMCAP_LOG_INTERVAL": "0.1",
            "LD_LIBRARY_PATH": FAKE_DIR,
            "FAKECUDA_DEVICES": "80GiB",
            "PROBE_WATCH": os.path.dirname(mapped(env["CUMEMCAP_METRICS"])),
        })
        cmd = c.get("command") or []
        if "LD_PRELOAD" in env:
            run_env["LD_PRELOAD"] = (EXTRA + ":" if EXTRA else "") + mapped(env["LD_PRELOAD"])
            argv = [sys.executable, probe]
        else:
            if EXTRA:
                self.skipTest("the launcher preloads the library alone; a sanitizer's runtime must come first")
            # The launcher and its options from the command; the program after `--` is the probe.
            argv = [mapped(cmd[0]), *cmd[1:cmd.index("--")], "--", sys.executable, probe]
        p = subprocess.run(argv, env=run_env, capture_output=True, text=True, timeout=120, cwd=self.root)
        return p, env, mapped

    def check_outputs(self, p, env, mapped, limit):
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("total %d\n" % limit, p.stdout)
        self.assertIn("alloc 0\n", p.stdout)
        # The metrics file, while the process ran, where node_exporter reads.
        metrics = mapped(env["CUMEMCAP_METRICS"])
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("metrics")][0].split()[1:]
        self.assertEqual(len(line), 1, f"metrics files: {line}\n{p.stderr}")
        self.assertTrue(fnmatch.fnmatchcase(line[0], "*.prom"))
        self.assertTrue(fnmatch.fnmatchcase(line[0], os.path.basename(metrics).replace("%p", "*")))
        self.assertEqual(os.listdir(os.path.dirname(metrics)), [], "the metrics file outlived the process")
        # The footprint log, where the Fluent Bit snippet's glob finds it.
        with open(os.path.join(DEPLOY, "fluent-bit-cumemcap.conf")) as f:
            pattern = re.search(r"^\s*Path\s+(\S+)$", f.read(), re.M).group(1)
        logs = glob.glob(os.path.join(self.node, pattern.lstrip("/")))
        self.assertEqual(len(logs), 1, f"{pattern} on the node: {logs}; {p.stderr}")
        self.assertEqual(os.path.dirname(logs[0]), os.path.dirname(mapped(env["CUMEMCAP_LOG"])))
        with open(logs[0]) as f:
            recs = [json.loads(line) for line in f if line.strip()]
        self.assertEqual(recs[0]["type"], "start")
        self.assertEqual(recs[-1]["type"], "exit")
        self.assertIn("_".join(DOWNWARD[k] for k in ("metadata.namespace", "metadata.name")),
                      os.path.basename(logs[0]))

    def test_pod_runs_capped_with_log_and_metrics(self):
        pod = self.one("Pod", "train")
        program = os.path.basename(pod_spec(pod)["containers"][0]["command"][-1])
        limit = conf_limit_for(self.configmap_text(), program)
        self.assertIsNotNone(limit, f"no [program] section of the ConfigMap for {program}")
        p, env, mapped = self.run_container(pod, program)
        self.check_outputs(p, env, mapped, size_bytes(limit))

    def test_group_deployment_runs_in_its_group(self):
        dep = self.one("Deployment", "serve")
        cmd = pod_spec(dep)["containers"][0]["command"]
        program = cmd[cmd.index("--") + 1]
        limit = conf_limit_for(self.configmap_text(), program)
        self.assertIsNotNone(limit, f"no [program] section of the ConfigMap for {program}")
        p, env, mapped = self.run_container(dep, program)
        self.check_outputs(p, env, mapped, size_bytes(limit))
        group = cmd[cmd.index("--group") + 1]
        self.assertTrue(os.path.exists(os.path.join(mapped(env["CUMEMCAP_GROUP_DIR"]), "cumemcap-group." + group)),
                        os.listdir(mapped(env["CUMEMCAP_GROUP_DIR"])))


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
