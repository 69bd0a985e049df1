#!/usr/bin/env python3
"""Times commands in alternation: one round runs each command once, in an order
shuffled from round to round (seeded: the same on every run of the script), so
that a change of load on a shared machine falls on every command alike
(hyperfine runs all of one command, then all of the next) and no command
always follows the same one. Before each timed run, --prepare runs untimed (a
fresh copy of a database, say). Prints, for each command after the first, one
line comparing it with the first: median wall time, median CPU time (user +
system of the command and its children), the ratio of the medians, the range
of the per-round ratios (which shows how much the load moved) and the ratio of
CPU. Each round's times go to stderr.

usage: alternate.py [--rounds N] [--warmup N] [--prepare CMD] NAME CMD NAME CMD ...
"""
import argparse
import random
import resource
import statistics
import subprocess
import sys
import time


def run(command, prepare):
    if prepare:
        subprocess.run(prepare, shell=True, check=True, executable="/bin/bash", stdout=sys.stderr)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, shell=True, executable="/bin/bash", stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"alternate.py: exit status {done.returncode} from: {command}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def seconds(t):
    return f"{t:.2f} s" if t >= 0.1 else f"{t * 1000:.1f} ms"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--prepare", default="", help="shell command run untimed before every run")
    parser.add_argument("pairs", nargs="+", metavar="NAME CMD")
    args = parser.parse_args()
    if len(args.pairs) < 4 or len(args.pairs) % 2:
        parser.error("give at least two NAME CMD pairs")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    names, commands = args.pairs[0::2], args.pairs[1::2]
    n = len(names)
    wall = [[] for _ in range(n)]
    cpu = [[] for _ in range(n)]
    shuffle = random.Random(1)
    for round_ in range(args.warmup + args.rounds):
        order = list(range(n))
        shuffle.shuffle(order)
        for i in order:
            w, c = run(commands[i], args.prepare)
            if round_ >= args.warmup:
                wall[i].append(w)
                cpu[i].append(c)
        if round_ >= args.warmup:
            print(f"round {round_ - args.warmup + 1}/{args.rounds}: "
                  + ", ".join(f"{names[i]} {seconds(wall[i][-1])}" for i in range(n)), file=sys.stderr)
    first_wall, first_cpu = statistics.median(wall[0]), statistics.median(cpu[0])
    for i in range(1, n):
        w, c = statistics.median(wall[i]), statistics.median(cpu[i])
        verdict = f"{w / first_wall:.2f}x faster" if w >= first_wall else f"{first_wall / w:.2f}x slower"
        per_round = sorted(a / b for a, b in zip(wall[0], wall[i]))
        print(f"{names[0]}: median {seconds(first_wall)} ({seconds(first_cpu)} CPU) | "
              f"{names[i]}: median {seconds(w)} ({seconds(c)} CPU) | {names[0]} is {verdict}; "
              f"{args.rounds} rounds alternated, {names[0]} took {per_round[0]:.2f}-{per_round[-1]:.2f}x "
              f"the time of {names[i]} per round and "
              + (f"{first_cpu / c:.2f}x its CPU" if c > 0 else "its CPU too small to compare"))


if __name__ == "__main__":
    main()
