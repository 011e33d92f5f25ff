#!/usr/bin/python3
"""Tests scripts/plot.py on synthetic `mroce sim` output directories (docs/sim.md contract).

Cases: a sweep (loss x protocol, four runs) whose runs have full, empty, missing and
malformed files; a single run with 40 flows (the line limit; no sweep.png); a sweep with
a shared point, a missing metric and a missing run directory; a protocol-only sweep (bars); a
sweep of cases, whose lines the case labels name; and
the one-line errors for a missing DIR, a DIR without summary.json, bad JSON and a bad run.
Every PNG must be a valid PNG (signature, IHDR with a non-zero size, IEND last).

usage: plot_test.py PLOT_PY   (PLOT_TEST_KEEP=DIR keeps the synthetic output there, to look at)
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import zlib

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL {what}")


def png_problem(path):
    """Returns None for a valid PNG file, else what is wrong."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return e.strerror
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return "no PNG signature"
    at, first, last = 8, None, None
    while at + 12 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        crc = struct.unpack(">I", data[at + 8 + length:at + 12 + length])[0]
        if zlib.crc32(kind + body) != crc:
            return f"bad CRC in {kind!r}"
        if first is None:
            first = (kind, body)
        last = kind
        at += 12 + length
    if first is None or first[0] != b"IHDR":
        return "first chunk is not IHDR"
    width, height = struct.unpack(">II", first[1][:8])
    if width == 0 or height == 0:
        return "empty image"
    if last != b"IEND" or at != len(data):
        return "does not end with IEND"
    return None


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# cc.csv's header as `mroce sim` writes it (docs/sim.md).
CC_HEADER = ("time_us,conn,path,state,cwnd_bytes,srtt_ns,in_flight_bytes,ecn_alpha,"
             "window_rate_bps,pacing_rate_bps,rate_hint_mbps")


def run_files(run_dir, rng, flows, ports=3, conns=2):
    """Writes a complete, contract-following set of per-run files."""
    tp = ["time_us,flow,gbps"]
    for t in range(0, 200, 10):
        total = 0.0
        for fl in range(flows):
            g = rng.uniform(0, 100.0 / flows)
            total += g
            tp.append(f"{t},{fl},{g:.4f}")
        tp.append(f"{t},all,{total:.4f}")
    write(os.path.join(run_dir, "throughput.csv"), "\n".join(tp) + "\n")
    q = ["time_us,port,bytes"]
    for t in range(0, 200, 5):
        for p in range(ports):
            q.append(f"{t},leaf{p % 2}/p{p},{rng.randrange(0, 300000)}")
    write(os.path.join(run_dir, "queue.csv"), "\n".join(q) + "\n")
    cc = [CC_HEADER]
    for t in range(0, 200, 10):
        for c in range(conns):
            rate = rng.randrange(10**9, 10**11)
            cc.append(f"{t},{c},-1,established,,,{rng.randrange(0, 10**6)},,{rate},{rate // 2},"
                      f"{rng.randrange(1000, 100000)}")
            for path in range(4):
                state = "failed" if path == 3 and t >= 100 else "active"
                cc.append(f"{t},{c},{path},{state},{rng.randrange(1000, 50000)},"
                          f"{rng.randrange(2000, 9000)},{rng.randrange(0, 50000)},"
                          f"{rng.uniform(0, 1):.4f},,,")
    write(os.path.join(run_dir, "cc.csv"), "\n".join(cc) + "\n")
    fct = []
    for fl in range(flows):
        size = rng.randrange(1000, 2_000_000)
        ideal = 2000 + size * 8 // 100
        fct.append(f"c6120001 c6120002 {49152 + fl} 4797 {size} {fl * 1000} "
                   f"{int(ideal * rng.uniform(1, 5))} {ideal}")
    write(os.path.join(run_dir, "fct.txt"), "\n".join(fct) + "\n")


def summary(runs, scenario="synthetic"):
    return {"scenario": scenario, "scenario_file": "scenarios/synthetic.toml", "seed": 1,
            "wall_seconds": 0.5, "events": 1000, "sim_packets": 500, "runs": runs}


def run_entry(protocol, label, params, rng):
    metrics = {"goodput_gbps": rng.uniform(10, 100), "goodput_fraction": rng.uniform(0.1, 1),
               "completion_time_us": rng.uniform(100, 1000), "fct_p50_us": rng.uniform(10, 50),
               "fct_p99_us": rng.uniform(50, 500), "retransmits": rng.randrange(100),
               "drops": rng.randrange(100), "ecn_marks": rng.randrange(100),
               "max_queue_bytes": rng.randrange(1 << 20), "failed_ops": 0}
    return {"protocol": protocol, "label": label, "dir": label, "params": params,
            "metrics": metrics}


def plot(plot_py, target, *args):
    return subprocess.run([sys.executable, plot_py, target, *args], capture_output=True,
                          text=True, timeout=120)


