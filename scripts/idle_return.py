#!/usr/bin/env python3
"""idle_return.py OUT: the return phase of scenarios/cc-idle-return.toml, per run.

The senders first take turns alone at the receiver (64 KiB each), then all return at once
(256 KiB each, the flows of that size). For each run of the sweep in OUT (mroce sim
--out OUT) it prints: the return's start and its last completion, that span against the
ideal (every returning byte through the one 100 Gbit/s downlink), the receiver port's
peak queue after the return began, how long the queue stayed at or above one BDP
(106 KB: 100 Gbit/s x the 8.5 us base RTT of incast-cc's fabric) after the return began,
drops and drop_fraction (whole run), and the returning flows' FCT p50 / max.
"""
import csv
import json
import os
import sys

RETURN_BYTES = 262144
BDP = 106_000
RATE = 100e9 * 4096 / (4096 + 72)  # payload bit/s through the downlink


def main(out):
    summary = json.load(open(os.path.join(out, "summary.json")))
    print("run                           start_us  span_us  ideal_us  span/ideal  peak_q_KB  q>=BDP_us  drops  drop_frac  fct_p50_us  fct_max_us")
    for run in summary["runs"]:
        d = os.path.join(out, run["dir"]) if not os.path.isabs(run["dir"]) else run["dir"]
        ret = []
        for line in open(os.path.join(d, "fct.txt")):
            f = line.split()
            if int(f[4]) == RETURN_BYTES:
                ret.append((int(f[5]) / 1e3, int(f[6]) / 1e3))
        if not ret:
            print(f"{run['label']:<28} no returning flow completed")
            continue
        start = min(s for s, _ in ret)
        end = max(s + f for s, f in ret)
        ideal = len(ret) * RETURN_BYTES * 8 / RATE * 1e6
        peak, above = 0, 0.0
        prev_t = None
        for r in csv.DictReader(open(os.path.join(d, "queue.csv"))):
            t = float(r["time_us"])
            if t < start:
                continue
            q = int(r["bytes"])
            peak = max(peak, q)
            if q >= BDP and prev_t is not None:
                above += t - prev_t
            prev_t = t
        fcts = sorted(f for _, f in ret)
        m = run["metrics"]
        print(f"{run['label']:<28} {start:9.1f} {end - start:8.1f} {ideal:9.1f} {(end - start) / ideal:10.3f} "
              f"{peak / 1e3:10.1f} {above:10.1f} {m['drops']:6d} {m['drop_fraction']:10.5f} "
              f"{fcts[len(fcts) // 2]:11.1f} {fcts[-1]:11.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
