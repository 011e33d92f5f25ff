#!/usr/bin/env python3
"""perf-testbed.py — mroce perf across the multi-plane testbed: lossless, 1% loss on one
plane, and a plane cut mid-run, side by side in one sitting (docs/results.md).

Brings up its own testbed (prefix `pt`), caps every plane (default 4 x 100 Mbit/s, marking
CE from 100 KB of queue as a switch would), and for each repetition runs `mroce perf` with
1 MiB WRITEs from host 0 to host 1: (1) lossless, (2) 1% random loss on the plane that
carried most of the lossless run, (3) that plane cut CUT seconds into the run. For the
cut it reports goodput before the cut and from 1 s after it (100 ms buckets from the
run's JSON), the time from the cut to each path failure ([PATH-3]) and to the re-rolled
path answering. With --bound both sides bind their paths to the planes' uplinks
(`mroce perf --plane-ifs up0,...`, spec [UDP-10]): two paths per plane, re-rolls stay on
their plane. Removes the testbed on every exit path. Needs root.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PREFIX = "pt"
PORT = 18720


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mroce", default="build/mroce")
    ap.add_argument("--testbed", default="scripts/testbed")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=8, help="-D of each run")
    ap.add_argument("--cut", type=float, default=4.0, help="seconds into the run")
    ap.add_argument("--rate", default="100mbit")
    ap.add_argument("--ecn", nargs=3, default=["100000", "250000", "0.2"],
                    metavar=("KMIN", "KMAX", "PMAX"))
    ap.add_argument("--limit", default="500000", help="plane queue bytes")
    ap.add_argument("--bound", action="store_true",
                    help="both sides bind their paths to the planes (--plane-ifs up0,..,up3)")
    ap.add_argument("perf_args", nargs="*", help="extra mroce perf client options (after --)")
    a = ap.parse_args()
    env = dict(os.environ, MROCE_TESTBED_PREFIX=PREFIX)
    tb = lambda *args: subprocess.run([a.testbed, *args], env=env, check=True,
                                      capture_output=True, text=True).stdout
    tmp = tempfile.mkdtemp(prefix="perf-testbed-")
    planes = ["--plane-ifs", ",".join(f"up{j}" for j in range(4))] if a.bound else []

    def counters(name="bytes"):
        s = json.loads(tb("status", "--json"))
        return [s[f"p{j}"]["counters"][name] for j in range(4)]

    def run(name, cut_plane=None):
        c0 = counters()
        bh0 = counters("blackhole_drops")
        server = subprocess.Popen([a.testbed, "exec", "1", "--", a.mroce, "perf", "-p", str(PORT),
                                   "-D", str(a.seconds), *planes], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        out = os.path.join(tmp, name + ".json")
        client = subprocess.Popen([a.testbed, "exec", "0", "--", a.mroce, "perf", "198.18.0.2", "-p",
                                   str(PORT), "-s", "1048576", "-D", str(a.seconds), "--report_gbits",
                                   "--json", out, *planes, *a.perf_args], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        cut_at = None
        if cut_plane is not None:
            time.sleep(a.cut)
            tb("plane-down", str(cut_plane))
            cut_at = time.time()
        text, _ = client.communicate(timeout=120)
        server.wait(timeout=30)
        if cut_plane is not None:
            tb("plane-up", str(cut_plane))
        # Bytes each plane forwarded in this run: with hashed source ports, the 8 paths miss
        # a plane in about 40 % of connections, and the run is then capped at three planes.
        plane_mb = [round((x - y) / 1e6, 1) for x, y in zip(counters(), c0)]
        if client.returncode != 0:
            return {"name": name, "error": text.strip().splitlines()[-1], "plane_mb": plane_mb}
        r = json.load(open(out))["results"][0]  # one size: a one-row array
        res = {"name": name, "gbps": r["BW_average"], "plane_mb": plane_mb,
               "retransmits": r["counters"].get("retransmits", 0),
               "path_failures": sum(p.get("failures", 0) for p in r["counters"]["paths"]),
               "ecn": sum(p.get("ecn_echoed", 0) for p in r["counters"]["paths"])}
        if cut_at is not None:
            events = r["path_events"]
            start = (events[0]["unix_s"] - events[0]["t_s"]) if events else cut_at - a.cut
            t_cut = cut_at - start
            series = r["gbps_per_100ms"]
            i = int(t_cut * 10)
            failed = [e for e in events if e["event"] == "failed"]
            recovered = [e for e in events if e["event"] == "recovered"]
            # Before: from 0.5 s to the cut. After: from 1 s past the cut (detection and
            # re-roll take tens of ms) to the end of -D; the rest is the queue draining.
            before, after = series[5:i], series[i + 10:int(a.seconds * 10)]
            res.update(before=statistics.mean(before) if before else 0,
                       after=statistics.mean(after) if after else 0,
                       detect_ms=[round((e["t_s"] - t_cut) * 1000, 1) for e in failed],
                       recover_ms=[round((e["t_s"] - t_cut) * 1000, 1) for e in recovered],
                       cut_plane=cut_plane)
            res["after_over_before"] = res["after"] / res["before"] if res["before"] else 0
            # Packets the cut plane swallowed, both directions: the sender's DATA until its
            # paths there fail and their PROBEs, and the receiver's ACKs until it stops
            # answering on that plane ([PATH-12], and with --bound [PATH-16]).
            res["cut_drops"] = counters("blackhole_drops")[cut_plane] - bh0[cut_plane]
        return res

    results = []
    try:
        tb("up")
        tb("rate", "all", a.rate, a.limit, "ecn", *a.ecn)
        for rep in range(a.reps):
            lossless = run(f"lossless{rep}")
            busiest = max(range(4), key=lambda j: lossless.get("plane_mb", [0] * 4)[j])
            tb("loss", str(busiest), "1")
            lossy = run(f"loss{rep}")
            tb("loss", "all", "0")
            lossy["loss_plane"] = busiest
            cut = run(f"cut{rep}", cut_plane=busiest)
            for r in (lossless, lossy, cut):
                r["rep"] = rep
                print(json.dumps(r), flush=True)
                results.append(r)
    finally:
        subprocess.run([a.testbed, "down"], env=env, capture_output=True)
    ok = [r for r in results if "error" not in r]
    if not ok:
        return 1
    med = lambda name, key: statistics.median([r[key] for r in ok if r["name"].startswith(name)] or [0])
    print(f"median of {a.reps}: lossless {med('lossless', 'gbps'):.3f} Gbit/s, "
          f"1% loss on one plane {med('loss', 'gbps'):.3f} "
          f"({med('loss', 'gbps') / med('lossless', 'gbps'):.0%} of lossless), "
          f"cut: before {med('cut', 'before'):.3f} after {med('cut', 'after'):.3f} "
          f"(after/before {med('cut', 'after_over_before'):.0%})")
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
