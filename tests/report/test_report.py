#!/usr/bin/env python3
"""End-to-end tests of cumemcap report (src/tools/report).

Runs cumemcap-report, and the launcher's `cumemcap report` form, on the
hand-written logs in tests/report/fixtures and on logs made here, and
checks what it prints against figures this script works out itself from
the same logs (an independent reading of schema v1 below, not pasted
output): every table cell, every process line, every warning with its line
number; the SVG's structure, each series' points, the limit line and the
refusal marks, mapped back through the axis ticks; and every error path's
message and exit status.

Usage: test_report.py REPORT_BIN LAUNCHER FIXTURE_DIR
"""
import datetime
import json
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

REPORT, LAUNCHER, FIXTURES = [os.path.abspath(a) for a in sys.argv[1:4]]
del sys.argv[1:4]
HAVE_CAIRO = "(this build has cairo)" in subprocess.run([REPORT, "--help"], capture_output=True,
                                                       text=True).stdout

U64 = 2**64 - 1
MAX_LINE = 1024 * 1024
MAX_WARNINGS = 10
SVG = "{http://www.w3.org/2000/svg}"
UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
COLUMNS = ["PID", "PROGRAM", "GPU", "LIMIT", "PEAK LIVE", "PEAK RESERVED", "PEAK FOOTPRINT",
           "PEAK DRIVER", "CONTEXT", "REFUSALS", "DRIVER OOMS", "AVOIDED"]  # --wide
COMPACT = ["PID", "PROGRAM", "GPU", "LIMIT", "LIVE", "RESERVED", "FOOTPRINT", "DRIVER", "CONTEXT",
           "REFUSED", "OOMS"]
SERIES = {"live": "live", "pooled": "pooled", "reserved": "reserved", "footprint": "footprint",
          "driver": "driver_used"}
EVENTS = ("segment", "refusal", "driver_oom", "context", "overhead")


def with_groups(columns, wide):
    """The table's columns when a process shown was in a group: GROUP and
    BUDGET after LIMIT."""
    i = columns.index("LIMIT") + 1
    return columns[:i] + ["GROUP", "GROUP BUDGET" if wide else "BUDGET"] + columns[i:]


def fixture(name):
    return os.path.join(FIXTURES, name)


def run(args, launcher=False, env_add=None):
    env = {k: v for k, v in os.environ.items() if k == "CUMEMCAP_GROUP_DIR" or not k.startswith("CUMEMCAP_")}
    env.update(env_add or {})
    argv = [LAUNCHER, "report"] + args if launcher else [REPORT] + args
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


# ---- the schema, read independently ------------------------------------------------

class Gpu:
    def __init__(self, ordinal):
        self.ordinal = ordinal
        self.uuid = None
        self.index = None
        self.limit = ("unknown", None)
        self.peak = {k: None for k in SERIES}
        self.ctx = None
        self.overhead = self.source = None  # the learned overhead and its last source
        self.exit_reserved = self.exit_driver = None
        self.refusal_events = self.oom_events = 0
        self.exit_refusals = self.exit_ooms = self.avoided = self.allocs = None
        self.events = False
        self.series = {k: [] for k in SERIES}
        self.marks = []  # (t, is_driver_oom)
        self.group_limit = ("unknown", None)
        self.peak_group_used = self.peak_group_held = None

    def used(self):
        figures = list(self.peak.values()) + [self.allocs, self.exit_refusals, self.exit_ooms]
        return self.events or any(f for f in figures)


class Proc:
    def __init__(self, path, seq, pid, t):
        self.file, self.seq, self.pid = path, seq, pid
        self.has_start, self.t_start = False, None
        self.t_first = self.t_last = t
        self.records = 0
        self.program = self.host = None
        self.group = None
        self.argv = None
        self.has_exit, self.reason, self.signal = False, None, None
        self.running = self.here = False
        self.gpus = {}

    def gpu(self, ordinal):
        return self.gpus.setdefault(ordinal, Gpu(ordinal))

    def in_group(self):
        return self.group is not None or any(g.group_limit[0] == "set" for g in self.gpus.values())

    def shown(self):
        gpus = [self.gpus[k] for k in sorted(self.gpus)]
        used = [g for g in gpus if g.used()]
        return used if used else gpus


def is_u64(v):
    return type(v) is int and 0 <= v <= U64


def is_num(v):
    return type(v) in (int, float)


def fmax(a, b):
    return b if a is None or (b is not None and b > a) else a


class Record:
    """Why a line is skipped (or None), and which fields were wrong."""

    def __init__(self, why=None, fields=()):
        self.why, self.fields = why, list(fields)


def check_fields(rec):
    """The fields of a known record type that have the wrong type."""
    bad = []

    def byte(obj, key, where=""):
        if obj.get(key) is not None and not is_u64(obj[key]):
            bad.append(where + key)

    def string(obj, key, where=""):
        if obj.get(key) is not None and type(obj[key]) is not str:
            bad.append(where + key)

    def ordinal(obj, where=""):
        if not (is_u64(obj.get("gpu")) and obj["gpu"] <= 2**31 - 1):
            bad.append(where + "gpu")
        string(obj, "uuid", where)  # schema v2 names the GPU on every per-GPU object
        i = obj.get("index")
        if i is not None and not (is_u64(i) and i <= 2**31 - 1):
            bad.append(where + "index")

    def gpu_list():
        g = rec.get("gpus")
        if g is None:
            return []
        if type(g) is not list or any(type(e) is not dict for e in g):
            bad.append("gpus")
            return []
        return g

    kind = rec["type"]
    if kind == "start":
        for k in ("program", "host", "cumemcap"):
            string(rec, k)
        u = rec.get("uid")
        if u is not None and not (is_u64(u) and u <= 2**32 - 1):
            bad.append("uid")
        a = rec.get("argv")
        if a is not None and (type(a) is not list or any(type(x) is not str for x in a)):
            bad.append("argv")
        grp = rec.get("group")
        if grp is not None and type(grp) is not dict:
            bad.append("group")
        elif grp is not None:
            string(grp, "name", "group.")
        for i, e in enumerate(gpu_list()):
            w = "gpus[%d]." % i
            ordinal(e, w)
            string(e, "pci", w)
            byte(e, "capacity", w)
            byte(e, "limit", w)
    elif kind in EVENTS:
        ordinal(rec)
        for k in ("live", "pooled", "reserved", "footprint", "limit", "group_held"):
            byte(rec, k)
        if kind == "overhead":
            string(rec, "source")
        elif kind != "context":
            byte(rec, "bytes" if kind == "segment" else "requested")
            string(rec, "op" if kind == "segment" else "door")
    elif kind == "sample":
        for i, e in enumerate(gpu_list()):
            w = "gpus[%d]." % i
            ordinal(e, w)
            for k in ("live", "pooled", "reserved", "footprint", "driver_used",
                      "context_overhead", "overhead", "group_limit", "group_used", "group_held"):
                byte(e, k, w)
            string(e, "overhead_source", w)
    elif kind == "exit":
        string(rec, "reason")
        s = rec.get("signal")
        if s is not None and not (is_u64(s) and s <= 2**31 - 1):
            bad.append("signal")
        for i, e in enumerate(gpu_list()):
            w = "gpus[%d]." % i
            ordinal(e, w)
            for k in ("allocs", "frees", "refusals", "driver_oom", "avoided",
                      "segments_taken", "segments_released", "limit", "peak_live",
                      "peak_pooled", "peak_reserved", "peak_footprint", "peak_driver_used",
                      "largest_request", "overhead", "group_limit", "group_held"):
                byte(e, k, w)
            string(e, "overhead_source", w)
    elif kind == "group_change":
        string(rec, "group")
        byte(rec, "old_limit")
        byte(rec, "new_limit")
        if rec.get("gpu") is not None:
            ordinal(rec)
    return bad


def no_constants(name):
    raise ValueError(name)


def classify(raw):
    """Record for one line (bytes, without its newline)."""
    if len(raw) > MAX_LINE:
        return Record("toolong"), None
    if raw.strip(b" \t\r") == b"":
        return Record("blank"), None
    try:
        rec = json.loads(raw.decode("utf-8", "replace"), parse_constant=no_constants)
    except ValueError:
        return Record("notjson"), None
    if type(rec) is not dict:
        return Record("notjson"), None
    v, kind, t, pid = rec.get("v"), rec.get("type"), rec.get("t"), rec.get("pid")
    if not (is_num(t) and math.isfinite(t)):
        t = rfc3339(rec.get("time"))
    if not (is_num(v) and type(kind) is str and t is not None
            and is_u64(pid) and pid <= 2**31 - 1):
        return Record("notrecord"), None
    if not (type(v) is int and v in (1, 2)):
        return Record("version"), None
    if kind not in ("start", "sample", "exit", "group_change") + EVENTS:
        return Record("unknown"), None
    bad = check_fields(rec)
    if bad:
        return Record("badfield", bad), None
    rec["t"] = t
    return Record(), rec


def rfc3339(text):
    """Unix seconds of an RFC 3339 time, or None."""
    if type(text) is not str:
        return None
    m = re.fullmatch(r"(\d{4}-\d\d-\d\d)[Tt](\d\d:\d\d:\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)", text)
    if not m:
        return None
    zone = "+00:00" if m.group(4) in "Zz" else m.group(4)
    try:
        d = datetime.datetime.fromisoformat(m.group(1) + "T" + m.group(2) + zone)
    except ValueError:
        return None
    return d.timestamp() + float(m.group(3) or 0)


def lines_of(path):
    with open(path, "rb") as f:
        data = f.read()
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return parts


