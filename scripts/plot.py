#!/usr/bin/python3
"""plot.py DIR [--metrics M,M,...] — turn the output of `mroce sim ... --out DIR` into PNG plots.

Reads DIR/summary.json and each run's files (the output contract in docs/sim.md) and writes,
next to them:
  DIR/<run dir>/throughput.png  goodput per flow over time (throughput.csv)
  DIR/<run dir>/queue.png       queue occupancy per switch port over time (queue.csv)
  DIR/<run dir>/cc.png          window per path, rates and hint per connection over time (cc.csv)
  DIR/<run dir>/fct_cdf.png     CDF of FCT slowdown = fct / ideal fct (fct.txt), and p50/p99
                                slowdown per flow-size bucket when sizes differ
  DIR/fct_cdf.png               every run's FCT-slowdown CDF in one plot, one line per
                                run (e.g. MetaRoCE and RoCEv2 side by side), and their p50/p99
                                by flow size when sizes differ (only when two or more runs
                                have an fct.txt)
  DIR/sweep.png                 each metric against the swept parameter, one line per
                                protocol (bars per run when only the protocol differs;
                                only when summary.json has several runs). --metrics picks
                                which metrics, in that order (names of summary.json's
                                run metrics; an unknown name is a usage error, exit 2)
A plot is made only when its file has rows; a missing, empty or malformed file is skipped
with a one-line note on stdout. A missing DIR or summary.json, or bad JSON, is a one-line
error on stderr and exit status 1.

Big runs stay fast: a plot draws at most 16 series (flows, ports, connection/paths) plus
the run total, chosen by size (the most bytes delivered, the deepest queue; for cc the
lowest connection ids, the connection line before its paths), and says how many it left
out. Each CSV is read twice (first to choose, then only the chosen series) so a
4,000-flow run is never held in memory.

Needs /usr/bin/python3 and Debian's python3-matplotlib (scripts/install-deps.sh); uses the
Agg backend, so no display is needed.
"""
import csv
import json
import math
import os
import sys

plt = None  # matplotlib.pyplot, imported by load_pyplot once the arguments are good

MAX_SERIES = 16
# The contract's metrics, in the order sweep.png shows them; others present are appended.
METRICS = ["goodput_gbps", "goodput_fraction", "completion_time_us", "fct_p50_us",
           "fct_p99_us", "retransmits", "drops", "ecn_marks", "max_queue_bytes", "failed_ops"]
DPI = 100


class Skip(Exception):
    """A per-run input that cannot be plotted: reported as a note, not an error."""


def note(msg):
    print(f"plot.py: {msg}")


