#!/usr/bin/env python3
"""check_pipes.py ROOT | --self-test: no shell script with `pipefail` pipes
into a reader that may stop early (`grep -q`, `head`).

Under `set -o pipefail`, `printf '%s\\n' "$x" | grep -q WORD` fails when grep
finds WORD and exits before printf has written everything: printf dies of
SIGPIPE (status 141) and the pipeline's status is 141, not grep's 0. Whether
that happens depends on the input's size and on scheduling, so the check
passes alone and fails on a loaded machine (scripts/build-deb did: "the
launcher lacks the line TOOL=..." in a full test run). Feed such readers
with a here-string (`grep -q WORD <<<"$x"`) or let them read everything.

Scripts are the tracked files whose first line names bash or sh, under
scripts/, deploy/, tests/ and .ci/."""
import os
import re
import subprocess
import sys
import tempfile

EARLY = re.compile(r"\|\s*(grep\s+(-[a-zA-Z]*q[a-zA-Z]*|--quiet|--silent)\b|head\b)")


def scripts(root):
    for top in ("scripts", "deploy", "tests", ".ci"):
        for d, _, names in os.walk(os.path.join(root, top)):
            parts = os.path.relpath(d, root).split(os.sep)
            if any(x.startswith("build") or x == "__pycache__" for x in parts):
                continue
            for n in names:
                p = os.path.join(d, n)
                try:
                    with open(p, encoding="utf-8") as f:
                        first = f.readline()
                        rest = f.read()
                except (UnicodeDecodeError, OSError):
                    continue
                if first.startswith("#!") and re.search(r"\b(bash|sh)\b", first):
                    yield p, first + rest


def check(root):
    bad = []
    for path, text in scripts(root):
        if "pipefail" not in text:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
            if EARLY.search(code):
                bad.append(f"{os.path.relpath(path, root)}:{i}: a pipe into a reader that may stop early under "
                           f"pipefail (SIGPIPE makes the pipeline fail at random): {line.strip()}")
    return bad


def self_test():
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "scripts"))
        cases = {
            "bad-grep": ("#!/usr/bin/env bash\nset -euo pipefail\nprintf '%s\\n' \"$x\" | grep -qxF y\n", 1),
            "bad-head": ("#!/bin/bash\nset -o pipefail\nseq 1 9 | head -1\n", 1),
            "good-herestring": ("#!/usr/bin/env bash\nset -euo pipefail\ngrep -qxF y <<<\"$x\"\n", 0),
            "no-pipefail": ("#!/bin/sh\nset -eu\nprintf '%s\\n' \"$x\" | grep -q y\n", 0),
            "comment": ("#!/usr/bin/env bash\nset -euo pipefail\n# not: a | grep -q b\n", 0),
        }
        for name, (text, _) in cases.items():
            with open(os.path.join(t, "scripts", name), "w") as f:
                f.write(text)
        found = check(t)
        for name, (_, want) in cases.items():
            got = sum(1 for b in found if b.startswith(f"scripts/{name}:"))
            if got != want:
                print(f"self-test: {name}: {got} findings, want {want}: {found}")
                return 1
        # The mechanism itself: a large input makes the early reader's
        # pipeline fail under pipefail, the here-string never does.
        r = subprocess.run(["bash", "-c", "set -o pipefail; x=$(seq 1 200000); printf '%s\\n' \"$x\" | grep -qxF 7"])
        h = subprocess.run(["bash", "-c", "set -o pipefail; x=$(seq 1 200000); grep -qxF 7 <<<\"$x\""])
        if r.returncode == 0 or h.returncode != 0:
            print(f"self-test: pipe status {r.returncode} (want non-zero), here-string {h.returncode} (want 0)")
            return 1
    print("check_pipes: self-test passed")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    bad = check(sys.argv[1])
    for b in bad:
        print(b)
    if not bad:
        print("check_pipes: no pipe into an early reader under pipefail")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
