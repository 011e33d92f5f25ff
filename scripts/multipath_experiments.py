#!/usr/bin/python3
"""multipath_experiments.py — issue 14's multipath experiments in the simulator, one table.

Runs `mroce sim` on the scenarios below (fixed seeds), computes each row's figure from the
outputs (summary.json, throughput.csv, and a pcap of every host for the plane cuts;
docs/sim.md's contract), prints a Markdown table `| experiment | target | figure | met? |`
followed by the exact commands, writes it to OUT/multipath-results.md and draws plots.

  loss         1. one 64 MiB flow across a leaf-spine, loss p on every cable (4 end to end),
                  p in {0, 0.1, 1, 2, 5, 10} %: goodput / capacity / (1 - end-to-end loss)
                  >= 0.97, and no path failed; RoCEv2 beside it for the plot
  permutation  2. loss-sweep.toml's permutation of 1 MiB flows at 1 % loss per cable, seeds
                  1-5: completion <= 1.5 x lossless
  a2a64        3. bench-a2a64.toml: fraction of ideal (>= 0.919, the old 200 us floor's) and
                  spurious retransmissions <= 0.1 % of DATA
  planes       4. planes-scaling.toml, 16 hosts on 1, 2, 4, 8 planes: 8 planes >= 7.8 x one;
                  2 hosts sending to each other on 8 planes: >= 0.95 of capacity each way
  plane-cut    5. plane-failure.toml with 64 MiB flows, 2 and 16 hosts, plane 1 cut at 200
                  us: no failed operation, recovery_us <= 20 base RTTs, completion <= 1.05 x
                  the ideal for the surviving capacity, no ACK lost after recovery (every
                  packet a host sends is matched with its arrival in a pcap of every host)
  collectives  6. (only when named with --only: about 5 min) collectives.toml, seed 1:
                  MetaRoCE (a stream per pair) against every RoCEv2 variant, ring all-reduce
                  and all-to-all at 0 / 0.1 / 1 % loss

The testbed row (real UDP, 4 planes, no --plane-ifs) is `scripts/perf-testbed.py`: root and
wall-clock time, so not here.

usage: multipath_experiments.py [--only NAME[,NAME...]] [--mroce PATH] [--out DIR]
Plots (OUT/): goodput-vs-loss.png (row 1, both protocols), plane-cut.png (aggregate goodput
over time around the cut, 2 and 16 hosts, MetaRoCE and RoCEv2, the surviving capacity).
Needs /usr/bin/python3 and python3-matplotlib (Agg backend). Runs one simulator at a time.
"""
import argparse
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cc_experiments import Runner, fmt, read_throughput, run_of, pyplot  # noqa: E402

LOSSES = (0, 0.001, 0.01, 0.02, 0.05, 0.1)
CABLES = 4                 # host - leaf - spine - leaf - host
PAYLOAD, HEADER = 4096, 72  # bytes per DATA packet: payload and MetaRoCE header (docs/sim.md)
CUT_US, CUT_PLANES, CUT_RTT_US = 200.0, 4, 8.0  # plane-failure.toml: 4 cables of 1 us each way
EXPERIMENTS = ("loss", "permutation", "a2a64", "planes", "plane-cut", "collectives")
DEFAULT = EXPERIMENTS[:-1]


# ---------------------------------------------------------------------------------------
# Pure functions (tests/simtools/multipath_experiments_test.py)

def e2e_loss(p, cables=CABLES):
    """End-to-end loss of `cables` cables that each lose p."""
    return 1 - (1 - p) ** cables


def ideal_after_cut_us(size_bytes, cut_us, ports, rate_gbps, one_way_us):
    """The finish time of one flow of size_bytes that has `ports` NIC ports of rate_gbps
    until cut_us and one fewer after it, payload at the line rate less the DATA header,
    plus one one-way propagation time."""
    per_port = rate_gbps * 1e3 * PAYLOAD / (PAYLOAD + HEADER) / 8   # payload bytes per us
    before = min(size_bytes, ports * per_port * cut_us)
    if before >= size_bytes:
        return size_bytes / (ports * per_port) + one_way_us
    return cut_us + (size_bytes - before) / ((ports - 1) * per_port) + one_way_us