def fail(msg):
    print(f"plot.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def rows(path, header):
    """Yields (line number, row dict) of a CSV whose header must start with `header`."""
    if not os.path.exists(path):
        raise Skip(f"skip {path}: missing")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        first = next(reader, None)
        if first is None:
            raise Skip(f"skip {path}: empty")
        if [c.strip() for c in first[:len(header)]] != header:
            raise Skip(f"skip {path}: header is {','.join(first)!r}, expected {','.join(header)!r}")
        names = [c.strip() for c in first]  # the file's own columns: later ones are optional
        for n, row in enumerate(reader, 2):
            if row:
                yield n, dict(zip(names, row))


def number(value, path, n, field, allow_empty=False):
    value = value.strip() if value is not None else ""
    if value == "" and allow_empty:
        return math.nan
    try:
        return float(value)
    except ValueError:
        raise Skip(f"skip {path}: line {n}: {field} is not a number: {value!r}") from None


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def legend(ax, count):
    if count:
        ax.legend(fontsize="x-small", ncol=2 if count > 8 else 1, loc="best")


def left_out(kind, drawn, total):
    return f" ({drawn} of {total} {kind} drawn)" if total > drawn else ""


def plot_throughput(run_dir, title):
    path = os.path.join(run_dir, "throughput.csv")
    header = ["time_us", "flow", "gbps"]
    totals = {}  # pass 1: Gbit/s summed over samples, per flow
    for n, r in rows(path, header):
        totals[r["flow"]] = totals.get(r["flow"], 0.0) + number(r["gbps"], path, n, "gbps")
    if not totals:
        raise Skip(f"skip {path}: no rows")
    flows = sorted((f for f in totals if f != "all"), key=lambda f: (-totals[f], flow_key(f)))
    chosen = set(flows[:MAX_SERIES]) | ({"all"} & totals.keys())
    series = {f: ([], []) for f in chosen}
    for n, r in rows(path, header):  # pass 2: only the chosen flows
        if r["flow"] in chosen:
            series[r["flow"]][0].append(number(r["time_us"], path, n, "time_us"))
            series[r["flow"]][1].append(number(r["gbps"], path, n, "gbps"))
    fig, ax = plt.subplots(figsize=(9, 5))
    for f in sorted(chosen - {"all"}, key=flow_key):
        ax.plot(*series[f], linewidth=0.9, label=f"flow {f}")
    if "all" in chosen:
        ax.plot(*series["all"], color="black", linewidth=1.8, label="all")
    ax.set_xlabel("time (us)")
    ax.set_ylabel("goodput (Gbit/s)")
    extra = left_out("flows", min(len(flows), MAX_SERIES), len(flows))
    ax.set_title(title + extra)
    ax.grid(alpha=0.3)
    legend(ax, len(chosen))
    out = os.path.join(run_dir, "throughput.png")
    save(fig, out)
    return out + extra


def flow_key(f):
    """Sorts integer flow ids numerically, anything else after them by name."""
    return (0, int(f), "") if f.lstrip("-").isdigit() else (1, 0, f)


def plot_queue(run_dir, title):
    path = os.path.join(run_dir, "queue.csv")
    header = ["time_us", "port", "bytes"]
    peak = {}  # pass 1: the deepest queue of each port
    for n, r in rows(path, header):
        peak[r["port"]] = max(peak.get(r["port"], 0.0), number(r["bytes"], path, n, "bytes"))
    if not peak:
        raise Skip(f"skip {path}: no rows")
    ports = sorted(peak, key=lambda p: (-peak[p], p))
    series = {p: ([], []) for p in ports[:MAX_SERIES]}
    for n, r in rows(path, header):  # pass 2: only the chosen ports
        if r["port"] in series:
            series[r["port"]][0].append(number(r["time_us"], path, n, "time_us"))
            series[r["port"]][1].append(number(r["bytes"], path, n, "bytes"))
    fig, ax = plt.subplots(figsize=(9, 5))
    for p in sorted(ports[:MAX_SERIES]):
        ax.plot(series[p][0], [b / 1024 for b in series[p][1]], linewidth=0.9, label=p)
    ax.set_xlabel("time (us)")
    ax.set_ylabel("queue (KiB)")
    extra = left_out("ports", min(len(ports), MAX_SERIES), len(ports))
    ax.set_title(title + extra)
    ax.grid(alpha=0.3)
    legend(ax, min(len(ports), MAX_SERIES))
    out = os.path.join(run_dir, "queue.png")
    save(fig, out)
    return out + extra


# cc.csv's value columns (docs/sim.md): the live gauges' names and units. Per panel: the
# columns drawn, each with its line label suffix and scale to the panel's unit.
CC_PANELS = (
    ("window (KiB; 0 while the path is not active)", (("cwnd_bytes", "", 1 / 1024),)),
    ("rate (Gbit/s)", (("window_rate_bps", " window", 1e-9), ("pacing_rate_bps", " pacing", 1e-9))),
    ("hint (Gbit/s)", (("rate_hint_mbps", "", 1e-3),)),
)


def plot_cc(run_dir, title):
    path = os.path.join(run_dir, "cc.csv")
    header = ["time_us", "conn", "path", "state", "cwnd_bytes"]
    columns = [c for _, drawn in CC_PANELS for c, _, _ in drawn]

    def key(r, n):
        return (int(number(r["conn"], path, n, "conn")), int(number(r["path"], path, n, "path")))

    every = {key(r, n) for n, r in rows(path, header)}  # pass 1: which series exist
    if not every:
        raise Skip(f"skip {path}: no rows")
    keys = sorted(every)[:MAX_SERIES]  # lowest connections; path -1 (the whole) first
    series = {k: {c: [] for c in ["time_us"] + columns} for k in keys}
    for n, r in rows(path, header):  # pass 2: only the chosen series
        s = series.get(key(r, n))
        if s is None:
            continue
        s["time_us"].append(number(r["time_us"], path, n, "time_us"))
        for c in columns:
            s[c].append(number(r.get(c), path, n, c, allow_empty=True))
        # A path that is not active carries nothing, whatever window its controller keeps.
        if r["path"].strip() != "-1" and r.get("state", "").strip() not in ("", "active"):
            s["cwnd_bytes"][-1] = 0.0

    def present(k, column):
        return any(not math.isnan(v) for v in series[k][column])

    # One panel per quantity that has values (MetaRoCE reports windows, rates and the
    # receiver's hint; RoCEv2 DCQCN's rate as pacing_rate_bps).
    panels = [(name, drawn) for name, drawn in CC_PANELS
              if any(present(k, c) for k in keys for c, _, _ in drawn)]
    if not panels:
        raise Skip(f"skip {path}: no window or rate values")
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 3.5 * len(panels) + 0.5),
                             sharex=True, squeeze=False)
    extra = left_out("series", len(keys), len(every))
    for ax, (name, drawn) in zip(axes[:, 0], panels):
        for k in keys:
            for column, suffix, scale in drawn:
                if present(k, column):
                    label = (f"conn {k[0]}" if k[1] < 0 else f"conn {k[0]} path {k[1]}") + suffix
                    ax.plot(series[k]["time_us"], [v * scale for v in series[k][column]],
                            linewidth=1.4 if k[1] < 0 else 0.8, label=label)
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        legend(ax, len(ax.get_lines()))
    axes[0][0].set_title(title + extra)
    axes[-1][0].set_xlabel("time (us)")
    out = os.path.join(run_dir, "cc.png")
    save(fig, out)
    return out + extra


