#!/usr/bin/env python3
"""links.py SRC: every relative link in README.md and docs/*.md leads to a
file of the tree, and every #anchor to a heading (as GitHub names it) or an
<a id> of that file; README.md has at most 300 lines. Exit 1, one line per
broken link (FILE:LINE: ...)."""
import glob
import os
import re
import sys

SRC = os.path.abspath(sys.argv[1])
README_MAX_LINES = 300
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, blanks to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    names, seen = set(), {}
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            m = re.match(r"#{1,6} (.*)", line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                names.add(base if n == 0 else "%s-%d" % (base, n))
            names.update(re.findall(r'<a id="([^"]+)"', line))
    return names


problems = []
files = [os.path.join(SRC, "README.md")] + sorted(glob.glob(os.path.join(SRC, "docs", "*.md")))
for path in files:
    rel = os.path.relpath(path, SRC)
    in_code = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                problems.append("%s:%d: link to %s: no such file" % (rel, number, target))
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append("%s:%d: link to %s: %s has no heading with that anchor"
                                % (rel, number, target, os.path.relpath(dest, SRC)))
    if rel == "README.md" and len(lines) - 1 > README_MAX_LINES:
        problems.append("README.md: %d lines; at most %d (the rest belongs in docs/)"
                        % (len(lines) - 1, README_MAX_LINES))
for p in problems:
    print(p)
print("%d files checked, %d problems" % (len(files), len(problems)))
sys.exit(1 if problems else 0)
