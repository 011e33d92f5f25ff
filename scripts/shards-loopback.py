#!/usr/bin/python3
"""shards-loopback.py — a device with 1 vs N threads serving two clients at once over
127.0.0.1 (bench/shards_bench; docs/design.md §12; the numbers behind docs/results.md
"More than one core per endpoint").

Each repetition runs shards_bench once with --threads 1 and once with --threads N, in an
order that alternates per repetition, and prints every run, then the medians of the
aggregate goodput, of each server thread's CPU seconds and of the server's CPU seconds
per GB placed, with the paired ratio N : 1 of the goodput.

    scripts/shards-loopback.py build/bench/shards_bench --reps 5 --seconds 3 --threads 2
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(bench, threads, args, seed):
    cmd = [bench, "--threads", str(threads), "--seconds", str(args.seconds),
           "--size", str(args.size), "--depth", str(args.depth), "--seed", str(seed)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    r = json.loads(out.stdout)
    server = {k: v for k, v in r["cpu_s"].items()
              if k.startswith("mroce-shard") or (threads == 1 and k.startswith("mroce-progress"))}
    r["server_threads_cpu_s"] = sorted(server.values(), reverse=True)
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bench")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seconds", type=float, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--size", type=int, default=65536)
    p.add_argument("--depth", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    print(f"seed {args.seed}; {args.reps} reps x {args.seconds} s, 2 clients, "
          f"WRITE {args.size} B, {args.depth} outstanding each")
    runs = {1: [], args.threads: []}
    ratios = []
    for rep in range(args.reps):
        order = [1, args.threads] if rep % 2 == 0 else [args.threads, 1]
        got = {}
        for t in order:
            r = run(args.bench, t, args, args.seed + rep)
            got[t] = r
            runs[t].append(r)
            print(f"rep {rep} threads {t}: {r['gbps']:.2f} Gbit/s (clients {r['clients_gbps']}), "
                  f"server threads cpu_s {[round(x, 2) for x in r['server_threads_cpu_s']]}, "
                  f"server cpu s/GB {r['server_cpu_s_per_gb']:.3f}, all threads {r['cpu_s']}",
                  flush=True)
        ratios.append(got[args.threads]["gbps"] / got[1]["gbps"])
    print("\nmedians:")
    for t, rs in runs.items():
        width = max(len(r["server_threads_cpu_s"]) for r in rs)
        per_thread = [statistics.median(r["server_threads_cpu_s"][i] if i < len(r["server_threads_cpu_s"]) else 0
                                        for r in rs) for i in range(width)]
        print(f"threads {t}: {statistics.median(r['gbps'] for r in rs):.2f} Gbit/s, "
              f"server thread cpu_s (busiest first) {[round(x, 2) for x in per_thread]} "
              f"over {args.seconds} s, server cpu s/GB "
              f"{statistics.median(r['server_cpu_s_per_gb'] for r in rs):.3f}")
    print(f"paired goodput ratio threads {args.threads} : 1, median {statistics.median(ratios):.3f} "
          f"(each: {[round(x, 3) for x in ratios]})")


if __name__ == "__main__":
    sys.exit(main())