def pcap_packets(data):
    """Records of a classic little-endian pcap with ns timestamps (mroce sim --pcap, raw
    IPv4) -> list of (t_ns, key, type): key = (ip id, src, dst, sport, dport), type = the
    MetaRoCE packet type (byte 1 of the UDP payload) or None when not captured."""
    magic, = struct.unpack_from("<I", data, 0)
    if magic != 0xa1b23c4d:
        raise ValueError(f"not a nanosecond pcap (magic {magic:#x})")
    out, off = [], 24
    while off + 16 <= len(data):
        sec, ns, incl, _ = struct.unpack_from("<IIII", data, off)
        off += 16
        pkt = data[off:off + incl]
        off += incl
        if len(pkt) < 28 or pkt[0] >> 4 != 4:
            continue
        ip_id, = struct.unpack_from(">H", pkt, 4)
        sport, dport = struct.unpack_from(">HH", pkt, 20)
        key = (ip_id, bytes(pkt[12:16]), bytes(pkt[16:20]), sport, dport)
        out.append((sec * 1_000_000_000 + ns, key, pkt[29] if len(pkt) > 29 else None))
    return out


def unmatched(packets, window_ns=100_000, tail_ns=20_000):
    """Packets seen once where every packet should be seen twice (leaving its sender,
    reaching its receiver, both captured): each sighting is paired with the next one of
    the same key within window_ns; returns the unpaired (t_ns, key, type), in time order.
    (The ip id is 16 bits; the window keeps a reused id from pairing with an old packet.)
    A packet seen less than tail_ns before the capture's last record is left out: the run
    stopped (its last flow done) while it was on its way."""
    records = sorted(packets, key=lambda r: r[0])
    end = records[-1][0] if records else 0
    open_, lost = {}, []
    for t, key, typ in records:
        first = open_.pop(key, None)
        if first is not None and t - first[0] <= window_ns:
            continue
        if first is not None:
            lost.append(first)
        open_[key] = (t, key, typ)
    lost.extend(open_.values())
    return sorted((r for r in lost if r[0] <= end - tail_ns), key=lambda r: r[0])


def verdict(ok):
    return {True: "**met**", False: "**not met**", None: "n/a"}[ok]


# ---------------------------------------------------------------------------------------
# The experiments

class Table:
    def __init__(self):
        self.rows, self.notes = [], []

    def add(self, experiment, target, figure, ok, ref):
        self.rows.append((experiment, target, figure, verdict(ok), ref))

    def note(self, text):
        self.notes.append(text)

    def markdown(self, runner):
        lines = ["| experiment | target | MetaRoCE (RoCEv2 where run) | met | command |",
                 "|---|---|---|---|---|"]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        lines += [""] + [f"- {n}" for n in self.notes]
        lines += ["", "Commands (`mroce` = the simulator binary, run from the repository root):", ""]
        lines += [f"- {ref}: `{cmd}`" for ref, cmd in runner.commands]
        return "\n".join(lines) + "\n"


def long_flow_sets(p, protocol):
    return [f"sweep.protocol=[\"{protocol}\"]", f"sweep.fabric.loss=[{p}]", "workload.kind=incast",
            "workload.senders=1", "workload.first_sender=0", "workload.receiver=4",
            "workload.bytes=67108864"]


def exp_loss(runner, table, plots):
    points = {"mroce": [], "rocev2": []}
    for p in LOSSES:
        figs = {}
        for proto in points:
            s, ref = runner.sim("loss", f"loss-{proto}-{p}", "loss-sweep.toml", long_flow_sets(p, proto))
            m = s["runs"][0]["metrics"]
            done = m["completed_flows"] == m["flows"]
            g = m["goodput_fraction"] if done else None
            points[proto].append((p, g))
            figs[proto] = (g, m["path_failures"], ref)
        g, failed, ref = figs["mroce"]
        ratio = g / (1 - e2e_loss(p)) if g else None
        rg = figs["rocev2"][0]
        ok = ratio is not None and ratio >= 0.97 and failed == 0
        table.add(f"one long flow, {100 * p:g} % per cable ({100 * e2e_loss(p):.1f} % end to end)",
                  "≥ 0.97 × (1 − e2e); no path failed",
                  f"{fmt(g, 4)} of capacity = {fmt(ratio, 3)} × (1 − e2e); {failed} paths failed "
                  f"(RoCEv2: {fmt(rg, 3) if rg else 'not done in 100 ms'})", ok,
                  f"{ref}, {figs['rocev2'][2]}")
    plots.append(("goodput-vs-loss.png", lambda path: plot_loss(path, points)))


def exp_permutation(runner, table, plots):
    ratios, refs = [], []
    for seed in range(1, 6):
        s, ref = runner.sim("permutation", f"perm-{seed}", "loss-sweep.toml",
                            ["sweep.protocol=[\"mroce\"]", "sweep.fabric.loss=[0, 0.01]"], ["--seed", str(seed)])
        base = run_of(s, "mroce", **{"fabric.loss": 0})["metrics"]["completion_time_us"]
        lossy = run_of(s, "mroce", **{"fabric.loss": 0.01})["metrics"]["completion_time_us"]
        ratios.append(lossy / base)
        refs.append(ref)
    table.add("permutation of 1 MiB flows, 1 % per cable, seeds 1–5",
              "completion ≤ 1.5 × lossless", " / ".join(fmt(r, 2) for r in ratios),
              max(ratios) <= 1.5, f"{refs[0]}–{refs[-1]}")


