#!/usr/bin/env python3
"""sim_fuzz.py: random `mroce sim` scenarios, each checked for what must hold in any run.

Every case draws a fabric (single switch or leaf-spine, 1-4 planes, 10-400 Gbit/s, small
or large buffers, ECN on or off), a workload (incast, permutation, all-to-all, ring
all-reduce, WebSearch background, explicit flows with dependencies), loss (Bernoulli,
Gilbert-Elliott bursts), faults that leave every host connected (one plane cut or slowed
when there are several planes), and MetaRoCE settings (paths, ack_every, max_payload,
controller, hint, pacing, path selection, capabilities, first-RTT budget, streams). It
runs the case and checks:
  - the process exits 0 and writes summary.json;
  - every flow completes and no operation fails (no fault here disconnects a host, and
    the time limit is far above the run's ideal);
  - goodput never exceeds what the receivers' ports can take (throughput.csv, `all`).

Where the case leaves no rate control in force (the fixed window, which reacts to nothing in
the core; AIMD without the paced hint, unless ECN marks reach it and the senders into one
receiver fit its buffer at one segment per path), senders may overrun shallow buffers
without bound and their operations may fail with kRetryExceeded: such a case must only
exit cleanly, and its outcome is printed. The cases named with --also must complete
whatever the settings: each is a failure this script found and a fix ended (the cases
quoted in docs/spec.md and core/; docs/results.md, "Random scenarios").

With --extras a case may also bring a cut plane back, cut one host's cable in one plane
(and restore it), make a cable lossy mid-run, weight two traffic classes, or run MetaRoCE
over PFC; --spine-cuts adds a spine's cable cut, routing told late or never (seeds
1-3000: 3 cases still fail, docs/results.md, "Random scenarios"). Without them a seed draws the same scenario as when the cases quoted in the
spec and core/ were found.

A case is replayed from its seed alone (`--seed S --count 1`, with the same --extras and
--spine-cuts); a failing case keeps its files and prints the command that reruns it, and
--keep keeps every case's. Seeds are printed as they run.

    /usr/bin/python3 scripts/sim_fuzz.py --mroce build/mroce --seed 1 --count 800 --out DIR

`make test` runs seeds 1-800 and the cases found beyond them, and seeds 1-800 with --extras
(ctests sim_fuzz and sim_fuzz_extras, tests/CMakeLists.txt).
"""
import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WEBSEARCH = os.path.join(HERE, "..", "scenarios", "data", "websearch.cdf")


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string: the same escapes as JSON's
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    return repr(v)


