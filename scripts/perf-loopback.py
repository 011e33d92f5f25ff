#!/usr/bin/python3
"""perf-loopback.py — mroce perf against its baselines on 127.0.0.1, side by side in one run
(the numbers behind docs/results.md "mroce perf over loopback").

Each repetition runs, in this order: WRITE bandwidth at 64 KiB and 1 MiB messages over
MetaRoCE (with the window the device fits to the datapath, api/udp_tuning.h, and with
--window-kib 256, the engine's fixed default before that rule), the same traffic
with --raw (plain UDP through the same datapath, no protocol), kernel TCP with iperf3 (one
stream), then 8-byte WRITE latency over MetaRoCE and the --raw UDP ping-pong. Client on
CPU 0, server on CPU 1 (as notes/datapath.md). Prints every run and the medians, with the
ratio of each MetaRoCE goodput to --raw of the same size, and the CPU seconds both
processes used per GB placed.

With --verbs DIR (a directory holding mroce's libibverbs.so.1, build/verbs), each
repetition also runs perftest's ib_write_bw (64 KiB, the same duration) and ib_write_lat
(8 bytes) on that library, unmodified, next to the mroce perf runs of the same shape
(the numbers behind docs/results.md "The Verbs library").

With --integrity-ab, each repetition runs only WRITE bandwidth at 64 KiB with the CRC32C
integrity trailer (--integrity, spec §4.9) and without it (the default), in alternating order,
and prints the paired ratio (the numbers behind docs/results.md "Cost of the integrity
trailer").

With --check-ab, each repetition runs 64 KiB bandwidth of WRITE, SEND and READ with
--check (every byte verified, tools/perf_check.h) and without it, in alternating order, and
prints the paired ratio (the numbers behind docs/results.md "Cost of perf --check"). WRITE
runs -n 15000 (its check needs a slot per message, at most 1 GiB), the others -D.

With --busy-poll-ab, each repetition runs only 8-byte WRITE latency (-n 20000), MetaRoCE
and --raw, each with --busy-poll (both sides spin) and without (poll 50 us, then sleep),
the four in an order that rotates per repetition, and prints their medians, the paired
ratios to --raw of the same mode, and the CPU seconds both processes used per round trip.
--hog adds one CPU-bound process (no CPU affinity) for the whole run: the loaded 2-core
machine of issue 19, where three runnable threads share two cores.

With --verbs DIR --verbs-ab 'NAME[:VAR=VALUE,...];...', each repetition runs only mroce
perf's 64 KiB WRITE bandwidth and 8-byte latency and, for each variant (MROCE_* settings of
both perftest processes; a NAME ending in /free runs them unpinned), ib_write_bw and
ib_write_lat, in an order that rotates per repetition, and prints the paired ratios (the
numbers behind docs/results.md "The Verbs library", "ACKs that ride with the answer").

usage: scripts/perf-loopback.py [--mroce build/mroce] [--reps 3] [--seconds 4] [--verbs DIR]
                                [--integrity-ab] [--check-ab] [--busy-poll-ab [--hog]]
                                [--verbs-ab VARIANTS]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile


def parse_variants(args, prog):
    """NAME=BIN[:ARGS] arguments of the A/B scripts (perf-ab.py, perf-cpu-ab.py) as
    (name, binary, extra args) tuples; a malformed one ends the program naming it."""
    variants = []
    for a in args:
        name, sep, rest = a.partition("=")
        if not sep or not rest:
            sys.exit(f"{prog}: '{a}' is not NAME=BIN[:ARGS]")
        binary, _, extra = rest.partition(":")
        variants.append((name, binary, extra.split()))
    return variants


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def perf(mroce, args):
    """One mroce perf pair; returns the client's JSON results, with the CPU seconds (user +
    system) each process used added as "cpu_client_s" and "cpu_server_s", and the client's
    user seconds as "cpu_client_user_s"."""
    port = free_port()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    server = subprocess.Popen(["taskset", "-c", "1", mroce, "perf", "-p", str(port)] + args,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        client = subprocess.Popen(["taskset", "-c", "0", mroce, "perf", "127.0.0.1", "-p", str(port),
                                   "--json", path] + args, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        err = client.stderr.read()
        _, status, cru = os.wait4(client.pid, 0)
        client.returncode = os.waitstatus_to_exitcode(status)
        server.stderr.read()
        _, _, sru = os.wait4(server.pid, 0)
        server.returncode = 0
        if client.returncode != 0:
            raise RuntimeError(f"mroce perf {' '.join(args)}: {err.strip()}")
        with open(path) as f:
            r = json.load(f)["results"][0]  # one size: a one-row array
        r["cpu_client_s"] = cru.ru_utime + cru.ru_stime
        r["cpu_client_user_s"] = cru.ru_utime
        r["cpu_server_s"] = sru.ru_utime + sru.ru_stime
        return r
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        os.unlink(path)


def listening(port):
    """True once some process listens on TCP `port` (from /proc: perftest's server takes
    the first connection for its client, so a probe connection would break it)."""
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(path) as f:
            next(f)
            for line in f:
                cols = line.split()
                if int(cols[1].split(":")[1], 16) == port and cols[3] == "0A":
                    return True
    return False


def perftest(libdir, tool, args, extra_env=None, pinned=True):
    """One perftest pair on the library in `libdir`; returns the numbers of the client's
    result row: bw tools {"gbps"}, lat tools {"t_typical", "percentile_99",
    "percentile_99.9"} (perftest's latency is half the round trip, as mroce perf's).
    extra_env: settings for both processes (MROCE_*); pinned=False leaves the placement of
    the two processes (and their progress threads) to the scheduler."""
    port = free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.abspath(libdir))
    env.update(extra_env or {})  # a variant may name another build: LD_LIBRARY_PATH=DIR
    common = ["-F", "-p", str(port)] + args
    pin = (lambda cpu: ["taskset", "-c", cpu]) if pinned else (lambda cpu: [])
    server = subprocess.Popen(pin("1") + [tool] + common, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if listening(port):
                break
            subprocess.run(["sleep", "0.01"])
        out = subprocess.run(pin("0") + [tool] + common + ["127.0.0.1"], env=env,
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)}: {out.stderr.strip()}")
        row = next(l.split() for l in out.stdout.splitlines()
                   if l.split() and l.split()[0].isdigit() and len(l.split()) >= 5)
        server.wait(timeout=30)
        if tool.endswith("_lat"):
            return {"t_typical": float(row[4]), "percentile_99": float(row[7]),
                    "percentile_99.9": float(row[8])}
        return {"gbps": float(row[3])}
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def iperf3(seconds):
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-p", str(port), "-1", "-A", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = ""
    try:
        for _ in range(50):  # the server needs a moment to listen
            out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds),
                                  "-A", "0", "-J"], capture_output=True, text=True, timeout=60)
            try:
                doc = json.loads(out.stdout)
            except json.JSONDecodeError:
                doc = {"error": out.stderr.strip()}
            if "error" not in doc:
                return doc["end"]["sum_received"]["bits_per_second"] / 1e9
            # Not listening yet ("Connection refused") or a stray client: try again.
            last = doc["error"]
            subprocess.run(["sleep", "0.1"])
        raise RuntimeError("iperf3 failed: " + last)
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


def integrity_ab(a, d):
    """Paired runs with and without the integrity trailer; the order alternates per
    repetition so that a drift of the machine's load does not favour either."""
    runs = [("trailer", ["-s", "65536", "--integrity"] + d), ("no trailer", ["-s", "65536"] + d)]
    gbps = {name: [] for name, _ in runs}
    cpu_gb = {name: [] for name, _ in runs}
    for rep in range(a.reps):
        print(f"--- repetition {rep + 1}/{a.reps}", flush=True)
        for name, args in (runs if rep % 2 == 0 else runs[::-1]):
            r = perf(a.mroce, args)
            gb = r["bytes"] / 1e9
            cpu = (r["cpu_client_s"] + r["cpu_server_s"]) / gb if gb else 0.0
            gbps[name].append(r["goodput_gbps"])
            cpu_gb[name].append(cpu)
            bad = (r.get("endpoint", {}).get("bad_integrity", 0) +
                   r.get("server_endpoint", {}).get("bad_integrity", 0))
            print(f"{name:>11}: {r['goodput_gbps']:6.2f} Gbit/s; CPU s/GB {cpu:.3f}; "
                  f"bad_integrity {bad}", flush=True)
    ratios = [t / n for t, n in zip(gbps["trailer"], gbps["no trailer"])]
    cpu_ratios = [t / n for t, n in zip(cpu_gb["trailer"], cpu_gb["no trailer"]) if n]
    print(f"\nmedians of {a.reps}:")
    for name in gbps:
        print(f"{name:>11}: {statistics.median(gbps[name]):6.2f} Gbit/s "
              f"(runs {', '.join(f'{x:.2f}' for x in gbps[name])}); "
              f"CPU s/GB {statistics.median(cpu_gb[name]):.3f}")
    print(f"trailer / no trailer, paired per repetition: goodput {100 * statistics.median(ratios):.1f}% "
          f"({', '.join(f'{100 * x:.0f}%' for x in ratios)}), CPU per GB "
          f"{100 * statistics.median(cpu_ratios):.1f}%")
    return 0


