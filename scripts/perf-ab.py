#!/usr/bin/python3
"""perf-ab.py — mroce perf builds or settings side by side on 127.0.0.1, alternated.

usage: scripts/perf-ab.py REPS NAME=BIN[:ARGS] [NAME=BIN[:ARGS] ...]

Each repetition runs, for every variant in an order that rotates per repetition, a 64 KiB
WRITE bandwidth run (-D 3) and an 8-byte WRITE latency run (-n 20000) of `BIN perf` with
the variant's extra ARGS (space-separated, e.g. `main=build/mroce:--no-hint` or
`raw=build/mroce:--raw`), pinned as scripts/perf-loopback.py pins them (client CPU 0,
server CPU 1). Prints every run, then per variant the medians of goodput, CPU seconds of
both processes per GB placed, latency p50 and p99, each with its ratio to the first
variant, paired per repetition (the median of the per-repetition ratios). For comparing
two builds of a change: copy each binary first, a rebuild under a running comparison
corrupts it.
"""
import importlib.util
import os
import statistics
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("perf_loopback", os.path.join(_here, "perf-loopback.py"))
perf_loopback = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(perf_loopback)


def main():
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        sys.exit(__doc__.split("\n\n")[1])
    reps = int(sys.argv[1])
    variants = perf_loopback.parse_variants(sys.argv[2:], "perf-ab.py")
    keys = ("goodput_gbps", "cpu_s_per_gb", "lat_p50_us", "lat_p99_us")
    runs = {name: {k: [] for k in keys} for name, _, _ in variants}
    for r in range(reps):
        k = r % len(variants)
        for name, binary, extra in variants[k:] + variants[:k]:
            bw = perf_loopback.perf(binary, ["-s", "65536", "-D", "3"] + extra)
            lat = perf_loopback.perf(binary, ["--lat", "-s", "8", "-n", "20000"] + extra)
            row = {"goodput_gbps": bw["goodput_gbps"],
                   "cpu_s_per_gb": (bw["cpu_client_s"] + bw["cpu_server_s"]) / (bw["bytes"] / 1e9),
                   "lat_p50_us": lat["t_typical"], "lat_p99_us": lat["percentile_99"]}
            for key in keys:
                runs[name][key].append(row[key])
            print(f"rep {r} {name}: " + ", ".join(f"{key} {row[key]:.3f}" for key in keys), flush=True)
    base = variants[0][0]
    print(f"\nmedians of {reps} (ratio to {base}, paired per repetition)")
    for name, _, _ in variants:
        cells = []
        for key in keys:
            m = statistics.median(runs[name][key])
            ratio = statistics.median(a / b for a, b in zip(runs[name][key], runs[base][key]))
            cells.append(f"{key} {m:.3f} ({ratio:.3f})")
        print(f"{name:12s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
