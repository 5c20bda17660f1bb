#!/usr/bin/env python3
"""The install story (docs/install.md), from this build directory:

  - `meson install --destdir TMP` puts every file where it belongs; the
    installed launcher names the installed library and tools (the paths
    meson baked in), and with them runs a program under the shim;
    `pkg-config --with-path` finds cumemcap.pc and its header;
  - the man pages render without a groff warning, and say every option,
    variable and key that the --help texts and the example configuration
    say (they are generated from those, and must not lose any);
  - mkman itself, on a --help text of the shapes the launcher uses;
  - the bash completion loads into bash (with bash-completion) and
    completes `cumemcap --li` to --limit, argument values, subcommands,
    files, and the program after `--`;
  - the configuration file for /etc changes nothing: every line commented,
    valid, and --print-config with it says what it says with no file.

A program the checks need (groff, man, pkg-config, bash-completion) that is
missing is a skip, and a failure under CUMEMCAP_TEST_REQUIRE_PROGRAMS=1
(CI installs them). Writes only in its own temporary directories.

Usage: test_install.py SOURCE_ROOT BUILD_ROOT FAKE_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC, BUILD, FAKE_DIR = (os.path.abspath(p) for p in sys.argv[1:4])
del sys.argv[1:4]
REQUIRE = os.environ.get("CUMEMCAP_TEST_REQUIRE_PROGRAMS") == "1"
LAUNCHER = os.path.join(BUILD, "scripts", "cumemcap")
REPORT = os.path.join(BUILD, "src", "tools", "report", "cumemcap-report")
CONFIG_TOOL = os.path.join(BUILD, "src", "cumemcap-config")
GROUP_TOOL = os.path.join(BUILD, "src", "cumemcap-group")
PAGES = ("man1/cumemcap.1", "man1/cumemcap-report.1", "man1/cumemcap-group.1", "man1/cumemcap-top.1",
         "man5/cumemcap.conf.5")
MAN_DIR = os.path.join(BUILD, "scripts", "man")
COMPLETION = os.path.join(BUILD, "scripts", "completion", "cumemcap")
# What -Dinstall-etc-config=true installs as /etc/cumemcap.conf.
ETC_CONF = os.path.join(SRC, "conf", "cumemcap.conf")
MKMAN = os.path.join(SRC, "scripts", "man", "mkman")
BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"


def missing(test, what):
    """Skip (locally) or fail (CI) for a program that is not there."""
    msg = f"{what}: not installed here; .ci/run installs it"
    if REQUIRE:
        test.fail(msg)
    print(f"skip: {msg}", file=sys.stderr)
    test.skipTest(msg)


def need(test, *programs):
    for p in programs:
        if shutil.which(p) is None:
            missing(test, p)


def quiet_env(**extra):
    """An environment whose capped processes read no file and write no log."""
    env = dict(os.environ, CUMEMCAP_CONFIG="", CUMEMCAP_LOG="off", ASAN_OPTIONS="detect_leaks=0")
    env.pop("LD_PRELOAD", None)
    env.update(extra)
    return env


def run(cmd, env=None, check=True, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env if env is not None else quiet_env(), **kw)
    if check and r.returncode != 0:
        raise AssertionError("%s exited %d\nstdout: %s\nstderr: %s" % (cmd, r.returncode, r.stdout, r.stderr))
    return r


def help_text(cmd):
    return run(cmd).stdout


def help_options(text):
    """Every --flag an indented entry of a --help text names."""
    return sorted(set(re.findall(r"^ {1,8}(?:-\w, )?(--[a-z][\w-]*)", text, re.M)))


def help_variables(text):
    return sorted(set(re.findall(r"^ {1,8}(CUMEMCAP_[A-Z_]+)", text, re.M)))


def render(test, page):
    """The page as man shows it (plain text); groff's warnings fail the test."""
    need(test, "groff", "man")
    lint = run(["groff", "-man", "-Tutf8", "-ww", "-z", page], check=False)
    test.assertEqual(lint.returncode, 0, lint.stderr)
    test.assertEqual(lint.stderr, "", "groff warns about %s" % page)
    env = quiet_env(MANWIDTH="80", MANPAGER="cat", PAGER="cat", LC_ALL="C.UTF-8")
    r = run(["man", "-l", page], env=env)
    test.assertEqual(r.stderr, "", "man -l %s: %s" % (page, r.stderr))
    # Undo overstriking, should man produce it, and join hyphenated words.
    return re.sub(r".\x08", "", r.stdout)


