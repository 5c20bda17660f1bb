#!/usr/bin/env python3
"""check_layers.py SRC: the rules of docs/design.md#layers, on src/.

Each folder of src/ is a layer; LAYERS lists them from the bottom up. The
check fails, naming the file and line, when
  - a file includes a header of a higher layer ("a call back up": a lower
    layer reaches a higher one only through a registration, entry/setup.c);
  - the modules' #include graph has a cycle (a module is a file name
    without its extension: arena.c and arena.h are one);
  - the .c files of one layer call each other in a cycle: x.c names a
    function or variable that y.c defines (not static), itself or through
    a header's static inline function, and y.c, by way of others perhaps,
    names one of x.c's. The include graph alone misses a
    cycle that goes through one header declaring the functions of several
    files (every file of src/log/ included such a header and all called
    each other). A struct, enum or union tag names no function or
    variable, whatever its spelling;
  - a file outside driver/ names a real driver entry point (real_*), except
    that entry/ may call the real entry points the shim hooks (HOOK lines of
    driver/hooks.def: a hook forwards its own call, or undoes it with its
    twin's cuMemFree); every other call to the driver, and every call of an
    entry point the shim does not hook (DRIVER lines), is a verb of
    driver/driver.h;
  - a .c file has more than MAX_LINES lines, or a file does not open with
    a comment that says what it owns and how it is thread-safe (the words
    "thread", "lock" or "signal" somewhere in it, or "see X.h" pointing to
    a header that says so);
  - a folder of src/ is not in LAYERS.
With --self-test it plants each kind of violation in a copy of a small
tree and checks that each is found.
"""
import os
import re
import sys
import tempfile

