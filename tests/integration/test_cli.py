#!/usr/bin/env python3
"""The command line and the files generated from the table of settings:
conf/cumemcap.conf and conf/cumemcap.env are what `cumemcap-config
--print-example` prints, change nothing as shipped, and show true defaults;
the launcher has an option for every setting, names the option in its
errors, and exits as its --help says; --print-config --json agrees with the
text form; every program answers --version.

Usage: test_cli.py SHIM FAKE_DIR LAUNCHER TOOL GROUP_TOOL SOURCE_ROOT
LD_PRELOAD_EXTRA, when set, is put in front of the shim (sanitizer builds);
the launcher preloads the shim alone, so its runs are skipped there.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

SHIM, FAKE_DIR, LAUNCHER, TOOL, GROUP_TOOL, ROOT = sys.argv[1:7]
del sys.argv[1:7]
EXTRA = os.environ.get("LD_PRELOAD_EXTRA", "")
CONF = os.path.join(ROOT, "conf")


def clean_env(add=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMCAP_", "FAKECUDA_", "LD_", "TF_", "XLA_", "PYTORCH_"))}
    env.update({"LD_LIBRARY_PATH": FAKE_DIR, "FAKECUDA_DEVICES": "16GiB,8GiB", "CUMEMCAP_CONFIG": ""})
    env.update(add or {})
    return env


def run(argv, add=None):
    return subprocess.run(argv, env=clean_env(add), capture_output=True, text=True, timeout=60)


def tool(*args, add=None):
    return run([TOOL, *args], add)


def example_blocks(text, conf):
    """(name, value, is_default) of every commented setting in an example file."""
    out = []
    lines = text.splitlines()
    pat = re.compile(r"^#([a-z_]+) = (.*)$" if conf else r"^#(CUMEMCAP_[A-Z_]+)=(.*)$")
    for i, line in enumerate(lines):
        m = pat.match(line)
        if m and lines[i - 1].startswith("# ") and m.group(1) != "CUMEMCAP_CONFIG":
            j = i
            while j > 0 and lines[j - 1].startswith("# "):
                j -= 1
            doc = " ".join(l[2:] for l in lines[j:i])
            out.append((m.group(1), m.group(2), "For example:" not in doc))
    return out


class GeneratedFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def settings(self, add):
        p = tool("--print-config", "--json", add=add)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_committed_files_are_the_generators_output(self):
        for what, name in (("conf", "cumemcap.conf"), ("env", "cumemcap.env")):
            with self.subTest(file=name):
                p = tool("--print-example", what)
                self.assertEqual(p.returncode, 0, p.stderr)
                with open(os.path.join(CONF, name)) as f:
                    self.assertEqual(f.read(), p.stdout,
                                     "conf/%s is stale: build/src/cumemcap-config --print-example %s > conf/%s"
                                     % (name, what, name))

    def test_every_setting_in_both_files(self):
        options = [l for l in tool("--print-help", "options").stdout.splitlines() if l.startswith("  --")]
        self.assertGreaterEqual(len(options), 17)
        for name, conf in (("cumemcap.conf", True), ("cumemcap.env", False)):
            with open(os.path.join(CONF, name)) as f:
                self.assertEqual(len(example_blocks(f.read(), conf)), len(options), name)

    def test_shipped_conf_changes_nothing(self):
        # Installed as /etc/cumemcap.conf, the file imposes nothing until edited.
        base = self.settings({"CUMEMCAP_CONFIG": ""})
        shipped = self.settings({"CUMEMCAP_CONFIG": os.path.join(CONF, "cumemcap.conf")})
        self.assertEqual(shipped["settings"], base["settings"])
        self.assertEqual([g["limit"] for g in shipped["gpus"]], [None, None])
        for s in shipped["settings"].values():
            self.assertEqual(s["source"], "default")

    def test_defaults_shown_are_the_true_defaults(self):
        base = self.settings({})["settings"]
        with open(os.path.join(CONF, "cumemcap.conf")) as f:
            blocks = example_blocks(f.read(), True)
        checked = 0
        for key, value, is_default in blocks:
            if not is_default:
                continue
            with self.subTest(key=key):
                path = os.path.join(self.tmp.name, "one.conf")
                with open(path, "w") as f:
                    f.write("%s = %s\n" % (key, value))
                got = self.settings({"CUMEMCAP_CONFIG": path})["settings"][key]
                self.assertEqual(got["value"], base[key]["value"])
                self.assertEqual(got["source"], path + ":1")
                checked += 1
        self.assertGreaterEqual(checked, 12)
        with open(os.path.join(CONF, "cumemcap.env")) as f:
            for var, value, is_default in example_blocks(f.read(), False):
                if is_default:
                    key = var[len("CUMEMCAP_"):].lower()
                    key = "overhead_estimate" if key == "overhead_estimate" else key
                    with self.subTest(var=var):
                        got = self.settings({var: value})["settings"][key]
                        self.assertEqual((got["value"], got["source"]), (base[key]["value"], var))

    def test_uncommented_files_are_accepted(self):
        with open(os.path.join(CONF, "cumemcap.conf")) as f:
            text = f.read()
        active = re.sub(r"^#([a-z_]+ = |\[)", r"\1", text, flags=re.M)
        self.assertGreater(active.count("\n") - text.count("\n#"), 0)
        path = os.path.join(self.tmp.name, "all.conf")
        with open(path, "w") as f:
            f.write(active)
        p = tool("--check-config", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(CONF, "cumemcap.env")) as f:
            env = {var: value for var, value, _ in example_blocks(f.read(), False)}
        env["CUMEMCAP_GROUP_DIR"] = self.tmp.name  # the group joins here, not in /dev/shm
        env["CUMEMCAP_LOG"] = os.path.join(self.tmp.name, "%n.%p.jsonl")
        env["CUMEMCAP_CONFIG"] = ""
        env["LD_PRELOAD"] = (EXTRA + ":" if EXTRA else "") + SHIM
        p = run(["/bin/echo", "main ran"], env)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "main ran\n", ""))


class PrintConfigJson(unittest.TestCase):
    def test_parses_and_matches_the_text_form(self):
        add = {"CUMEMCAP_LIMIT": "4GiB", "CUMEMCAP_DEVICE_LIMITS": "1=25%", "CUMEMCAP_POOL": "nopack",
               "CUMEMCAP_LOG": "stderr", "CUMEMCAP_GROUP": "g", "CUMEMCAP_GROUP_LIMIT": "6GiB"}
        j = json.loads(tool("--print-config", "--json", "--", "python3", "train.py", add=add).stdout)
        text = tool("--print-config", "--", "python3", "train.py", add=add).stdout
        self.assertEqual(j["program"], "train.py")
        self.assertIn("program:        train.py\n", text)
        labels = {"framework_hints": "framework hints", "log_interval": "log interval",
                  "group_dir": "group dir", "group_access": "group access"}
        for key, s in j["settings"].items():
            if key == "overhead_estimate":
                continue  # the text says it inside the overhead line
            with self.subTest(key=key):
                line = next(l for l in text.splitlines() if l.startswith(labels.get(key, key) + ":"))
                self.assertIn(" %s" % s["value"], line)
                self.assertIn("(%s)" % s["source"], line)
        self.assertEqual(j["settings"]["pool"], {"value": "nopack", "source": "CUMEMCAP_POOL"})
        self.assertEqual([g["limit"] for g in j["gpus"]], [4 << 30, 2 << 30])
        self.assertEqual([g["limit_source"] for g in j["gpus"]], ["CUMEMCAP_LIMIT", "CUMEMCAP_DEVICE_LIMITS"])
        self.assertEqual([g["group_limit"] for g in j["gpus"]], [6 << 30, 6 << 30])
        self.assertIn("limit 4 GiB (CUMEMCAP_LIMIT), group limit 6 GiB (CUMEMCAP_GROUP_LIMIT)", text)
        self.assertIn("limit 2 GiB (CUMEMCAP_DEVICE_LIMITS)", text)

    def test_values_are_what_the_settings_take(self):
        # Every value, given back as its variable, is the same value.
        j = json.loads(tool("--print-config", "--json").stdout)
        for key, s in j["settings"].items():
            var = "CUMEMCAP_" + key.upper()
            if key in ("group_dir", "group_access"):
                continue  # shown with a group only; checked in the env file's defaults
            with self.subTest(key=key):
                back = json.loads(tool("--print-config", "--json", add={var: s["value"]}).stdout)
                self.assertEqual(back["settings"][key], {"value": s["value"], "source": var})

    def test_strings_are_escaped(self):
        # A program name and a log template with a quote, a backslash, a
        # tab and DEL come back as they were (tools/json-out.c).
        odd = 'we"ird\\na\tme\x7f'
        log = '/tmp/a"b\\c/%p.jsonl'
        p = tool("--print-config", "--json", "--", odd, add={"CUMEMCAP_LOG": log})
        j = json.loads(p.stdout)
        self.assertEqual(j["program"], odd)
        self.assertEqual(j["settings"]["log"]["value"], log)
        self.assertNotIn("\t", p.stdout)
        self.assertIn("\\u0009", p.stdout)
        self.assertIn("\\u007f", p.stdout)

    def test_without_a_driver(self):
        p = run([TOOL, "--print-config", "--json"], {"LD_LIBRARY_PATH": "/nonexistent"})
        j = json.loads(p.stdout)
        self.assertIsNone(j["gpus"])
        self.assertIn("libcuda.so.1", j["gpus_error"])


@unittest.skipIf(EXTRA, "the launcher preloads the shim alone; sanitizer builds need their runtime first")
class Launcher(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def launch(self, args, add=None):
        return run([LAUNCHER, *args], dict({"CUMEMCAP_GROUP_DIR": self.tmp.name}, **(add or {})))

    def env_of(self, p):
        self.assertEqual(p.returncode, 0, p.stderr)
        return dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)

    def test_an_option_for_every_setting(self):
        with open(os.path.join(CONF, "cumemcap.env")) as f:
            values = {var: value for var, value, _ in example_blocks(f.read(), False)}
        values.pop("CUMEMCAP_CONFIG", None)
        values.update({"CUMEMCAP_LOG": os.path.join(self.tmp.name, "%n.log"),
                       "CUMEMCAP_METRICS": os.path.join(self.tmp.name, "%n.prom"),
                       "CUMEMCAP_GROUP_DIR": self.tmp.name})
        with open(os.path.join(ROOT, "src", "config", "settings-table.c")) as f:
            table = set(re.findall(r'\{ "(CUMEMCAP_[A-Z_]+)", "([a-z_]+)"', f.read()))
        self.assertGreaterEqual(len(table), 17)
        for var, key in sorted(table):
            option = "--" + key.replace("_", "-")
            extra = ["--group", "g"] if var == "CUMEMCAP_GROUP_LIMIT" else []
            for args in ([option, values[var]], [option + "=" + values[var]]):
                with self.subTest(args=args):
                    env = self.env_of(self.launch(extra + args + ["--", "/usr/bin/env"]))
                    self.assertEqual(env.get(var), values[var])

    def test_help_lists_every_option_and_variable(self):
        p = self.launch(["--help"])
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertTrue(p.stdout.startswith("Usage: cumemcap "))
        for section in ("\nOptions (", "\nVariables (", "\nExit status:\n"):
            self.assertIn(section, p.stdout)
        with open(os.path.join(ROOT, "src", "config", "settings-table.c")) as f:
            table = re.findall(r'\{ "(CUMEMCAP_[A-Z_]+)", "([a-z_]+)"', f.read())
        for var, key in table:
            self.assertRegex(p.stdout, r"\n  %s\s" % var)
            self.assertRegex(p.stdout, r"\n  --%s " % key.replace("_", "-"))

    def test_errors_name_what_the_user_typed(self):
        msg = ' "12XB" is not a valid limit; accepted: '
        cases = [(["--limit", "12XB"], {}, "cumemcap: --limit" + msg),
                 (["--limit=12XB"], {}, "cumemcap: --limit" + msg),
                 ([], {"CUMEMCAP_LIMIT": "12XB"}, 'cumemcap: CUMEMCAP_LIMIT="12XB" is not a valid limit'),
                 (["--log-interval", "0"], {}, 'cumemcap: --log-interval "0" is not supported'),
                 (["--growth", "preallocate", "--pool", "off"], {},
                  'cumemcap: --growth: growth "preallocate" serves from the arenas, but --pool turns them off'),
                 (["--config", "/nonexistent.conf"], {}, 'cumemcap: --config "/nonexistent.conf": ')]
        for args, add, start in cases:
            with self.subTest(args=args, env=add):
                p = self.launch(args + ["--", "/bin/echo", "main ran"], add)
                self.assertEqual((p.returncode, p.stdout), (125, ""))
                self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
                self.assertTrue(p.stderr.startswith(start), p.stderr)

    def test_exit_statuses_as_the_help_says(self):
        noexec = os.path.join(self.tmp.name, "noexec")
        with open(noexec, "w") as f:
            f.write("#!/bin/sh\necho ran\n")
        bad = os.path.join(self.tmp.name, "bad.conf")
        with open(bad, "w") as f:
            f.write("limt = 1G\n")
        cases = [
            (["--", "nosuchprogram-cumemcap"], 127, "cumemcap: nosuchprogram-cumemcap: not found\n"),
            (["--", self.tmp.name + "/nothing"], 127, "cumemcap: %s/nothing: not found\n" % self.tmp.name),
            (["--", noexec], 126, "cumemcap: %s: permission denied\n" % noexec),
            (["--", self.tmp.name], 126, "cumemcap: %s: is a directory\n" % self.tmp.name),
            (["--", "sh", "-c", "exit 7"], 7, ""),
            (["--limit", "1GiB"], 125, None),
            (["--limt", "1GiB", "--", "/bin/true"], 125,
             'cumemcap: unknown option "--limt" (did you mean --limit?); see cumemcap --help\n'),
            (["--limit"], 125, "cumemcap: --limit needs SIZE; see cumemcap --help\n"),
            (["--version"], 0, ""),
            (["--check-config", os.path.join(CONF, "cumemcap.conf")], 0, ""),
            (["--check-config", bad], 1, None),
            (["--check-config", "/nonexistent.conf"], 2, "cumemcap: /nonexistent.conf: cannot open: no such file\n"),
            (["--check-config"], 2, None),
            (["--print-config"], 0, ""),
            (["--pool", "maybe", "--print-config"], 1, None),
        ]
        for args, status, stderr in cases:
            with self.subTest(args=args):
                p = self.launch(args)
                self.assertEqual(p.returncode, status, p.stderr)
                if stderr is not None:
                    self.assertEqual(p.stderr, stderr)
                else:
                    self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
                self.assertNotRegex(p.stderr, r"\d+: exec")  # dash's own words
        p = self.launch(["--", "PATH=/x"], {"PATH": "/usr/bin:/bin"})
        self.assertEqual(p.returncode, 127)

    def test_print_config_json_through_the_launcher(self):
        p = self.launch(["--limit", "1GiB", "--print-config", "--json", "--", "python3", "x.py"])
        self.assertEqual(p.returncode, 0, p.stderr)
        j = json.loads(p.stdout)
        self.assertEqual(j["program"], "x.py")
        self.assertEqual(j["gpus"][0]["limit"], 1 << 30)


class Versions(unittest.TestCase):
    def test_every_program_answers_version(self):
        for argv in ([LAUNCHER, "--version"], [TOOL, "--version"], [GROUP_TOOL, "--version"],
                     [GROUP_TOOL, "group", "--version"], [GROUP_TOOL, "top", "--version"]):
            with self.subTest(argv=argv[1:]):
                p = run(argv)
                self.assertEqual((p.returncode, p.stderr), (0, ""))
                self.assertRegex(p.stdout, r"^cumemcap(-config|-group)? \d+\.\d+\.\d+\n$")

    def test_tools_usage_errors_exit_2(self):
        for argv in ([TOOL], [TOOL, "--bogus"], [TOOL, "--print-example", "yaml"],
                     [TOOL, "--print-config", "--bogus"], [GROUP_TOOL, "group", "bogus"]):
            with self.subTest(argv=argv[1:]):
                self.assertEqual(run(argv).returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