def check_ab(a, d):
    """Paired runs with and without --check per verb; the order alternates per repetition."""
    verbs = {"write": ["--verb", "write", "-n", "15000", "--report_gbits"],
             "send": ["--verb", "send"] + d, "read": ["--verb", "read"] + d}
    gbps = {(v, c): [] for v in verbs for c in (True, False)}
    for rep in range(a.reps):
        print(f"--- repetition {rep + 1}/{a.reps}", flush=True)
        for verb, args in verbs.items():
            order = (True, False) if rep % 2 == 0 else (False, True)
            for checked in order:
                r = perf(a.mroce, ["-s", "65536"] + args + (["--check"] if checked else []))
                gbps[(verb, checked)].append(r["goodput_gbps"])
                verified = (r.get("check", {}).get("messages", 0) +
                            r.get("server_check", {}).get("messages", 0))
                print(f"{verb:>5} {'--check' if checked else 'plain':>7}: {r['goodput_gbps']:6.2f} "
                      f"Gbit/s; {verified} messages verified", flush=True)
    print(f"\nmedians of {a.reps}:")
    for verb in verbs:
        on, off = gbps[(verb, True)], gbps[(verb, False)]
        ratios = [x / y for x, y in zip(on, off) if y]
        print(f"{verb:>5}: --check {statistics.median(on):6.2f} Gbit/s (runs "
              f"{', '.join(f'{x:.2f}' for x in on)}), plain {statistics.median(off):6.2f} Gbit/s "
              f"(runs {', '.join(f'{x:.2f}' for x in off)}); paired ratio "
              f"{100 * statistics.median(ratios):.1f}%")
    return 0