def nearest_rank(sorted_values, p):
    return sorted_values[max(0, math.ceil(p * len(sorted_values)) - 1)]


SIZE_BUCKETS = 10


def by_size(flows):
    """Splits (size, slowdown) pairs, sorted by size, into up to SIZE_BUCKETS buckets of
    about equal flow counts (flows of one size stay together); returns per bucket
    (largest size, p50 slowdown, p99 slowdown)."""
    out, start = [], 0
    for b in range(SIZE_BUCKETS):
        end = max(start + 1, round(len(flows) * (b + 1) / SIZE_BUCKETS))
        while end < len(flows) and flows[end][0] == flows[end - 1][0]:
            end += 1
        if start >= len(flows):
            break
        bucket = sorted(sd for _, sd in flows[start:end])
        out.append((flows[end - 1][0], nearest_rank(bucket, 0.5), nearest_rank(bucket, 0.99)))
        start = end
    return out


def read_fct(run_dir):
    """The (size_bytes, slowdown) pairs of a run's fct.txt; Skip when there are none."""
    path = os.path.join(run_dir, "fct.txt")
    if not os.path.exists(path):
        raise Skip(f"skip {path}: missing")
    flows = []  # (size_bytes, slowdown)
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 8:
                raise Skip(f"skip {path}: line {n}: expected 8 fields, got {len(fields)}")
            size = number(fields[4], path, n, "size_bytes")
            fct = number(fields[6], path, n, "fct_ns")
            ideal = number(fields[7], path, n, "ideal_fct_ns")
            if ideal <= 0:
                raise Skip(f"skip {path}: line {n}: ideal_fct_ns must be > 0")
            flows.append((size, fct / ideal))
    if not flows:
        raise Skip(f"skip {path}: no rows")
    return flows


