#!/usr/bin/python3
"""cc_experiments.py — issue 13's congestion-control experiments, MetaRoCE against RoCEv2.

Runs `mroce sim` on the scenarios below (fixed seeds: the files' own), computes each target's
figure from the outputs (summary.json, fct.txt, throughput.csv; docs/sim.md's contract),
prints a Markdown table `| experiment | target | mroce | rocev2 (PFC) | rocev2 (no PFC) | met? |`
followed by the exact commands, writes it to OUT/cc-results.md, and draws plots into OUT.

  incast     1. N -> 1 incast, N = 8, 32, 64, 256, plus a victim flow (incast-cc.toml)
             RoCEv2 runs with PFC (the files' own sweeps) and again without (rocev2.pfc = false)
             wherever a file runs it with PFC: incast, first-rtt's websearch, websearch
  ablation   2. the same, MetaRoCE with the hint off and with AIMD off (fixed window)
  first-rtt  3. mroce.first_rtt_bytes in {16384, 65536, 262144}: incast N = 64 and
                WebSearch at 50 % load (cc-first-rtt.toml)
  classes    4. two traffic classes into one receiver, class weights 4:1, both in one switch
                queue, then strict-priority queues (cc-class-weights.toml)
  rtt        5. 4 long flows with base RTTs 10 us, 10 us, 100 us, 1 ms (then 10 ms) through
                one bottleneck (cc-rtt-fairness.toml, cc-rtt-fairness-10ms.toml)
  websearch  6. WebSearch background at 30 / 50 / 70 % plus a 16 -> 1 incast (cc-websearch.toml)
  a2a        7. bench-a2a64.toml: finish_fraction_of_ideal, default controller and ablations

usage: cc_experiments.py [--only NAME[,NAME...]] [--mroce PATH] [--out DIR]
  --mroce  the simulator binary (default: build/mroce of this checkout); it is copied to
           OUT/.mroce first, so a rebuild during the sweep does not change what runs
  --out    output directory (default /tmp/ccx); one subdirectory per command
  --only   run only these experiments (names above); may be repeated

Plots (OUT/): incast64-queue.png (bottleneck queue over time, N = 64, both protocols),
incast64-rate.png (per-sender goodput over time), websearch-fct-cdf.png (FCT slowdown CDFs
per load, both protocols), classes-goodput.png and rtt-goodput.png (per-flow goodput).

Needs /usr/bin/python3 and python3-matplotlib (Agg backend). Runs one simulator at a time.
"""
import argparse
import csv
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCAST_NS = (8, 32, 64, 256)
FIRST_RTT = (16384, 65536, 262144)
LOADS = (0.3, 0.5, 0.7)
BUCKETS = ("<100KB", "100KB-1MB", ">1MB")
MROCE_DATA_HEADER = 72          # bytes per DATA packet (docs/sim.md, ideal_fct_ns)
EXPERIMENTS = ("incast", "ablation", "first-rtt", "classes", "rtt", "websearch", "a2a")


# ---------------------------------------------------------------------------------------
# Pure functions (tests/simtools/cc_experiments_test.py)

def nearest_rank(values, p):
    """The p-quantile (0 < p <= 1) of values by nearest rank: the rank rule of the
    simulator's percentiles, exact here (summary.json's are obs::Histogram's, within 3.2%);
    None for no values."""
    s = sorted(values)
    if not s:
        return None
    return s[max(0, math.ceil(p * len(s)) - 1)]


def slowdown(fct_ns, ideal_ns):
    """FCT slowdown = fct / ideal fct (fct.txt columns 7 / 8)."""
    if ideal_ns <= 0:
        raise ValueError("ideal_fct_ns must be > 0")
    return fct_ns / ideal_ns


def size_bucket(size_bytes):
    """The flow-size bucket: < 100 KB, 100 KB .. 1 MB (inclusive), > 1 MB (decimal units)."""
    if size_bytes < 100_000:
        return BUCKETS[0]
    if size_bytes <= 1_000_000:
        return BUCKETS[1]
    return BUCKETS[2]


def bucket_slowdowns(flows):
    """flows: dicts with 'size' and 'slowdown'. Returns {bucket: (count, p50, p99)} for
    every bucket (count 0 and None quantiles when a bucket is empty)."""
    by = {b: [] for b in BUCKETS}
    for f in flows:
        by[size_bucket(f["size"])].append(f["slowdown"])
    return {b: (len(v), nearest_rank(v, 0.5), nearest_rank(v, 0.99)) for b, v in by.items()}


def jain(xs):
    """Jain's fairness index (sum x)^2 / (n sum x^2); None for no values, 1 when all are 0."""
    xs = list(xs)
    if not xs:
        return None
    sq = sum(x * x for x in xs)
    if sq == 0:
        return 1.0
    return sum(xs) ** 2 / (len(xs) * sq)


def parse_fct(lines):
    """fct.txt lines -> dicts: src, dst (hex strings), size, start_ns, fct_ns, ideal_ns,
    slowdown. Blank lines are skipped; a malformed line raises ValueError."""
    out = []
    for n, line in enumerate(lines, 1):
        f = line.split()
        if not f:
            continue
        if len(f) != 8:
            raise ValueError(f"fct.txt line {n}: expected 8 fields, got {len(f)}")
        size, start, fct, ideal = int(f[4]), int(f[5]), int(f[6]), int(f[7])
        out.append({"src": f[0], "dst": f[1], "size": size, "start_ns": start, "fct_ns": fct,
                    "ideal_ns": ideal, "slowdown": slowdown(fct, ideal)})
    return out


