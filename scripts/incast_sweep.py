#!/usr/bin/python3
"""incast_sweep.py — issue 13's incast target over many sizes and seeds (MetaRoCE only).

The issue's table measures each incast at one seed; `converge_rtts` is sensitive to when the
senders' first-RTT bursts arrive, so a change to the receiver's hint is judged over a grid:
for each N and seed, runs

    mroce sim scenarios/incast-cc.toml --seed S --set workload.senders=N
              --set 'sweep.protocol=["mroce"]' [--set KEY=VALUE ...] --out OUT/nN-sS

and prints, per N, min / median / max of converge_rtts (null counts as missing and is
reported), jain_index and drop_fraction, plus how many runs meet converge <= 2, and the
same over every run. Writes the per-run figures to OUT/incast-sweep.json.

usage: incast_sweep.py [--mroce build/mroce] [--out DIR] [--ns 8,12,...] [--seeds 1-5]
                       [--set KEY=VALUE ...]
Runs one simulator at a time.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

from seeds import seeds_of  # scripts/seeds.py

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = (8, 12, 16, 24, 28, 32, 48, 64, 128, 256)


def stats(values):
    """(min, median, max) of the values that are not None; None when there are none."""
    v = [x for x in values if x is not None]
    if not v:
        return None
    return min(v), statistics.median(v), max(v)


def fmt3(t, digits=2, scale=1.0):
    if t is None:
        return "null"
    return " / ".join(f"{x * scale:.{digits}f}" for x in t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mroce", default=os.path.join(REPO, "build", "mroce"))
    ap.add_argument("--out", default="/tmp/incast-sweep")
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    binary = os.path.join(a.out, ".mroce")  # a rebuild during the sweep changes nothing
    shutil.copy2(a.mroce, binary)
    ns = [int(x) for x in a.ns.split(",")]
    seeds = seeds_of(a.seeds)
    scenario = os.path.join(REPO, "scenarios", "incast-cc.toml")
    runs = []
    for n in ns:
        for s in seeds:
            out = os.path.join(a.out, f"n{n}-s{s}")
            cmd = [binary, "sim", scenario, "--seed", str(s), "--set", f"workload.senders={n}",
                   "--set", 'sweep.protocol=["mroce"]', "--out", out]
            for kv in a.sets:
                cmd += ["--set", kv]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "summary.json")) as f:
                m = json.load(f)["runs"][0]["metrics"]
            r = {"n": n, "seed": s, "converge_rtts": m.get("converge_rtts"),
                 "jain_index": m.get("jain_index"), "drop_fraction": m.get("drop_fraction"),
                 "queue_peak_bytes": m.get("queue_peak_bytes"), "settle_us": m.get("settle_us"),
                 "stall_p99_us": m.get("stall_p99_us")}
            runs.append(r)
            print(f"N={n:3d} seed={s}: converge {r['converge_rtts']} jain {r['jain_index']} "
                  f"drops {r['drop_fraction']}", file=sys.stderr, flush=True)
    with open(os.path.join(a.out, "incast-sweep.json"), "w") as f:
        json.dump({"sets": a.sets, "seeds": seeds, "runs": runs}, f, indent=1)

    print(f"| N | converge_rtts min / median / max | ≤ 2 | Jain min / median / max | "
          f"drop fraction % min / median / max |")
    print("|---|---|---|---|---|")
    groups = [(str(n), [r for r in runs if r["n"] == n]) for n in ns] + [("all", runs)]
    for name, rs in groups:
        conv = [r["converge_rtts"] for r in rs]
        met = sum(1 for c in conv if c is not None and c <= 2)
        nulls = sum(1 for c in conv if c is None)
        null_note = f" ({nulls} null)" if nulls else ""
        print(f"| {name} | {fmt3(stats(conv))}{null_note} | {met}/{len(rs)} | "
              f"{fmt3(stats([r['jain_index'] for r in rs]), 3)} | "
              f"{fmt3(stats([r['drop_fraction'] for r in rs]), 3, 100.0)} |")


if __name__ == "__main__":
    main()