def plot_fct(run_dir, title):
    """fct_cdf.png: the CDF of FCT slowdown; beside it, when sizes differ (e.g. a WebSearch
    or Hadoop background), p50 and p99 slowdown per flow-size bucket (HPCC's plot)."""
    flows = read_fct(run_dir)
    slowdowns = sorted(sd for _, sd in flows)
    count = len(slowdowns)
    flows.sort()
    buckets = by_size(flows) if flows[0][0] != flows[-1][0] else []

    fig, axes = plt.subplots(1, 2 if buckets else 1, figsize=(12 if buckets else 7, 5),
                             squeeze=False)
    ax = axes[0][0]
    ax.step(slowdowns, [(i + 1) / count for i in range(count)], where="post",
            label=f"{count} flows: p50 {nearest_rank(slowdowns, 0.5):.2f}, "
                  f"p99 {nearest_rank(slowdowns, 0.99):.2f}")
    if slowdowns[0] > 0 and slowdowns[-1] / slowdowns[0] > 20:
        ax.set_xscale("log")
    ax.set_xlabel("FCT slowdown (fct / ideal fct)")
    ax.set_ylabel("fraction of flows")
    ax.set_ylim(0, 1.01)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    extra = ""
    if buckets:
        ax = axes[0][1]
        sizes = [b[0] for b in buckets]
        ax.plot(sizes, [b[1] for b in buckets], marker="o", label="p50")
        ax.plot(sizes, [b[2] for b in buckets], marker="^", label="p99")
        ax.set_xscale("log")
        ax.set_xlabel("flow size (bytes, largest in bucket)")
        ax.set_ylabel("FCT slowdown")
        ax.set_title(f"slowdown by size ({len(buckets)} buckets of ~equal flow counts)",
                     fontsize="small")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
        extra = f" (slowdown by size in {len(buckets)} buckets)"
    out = os.path.join(run_dir, "fct_cdf.png")
    save(fig, out)
    return out + extra


def plot_fct_overlay(base, title, named_runs):
    """DIR/fct_cdf.png: the FCT-slowdown CDF of every run in one plot (one colour per run),
    and, when flow sizes differ, each run's p50 (solid) and p99 (dashed) by size bucket.
    named_runs: (label, run directory) pairs; runs without an fct.txt are left out (their
    own note was printed already)."""
    curves = []
    for label, run_dir in named_runs:
        try:
            flows = sorted(read_fct(run_dir))
        except Skip:
            continue
        curves.append((label, flows))
    out = os.path.join(base, "fct_cdf.png")
    if len(curves) < 2:
        raise Skip(f"skip {out}: fewer than two runs have an fct.txt")
    sized = any(flows[0][0] != flows[-1][0] for _, flows in curves)
    fig, axes = plt.subplots(1, 2 if sized else 1, figsize=(12 if sized else 7, 5), squeeze=False)
    ax = axes[0][0]
    lo, hi = math.inf, 0.0
    for i, (label, flows) in enumerate(curves):
        sd = sorted(x for _, x in flows)
        lo, hi = min(lo, sd[0]), max(hi, sd[-1])
        ax.step(sd, [(k + 1) / len(sd) for k in range(len(sd))], where="post", color=f"C{i % 10}",
                label=f"{label}: p50 {nearest_rank(sd, 0.5):.2f}, p99 {nearest_rank(sd, 0.99):.2f}")
    if lo > 0 and hi / lo > 20:
        ax.set_xscale("log")
    ax.set_xlabel("FCT slowdown (fct / ideal fct)")
    ax.set_ylabel("fraction of flows")
    ax.set_ylim(0, 1.01)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    if sized:
        ax = axes[0][1]
        for i, (label, flows) in enumerate(curves):
            buckets = by_size(flows)
            sizes = [b[0] for b in buckets]
            ax.plot(sizes, [b[1] for b in buckets], marker="o", color=f"C{i % 10}", label=f"{label} p50")
            ax.plot(sizes, [b[2] for b in buckets], marker="^", linestyle="--", color=f"C{i % 10}",
                    label=f"{label} p99")
        ax.set_xscale("log")
        ax.set_xlabel("flow size (bytes, largest in bucket)")
        ax.set_ylabel("FCT slowdown")
        ax.set_title("slowdown by size", fontsize="small")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    save(fig, out)
    return f"{out} ({len(curves)} runs overlaid)"


