#!/usr/bin/python3
"""perf-cpu-ab.py — CPU seconds per GB of mroce perf builds or settings, alternated.

usage: scripts/perf-cpu-ab.py REPS NAME=BIN[:ARGS] [NAME=BIN[:ARGS] ...]

Each repetition runs, for every variant in an order that reverses every other repetition,
a 64 KiB WRITE bandwidth run of a fixed count (-n 20000, 1.31 GB; `MROCE_CPU_AB_N` to
change it) of `BIN perf` with the variant's extra ARGS (`raw=build/mroce:--raw`), pinned as
scripts/perf-loopback.py pins them (client CPU 0, server CPU 1), and reads each process's
own user and system CPU time from the kernel (wait4). A run of fixed size, not of fixed
time: the CPU a GB costs, whatever the machine's noise does to the rate. Prints every run,
then per variant the medians (client user and system, server, both) and the paired ratios
to the first variant (the median of the per-repetition ratios). Copy each binary first: a
rebuild under a running comparison corrupts it.
"""
import importlib.util
import os
import statistics
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("perf_loopback", os.path.join(_here, "perf-loopback.py"))
perf_loopback = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(perf_loopback)


def run_once(binary, extra, messages):
    r = perf_loopback.perf(binary, ["-s", "65536", "-n", str(messages)] + extra)
    gb = r["bytes"] / 1e9
    return {"client_user": r["cpu_client_user_s"] / gb,
            "client_sys": (r["cpu_client_s"] - r["cpu_client_user_s"]) / gb,
            "client": r["cpu_client_s"] / gb, "server": r["cpu_server_s"] / gb}


def main():
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        sys.exit(__doc__.split("\n\n")[1])
    reps = int(sys.argv[1])
    messages = int(os.environ.get("MROCE_CPU_AB_N", "20000"))
    variants = perf_loopback.parse_variants(sys.argv[2:], "perf-cpu-ab.py")
    runs = {name: [] for name, _, _ in variants}
    for r in range(reps):
        for name, binary, extra in (variants if r % 2 == 0 else variants[::-1]):
            m = run_once(binary, extra, messages)
            m["both"] = m["client"] + m["server"]
            runs[name].append(m)
            print(f"rep {r} {name}: client {m['client']:.3f} s/GB (user {m['client_user']:.3f}, "
                  f"system {m['client_sys']:.3f}), server {m['server']:.3f}, both {m['both']:.3f}",
                  flush=True)
    base = variants[0][0]
    print(f"\nmedians of {reps} (CPU seconds per GB; ratio to {base}, paired per repetition)")
    for name, _, _ in variants:
        def med(k):
            return statistics.median(m[k] for m in runs[name])

        def ratio(k):
            return statistics.median(a[k] / b[k] for a, b in zip(runs[name], runs[base]))
        print(f"{name:12} client {med('client'):.3f} ({ratio('client'):.3f}; user {med('client_user'):.3f}, "
              f"system {med('client_sys'):.3f})  server {med('server'):.3f} ({ratio('server'):.3f})  "
              f"both {med('both'):.3f} ({ratio('both'):.3f})")


if __name__ == "__main__":
    main()