def parse_throughput(lines):
    """throughput.csv lines (with the header) -> list of (time_us, flow, gbps)."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None or [h.strip() for h in header[:3]] != ["time_us", "flow", "gbps"]:
        raise ValueError(f"throughput.csv: bad header {header!r}")
    return [(float(r[0]), r[1].strip(), float(r[2])) for r in reader if r]


def window_goodput(samples, t0, t1, flows=None):
    """Mean goodput (Gbit/s) of each flow over the samples whose interval ends in (t0, t1].
    A sample's interval runs from the previous sample time (of any flow) to its own; a flow
    without a row at a sample time placed nothing then (throughput.csv writes a flow only
    while it is active). Returns {flow: gbps} for `flows` (default: every flow seen, not
    'all'); {} when no interval ends in the window."""
    times = sorted({t for t, _, _ in samples})
    dt, prev = {}, 0.0
    for t in times:
        dt[t] = t - prev
        prev = t
    span = sum(dt[t] for t in times if t0 < t <= t1)
    if span <= 0:
        return {}
    if flows is None:
        flows = sorted({f for _, f, _ in samples if f != "all"}, key=flow_key)
    acc = {f: 0.0 for f in flows}
    for t, f, g in samples:
        if f in acc and t0 < t <= t1:
            acc[f] += g * dt[t]
    return {f: v / span for f, v in acc.items()}


def flow_key(f):
    return (0, int(f), "") if f.lstrip("-").isdigit() else (1, 0, f)


def stall_target_us(message_bytes, senders, rate_gbps):
    """5 x the gap between completions expected at fair share: a sender's message takes
    message_bytes x N / line rate."""
    return 5 * message_bytes * senders * 8 / (rate_gbps * 1e3)


def burst_fits(first_rtt_bytes, senders, buffer_bytes, max_payload=4096,
               header=MROCE_DATA_HEADER):
    """True when every sender's first-RTT burst (payload plus DATA headers) fits the
    bottleneck port's buffer: the case where drops must stay <= 0.1 %."""
    packets = math.ceil(first_rtt_bytes / max_payload)
    return (first_rtt_bytes + packets * header) * senders <= buffer_bytes


def slowdown_verdict(m, r):
    """The issue's WebSearch target for one size bucket: MetaRoCE's FCT slowdown p50 AND
    p99 each <= RoCEv2's in the same run. m, r: (count, p50, p99) as bucket_slowdowns
    gives them. Returns (ok, text): ok None when either side has no flows in the bucket;
    text names every quantile that fails, e.g. 'no (p50 3.711 > 3.687)'."""
    if not m[0] or not r[0]:
        return None, "n/a (no flows)"
    fails = [f"{q} {fmt(a)} > {fmt(b)}" for q, a, b in (("p50", m[1], r[1]), ("p99", m[2], r[2]))
             if a > b]
    if fails:
        return False, "no (" + "; ".join(fails) + ")"
    return True, "yes (p50 and p99 <= rocev2)"


def within(value, target, tolerance):
    """|value / target - 1| <= tolerance."""
    return value is not None and abs(value / target - 1) <= tolerance


# ---------------------------------------------------------------------------------------
# Running the simulator and reading its outputs

