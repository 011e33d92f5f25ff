#!/usr/bin/python3
"""Tests the pure functions of scripts/cc_experiments.py (no simulator run): nearest-rank
quantiles, FCT slowdown and fct.txt parsing, size buckets and their p50/p99, Jain's index,
per-flow goodput over a window of throughput.csv, the incast stall target, whether a
first-RTT burst fits the buffer, and the WebSearch verdict (p50 and p99 per bucket).

usage: cc_experiments_test.py CC_EXPERIMENTS_PY
"""
import importlib.util
import math
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL {what}")


def close(a, b, eps=1e-9):
    return a is not None and b is not None and abs(a - b) <= eps * max(1.0, abs(b))


def load(path):
    spec = importlib.util.spec_from_file_location("cc_experiments", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: cc_experiments_test.py CC_EXPERIMENTS_PY")
    cc = load(sys.argv[1])

    # nearest rank over fct.txt: exact (the simulator's fct_p99_us is obs::Histogram's, within 3.2%)
    check(cc.nearest_rank([], 0.5) is None, "nearest_rank of nothing is None")
    check(cc.nearest_rank([5], 0.99) == 5, "nearest_rank of one value")
    v = list(range(100, 0, -1))          # 1..100, unsorted
    check(cc.nearest_rank(v, 0.5) == 50, "p50 of 1..100 is 50")
    check(cc.nearest_rank(v, 0.99) == 99, "p99 of 1..100 is 99")
    check(cc.nearest_rank(v, 1.0) == 100, "p100 is the max")
    check(cc.nearest_rank([1, 2, 3], 0.5) == 2, "p50 of 3 values is the middle")

    # slowdown and fct.txt
    check(cc.slowdown(3000, 1000) == 3.0, "slowdown = fct / ideal")
    try:
        cc.slowdown(1, 0)
        check(False, "slowdown with ideal 0 raises")
    except ValueError:
        pass
    lines = ["c6120001 c6120101 61133 4791 1048576 0 18532401 89200\n", "\n",
             "c6120111 c6120102 4797 4797 50000 100 2000 1000\n"]
    flows = cc.parse_fct(lines)
    check(len(flows) == 2, "parse_fct skips blank lines")
    check(flows[1]["size"] == 50000 and flows[1]["start_ns"] == 100 and flows[1]["dst"] == "c6120102",
          "parse_fct fields")
    check(close(flows[0]["slowdown"], 18532401 / 89200), "parse_fct slowdown")
    try:
        cc.parse_fct(["a b c\n"])
        check(False, "parse_fct rejects a short line")
    except ValueError:
        pass

    # size buckets (decimal KB / MB; 100 KB and 1 MB themselves in the middle bucket)
    check(cc.size_bucket(0) == "<100KB", "bucket of 0")
    check(cc.size_bucket(99_999) == "<100KB", "bucket below 100 KB")
    check(cc.size_bucket(100_000) == "100KB-1MB", "bucket at 100 KB")
    check(cc.size_bucket(1_000_000) == "100KB-1MB", "bucket at 1 MB")
    check(cc.size_bucket(1_000_001) == ">1MB", "bucket above 1 MB")
    fl = [{"size": 1000, "slowdown": s} for s in (1.0, 2.0, 3.0, 10.0)] + \
         [{"size": 5_000_000, "slowdown": 4.0}]
    b = cc.bucket_slowdowns(fl)
    check(b["<100KB"] == (4, 2.0, 10.0), f"small bucket count/p50/p99: {b['<100KB']}")
    check(b["100KB-1MB"] == (0, None, None), "empty bucket")
    check(b[">1MB"] == (1, 4.0, 4.0), "large bucket")

    # Jain's index
    check(cc.jain([]) is None, "jain of nothing is None")
    check(close(cc.jain([5, 5, 5, 5]), 1.0), "jain of equal shares is 1")
    check(close(cc.jain([1, 0, 0, 0]), 0.25), "jain of one of four is 1/4")
    check(close(cc.jain([0, 0]), 1.0), "jain of all zero is 1")
    check(close(cc.jain([28.9, 28.9, 28.9, 5.4]), (92.1 ** 2) / (4 * (3 * 28.9 ** 2 + 5.4 ** 2))),
          "jain formula")

    # window goodput: intervals end at the sample time; a flow without a row placed nothing
    rows = cc.parse_throughput(["time_us,flow,gbps\n",
                                "10,0,10\n", "10,1,30\n", "10,all,40\n",
                                "20,0,20\n", "20,all,20\n",
                                "25,0,40\n", "25,1,40\n", "25,all,80\n"])
    check(len(rows) == 8 and rows[0] == (10.0, "0", 10.0), "parse_throughput")
    g = cc.window_goodput(rows, 10, 25)   # intervals (10, 20] of 10 us and (20, 25] of 5 us
    check(close(g["0"], (20 * 10 + 40 * 5) / 15), f"window goodput flow 0: {g}")
    check(close(g["1"], (0 * 10 + 40 * 5) / 15), f"window goodput flow 1 (absent at 20): {g}")
    check("all" not in g, "window goodput leaves out 'all'")
    g = cc.window_goodput(rows, 0, 10, flows=["1", "7"])
    check(close(g["1"], 30) and g["7"] == 0, f"window goodput with named flows: {g}")
    check(cc.window_goodput(rows, 30, 40) == {}, "empty window")
    try:
        cc.parse_throughput(["time,flow,gbps\n"])
        check(False, "parse_throughput rejects a bad header")
    except ValueError:
        pass

    # the incast targets
    check(close(cc.stall_target_us(65536, 8, 100), 5 * 65536 * 8 * 8 / 100e3),
          "stall target N=8 at 100G")
    check(close(cc.stall_target_us(65536, 64, 100), 1677.7216), "stall target N=64")
    check(cc.burst_fits(32768, 64, 4194304), "64 x 32 KiB (+ headers) fits 4 MiB")
    check(not cc.burst_fits(65536, 64, 4194304), "64 x 64 KiB + headers does not fit 4 MiB")
    check(cc.burst_fits(65536, 1, 65536 + 16 * 72), "headers counted exactly")
    check(not cc.burst_fits(65536, 1, 65536 + 16 * 72 - 1), "one byte short")
    # the WebSearch verdict: p50 and p99 each <= RoCEv2's, per bucket
    ok, text = cc.slowdown_verdict((10, 3.711, 5.0), (10, 3.687, 1089.0))
    check(ok is False and "p50 3.711 > 3.687" in text and "p99" not in text,
          f"a p50 above rocev2's fails although p99 is below: {text}")
    ok, text = cc.slowdown_verdict((10, 1.5, 12.0), (10, 2.0, 10.0))
    check(ok is False and "p99" in text and "p50" not in text, f"p99 above fails: {text}")
    ok, text = cc.slowdown_verdict((10, 2.0, 10.0), (10, 2.0, 10.0))
    check(ok is True and text.startswith("yes"), f"equal quantiles meet the target: {text}")
    check(cc.slowdown_verdict((0, None, None), (5, 1.0, 2.0))[0] is None, "empty bucket: n/a")
    check(cc.within(4.1, 4, 0.05) and not cc.within(4.3, 4, 0.05) and not cc.within(None, 4, 0.05),
          "within 5 %")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("cc_experiments_test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
