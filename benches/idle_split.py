#!/usr/bin/env python3
"""Where a two-core machine's idle time sits (benches/postgres_cpu.sh, IDLE=1): from a
`perf script` dump of `sched:sched_switch` over every CPU, each CPU's idle time, how much of
the span both CPUs idled at once (nothing runs: a flush or a wake-up is awaited), and, while
exactly one idled, what the other ran, by process. A machine that idles while one process runs alone has work
that cannot spread over both cores (a statement every caller waits for), not work that waits
on a device.

    perf record -a -e sched:sched_switch -o sched.data -- sleep 2
    perf script -i sched.data -F cpu,time,event,trace > sched.txt
    python3 benches/idle_split.py sched.txt NAME=TID,TID... [NAME=TID,...]

Each NAME=TIDS names a process by its threads' ids (`ls /proc/PID/task`), and each of those
threads is shown with its command; a thread in none of them is named by its command alone
(`postgres` for PostgreSQL's processes).
"""
import collections
import re
import sys

SWITCH = re.compile(
    r"\[(\d+)\]\s+([\d.]+): sched:sched_switch: prev_comm=.*? prev_pid=\d+ .*"
    r"==> next_comm=(.*?) next_pid=(\d+)"
)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    names = {}
    for arg in sys.argv[2:]:
        name, _, tids = arg.partition("=")
        for tid in filter(None, tids.split(",")):
            names[int(tid)] = name

    running = {}  # cpu -> the name of what it runs (None: idle)
    idle = collections.Counter()  # cpu -> seconds idle
    both = 0.0
    beside = collections.Counter()  # what ran on the other CPU while one idled
    first = last = None
    with open(sys.argv[1]) as dump:
        for line in dump:
            m = SWITCH.search(line)
            if not m:
                continue
            cpu, at = int(m.group(1)), float(m.group(2))
            if last is not None and len(running) == 2:
                span = at - last
                idling = [c for c, what in running.items() if what is None]
                for c in idling:
                    idle[c] += span
                if len(idling) == 2:
                    both += span
                elif len(idling) == 1:
                    other = next(w for c, w in running.items() if c != idling[0])
                    beside[other] += span
            last = at
            comm, tid = m.group(3), int(m.group(4))
            if tid == 0:
                running[cpu] = None
            else:
                thread = comm.split("/")[0]
                running[cpu] = f"{names[tid]} ({thread})" if tid in names else thread
            if len(running) == 2 and first is None:
                first = at
    if first is None or len(running) != 2 or last <= first:
        sys.exit(
            "no sched_switch lines in the raw format (prev_comm=... ==> next_comm=... "
            "next_pid=...) from two CPUs: this reads a two-core machine's `perf script`"
        )
    span = last - first
    total = sum(idle.values())
    each = ", ".join(f"CPU {cpu} {idle[cpu] / span:.1%}" for cpu in sorted(running))
    print(f"over {span:.2f} s: the two CPUs idle {total / span / 2:.1%} of their time ({each})")
    print(f"  both at once: {both / span:.1%} of the span")
    alone = total - 2 * both
    if alone <= 0:
        return
    print("  while exactly one idled, the other ran (share of that time):")
    shown = beside.most_common(6)
    for what, seconds in shown:
        print(f"    {what:<32} {seconds / alone:.0%}")
    rest = alone - sum(seconds for _, seconds in shown)
    if rest > 0:
        print(f"    {'the rest':<32} {rest / alone:.0%}")


main()
