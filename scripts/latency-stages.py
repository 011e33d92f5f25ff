#!/usr/bin/python3
"""latency-stages.py — where the latency of one small WRITE goes (issue 19): runs
`mroce perf --lat --stages` on 127.0.0.1 (client on CPU 0, server on CPU 1, as
perf-loopback.py), merges the two processes' stage stamps (api/stage_trace.h; both read
CLOCK_MONOTONIC, one clock for the host) into one time line and prints, per stage of the
round trip, the median and p99 of its duration over every measured ping-pong.

A round trip starts at the client's post of its WRITE_WITH_IMM and ends when the client's
CQ poll returns the peer's answer (the last `polled` before the next `post`). Between them,
each side's stages are matched in order: the first stamp of the next stage after the
previous one (the client's last ones: the last before the end). A `sent` stamp follows a
whole batch (the answer's sendmmsg and a held ACK's), so the rows that cross from one
process to the other run from `engine_tx` to the peer's `received`. The stages' medians need not add up to the median round trip (medians do
not add), but their means do, and the table prints both.

With --verbs DIR, the same for perftest's ib_write_lat (8 bytes) on the Verbs library in
DIR (build/verbs), which stamps the same stages when MROCE_STAGES is set (verbs/README.md):
its round trip is the same chain, a WRITE whose completion comes with the peer's answer.
MROCE_* settings in the environment apply to both processes.

usage: scripts/latency-stages.py [--mroce build/mroce] [-n 20000] [--busy-poll] [--json FILE]
       scripts/latency-stages.py --verbs build/verbs [-n 20000] [--json FILE]
       scripts/latency-stages.py --from FILE   (a client --json of `perf --lat --stages`)
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(mroce, args):
    port = free_port()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    server = subprocess.Popen(["taskset", "-c", "1", mroce, "perf", "-p", str(port)] + args,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        out = subprocess.run(["taskset", "-c", "0", mroce, "perf", "127.0.0.1", "-p", str(port),
                              "--json", path] + args, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"mroce perf {' '.join(args)}: {out.stderr.strip()}")
        server.wait(timeout=30)
        with open(path) as f:
            return json.load(f)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        os.unlink(path)


def run_verbs(libdir, n):
    """ib_write_lat on the library in `libdir`, both processes stamping (MROCE_STAGES);
    returns the result in the shape of `mroce perf --json` with both sides' stamps."""
    port = free_port()
    tmp = tempfile.mkdtemp()
    common = ["ib_write_lat", "-F", "-p", str(port), "-s", "8", "-n", str(n)]
    def env(side):
        return dict(os.environ, LD_LIBRARY_PATH=os.path.abspath(libdir),
                    MROCE_STAGES=os.path.join(tmp, side))
    server = subprocess.Popen(["taskset", "-c", "1"] + common, env=env("server"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        subprocess.run(["sleep", "0.3"])
        out = subprocess.run(["taskset", "-c", "0"] + common + ["127.0.0.1"], env=env("client"),
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"ib_write_lat: {out.stderr.strip()}")
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    row = next(l.split() for l in out.stdout.splitlines()
               if l.split() and l.split()[0].isdigit() and len(l.split()) >= 5)
    r = {"t_typical": float(row[4]), "percentile_99": float(row[7])}
    for side, key in (("client", "stages"), ("server", "server_stages")):
        files = [f for f in os.listdir(tmp) if f.startswith(side + ".")]
        if len(files) != 1:
            raise RuntimeError(f"MROCE_STAGES: {len(files)} files of the {side} in {tmp}")
        with open(os.path.join(tmp, files[0])) as f:
            r[key] = json.load(f)["stages"]
        os.unlink(os.path.join(tmp, files[0]))
    os.rmdir(tmp)
    return {"results": [r]}


# The stages of one round trip, as (label, side, stage): each is the first stamp of that
# side and stage after the previous one. C: client, S: server.
FORWARD = [
    ("C post -> engine produced DATA", "C", "engine_tx"),
    ("C sendmmsg, loopback, S notices (poll/wake, recvmmsg)", "S", "received"),
    ("S engine: decode, place, complete", "S", "engine_rx"),
    ("S completion routed to the CQ", "S", "completed"),
    ("S rest of the pass (sends, if not held)", "S", "polled"),
    ("S application: repost receive, post answer", "S", "post"),
    ("S post -> engine produced DATA", "S", "engine_tx"),
]
BACK = [  # matched backwards from the end of the round trip: the last such stamp before it
    ("S sendmmsg, loopback, C notices (poll/wake, recvmmsg)", "C", "received"),
    ("C engine: decode, place, complete", "C", "engine_rx"),
    ("C completion routed to the CQ", "C", "completed"),
]
LAST = "C rest of the pass (sends, if not held)"


def breakdown(result, skip=16):
    stamps = [("C", s, ns, n) for s, ns, n, *_tid in result["stages"]]
    stamps += [("S", s, ns, n) for s, ns, n, *_tid in result["server_stages"]]
    stamps.sort(key=lambda x: x[2])
    posts = [i for i, x in enumerate(stamps) if x[0] == "C" and x[1] == "post"]
    rows = {label: [] for label, _, _ in FORWARD + BACK}
    rows[LAST] = []
    totals = []
    for k in range(skip, len(posts) - 1):
        start, nxt = posts[k], posts[k + 1]
        ends = [i for i in range(start, nxt) if stamps[i][0] == "C" and stamps[i][1] == "polled"]
        if not ends:
            continue
        end = ends[-1]
        found = {}
        i, t = start, stamps[start][2]
        for label, side, stage in FORWARD:
            j = next((j for j in range(i + 1, end) if stamps[j][0] == side and stamps[j][1] == stage), None)
            if j is None:
                break
            found[label] = stamps[j][2] - t
            i, t = j, stamps[j][2]
        if len(found) < len(FORWARD):
            continue
        back, jb = [], end
        for label, side, stage in reversed(BACK):
            j = next((j for j in range(jb - 1, i, -1) if stamps[j][0] == side and stamps[j][1] == stage), None)
            if j is None:
                break
            back.append((label, stamps[j][2]))
            jb = j
        if len(back) < len(BACK):
            continue
        back.reverse()
        for label, at in back:
            found[label] = at - t
            t = at
        found[LAST] = stamps[end][2] - t
        for label, v in found.items():
            rows[label].append(v)
        totals.append(stamps[end][2] - stamps[start][2])
    return rows, totals


def pct(v, p):
    v = sorted(v)
    return v[max(0, min(len(v) - 1, int(-(-len(v) * p // 1)) - 1))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mroce", default="build/mroce")
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--busy-poll", action="store_true")
    ap.add_argument("--json", help="also write the client's JSON here")
    ap.add_argument("--verbs", help="ib_write_lat on the library in this directory")
    ap.add_argument("--from", dest="src", help="read a client --json instead of running")
    a = ap.parse_args()
    if a.src:
        with open(a.src) as f:
            doc = json.load(f)
    elif a.verbs:
        doc = run_verbs(a.verbs, a.n)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(doc, f)
    else:
        args = ["--lat", "-s", "8", "-n", str(a.n), "--stages"] + (["--busy-poll"] if a.busy_poll else [])
        doc = run(a.mroce, args)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(doc, f)
    r = doc["results"]
    if isinstance(r, list):  # mroce perf writes one result per message size
        r = r[0]
    rows, totals = breakdown(r)
    print(f"{len(totals)} round trips; perf's own figures (one way): p50 {r['t_typical']:.2f} us, "
          f"p99 {r['percentile_99']:.2f} us")
    print(f"{'stage':<52} {'median':>8} {'mean':>8} {'p99':>8}  (us, of the round trip)")
    mean_sum = 0.0
    for label, v in rows.items():
        if not v:
            continue
        mean = statistics.mean(v) / 1e3
        mean_sum += mean
        print(f"{label:<52} {statistics.median(v) / 1e3:8.2f} {mean:8.2f} {pct(v, 0.99) / 1e3:8.2f}")
    print(f"{'round trip':<52} {statistics.median(totals) / 1e3:8.2f} {statistics.mean(totals) / 1e3:8.2f} "
          f"{pct(totals, 0.99) / 1e3:8.2f}")
    print(f"(sum of the stage means: {mean_sum:.2f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
