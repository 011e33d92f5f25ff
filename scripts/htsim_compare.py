#!/usr/bin/python3
"""htsim_compare.py — our simulator's benchmark and htsim side by side, CPU time and peak
memory on the same workloads (issue 13, "The simulator stays fast"; docs/results.md "Side
by side with htsim").

A benchmark, not a test (it is not in ctest): it needs an htsim_uec binary built outside
this repository, from htsim's own sources with its own build system, unpatched.

Workloads (the shapes of bench/sim_bench; 100 Gbit/s, 1 us cables, 4096-byte payloads):
  a2a64     8 leaves x 8 hosts under 8 spines, every host WRITEs 256 KiB to every other
            (4,032 flows, all at t = 0);
  perm1024  a k = 16 fat tree (1,024 hosts), host h WRITEs 2,000,000 bytes to h + 512.

For htsim the script writes the connection matrices (`src->dst id N start 0 size B`, one
line per flow) and, for a2a64, a 2-tier topology file (htsim's auto-sizer only builds
K^3/4 or K^2/2 hosts); perm1024 uses htsim's own 3-tier k = 16 fat tree. htsim's flags
match our buffers and ECN as closely as its packet units allow: -mtu 4160 (4096 bytes of
payload plus its 64-byte header), -q 36 (149,760 bytes against our 150,000 per port),
-ecn 7 29 (29,120-120,640 bytes against our 30,000-120,000). The two protocols differ (htsim
runs UEC: NSCC, trimming, 64 entropies); the outcomes are printed so that a speed-up
bought by a different run shows.

Each repetition runs both simulators one after the other, alternating which goes first,
under `/usr/bin/time` (user + sys CPU seconds and peak RSS of the whole process: setup,
run and output, for both). Prints the load average, a markdown table of medians (min-max)
and every run's figures and outcome.

usage: scripts/htsim_compare.py --htsim PATH --sim-bench build/bench/sim_bench
                                [--reps 5] [--workloads a2a64,perm1024] [--keep DIR]
Exits 2 (one line on stderr) when --htsim or --sim-bench is not given or not executable.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

TIME = "/usr/bin/time"
PAYLOAD = 4096
RATE_BPS = 100_000_000_000

# name: (our sim_bench arguments, hosts, bytes per flow, flows, htsim extra flags)
WORKLOADS = {
    "a2a64": ([], 64, 256 * 1024, "a2a", ["-end", "20000"]),
    "perm1024": (["--workload", "perm", "--k", "16", "--bytes", "2000000"], 1024, 2_000_000,
                 "perm", ["-end", "3000"]),
}
HTSIM_MATCHED = ["-mtu", "4160", "-q", "36", "-ecn", "7", "29"]


def flows_of(kind, hosts):
    if kind == "a2a":
        return [(a, b) for a in range(hosts) for b in range(hosts) if a != b]
    return [(a, (a + hosts // 2) % hosts) for a in range(hosts)]


def write_matrix(path, kind, hosts, size):
    flows = flows_of(kind, hosts)
    with open(path, "w") as f:
        f.write(f"Nodes {hosts}\nConnections {len(flows)}\n")
        for i, (a, b) in enumerate(flows, start=1):
            f.write(f"{a}->{b} id {i} start 0 size {size}\n")
    return len(flows)


def write_leaf_spine_64(path):
    # htsim's 2-tier fat-tree file (sim/datacenter/topologies/*.topo): 8 ToRs of 8 hosts,
    # each with one uplink to each of 8 spines; 100 Gbit/s, 1 us per cable, no switch delay.
    with open(path, "w") as f:
        f.write("Nodes 64\nTiers 2\nPodsize 64\n\n"
                "Tier 0\nDownlink_speed_Gbps 100\nRadix_Down 8\nRadix_Up 8\n"
                "Downlink_Latency_ns 1000\nSwitch_Latency_ns 0\n\n"
                "Tier 1\nDownlink_speed_Gbps 100\nRadix_Down 8\n"
                "Downlink_Latency_ns 1000\nSwitch_Latency_ns 0\n")


def timed(cmd, cwd, tag):
    tfile = os.path.join(cwd, f"time-{tag}.txt")
    out = os.path.join(cwd, f"out-{tag}.txt")
    with open(out, "w") as o:
        p = subprocess.run([TIME, "-f", "%U %S %M", "-o", tfile] + cmd, cwd=cwd, stdout=o,
                           stderr=subprocess.STDOUT)
    with open(tfile) as f:
        user, sys_, kb = f.read().split()[-3:]
    with open(out, errors="replace") as f:
        text = f.read()
    return {"rc": p.returncode, "cpu": float(user) + float(sys_), "rss_mb": int(kb) / 1024,
            "text": text}


def ours_outcome(text, kind, size, hosts):
    m = re.search(r"last_finish_us ([0-9.]+), ideal_us ([0-9.]+)", text)
    c = re.search(r"completions (\d+)/(\d+)", text)
    if not m or not c:
        return "no result"
    finish, ideal = float(m.group(1)), float(m.group(2))
    return describe(kind, finish, ideal, int(c.group(1)), int(c.group(2)))


def htsim_outcome(text, kind, size, hosts, flows):
    done = [float(t) for t in re.findall(r" finished at ([0-9.e+]+)", text)]
    if not done:
        return "no result"
    per_host = size * (hosts - 1) if kind == "a2a" else size
    ideal = per_host * 8 / RATE_BPS * 1e6
    return describe(kind, max(done), ideal, len(done), flows)


def describe(kind, finish, ideal, done, flows):
    # The same ideal on both sides: the busiest host's payload at line rate.
    tail = f", {done}/{flows} flows" if done != flows else ""
    if kind == "a2a":
        return f"{100 * ideal / finish:.1f} % of ideal ({finish:.0f} us){tail}"
    return f"tail FCT {finish / ideal:.2f} x ideal ({finish:.0f} us){tail}"


def med(xs):
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--htsim", help="htsim_uec binary (built outside the repository)")
    ap.add_argument("--sim-bench", help="our build/bench/sim_bench")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--workloads", default="a2a64,perm1024")
    ap.add_argument("--keep", help="write inputs and outputs here instead of a temporary dir")
    a = ap.parse_args()
    for flag, path in (("--htsim", a.htsim), ("--sim-bench", a.sim_bench)):
        if not path or not os.access(path, os.X_OK):
            print(f"htsim_compare: {flag} PATH is needed (an executable; got {path!r}); "
                  "nothing compared", file=sys.stderr)
            return 2
    if not os.access(TIME, os.X_OK):
        print(f"htsim_compare: {TIME} is needed (Debian package 'time')", file=sys.stderr)
        return 2
    names = a.workloads.split(",")
    for n in names:
        if n not in WORKLOADS:
            print(f"htsim_compare: unknown workload {n!r} (known: {', '.join(WORKLOADS)})",
                  file=sys.stderr)
            return 2
    work = a.keep or tempfile.mkdtemp(prefix="htsim_compare.")
    os.makedirs(work, exist_ok=True)
    htsim = os.path.abspath(a.htsim)
    bench = os.path.abspath(a.sim_bench)
    load0 = os.getloadavg()

    results = {}
    for name in names:
        args, hosts, size, kind, extra = WORKLOADS[name]
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        cm = os.path.join(d, f"{name}.cm")
        flows = write_matrix(cm, kind, hosts, size)
        hcmd = [htsim, "-tm", cm] + extra + HTSIM_MATCHED
        if kind == "a2a":
            topo = os.path.join(d, "leaf_spine_64.topo")
            write_leaf_spine_64(topo)
            hcmd += ["-topo", topo]
        ocmd = [bench] + args
        runs = {"ours": [], "htsim": []}
        for rep in range(a.reps):
            order = ["ours", "htsim"] if rep % 2 == 0 else ["htsim", "ours"]
            for who in order:
                r = timed(ocmd if who == "ours" else hcmd, d, f"{who}-{rep}")
                if who == "ours":
                    r["outcome"] = ours_outcome(r["text"], kind, size, hosts)
                else:
                    r["outcome"] = htsim_outcome(r["text"], kind, size, hosts, flows)
                del r["text"]
                runs[who].append(r)
                print(f"# {name} rep {rep + 1}/{a.reps} {who}: {r['cpu']:.2f} CPU-s, "
                      f"{r['rss_mb']:.0f} MB, rc {r['rc']}, {r['outcome']}", file=sys.stderr,
                      flush=True)
        results[name] = (runs, ocmd, hcmd)
    load1 = os.getloadavg()

    print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; {a.reps} alternating "
          "repetitions; CPU = user + sys seconds of the whole process, median (min-max)\n")
    print("| workload | ours: CPU s | htsim: CPU s | CPU ours/htsim | ours: peak RSS | "
          "htsim: peak RSS | RSS ours/htsim | ours: outcome | htsim: outcome |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    for name, (runs, _, _) in results.items():
        o, h = runs["ours"], runs["htsim"]
        oc, hc = [r["cpu"] for r in o], [r["cpu"] for r in h]
        orss, hrss = [r["rss_mb"] for r in o], [r["rss_mb"] for r in h]
        outs_o = sorted({r["outcome"] for r in o})
        outs_h = sorted({r["outcome"] for r in h})
        print(f"| {name} | {med(oc)} | {med(hc)} | "
              f"**{statistics.median(oc) / statistics.median(hc):.2f}** | "
              f"{statistics.median(orss):.0f} MB | {statistics.median(hrss):.0f} MB | "
              f"**{statistics.median(orss) / statistics.median(hrss):.2f}** | "
              f"{'; '.join(outs_o)} | {'; '.join(outs_h)} |")
    print("\nEvery run (CPU s / peak RSS MB / exit code):\n")
    for name, (runs, ocmd, hcmd) in results.items():
        for who, cmd in (("ours", ocmd), ("htsim", hcmd)):
            cells = ", ".join(f"{r['cpu']:.2f}/{r['rss_mb']:.0f}/{r['rc']}" for r in runs[who])
            shown = " ".join(os.path.basename(c) if os.path.isabs(c) else c for c in cmd)
            print(f"- {name} {who} (`{shown}`): {cells}")
    if not a.keep:
        shutil.rmtree(work)
    bad = [n for n, (runs, _, _) in results.items()
           for r in runs["ours"] + runs["htsim"] if r["rc"] != 0]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