class Install(unittest.TestCase):
    """meson install --destdir into a temporary directory."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="cumemcap-install-")
        cls.dest = os.path.join(cls.tmp.name, "dest")
        r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--destdir", cls.dest],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise AssertionError("meson install failed:\n" + r.stdout)
        intro = run(["meson", "introspect", BUILD, "--buildoptions"]).stdout
        import json
        opts = {o["name"]: o["value"] for o in json.loads(intro)}
        cls.prefix = opts["prefix"]
        cls.dirs = {k: os.path.join(cls.prefix, opts[k]) for k in
                    ("bindir", "libdir", "libexecdir", "includedir", "mandir", "datadir")}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def at(self, path):
        """PATH (absolute, as installed) under the destdir."""
        return os.path.join(self.dest, path.lstrip("/"))

    def test_slurm_plugin(self):
        """Built (libslurm-dev), the SPANK plugin goes to LIBDIR/slurm-wlm,
        and its default library= is the installed libcumemcap.so."""
        if not os.path.exists(os.path.join(BUILD, "src", "tools", "slurm", "cumemcap-spank.so")):
            self.skipTest("cumemcap-spank.so is not built here (no slurm/spank.h, or -Dslurm=disabled)")
        plugin = self.at(self.dirs["libdir"] + "/slurm-wlm/cumemcap-spank.so")
        self.assertTrue(os.path.isfile(plugin), "not installed: " + plugin)
        # The default it names in its message on a wrong argument.
        default = b"library=PATH (default " + (self.dirs["libdir"] + "/libcumemcap.so").encode() + b")"
        with open(plugin, "rb") as f:
            self.assertTrue(default in f.read(), "the plugin's default library= is not " + default.decode())

    def test_every_file(self):
        d = self.dirs
        for path in [d["bindir"] + "/cumemcap", d["libdir"] + "/libcumemcap.so",
                     d["libexecdir"] + "/cumemcap-config", d["libexecdir"] + "/cumemcap-report",
                     d["libexecdir"] + "/cumemcap-group", d["includedir"] + "/cumemcap.h",
                     d["libdir"] + "/pkgconfig/cumemcap.pc",
                     *[d["mandir"] + "/" + page for page in PAGES],
                     d["datadir"] + "/doc/cumemcap/examples/cumemcap.conf",
                     d["datadir"] + "/doc/cumemcap/examples/cumemcap.env"]:
            self.assertTrue(os.path.isfile(self.at(path)), "not installed: " + path)
        for exe in ("bindir/cumemcap", "libexecdir/cumemcap-config", "libexecdir/cumemcap-report"):
            key, name = exe.split("/")
            self.assertTrue(os.access(self.at(d[key] + "/" + name), os.X_OK), exe + " is not executable")
        completions = [os.path.join(r, f) for r, _, fs in os.walk(self.dest) for f in fs
                       if r.endswith("bash-completion/completions")]
        self.assertEqual([os.path.basename(c) for c in completions], ["cumemcap"])
        with open(completions[0]) as a, open(COMPLETION) as b:
            self.assertEqual(a.read(), b.read())
        # The /etc file only on request (-Dinstall-etc-config=true).
        self.assertFalse(os.path.exists(self.at("/etc/cumemcap.conf")))

    def baked(self):
        with open(self.at(self.dirs["bindir"] + "/cumemcap")) as f:
            text = f.read()
        return dict(re.findall(r'^([A-Z_]+)="\$\{CUMEMCAP_[A-Z_]+:-([^}]*)\}"$', text, re.M))

    def test_launcher_names_the_installed_files(self):
        baked = self.baked()
        self.assertEqual(baked["LIBRARY"], self.dirs["libdir"] + "/libcumemcap.so")
        self.assertEqual(baked["TOOL"], self.dirs["libexecdir"] + "/cumemcap-config")
        self.assertEqual(baked["REPORT"], self.dirs["libexecdir"] + "/cumemcap-report")
        self.assertEqual(baked["GROUP_TOOL"], self.dirs["libexecdir"] + "/cumemcap-group")
        for key, path in baked.items():
            self.assertTrue(os.path.isfile(self.at(path)), "%s: %s is not installed" % (key, path))

    def launcher_env(self, **extra):
        """The installed launcher, its baked paths moved under the destdir."""
        b = self.baked()
        return quiet_env(CUMEMCAP_LIBRARY=self.at(b["LIBRARY"]), CUMEMCAP_TOOL=self.at(b["TOOL"]),
                         CUMEMCAP_REPORT=self.at(b["REPORT"]), CUMEMCAP_GROUP_TOOL=self.at(b["GROUP_TOOL"]),
                         **extra)

    def test_installed_launcher_runs_the_installed_library(self):
        launcher = self.at(self.dirs["bindir"] + "/cumemcap")
        env = self.launcher_env()
        lib = env["CUMEMCAP_LIBRARY"]
        r = run(["sh", launcher, "--version"], env=env)
        self.assertRegex(r.stdout, r"^cumemcap \d+\.\d+\.\d+\n$")
        r = run(["sh", launcher, "--limit", "1GiB", "--", "sh", "-c", 'echo "$LD_PRELOAD"'], env=env)
        self.assertEqual(r.stdout.strip().split(":")[0], lib)
        # The library itself ran: it rejects a wrong limit before the program.
        r = run(["sh", launcher, "--limit", "12XB", "--", "true"], env=env, check=False)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("12XB", r.stderr)
        # The installed tools: --check-config and report.
        conf = self.at(self.dirs["datadir"] + "/doc/cumemcap/examples/cumemcap.conf")
        r = run(["sh", launcher, "--check-config", conf], env=env)
        self.assertIn("valid", r.stdout)
        r = run(["sh", launcher, "report", "--help"], env=env)
        self.assertRegex(r.stdout, r"(?i)^usage:")

    def test_pkg_config(self):
        need(self, "pkg-config")
        pcdir = self.at(self.dirs["libdir"] + "/pkgconfig")
        base = ["pkg-config", "--with-path", pcdir]
        # --with-path alone (pkgconf 1.8 ignores it beside an empty
        # PKG_CONFIG_PATH or a PKG_CONFIG_LIBDIR).
        env = quiet_env()
        for k in ("PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR"):
            env.pop(k, None)
        r = run(base + ["--modversion", "cumemcap"], env=env)
        self.assertEqual(r.stdout.strip(), run(["sh", LAUNCHER, "--version"]).stdout.split()[1])
        cflags = run(base + ["--cflags", "cumemcap"], env=env).stdout.split()
        self.assertIn("-I" + self.dirs["includedir"], cflags)
        self.assertTrue(os.path.isfile(self.at(self.dirs["includedir"] + "/cumemcap.h")))
        # No -lcumemcap: programs look the API up with dlsym (cumemcap.h).
        libs = run(base + ["--libs", "cumemcap"], env=env).stdout
        self.assertNotIn("cumemcap", libs)
        lib = run(base + ["--variable=library", "cumemcap"], env=env).stdout.strip()
        self.assertEqual(lib, self.dirs["libdir"] + "/libcumemcap.so")
        self.assertTrue(os.path.isfile(self.at(lib)))

    def test_installed_man_pages_render(self):
        for page in PAGES:
            text = render(self, self.at(self.dirs["mandir"] + "/" + page))
            self.assertIn("NAME", text)


class ManPages(unittest.TestCase):
    """The generated pages against the texts they come from."""

    def test_cumemcap_1(self):
        text = render(self, os.path.join(MAN_DIR, "cumemcap.1"))
        src = help_text(["sh", LAUNCHER, "--help"])
        options, variables = help_options(src), help_variables(src)
        self.assertIn("--limit", options)
        self.assertIn("CUMEMCAP_LIMIT", variables)
        for word in options + variables:
            self.assertRegex(text, r"(?m)^ {7}(?:-\w, )?%s\b" % re.escape(word), "cumemcap(1) lacks the entry " + word)
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "VARIABLES", "FILES", "SEE ALSO"):
            self.assertRegex(text, r"(?m)^%s$" % section)
        self.assertIn("cumemcap - run a program with its GPU memory capped", text)
        # Every usage line is in the synopsis.
        usage = re.findall(r"^(?:Usage:| ) +(cumemcap .*)$", src, re.M)
        self.assertGreater(len(usage), 1)
        for u in usage:
            self.assertIn(" ".join(u.split()), " ".join(text.split()))

    def test_cumemcap_report_1(self):
        text = render(self, os.path.join(MAN_DIR, "cumemcap-report.1"))
        src = help_text([REPORT, "--help"])
        options = help_options(src)
        self.assertIn("--plot", options)
        for word in options:
            self.assertRegex(text, r"(?m)^ {7}(?:-\w, )?%s\b" % re.escape(word), "cumemcap-report(1) lacks " + word)

    def test_cumemcap_group_1_and_top_1(self):
        for page, cmd, want in (("cumemcap-group.1", "group", ("--limit", "--gpu", "--dir", "--json")),
                                ("cumemcap-top.1", "top", ("--once", "--interval", "--debug", "--json"))):
            text = render(self, os.path.join(MAN_DIR, page))
            options = help_options(help_text([GROUP_TOOL, cmd, "--help"]))
            for word in want:
                self.assertIn(word, options, "cumemcap %s --help lacks %s" % (cmd, word))
            for word in options:
                self.assertRegex(text, r"(?m)^ {7}(?:-\w, )?%s\b" % re.escape(word), "%s lacks %s" % (page, word))
            for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "SEE ALSO"):
                self.assertRegex(text, r"(?m)^%s$" % section, "%s lacks %s" % (page, section))
            self.assertIn("cumemcap " + cmd, text.split("\nSYNOPSIS\n", 1)[1].split("\nDESCRIPTION\n", 1)[0])

    def test_pages_are_written_for_users(self):
        # How a page is made is for the build, not for its readers.
        for page in PAGES:
            text = render(self, os.path.join(MAN_DIR, os.path.basename(page)))
            for word in ("Generated", "settings-table", "test suite", "src/"):
                self.assertNotIn(word, text, "%s tells its reader how it is made (%r)" % (page, word))

    def test_cumemcap_conf_5(self):
        text = render(self, os.path.join(MAN_DIR, "cumemcap.conf.5"))
        with open(os.path.join(SRC, "conf", "cumemcap.conf")) as f:
            conf = f.read()
        keys = sorted(set(re.findall(r"^(?:# ?)?([a-z][a-z0-9_]*) *= *\S", conf, re.M)))
        self.assertIn("limit", keys)
        keys_section = text.split("\nKEYS\n", 1)[1].split("\nEXAMPLES\n", 1)[0]
        for key in keys:
            self.assertRegex(keys_section, r"(?m)^ {7}%s\b" % key, "cumemcap.conf(5) lacks the key " + key)
        sections = [s.lstrip("#") for s in re.findall(r"^#?\[.*\]$", conf, re.M)]
        self.assertTrue(sections)
        for s in sections:
            self.assertIn(s, text.split("\nEXAMPLES\n", 1)[1])


class Mkman(unittest.TestCase):
    """mkman on --help texts of the launcher's shapes."""

    HELP = """\
Usage: prog [OPTIONS] -- PROGRAM
       prog report LOG...

Runs PROGRAM.
.dotted line, and a backslash \\ here.

Options (each sets a variable):
  --limit SIZE            the limit.
  --group-limit SIZE|LIST the group's
                          budget.
  --on-limit fail|wait:SECONDS
                          what happens.

Variables:
  PROG_SHORT              short.
  PROG_A_VERY_LONG_NAME_XY on (default): text
                          continued.

Exit status: 0 ran; 2 usage.
"""

    def page(self, text, name="prog"):
        with tempfile.TemporaryDirectory(prefix="cumemcap-mkman-") as tmp:
            src = os.path.join(tmp, "help.txt")
            with open(src, "w") as f:
                f.write(text)
            out = os.path.join(tmp, name + ".1")
            run([sys.executable, MKMAN, "help", "--name", name, "--section", "1", "--version", "9.9",
                 "--summary", "a test", "--output", out, "--", "cat", src])
            with open(out) as f:
                roff = f.read()
            return roff, render(self, out)

    def test_shapes(self):
        roff, text = self.page(self.HELP)
        self.assertRegex(text, r"(?m)^OPTIONS$")
        self.assertRegex(text, r"(?m)^ {7}Each sets a variable\.$")
        self.assertRegex(text, r"(?m)^VARIABLES$")
        self.assertRegex(text, r"(?m)^EXIT STATUS$")
        self.assertRegex(text, r"(?m)^ {7}0 ran; 2 usage\.$")
        # An entry's text after two spaces, at the text column after one
        # space, or on the next lines.
        self.assertRegex(text, r"(?m)^ {7}--group-limit SIZE\|LIST\n {14}the group's budget\.$")
        self.assertRegex(text, r"(?m)^ {7}--on-limit fail\|wait:SECONDS\n {14}what happens\.$")
        self.assertRegex(text, r"(?m)^ {7}PROG_A_VERY_LONG_NAME_XY\n {14}on \(default\): text continued\.$")
        # A leading dot is text, not a request; a backslash is printed.
        self.assertIn(".dotted line, and a backslash \\ here.", " ".join(text.split()))
        self.assertIn("\\&.dotted", roff)
        self.assertIn("prog report LOG...", text)

    def test_entries_without_a_heading_are_options(self):
        _, text = self.page("usage: prog [--x] LOG...\n\nText.\n\n  --x       an x.\n  -h, --help  this.\n")
        # (A tag shorter than the indent shares the text's line.)
        self.assertRegex(text, r"(?m)^OPTIONS\n {7}--x(?:\n {14}| +)an x\.$")
        self.assertRegex(text, r"(?m)^ {7}-h, --help\n {14}this\.$")

    def test_no_usage_is_an_error(self):
        with tempfile.TemporaryDirectory(prefix="cumemcap-mkman-") as tmp:
            r = run([sys.executable, MKMAN, "help", "--name", "p", "--section", "1", "--version", "1",
                     "--summary", "s", "--output", os.path.join(tmp, "p.1"), "--", "echo", "hello"],
                    check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("does not open with \"Usage:\"", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "p.1")))