def as_number(v):
    if isinstance(v, bool):
        return None
    return float(v) if isinstance(v, (int, float)) else None


def line_params(runs, swept):
    """The swept parameters that place a run in sweep.png: each one unless a parameter
    kept before it already determines its value in every run. A sweep case sets several
    keys at once (docs/sim.md) and its label names them all; listing each key too would
    crowd the legend with them, and with None where a case does not set one."""
    def value(r, k):
        return json.dumps(r.get("params", {}).get(k))
    kept = []
    for k in swept:
        determined = False
        for j in kept:
            seen = {}
            if all(seen.setdefault(value(r, j), value(r, k)) == value(r, k) for r in runs):
                determined = True
                break
        if not determined:
            kept.append(k)
    return kept


def plot_sweep(base, runs, picked=None):
    """sweep.png: each metric against the first swept parameter, one line per protocol
    (and per value of any other swept parameter). picked: the metrics to show, in order
    (checked by the caller), else the contract's and every other one that varies."""
    params = []
    for r in runs:
        for k in r.get("params", {}):
            if k != "protocol" and k not in params:
                params.append(k)
    swept = line_params(runs, [k for k in params
                               if len({json.dumps(r.get("params", {}).get(k)) for r in runs}) > 1])
    x_key = swept[0] if swept else None
    others = swept[1:]
    # The contract's metrics always; other numeric metrics only when they vary.
    metrics = [m for m in METRICS if any(m in r.get("metrics", {}) for r in runs)]
    for r in runs:
        for m, v in r.get("metrics", {}).items():
            values = {json.dumps(q.get("metrics", {}).get(m)) for q in runs}
            if m not in metrics and as_number(v) is not None and len(values) > 1:
                metrics.append(m)
    if picked:
        metrics = picked
    if not metrics:
        raise Skip(f"skip {os.path.join(base, 'sweep.png')}: no metrics in summary.json")

    xs = [r.get("params", {}).get(x_key) if x_key else r.get("label") for r in runs]
    numeric = all(as_number(x) is not None for x in xs)
    # Without a swept parameter (e.g. only the protocol differs) each run is one bar, in
    # summary.json's order; otherwise categorical values are sorted.
    bars = x_key is None
    if numeric:
        categories = []
    elif bars:
        categories = list(dict.fromkeys(str(x) for x in xs))
    else:
        categories = sorted({str(x) for x in xs})
    groups = {}
    for r, x in zip(runs, xs):
        name = r.get("protocol", "?")
        for k in others:
            name += f" {k}={r.get('params', {}).get(k)}"
        groups.setdefault(name, []).append((as_number(x) if numeric else categories.index(str(x)), r))

    cols = 3 if len(metrics) > 4 else 2
    rows_n = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3.2 * rows_n), squeeze=False)
    for ax, m in zip(axes.flat, metrics):
        for i, (name, points) in enumerate(sorted(groups.items())):
            pts = [(x, as_number(r.get("metrics", {}).get(m))) for x, r in points]
            pts = sorted(((x, y) for x, y in pts if y is not None), key=lambda p: p[0])
            if pts and bars:
                ax.bar([p[0] for p in pts], [p[1] for p in pts], color=f"C{i}", label=name)
            elif pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", linewidth=1,
                        color=f"C{i}", label=name)
        ax.set_title(m, fontsize="small")
        ax.grid(alpha=0.3)
        if numeric:
            # Loss rates and the like span decades: log scale, symlog when 0 is a point.
            positive = [as_number(x) for x in xs if as_number(x) > 0]
            if positive and max(positive) / min(positive) >= 10:
                if len(positive) == len(xs):
                    ax.set_xscale("log")
                elif all(as_number(x) >= 0 for x in xs):
                    ax.set_xscale("symlog", linthresh=min(positive))
        else:
            ax.set_xticks(range(len(categories)))
            ax.set_xticklabels(categories, rotation=30, fontsize="x-small")
        ax.set_xlabel(x_key or "run", fontsize="small")
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper center", ncol=min(4, len(labels)),
                   fontsize="small", bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))  # room for the legend
    out = os.path.join(base, "sweep.png")
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return f"{out} ({len(metrics)} metrics; lines: {', '.join(sorted(groups))})"