def busy_poll_ab(a):
    """8-byte WRITE latency, MetaRoCE and --raw, with and without --busy-poll, rotated."""
    base = ["--lat", "-s", "8", "-n", "20000"]
    runs = [("mroce", base), ("mroce busy-poll", base + ["--busy-poll"]),
            ("raw", base + ["--raw"]), ("raw busy-poll", base + ["--raw", "--busy-poll"])]
    keys = ("t_typical", "percentile_99", "percentile_99.9")
    lat = {name: {k: [] for k in keys} for name, _ in runs}
    cpu = {name: [] for name, _ in runs}
    failed = {name: 0 for name, _ in runs}
    hog = None
    if a.hog:
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for rep in range(a.reps):
            print(f"--- repetition {rep + 1}/{a.reps}", flush=True)
            k = rep % len(runs)
            for name, args in runs[k:] + runs[:k]:
                try:
                    r = perf(a.mroce, args)
                except RuntimeError as e:  # a starved spinner's peer may be declared dead
                    failed[name] += 1
                    print(f"{name:>16}: FAILED: {e}", flush=True)
                    continue
                for key in keys:
                    lat[name][key].append(r[key])
                trips = r["n_iterations"] + 16  # the warm-up round trips ran too
                cpu[name].append((r["cpu_client_s"] + r["cpu_server_s"]) / trips * 1e6)
                c = r.get("counters", {})
                timeouts = sum(p["timeouts"] for p in c.get("paths", []))
                timeouts += sum(p["timeouts"] for p in r.get("server_counters", {}).get("paths", []))
                extra = f"; path timeouts {timeouts}, retx {c.get('retransmits', 0)}" if c else ""
                print(f"{name:>16}: p50 {r['t_typical']:.2f} us, p99 {r['percentile_99']:.2f} us, "
                      f"p99.9 {r['percentile_99.9']:.2f} us; CPU {cpu[name][-1]:.1f} us per round "
                      f"trip (both processes){extra}", flush=True)
    finally:
        if hog:
            hog.kill()
            hog.wait()
    print(f"\nmedians of {a.reps}{' (with one CPU hog)' if a.hog else ''}; ratio: median of the "
          f"per-repetition ratios to --raw in the same mode")
    for name, _ in runs:
        raw = "raw busy-poll" if "busy-poll" in name else "raw"
        cols = []
        for key, label in zip(keys, ("p50", "p99", "p99.9")):
            if not lat[name][key]:
                continue
            v = statistics.median(lat[name][key])
            ratio = ""
            if name.startswith("mroce") and len(lat[name][key]) == len(lat[raw][key]):
                pairs = [m / r for m, r in zip(lat[name][key], lat[raw][key]) if r]
                ratio = f" ({statistics.median(pairs):.2f}x)"
            cols.append(f"{label} {v:.2f}{ratio}")
        print(f"{name:>16}: {', '.join(cols)} us; CPU {statistics.median(cpu[name]):.1f} us/round trip"
              + (f"; {failed[name]} of {a.reps} runs failed" if failed[name] else ""))

