#!/usr/bin/env python3
"""Diagnostic: where one slurmctld thread spends its samples in a perf.data.

Usage: bench/diag/perf_by_thread.py PERF_DATA [FUNCTION]

Picks the thread whose call chains most often contain FUNCTION (default
_sched_agent: Slurm's main scheduler thread, which runs _schedule) and prints
its sample count, then the functions its samples stop in (self) and the
functions on their call chains (inclusive). Used on the perf.data that
bench/sched_cost.sh keeps with CELLSCHED_BENCH_PERF=1. Needs perf.
"""
import collections
import subprocess
import sys


def stacks(path):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "tid,ip,sym"], capture_output=True, text=True, check=True).stdout
    cur = None
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            if cur:
                yield cur
            cur = (line.split()[0], [])
            continue
        parts = line.split(None, 1)
        cur[1].append(parts[1] if len(parts) > 1 else "?")
    if cur:
        yield cur


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path, fn = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "_sched_agent"
    all_stacks = list(stacks(path))
    by_tid = collections.Counter(t for t, _ in all_stacks)
    owners = collections.Counter(t for t, s in all_stacks if any(fn in f for f in s))
    if not owners:
        sys.exit(f"no samples with {fn} in {path}")
    tid = owners.most_common(1)[0][0]
    mine = [s for t, s in all_stacks if t == tid]
    print(f"{path}: {len(all_stacks)} samples; thread {tid} (the one running {fn}): {len(mine)}")
    print("busiest threads:", ", ".join(f"{t} {n}" for t, n in by_tid.most_common(6)))
    print("self:")
    for f, n in collections.Counter(s[0] for s in mine).most_common(25):
        print(f"  {n:6d} {f}")
    incl = collections.Counter()
    for s in mine:
        incl.update(set(s))
    print("inclusive:")
    for f, n in incl.most_common(30):
        print(f"  {n:6d} {f}")


if __name__ == "__main__":
    main()