class Completion(unittest.TestCase):
    """The generated completion in bash, with bash-completion loaded."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="cumemcap-completion-")
        for name in ("plot-here.svg", "rules.conf"):
            open(os.path.join(cls.tmp.name, name), "w").close()
        os.mkdir(os.path.join(cls.tmp.name, "logdir"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def complete(self, line):
        """COMPREPLY for LINE (the word being completed is its last; a line
        ending in a space completes an empty word)."""
        if not os.path.isfile(BASH_COMPLETION):
            missing(self, "bash-completion (" + BASH_COMPLETION + ")")
        words = line.split()
        if line.endswith(" "):
            words.append("")
        script = (
            'source %s || exit 3\n'
            'compopt() { :; }\n'         # outside a real completion, compopt refuses
            'source "$1" || exit 4\n'
            'shift\n'
            'COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n'
            'COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}\n'
            '_cumemcap cumemcap "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
            'printf "%%s\\n" "${COMPREPLY[@]}"\n' % BASH_COMPLETION)
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash", COMPLETION] + words,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.tmp.name,
                           env=dict(os.environ, PATH="/usr/bin:/bin"))
        self.assertEqual(r.returncode, 0, r.stderr)
        return sorted(w for w in r.stdout.split("\n") if w)

    def test_loads_and_registers(self):
        if not os.path.isfile(BASH_COMPLETION):
            missing(self, "bash-completion (" + BASH_COMPLETION + ")")
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                            'source %s; source "$1" && complete -p cumemcap' % BASH_COMPLETION, "bash", COMPLETION],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.stdout.strip(), "complete -F _cumemcap cumemcap", r.stderr)

    def test_options(self):
        self.assertEqual(self.complete("cumemcap --li"), ["--limit"])
        every = self.complete("cumemcap --")
        for opt in help_options(help_text(["sh", LAUNCHER, "--help"])):
            self.assertIn(opt, every)

    def test_argument_values(self):
        self.assertEqual(self.complete("cumemcap --on-limit "), ["fail", "wait:"])
        self.assertEqual(self.complete("cumemcap --on-limit w"), ["wait:"])
        self.assertEqual(self.complete("cumemcap --config ru"), ["rules.conf"])
        self.assertEqual(self.complete("cumemcap --log lo"), ["logdir"])
        # A SIZE is free text: nothing offered, not the program's names.
        self.assertEqual(self.complete("cumemcap --limit "), [])

    def test_subcommands(self):
        self.assertEqual(self.complete("cumemcap rep"), ["report"])
        self.assertEqual(self.complete("cumemcap group "), ["list", "set", "show"])
        self.assertEqual(self.complete("cumemcap report --plot pl"), ["plot-here.svg"])
        self.assertIn("--plot", self.complete("cumemcap report --"))
        self.assertEqual(self.complete("cumemcap group set g --limit "), ["none"])
        self.assertEqual(self.complete("cumemcap top --on"), ["--once"])

    def test_program(self):
        # After --, and after the first word that is not an option: the
        # program's name, then its own words (not the launcher's options).
        self.assertIn("true", self.complete("cumemcap --limit 8GiB -- tru"))
        self.assertIn("true", self.complete("cumemcap --limit 8GiB tru"))
        self.assertNotIn("--limit", self.complete("cumemcap --limit 8GiB -- sh --li"))
        self.assertNotIn("--limit", self.complete("cumemcap sh --li"))


class EtcConfig(unittest.TestCase):
    """The configuration file for /etc: the example, every line commented."""

    def print_config(self, config):
        env = quiet_env(CUMEMCAP_CONFIG=config, LD_LIBRARY_PATH=FAKE_DIR, FAKECUDA_DEVICES="4GiB,2GiB")
        for k in list(env):
            if k.startswith("CUMEMCAP_") and k not in ("CUMEMCAP_CONFIG", "CUMEMCAP_GROUP_DIR"):
                del env[k]
        lines = run([CONFIG_TOOL, "--print-config", "--", "python", "train.py"], env=env).stdout.split("\n")
        return [line for line in lines if not line.startswith("configuration:")]

    def test_no_line_in_effect(self):
        with open(ETC_CONF) as f:
            text = f.read()
        active = [line for line in text.split("\n") if line.strip() and not line.lstrip().startswith("#")]
        self.assertEqual(active, [])

    def test_changes_nothing(self):
        r = run([CONFIG_TOOL, "--check-config", ETC_CONF])
        self.assertIn("valid", r.stdout)
        self.assertEqual(self.print_config(ETC_CONF), self.print_config(""))
        # The comparison can tell: the example's keys and sections in effect differ.
        with open(ETC_CONF) as f:
            text = f.read()
        in_effect = os.path.join(self.tmp, "in-effect.conf")
        with open(in_effect, "w") as f:
            f.write(re.sub(r"(?m)^#(?=[a-z_]+ = |\[)", "", text))
        self.assertNotEqual(self.print_config(in_effect), self.print_config(""))

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cumemcap-etc-")
        self.addCleanup(shutil.rmtree, self.tmp, True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