class Runner:
    def __init__(self, binary, out):
        self.binary, self.out = binary, out
        self.commands = []      # (ref, shell command)
        self.wall = {}          # experiment -> seconds

    def sim(self, exp, sub, scenario, sets=(), extra=()):
        """Runs one `mroce sim` into OUT/sub, with `--set` for each of sets and the options
        in extra (e.g. --seed, --pcap); returns (summary, command reference)."""
        out_dir = os.path.join(self.out, sub)
        args = ["sim", os.path.join("scenarios", scenario)]
        for s in sets:
            args += ["--set", s]
        args += list(extra) + ["--out", out_dir]
        shown = "mroce " + " ".join(shlex.quote(a) for a in args)
        ref = f"c{len(self.commands) + 1}"
        self.commands.append((ref, shown))
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        t = time.monotonic()
        p = subprocess.run([self.binary] + args, cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        took = time.monotonic() - t
        self.wall[exp] = self.wall.get(exp, 0.0) + took
        print(f"[{exp}] {ref} {took:6.1f} s  {shown}", flush=True)
        if p.returncode != 0:
            print(p.stdout, file=sys.stderr)
            raise SystemExit(f"{os.path.basename(sys.argv[0])}: {ref} failed (exit {p.returncode})")
        with open(os.path.join(out_dir, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
        summary["_dir"] = out_dir
        return summary, ref


def run_of(summary, protocol, **params):
    """The run of `protocol` whose params match (keys: full dotted names)."""
    for r in summary["runs"]:
        if r["protocol"] != protocol:
            continue
        if all(r["params"].get(k) == v for k, v in params.items()):
            return r
    return None


def run_dir(summary, run):
    return os.path.join(summary["_dir"], run["dir"])


def read_fct(summary, run):
    with open(os.path.join(run_dir(summary, run), "fct.txt"), encoding="utf-8") as f:
        return parse_fct(f)


def read_throughput(summary, run):
    with open(os.path.join(run_dir(summary, run), "throughput.csv"), newline="",
              encoding="utf-8") as f:
        return parse_throughput(f)


def read_queue(summary, run):
    with open(os.path.join(run_dir(summary, run), "queue.csv"), newline="",
              encoding="utf-8") as f:
        reader = csv.reader(f)
        next(reader, None)
        return [(float(r[0]), r[1], float(r[2])) for r in reader if r]


# ---------------------------------------------------------------------------------------
# The table

def fmt(v, digits=3):
    if v is None:
        return "null"
    if isinstance(v, str):
        return v
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 1000):
        return f"{int(v)}"
    a = abs(v)
    if a != 0 and (a < 0.001 or a >= 1e5):
        return f"{v:.3g}"
    return f"{v:.{digits}f}" if a < 10 else f"{v:.1f}"


def pct(v):
    return "null" if v is None else f"{100 * v:.3f} %"


def verdict(ok):
    return {True: "yes", False: "no", None: "n/a"}[ok]


class Table:
    def __init__(self):
        self.rows, self.notes = [], []

    def add(self, experiment, target, mroce, rocev2, met, rocev2_nopfc="—"):
        """rocev2: RoCEv2 with PFC + DCQCN; rocev2_nopfc: RoCEv2 with DCQCN alone, lossy
        (the issue runs both in the same sweeps); '—' where that variant did not run."""
        self.rows.append((experiment, target, mroce, rocev2, rocev2_nopfc, met))

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    def markdown(self, runner):
        out = ["| experiment | target | mroce | rocev2 (PFC) | rocev2 (no PFC) | met? |",
               "|---|---|---|---|---|---|"]
        for r in self.rows:
            out.append("| " + " | ".join(str(c).replace("|", "/") for c in r) + " |")
        out.append("")
        out.append("met? = MetaRoCE against the target (RoCEv2's own in parentheses where it "
                   "applies: PFC, then no PFC); n/a = the target does not apply (see notes). "
                   "rocev2 (PFC) = DCQCN over PFC (lossless, go-back-N never needed); "
                   "rocev2 (no PFC) = DCQCN alone over the lossy fabric (go-back-N).")
        out.append("")
        out.append("Commands (`mroce` = the binary; run from the repository root):")
        out.append("")
        for ref, cmd in runner.commands:
            out.append(f"- [{ref}] `{cmd}`")
        out.append("")
        out.append("Wall time per experiment (this machine, one simulator at a time):")
        out.append("")
        for exp, s in runner.wall.items():
            out.append(f"- {exp}: {s:.1f} s")
        if self.notes:
            out.append("")
            out.append("Notes:")
            out.append("")
            for n in self.notes:
                out.append(f"- {n}")
        return "\n".join(out) + "\n"


def both(check, m, r, r_nopfc=None):
    """'yes' / 'no' for MetaRoCE, with RoCEv2's (PFC, then no PFC) in parentheses for the
    variants that have a figure."""
    s = verdict(check(m) if m is not None else False)
    others = [f"{label} {verdict(check(v))}" for label, v in
              (("rocev2", r), ("no PFC", r_nopfc)) if v is not None]
    if others:
        s += " (" + ", ".join(others) + ")"
    return s


# ---------------------------------------------------------------------------------------
# Experiments

INCAST_RATE_GBPS = 100
INCAST_BUFFER = 4194304
INCAST_MESSAGE = 65536
DEFAULT_FIRST_RTT = 32768       # core/config.h
# RoCEv2 without PFC: DCQCN alone over the lossy fabric, in a scenario whose own sweep runs
# RoCEv2 with PFC (the issue: "RoCEv2 (DCQCN, with and without PFC) runs in the same sweeps").
ROCEV2_NO_PFC = ['sweep.protocol=["rocev2"]', "rocev2.pfc=false"]


def victim_slowdown(summary, run):
    """The victim flow's slowdown: the flow whose destination is not the incast receiver's
    (the receiver is the most common destination in fct.txt)."""
    flows = read_fct(summary, run)
    counts = {}
    for f in flows:
        counts[f["dst"]] = counts.get(f["dst"], 0) + 1
    if not counts:
        return None
    receiver = max(counts, key=counts.get)
    victims = [f for f in flows if f["dst"] != receiver]
    return victims[0]["slowdown"] if victims else None


def null_reason(m):
    if m.get("t_know_us") is None:
        return "the receiver never heard from every sender (t_know_us null)"
    if m.get("settle_us") is None:
        return ("a bottleneck queue was still >= 1 BDP when the first sender finished "
                f"(settle_us null; queue_peak {m.get('queue_peak_bytes')} B, "
                f"BDP {m.get('bdp_bytes')} B)")
    return "no Jain window fits between t_know + settle and the first sender's completion"


def incast_rows(table, label, n, s, ref, m_run, r_run, first_rtt, q=None):
    """The incast target rows of one N. r_run: RoCEv2 with PFC in summary s; q: (summary,
    run, ref) of RoCEv2 without PFC, or None."""
    m = m_run["metrics"] if m_run else None
    r = r_run["metrics"] if r_run else None
    qs, q_run, qref = q if q else (None, None, None)
    x = q_run["metrics"] if q_run else None
    name = f"{label} N={n} [{ref}" + (f", {qref}]" if qref else "]")

    def g(x, k):
        return None if x is None else x.get(k)

    def cells(mv, rv, xv, show=fmt):
        return (show(mv), show(rv) if r else "—", show(xv) if x else "—")

    def row(target, mv, rv, xv, check, show=fmt, met=None):
        c = cells(mv, rv, xv, show)
        table.add(name, target, c[0], c[1],
                  met if met is not None else both(check, mv, rv if r else None, xv if x else None), c[2])

    for key, target, check in (("converge_rtts", "converge_rtts <= 2", lambda v: v is not None and v <= 2),
                               ("jain_index", "jain_index >= 0.95", lambda v: v is not None and v >= 0.95)):
        row(target, g(m, key), g(r, key), g(x, key), check)
        for proto, y in (("mroce", m), ("rocev2", r), ("rocev2 no PFC", x)):
            if y is not None and y.get(key) is None:
                table.note(f"{label} N={n} {proto}: {key} null: {null_reason(y)}.")
    fits = burst_fits(first_rtt, n, INCAST_BUFFER)
    target = (f"drop_fraction <= 0.1 % (burst {first_rtt} B x {n} "
              f"{'fits' if fits else 'exceeds'} the 4 MiB buffer)")
    row(target, g(m, "drop_fraction"), g(r, "drop_fraction"), g(x, "drop_fraction"),
        lambda v: v is not None and v <= 0.001, show=pct, met=None if fits else "n/a")
    limit = stall_target_us(INCAST_MESSAGE, n, INCAST_RATE_GBPS)
    row(f"stall_p99_us <= {limit:.0f} (5 x 64 KiB x N / 100G)", g(m, "stall_p99_us"),
        g(r, "stall_p99_us"), g(x, "stall_p99_us"), lambda v: v is not None and v <= limit)
    row("victim slowdown <= 1.2", victim_slowdown(s, m_run) if m_run else None,
        victim_slowdown(s, r_run) if r_run else None, victim_slowdown(qs, q_run) if q_run else None,
        lambda v: v is not None and v <= 1.2)


def exp_incast(runner, table, plots):
    for n in INCAST_NS:
        s, ref = runner.sim("incast", f"incast/n{n}", "incast-cc.toml",
                            [f"workload.senders={n}"])
        q, qref = runner.sim("incast", f"incast/n{n}-nopfc", "incast-cc.toml",
                             [f"workload.senders={n}"] + ROCEV2_NO_PFC)
        m_run, r_run, q_run = run_of(s, "mroce"), run_of(s, "rocev2"), run_of(q, "rocev2")
        incast_rows(table, "1 incast", n, s, ref, m_run, r_run, DEFAULT_FIRST_RTT,
                    (q, q_run, qref))
        for proto, run in (("mroce", m_run), ("rocev2", r_run), ("rocev2 no PFC", q_run)):
            x = run["metrics"]
            table.note(f"1 incast N={n} {proto}: completion {fmt(x['completion_time_us'])} us, "
                       f"completed {x.get('completed_flows')}/{x.get('flows')}, "
                       f"queue_peak {x.get('queue_peak_bytes')} B, drops {x.get('drops')}, "
                       f"timeouts {x.get('timeouts')}, "
                       f"retransmits {x.get('retransmits')}, pauses {x.get('pauses')}, "
                       f"stop {x.get('stop_reason')}.")
        if n == 64:
            plots.append(lambda s=s, q=q: plot_incast(runner.out, s, q))


def exp_ablation(runner, table, plots):
    for label, sets in (("2 hint off", ["mroce.rate_hint=false"]),
                        ('2 AIMD off (fixed, hint on)', ["mroce.congestion_control=fixed"])):
        tag = "nohint" if "hint off" in label else "fixed"
        for n in INCAST_NS:
            s, ref = runner.sim("ablation", f"ablation/{tag}-n{n}", "incast-cc.toml",
                                [f"workload.senders={n}", 'sweep.protocol=["mroce"]'] + sets)
            incast_rows(table, label, n, s, ref, run_of(s, "mroce"), None, DEFAULT_FIRST_RTT)


def short_flow_figures(flows, incast_start_ns, incast_size):
    """Splits fct.txt flows into the background and the incast's (same start and size)."""
    incast = [f for f in flows if f["start_ns"] == incast_start_ns and f["size"] == incast_size]
    background = [f for f in flows if not (f["start_ns"] == incast_start_ns and f["size"] == incast_size)]
    return background, incast


WS_INCAST_START_NS, WS_INCAST_BYTES = 5_000_000, 131072
# The 16 -> 1 incast beside the WebSearch background: extra flows, hosts 1..16 into host 0.
WS_INCAST = ("workload.flows=[" + ",".join(
    f"{{src={i},dst=0,bytes={WS_INCAST_BYTES},start_us={WS_INCAST_START_NS // 1000}}}"
    for i in range(1, 17)) + "]")


def exp_first_rtt(runner, table, plots):
    s, ref = runner.sim("first-rtt", "first-rtt/incast64", "incast-cc.toml",
                        ["workload.senders=64",
                         "sweep.mroce.first_rtt_bytes=[" + ", ".join(map(str, FIRST_RTT)) + "]"])
    r_run = run_of(s, "rocev2", **{"mroce.first_rtt_bytes": FIRST_RTT[0]})
    for b in FIRST_RTT:
        m_run = run_of(s, "mroce", **{"mroce.first_rtt_bytes": b})
        m, r = m_run["metrics"], r_run["metrics"]
        name = f"3 first_rtt={b} incast N=64 [{ref}]"
        fits = burst_fits(b, 64, INCAST_BUFFER)
        table.add(name, f"drop_fraction <= 0.1 % (burst {'fits' if fits else 'exceeds'} the buffer)",
                  pct(m["drop_fraction"]), pct(r["drop_fraction"]),
                  both(lambda v: v <= 0.001, m["drop_fraction"], r["drop_fraction"]) if fits else "n/a")
        table.add(name, "converge_rtts <= 2 / jain >= 0.95",
                  f"{fmt(m.get('converge_rtts'))} / {fmt(m.get('jain_index'))}",
                  f"{fmt(r.get('converge_rtts'))} / {fmt(r.get('jain_index'))}",
                  verdict(m.get("converge_rtts") is not None and m["converge_rtts"] <= 2
                          and m.get("jain_index") is not None and m["jain_index"] >= 0.95))
        table.add(name, "completion_time_us (report)", fmt(m["completion_time_us"]),
                  fmt(r["completion_time_us"]), "—")
    s, ref = runner.sim("first-rtt", "first-rtt/websearch50", "cc-first-rtt.toml", [WS_INCAST])
    s2, ref2 = runner.sim("first-rtt", "first-rtt/websearch50-rocev2", "cc-first-rtt.toml",
                          [WS_INCAST, 'sweep.protocol=["rocev2"]', "sweep.mroce.first_rtt_bytes=[32768]"])
    s3, ref3 = runner.sim("first-rtt", "first-rtt/websearch50-rocev2-nopfc", "cc-first-rtt.toml",
                          [WS_INCAST, "sweep.mroce.first_rtt_bytes=[32768]"] + ROCEV2_NO_PFC)

    def rocev2_figures(summary):
        bg, inc = short_flow_figures(read_fct(summary, summary["runs"][0]), WS_INCAST_START_NS,
                                     WS_INCAST_BYTES)
        return (bucket_slowdowns(bg)[BUCKETS[0]], nearest_rank([f["slowdown"] for f in inc], 0.99),
                summary["runs"][0]["metrics"]["drops"])

    r_b, r_i, r_d = rocev2_figures(s2)
    q_b, q_i, q_d = rocev2_figures(s3)
    for b in FIRST_RTT:
        m_run = run_of(s, "mroce", **{"mroce.first_rtt_bytes": b})
        bg, inc = short_flow_figures(read_fct(s, m_run), WS_INCAST_START_NS, WS_INCAST_BYTES)
        mb = bucket_slowdowns(bg)[BUCKETS[0]]
        name = f"3 first_rtt={b} websearch 50 % [{ref}, {ref2}, {ref3}]"
        table.add(name, f"slowdown p50 / p99, flows < 100 KB (n={mb[0]}; each <= rocev2's)",
                  f"{fmt(mb[1])} / {fmt(mb[2])}", f"{fmt(r_b[1])} / {fmt(r_b[2])}",
                  slowdown_verdict(mb, r_b)[1], f"{fmt(q_b[1])} / {fmt(q_b[2])}")
        table.add(name, "16 -> 1 incast slowdown p99; drops (report)",
                  f"{fmt(nearest_rank([f['slowdown'] for f in inc], 0.99))}; {m_run['metrics']['drops']}",
                  f"{fmt(r_i)}; {r_d}", "—", f"{fmt(q_i)}; {q_d}")


def class_split(summary, run, classes):
    """Per-class mean goodput over the second half of [0, T], T = the first flow's
    completion (fct.txt) or the last sample. classes: {flow id: class}."""
    samples = read_throughput(summary, run)
    flows = read_fct(summary, run)
    ends = [(f["start_ns"] + f["fct_ns"]) / 1e3 for f in flows]
    last = max(t for t, _, _ in samples)
    t_end = min(ends + [last])
    g = window_goodput(samples, t_end / 2, t_end, flows=[str(i) for i in classes])
    out = {}
    for fid, c in classes.items():
        out[c] = out.get(c, 0.0) + g.get(str(fid), 0.0)
    return out, t_end


# The strict-priority arrangement of cc-class-weights.toml (the file shares one queue).
CLASSES_PRIORITY = ["topology.traffic_classes=2", "topology.class_queues=[0, 1]"]


def exp_classes(runner, table, plots):
    classes = {i: (1 if i < 4 else 0) for i in range(8)}   # flows 0..3 class 1, 4..7 class 0
    panels = []
    for tag, label, queues in (("one", "one shared queue", []),
                               ("prio", "strict-priority queues", CLASSES_PRIORITY)):
        s, ref = runner.sim("classes", f"classes/{tag}-w14", "cc-class-weights.toml", queues)
        s2, ref2 = runner.sim("classes", f"classes/{tag}-w41", "cc-class-weights.toml",
                              queues + ["mroce.class_weights=[4, 1]", 'sweep.protocol=["mroce"]'])
        m_run, r_run = run_of(s, "mroce"), run_of(s, "rocev2")
        m, tm = class_split(s, m_run, classes)
        r, tr = class_split(s, r_run, classes)
        ratio_m = m[1] / m[0] if m.get(0) else None
        ratio_r = r[1] / r[0] if r.get(0) else None
        # The target is the shared queue's (weights enforced by the hint alone);
        # strict priority is the contrast, reported against the same figure.
        target = "class1 / class0 goodput = 4 +- 5 %" + ("" if tag == "one" else " (contrast)")
        table.add(f"4 classes, {label}, weights 1:4 (class 1 weighted 4) [{ref}]", target,
                  f"{fmt(ratio_m)} ({fmt(m[1])} / {fmt(m[0])} Gbit/s, {tm / 2:.0f}-{tm:.0f} us)",
                  "—", both(lambda v: within(v, 4, 0.05), ratio_m, None, ratio_r),
                  f"{fmt(ratio_r) if ratio_r else 'inf'} ({fmt(r[1])} / {fmt(r[0])} Gbit/s, "
                  f"{tr / 2:.0f}-{tr:.0f} us)")
        m2, tm2 = class_split(s2, s2["runs"][0], classes)
        ratio2 = m2[0] / m2[1] if m2.get(1) else None
        table.add(f"4 classes, {label}, weights 4:1 (class 0 weighted 4) [{ref2}]",
                  "class0 / class1 goodput = 4 +- 5 %" + ("" if tag == "one" else " (contrast)"),
                  f"{fmt(ratio2)} ({fmt(m2[0])} / {fmt(m2[1])} Gbit/s, {tm2 / 2:.0f}-{tm2:.0f} us)",
                  "—", verdict(within(ratio2, 4, 0.05)), "— (weights do not apply)")
        for proto, x in (("mroce", m_run), ("rocev2", r_run), ("mroce 4:1", s2["runs"][0])):
            mm = x["metrics"]
            table.note(f"4 classes, {label}, {proto}: completed {mm['completed_flows']}/{mm['flows']}, "
                       f"drops {mm['drops']}, failed_ops {mm['failed_ops']}, timeouts {mm['timeouts']}, "
                       f"stop {mm['stop_reason']}.")
        panels += [(s, m_run, f"mroce 1:4, {label}"), (s, r_run, f"rocev2 (no PFC), {label}"),
                   (s2, s2["runs"][0], f"mroce 4:1, {label}")]
    table.note("4 classes: one shared queue = topology.traffic_classes = 1 with class_queues = "
               "[0, 0] (the file): one FIFO and one ECN marking for both classes, so any 4:1 "
               "split is the receiver's hint alone (the issue's target). Strict priority = "
               "traffic_classes = 2, class_queues = [0, 1], class 1 served first (the contrast).")
    plots.append(lambda: plot_goodput(os.path.join(runner.out, "classes-goodput.png"), panels,
                                      "4 senders in class 1 (flows 0-3), 4 in class 0 (4-7)"))


def exp_rtt(runner, table, plots):
    panels = []
    for scen, label, tail in (("cc-rtt-fairness.toml", "5 RTTs 10/10/100/1000 us", 0.25),
                              ("cc-rtt-fairness-10ms.toml", "5 RTTs 10/10/100 us, 10 ms", 0.25)):
        sub = "rtt/1ms" if "10ms" not in scen else "rtt/10ms"
        s, ref = runner.sim("rtt", sub, scen)
        cells, tails = {}, {}
        for proto in ("mroce", "rocev2"):
            run = run_of(s, proto)
            samples = read_throughput(s, run)
            t_end = max(t for t, _, _ in samples)
            g = window_goodput(samples, 0.2 * t_end, t_end, flows=["0", "1", "2", "3"])
            gt = window_goodput(samples, (1 - tail) * t_end, t_end, flows=["0", "1", "2", "3"])
            cells[proto] = (jain(g.values()), g, t_end)
            tails[proto] = gt
            panels.append((s, run, f"{proto} {label[2:]}"))
        jm, gm, te = cells["mroce"]
        jr, gr, _ = cells["rocev2"]
        per = lambda g: ", ".join(f"{v:.1f}" for v in g.values())
        table.add(f"{label} [{ref}]", f"Jain of goodput over the last 80 % ({0.2 * te / 1e3:.0f}-{te / 1e3:.0f} ms) >= 0.95",
                  f"{fmt(jm)} ({per(gm)} Gbit/s)", "—",
                  both(lambda v: v is not None and v >= 0.95, jm, None, jr),
                  f"{fmt(jr)} ({per(gr)} Gbit/s)")
        if "10ms" in scen:
            table.add(f"{label} [{ref}]", "10 ms flow's goodput over the last 25 % (report; cap "
                      "8 MiB / 10 ms = 6.7 Gbit/s)",
                      f"{fmt(tails['mroce']['3'])} Gbit/s", "—", "—", f"{fmt(tails['rocev2']['3'])} Gbit/s")
        for proto in ("mroce", "rocev2"):
            mm = run_of(s, proto)["metrics"]
            table.note(f"{label[2:]} {proto}: stop {mm['stop_reason']} (flows longer than the run), "
                       f"drops {mm['drops']}, timeouts {mm['timeouts']}, retransmits {mm['retransmits']}.")
    table.note("5 RTTs: 100 Gbit/s (fair share 25 Gbit/s); the 10 ms flow of MetaRoCE is held "
               "by the 256-PSN window per path (256 x 4 KiB = 1 MiB) and max_inflight_bytes "
               "(8 MiB per connection): 8 MiB / 10 ms = 6.7 Gbit/s, and it ramps by AIMD once "
               "per 10 ms RTT.")
    plots.append(lambda: plot_goodput(os.path.join(runner.out, "rtt-goodput.png"), panels,
                                      "flows 0, 1: RTT 10 us; 2: 100 us; 3: 1 ms / 10 ms"))


def exp_websearch(runner, table, plots):
    s, ref = runner.sim("websearch", "websearch", "cc-websearch.toml", [WS_INCAST])
    q, qref = runner.sim("websearch", "websearch-rocev2-nopfc", "cc-websearch.toml",
                         [WS_INCAST] + ROCEV2_NO_PFC)
    cdfs = []
    for load in LOADS:
        figs = {}
        for proto, summary in (("mroce", s), ("rocev2", s), ("rocev2 no PFC", q)):
            run = run_of(summary, proto.split()[0], **{"workload.load": load})
            flows = read_fct(summary, run)
            bg, inc = short_flow_figures(flows, WS_INCAST_START_NS, WS_INCAST_BYTES)
            figs[proto] = (bucket_slowdowns(bg), inc, run, flows)
            cdfs.append((load, proto, sorted(f["slowdown"] for f in flows)))
        name = f"6 websearch {int(load * 100)} % [{ref}, {qref}]"
        for b in BUCKETS:
            m, r, x = figs["mroce"][0][b], figs["rocev2"][0][b], figs["rocev2 no PFC"][0][b]
            table.add(name, f"slowdown p50 / p99, {b} (n={m[0]}; each <= rocev2's)",
                      f"{fmt(m[1])} / {fmt(m[2])}", f"{fmt(r[1])} / {fmt(r[2])}",
                      slowdown_verdict(m, r)[1], f"{fmt(x[1])} / {fmt(x[2])}")
        p99 = {k: nearest_rank([f["slowdown"] for f in v[1]], 0.99) for k, v in figs.items()}
        mi, ri = p99["mroce"], p99["rocev2"]
        table.add(name, f"16 -> 1 incast (128 KiB each) slowdown p99 (n={len(figs['mroce'][1])}; <= rocev2's)",
                  fmt(mi), fmt(ri),
                  verdict(mi is not None and ri is not None and mi <= ri) + f" ({fmt(mi)} vs {fmt(ri)})",
                  fmt(p99["rocev2 no PFC"]))
        mm, rm, xm = (figs[k][2]["metrics"] for k in ("mroce", "rocev2", "rocev2 no PFC"))
        table.note(f"6 websearch {int(load * 100)} %: flows {mm['flows']}; mroce drops {mm['drops']}, "
                   f"completion {fmt(mm['completion_time_us'])} us; rocev2 drops {rm['drops']} "
                   f"(pfc_overflow {rm.get('pfc_overflow_drops')}), pauses {rm.get('pauses')}, "
                   f"completion {fmt(rm['completion_time_us'])} us; rocev2 without PFC drops "
                   f"{xm['drops']}, completed {xm['completed_flows']}/{xm['flows']}, completion "
                   f"{fmt(xm['completion_time_us'])} us.")
    plots.append(lambda: plot_cdfs(os.path.join(runner.out, "websearch-fct-cdf.png"), cdfs))


def exp_a2a(runner, table, plots):
    rows = (("default (AIMD + hint + pacing)", []),
            ("fixed window (hint + pacing on)", ["mroce.congestion_control=fixed"]),
            ("hint off (AIMD + pacing)", ["mroce.rate_hint=false"]),
            ("pacing off (AIMD + hint)", ["mroce.pacing=false"]),
            ("AIMD, hint and pacing off", ["mroce.rate_hint=false", "mroce.pacing=false"]),
            ("fixed, hint and pacing off (the old baseline)",
             ["mroce.congestion_control=fixed", "mroce.rate_hint=false", "mroce.pacing=false"]))
    r, rref = runner.sim("a2a", "a2a/rocev2", "bench-a2a64.toml", ["protocol=rocev2"])
    rv = r["runs"][0]["metrics"]["finish_fraction_of_ideal"]
    for i, (label, sets) in enumerate(rows):
        s, ref = runner.sim("a2a", f"a2a/mroce{i}", "bench-a2a64.toml", sets)
        mm = s["runs"][0]["metrics"]
        table.add(f"7 bench-a2a64, {label} [{ref}; rocev2 {rref}]",
                  "finish_fraction_of_ideal >= 0.95 (before: 0.9185, fixed window)",
                  f"{fmt(mm['finish_fraction_of_ideal'], 4)} (drop {pct(mm['drop_fraction'])}, "
                  f"timeouts {mm['timeouts']})",
                  "—", both(lambda v: v >= 0.95, mm["finish_fraction_of_ideal"], None,
                             rv if i == 0 else None),
                  fmt(rv, 4) if i == 0 else "—")


RUNNERS = {"incast": exp_incast, "ablation": exp_ablation, "first-rtt": exp_first_rtt,
           "classes": exp_classes, "rtt": exp_rtt, "websearch": exp_websearch, "a2a": exp_a2a}


# ---------------------------------------------------------------------------------------
# Plots

def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_incast(out, s, nopfc=None):
    """s: the incast sweep (mroce, rocev2 with PFC); nopfc: RoCEv2 without PFC's, or None."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    traces = [(s, "mroce", "mroce"), (s, "rocev2", "rocev2 PFC")]
    if nopfc is not None:
        traces.append((nopfc, "rocev2", "rocev2 no PFC"))
    for summary, proto, label in traces:
        run = run_of(summary, proto)
        q = read_queue(summary, run)
        peak = {}
        for _, p, b in q:
            peak[p] = max(peak.get(p, 0), b)
        port = max(peak, key=peak.get)       # the receiver's ToR port (the deepest)
        pts = [(t, b) for t, p, b in q if p == port]
        ax.plot([t for t, _ in pts], [b / 1024 for _, b in pts], linewidth=1,
                label=f"{label} {port}")
        bdp = run["metrics"].get("bdp_bytes")
    if bdp:
        ax.axhline(bdp / 1024, color="grey", linestyle=":", label="1 BDP")
    ax.set_xlabel("time (us)")
    ax.set_ylabel("bottleneck queue (KiB)")
    ax.set_title("incast-cc N = 64: the receiver's ToR port")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "incast64-queue.png"), dpi=100)
    plt.close(fig)

    fig, axes = plt.subplots(len(traces), 1, figsize=(9, 3.5 * len(traces)), sharex=True,
                             sharey=True)
    for ax, (summary, proto, label) in zip(axes, traces):
        run = run_of(summary, proto)
        samples = read_throughput(summary, run)
        series = {}
        for t, f, g in samples:
            if f != "all":
                series.setdefault(f, ([], []))
                series[f][0].append(t)
                series[f][1].append(g)
        for f in sorted(series, key=flow_key):
            ax.plot(*series[f], linewidth=0.7)
        ax.axhline(100 * 4096 / 4168 / 64, color="black", linestyle=":",
                   label="fair share (payload)")
        ax.set_ylabel("goodput (Gbit/s)")
        ax.set_title(f"{label}: per-sender goodput (first {len(series)} flows sampled)",
                     fontsize="small")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[-1].set_xlabel("time (us)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "incast64-rate.png"), dpi=100)
    plt.close(fig)


def plot_cdfs(path, cdfs):
    plt = pyplot()
    loads = sorted({c[0] for c in cdfs})
    fig, axes = plt.subplots(1, len(loads), figsize=(4.5 * len(loads), 4), sharey=True,
                             squeeze=False)
    for ax, load in zip(axes[0], loads):
        for _, proto, sds in (c for c in cdfs if c[0] == load):
            n = len(sds)
            ax.step(sds, [(i + 1) / n for i in range(n)], where="post",
                    label=f"{proto}: p50 {nearest_rank(sds, 0.5):.2f}, p99 {nearest_rank(sds, 0.99):.1f}")
        ax.set_xscale("log")
        ax.set_xlabel("FCT slowdown (fct / ideal)")
        ax.set_title(f"WebSearch {int(load * 100)} % + 16 -> 1 incast", fontsize="small")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="lower right")
    axes[0][0].set_ylabel("fraction of flows")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_goodput(path, panels, title):
    plt = pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.6 * len(panels) + 0.5), squeeze=False)
    for ax, (s, run, label) in zip(axes[:, 0], panels):
        series = {}
        for t, f, g in read_throughput(s, run):
            if f != "all":
                series.setdefault(f, ([], []))
                series[f][0].append(t / 1e3)
                series[f][1].append(g)
        for f in sorted(series, key=flow_key):
            ax.plot(*series[f], linewidth=0.8, label=f"flow {f}")
        ax.set_ylabel("Gbit/s")
        ax.set_title(label, fontsize="small")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", ncol=4)
    axes[-1][0].set_xlabel("time (ms)")
    fig.suptitle(title, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------

def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[],
                    help="experiments to run (comma-separated, repeatable): " + ", ".join(EXPERIMENTS))
    ap.add_argument("--mroce", default=os.path.join(REPO, "build", "mroce"))
    ap.add_argument("--out", default="/tmp/ccx")
    a = ap.parse_args(argv[1:])
    only = [x for o in a.only for x in o.split(",") if x] or list(EXPERIMENTS)
    bad = [x for x in only if x not in RUNNERS]
    if bad:
        ap.error(f"unknown experiment(s) {', '.join(bad)}; choose from {', '.join(EXPERIMENTS)}")
    if not os.access(a.mroce, os.X_OK):
        ap.error(f"{a.mroce}: not an executable (build it, or pass --mroce)")
    os.makedirs(a.out, exist_ok=True)
    binary = os.path.join(os.path.abspath(a.out), ".mroce")
    shutil.copy2(a.mroce, binary)   # a rebuild during the sweep does not change what runs
    runner, table, plots = Runner(binary, os.path.abspath(a.out)), Table(), []
    for name in EXPERIMENTS:
        if name in only:
            RUNNERS[name](runner, table, plots)
    for p in plots:
        p()
    md = table.markdown(runner)
    print()
    print(md)
    with open(os.path.join(a.out, "cc-results.md"), "w", encoding="utf-8") as f:
        f.write(md)
    print(f"wrote {os.path.join(a.out, 'cc-results.md')} and the plots in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
