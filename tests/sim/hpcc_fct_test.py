#!/usr/bin/python3
"""fct_hpcc.txt is usable by HPCC's analysis/fct_analysis.py unchanged (issue 18). That
script (github.com/alibaba-edu/High-Precision-Congestion-Control, Python 2) runs, per file,
    awk '{if ($4==100 && $6+$7<T) {slow=$7/$8; print slow<1?1:slow, $5}}' | sort -n -k 2
(-t 1: $4==200, the incast flows), drops the last line of that output, cuts the rest into
buckets of `step` percent by size and takes each bucket's last size and its slowdowns'
sample at rank int(n * p) for p = 0.5, 0.95, 0.99. This test does the same steps in
Python 3 (a reimplementation, not its code) on the output of `mroce sim`:

- scenarios/hpcc-import.toml (HPCC's flow file: dport 100 and 200 as written there);
- an incast generated here with two extra flows beside it (the incast's flows get 200,
  the others 100).

It checks that every line has the 8 numeric fields the awk program reads, that -t 0 and
-t 1 select exactly the normal and the incast flows, that every standalone FCT is positive
(awk dies dividing by 0), and that the buckets and percentiles come out of the sizes.

usage: hpcc_fct_test.py MROCE_BINARY SCENARIOS_DIR
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

MROCE, SCENARIOS = sys.argv[1], sys.argv[2]
FAILURES = []
TIME_LIMIT = 3000000000  # fct_analysis.py's -T default, ns


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def awk_number(field):
    """awk's value of a numeric-looking field; None for one awk would compare as a string."""
    return float(field) if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", field) else None


def select(text, kind):
    """The awk | sort stage: (slowdown, size) for flows of dport 100 (kind 0) or 200 (1)."""
    port = {0: 100, 1: 200}[kind]
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        f = line.split()
        check(len(f) == 8, f"line {n}: {len(f)} fields, fct_analysis.py reads 8: {line!r}")
        check(all(re.fullmatch(r"[0-9a-f]{8}", x) for x in f[:2]), f"line {n}: sip/dip not 8 hex digits: {line!r}")
        v = [awk_number(x) for x in f[2:]]
        check(all(x is not None for x in v), f"line {n}: a field awk would not read as a number: {line!r}")
        if len(f) != 8 or any(x is None for x in v):
            continue
        dport, size, start, fct, standalone = v[1], f[4], v[3], v[4], v[5]
        if dport == port and start + fct < TIME_LIMIT:
            check(standalone > 0, f"line {n}: standalone fct {f[7]}: awk's $7/$8 would divide by zero")
            slow = fct / standalone if standalone > 0 else math.inf
            rows.append((1.0 if slow < 1 else slow, size))
    rows.sort(key=lambda r: float(r[1]))  # sort -n -k 2
    return rows


def analyse(rows, step):
    """The Python stage: drop the output's last line, bucket by `step` percent, and per
    bucket (last size, p50, p95, p99) with get_pctl(a, p) = a[int(len(a) * p)]."""
    a = rows[:-1]  # output.split('\n')[:-2]: the trailing '' and the last row
    n = len(a)
    out = []
    for i in range(0, 100, step):
        lo, hi = i * n // 100, (i + step) * n // 100
        d = a[lo:hi]
        check(d, f"bucket {i}%: empty ({n} rows, step {step}): fct_analysis.py would fail on d[-1]")
        if not d:
            continue
        fct = sorted(s for s, _ in d)
        out.append((int(d[-1][1]), *(fct[int(len(fct) * p)] for p in (0.5, 0.95, 0.99))))
    return out


def run(args, out):
    p = subprocess.run([MROCE, "sim", *args, "--out", out], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"mroce sim {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def check_run(out, r, normal_sizes, incast_sizes):
    """normal_sizes, incast_sizes: the flow sizes expected in -t 0 and -t 1."""
    with open(os.path.join(out, r["dir"], "fct_hpcc.txt")) as f:
        text = f.read()
    for kind, sizes in ((0, normal_sizes), (1, incast_sizes)):
        rows = select(text, kind)
        got = sorted(int(s) for _, s in rows)
        check(got == sorted(sizes), f"{r['label']} -t {kind}: sizes {got}, expected {sorted(sizes)}")
        check(all(s >= 1 for s, _ in rows), f"{r['label']} -t {kind}: a slowdown below 1")
        if len(rows) < 2:  # failed above; the script itself would fail on an empty bucket
            continue
        # The script's -s: every bucket needs a row (it reads d[-1]), so step * n >= 100.
        step = next(x for x in (5, 10, 20, 25, 50, 100) if x * (len(rows) - 1) >= 100)
        res = analyse(rows, step)
        # Each bucket's size is the largest in it; the last bucket's is the second
        # largest size overall (the script drops the largest row).
        check(res and res[-1][0] == sorted(sizes)[-2], f"{r['label']} -t {kind}: buckets {res}")
        check(all(p50 <= p95 <= p99 for _, p50, p95, p99 in res), f"{r['label']} -t {kind}: percentiles {res}")
        print(f"  {r['label']} -t {kind}: {len(rows)} flows, buckets (size, p50, p95, p99) "
              + ", ".join(f"({s}, {a:.2f}, {b:.2f}, {c:.2f})" for s, a, b, c in res))


def main():
    with tempfile.TemporaryDirectory() as out:
        s = run([os.path.join(SCENARIOS, "hpcc-import.toml")], out)
        flows = []
        with open(os.path.join(SCENARIOS, "data", "hpcc-flow.txt")) as f:
            lines = [l.split() for l in f if l.strip()]
        flows = [(int(x[3]), int(x[4])) for x in lines[1:1 + int(lines[0][0])]]
        for r in s["runs"]:
            check_run(out, r, [b for p, b in flows if p == 100], [b for p, b in flows if p == 200])
    with tempfile.TemporaryDirectory() as tmp:
        scenario = os.path.join(tmp, "incast.toml")
        with open(scenario, "w") as f:
            f.write('name = "incast-hpcc"\nseed = 1\n[topology]\nkind = "single_switch"\nhosts = 8\n'
                    '[workload]\nkind = "incast"\nreceiver = 0\nsenders = 5\nbytes = 100000\n'
                    '[[workload.flows]]\nsrc = 6\ndst = 7\nbytes = 30000\n'
                    '[[workload.flows]]\nsrc = 7\ndst = 6\nbytes = 60000\n'
                    '[run]\ntime_limit_us = 20000\n[sweep]\nprotocol = ["mroce", "rocev2"]\n')
        out = os.path.join(tmp, "out")
        s = run([scenario], out)
        for r in s["runs"]:
            check_run(out, r, [30000, 60000], [100000] * 5)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    print("hpcc_fct_test: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