def draw(seed, extras=False, spine_cuts=False):
    """One case: (sections for the TOML file, faults, host count, what one receiver can
    place (Gbit/s, plus bits at a sample's edge), whether some rate control is in force)."""
    r = random.Random(seed)
    planes = r.choice([1, 1, 1, 2, 4])
    rate = r.choice([10, 25, 100, 100, 200, 400])
    topo = {
        "rate_gbps": rate,
        "delay_us": r.choice([0.5, 1, 1, 2, 5]),
        "buffer_bytes": r.choice([65536, 262144, 1048576, 4194304]),
        "planes": planes,
    }
    if r.random() < 0.4:
        hosts = r.randint(2, 17)
        topo.update(kind="single_switch", hosts=hosts)
    else:
        leaves, hpl = r.randint(2, 4), r.randint(2, 8)
        hosts = leaves * hpl
        topo.update(kind="leaf_spine", leaves=leaves, spines=r.randint(1, 4),
                    hosts_per_leaf=hpl, oversubscription=r.choice([1.0, 1.0, 2.0]))
    ecn = r.choice(["red", "red", "step", "off"])
    buf = topo["buffer_bytes"]
    if ecn == "red":
        topo["ecn"] = {"mode": "red", "kmin_bytes": buf // 16, "kmax_bytes": buf // 4,
                       "pmax": 0.2}
    elif ecn == "step":
        topo["ecn"] = {"mode": "step", "k_bytes": buf // 8}
    if r.random() < 0.2:
        topo["shared_buffer"] = True
        topo["shared_buffer_bytes"] = buf * 4

    big = r.random() < 0.3
    size = r.choice([1000, 4096, 65536, 262144, 1048576] + ([4194304] if big else []))
    kind = r.choice(["incast", "incast", "permutation", "all_to_all", "ring_allreduce",
                     "background", "explicit"])
    work = {"kind": kind}
    if kind == "incast":
        work.update(senders=r.randint(1, hosts - 1), receiver=r.randrange(hosts), bytes=size)
    elif kind in ("permutation", "all_to_all"):
        work["bytes"] = min(size, 262144) if kind == "all_to_all" else size
        if kind == "all_to_all" and hosts > 12:
            work["hosts"] = 12
    elif kind == "ring_allreduce":
        n = min(hosts, r.randint(2, 8))
        work.update(hosts=n, bytes=max(n * 4096, size * n // 4))
    elif kind == "background":
        work.update(load=r.choice([0.3, 0.5, 0.7]), cdf=WEBSEARCH,
                    duration_us=r.choice([50, 200]), max_flows=200)
    else:
        flows = []
        for i in range(r.randint(1, 12)):
            s = r.randrange(hosts)
            d = r.choice([h for h in range(hosts) if h != s])
            f = {"src": s, "dst": d, "bytes": r.choice([1, 100, 4096, 5000, 65536, 300000]),
                 "start_us": r.choice([0, 0, 5, 50])}
            if i and r.random() < 0.3:
                f["depends_on"] = [r.randrange(i)]
            flows.append(f)
        work["flows"] = flows
    if kind != "explicit" and r.random() < 0.5:
        work["message_bytes"] = r.choice([4096, 65536, 262144])

    mroce = {
        "paths": r.choice([1, 2, 4, 8, 8, 16]),
        "ack_every": r.choice([1, 2, 2, 4, 8]),
        "max_payload": r.choice([1024, 4096, 4096, 8192, 9000]),
        "congestion_control": r.choice(["aimd", "aimd", "fixed"]),
        "rate_hint": r.random() < 0.85,
        "pacing": r.random() < 0.85,
        "path_selection": r.choice(["round_robin", "room"]),
        "compact_data": r.random() < 0.5,
        "short_acks": r.random() < 0.8,
        "preconnect": r.random() < 0.3,
        "streams": r.choice(["flow", "pair"]),
        "first_rtt_bytes": r.choice([16384, 32768, 32768, 65536, 1048576]),
        "hello_copies": r.choice([1, 1, 2]),
        "grant_caps_first_rtt": r.random() < 0.3,
        "integrity": r.random() < 0.2,
    }
    if r.random() < 0.2:
        mroce["timer_granularity_us"] = r.choice([10, 200])

    fabric = {"loss": r.choice([0, 0, 0, 0.001, 0.01, 0.05])}
    faults = []
    if fabric["loss"] <= 0.01 and r.random() < 0.15:
        faults.append({"at_us": r.choice([5, 20, 100]), "kind": "burst_loss",
                       "p_good_to_bad": 0.01, "p_bad_to_good": 0.3, "loss_in_bad": 1.0})
    # A plane cut leaves every host connected only if each connection has a path on
    # another plane ([PATH-1] spreads paths over the planes).
    if planes > 1 and mroce["paths"] >= planes and r.random() < 0.4:
        faults.append({"at_us": r.choice([2, 20, 100]), "kind": "plane_down",
                       "plane": r.randrange(planes)})
    if planes > 1 and r.random() < 0.2:
        faults.append({"at_us": r.choice([10, 50]), "kind": "rate",
                       "plane": r.randrange(planes), "host": r.randrange(hosts),
                       "rate_gbps": rate / 4})

    # With --extras, more faults and features, drawn from a stream of their own: without
    # it every seed's scenario is the one the cases quoted elsewhere were found in.
    if extras:
        x = random.Random(seed * 7919 + 1)
        cut = [f for f in faults if f["kind"] == "plane_down"]
        if cut and x.random() < 0.4:  # the plane comes back
            faults.append({"at_us": cut[0]["at_us"] + x.choice([50, 300, 2000]), "kind": "plane_up",
                           "plane": cut[0]["plane"]})
        if planes > 1 and mroce["paths"] >= planes and x.random() < 0.15:
            # one host's cable in one plane, perhaps back later; the plane already cut if one
            # is (a host must keep a plane)
            h, pl, at = x.randrange(hosts), x.randrange(planes), x.choice([3, 40])
            if cut:
                pl = cut[0]["plane"]
            faults.append({"at_us": at, "kind": "cable_down", "host": h, "plane": pl})
            if x.random() < 0.5:
                faults.append({"at_us": at + x.choice([100, 1000]), "kind": "cable_up", "host": h, "plane": pl})
        if spine_cuts and topo["kind"] == "leaf_spine" and topo["spines"] > 1 and x.random() < 0.15:
            # a spine's cable towards one leaf, routing learning of it later or never
            prefix = f"P{x.randrange(planes)}." if planes > 1 else ""
            f = {"at_us": x.choice([5, 60]), "kind": "cable_down",
                 "port": f"{prefix}spine{x.randrange(topo['spines'])}/p{x.randrange(topo['leaves'])}"}
            if x.random() < 0.5:
                f["reconverge_us"] = x.choice([20, 200])
            faults.append(f)
        if x.random() < 0.1:  # one host's cable turns lossy mid-run
            faults.append({"at_us": x.choice([10, 100]), "kind": "loss", "host": x.randrange(hosts),
                           "plane": x.randrange(planes), "loss": x.choice([0.05, 0.2])})
        if x.random() < 0.15:  # two traffic classes, weighted in the receivers' shares
            topo["traffic_classes"] = 2
            mroce["class_weights"] = [x.choice([1, 4]), x.choice([1, 4])]
            if work["kind"] == "explicit":
                for f in work["flows"]:
                    f["traffic_class"] = x.randrange(2)
            else:
                work["traffic_class"] = x.randrange(2)
        if x.random() < 0.1:  # a lossless fabric under MetaRoCE too
            topo["pfc"] = {"enabled": True}
            mroce["pfc"] = True

    doc = {
        "name": f"fuzz{seed}",
        "seed": seed,
        "protocol": "mroce",
        "topology": topo,
        "fabric": fabric,
        "mroce": mroce,
        "workload": work,
        "run": {"time_limit_us": 1000000, "max_events": 200000000},
        "output": {"sample_us": 5, "flows": 0},
    }
    # Some rate control in force: AIMD with the receiver's hint paced at and a path on every
    # plane (the hint counts every plane's port in the receiver's capacity), or AIMD fed by
    # ECN marks where the senders into one receiver fit its buffer at AIMD's floor (one
    # segment in flight per path, cc/aimd.cc): past that no window can stop the overflow,
    # and only the hint spaces the senders out (cases 2035, 8674, 10112, 12577: incasts of
    # 5-19 senders x 8 paths x 8-9 KB segments into 64-256 KiB buffers, the hint or pacing
    # off, ran out of retries). A fixed window reacts to nothing in the core, and a hint
    # whose senders reach only some of the receiver's ports over-grants them.
    n = work.get("hosts") or hosts
    if work["kind"] == "incast":
        fan_in = work["senders"]
    elif work["kind"] in ("permutation", "ring_allreduce"):
        fan_in = 1
    elif work["kind"] == "explicit":
        fan_in = max(sum(f["dst"] == d for f in work["flows"]) for d in range(hosts))
    else:  # all-to-all, background
        fan_in = n - 1
    floor_fits = fan_in * mroce["paths"] * mroce["max_payload"] <= topo["buffer_bytes"]
    controlled = mroce["congestion_control"] == "aimd" and (
        (ecn != "off" and floor_fits) or
        (mroce["rate_hint"] and mroce["pacing"] and mroce["paths"] >= planes))
    # The most a receiver can place in a sample of t ns: its ports' rate, plus a packet per
    # port finishing at the sample's edge (rx_bits / t).
    rx_limit = (rate * planes, planes * mroce["max_payload"] * 8)
    return doc, faults, hosts, rx_limit, controlled


def write_toml(doc, faults, path):
    lines = []
    for k, v in doc.items():
        if not isinstance(v, dict):
            lines.append(f"{k} = {toml_value(v)}")
    for sec, body in doc.items():
        if not isinstance(body, dict):
            continue
        lines.append(f"\n[{sec}]")
        subs = {}
        for k, v in body.items():
            if isinstance(v, dict) and sec == "topology":
                subs[k] = v
            else:
                lines.append(f"{k} = {toml_value(v)}")
        for k, v in subs.items():
            lines.append(f"[{sec}.{k}]")
            for kk, vv in v.items():
                lines.append(f"{kk} = {toml_value(vv)}")
    for f in faults:
        lines.append("\n[[faults]]")
        for k, v in f.items():
            lines.append(f"{k} = {toml_value(v)}")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def check(case_dir, hosts, rx_limit, controlled):
    """Problems found in a finished case's output (empty: it passed); and a note."""
    problems = []
    try:
        s = json.load(open(os.path.join(case_dir, "summary.json")))
    except (OSError, ValueError) as e:
        return [f"no summary.json ({e})"], ""
    note = ""
    for run in s["runs"]:
        m = run["metrics"]
        outcome = []
        if m["completed_flows"] != m["flows"]:
            outcome.append(f"{m['completed_flows']}/{m['flows']} flows completed "
                           f"(stop: {m['stop_reason']}, at {m['completion_time_us']} us)")
        if m["failed_ops"]:
            outcome.append(f"{m['failed_ops']} failed operations")
        if controlled:
            problems += outcome
        elif outcome:
            note = "no rate control in force: " + "; ".join(outcome)
        tp = os.path.join(case_dir, run["dir"], "throughput.csv")
        if os.path.exists(tp):
            # `all`: payload placed at every receiver together, over the time since the
            # sample before (the run's last sample may follow it closely).
            gbps, bits = rx_limit
            prev = 0.0
            for line in open(tp):
                f = line.strip().split(",")
                if len(f) != 3 or f[1] != "all":
                    continue
                t = float(f[0])
                span_ns = (t - prev) * 1e3
                prev = t
                bound = hosts * (gbps + bits / max(span_ns, 1e-3))
                if float(f[2]) > bound:
                    problems.append(f"goodput {float(f[2]):.0f} Gbit/s at {t} us, above the "
                                    f"receivers' {bound:.0f}")
                    break
    return problems, note


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mroce", required=True)
    ap.add_argument("--seed", type=int, default=1, help="first case's seed")
    ap.add_argument("--count", type=int, default=50,
                    help="cases from --seed on (the environment's MROCE_SEEDS, if set, replaces it)")
    ap.add_argument("--also", default="", help="more seeds, comma-separated (cases found before)")
    ap.add_argument("--extras", action="store_true",
                    help="also: a cut plane back up, one host's cable down (and up), a lossy "
                         "cable mid-run, two weighted traffic classes, PFC")
    ap.add_argument("--spine-cuts", action="store_true",
                    help="also cut a spine's cable (docs/results.md, \"Random scenarios\")")
    ap.add_argument("--out", default="/tmp/sim_fuzz")
    ap.add_argument("--timeout", type=float, default=120, help="wall seconds per case")
    ap.add_argument("--keep", action="store_true", help="keep passing cases' files")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if os.environ.get("MROCE_SEEDS"):
        a.count = int(os.environ["MROCE_SEEDS"])
    seeds = list(range(a.seed, a.seed + a.count))
    also = [int(x) for x in a.also.split(",") if x]
    seeds += [x for x in also if x not in seeds]
    failed = []
    for seed in seeds:
        doc, faults, hosts, rx_limit, controlled = draw(seed, a.extras, a.spine_cuts)
        case_dir = os.path.join(a.out, f"case{seed}")
        os.makedirs(case_dir, exist_ok=True)
        toml = os.path.join(case_dir, "case.toml")
        write_toml(doc, faults, toml)
        cmd = [a.mroce, "sim", toml, "--out", case_dir]
        t0 = time.time()
        note = ""
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
            problems = [] if p.returncode == 0 else [
                f"exit {p.returncode}: {(p.stderr or p.stdout).strip().splitlines()[-1:]}"]
            if not problems:
                problems, note = check(case_dir, hosts, rx_limit, controlled or seed in also)
        except subprocess.TimeoutExpired:
            problems = [f"over {a.timeout} s wall"]
        wall = time.time() - t0
        w = doc["workload"]
        desc = (f"{doc['topology']['kind']} {hosts}h x{doc['topology']['planes']} "
                f"{doc['topology']['rate_gbps']}G {w['kind']} loss {doc['fabric']['loss']} "
                f"faults {[f['kind'] for f in faults]}")
        print(f"seed {seed}: {'FAIL' if problems else 'ok'} ({wall:.1f} s) {desc}"
              + (f" [{note}]" if note else ""), flush=True)
        for pr in problems:
            print(f"    {pr}", flush=True)
        if problems:
            print(f"    replay: {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
            failed.append(seed)
        elif not a.keep:
            shutil.rmtree(case_dir, ignore_errors=True)
    print(f"{len(seeds) - len(failed)}/{len(seeds)} passed; failed seeds: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
