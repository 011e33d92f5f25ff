#!/usr/bin/python3
"""`mroce sim` on other simulators' input files (sim/import.h, docs/sim.md "Importers"):
scenarios/hpcc-import.toml (HPCC's topology and flow files), scenarios/htsim-cm.toml
(an htsim connection matrix) and scenarios/htsim-topo.toml (htsim's topology file and a
matrix) run, and every flow of the file comes out in fct.txt and
fct_hpcc.txt with its endpoints, size and start time, read here from the files by a parser
of this test's own. Broken files stop `mroce sim` with one line naming file:line.

usage: import_test.py MROCE_BINARY SCENARIOS_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

MROCE, SCENARIOS = sys.argv[1], sys.argv[2]
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def hpcc_ip(node):
    """HPCC's address of a node (third.cc node_id_to_ip), as fct_hpcc.txt prints it."""
    return "%08x" % (0x0b000001 + (node // 256) * 0x10000 + (node % 256) * 0x100)


def our_ip(host):
    """The simulator's address of host h (sim/host.h: 198.18.0.0 + h + 1), as fct.txt prints it."""
    return "%08x" % (0xc6120000 + host + 1)


def hpcc_topology(path):
    """node id -> host index (the non-switch nodes in order), from HPCC's topology file."""
    with open(path) as f:
        words = f.read().split()
    nodes, switches = int(words[0]), int(words[1])
    switch_ids = {int(w) for w in words[3:3 + switches]}
    hosts = [n for n in range(nodes) if n not in switch_ids]
    return {n: i for i, n in enumerate(hosts)}


def hpcc_flows(path):
    """(src node, dst node, dport, size, start ns) of an HPCC flow file: first line N, then N flows."""
    with open(path) as f:
        lines = [l.split() for l in f if l.strip()]
    n = int(lines[0][0])
    return [(int(s), int(d), int(port), int(size), round(float(t) * 1e9))
            for s, d, _pg, port, size, t in lines[1:1 + n]]


def htsim_flows(path):
    """(src, dst, size, start ps) of an htsim .cm file's connection lines."""
    out, declared = [], None
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] == "Connections":
                declared = int(w[1])
            elif "->" in w[0]:
                src, dst = (int(x) for x in w[0].split("->"))
                kv = dict(zip(w[1::2], w[2::2]))
                out.append((src, dst, int(kv["size"]), int(float(kv["start"]))))
    check(declared == len(out), f"{path}: header says {declared} connections, {len(out)} lines")
    return out


def run_sim(scenario, out):
    p = subprocess.run([MROCE, "sim", scenario, "--out", out], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"{scenario}: exit {p.returncode}: {p.stderr.strip()}")
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def read_lines(path):
    with open(path) as f:
        return [l.split() for l in f if l.strip()]


def test_hpcc():
    scenario = os.path.join(SCENARIOS, "hpcc-import.toml")
    host_of = hpcc_topology(os.path.join(SCENARIOS, "data", "hpcc-topology.txt"))
    flows = hpcc_flows(os.path.join(SCENARIOS, "data", "hpcc-flow.txt"))
    check(len(flows) == 12 and len(host_of) == 8, "the example's files changed: update this test")
    with tempfile.TemporaryDirectory() as out:
        s = run_sim(scenario, out)
        check(len(s["runs"]) == 2, f"hpcc-import: {len(s['runs'])} runs")
        for r in s["runs"]:
            m, d = r["metrics"], os.path.join(out, r["dir"])
            check(m["flows"] == len(flows) and m["completed_flows"] == len(flows),
                  f"{r['label']}: {m['completed_flows']}/{m['flows']} flows for the file's {len(flows)}")
            # fct_hpcc.txt: HPCC's addresses of the file's node ids, its dport, size, start.
            want = Counter((hpcc_ip(sn), hpcc_ip(dn), port, size, start) for sn, dn, port, size, start in flows)
            got = Counter((x[0], x[1], int(x[3]), int(x[4]), int(x[5]))
                          for x in read_lines(os.path.join(d, "fct_hpcc.txt")))
            check(got == want, f"{r['label']}: fct_hpcc.txt differs from the flow file: "
                               f"missing {want - got}, extra {got - want}")
            # fct.txt: the same flows between the simulator's hosts (node -> host index),
            # in the run's time, which starts at the file's first flow.
            first = flows[0][4]
            want = Counter((our_ip(host_of[sn]), our_ip(host_of[dn]), size, start - first)
                           for sn, dn, _, size, start in flows)
            got = Counter((x[0], x[1], int(x[4]), int(x[5])) for x in read_lines(os.path.join(d, "fct.txt")))
            check(got == want, f"{r['label']}: fct.txt differs from the flow file: {want - got} / {got - want}")
            # Each link keeps the file's delay: across racks, 1 us + 2 us + 2 us + 1 us of
            # cables, plus store-and-forward at 3 switches and serialisation at 100 Gbit/s
            # (under 1.4 us for 4 KiB); not 4 cables of the longest delay (8 us).
            ideal = {(x[0], x[1], int(x[4])): int(x[7]) for x in read_lines(os.path.join(d, "fct.txt"))}
            cross = ideal[(our_ip(host_of[3]), our_ip(host_of[7]), 4096)]
            check(6000 < cross < 7400, f"{r['label']}: ideal fct of 4096 B across racks {cross} ns, not 6 us + < 1.4 us")
    print("ok: hpcc-import")


def test_htsim():
    scenario = os.path.join(SCENARIOS, "htsim-cm.toml")
    flows = htsim_flows(os.path.join(SCENARIOS, "data", "htsim-permutation.cm"))
    with tempfile.TemporaryDirectory() as out:
        s = run_sim(scenario, out)
        for r in s["runs"]:
            m, d = r["metrics"], os.path.join(out, r["dir"])
            check(m["flows"] == len(flows) and m["completed_flows"] == len(flows),
                  f"{r['label']}: {m['completed_flows']}/{m['flows']} flows for the file's {len(flows)}")
            want = Counter((our_ip(a), our_ip(b), size, start // 1000) for a, b, size, start in flows)
            got = Counter((x[0], x[1], int(x[4]), int(x[5])) for x in read_lines(os.path.join(d, "fct.txt")))
            check(got == want, f"{r['label']}: fct.txt differs from the .cm file: {want - got} / {got - want}")
    print("ok: htsim-cm")


def htsim_topology_hosts(path):
    """Nodes of an htsim topology file (its header's `Nodes N`, any case)."""
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 2 and w[0].lower() == "nodes":
                return int(w[1])
    return None


def test_htsim_topology():
    """htsim's own leaf_spine_tiny.topo with a connection matrix: 32 hosts on 4 ToRs, each
    with 2 uplinks at 100 Gbit/s (4:1). Every flow completes; the ideal FCTs show 100 Gbit/s
    links of 1 us; a ToR's 8 outgoing flows share its 2 uplinks, so the permutation takes at
    least 8 x 256 KiB over 200 Gbit/s (a non-oversubscribed build would take a quarter)."""
    scenario = os.path.join(SCENARIOS, "htsim-topo.toml")
    hosts = htsim_topology_hosts(os.path.join(SCENARIOS, "data", "htsim-leaf-spine.topo"))
    flows = htsim_flows(os.path.join(SCENARIOS, "data", "htsim-leaf-spine.cm"))
    check(hosts == 32 and len(flows) == 40, "the example's files changed: update this test")
    with tempfile.TemporaryDirectory() as out:
        s = run_sim(scenario, out)
        check(len(s["runs"]) == 2, f"htsim-topo: {len(s['runs'])} runs")
        for r in s["runs"]:
            m, d = r["metrics"], os.path.join(out, r["dir"])
            check(m["flows"] == len(flows) and m["completed_flows"] == len(flows),
                  f"{r['label']}: {m['completed_flows']}/{m['flows']} flows for the file's {len(flows)}")
            lines = read_lines(os.path.join(d, "fct.txt"))
            want = Counter((our_ip(a), our_ip(b), size, start // 1000) for a, b, size, start in flows)
            got = Counter((x[0], x[1], int(x[4]), int(x[5])) for x in lines)
            check(got == want, f"{r['label']}: fct.txt differs from the .cm file: {want - got} / {got - want}")
            # Every host of the file's Nodes sends and receives (the shift permutation).
            check({x[0] for x in lines} == {our_ip(h) for h in range(hosts)},
                  f"{r['label']}: senders are not the topology's {hosts} hosts")
            # Across racks: 4 cables of 1 us, 3 store-and-forward hops of one packet and
            # 256 KiB (+ headers) at 100 Gbit/s: 4 + 3 x 0.33 + 21.0..21.4 us.
            perm = [x for x in lines if int(x[4]) == 262144]
            for x in perm:
                ideal = int(x[7])
                check(25900 < ideal < 26500, f"{r['label']}: ideal fct of 256 KiB across racks {ideal} ns")
            # Oversubscription: 8 x 256 KiB leave each ToR over 2 x 100 Gbit/s.
            last = max(int(x[5]) + int(x[6]) for x in perm)
            floor = 8 * 262144 * 8 / 200e9 * 1e9
            check(last >= floor, f"{r['label']}: the permutation ended at {last} ns, before {floor:.0f} ns: "
                                 f"the ToRs have more than 2 uplinks")
    print("ok: htsim-topo")


def test_errors():
    """A broken file: exit 1 and one line on stderr naming file:line and the problem."""
    cases = [
        ("hpcc-import.toml", "hpcc-flow.txt", lambda t: t.replace("3 7 3 100 4096", "3 9 3 100 4096"),
         "hpcc-flow.txt:4: dst node 9 is a switch, not a host"),
        ("hpcc-import.toml", "hpcc-flow.txt", lambda t: t.replace("12\n", "13\n", 1),
         "hpcc-flow.txt: ends after 12 flows; its first line says 13"),
        ("hpcc-import.toml", "hpcc-flow.txt", lambda t: t.replace("0.000003\n6", "0.0000001\n6", 1),
         "hpcc-flow.txt:6: start_time 0.0000001 is earlier than the flow before"),
        ("hpcc-import.toml", "hpcc-topology.txt", lambda t: t.replace("7 9 100Gbps", "7 8 100Gbps"),
         None),  # still a valid file (host 7 moves racks): no error
        ("hpcc-import.toml", "hpcc-topology.txt", lambda t: t.replace("8 10 400Gbps 2000ns", "8 10 400Gbit 2000ns"),
         "hpcc-topology.txt:11: rate '400Gbit' has no unit"),
        ("hpcc-import.toml", "hpcc-topology.txt", lambda t: t.replace("9 10 400Gbps", "3 9 400Gbps"),
         "hpcc-topology.txt:12: host 3 has a second link (line 6 has its first)"),
        ("htsim-cm.toml", "htsim-permutation.cm", lambda t: t.replace("id 3 start 0", "id 3 trigger 1"),
         "htsim-permutation.cm:7: 'trigger': htsim triggers are not supported"),
        ("htsim-cm.toml", "htsim-permutation.cm", lambda t: t.replace("3->8", "3->16"),
         "htsim-permutation.cm:8: dst node 16: the topology has 16 nodes"),
        ("htsim-cm.toml", "htsim-permutation.cm", lambda t: t.replace("Connections 12", "Connections 11"),
         "htsim-permutation.cm:16: more connections than the header's Connections 11"),
        ("htsim-topo.toml", "htsim-leaf-spine.topo", lambda t: t.replace("Radix_Up 2", "Radix_Up 4"),
         "htsim-leaf-spine.topo:12: Radix_Down of tier 0 / Radix_Up (8 / 4, rounded down) is not its Oversubscribed 4"),
        ("htsim-topo.toml", "htsim-leaf-spine.topo", lambda t: t.replace("Oversubscribed 4", "Oversubscribed 4\nECN 1"),
         "htsim-leaf-spine.topo:16: unknown key 'ECN'"),
        ("htsim-topo.toml", "htsim-leaf-spine.cm", lambda t: t.replace("Nodes 32", "Nodes 16"),
         "htsim-leaf-spine.cm:4: Nodes 16, but the htsim topology has 32"),
        ("htsim-topo.toml", "htsim-leaf-spine.cm", lambda t: t.replace("7->15", "7->33"),
         "htsim-leaf-spine.cm:13: dst node 33 is a switch, not a host"),
    ]
    for scenario, data, edit, expect in cases:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(os.path.join(SCENARIOS, scenario), tmp)
            shutil.copytree(os.path.join(SCENARIOS, "data"), os.path.join(tmp, "data"))
            path = os.path.join(tmp, "data", data)
            with open(path) as f:
                text = f.read()
            broken = edit(text)
            check(broken != text, f"{data}: the edit for {expect!r} changed nothing")
            with open(path, "w") as f:
                f.write(broken)
            p = subprocess.run([MROCE, "sim", os.path.join(tmp, scenario), "--out", os.path.join(tmp, "out")],
                               capture_output=True, text=True, timeout=120)
            lines = p.stderr.strip().splitlines()
            if expect is None:
                check(p.returncode == 0, f"{data}: a valid edit failed: {p.stderr.strip()}")
                continue
            check(p.returncode != 0 and len(lines) == 1 and expect in lines[0] and lines[0].find(data) >= 0,
                  f"{data}: expected one line with {expect!r}, got exit {p.returncode}: {p.stderr.strip()!r}")
    print("ok: errors")


def main():
    test_hpcc()
    test_htsim()
    test_htsim_topology()
    test_errors()
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    print("import_test: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
