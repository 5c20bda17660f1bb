#!/usr/bin/env python3
"""generated.py FILE -- COMMAND [ARGS...]: exit 1, naming FILE and the
command that remakes it, when FILE (from the source root) is not exactly
what COMMAND prints; 0 when it is."""
import difflib
import subprocess
import sys

args = sys.argv[1:]
if len(args) < 3 or args[1] != "--":
    sys.exit("usage: generated.py FILE -- COMMAND [ARGS...]")
path, command = args[0], args[2:]
made = subprocess.run(command, stdout=subprocess.PIPE, check=True).stdout.decode()
with open(path, encoding="utf-8") as f:
    committed = f.read()
if made != committed:
    sys.stdout.writelines(difflib.unified_diff(committed.splitlines(True), made.splitlines(True),
                                               path, "what the table makes now"))
    print("%s is stale; remake it from the build directory: %s > %s" % (path, " ".join(command), path))
    sys.exit(1)
print("%s matches %s" % (path, " ".join(command)))
