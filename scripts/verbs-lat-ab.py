#!/usr/bin/python3
"""verbs-lat-ab.py — builds of mroce's libibverbs.so.1 side by side on 127.0.0.1, alternated,
in the unmodified latency programs: perftest's ib_send_lat, ib_write_lat and ib_read_lat
(8 bytes) and ib_atomic_lat, and rdma-core's ibv_rc_pingpong (8 bytes).

usage: scripts/verbs-lat-ab.py REPS [-n ITERS] [--events] [--sizes 8,16384,...] NAME=LIBDIR [NAME=LIBDIR ...]

With --sizes, each program runs at each of those message sizes (default 8; a size above
4096 bytes is a message of several segments).

With --events, also ib_send_lat -e and ibv_rc_pingpong -e (completion channels: the
application blocks in ibv_get_cq_event between messages), at a tenth of ITERS.

Each repetition runs every program once per library, the libraries in an order that
reverses every repetition; server and client on one host, unpinned. Prints every run, then
per program and library the medians of t_typical and p99 (perftest) or of the time per
iteration (ibv_rc_pingpong, one round trip), each with the median of the per-repetition
ratios to the first library. Copy each library to its own directory first: a rebuild
under a running comparison corrupts it.
"""
import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("perf_loopback", os.path.join(_here, "perf-loopback.py"))
perf_loopback = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(perf_loopback)

PROGRAMS = {
    "ib_send_lat": ["ib_send_lat", "-s", "8"],
    "ib_write_lat": ["ib_write_lat", "-s", "8"],
    "ib_read_lat": ["ib_read_lat", "-s", "8"],
    "ibv_rc_pingpong": ["ibv_rc_pingpong", "-g", "0", "-s", "8"],
}
EVENT_PROGRAMS = {
    "ib_send_lat -e": ["ib_send_lat", "-s", "8", "-e"],
    "ibv_rc_pingpong -e": ["ibv_rc_pingpong", "-g", "0", "-s", "8", "-e"],
}


def rc_pingpong(libdir, argv, iters):
    """ibv_rc_pingpong's server and client on the library; its time per iteration (one
    round trip). perftest's programs go through perf-loopback.py's perftest()."""
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.abspath(libdir))
    port = perf_loopback.free_port()
    args = argv + ["-n", str(iters), "-p", str(port)]
    server = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if perf_loopback.listening(port):
                break
            subprocess.run(["sleep", "0.01"])
        client = subprocess.run(args + ["127.0.0.1"], env=env, capture_output=True, text=True, timeout=120)
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    m = re.search(r"= ([\d.]+) usec/iter", client.stdout)
    if client.returncode != 0 or not m:
        sys.exit(f"verbs-lat-ab.py: {' '.join(args)} on {libdir}: exit {client.returncode}\n{client.stderr}")
    return {"per_iteration_us": float(m.group(1))}


def run_pair(libdir, argv, iters):
    """Server and client of one program on the library; returns the client's figures."""
    if argv[0] == "ibv_rc_pingpong":
        return rc_pingpong(libdir, argv, iters)
    r = perf_loopback.perftest(libdir, argv[0], argv[1:] + ["-n", str(iters)], pinned=False)
    return {"typical_us": r["t_typical"], "p99_us": r["percentile_99"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reps", type=int)
    ap.add_argument("libs", nargs="+", metavar="NAME=LIBDIR")
    ap.add_argument("-n", type=int, default=10000, help="iterations per run (default 10000)")
    ap.add_argument("--events", action="store_true", help="also the completion-channel variants")
    ap.add_argument("--sizes", default="8", help="message sizes in bytes, comma-separated (default 8)")
    a = ap.parse_args()
    try:
        sizes = [int(x) for x in a.sizes.split(",")]
    except ValueError:
        sys.exit(f"verbs-lat-ab.py: --sizes {a.sizes}: not a list of byte counts")
    if any(x < 1 for x in sizes):
        sys.exit(f"verbs-lat-ab.py: --sizes {a.sizes}: a size must be at least 1 byte")

    def sized(table, iters):
        # The tables say "-s 8": each size replaces it; the name says which size ran.
        out = {}
        for size in sizes:
            for k, v in table.items():
                argv = [str(size) if i > 0 and v[i - 1] == "-s" else x for i, x in enumerate(v)]
                out[k if sizes == [8] else f"{k} {size}"] = (argv, iters)
        return out

    programs = sized(PROGRAMS, a.n)
    programs["ib_atomic_lat"] = (["ib_atomic_lat"], a.n)  # one size: 8 bytes
    if a.events:
        programs.update(sized(EVENT_PROGRAMS, max(1, a.n // 10)))
    libs = []
    for spec in a.libs:
        name, sep, path = spec.partition("=")
        if not sep or not os.path.exists(os.path.join(path, "libibverbs.so.1")):
            sys.exit(f"verbs-lat-ab.py: '{spec}' is not NAME=DIR with DIR/libibverbs.so.1")
        libs.append((name, path))
    runs = {(p, n): [] for p in programs for n, _ in libs}
    for rep in range(a.reps):
        order = libs if rep % 2 == 0 else list(reversed(libs))
        for prog, (argv, iters) in programs.items():
            for name, path in order:
                r = run_pair(path, argv, iters)
                runs[(prog, name)].append(r)
                print(f"rep {rep} {prog} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()), flush=True)
    print(f"\nmedians of {a.reps} (ratio to {libs[0][0]}, paired per repetition)")
    for prog in programs:
        base = runs[(prog, libs[0][0])]
        for name, _ in libs:
            mine = runs[(prog, name)]
            cols = []
            for k in mine[0]:
                med = statistics.median(r[k] for r in mine)
                ratio = statistics.median(m[k] / b[k] for m, b in zip(mine, base))
                cols.append(f"{k} {med:.2f} ({ratio:.3f})")
            print(f"{prog:20} {name:10} " + "  ".join(cols))


if __name__ == "__main__":
    main()