def verbs_ab(a, d):
    """--verbs-ab: ib_write_bw 64 KiB and ib_write_lat 8 B on the library under each
    variant (NAME or NAME:VAR=VALUE,VAR=VALUE, the settings of both processes; a NAME
    ending in "/free" runs unpinned), next to mroce perf's rows of the same shape, in an
    order that rotates per repetition; medians and the paired ratios to mroce perf."""
    variants = []
    for v in a.verbs_ab.split(";"):
        name, _, env = v.partition(":")
        variants.append((name, dict(kv.split("=", 1) for kv in env.split(",") if kv)))
    rows = ["mroce"] + [n for n, _ in variants]
    bw = {n: [] for n in rows}
    lat = {n: {"t_typical": [], "percentile_99": [], "percentile_99.9": []} for n in rows}
    for rep in range(a.reps):
        print(f"--- repetition {rep + 1}/{a.reps}", flush=True)
        k = rep % len(rows)
        for name in rows[k:] + rows[:k]:
            try:
                if name == "mroce":
                    g = perf(a.mroce, ["-s", "65536"] + d)["goodput_gbps"]
                    r = perf(a.mroce, ["--lat", "-s", "8", "-n", "20000"])
                else:
                    env = dict(variants)[name]
                    pinned = not name.endswith("/free")
                    g = perftest(a.verbs, "ib_write_bw", ["-s", "65536", "-D", str(int(a.seconds)),
                                                          "--report_gbits"], env, pinned)["gbps"]
                    r = perftest(a.verbs, "ib_write_lat", ["-s", "8", "-n", "20000"], env, pinned)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                # Reported and left out of this repetition's pairs, not retried: a failure
                # is a result too.
                print(f"{name:>16}: FAILED: {e}", flush=True)
                bw[name].append(None)
                for key in lat[name]:
                    lat[name][key].append(None)
                continue
            bw[name].append(g)
            for key in lat[name]:
                lat[name][key].append(r[key])
            print(f"{name:>16}: {g:6.2f} Gbit/s; lat p50 {r['t_typical']:.2f} us, p99 "
                  f"{r['percentile_99']:.2f} us, p99.9 {r['percentile_99.9']:.2f} us", flush=True)
    print(f"\nmedians of {a.reps}; ratios paired per repetition with mroce perf "
          "(bandwidth: variant / mroce; latency p50: variant / mroce):")
    def ok(xs):
        return [x for x in xs if x is not None]

    for name in rows:
        bw_pairs = [v / m for v, m in zip(bw[name], bw["mroce"]) if m and v is not None]
        lat_pairs = [v / m for v, m in zip(lat[name]["t_typical"], lat["mroce"]["t_typical"])
                     if m and v is not None]
        if not ok(bw[name]) or not bw_pairs:
            print(f"{name:>16}: no complete repetition")
            continue
        bw[name], lat[name] = ok(bw[name]), {k: ok(v) for k, v in lat[name].items()}
        print(f"{name:>16}: {statistics.median(bw[name]):6.2f} Gbit/s "
              f"({100 * statistics.median(bw_pairs):.0f}%; runs "
              f"{', '.join(f'{x:.2f}' for x in bw[name])}); p50 "
              f"{statistics.median(lat[name]['t_typical']):.2f} us "
              f"({100 * statistics.median(lat_pairs):.0f}%; runs "
              f"{', '.join(f'{x:.2f}' for x in lat[name]['t_typical'])}), p99 "
              f"{statistics.median(lat[name]['percentile_99']):.2f} us, p99.9 "
              f"{statistics.median(lat[name]['percentile_99.9']):.2f} us")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mroce", default="build/mroce")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--verbs", metavar="DIR", help="also run perftest on libibverbs.so.1 in DIR")
    ap.add_argument("--integrity-ab", action="store_true",
                    help="only 64 KiB WRITE bandwidth with and without the integrity trailer")
    ap.add_argument("--busy-poll-ab", action="store_true",
                    help="only 8-byte WRITE latency, mroce and --raw, with and without --busy-poll")
    ap.add_argument("--hog", action="store_true", help="with --busy-poll-ab: one CPU hog alongside")
    ap.add_argument("--check-ab", action="store_true",
                    help="only 64 KiB WRITE, SEND and READ bandwidth with and without --check")
    ap.add_argument("--verbs-ab", metavar="VARIANTS",
                    help="with --verbs: only ib_write_bw/ib_write_lat under each variant, "
                         "'NAME[:VAR=VALUE,...];...' (NAME ending in /free: unpinned), "
                         "next to mroce perf")
    a = ap.parse_args()
    d = ["-D", str(a.seconds), "--report_gbits"]
    if a.verbs_ab:
        if not a.verbs:
            ap.error("--verbs-ab needs --verbs DIR")
        return verbs_ab(a, d)
    if a.integrity_ab:
        return integrity_ab(a, d)
    if a.check_ab:
        return check_ab(a, d)
    if a.busy_poll_ab:
        return busy_poll_ab(a)
    bw_runs = [
        ("mroce 64K", ["-s", "65536"] + d),
        ("mroce 64K w256K", ["-s", "65536", "--window-kib", "256"] + d),
        ("raw 64K", ["-s", "65536", "--raw"] + d),
        ("mroce 1M", ["-s", "1048576"] + d),
        ("mroce 1M w256K", ["-s", "1048576", "--window-kib", "256"] + d),
        ("raw 1M", ["-s", "1048576", "--raw"] + d),
    ]
    lat_runs = [
        ("mroce lat 8", ["--lat", "-s", "8", "-n", "20000"]),
        ("raw lat 8", ["--lat", "-s", "8", "-n", "20000", "--raw"]),
    ]
    gbps = {name: [] for name, _ in bw_runs}
    gbps["iperf3 TCP"] = []
    if a.verbs:
        gbps["verbs 64K"] = []
    cpu_gb = {name: [] for name, _ in bw_runs}
    lat = {name: {"t_typical": [], "percentile_99": [], "percentile_99.9": []} for name, _ in lat_runs}
    if a.verbs:
        lat["verbs lat 8"] = {"t_typical": [], "percentile_99": [], "percentile_99.9": []}
    for rep in range(a.reps):
        print(f"--- repetition {rep + 1}/{a.reps}", flush=True)
        for name, args in bw_runs:
            r = perf(a.mroce, args)
            gbps[name].append(r["goodput_gbps"])
            extra = ""
            if "counters" in r:
                c = r["counters"]
                extra = (f" retx {c['retransmits']} lost {c['lost']}"
                         f" cancelled {c.get('retransmits_cancelled', 0)}")
            if "lost_datagrams" in r:
                extra = f" lost datagrams {r['lost_datagrams']} of {r['datagrams_sent']}"
            # CPU seconds of both processes per GB placed: a cost that does not depend on
            # how the scheduler shared the cores (both sides sleep when idle).
            gb = r["bytes"] / 1e9
            cpu = (r["cpu_client_s"] + r["cpu_server_s"]) / gb if gb else 0.0
            cpu_gb[name].append(cpu)
            extra += (f"; CPU s/GB {cpu:.3f} (client {r['cpu_client_s'] / gb:.3f}, "
                      f"server {r['cpu_server_s'] / gb:.3f})" if gb else "")
            print(f"{name:>14}: {r['goodput_gbps']:6.2f} Gbit/s{extra}", flush=True)
        if a.verbs:
            g = perftest(a.verbs, "ib_write_bw", ["-s", "65536", "-D", str(int(a.seconds)),
                                                  "--report_gbits"])["gbps"]
            gbps["verbs 64K"].append(g)
            print(f"{'verbs 64K':>14}: {g:6.2f} Gbit/s (ib_write_bw)", flush=True)
        g = iperf3(int(a.seconds))
        gbps["iperf3 TCP"].append(g)
        print(f"{'iperf3 TCP':>14}: {g:6.2f} Gbit/s", flush=True)
        for name, args in lat_runs:
            r = perf(a.mroce, args)
            for k in lat[name]:
                lat[name][k].append(r[k])
            print(f"{name:>14}: p50 {r['t_typical']:.2f} us, p99 {r['percentile_99']:.2f} us, "
                  f"p99.9 {r['percentile_99.9']:.2f} us (one way, RTT/2)", flush=True)
        if a.verbs:
            r = perftest(a.verbs, "ib_write_lat", ["-s", "8", "-n", "20000"])
            for k in lat["verbs lat 8"]:
                lat["verbs lat 8"][k].append(r[k])
            print(f"{'verbs lat 8':>14}: p50 {r['t_typical']:.2f} us, p99 {r['percentile_99']:.2f} us, "
                  f"p99.9 {r['percentile_99.9']:.2f} us (ib_write_lat, one way)", flush=True)
    med = {k: statistics.median(v) for k, v in gbps.items()}
    print(f"\nmedians of {a.reps} (Gbit/s of goodput); ratio: median over repetitions of")
    print("mroce / --raw of the same size in the same repetition (paired, so the machine's")
    print("load, which changes between repetitions, cancels out):")
    for name in gbps:
        ratio = ""
        if name.startswith("mroce"):
            raw = gbps["raw 64K" if "64K" in name else "raw 1M"]
            pairs = [m / r for m, r in zip(gbps[name], raw)]
            ratio = (f"  = {100 * statistics.median(pairs):.0f}% of --raw "
                     f"({', '.join(f'{100 * x:.0f}%' for x in pairs)})")
        if name == "verbs 64K":
            pairs = [v / m for v, m in zip(gbps[name], gbps["mroce 64K"])]
            ratio = (f"  = {100 * statistics.median(pairs):.0f}% of mroce perf 64K "
                     f"({', '.join(f'{100 * x:.0f}%' for x in pairs)})")
        print(f"{name:>14}: {med[name]:6.2f}  (runs {', '.join(f'{x:.2f}' for x in gbps[name])}){ratio}")
    print("\nCPU seconds (user + system, client + server) per GB placed, median:")
    for name, v in cpu_gb.items():
        print(f"{name:>14}: {statistics.median(v):.3f}  (runs {', '.join(f'{x:.3f}' for x in v)})")
    for name, v in lat.items():
        print(f"{name:>14}: p50 {statistics.median(v['t_typical']):.2f} us, "
              f"p99 {statistics.median(v['percentile_99']):.2f} us, "
              f"p99.9 {statistics.median(v['percentile_99.9']):.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