def exp_a2a64(runner, table, plots):
    s, ref = runner.sim("a2a64", "a2a64", "bench-a2a64.toml")
    m = s["runs"][0]["metrics"]
    c = m["counters"]
    spurious = c["spurious_retransmits"] / c["tx_data_packets"]
    f = m["finish_fraction_of_ideal"]
    table.add("bench-a2a64, default settings", "≥ 0.919 of ideal; spurious retransmissions ≤ 0.1 % of DATA",
              f"{fmt(f, 4)}; {c['spurious_retransmits']} of {c['tx_data_packets']} DATA ({100 * spurious:.3f} %)",
              f >= 0.919 and spurious <= 0.001, ref)


def exp_planes(runner, table, plots):
    s, ref = runner.sim("planes", "planes16", "planes-scaling.toml", ["sweep.topology.planes=[1, 2, 4, 8]"])
    g = {pl: run_of(s, "mroce", **{"topology.planes": pl})["metrics"]["goodput_gbps"] for pl in (1, 2, 4, 8)}
    scale = {pl: g[pl] / g[1] for pl in g}
    table.add("16-host permutation of 64 MiB, planes 1 / 2 / 4 / 8", "8 planes ≥ 7.8 × one plane",
              " / ".join(f"{fmt(g[pl], 1)} Gbit/s ({fmt(scale[pl], 2)}×)" for pl in (1, 2, 4, 8)),
              scale[8] >= 7.8, ref)
    s, ref = runner.sim("planes", "planes2", "planes-scaling.toml",
                        ["sweep.topology.planes=[8]", "workload.hosts=2"])
    m = s["runs"][0]["metrics"]
    table.add("2 hosts sending to each other, 8 planes", "≥ 0.95 of capacity each way",
              fmt(m["goodput_fraction"], 3), m["goodput_fraction"] >= 0.95, ref)


def exp_plane_cut(runner, table, plots):
    series = {}
    for hosts in (2, 16):
        for proto in ("mroce", "rocev2"):
            sets = ["workload.bytes=67108864", f"workload.hosts={hosts}", f"protocol={proto}"]
            if hosts > 8:
                sets.append("topology.hosts_per_leaf=8")
            pcap = os.path.join(runner.out, f"cut-{hosts}.pcap")
            extra = ["--pcap", pcap, "--pcap-at", "hosts", "--pcap-snaplen", "64"] if proto == "mroce" else []
            s, ref = runner.sim("plane-cut", f"cut-{proto}-{hosts}", "plane-failure.toml", sets, extra)
            run = s["runs"][0]
            m = run["metrics"]
            series[(proto, hosts)] = read_throughput(s, run)
            if proto != "mroce":
                table.note(f"RoCEv2 (PFC + DCQCN, one QP per flow) with the plane cut, {hosts} hosts: "
                           f"{m['completed_flows']} of {m['flows']} flows done, {m['failed_ops']} failed "
                           f"operations, last flow at {fmt(m['completion_time_us'], 1)} µs ({ref}).")
                continue
            ideal = ideal_after_cut_us(67108864, CUT_US, CUT_PLANES, 100, CUT_RTT_US / 2)
            with open(pcap, "rb") as f:
                lost = unmatched(pcap_packets(f.read()))
            os.remove(pcap)  # tens of MB; the command above makes it again
            rec = m.get("recovery_us")
            after = CUT_US + rec if rec is not None else None
            acks_after = sum(1 for t, _, typ in lost if typ == 2 and after is not None and t >= after * 1e3)
            acks = sum(1 for _, _, typ in lost if typ == 2)
            last_ack_us = max((t / 1e3 for t, _, typ in lost if typ == 2), default=None)
            data = sum(1 for _, _, typ in lost if typ == 1)
            probes = sum(1 for _, _, typ in lost if typ == 6)
            finish = m["completion_time_us"] / ideal
            ok = (m["failed_ops"] == 0 and rec is not None and rec <= 20 * CUT_RTT_US and finish <= 1.05
                  and acks_after == 0)
            table.add(f"plane 1 of 4 cut at 200 µs, {hosts} hosts, 64 MiB flows",
                      "no failed op; recovery ≤ 20 base RTTs (160 µs); completion ≤ 1.05 × ideal; "
                      "no ACK lost after recovery",
                      f"{m['failed_ops']} failed ops; recovery {fmt(rec, 1)} µs; last flow "
                      f"{fmt(m['completion_time_us'], 1)} µs = {fmt(finish, 3)} × {fmt(ideal, 1)}; "
                      f"ACKs lost {acks} ({acks_after} after recovery, the last sent at "
                      f"{fmt(last_ack_us, 1)} µs), DATA lost {data}, PROBEs lost {probes}", ok, ref)
    table.note(f"Ideal after the cut: {CUT_PLANES} ports of 100 Gbit/s until {CUT_US:g} µs, three after, "
               f"payload at 4096 / 4168 of line rate, plus a one-way time of {CUT_RTT_US / 2:g} µs "
               "(the handshake is not in the ideal). Lost packets: sent by one host's NIC and never "
               "seen at the other's, from a pcap of every host (`--pcap-at hosts`); the last 20 µs "
               "of the capture left out (the run stops with packets on their way).")
    plots.append(("plane-cut.png", lambda path: plot_cut(path, series)))