def load_pyplot():
    global plt
    try:
        import matplotlib
        matplotlib.use("Agg")  # before pyplot: no display
        import matplotlib.pyplot
    except ImportError as e:
        fail(f"cannot import matplotlib ({e}); install python3-matplotlib "
             f"(scripts/install-deps.sh) and run with /usr/bin/python3")
    plt = matplotlib.pyplot


def load_summary(base):
    if not os.path.isdir(base):
        fail(f"{base}: not a directory")
    path = os.path.join(base, "summary.json")
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    except FileNotFoundError:
        fail(f"{path}: not found (is {base} the --out directory of `mroce sim`?)")
    except json.JSONDecodeError as e:
        fail(f"{path}: bad JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if not isinstance(summary, dict) or not isinstance(summary.get("runs"), list):
        fail(f"{path}: expected an object with a 'runs' list")
    for i, r in enumerate(summary["runs"]):
        if not isinstance(r, dict):
            fail(f"{path}: runs[{i}] is not an object")
        for key in ("params", "metrics"):
            if not isinstance(r.setdefault(key, {}), dict):
                fail(f"{path}: runs[{i}].{key} is not an object")
    return summary


USAGE = ("usage: plot.py DIR [--metrics M,M,...]   (DIR: the --out directory of `mroce sim`; "
         "--metrics: the run metrics sweep.png shows)")


def parse_args(argv):
    """(DIR, picked metrics or None); a usage error prints one line and exits 2."""
    def usage(msg=None):
        print(f"plot.py: {msg}" if msg else USAGE, file=sys.stderr)
        sys.exit(2)
    args, base, picked = argv[1:], None, None
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            usage()
        elif a == "--metrics" or a.startswith("--metrics="):
            value = a.split("=", 1)[1] if "=" in a else (args.pop(0) if args else None)
            picked = [m for m in (value or "").split(",") if m]
            if not picked:
                usage("--metrics needs a comma-separated list of metric names")
        elif a.startswith("-"):
            usage(f"unknown option {a} ({USAGE})")
        elif base is None:
            base = a
        else:
            usage(f"one DIR only, got {base} and {a}")
    if base is None:
        usage()
    return base, picked


def main(argv):
    base, picked = parse_args(argv)
    summary = load_summary(base)
    runs = summary["runs"]
    if picked:
        known = {m for r in runs for m, v in r["metrics"].items() if as_number(v) is not None}
        unknown = [m for m in picked if m not in known]
        if unknown:
            print(f"plot.py: --metrics: no run has a numeric metric {', '.join(unknown)} "
                  f"(known: {', '.join(sorted(known))})", file=sys.stderr)
            return 2
    load_pyplot()
    written = []
    named = []
    for i, r in enumerate(runs):
        sub = str(r.get("dir") or r.get("label") or "")
        if not sub or os.path.isabs(sub) or ".." in sub.split("/"):
            note(f"skip runs[{i}]: no usable 'dir' or 'label' ({sub!r})")
            continue
        run_dir = os.path.join(base, sub)
        if not os.path.isdir(run_dir):
            note(f"skip {run_dir}: missing run directory")
            continue
        title = f"{summary.get('scenario', '')} {r.get('label', sub)}".strip()
        named.append((str(r.get("label", sub)), run_dir))
        for plot in (plot_throughput, plot_queue, plot_cc, plot_fct):
            try:
                written.append(plot(run_dir, title))
            except Skip as s:
                note(str(s))
    if len(runs) > 1:
        for plot in (lambda: plot_fct_overlay(base, str(summary.get("scenario", "")), named),
                     lambda: plot_sweep(base, runs, picked)):
            try:
                written.append(plot())
            except Skip as s:
                note(str(s))
    for w in written:
        print(f"wrote {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
