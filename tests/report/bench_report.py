#!/usr/bin/env python3
"""Benchmark of cumemcap report on one log that holds many processes.

    bench_report.py CUMEMCAP-REPORT [PROCESSES] [BOUND-SECONDS]

Writes one schema v2 log of PROCESSES processes (default 20000; each a
start record, two segments, a sample, a refusal and an exit record, so
every record type that is found by its process is there), then times
`cumemcap-report LOG` and `cumemcap-report --suggest LOG` (best of three
runs each) and prints their seconds, wall clock and CPU (user + system),
the table's against its target, BOUND-SECONDS (default 2), with `ok` or
`MISSES TARGET`: CPU time, which is what the wall clock is on an idle
machine and does not grow when other jobs share the cores. A miss leaves
the exit status alone (a benchmark is not a timed assertion); a report
that fails makes it non-zero. Run by `meson test --benchmark`
(benchmark 'report-20000-processes'), not by the test suite: a time bound
says nothing about a loaded build machine."""
import os
import resource
import subprocess
import sys
import tempfile
import time

GIB = 1 << 30


def write_log(path, n):
    with open(path, "w") as f:
        for i in range(n):
            pid = 1000 + i
            t = 1700000000.0 + i * 0.01
            head = '"v":2,"pid":%d,"program":"job%d","host":"node1"' % (pid, i % 7)
            uuid = "GPU-00000000-0000-4000-8000-%012d" % (i % 4)
            gpu = '"gpu":0,"uuid":"%s","index":%d' % (uuid, i % 4)
            f.write('{%s,"type":"start","t":%.3f,"uid":1000,"argv":["python3","job.py"],'
                    '"gpus":[{%s,"pci":"0000:41:00.0","capacity":%d,"limit":%d}]}\n'
                    % (head, t, gpu, 80 * GIB, 4 * GIB))
            for k in (1, 2):
                f.write('{%s,"type":"segment","t":%.3f,%s,"op":"take","bytes":%d,'
                        '"live":%d,"pooled":0,"reserved":%d,"footprint":%d}\n'
                        % (head, t + k, gpu, GIB, (k - 1) * GIB, k * GIB, k * GIB + (300 << 20)))
            f.write('{%s,"type":"sample","t":%.3f,"gpus":[{%s,"live":%d,"pooled":0,'
                    '"reserved":%d,"footprint":%d,"overhead":%d,"driver_used":%d,'
                    '"context_overhead":%d,"overhead_source":"nvml"}],"events_dropped":0}\n'
                    % (head, t + 3, gpu, 2 * GIB, 2 * GIB, 2 * GIB + (300 << 20), 300 << 20,
                       2 * GIB + (300 << 20), 300 << 20))
            f.write('{%s,"type":"refusal","t":%.3f,%s,"requested":%d,"door":"cuMemAlloc_v2",'
                    '"live":%d,"pooled":0,"reserved":%d,"footprint":%d,"limit":%d}\n'
                    % (head, t + 4, gpu, 4 * GIB, 2 * GIB, 2 * GIB, 2 * GIB + (300 << 20),
                       4 * GIB))
            f.write('{%s,"type":"exit","t":%.3f,"reason":"exit","gpus":[{%s,"limit":%d,'
                    '"peak_live":%d,"peak_reserved":%d,"peak_footprint":%d,"refusals":1,'
                    '"driver_oom":0,"allocs":3,"avoided":1}]}\n'
                    % (head, t + 5, gpu, 4 * GIB, 2 * GIB, 2 * GIB, 2 * GIB + (300 << 20)))


def best_of(cmd, runs=3):
    """The least (wall, CPU) seconds of `runs` runs."""
    wall = cpu = None
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        took = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if p.returncode != 0:
            sys.exit("%s: exit status %d: %s" % (" ".join(cmd), p.returncode,
                                                p.stderr.decode(errors="replace")))
        wall = took if wall is None else min(wall, took)
        cpu = used if cpu is None else min(cpu, used)
    return wall, cpu


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    report = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    bound = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "many.jsonl")
        write_log(log, n)
        size = os.path.getsize(log)
        print("load average %.2f, %d CPUs" % (os.getloadavg()[0], os.cpu_count()))
        wall, cpu = best_of([report, log])
        print("cumemcap report: %d processes, one log of %.1f MB: %.2f s wall, %.2f s CPU "
              "(target: under %.1f s CPU) %s" % (n, size / 1e6, wall, cpu, bound,
                                                  "ok" if cpu < bound else "MISSES TARGET"))
        swall, scpu = best_of([report, "--suggest", log])
        print("cumemcap report --suggest: %.2f s wall, %.2f s CPU" % (swall, scpu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