LAYERS = ["platform", "config", "driver", "group", "state", "log", "arena", "account", "entry", "tools"]
MAX_LINES = 800
SOURCE = re.compile(r"\.(c|h|S|def)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
REAL = re.compile(r"\breal_(cu\w+)")
# A hook's definition: the exported function a real_ call may forward.
HOOKED = re.compile(r"^HOOK\((\w+),", re.M)
SAFETY = re.compile(r"thread|lock|signal", re.I)
SEE = re.compile(r"\bsee\s+([\w./-]+\.h)\b")
TAG = re.compile(r"\b(?:struct|enum|union)\s+\w+")


def layer_of(rel):
    return rel.split("/", 1)[0] if "/" in rel else None


def module_of(rel):
    base = rel.rsplit(".", 1)[0]
    return base


def resolve(files, rel, name):
    """The file (relative to src/) that `name`, as written in src/`rel`, names:
    from src/ ("state/ledger.h") or from rel's folder ("ledger.h"); None
    for a header outside src/ (config.h, cuda.h)."""
    for cand in (name, os.path.normpath(os.path.join(os.path.dirname(rel), name))):
        if cand in files:
            return cand
    return None


def code_of(text):
    """text without its comments and string literals (line numbers kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


# A definition at file scope, not static: a function (its body's brace
# opening a line of its own, or ending the line) or a variable.
DEF_FUNCTION = re.compile(r"^(?!static\b)(?![#\s/{}])[^;{}()\n]*?\b(\w+)\s*"
                          r"\([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*\)\s*\{", re.M)
# A header's static inline function and its body, which closes at a brace
# that opens a line.
INLINE = re.compile(r"^static\s+inline\b[^;{}()]*?\b(\w+)\s*\([^;{}]*?\)\s*\{(.*?)^\}", re.M | re.S)
DEF_VARIABLE = re.compile(r"^(?!static\b|extern\b|typedef\b|struct\s+\w+\s*\{|enum\b|union\b)(?![#\s/{}])"
                          r"[\w\s*]*?\b(\w+)\s*(\[[^\]]*\])*\s*(=[^;]*)?;", re.M)


def call_cycles(files):
    """Cycles among the .c files of each folder, by the names they use of
    each other; one problem per folder."""
    code = {rel: code_of(t) for rel, t in files.items() if rel.endswith(".c")}
    owners = {}
    for rel, text in code.items():
        for m in list(DEF_FUNCTION.finditer(text)) + list(DEF_VARIABLE.finditer(text)):
            owners.setdefault(m.group(1), set()).add(rel)
    # A name defined by two files (each program's own main) names neither.
    owner = {name: rels.pop() for name, rels in owners.items() if len(rels) == 1}
    # A header's static inline function counts as its caller's: the names
    # its body uses are the caller's uses.
    inline = {}
    for rel, t in files.items():
        if rel.endswith(".h"):
            for m in INLINE.finditer(code_of(t)):
                inline[m.group(1)] = set(re.findall(r"\b\w+\b", TAG.sub("", m.group(2))))

    def names(line, seen):
        for name in re.findall(r"\b\w+\b", TAG.sub("", line)):
            yield name
            if name in inline and name not in seen:
                seen.add(name)
                yield from names(" ".join(inline[name]), seen)

    uses = {}
    for rel, text in code.items():
        folder = os.path.dirname(rel)
        uses[rel] = {}
        for no, line in enumerate(text.splitlines(), 1):
            for name in names(line, set()):
                o = owner.get(name)
                if o and o != rel and os.path.dirname(o) == folder and o not in uses[rel]:
                    uses[rel][o] = (name, no)
    cyclic, problems, state, stack = {}, [], {}, []

    def visit(f):
        state[f] = 1
        stack.append(f)
        for t in sorted(uses[f]):
            if state.get(t) == 1:
                cyc = stack[stack.index(t):] + [t]
                cyclic.setdefault(os.path.dirname(f), cyc)
            elif not state.get(t):
                visit(t)
        stack.pop()
        state[f] = 2

    for f in sorted(uses):
        if not state.get(f):
            visit(f)
    for _, cyc in sorted(cyclic.items()):
        steps = [f"{a} ({uses[a][b][0]}, line {uses[a][b][1]})" for a, b in zip(cyc, cyc[1:])]
        problems.append(f"src/{cyc[0]}: call cycle: {' -> '.join(steps)} -> {cyc[-1]}")
    return problems


def opening_comment(text):
    m = re.match(r"\s*/\*(.*?)\*/", text, re.S)
    return m.group(1) if m else None


def check(src):
    problems = []
    files = {}
    for root, dirs, names in os.walk(src):
        dirs.sort()
        for n in sorted(names):
            if SOURCE.search(n):
                rel = os.path.relpath(os.path.join(root, n), src)
                with open(os.path.join(root, n), encoding="utf-8") as f:
                    files[rel] = f.read()
    for d in sorted(os.listdir(src)):
        if os.path.isdir(os.path.join(src, d)) and d not in LAYERS:
            problems.append(f"src/{d}/: a folder that is not a layer (LAYERS in {sys.argv[0]})")
    hooked = set(HOOKED.findall(files.get("driver/hooks.def", "")))
    graph = {}
    for rel, text in files.items():
        layer = layer_of(rel)
        if layer is None:
            problems.append(f"src/{rel}: outside every layer folder")
            continue
        rank = LAYERS.index(layer) if layer in LAYERS else -1
        mod = module_of(rel)
        graph.setdefault(mod, set())
        for no, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if m:
                target = resolve(files, rel, m.group(1))
                if target:
                    tl = layer_of(target)
                    if tl in LAYERS and rank >= 0 and LAYERS.index(tl) > rank:
                        problems.append(f"src/{rel}:{no}: {layer} includes {target}, of the higher layer {tl} (a call back up)")
                    if module_of(target) != mod:
                        graph[mod].add((module_of(target), f"src/{rel}:{no}"))
            if layer == "driver":
                continue
            for r in REAL.finditer(line):
                if line.lstrip().startswith(("*", "/*", "//")):
                    continue
                if layer == "entry" and r.group(1) in hooked:
                    continue
                why = "a hooked entry point outside entry/" if r.group(1) in hooked else "not hooked"
                problems.append(f"src/{rel}:{no}: real_{r.group(1)} called outside driver/ "
                                f"({why}: call a verb of driver/driver.h)")
        if rel.endswith(".c") and text.count("\n") > MAX_LINES:
            problems.append(f"src/{rel}: {text.count(chr(10))} lines, more than {MAX_LINES}")
        c = opening_comment(text)
        if c is None:
            problems.append(f"src/{rel}:1: does not open with a comment saying what it owns")
        elif not SAFETY.search(c):
            see = SEE.search(c)
            header = see and resolve(files, rel, see.group(1))
            other = opening_comment(files[header]) if header else None
            if not other or not SAFETY.search(other):
                problems.append(f"src/{rel}:1: its opening comment does not say how it is thread-safe")
    # cycles: depth-first search over modules
    state = {}
    stack = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t, where in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cyc = stack[stack.index(t):] + [t]
                problems.append(f"{where}: include cycle: {' -> '.join(cyc)}")
            elif t in graph and not state.get(t):
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if not state.get(m):
            visit(m)
    return problems + call_cycles(files)


def self_test():
    good = {
        "platform/a.h": "/* a: nothing shared, so thread-safe. */\n#pragma once\n",
        "state/b.h": "/* b: the books, under one lock. */\n#include \"platform/a.h\"\n",
        "state/b.c": "/* b: see b.h. */\n#include \"state/b.h\"\nint b_tag(void)\n{\n\treturn c_fn(0);\n}\n",
        # A tag spelt as b.c's function: no call back, no cycle.
        "state/c.c": "/* c: see b.h. */\nint c_fn(struct b_tag *x)\n{\n\treturn x != 0;\n}\n",
        "entry/h.c": ("/* h: hooks; thread-safe as b is. */\n#include \"state/b.h\"\n"
                      "CUMEMCAP_EXPORT CUresult CUDAAPI cuFoo(int x)\n{\n\treturn real_cuFoo(x);\n}\n"),
        "driver/hooks.def": "/* the list; no state, so thread-safe. */\nHOOK(cuFoo, cuFoo, 2000, LEGACY)\n"
                            "DRIVER(cuBar, PFN_cuBar_v2000)\n",
        "driver/d.c": "/* d: the driver; its table is written once under a lock. */\nint f(void) { return real_cuBar(); }\n",
    }
    bad = {
        "a call back up": {"platform/a.h": "/* a: lock-free. */\n#include \"state/b.h\"\n"},
        "include cycle": {"state/c.h": "/* c: locked. */\n#include \"state/b.h\"\n",
                          "state/b.h": "/* b: locked. */\n#include \"state/c.h\"\n"},
        "call cycle": {"state/all.h": "/* all: locked. */\nint b_fn(void);\nint c_fn(void);\n",
                       "state/b.c": "/* b: see b.h. */\n#include \"state/all.h\"\nint b_fn(void)\n{\n\treturn c_fn();\n}\n",
                       "state/c.c": "/* c: locked. */\n#include \"state/all.h\"\nint c_fn(void)\n{\n\treturn b_fn();\n}\n"},
        "state/c.c (b_now": {
            "state/b.h": "/* b: locked. */\nint b_now(void);\nstatic inline int b_fn(void)\n{\n\treturn b_now();\n}\n",
            "state/b.c": "/* b: see b.h. */\n#include \"state/b.h\"\nint b_now(void)\n{\n\treturn c_fn();\n}\n",
            "state/c.c": "/* c: locked. */\n#include \"state/b.h\"\nint c_fn(void)\n{\n\treturn b_fn();\n}\n"},
        "called outside driver": {"state/b.c": "/* b: see b.h. */\nint g(void) { return real_cuBar(); }\n"},
        "(not hooked": {
            "entry/h.c": "/* h: threads. */\nCUMEMCAP_EXPORT CUresult CUDAAPI cuBaz(int x)\n{\n\treturn real_cuBar(x);\n}\n"},
        "(a hooked entry point outside entry/": {
            "state/b.c": "/* b: see b.h. */\nint g(void) { return real_cuFoo(1); }\n"},
        "more than": {"state/b.c": "/* b: see b.h. */\n" + "\n" * (MAX_LINES + 1)},
        "does not open with a comment": {"state/b.c": "#include \"state/b.h\"\n"},
        "does not say how it is thread-safe": {"state/b.h": "/* b: the books. */\n"},
        "not a layer": {"extra/x.h": "/* x: locked. */\n"},
    }
    failed = 0
    for what, change in [("", {})] + list(bad.items()):
        with tempfile.TemporaryDirectory() as tmp:
            for rel, text in {**good, **change}.items():
                os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
                with open(os.path.join(tmp, rel), "w") as f:
                    f.write(text)
            problems = check(tmp)
            if not what and problems:
                print("self-test: the clean tree fails:", *problems, sep="\n  ")
                failed += 1
            elif what and not any(what in p for p in problems):
                print(f"self-test: '{what}' not found; found:", *problems, sep="\n  ")
                failed += 1
    print("self-test:", "failed" if failed else f"each of {len(bad)} planted violations found")
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    problems = check(sys.argv[1])
    for p in problems:
        print(p)
    print(f"layers: {len(problems)} problem(s)" if problems else "layers: the include graph follows docs/design.md#layers")
    sys.exit(1 if problems else 0)