def pngs_in(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".png"))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot_test.py PLOT_PY")
    plot_py = sys.argv[1]
    seed = int(os.environ.get("MROCE_SEED", "1"))
    print(f"seed {seed} (replay: MROCE_SEED={seed})")
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = os.environ.get("PLOT_TEST_KEEP", tmp)
        # --- a sweep: loss x protocol ---
        sweep = os.path.join(tmp, "sweep")
        runs = []
        for proto in ("mroce", "rocev2"):
            for loss in (0.001, 0.01):
                label = f"{proto}-loss{loss}"
                runs.append(run_entry(proto, label, {"loss": loss, "protocol": proto}, rng))
                run_files(os.path.join(sweep, label), rng, flows=4)
        write(os.path.join(sweep, "summary.json"), json.dumps(summary(runs), indent=1))
        # Damage some runs: header-only, missing, malformed.
        write(os.path.join(sweep, "rocev2-loss0.001", "cc.csv"), CC_HEADER + "\n")
        os.remove(os.path.join(sweep, "rocev2-loss0.01", "fct.txt"))
        write(os.path.join(sweep, "rocev2-loss0.01", "cc.csv"),
              CC_HEADER + "\n0,0,-1,,,,,,,,\n10,0,-1,,,,,,,,\n")
        write(os.path.join(sweep, "mroce-loss0.01", "queue.csv"),
              "time_us,port,bytes\n0,leaf0/p0,12\n5,leaf0/p0,lots\n")
        write(os.path.join(sweep, "mroce-loss0.01", "throughput.csv"), "")

        r = plot(plot_py, sweep)
        print(r.stdout, end="")
        check(r.returncode == 0, f"sweep: exit {r.returncode}: {r.stderr.strip()}")
        expect = {
            "mroce-loss0.001": ["cc.png", "fct_cdf.png", "queue.png", "throughput.png"],
            "mroce-loss0.01": ["cc.png", "fct_cdf.png"],
            "rocev2-loss0.001": ["fct_cdf.png", "queue.png", "throughput.png"],
            "rocev2-loss0.01": ["queue.png", "throughput.png"],
        }
        for label, names in expect.items():
            got = pngs_in(os.path.join(sweep, label))
            check(got == names, f"sweep {label}: PNGs {got}, expected {names}")
        check(os.path.exists(os.path.join(sweep, "sweep.png")), "sweep.png written")
        # Three of the four runs have an fct.txt: one overlaid CDF of the three.
        check("fct_cdf.png (3 runs overlaid)" in r.stdout, "sweep: the FCT CDFs of 3 runs overlaid")
        check(png_problem(os.path.join(sweep, "fct_cdf.png")) is None, "sweep: fct_cdf.png is a PNG")

        for note in ("rocev2-loss0.001/cc.csv: no rows", "rocev2-loss0.01/fct.txt: missing",
                     "lots", "mroce-loss0.01/throughput.csv: empty",
                     "rocev2-loss0.01/cc.csv: no window or rate values"):
            check(note in r.stdout, f"a note mentions {note!r}")
        for d, _, files in os.walk(sweep):
            for f in files:
                if f.endswith(".png"):
                    problem = png_problem(os.path.join(d, f))
                    check(problem is None, f"{os.path.join(d, f)}: {problem}")

        # --metrics picks sweep.png's metrics, in order; unknown names are usage errors.
        m = plot(plot_py, sweep, "--metrics", "drops,goodput_gbps")
        check(m.returncode == 0, f"--metrics: exit {m.returncode}: {m.stderr.strip()}")
        check("sweep.png (2 metrics;" in m.stdout, f"--metrics: two metrics drawn: {m.stdout!r}")
        m = plot(plot_py, sweep)
        check("sweep.png (10 metrics;" in m.stdout, "without --metrics: the contract's ten")
        for args, words in ((("--metrics", "drops,no_such_metric"), "no_such_metric"),
                            (("--metrics",), "--metrics needs"),
                            (("--metric=drops",), "unknown option --metric=drops")):
            m = plot(plot_py, sweep, *args)
            err = m.stderr.strip()
            check(m.returncode == 2 and words in err and "\n" not in err,
                  f"plot.py {' '.join(args)}: exit 2 and one line with {words!r}, got "
                  f"{m.returncode} {err!r}")

        # --- one run with 40 flows: at most 16 flows + the total are drawn; no sweep ---
        single = os.path.join(tmp, "single")
        write(os.path.join(single, "summary.json"),
              json.dumps(summary([run_entry("mroce", "only", {}, rng)])))
        run_files(os.path.join(single, "only"), rng, flows=40, ports=20, conns=5)
        r = plot(plot_py, single)
        print(r.stdout, end="")
        check(r.returncode == 0, f"single: exit {r.returncode}: {r.stderr.strip()}")
        check(pngs_in(os.path.join(single, "only")) ==
              ["cc.png", "fct_cdf.png", "queue.png", "throughput.png"], "single: all four PNGs")
        check(not os.path.exists(os.path.join(single, "sweep.png")), "single: no sweep.png")
        check(not os.path.exists(os.path.join(single, "fct_cdf.png")), "single: no overlay")
        check("(16 of 40 flows drawn)" in r.stdout, "throughput: 16 of 40 flows drawn")
        check("(16 of 20 ports drawn)" in r.stdout, "queue: 16 of 20 ports drawn")
        check("(16 of 25 series drawn)" in r.stdout, "cc: 16 of 25 series drawn")
        check("fct_cdf.png (slowdown by size in 10 buckets)" in r.stdout,
              "fct: 40 flows of different sizes in 10 size buckets")
        for f in pngs_in(os.path.join(single, "only")):
            problem = png_problem(os.path.join(single, "only", f))
            check(problem is None, f"single {f}: {problem}")

        # --- two runs of one protocol share a point, one lacks a metric; run directories
        # empty or missing: still a sweep.png, and notes ---
        protos = os.path.join(tmp, "protocols")
        runs = [run_entry(p, f"{p}-{i}", {"n": n}, rng)
                for i, (p, n) in enumerate((("mroce", 8), ("rocev2", 16), ("mroce", 8)))]
        del runs[2]["metrics"]["fct_p99_us"]
        os.makedirs(os.path.join(protos, runs[0]["dir"]))  # an empty run directory
        write(os.path.join(protos, "summary.json"), json.dumps(summary(runs)))
        r = plot(plot_py, protos)
        print(r.stdout, end="")
        check(r.returncode == 0, f"protocols: exit {r.returncode}: {r.stderr.strip()}")
        check(png_problem(os.path.join(protos, "sweep.png")) is None, "protocols: sweep.png")
        check("mroce-2: missing run directory" in r.stdout, "protocols: note for mroce-2")
        check("mroce-0/throughput.csv: missing" in r.stdout, "protocols: note for mroce-0")
        check("fct_cdf.png: fewer than two runs have an fct.txt" in r.stdout,
              "protocols: no overlay without two FCT files")

        # --- only the protocol differs: one bar per run ---
        only = os.path.join(tmp, "onlyprotocol")
        write(os.path.join(only, "summary.json"), json.dumps(summary(
            [run_entry(p, p, {"protocol": p}, rng) for p in ("mroce", "rocev2")])))
        r = plot(plot_py, only)
        check(r.returncode == 0, f"onlyprotocol: exit {r.returncode}: {r.stderr.strip()}")
        check(png_problem(os.path.join(only, "sweep.png")) is None, "onlyprotocol: sweep.png")

        # --- sweep cases (docs/sim.md): a case label names the keys it sets, so the lines
        # are named by the labels and the independent loss, not by every key a case set ---
        cases = os.path.join(tmp, "cases")
        runs = []
        for coll, kind in (("ring", "ring_allreduce"), ("a2a", "all_to_all")):
            for loss in (0, 0.01):
                for stack, proto, qps in (("mroce", "mroce", None), ("8qp", "rocev2", 8)):
                    params = {"collective": coll, "workload.kind": kind, "fabric.loss": loss,
                              "stack": stack, "protocol": proto}
                    if qps:
                        params["rocev2.qps_per_pair"] = qps
                    runs.append(run_entry(proto, f"{coll}-{loss}-{stack}", params, rng))
        write(os.path.join(cases, "summary.json"), json.dumps(summary(runs)))
        r = plot(plot_py, cases)
        check(r.returncode == 0, f"cases: exit {r.returncode}: {r.stderr.strip()}")
        want = ("lines: mroce fabric.loss=0 stack=mroce, mroce fabric.loss=0.01 stack=mroce, "
                "rocev2 fabric.loss=0 stack=8qp, rocev2 fabric.loss=0.01 stack=8qp)")
        check(want in r.stdout, f"cases: the lines are named by the labels and the loss: {r.stdout!r}")
        check(png_problem(os.path.join(cases, "sweep.png")) is None, "cases: sweep.png")

        # --- one-line errors ---
        bad_json = os.path.join(tmp, "badjson")
        write(os.path.join(bad_json, "summary.json"), '{"runs": [ {"label": ')
        no_summary = os.path.join(tmp, "nosummary")
        os.makedirs(no_summary, exist_ok=True)
        bad_params = os.path.join(tmp, "badparams")
        write(os.path.join(bad_params, "summary.json"),
              json.dumps(summary([{"protocol": "mroce", "label": "x", "params": None}])))
        for target, words in ((os.path.join(tmp, "absent"), "not a directory"),
                              (no_summary, "summary.json: not found"),
                              (bad_json, "bad JSON"),
                              (bad_params, "runs[0].params is not an object")):
            r = plot(plot_py, target)
            err = r.stderr.strip()
            check(r.returncode == 1, f"{target}: exit {r.returncode}, expected 1")
            check(words in err and "\n" not in err and "Traceback" not in err,
                  f"{target}: one-line error with {words!r}, got {err!r}")
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all plot.py checks passed")


if __name__ == "__main__":
    main()