class Model:
    """What a correct reader makes of a list of LOG files."""

    def __init__(self, paths):
        self.procs = []
        self.warnings = {}  # path -> [(line, Record)]
        self.records = {}
        seq = 0
        for path in paths:
            current = {}
            self.warnings[path] = []
            self.records[path] = 0
            for n, raw in enumerate(lines_of(path), 1):
                r, rec = classify(raw)
                if r.why in ("toolong", "notjson", "notrecord", "version", "badfield"):
                    self.warnings[path].append((n, r))
                if rec is None:
                    continue
                pid, t = rec["pid"], rec["t"]
                if rec["type"] == "start" or pid not in current:
                    p = Proc(path, seq, pid, t)
                    seq += 1
                    current[pid] = p
                    self.procs.append(p)
                p = current[pid]
                p.t_first, p.t_last = min(p.t_first, t), max(p.t_last, t)
                p.records += 1
                self.records[path] += 1
                getattr(self, "read_" + rec["type"])(p, rec, t)
                if p.program is None and type(rec.get("program")) is str:
                    p.program = rec["program"]
                if p.host is None and type(rec.get("host")) is str:
                    p.host = rec["host"]
        kept = []
        for p in self.procs:
            key = lambda q: (q.pid, q.has_start, q.t_start if q.has_start else q.t_first)
            twin = [q for q in kept if key(q) == key(p)]
            if not twin:
                kept.append(p)
            elif p.records > twin[0].records:
                kept[kept.index(twin[0])] = p
        self.procs = sorted(kept, key=lambda q: (q.t_first, q.pid, q.seq))
        for p in self.procs:
            p.here = p.host == socket.gethostname()
            p.running = not p.has_exit and p.has_start and p.here and alive_since(p.pid, p.t_start)

    @staticmethod
    def set_limit(g, obj, final):
        if not final and g.limit[0] != "unknown":
            return
        if obj.get("limit") is not None:
            g.limit = ("set", obj["limit"])
        elif "limit" in obj:
            g.limit = ("none", None)

    def read_start(self, p, rec, t):
        p.has_start, p.t_start = True, t
        p.program, p.host, p.argv = rec.get("program"), rec.get("host"), rec.get("argv")
        p.group = (rec.get("group") or {}).get("name")
        for e in rec.get("gpus") or []:
            g = self.ids(p.gpu(e["gpu"]), e)
            self.set_limit(g, e, True)

    @staticmethod
    def ids(g, obj):
        g.uuid = g.uuid or obj.get("uuid") or None
        if obj.get("index") is not None:
            g.index = obj["index"]
        return g

    @staticmethod
    def set_source(g, source):
        if source not in (None, "", "none"):
            g.source = source

    def read_event(self, p, rec, t, kind):
        """segment, refusal, driver_oom, context, overhead: the figures after the
        event, when given; only the first three make a GPU used by themselves."""
        g = self.ids(p.gpu(rec["gpu"]), rec)
        g.events = g.events or kind in ("segment", "refusal", "driver_oom")
        if kind == "overhead":
            self.set_source(g, rec.get("source"))
        for k in ("live", "pooled", "reserved", "footprint"):
            if rec.get(k) is not None:
                g.series[k].append((t, rec[k]))
                g.peak[k] = fmax(g.peak[k], rec[k])
        self.set_limit(g, rec, False)
        if kind in ("refusal", "driver_oom"):
            at = rec.get("footprint") if rec.get("footprint") is not None else rec.get("reserved")
            g.marks.append((t, kind == "driver_oom", at))
        g.refusal_events += kind == "refusal"
        g.oom_events += kind == "driver_oom"
        g.peak_group_held = fmax(g.peak_group_held, rec.get("group_held"))

    @staticmethod
    def set_group_limit(g, obj):
        if obj.get("group_limit") is not None:
            g.group_limit = ("set", obj["group_limit"])
        elif "group_limit" in obj:
            g.group_limit = ("none", None)

    def read_group_change(self, p, rec, t):
        p.group = p.group or rec.get("group")
        if rec.get("gpu") is not None:
            g = self.ids(p.gpu(rec["gpu"]), rec)
            new = rec.get("new_limit")
            g.group_limit = ("set", new) if new is not None else ("none", None)

    def read_segment(self, p, rec, t):
        self.read_event(p, rec, t, "segment")

    def read_refusal(self, p, rec, t):
        self.read_event(p, rec, t, "refusal")

    def read_driver_oom(self, p, rec, t):
        self.read_event(p, rec, t, "driver_oom")

    def read_context(self, p, rec, t):
        self.read_event(p, rec, t, "context")

    def read_overhead(self, p, rec, t):
        self.read_event(p, rec, t, "overhead")

    def read_sample(self, p, rec, t):
        for e in rec.get("gpus") or []:
            g = self.ids(p.gpu(e["gpu"]), e)
            for k, field in SERIES.items():
                if e.get(field) is not None:
                    g.series[k].append((t, e[field]))
                    g.peak[k] = fmax(g.peak[k], e[field])
            self.set_group_limit(g, e)
            g.peak_group_used = fmax(g.peak_group_used, e.get("group_used"))
            g.peak_group_held = fmax(g.peak_group_held, e.get("group_held"))
            g.ctx = fmax(g.ctx, e.get("context_overhead"))
            g.overhead = fmax(g.overhead, e.get("overhead"))
            self.set_source(g, e.get("overhead_source"))

    def read_exit(self, p, rec, t):
        p.has_exit, p.reason, p.signal = True, rec.get("reason"), rec.get("signal")
        for e in rec.get("gpus") or []:
            g = self.ids(p.gpu(e["gpu"]), e)
            self.set_limit(g, e, False)
            for k in ("live", "pooled", "reserved", "footprint"):
                g.peak[k] = fmax(g.peak[k], e.get("peak_" + k))
            g.overhead = fmax(g.overhead, e.get("overhead"))
            self.set_source(g, e.get("overhead_source"))
            g.peak["driver"] = fmax(g.peak["driver"], e.get("peak_driver_used"))
            g.exit_reserved = fmax(g.exit_reserved, e.get("peak_reserved"))
            g.exit_driver = fmax(g.exit_driver, e.get("peak_driver_used"))
            g.exit_refusals = fmax(g.exit_refusals, e.get("refusals"))
            g.exit_ooms = fmax(g.exit_ooms, e.get("driver_oom"))
            g.avoided = fmax(g.avoided, e.get("avoided"))
            g.allocs = fmax(g.allocs, e.get("allocs"))
            self.set_group_limit(g, e)
            g.peak_group_held = fmax(g.peak_group_held, e.get("group_held"))

    # ---- what the report should print ----

    @staticmethod
    def size(v, exact=False):
        if v is None:
            return "-"
        if exact:
            return str(v)
        if v < 1024:
            return "%d B" % v
        u = 0
        while u < 6 and v >> (10 * (u + 1)):
            u += 1
        rem = v & ((1 << 10 * u) - 1)
        return "%d.%02d %s" % (v >> 10 * u, rem * 100 >> 10 * u, UNITS[u])

    def groups(self):
        return any(p.in_group() for p in self.procs)

    def group_cells(self, p, g, size):
        """GROUP and BUDGET, when the table has them."""
        if not self.groups():
            return []
        if g is None:
            return ["-", "-"]
        state, value = g.group_limit
        budget = "-" if not p.in_group() else \
            (size(value) if state == "set" else ("none" if state == "none" else "-"))
        return [safe(p.group) if p.group else "-", budget]

    def rows(self, exact=False):
        rows = []
        for p in self.procs:
            program = safe(p.program) if p.program else "-"
            if not p.gpus:
                rows.append([str(p.pid), program] + ["-"] * (12 if self.groups() else 10))
            for g in p.shown():
                gpu = str(g.ordinal)
                if g.uuid:
                    u = g.uuid[4:] if g.uuid.startswith("GPU-") else g.uuid
                    gpu += " (%s)" % safe(u.split("-")[0][:8])
                state, value = g.limit
                limit = self.size(value, exact) if state == "set" else \
                    ("none" if state == "none" else "-")
                ctx = g.ctx
                if ctx is None and g.exit_driver is not None and g.exit_reserved is not None:
                    ctx = max(0, g.exit_driver - g.exit_reserved)
                ctx = self.size(ctx, exact)
                if g.source is not None and g.overhead is not None:
                    ctx = "%s (%s)" % (self.size(g.overhead, exact), safe(g.source))
                rows.append([str(p.pid), program, gpu, limit] +
                            self.group_cells(p, g, lambda v: self.size(v, exact)) +
                            [self.size(g.peak["live"], exact),
                             self.size(g.peak["reserved"], exact),
                             self.size(g.peak["footprint"], exact),
                             self.size(g.peak["driver"], exact),
                             ctx,
                             str(max(g.refusal_events, g.exit_refusals or 0)),
                             str(max(g.oom_events, g.exit_ooms or 0)),
                             "-" if g.avoided is None else str(g.avoided)])
        return rows

    def context(self, g):
        """(bytes or None, source or None)."""
        if g.source is not None and g.overhead is not None:
            return g.overhead, g.source
        ctx = g.ctx
        if ctx is None and g.exit_driver is not None and g.exit_reserved is not None:
            ctx = max(0, g.exit_driver - g.exit_reserved)
        return ctx, None

    def unit(self):
        """The compact table's one unit: that of its largest size."""
        sizes = []
        for p in self.procs:
            for g in p.shown():
                sizes += [g.peak[k] for k in ("live", "reserved", "footprint", "driver")]
                sizes += [g.limit[1], self.context(g)[0], g.group_limit[1]]
        top = max([v for v in sizes if v is not None] + [0])
        u = 0
        while u < 6 and top >> (10 * (u + 1)):
            u += 1
        return u

    def compact_rows(self, exact=False):
        u = self.unit()

        def size(v):
            if v is None:
                return "-"
            if exact or u == 0:
                return str(v)
            whole, rem = v >> 10 * u, v & ((1 << 10 * u) - 1)
            cents = rem * 100 >> 10 * u
            return "<0.01" if whole == 0 and cents == 0 and v else "%d.%02d" % (whole, cents)
        rows = []
        for p in self.procs:
            program = safe(p.program) if p.program else "-"
            if len(program) > 16:
                program = program[:16] + "\u2026"
            if not p.gpus:
                rows.append([str(p.pid), program] + ["-"] * (11 if self.groups() else 9))
            for g in p.shown():
                state, value = g.limit
                rows.append([str(p.pid), program, str(g.ordinal),
                             size(value) if state == "set" else ("none" if state == "none" else "-")] +
                            self.group_cells(p, g, size) +
                            [size(g.peak["live"]), size(g.peak["reserved"]),
                             size(g.peak["footprint"]), size(g.peak["driver"]),
                             size(self.context(g)[0]),
                             str(max(g.refusal_events, g.exit_refusals or 0)),
                             str(max(g.oom_events, g.exit_ooms or 0))])
        return rows

    def process_lines(self):
        out = []
        for p in self.procs:
            s = "pid %d" % p.pid
            if p.program:
                s += " (%s)" % safe(p.program)
            s += ": "
            if p.running:
                s += "running (no exit record yet; the pid is alive on this host); ran at least "
            elif not p.has_exit and p.here:
                s += "no exit record, and no longer running (killed?); ran at least "
            elif not p.has_exit:
                s += "no exit record (killed?); ran at least "
            elif p.reason == "exit":
                s += "exited; ran "
            elif p.reason == "signal":
                if p.signal is None:
                    s += "ended by a signal; ran "
                else:
                    try:
                        name = signal.Signals(p.signal).name
                        s += "ended by signal %d (%s); ran " % (p.signal, name)
                    except ValueError:
                        s += "ended by signal %d; ran " % p.signal
            else:
                s += "ended (%s); ran " % safe(p.reason or "no reason given")
            s += duration(p.t_last - (p.t_start if p.has_start else p.t_first))
            if p.has_start:
                s += "; started " + utc(p.t_start)
            else:
                s += "; no start record (first record %s)" % utc(p.t_first)
            if p.host is not None:
                s += " on " + safe(p.host)
            if p.group is not None:
                s += "; member of group " + safe(p.group)
            hidden = [g.ordinal for g in sorted(p.gpus.values(), key=lambda g: g.ordinal)
                      if g not in p.shown()]
            if hidden:
                s += "; unused GPUs: " + ", ".join(str(o) for o in hidden)
            out.append(s)
            s = "  command:"
            s += "".join(" " + safe(shlex.quote(a)) for a in p.argv) if p.argv else " -"
            out.append(s)
            for g in p.shown():
                s = "  GPU %d: %s" % (g.ordinal, safe(g.uuid) if g.uuid else "UUID unknown")
                if g.index is not None:
                    s += ", nvidia-smi index %d" % g.index
                ctx, source = self.context(g)
                if ctx is not None:
                    s += "; context " + self.size(ctx)
                    if source is not None:
                        s += " (%s)" % safe(source)
                if g.avoided is not None:
                    s += "; %d driver calls avoided" % g.avoided
                if p.in_group() and g.group_limit[0] != "unknown":
                    s += "; group " + (safe(p.group) if p.group else "(name unknown)")
                    s += (" budget " + self.size(g.group_limit[1]) if g.group_limit[0] == "set"
                          else " without a budget here")
                    if g.peak_group_used is not None:
                        s += ", its members held at most " + self.size(g.peak_group_used)
                out.append(s)
        return out