def exp_collectives(runner, table, plots):
    s, ref = runner.sim("collectives", "collectives", "collectives.toml")
    rows = {}
    for r in s["runs"]:
        p = r["params"]
        rows[(p["collective"], p["fabric.loss"], p["stack"])] = r["metrics"]["goodput_fraction"]
    for coll in ("ring", "a2a"):
        for loss in (0, 0.001, 0.01):
            ours = rows.get((coll, loss, "mroce-pair"))
            theirs = {st: rows.get((coll, loss, st)) for st in ("1qp", "8qp", "8qp-rr")}
            best = max((v for v in theirs.values() if v is not None), default=None)
            table.add(f"64-host {coll}, {100 * loss:g} % loss (4 planes)", "MetaRoCE ≥ every RoCEv2 variant",
                      f"{fmt(ours, 3)} (RoCEv2 1qp / 8qp / 8qp-rr: "
                      + " / ".join(fmt(v, 3) for v in theirs.values()) + ")",
                      None if ours is None or best is None else ours >= best, ref)


# ---------------------------------------------------------------------------------------
# Plots

def plot_loss(path, points):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4))
    xs = [100 * p for p in LOSSES]
    ax.plot(xs, [PAYLOAD / (PAYLOAD + HEADER) * (1 - e2e_loss(p)) for p in LOSSES], "k--",
            label="ideal: (1 − end-to-end loss) × payload share")
    for proto, pts in points.items():
        ax.plot([100 * p for p, _ in pts], [g if g is not None else 0 for _, g in pts], "o-",
                label={"mroce": "MetaRoCE", "rocev2": "RoCEv2 (0: not done in 100 ms)"}[proto])
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel("loss per cable, % (4 cables end to end)")
    ax.set_ylabel("goodput / capacity")
    ax.set_title("One 64 MiB flow across a leaf-spine under random loss")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_cut(path, series):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, hosts in zip(axes, (2, 16)):
        for proto in ("mroce", "rocev2"):
            pts = [(t, g) for t, f, g in series.get((proto, hosts), []) if f == "all" and t <= 1000]
            ax.plot([t for t, _ in pts], [g for _, g in pts],
                    label={"mroce": "MetaRoCE", "rocev2": "RoCEv2 + PFC"}[proto])
        cap = hosts * CUT_PLANES * 100 * PAYLOAD / (PAYLOAD + HEADER)  # every host, every port
        ax.axhline(cap * 3 / 4, color="k", ls="--", lw=0.8, label="¾ of capacity (surviving)")
        ax.axvline(CUT_US, color="r", ls=":", lw=0.8, label="plane 1 cut")
        ax.set_title(f"{hosts} hosts, 4 planes, 64 MiB flows")
        ax.set_xlabel("time, µs")
        ax.set_ylabel("aggregate goodput, Gbit/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mroce", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                    "build", "mroce"))
    ap.add_argument("--out", default="/tmp/mpx")
    ap.add_argument("--only", action="append", default=[])
    a = ap.parse_args(argv)
    only = [x for o in a.only for x in o.split(",") if x] or list(DEFAULT)
    bad = [x for x in only if x not in EXPERIMENTS]
    if bad:
        ap.error(f"unknown experiment {bad[0]!r} (choose from {', '.join(EXPERIMENTS)})")
    if not os.access(a.mroce, os.X_OK):
        ap.error(f"{a.mroce}: not an executable simulator binary")
    os.makedirs(a.out, exist_ok=True)
    binary = os.path.join(a.out, ".mroce")
    shutil.copy2(a.mroce, binary)  # a rebuild during the sweep does not change what runs
    runner = Runner(binary, a.out)
    table, plots = Table(), []
    for name in only:
        globals()["exp_" + name.replace("-", "_")](runner, table, plots)
    for name, draw in plots:
        draw(os.path.join(a.out, name))
    text = table.markdown(runner)
    with open(os.path.join(a.out, "multipath-results.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    print("wall seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in runner.wall.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