def alive_since(pid, t_start):
    """Whether pid runs and started no later than t_start (+2 s of slack)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    except (OSError, StopIteration):
        return False
    ticks = int(stat[stat.rindex(")") + 2:].split()[19])
    return btime + ticks / os.sysconf("SC_CLK_TCK") <= t_start + 2.0


def safe(s):
    return "".join("\\x%02x" % ord(c) if ord(c) < 0x20 or ord(c) == 0x7f else c for c in s)


def duration(d):
    if not d >= 0:
        return "?"
    if d < 59.95:
        return "%.1f s" % d
    s = int(d + 0.5)
    if s < 3600:
        return "%dm%02ds" % (s // 60, s % 60)
    return "%dh%02dm%02ds" % (s // 3600, s // 60 % 60, s % 60)


def utc(t):
    return datetime.datetime.fromtimestamp(math.floor(t), datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


# ---- reading what the report printed ------------------------------------------------

def parse_output(stdout):
    lines = stdout.split("\n")
    if lines[0].startswith("sizes in "):
        lines = lines[1:]
    blank = lines.index("")
    table = [re.split(r" {2,}", line.strip()) for line in lines[:blank]]
    rest = [line for line in lines[blank + 1:] if line]
    plot = [line for line in rest if line.startswith("plot: ")]
    return table, [line for line in rest if not line.startswith("plot: ")], plot


def path_points(d):
    tokens = re.findall(r"([ML])(-?[0-9.]+),(-?[0-9.]+)", d)
    assert tokens and tokens[0][0] == "M" and all(t[0] == "L" for t in tokens[1:]), d
    assert re.fullmatch(r"M-?[0-9.]+,-?[0-9.]+( L-?[0-9.]+,-?[0-9.]+)*", d), d
    return [(float(x), float(y)) for _, x, y in tokens]


def label_bytes(text):
    if text == "0":
        return 0
    number, unit = text.split(" ")
    return float(number) * 1024 ** UNITS.index(unit)


def fit(pairs):
    """(a, b) with pixel = a + b * value through the first and last tick."""
    (p0, v0), (p1, v1) = pairs[0], pairs[-1]
    b = (p1 - p0) / (v1 - v0)
    return p0 - b * v0, b


class Panel:
    def __init__(self, g):
        self.g = g
        # A group's panel has no pid and no ordinal of its own.
        self.pid, self.gpu = int(g.get("data-pid", -1)), int(g.get("data-gpu", -1))
        self.group, self.uuid = int(g.get("data-group")), g.get("data-uuid")
        area = g.find(SVG + "rect[@class='plot-area']")
        self.x0, self.y0 = float(area.get("x")), float(area.get("y"))
        self.x1 = self.x0 + float(area.get("width"))
        self.y1 = self.y0 + float(area.get("height"))
        grid = lambda axis: zip(g.findall(SVG + "line[@class='grid-%s']" % axis),
                                g.findall(SVG + "text[@class='%slabel']" % axis))
        xs = [(float(line.get("x1")), float(text.text)) for line, text in grid("x")]
        ys = [(float(line.get("y1")), label_bytes(text.text)) for line, text in grid("y")]
        self.xticks, self.yticks = xs, ys
        self.ax, self.bx = fit(xs)
        self.ay, self.by = fit(ys)
        self.title_lines = [t.text or "" for t in g.find(SVG + "text[@class='title']")
                            .findall(SVG + "tspan")]
        self.title = " ".join(self.title_lines)
        self.caption = g.find(SVG + "text[@class='xcaption']").text
        label = g.find(SVG + "text[@class='limit-label']")
        self.limit_label = label.text if label is not None else None
        self.series = {}
        for path in g.findall(SVG + "path"):
            cls = path.get("class").split()
            if cls[0] == "series":
                self.series[cls[1]] = path_points(path.get("d"))
            elif cls in (["limit"], ["group-budget"]):
                self.series[cls[0]] = path_points(path.get("d"))
        # A mark: (x1, x2, y1, y2) of its line, and where its marker sits.
        self.marks = {}
        for k, shape in (("refusal", "circle"), ("driver-oom", "rect")):
            self.marks[k] = []
            for m in g.findall(SVG + "g[@class='%s']" % k):
                line, marker = m.find(SVG + "line"), m.find(SVG + shape)
                if shape == "circle":
                    at = (float(marker.get("cx")), float(marker.get("cy")))
                else:
                    at = (float(marker.get("x")) + 6, float(marker.get("y")) + 6)
                self.marks[k].append((float(line.get("x1")), float(line.get("x2")),
                                      float(line.get("y1")), float(line.get("y2")), at))

    def px(self, seconds):
        return self.ax + self.bx * seconds

    def py(self, value):
        return self.ay + self.by * value


TOL = 0.02  # pixels: coordinates are written with two decimals


class Checks(unittest.TestCase):
    def check_table(self, paths, exact=False, launcher=False, extra=(), wide=None):
        """The compact table and the wide one (--wide) both, unless `wide` says."""
        for w in ((False, True) if wide is None else (wide,)):
            args = (["--bytes"] if exact else []) + (["--wide"] if w else []) + list(extra) + list(paths)
            p = run(args, launcher=launcher)
            self.assertEqual(p.returncode, 0, p.stderr)
            model = Model(paths)
            table, procs, _ = parse_output(p.stdout)
            if w:
                self.assertEqual(table[0], with_groups(COLUMNS, True) if model.groups() else COLUMNS)
                self.assertEqual(table[1:], model.rows(exact))
            else:
                unit = "bytes" if exact else UNITS[model.unit()]
                self.assertTrue(p.stdout.startswith("sizes in %s; " % unit), p.stdout)
                self.assertEqual(table[0], with_groups(COMPACT, False) if model.groups() else COMPACT)
                self.assertEqual(table[1:], model.compact_rows(exact))
            self.assertEqual(procs, model.process_lines())
        return p, model

    def check_warnings(self, stderr, model, path):
        expected = model.warnings[path]
        got = [line for line in stderr.splitlines() if line.startswith(path + ":")]
        shown = expected[:MAX_WARNINGS]
        self.assertEqual(len(got), len(shown) + (1 if len(expected) > MAX_WARNINGS else 0), stderr)
        texts = {
            "toolong": r"longer than 1048576 bytes \(1 MiB, the most a record may take\); skipped",
            "notjson": r"not a JSON object; skipped",
            "notrecord": r'not a cumemcap record \(one needs "v", "type", "t" or "time", and "pid"\); '
                         r'skipped',
            "version": r'schema version \S+ \(this reader knows "v":1 and "v":2\); skipped',
        }
        for line, (n, r) in zip(got, shown):
            prefix = "%s:%d: " % (path, n)
            self.assertTrue(line.startswith(prefix), (line, prefix))
            rest = line[len(prefix):]
            if r.why == "badfield":
                self.assertEqual(len(r.fields), 1, "a fixture line has one wrong field")
                self.assertRegex(rest, r'^"\w+" record: "%s" is not .+; skipped$'
                                 % re.escape(r.fields[0]))
            else:
                self.assertRegex(rest, "^" + texts[r.why] + "$")
        if len(expected) > MAX_WARNINGS:
            self.assertEqual(got[-1], "%s: %d more line%s skipped (warnings stop at %d per file)"
                             % (path, len(expected) - MAX_WARNINGS,
                                "" if len(expected) - MAX_WARNINGS == 1 else "s", MAX_WARNINGS))

    def check_svg(self, svg_path, model):
        tree = ET.parse(svg_path)  # well-formed XML, or this raises
        root = tree.getroot()
        self.assertEqual(root.tag, SVG + "svg")
        # Self-contained: nothing to run, nothing to fetch.
        for el in root.iter():
            tag = el.tag.replace(SVG, "")
            self.assertNotIn(tag, ("script", "image", "foreignObject", "a", "use", "style"))
            for name, value in el.attrib.items():
                self.assertFalse(name.endswith("href") or name.lower().startswith("on"), name)
                self.assertNotIn("url(", value)
        panels = [Panel(g) for g in root.iter(SVG + "g") if g.get("class") == "panel"]
        expected = groups(model)
        self.assertEqual([(pn.pid, pn.gpu) for pn in panels],
                         [(p.pid, g.ordinal) for group in expected for p, g in group])
        i = 0
        for group in expected:
            members = panels[i:i + len(group)]
            self.assertEqual({pn.group for pn in members}, {i})
            for pn, (p, g) in zip(members, group):
                with self.subTest(pid=p.pid, gpu=g.ordinal):
                    self.check_panel(pn, p, g, group)
            i += len(group)
        return panels

    def check_panel(self, pn, p, g, group):
        # The axes of the GPU: from the first record of any process on it to
        # the last, up to the highest figure of any of them.
        t0 = min(q.t_first for q, _ in group)
        t_end = max(q.t_last for q, _ in group)
        values = [v for _, h in group for series in h.series.values() for _, v in series]
        values += [h.limit[1] for _, h in group if h.limit[0] == "set"]
        values += [m[2] for _, h in group for m in h.marks if m[2] is not None]
        # Axes: ticks from the corners of the plot area, covering the data.
        self.assertAlmostEqual(pn.xticks[0][0], pn.x0, delta=TOL)
        self.assertEqual(pn.xticks[0][1], 0)
        self.assertAlmostEqual(pn.xticks[-1][0], pn.x1, delta=TOL)
        self.assertGreaterEqual(pn.xticks[-1][1], t_end - t0)
        self.assertAlmostEqual(pn.yticks[0][0], pn.y1, delta=TOL)
        self.assertEqual(pn.yticks[0][1], 0)
        self.assertAlmostEqual(pn.yticks[-1][0], pn.y0, delta=TOL)
        for x, s in pn.xticks:
            self.assertAlmostEqual(x, pn.px(s), delta=TOL)
        for y, v in pn.yticks:
            self.assertAlmostEqual(y, pn.py(v), delta=TOL)
        self.assertGreaterEqual(pn.yticks[-1][1], max(values) if values else 0)
        if len(group) > 1:
            self.assertIn("%d processes on this GPU share its axes" % len(group), pn.caption)
        # The title names program, pid and GPU.
        title = f"pid {p.pid}"
        if p.host is not None:
            title += " on " + safe(p.host)
        title += f", GPU {g.ordinal}"
        if p.program:
            title = safe(p.program) + ", " + title
        title = xml_safe(title)
        self.assertTrue(pn.title.replace(" ", "").startswith(title.replace(" ", "")),
                        (pn.title, title))
        for line in pn.title_lines:
            self.assertLessEqual(len(line), 100, line)
        if g.limit[0] == "set":
            self.assertTrue(pn.title.endswith(", limit " + Model.size(g.limit[1])), pn.title)
        # A group's budget: a line across the plot at its height.
        if g.group_limit[0] == "set":
            (xa, ya), (xb, yb) = pn.series["group-budget"]
            self.assertAlmostEqual(ya, pn.py(g.group_limit[1]), delta=TOL)
            self.assertAlmostEqual(yb, ya, delta=TOL)
            self.assertEqual((round(xa, 2), round(xb, 2)), (round(pn.x0, 2), round(pn.x1, 2)))
            self.assertIn("group %s budget %s" % (xml_safe(safe(p.group or "(name unknown)")),
                                                   Model.size(g.group_limit[1])), pn.title)
        else:
            self.assertNotIn("group-budget", pn.series)
        # Each series: its points, in time order, inside the plot area.
        for kind in SERIES:
            pts = sorted(g.series[kind], key=lambda tv: tv[0])
            if not pts:
                self.assertNotIn(kind, pn.series)
                continue
            got = pn.series[kind]
            xs = [x for x, _ in got]
            self.assertEqual(xs, sorted(xs), kind + " goes back in time")
            for x, y in got:
                self.assertTrue(pn.x0 - TOL <= x <= pn.x1 + TOL and pn.y0 - TOL <= y <= pn.y1 + TOL,
                                (kind, x, y))
            # Steps: each figure holds until the next, the last to the last record.
            want = [pts[0]]
            for (_, before), (t, v) in zip(pts, pts[1:]):
                want += [(t, before), (t, v)]
            want.append((p.t_last, pts[-1][1]))
            self.assertEqual(len(got), len(want), kind)
            for (x, y), (t, v) in zip(got, want):
                self.assertAlmostEqual(x, pn.px(t - t0), delta=TOL, msg=kind)
                self.assertAlmostEqual(y, pn.py(v), delta=TOL, msg=kind)
        # The limit: dashed across the whole plot area, at its value.
        if g.limit[0] == "set":
            (xa, ya), (xb, yb) = pn.series["limit"]
            self.assertAlmostEqual(ya, pn.py(g.limit[1]), delta=TOL)
            self.assertAlmostEqual(yb, ya, delta=TOL)
            self.assertAlmostEqual(xa, pn.x0, delta=TOL)
            self.assertAlmostEqual(xb, pn.x1, delta=TOL)
            # Labelled with the peak footprint against it.
            label = "limit " + Model.size(g.limit[1])
            peak = g.peak["footprint"]
            if peak is not None:
                label += "; peak footprint " + Model.size(peak)
                if g.limit[1] > 0:
                    label += " (%.0f%%)" % (100.0 * peak / g.limit[1])
            self.assertEqual(pn.limit_label, label)
        else:
            self.assertNotIn("limit", pn.series)
        # Refusals and driver OOMs: a line across the plot at each one's time,
        # a marker where the process stood (its footprint, else reserved).
        for cls, oom in (("refusal", False), ("driver-oom", True)):
            want = sorted((t, at) for t, o, at in g.marks if o == oom)
            got = pn.marks[cls]
            self.assertEqual(len(got), len(want), cls)
            for (x1, x2, y1, y2, (mx, my)), (t, at) in zip(sorted(got), want):
                self.assertAlmostEqual(x1, pn.px(t - t0), delta=TOL)
                self.assertEqual(x1, x2)
                self.assertAlmostEqual(mx, x1, delta=TOL)
                self.assertEqual((min(y1, y2), max(y1, y2)), (pn.y0, pn.y1))
                if at is not None:
                    self.assertAlmostEqual(my, max(pn.py(at), pn.y0 + 6), delta=TOL)


def groups(model):
    """The panels as the plot orders them: GPUs (by UUID) as first met, each
    with its processes in order."""
    slots = [(p, g) for p in model.procs for g in p.shown()]
    out, taken = [], set()
    for i, (p, g) in enumerate(slots):
        if i in taken:
            continue
        group = []
        for j in range(i, len(slots)):
            h = slots[j][1]
            if j == i or (j not in taken and g.uuid and h.uuid and g.uuid.lower() == h.uuid.lower()):
                taken.add(j)
                group.append(slots[j])
        out.append(group)
    return out


def xml_safe(s):
    return "".join("\ufffd" if ord(c) < 0x20 or ord(c) == 0x7f or c in "\ufffe\uffff" else c
                   for c in s)


# ---- the fixtures -------------------------------------------------------------------

class Fixtures(Checks):
    """Each hand-written log alone, then all of them together."""

    def test_normal_run(self):
        path = fixture("normal.jsonl")
        p, model = self.check_table([path])
        self.assertEqual(p.stderr, "")
        # The figures the fixture was written to show.
        row = model.rows()[0]
        self.assertEqual(row[3:], ["4.00 GiB", "3.81 GiB", "4.00 GiB", "-", "4.47 GiB", "481.63 MiB",
                                   "2", "0", "3480"])
        self.check_table([path], exact=True)

    def test_footprint(self):
        """A log with footprint figures: the peak footprint of events, samples
        and the exit record; the overhead with the source it was learned from."""
        path = fixture("footprint.jsonl")
        p, model = self.check_table([path])
        self.assertEqual(p.stderr, "")
        rows = model.rows()
        self.assertEqual([r[6] for r in rows], ["1.79 GiB", "768.00 MiB"])
        self.assertEqual([r[8] for r in rows], ["300.00 MiB (nvml)", "256.00 MiB (delta)"])
        self.check_table([path], exact=True)
        # The peak of the events alone, with the samples' and exit's taken out.
        with tempfile.TemporaryDirectory() as tmp:
            events = os.path.join(tmp, "events.jsonl")
            with open(path) as src, open(events, "w") as out:
                for line in src:
                    if json.loads(line)["type"] not in ("sample", "exit"):
                        out.write(line)
            p, model = self.check_table([events])
            self.assertEqual(model.rows()[0][6], "1.79 GiB")
            self.assertEqual(model.rows()[1][6], "256.00 MiB")  # the context record's
            self.assertEqual(model.rows()[0][8], "-")  # no overhead figure in events
            # ... and of the exit record alone.
            exits = os.path.join(tmp, "exit.jsonl")
            with open(path) as src, open(exits, "w") as out:
                for line in src:
                    if json.loads(line)["type"] in ("start", "exit"):
                        out.write(line)
            p, model = self.check_table([exits])
            self.assertEqual([r[6] for r in model.rows()], ["1.79 GiB", "768.00 MiB"])
            svg = os.path.join(tmp, "f.svg")
            p, model = self.check_table([path], extra=["--plot", svg])
            panels = self.check_svg(svg, model)
            self.assertEqual(panels[0].limit_label,
                             "limit 2.00 GiB; peak footprint 1.79 GiB (90%)")
            self.assertIn("footprint", panels[0].series)

    def test_old_log_without_footprint(self):
        """A log from before the footprint cap: no footprint, the context as before."""
        p, model = self.check_table([fixture("normal.jsonl")])
        row = model.rows()[0]
        self.assertEqual((row[6], row[8]), ("-", "481.63 MiB"))

    def test_killed_without_exit_record(self):
        p, model = self.check_table([fixture("killed.jsonl")])
        self.assertIn("no exit record (killed?)", p.stdout)
        g = model.procs[0].shown()[0]
        self.assertIsNone(g.avoided)
        self.assertEqual(model.rows()[0][6:9], ["-", "-", "-"])  # no footprint, no driver

    def test_two_processes_two_gpus(self):
        paths = [fixture("multi-b.jsonl"), fixture("multi-a.jsonl")]
        p, model = self.check_table(paths)
        self.assertEqual(len(model.rows()), 3)  # 7001 on 0 and 1, 7002 on 1 only
        self.assertIn("unused GPUs: 0", p.stdout)
        self.assertIn("ended by signal 15 (SIGTERM)", p.stdout)

    def test_torn_and_garbage_lines(self):
        path = fixture("torn.jsonl")
        with open(path, "rb") as f:
            self.assertFalse(f.read().endswith(b"\n"), "the fixture's last line is torn")
        p, model = self.check_table([path])
        self.check_warnings(p.stderr, model, path)
        n = len(lines_of(path))
        self.assertIn("%s:%d: not a JSON object; skipped" % (path, n), p.stderr.splitlines())

    def test_wrong_fields(self):
        path = fixture("bad-fields.jsonl")
        p, model = self.check_table([path])
        self.check_warnings(p.stderr, model, path)
        self.assertEqual(len(model.warnings[path]), 10)

    def test_unknown_fields_and_types(self):
        path = fixture("unknown.jsonl")
        p, model = self.check_table([path])
        self.assertEqual(p.stderr, "")
        self.assertEqual([q.pid for q in model.procs], [9090])  # not 9999's unknown record
        self.assertIn("'print('\"'\"'hi there'\"'\"')' 'a\\x0ab'", p.stdout)

    def test_values_above_2_53(self):
        path = fixture("big.jsonl")
        p, model = self.check_table([path], exact=True)
        row = model.rows(exact=True)[0]
        self.assertEqual(row[3:], [str(U64), "9007199254740993", "9007199254740993", "-", str(U64),
                                   "9007199254740995", "9007199254740993", "9007199254740993",
                                   str(U64 - 1)])
        self.check_table([path])

    def test_no_start_record(self):
        p, _ = self.check_table([fixture("nostart.jsonl")])
        self.assertIn("pid 6060: exited; ran 6.0 s; no start record", p.stdout)

    def test_all_together_with_plot(self):
        paths = sorted(fixture(n) for n in os.listdir(FIXTURES) if n.endswith(".jsonl"))
        with tempfile.TemporaryDirectory() as tmp:
            svg = os.path.join(tmp, "all.svg")
            p, model = self.check_table(paths, extra=["--plot", svg])
            panels = self.check_svg(svg, model)
            self.assertIn("plot: %s (%d panels and 1 of a group)" % (svg, len(panels)), p.stdout)
            self.assertGreaterEqual(len(panels), 10)
            for path in paths:
                self.check_warnings(p.stderr, model, path)

    def test_plot_of_each(self):
        for name in sorted(os.listdir(FIXTURES)):
            with self.subTest(name=name), tempfile.TemporaryDirectory() as tmp:
                svg = os.path.join(tmp, "x.SVG")
                p, model = self.check_table([fixture(name)], extra=["--plot=" + svg])
                self.check_svg(svg, model)

    def test_same_process_twice(self):
        path = fixture("normal.jsonl")
        p, model = self.check_table([path, path])
        self.assertEqual(len(model.rows()), 1)
        self.assertRegex(p.stderr, r"^cumemcap report: %s: pid 4242 \(started 2023-11-14 "
                         r"22:13:20 UTC\) is also in %s; reported once, from the copy with "
                         r"more records\n$" % (re.escape(path), re.escape(path)))
        # A copy cut short (the process still running when it was taken):
        # the longer one counts, whichever comes first.
        with tempfile.TemporaryDirectory() as tmp:
            short = os.path.join(tmp, "short.jsonl")
            with open(short, "wb") as f:
                f.write(b"\n".join(lines_of(path)[:6]) + b"\n")
            for order in ([short, path], [path, short]):
                p, model = self.check_table(order)
                self.assertIn("exited", p.stdout)
                self.assertEqual(model.rows()[0][-1], "3480")

    def test_launcher(self):
        path = fixture("normal.jsonl")
        direct = run([path])
        p, _ = self.check_table([path], launcher=True, wide=False)
        self.assertEqual(p.stdout, direct.stdout)
        p = run(["--help"], launcher=True)
        self.assertEqual(p.returncode, 0)
        self.assertIn("Usage: cumemcap report", p.stdout)
        p = run([], launcher=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no LOG given", p.stderr)
        p = run(["a", "b c"], launcher=True, env_add={"CUMEMCAP_REPORT": "/bin/echo"})
        self.assertEqual((p.returncode, p.stdout), (0, "a b c\n"))
        p = subprocess.run([LAUNCHER, "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0)
        self.assertIn("cumemcap report ", p.stdout)
        self.assertIn("CUMEMCAP_REPORT", p.stdout)


# ---- logs made here -------------------------------------------------------------------

START = ('{"v":1,"type":"start","t":1700001000.0,"pid":77,"program":"gen","argv":["gen"],'
         '"gpus":[{"gpu":0,"uuid":"GPU-12345678-0000","capacity":1073741824,'
         '"limit":536870912}]}')


def sample(t, live, reserved):
    return ('{"v":1,"type":"sample","t":%r,"pid":77,"gpus":[{"gpu":0,"live":%d,"pooled":0,'
            '"reserved":%d,"driver_used":null,"context_overhead":null}]}' % (t, live, reserved))


class Generated(Checks):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        return path

    def test_long_lines(self):
        pad = lambda n: '{"v":1,"type":"padding","t":1,"pid":77,"x":"%s"}' % ("a" * n)
        base = len(pad(0))
        exact, over = pad(MAX_LINE - base), pad(MAX_LINE - base + 1)
        self.assertEqual((len(exact), len(over)), (MAX_LINE, MAX_LINE + 1))
        path = self.write("long.jsonl", "\n".join(
            [START, exact, over, sample(1700001001.0, 100, 2097152)]) + "\n")
        p, model = self.check_table([path])
        self.assertEqual(p.stderr, "%s:3: longer than 1048576 bytes (1 MiB, the most a record "
                         "may take); skipped\n" % path)
        self.assertEqual(model.rows()[0][4], "100 B")  # the line after it still counts

    def test_warnings_are_capped(self):
        path = self.write("noisy.jsonl", START + "\n" + "garbage\n" * 15)
        p, model = self.check_table([path])
        self.check_warnings(p.stderr, model, path)
        self.assertIn("%s: 5 more lines skipped (warnings stop at 10 per file)" % path, p.stderr)

    def test_long_series_are_thinned(self):
        n = 20000
        lines = [START]
        for i in range(n):
            live = 300000000 + (i * 7919 % 1000) * 100000
            if i == 12345:
                live = 536870000  # one peak between thousands of points
            lines.append(sample(1700001000.0 + i * 0.05, live, 536870912))
        path = self.write("long-series.jsonl", "\n".join(lines) + "\n")
        svg = os.path.join(self.tmp.name, "long.svg")
        p = run(["--plot", svg, path])
        self.assertEqual(p.returncode, 0, p.stderr)
        root = ET.parse(svg).getroot()
        pn = Panel(next(g for g in root.iter(SVG + "g") if g.get("class") == "panel"))
        live = pn.series["live"]
        width = pn.x1 - pn.x0
        self.assertLess(len(live), 2 * 4 * (width + 2))  # a step: two corners a point
        xs = [x for x, _ in live]
        self.assertEqual(xs, sorted(xs))
        self.assertAlmostEqual(min(y for _, y in live), pn.py(536870000), delta=TOL)
        self.assertAlmostEqual(xs[0], pn.x0, delta=TOL)

    def test_gpu_seen_only_in_an_event(self):
        # The first request on GPU 1 is refused: every figure is zero, but the
        # process did use that GPU, and GPU 0 it did not.
        start = START.replace(
            '"limit":536870912}]',
            '"limit":536870912},{"gpu":1,"uuid":"GPU-87654321-0000","capacity":1073741824,'
            '"limit":536870912}]')
        refusal = ('{"v":1,"type":"refusal","t":1700001002.5,"pid":77,"gpu":1,'
                   '"requested":1073741824,"door":"cuMemAlloc_v2","live":0,"pooled":0,'
                   '"reserved":0,"limit":536870912}')
        path = self.write("first-refused.jsonl", start + "\n" + refusal + "\n")
        svg = os.path.join(self.tmp.name, "first.svg")
        p, model = self.check_table([path], extra=["--plot", svg])
        self.assertEqual([row[2] for row in model.rows()], ["1 (87654321)"])
        self.assertRegex(p.stdout, r"; unused GPUs: 0\n")
        self.check_svg(svg, model)

    def test_process_without_gpus(self):
        path = self.write("nogpu.jsonl", START.replace(
            '[{"gpu":0,"uuid":"GPU-12345678-0000","capacity":1073741824,"limit":536870912}]',
            "[]") + "\n")
        svg = os.path.join(self.tmp.name, "nogpu.svg")
        p, model = self.check_table([path], extra=["--plot", svg])
        self.assertEqual(model.rows(), [["77", "gen"] + ["-"] * 10])
        self.assertIn("plot: %s (0 panels)" % svg, p.stdout)
        self.check_svg(svg, model)


# ---- schema v2, running processes, inputs, filters, JSON -------------------------------

def now_log(pid, t, host=None, exit_record=False, program="live.py"):
    host = socket.gethostname() if host is None else host
    lines = [json.dumps({"v": 2, "type": "start", "t": t, "pid": pid, "program": program,
                         "host": host, "argv": [program],
                         "gpus": [{"gpu": 0, "uuid": "GPU-11112222-0000", "limit": 1 << 30}]}),
             json.dumps({"v": 2, "type": "sample", "t": t + 0.5, "pid": pid, "program": program,
                         "host": host, "gpus": [{"gpu": 0, "live": 1 << 20, "pooled": 0,
                                                 "reserved": 1 << 21}]})]
    if exit_record:
        lines.append(json.dumps({"v": 2, "type": "exit", "t": t + 1, "pid": pid, "reason": "exit",
                                 "gpus": [{"gpu": 0, "peak_reserved": 1 << 21}]}))
    return "\n".join(lines) + "\n"


class Newer(Checks):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(data)
        return path

    def test_v2_logs(self):
        """v2: time without t, program and host on every record, uuid and index
        on every per-GPU object; one GPU (UUIDs differ in case only) under two
        ordinals shares one panel group."""
        paths = [fixture("v2-train.jsonl"), fixture("v2-eval.jsonl")]
        svg = os.path.join(self.tmp.name, "v2.svg")
        p, model = self.check_table(paths, extra=["--plot", svg])
        self.assertEqual(p.stderr, "")
        self.assertEqual([q.program for q in model.procs], ["train.py", "eval.py"])
        self.assertIn("no start record (first record 2023-11-14 22:23:22 UTC) on node-a", p.stdout)
        self.assertEqual(p.stdout.count(", nvidia-smi index 3;"), 2)
        panels = self.check_svg(svg, model)
        self.assertEqual([pn.group for pn in panels], [0, 0])
        rel = lambda pn: [(round(y - pn.y0, 2), v) for y, v in pn.yticks]
        self.assertEqual(rel(panels[0]), rel(panels[1]))
        self.assertEqual(panels[0].xticks, panels[1].xticks)
        self.assertIn("nvidia-smi 3", panels[0].title)

    def test_running_or_not(self):
        child = subprocess.Popen(["sleep", "60"])
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        time.sleep(0.1)
        now = time.time()
        cases = [
            ("live", now_log(child.pid, now), "running (no exit record yet; the pid is alive on "
             "this host); ran at least"),
            # The pid runs, but it started after the log's start: a reused pid.
            ("reused", now_log(child.pid, now - 3600), "no exit record, and no longer running "
             "(killed?)"),
            ("elsewhere", now_log(child.pid, now, host="not-" + socket.gethostname()),
             "no exit record (killed?)"),
            ("exited", now_log(child.pid, now, exit_record=True), "exited; ran 1.0 s"),
        ]
        for name, data, words in cases:
            with self.subTest(name=name):
                path = self.write(name + ".jsonl", data)
                p, model = self.check_table([path])
                self.assertIn("pid %d (live.py): %s" % (child.pid, words), p.stdout)
                self.assertEqual(model.procs[0].running, name == "live")
                got = json.loads(run(["--json", path]).stdout)["processes"][0]
                self.assertEqual(got["state"], {"live": "running", "reused": "killed",
                                                "elsewhere": "no_exit", "exited": "exited"}[name])
        path = os.path.join(self.tmp.name, "live.jsonl")
        child.kill()
        child.wait()
        p, _ = self.check_table([path])
        self.assertIn("no exit record, and no longer running (killed?)", p.stdout)

    def test_stdin_and_directories(self):
        names = ["normal.jsonl", "multi-a.jsonl", "multi-b.jsonl"]
        for n in names:
            with open(fixture(n)) as src:
                self.write(n, src.read())
        self.write("notes.txt", "not a log\n")
        os.mkdir(os.path.join(self.tmp.name, "sub.jsonl"))
        direct = run([os.path.join(self.tmp.name, n) for n in sorted(names)])
        self.assertEqual(direct.returncode, 0, direct.stderr)
        p = run([self.tmp.name])
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(p.stdout, direct.stdout)
        with open(fixture("normal.jsonl")) as f:
            p = subprocess.run([REPORT, "-"], stdin=f, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, run([fixture("normal.jsonl")]).stdout)

    def test_filters(self):
        fx = [fixture(n) for n in ("normal.jsonl", "multi-a.jsonl", "multi-b.jsonl", "v2-train.jsonl",
                                   "v2-eval.jsonl")]

        def rows(*args):
            p = run(list(args) + fx)
            self.assertEqual(p.returncode, 0, p.stderr)
            return [(int(r[0]), int(r[2])) for r in parse_output(p.stdout)[0][1:]]
        everything = rows()
        self.assertEqual(len(everything), 6)
        # --gpu N: nvidia-smi's index where the log has it, else the ordinal.
        self.assertEqual(rows("--gpu", "3"), [(1, 0), (2, 1)])
        self.assertEqual(rows("--gpu", "1"), [(7001, 1), (7002, 1)])
        self.assertEqual(rows("--gpu", "0"), [(4242, 0), (7001, 0)])
        self.assertEqual(rows("--gpu", "GPU-BBBB"), [(7001, 1), (7002, 1)])
        self.assertEqual(rows("--gpu", "5ea7ed00-aaaa"), [(1, 0), (2, 1)])
        self.assertEqual(rows("--program", "*.py"), [(4242, 0), (7002, 1), (1, 0), (2, 1)])
        self.assertEqual(rows("--program", "serve"), [(7001, 0), (7001, 1)])
        # --since: processes with a record at or after it.
        self.assertEqual(rows("--since", "2023-11-14T22:23:00Z"), [(1, 0), (2, 1)])
        self.assertEqual(rows("--since", "2023-11-14 22:23"), [(1, 0), (2, 1)])
        self.assertEqual(rows("--since", "2023-11-14T23:23:00+01:00"), [(1, 0), (2, 1)])
        self.assertEqual(rows("--since", "2023-11-14T22:23:26Z"), [(2, 1)])
        self.assertEqual(rows("--since", "2023-11-14"), rows())
        p = run(["--since", "1h"] + fx)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, "cumemcap report: no process matches --gpu, --program and "
                         "--since\n")
        live = self.write("now.jsonl", now_log(99999999 % 4194304, time.time() - 1800,
                                               host="elsewhere", exit_record=True))
        self.assertEqual(len(parse_output(run(["--since", "1h", live]).stdout)[0]), 2)
        self.assertEqual(run(["--since", "10m", live]).returncode, 1)
        self.assertEqual(run(["--since", "2.5h", live]).returncode, 0)

    def test_json(self):
        paths = sorted(fixture(n) for n in os.listdir(FIXTURES) if n.endswith(".jsonl"))
        p = run(["--json"] + paths)
        self.assertEqual(p.returncode, 0)
        got = json.loads(p.stdout)  # Python reads integers exactly
        model = Model(paths)
        self.assertEqual([q["pid"] for q in got["processes"]], [q.pid for q in model.procs])
        for q, m in zip(got["processes"], model.procs):
            self.assertEqual(q["program"], m.program)
            self.assertEqual(q["host"], m.host)
            self.assertEqual(q["argv"], m.argv)
            self.assertEqual([g["gpu"] for g in q["gpus"]], sorted(m.gpus))
            for g in q["gpus"]:
                mg = m.gpus[g["gpu"]]
                self.assertEqual(g["used"], mg in m.shown() and mg.used())
                for k in ("live", "reserved", "footprint", "driver"):
                    self.assertEqual(g["peak_" + ("driver_used" if k == "driver" else k)], mg.peak[k])
                self.assertEqual(g["limit"], mg.limit[1])
                self.assertEqual(g["uuid"], mg.uuid)
                self.assertEqual(g["index"], mg.index)
                self.assertEqual((g["context_overhead"], g["context_source"]), Model().context(mg)
                                 if False else model.context(mg))
                self.assertEqual(g["refusals"], max(mg.refusal_events, mg.exit_refusals or 0))
                self.assertEqual(g["avoided"], mg.avoided)
        big = next(q for q in got["processes"] if q["program"] == "huge")
        self.assertEqual(big["gpus"][0]["limit"], U64)
        self.assertEqual(big["gpus"][0]["peak_live"], 9007199254740993)

    def test_plot_to_stdout(self):
        p = subprocess.run([REPORT, "--plot", "-", fixture("normal.jsonl")], cwd=self.tmp.name,
                           capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "-")))
        path = self.write("out.svg", p.stdout)
        self.check_svg(path, Model([fixture("normal.jsonl")]))

    def test_wall_clock(self):
        svg = os.path.join(self.tmp.name, "wall.svg")
        p = run(["--plot", svg, "--time", "wall", fixture("normal.jsonl")])
        self.assertEqual(p.returncode, 0, p.stderr)
        root = ET.parse(svg).getroot()
        g = next(g for g in root.iter(SVG + "g") if g.get("class") == "panel")
        labels = [t.text for t in g.findall(SVG + "text[@class='xlabel']")]
        t0 = Model([fixture("normal.jsonl")]).procs[0].t_first
        self.assertEqual(labels[0], utc(t0)[11:19])
        self.assertEqual(labels[1], utc(t0 + 2)[11:19])  # a 2 s step

    def test_long_titles_wrap(self):
        name = "a_" + "very_" * 40 + "long program name.py"
        log = self.write("long.jsonl", START.replace('"program":"gen"', '"program":"%s"' % name) +
                         "\n" + sample(1700001001.0, 100, 2097152) + "\n")
        svg = os.path.join(self.tmp.name, "t.svg")
        p, model = self.check_table([log], extra=["--plot", svg], wide=False)
        panels = self.check_svg(svg, model)
        self.assertGreaterEqual(len(panels[0].title_lines), 3)
        self.assertIn("\u2026", p.stdout.splitlines()[2])  # cut in the table, whole below
        self.assertIn("(%s)" % name, p.stdout)

    def test_titles_wrap_between_clauses(self):
        """The demo's title: "GPU 0 (UUID, nvidia-smi 0)" stays on one line."""
        rec = {"v": 2, "type": "start", "t": 1700000000.0, "pid": 4242,
               "program": "cumemcap-demo-workload", "host": "HOST", "argv": ["x"],
               "gpus": [{"gpu": 0, "uuid": "GPU-fa4ec0da-0000-4000-8000-000000000000", "index": 0,
                         "capacity": 17179869184, "limit": 4294967296}]}
        smp = {"v": 2, "type": "sample", "t": 1700000001.0, "pid": 4242,
               "gpus": [{"gpu": 0, "uuid": "GPU-fa4ec0da-0000-4000-8000-000000000000", "index": 0,
                         "live": 1 << 30, "reserved": 1 << 30}]}
        log = self.write("demo.jsonl", json.dumps(rec) + "\n" + json.dumps(smp) + "\n")
        svg = os.path.join(self.tmp.name, "demo.svg")
        p, model = self.check_table([log], extra=["--plot", svg], wide=False)
        pn = self.check_svg(svg, model)[0]
        self.assertEqual(pn.title_lines, [
            "cumemcap-demo-workload, pid 4242 on HOST,",
            "GPU 0 (GPU-fa4ec0da-0000-4000-8000-000000000000, nvidia-smi 0), limit 4.00 GiB"])

    def test_table_fits_a_terminal(self):
        paths = [fixture(n) for n in ("normal.jsonl", "killed.jsonl", "multi-a.jsonl",
                                      "multi-b.jsonl", "footprint.jsonl", "torn.jsonl",
                                      "v2-train.jsonl", "v2-eval.jsonl")]
        p, model = self.check_table(paths, wide=False)
        table = [line for line in p.stdout.split("\n\n")[0].splitlines()]
        self.assertLessEqual(max(len(line) for line in table), 100, table)
        wide = run(["--wide"] + paths).stdout
        self.assertGreater(max(len(line) for line in wide.split("\n\n")[0].splitlines()), 100)


# ---- rendering ---------------------------------------------------------------------------

def need(program):
    """The path of program, or skip (fail under CUMEMCAP_TEST_REQUIRE_PROGRAMS=1)."""
    import shutil
    path = shutil.which(program)
    if path is None:
        if os.environ.get("CUMEMCAP_TEST_REQUIRE_PROGRAMS") == "1":
            raise AssertionError("%s is required (CUMEMCAP_TEST_REQUIRE_PROGRAMS=1) but missing"
                                 % program)
        raise unittest.SkipTest("%s not installed" % program)
    return path


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG."""
    import struct
    import zlib
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


LIMIT_RGB = (0xd6, 0x27, 0x28)
REFUSAL_RGB = (0xff, 0x00, 0xff)
OOM_RGB = (0x11, 0x11, 0x11)


def near(a, b, tol=24):
    return all(abs(x - y) <= tol for x, y in zip(a, b))


class Rendering(Checks):
    """The plot as a person sees it: the report's own PNG (drawn by cairo,
    through the same drawing code as the SVG), read pixel by pixel where the
    SVG of the same logs puts each thing."""

    def setUp(self):
        if not HAVE_CAIRO:
            self.skipTest("this build has no cairo: no PNG")
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def render(self, logs, extra=(), kind="png"):
        svg = os.path.join(self.tmp.name, "plot.svg")
        p = run(["--plot", svg] + list(extra) + logs)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = os.path.join(self.tmp.name, "plot." + kind)
        p = run(["--plot", out] + list(extra) + logs)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("plot: %s (" % out, p.stdout)
        root = ET.parse(svg).getroot()
        panels = [Panel(g) for g in root.iter(SVG + "g") if g.get("class") == "panel"]
        size = (int(root.get("width")), int(root.get("height")))
        if kind == "pdf":
            with open(out, "rb") as f:
                data = f.read()
            self.assertTrue(data.startswith(b"%PDF-1."), data[:16])
            self.assertIn(b"%%EOF", data[-32:])
            self.assertGreater(len(data), 2000)
            # Rendered at 72 dpi a PDF point is a pixel: the SVG's coordinates hold.
            base = os.path.join(self.tmp.name, "pdf")
            subprocess.run([need("pdftoppm"), "-r", "72", "-png", "-singlefile", out, base],
                           check=True)
            out = base + ".png"
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertGreater(os.path.getsize(out), 2000)
        pixels = read_png(out)
        self.assertEqual(pixels[:2], size)
        return panels, pixels

    def log(self, name, pid, peak, limit=4 << 30, t=1700002000.0, refuse=False, oom=False,
            uuid="GPU-abcdef00-0000"):
        lines = [json.dumps({"v": 2, "type": "start", "t": t, "pid": pid, "program": name,
                             "host": "h", "gpus": [{"gpu": 0, "uuid": uuid, "limit": limit}]})]
        for i in range(5):
            lines.append(json.dumps({"v": 2, "type": "sample", "t": t + 1 + i, "pid": pid,
                                     "gpus": [{"gpu": 0, "live": peak // 2, "pooled": peak // 2,
                                               "reserved": peak}]}))
        if refuse:
            lines.append(json.dumps({"v": 2, "type": "refusal", "t": t + 2.5, "pid": pid, "gpu": 0,
                                     "requested": 1 << 29, "live": peak // 2, "pooled": 0,
                                     "reserved": peak // 2, "limit": limit}))
        if oom:
            lines.append(json.dumps({"v": 2, "type": "driver_oom", "t": t + 3.5, "pid": pid,
                                     "gpu": 0, "requested": 1 << 29, "reserved": peak // 2}))
        path = os.path.join(self.tmp.name, "%s.jsonl" % name)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def test_limit_visible_where_reserved_reaches_it(self):
        panels, (w, h, px) = self.render([self.log("full", 10, 4 << 30, refuse=True, oom=True)])
        pn = panels[0]
        y = int(pn.py(4 << 30))
        # Along the limit's row, inside the plot, the limit's colour shows
        # (its dashes over the reserved line, which sits at the same height).
        row = [px[y][x] for x in range(int(pn.x0) + 2, int(pn.x1) - 2)]
        share = sum(near(c, LIMIT_RGB) for c in row) / len(row)
        self.assertGreater(share, 0.5, "the limit line is hidden")
        # The refusal marker and the driver OOM marker are there to see.
        for (x1, _, _, _, (mx, my)), rgb in ((pn.marks["refusal"][0], REFUSAL_RGB),
                                             (pn.marks["driver-oom"][0], OOM_RGB)):
            box = [px[int(my) + dy][int(mx) + dx] for dy in range(-3, 4) for dx in range(-3, 4)]
            self.assertGreaterEqual(sum(near(c, rgb) for c in box), 25, rgb)
        # Nowhere is the refusal colour but at its marker (and the legend).
        spots = [(x, yy) for yy in range(int(pn.y0), int(pn.y1)) for x in range(w)
                 if near(px[yy][x], REFUSAL_RGB, 10)]
        mx = pn.marks["refusal"][0][4][0]
        self.assertTrue(spots)
        self.assertTrue(all(abs(x - mx) <= 8 for x, _ in spots), (mx, spots[:20]))

    def test_one_gpu_one_scale(self):
        """Two processes on one GPU, one with a 2 GiB limit, one with 8 GiB: on
        one scale the second limit line stands four times as high."""
        logs = [self.log("small", 11, 1 << 30, limit=2 << 30),
                self.log("big", 12, 7 << 30, limit=8 << 30, t=1700002003.0),
                self.log("other", 13, 1 << 28, limit=1 << 30, uuid="GPU-99999999-0000")]
        panels, (w, h, px) = self.render(logs)
        self.assertEqual([pn.pid for pn in panels], [11, 12, 13])
        heights = []
        for pn in panels[:2]:
            cols = range(int(pn.x0) + 2, int(pn.x1) - 2)
            rows = [y for y in range(int(pn.y0), int(pn.y1) + 1)
                    if sum(near(px[y][x], LIMIT_RGB) for x in cols) > len(cols) / 3]
            self.assertTrue(rows, "no limit line in panel %d" % pn.pid)
            heights.append(pn.y1 - sum(rows) / len(rows))
        self.assertAlmostEqual(heights[1] / heights[0], 4, delta=0.15)
        self.assertEqual(panels[0].xticks, panels[1].xticks)
        self.assertNotEqual(panels[0].yticks, panels[2].yticks)

    def test_pdf(self):
        """The PDF, read back: its magic and size, and rendered (pdftoppm), the
        limit's colour along the limit and the refusal's at its marker."""
        log = self.log("full", 10, 4 << 30, limit=6 << 30, refuse=True)
        panels, (w, h, px) = self.render([log], kind="pdf")
        pn = panels[0]
        y = round(pn.py(6 << 30))
        row = [px[y][x] for x in range(int(pn.x0) + 2, int(pn.x1) - 2)]
        self.assertGreater(sum(near(c, LIMIT_RGB) for c in row) / len(row), 0.5)
        mx, my = pn.marks["refusal"][0][4]
        self.assertTrue(near(px[round(my)][round(mx)], REFUSAL_RGB))
        # The PNG of the same logs: the same size, the limit on the same row.
        _, (w2, h2, png) = self.render([log])
        self.assertEqual((w2, h2), (w, h))
        row = [png[y][x] for x in range(int(pn.x0) + 2, int(pn.x1) - 2)]
        self.assertGreater(sum(near(c, LIMIT_RGB) for c in row) / len(row), 0.5)

    def test_png_too_tall(self):
        """More panels than a PNG can hold (32767 pixels): one line, status 1;
        the same as PDF is drawn."""
        lines = []
        for i in range(100):
            lines.append(json.dumps({"v": 2, "type": "start", "t": 1700003000.0 + i, "pid": 100 + i,
                                     "program": "p", "gpus": [{"gpu": 0, "uuid": "GPU-0",
                                                               "limit": 1 << 30}]}))
            lines.append(json.dumps({"v": 2, "type": "sample", "t": 1700003001.0 + i, "pid": 100 + i,
                                     "gpus": [{"gpu": 0, "live": 1 << 20, "reserved": 2 << 20}]}))
        log = os.path.join(self.tmp.name, "many.jsonl")
        with open(log, "w") as f:
            f.write("\n".join(lines) + "\n")
        png = os.path.join(self.tmp.name, "many.png")
        p = run(["--plot", png, log])
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, "cumemcap report: --plot %s: a PNG 33000 pixels tall is more "
                         "than cairo draws (32767 at most); pick fewer processes (--gpu, "
                         "--program, --since), or write .svg or .pdf\n" % png)
        pdf = os.path.join(self.tmp.name, "many.pdf")
        p = run(["--plot", pdf, log])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("plot: %s (100 panels)" % pdf, p.stdout)

    def test_plot_files_that_cannot_be_written(self):
        log = self.log("full", 10, 4 << 30, refuse=True)
        for ext in ("png", "pdf"):
            p = run(["--plot", "/nonexistent/x." + ext, log])
            self.assertEqual(p.returncode, 1)
            self.assertEqual(p.stderr, "cumemcap report: --plot /nonexistent/x.%s: cannot "
                             "create: No such file or directory\n" % ext)
            # A full disk: /dev/full under a name with the extension.
            if os.path.exists("/dev/full"):
                full = os.path.join(self.tmp.name, "full." + ext)
                os.symlink("/dev/full", full)
                p = run(["--plot", full, log])
                self.assertEqual(p.returncode, 1)
                self.assertEqual(p.stderr, "cumemcap report: --plot %s: cannot write: No space "
                                 "left on device\n" % full)


# ---- errors ---------------------------------------------------------------------------

class Groups(Checks):
    """Two members of group "jobs" on one GPU: no limit of their own, a budget
    of 8 GiB for both (fixtures group-a.jsonl and group-b.jsonl)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.paths = [fixture("group-a.jsonl"), fixture("group-b.jsonl")]

    def test_table_shows_the_group_and_its_budget(self):
        p, model = self.check_table(self.paths)
        table, procs, _ = parse_output(p.stdout)
        self.assertEqual(table[0], ["PID", "PROGRAM", "GPU", "LIMIT", "GROUP", "GROUP BUDGET",
                                    "PEAK LIVE", "PEAK RESERVED", "PEAK FOOTPRINT", "PEAK DRIVER",
                                    "CONTEXT", "REFUSALS", "DRIVER OOMS", "AVOIDED"])
        self.assertEqual([r[3:6] for r in table[1:]], [["none", "jobs", "8.00 GiB"]] * 2)
        self.assertIn("pid 3102 (train.py): exited; ran 8.0 s; started 2023-11-14 22:30:00 UTC "
                      "on node5; member of group jobs", procs)
        self.assertTrue(any(line.endswith("; group jobs budget 8.00 GiB, its members held at "
                                          "most 7.58 GiB") for line in procs), procs)
        # Without a group in the logs, no group columns.
        p = run([fixture("normal.jsonl")])
        self.assertNotIn("GROUP", p.stdout)
        self.assertNotIn("BUDGET", p.stdout)
        # A member next to a process in no group: "-" in both columns.
        p, _ = self.check_table(self.paths + [fixture("normal.jsonl")], wide=False)
        table, _, _ = parse_output(p.stdout)
        self.assertEqual(table[1][:6], ["4242", "train.py", "0", "4.00", "-", "-"])

    def test_json_has_the_group_fields(self):
        p = run(["--json"] + self.paths)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)["processes"]
        self.assertEqual([q["group"] for q in got], ["jobs", "jobs"])
        gib, mib = 1 << 30, 1 << 20
        for q, held in zip(got, (3 * gib + 300 * mib, 4 * gib + 300 * mib)):
            g = q["gpus"][0]
            self.assertEqual((g["limit_state"], g["limit"]), ("none", None))
            self.assertEqual((g["group_limit_state"], g["group_limit"]), ("set", 8 * gib))
            self.assertEqual(g["peak_group_used"], 7 * gib + 600 * mib)
            self.assertEqual(g["peak_group_held"], held)
        p = run(["--json", fixture("normal.jsonl")])
        g = json.loads(p.stdout)["processes"][0]
        self.assertEqual(g["group"], None)
        self.assertEqual((g["gpus"][0]["group_limit_state"], g["gpus"][0]["group_limit"]),
                         ("unknown", None))

    def test_budget_changed(self):
        """A group_change record: the budget it sets is the one shown."""
        with open(self.paths[0]) as f:
            lines = f.read().splitlines()
        change = json.dumps({"v": 2, "type": "group_change", "t": 1700001006.5, "pid": 3101,
                             "program": "prep.py", "host": "node5", "group": "jobs", "gpu": 0,
                             "uuid": "GPU-9a0b0000-1111-2222-3333-444444444444", "index": 2,
                             "changed_at": 1700001006.5, "by_uid": 0, "old_limit": 8 << 30,
                             "new_limit": 6 << 30})
        exit_rec = json.loads(lines[-1])
        del exit_rec["gpus"][0]["group_limit"]  # the change is the last word
        log = self.write("changed.jsonl", "\n".join(lines[:-1] + [change, json.dumps(exit_rec)]) + "\n")
        p, model = self.check_table([log])
        table, _, _ = parse_output(p.stdout)
        self.assertEqual(table[1][5], "6.00 GiB")
        # Lifted: null is no budget.
        log = self.write("lifted.jsonl", "\n".join(lines[:-1] + [change.replace(
            '"new_limit": %d' % (6 << 30), '"new_limit": null'), json.dumps(exit_rec)]) + "\n")
        p, model = self.check_table([log])
        table, procs, _ = parse_output(p.stdout)
        self.assertEqual(table[1][5], "none")
        self.assertTrue(procs[2].endswith("; group jobs without a budget here, its members held "
                                          "at most 7.58 GiB"), procs[2])

    def write(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(data)
        return path

    def test_group_panel(self):
        svg = os.path.join(self.tmp.name, "g.svg")
        p, model = self.check_table(self.paths, extra=["--plot", svg])
        self.assertIn("plot: %s (2 panels and 1 of a group)" % svg, p.stdout)
        panels = self.check_svg(svg, model)  # the members' panels, each with the budget line
        root = ET.parse(svg).getroot()
        found = [g for g in root.iter(SVG + "g") if g.get("class") == "group-panel"]
        self.assertEqual(len(found), 1)
        gp = Panel(found[0])
        self.assertEqual(found[0].get("data-group-name"), "jobs")
        self.assertEqual(gp.group, panels[0].group)  # on the GPU's axes
        labels = lambda pn: ([v for _, v in pn.yticks], [v for _, v in pn.xticks])
        self.assertEqual(labels(gp), labels(panels[0]))
        self.assertTrue(gp.title.startswith("group jobs on GPU 0 (GPU-9a0b0000-1111-2222-3333-"
                                            "444444444444), 2 members (pids 3101, 3102), budget "
                                            "8.00 GiB"), gp.title)
        gib, mib = 1 << 30, 1 << 20
        budget = gp.series["group-budget"]
        self.assertAlmostEqual(budget[0][1], gp.py(8 * gib), delta=TOL)
        # What the group held: the samples' group_used of both members, in time order.
        used = gp.series["group-used"]
        want = sorted([(1700001002.0 + 2 * i, v) for i, v in
                       enumerate((2 * gib + 600 * mib, 4 * gib + 600 * mib, 7 * gib + 600 * mib))] +
                      [(1700001002.5 + 2 * i, v) for i, v in
                       enumerate((2 * gib + 600 * mib, 4 * gib + 600 * mib, 7 * gib + 600 * mib))])
        t0 = 1700001000.0
        steps = [used[0]] + used[2:-1:2]  # where each sample's figure begins
        self.assertEqual(len(steps), len(want))
        for (x, y), (t, v) in zip(steps, want):
            self.assertAlmostEqual(x, gp.px(t - t0), delta=TOL)
            self.assertAlmostEqual(y, gp.py(v), delta=TOL)
        self.assertAlmostEqual(used[-1][0], gp.px(1700001008.5 - t0), delta=TOL)  # to the last record
        members = [path.get("data-pid") for path in found[0].iter(SVG + "path")
                   if path.get("class") == "series member"]
        self.assertEqual(members, ["3101", "3102"])
        self.assertEqual(len(gp.marks["refusal"]), 1)  # pid 3102's, at the group's budget
        label = next(t for t in found[0].iter(SVG + "text") if t.get("class") == "group-budget-label")
        self.assertEqual(label.text, "group jobs budget 8.00 GiB; its members held at most "
                                     "7.58 GiB (95%)")


def suggested(peak):
    """--suggest's limit for a peak: a tenth more, at least 256 MiB, rounded up
    to 256 MiB up to 4 GiB, 512 MiB up to 16 GiB, 1 GiB up to 64 GiB, else 4 GiB."""
    mib, gib = 1 << 20, 1 << 30
    want = min(peak + max(peak * 10 // 100, 256 * mib), U64)
    step = 256 * mib if want <= 4 * gib else 512 * mib if want <= 16 * gib else \
        gib if want <= 64 * gib else 4 * gib
    up = -(-want // step) * step
    return up if up <= U64 else want - want % step


def typed(v):
    mib, gib = 1 << 20, 1 << 30
    if v % gib == 0 and v:
        return "%dGiB" % (v // gib)
    if v % (gib // 4) == 0 and v > gib:
        return ("%.2f" % (v / gib)).rstrip("0") + "GiB"
    return "%dMiB" % (v // mib) if v % mib == 0 and v else str(v)


class Suggest(Checks):
    """cumemcap report --suggest, against what the model of the logs says."""

    def expected(self, model):
        """{(program, ordinal): (runs, refused runs, top peak)} and the same for groups."""
        programs, groups_ = {}, {}
        for p in model.procs:
            for g in p.shown():
                if not g.used():
                    continue
                ctx = model.context(g)[0]
                if g.peak["footprint"] is not None:
                    peak = g.peak["footprint"]
                elif g.peak["reserved"] is not None:
                    peak = g.peak["reserved"] + (ctx or 0)
                else:
                    continue
                refused = max(g.refusal_events, g.exit_refusals or 0) > 0
                key = (p.program or "-", g.ordinal)
                runs, ref, top = programs.get(key, (0, 0, 0))
                programs[key] = (runs + 1, ref + refused, max(top, peak))
                if p.group is not None:
                    k = (p.group, g.uuid.lower() if g.uuid else g.ordinal)
                    runs, ref, top = groups_.get(k, (0, 0, None))
                    used = g.peak_group_used
                    top = used if top is None or (used is not None and used > top) else top
                    groups_[k] = (runs + 1, ref + refused, top)
        return programs, groups_

    def test_every_fixture(self):
        paths = sorted(fixture(n) for n in os.listdir(FIXTURES) if n.endswith(".jsonl"))
        model = Model(paths)
        programs, groups_ = self.expected(model)
        p = run(["--suggest", "--bytes"] + paths)
        self.assertEqual(p.returncode, 0, p.stderr)
        blocks = p.stdout.split("\n\n")
        self.assertTrue(blocks[0].startswith("The smallest limit that would have let every "
                                             "logged run finish without a refusal:"))
        table = [re.split(r"  +", line.strip()) for line in blocks[1].splitlines()]
        self.assertEqual(table[0], ["PROGRAM", "GPU", "RUNS", "PEAK FOOTPRINT", "LIVE", "CACHED",
                                    "OVERHEAD", "REFUSED", "SUGGESTED LIMIT"])
        got = {}
        for row in table[1:]:
            program, gpu, runs, peak, live, cached, overhead, refused, limit = row
            # What the peak was made of adds up to it.
            self.assertEqual(int(live) + int(cached) + int(overhead), int(peak), row)
            got[(program, int(gpu))] = (int(runs), int(refused), int(peak), limit)
        want = {(safe(k[0]), k[1]): v for k, v in programs.items()}
        self.assertEqual(sorted(got), sorted(want))
        for key, (runs, refused, peak) in want.items():
            self.assertEqual(got[key][:3], (runs, refused, peak), key)
            self.assertEqual(got[key][3], typed(suggested(peak)) + (" (at least)" if refused else ""),
                             key)
        gtable = [re.split(r"  +", line.strip()) for line in blocks[2].splitlines()]
        self.assertEqual(gtable[0], ["GROUP", "GPU", "MEMBERS", "PEAK HELD", "REFUSED",
                                     "SUGGESTED BUDGET"])
        self.assertEqual(len(gtable), 1 + len(groups_))
        (members, refused, top), = groups_.values()
        self.assertEqual(gtable[1], ["jobs", "0", str(members), str(top), str(refused),
                                     typed(suggested(top)) + " (at least)"])

    def test_what_a_user_reads(self):
        p = run(["--suggest", fixture("v2-train.jsonl"), fixture("group-a.jsonl"),
                 fixture("group-b.jsonl")])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, """\
The smallest limit that would have let every logged run finish without a refusal:
the highest peak footprint, plus a tenth (at least 256 MiB), rounded up.

PROGRAM   GPU  RUNS  PEAK FOOTPRINT      LIVE  CACHED    OVERHEAD  REFUSED  SUGGESTED LIMIT
prep.py   0       1        3.29 GiB  3.00 GiB     0 B  300.00 MiB        0  3.75GiB
train.py  0       2        4.29 GiB  4.00 GiB     0 B  300.00 MiB        2  5GiB (at least)

GROUP  GPU  MEMBERS  PEAK HELD  REFUSED  SUGGESTED BUDGET
jobs   0          2   7.58 GiB        1  8.5GiB (at least)

prep.py on GPU 0: the highest peak, 3.29 GiB, was pid 3101 on node5
train.py on GPU 0: the highest peak, 4.29 GiB, was pid 1 on node-a; 2 of 2 runs were refused at a limit (pid 1 on node-a, pid 3102 on node5): they wanted more than they got, so the peak is only a lower bound, and so is 5GiB; run it again with 5GiB (or none) to learn the rest
group jobs on GPU 0: its members held at most 7.58 GiB at once; 1 of 2 members was refused at a limit (pid 3102 on node5): it wanted more than it got, so the peak is only a lower bound, and so is 8.5GiB; run the group again with a budget of 8.5GiB (or none) to learn the rest

In a configuration file (cumemcap.conf):
  [program prep.py]
  limit = 3.75GiB
  [program train.py]
  limit = 5GiB
For a group, in the environment of its members:
  CUMEMCAP_GROUP=jobs CUMEMCAP_GROUP_LIMIT=8.5GiB
""")

    def test_json(self):
        paths = [fixture("v2-train.jsonl"), fixture("group-a.jsonl"), fixture("group-b.jsonl"),
                 fixture("multi-a.jsonl")]
        model = Model(paths)
        programs, groups_ = self.expected(model)
        p = run(["--suggest", "--json"] + paths)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)
        self.assertEqual(got["margin"], {"percent": 10, "min": 256 << 20})
        self.assertEqual(sorted((q["program"], q["gpu"]) for q in got["programs"]), sorted(programs))
        for q in got["programs"]:
            runs, refused, peak = programs[(q["program"], q["gpu"])]
            self.assertEqual((q["runs"], q["refused_runs"], q["peak_footprint"]), (runs, refused, peak))
            self.assertEqual(q["lower_bound"], refused > 0)
            self.assertEqual(q["live"] + q["cached"] + q["overhead"], peak)
            self.assertEqual((q["limit"], q["limit_text"]), (suggested(peak), typed(suggested(peak))))
            self.assertEqual(len(q["refused_pids"]), refused)
        (g,) = got["groups"]
        (members, refused, top), = groups_.values()
        self.assertEqual((g["group"], g["members"], g["refused_members"], g["peak_used"]),
                         ("jobs", members, refused, top))
        self.assertEqual((g["budget"], g["budget_text"], g["lower_bound"], g["refused_pids"]),
                         (suggested(top), typed(suggested(top)), True, [3102]))
        # Per GPU where a program's GPUs need different limits.
        p = run(["--suggest", fixture("multi-a.jsonl")])
        self.assertIn("  [program serve]\n  device_limits = 0=5GiB,1=11.5GiB\n", p.stdout)

    def test_usage(self):
        p = run(["--suggest", "--wide", fixture("normal.jsonl")])
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr, "cumemcap report: --wide is about the table, which --suggest "
                                   "replaces; give one of them; usage: cumemcap report [OPTIONS] "
                                   "LOG|DIR|-...\n")


class Errors(unittest.TestCase):
    def one_line(self, p, status, pattern):
        self.assertEqual(p.returncode, status, p.stderr)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertRegex(lines[0], pattern)
        return lines[0]

    def test_usage(self):
        log = fixture("normal.jsonl")
        usage = r"; usage: cumemcap report \[OPTIONS\] LOG\|DIR\|-\.\.\.$"
        cases = [
            ([], "^cumemcap report: no LOG given" + usage),
            (["--plot"], "^cumemcap report: --plot needs a value" + usage),
            (["--since", "yesterday", log], '^cumemcap report: --since "yesterday": not a time; '
             r'give a duration back from now \(90s, 30m, 1h, 2d\) or a time' + ".*" + usage),
            (["--since", "2023-02-30", log], '^cumemcap report: --since "2023-02-30": not a time'),
            (["--gpu", "x1", log], '^cumemcap report: --gpu "x1": not a GPU; give nvidia-smi\'s '
             r"index \(0, 1, \.\.\.\) or a UUID or its start" + ".*" + usage),
            (["--time", "local", "--plot", "a.svg", log],
             '^cumemcap report: --time "local": give elapsed or wall' + usage),
            (["--time", "wall", log], "^cumemcap report: --time is about the plot; give --plot FILE too" + usage),
            (["--plot", "-", "--json", log], "^cumemcap report: --plot - and --json both write"),
            (["-", "-"], r"^cumemcap report: - \(standard input\) given twice" + usage),
            (["--bogus", log], '^cumemcap report: unknown option "--bogus"' + usage),
            (["-x", log], '^cumemcap report: unknown option "-x"' + usage),
            (["--plot", "a.svg", "--plot", "b.svg", log],
             "^cumemcap report: --plot given twice" + usage),
            (["--plot", "a.svg"], "^cumemcap report: no LOG given" + usage),
        ]
        for args, pattern in cases:
            with self.subTest(args=args):
                p = run(args)
                self.one_line(p, 2, pattern)
                self.assertEqual(p.stdout, "")
        p = run(["--help"])
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertTrue(p.stdout.startswith("Usage: cumemcap report"))
        # The shape the man page generator reads: sections whose heading ends
        # with ":", then "  --flag ARG   text" lines.
        for heading in ("Inputs:", "Options:", "Exit status:"):
            self.assertIn("\n" + heading + "\n", p.stdout)
        for flag in ("--plot FILE", "--time KIND", "--gpu N|UUID", "--program NAME", "--since TIME",
                     "--suggest", "--json", "--wide", "--bytes", "--version"):
            self.assertRegex(p.stdout, r"\n  %s  " % re.escape(flag))
        self.assertIn("(this build has cairo)" if HAVE_CAIRO else "this build has no PNG or PDF",
                      p.stdout)
        p = run(["--version"])
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertRegex(p.stdout, r"^cumemcap report \d+\.\d+\.\d+\n$")
        # Options after the LOGs, as in `cumemcap report LOG --plot FILE`;
        # after "--", a LOG may start with "-".
        with tempfile.TemporaryDirectory() as tmp:
            svg = os.path.join(tmp, "after.svg")
            p = run([log, "--plot", svg, "--bytes"])
            self.assertEqual((p.returncode, p.stderr), (0, ""))
            self.assertTrue(os.path.exists(svg))
            self.assertIn(" 4294967296 ", p.stdout)
            self.one_line(run(["--", "-odd.jsonl"]), 1,
                          r"^cumemcap report: -odd\.jsonl: cannot open: No such file or directory$")

    def test_plot_formats_by_name(self):
        with tempfile.TemporaryDirectory() as tmp:
            names = ("x.svg.jpg", "plot.eps") + (() if HAVE_CAIRO else ("out.png", "out.PDF"))
            for name in names:
                target = os.path.join(tmp, name)
                with self.subTest(name=name):
                    p = run(["--plot", target, fixture("normal.jsonl")])
                    ext = os.path.splitext(name)[1]
                    if ext.lower() in (".png", ".pdf"):
                        self.one_line(p, 2, r'^cumemcap report: --plot "%s": this build has no %s '
                                      r'\(it was built without cairo\); give a FILE ending in \.svg$'
                                      % (re.escape(target), ext[1:].upper()))
                    else:
                        self.one_line(p, 2, r'^cumemcap report: --plot "%s": only %s is supported '
                                      r'\(no %s\); give a FILE ending in %s$'
                                      % (re.escape(target), "SVG, PNG or PDF" if HAVE_CAIRO else "SVG",
                                         re.escape(ext), r"\.svg, \.png or \.pdf" if HAVE_CAIRO
                                         else r"\.svg"))
                    self.assertFalse(os.path.exists(target))
                    self.assertEqual(p.stdout, "")
            self.one_line(run(["--plot=", fixture("normal.jsonl")]), 2,
                          r'^cumemcap report: --plot "": not a file name')
            p = run(["--plot", "/nonexistent/dir/x.svg", fixture("normal.jsonl")])
            self.one_line(p, 1, r"^cumemcap report: --plot /nonexistent/dir/x\.svg: cannot "
                          r"create: No such file or directory$")
            self.assertIn("RESERVED", p.stdout)  # the table still printed

    def test_files_that_cannot_be_read(self):
        with tempfile.TemporaryDirectory() as tmp:
            missing = os.path.join(tmp, "missing.jsonl")
            self.one_line(run([missing]), 1, r"^cumemcap report: %s: cannot open: No such file "
                          r"or directory$" % re.escape(missing))
            self.one_line(run([tmp]), 1, r"^cumemcap report: %s: no \*\.jsonl file in this "
                          r"directory; expected the footprint logs CUMEMCAP_LOG writes$"
                          % re.escape(tmp))
            # One good file and one missing: the good one is reported, status 1.
            p = run([fixture("normal.jsonl"), missing])
            self.one_line(p, 1, "cannot open")
            self.assertIn("train.py", p.stdout)

    def test_no_record_anywhere(self):
        with tempfile.TemporaryDirectory() as tmp:
            empty = os.path.join(tmp, "empty.jsonl")
            open(empty, "w").close()
            junk = os.path.join(tmp, "junk.jsonl")
            with open(junk, "w") as f:
                f.write('{"level":"info","msg":"not ours"}\n\n')
            accepted = (r"expected the JSON Lines log CUMEMCAP_LOG writes, one "
                        r'\{"v":2,"type":\.\.\.\} object a line$')
            p = run([empty])
            self.one_line(p, 1, r"^cumemcap report: no cumemcap record in %s; %s"
                          % (re.escape(empty), accepted))
            self.assertEqual(p.stdout, "")
            p = run([empty, junk])
            self.assertEqual(p.returncode, 1)
            self.assertEqual(p.stderr.splitlines(), [
                '%s:1: not a cumemcap record (one needs "v", "type", "t" or "time", and '
                '"pid"); skipped' % junk,
                "cumemcap report: no cumemcap record in %s, %s; expected the JSON Lines log "
                'CUMEMCAP_LOG writes, one {"v":2,"type":...} object a line' % (empty, junk)])
            # Beside a good log, an empty one is noted and the rest reported.
            p = run([empty, fixture("normal.jsonl")])
            self.assertEqual(p.returncode, 0)
            self.assertIn("no cumemcap record in %s;" % empty, p.stderr)

    def test_standard_output_full(self):
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full")
        with open("/dev/full", "w") as full:
            p = subprocess.run([REPORT, fixture("normal.jsonl")], stdout=full,
                               stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr, r"^cumemcap report: standard output: No space left on device\n$")


if __name__ == "__main__":
    unittest.main(verbosity=2)
