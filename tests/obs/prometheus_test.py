#!/usr/bin/python3
"""prometheus_test.py — Debian's Prometheus server scrapes a running `mroce perf` and a
PromQL query over its HTTP API shows the transmit rate perf reports, within 10%.

The server runs on the test's own config, data directory and port (all under a temporary
directory, removed at the end), scraping the client's --metrics listener every 500 ms. The
client runs `-D 8`; once it has finished, the query is the average rate of
mroce_tx_data_bytes_total (DATA payload bytes, retransmissions included) over the last
6 s of the run, compared with perf's own average (--json BW: bytes / seconds). Exits 77
(ctest: skipped) with a message when the prometheus binary is not installed
(scripts/install-deps.sh installs it).

usage: prometheus_test.py PATH/TO/mroce
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

MROCE = sys.argv[1]
SKIP = 77


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


def main():
    prom_bin = shutil.which("prometheus")
    if not prom_bin:
        print("SKIP: the prometheus server is not installed (apt-get install prometheus; "
              "scripts/install-deps.sh)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="mroce-prom-test-")
    env = dict(os.environ, MROCE_STAT_DIR=os.path.join(tmp, "stat"))
    procs = []
    try:
        metrics_port, prom_port, oob = free_port(), free_port(), free_port()
        with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 500ms\n  evaluation_interval: 500ms\n"
                    "scrape_configs:\n  - job_name: mroce\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{metrics_port}']\n")
        prom = subprocess.Popen([prom_bin, f"--config.file={tmp}/prometheus.yml",
                                 f"--storage.tsdb.path={tmp}/data",
                                 f"--web.listen-address=127.0.0.1:{prom_port}"],
                                stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/prometheus.log", "w"))
        procs.append(prom)
        base = f"http://127.0.0.1:{prom_port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/-/ready", timeout=1)
                break
            except Exception:
                time.sleep(0.2)
        else:
            raise AssertionError("prometheus did not become ready: " + open(f"{tmp}/prometheus.log").read()[-2000:])

        # Prometheus's discovery hands new targets to the scrapers in batches (every 5 s):
        # wait until it scrapes ours (down until the client listens), so the series
        # covers the whole run.
        for _ in range(100):
            if get(f"{base}/api/v1/targets")["data"]["activeTargets"]:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("prometheus never picked up its scrape target")

        server = subprocess.Popen([MROCE, "perf", "-p", str(oob)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(server)
        time.sleep(0.3)
        out = os.path.join(tmp, "perf.json")
        client = subprocess.run([MROCE, "perf", "127.0.0.1", "-p", str(oob), "-D", "8", "--json", out,
                                 "--metrics", f"127.0.0.1:{metrics_port}"],
                                env=env, capture_output=True, text=True, timeout=60)
        end = time.time()
        assert client.returncode == 0, client.stderr
        r = json.load(open(out))["results"][0]  # one size: a one-row array
        perf_bps = r["bytes"] / r["seconds"]

        # rate() over the scrapes that saw the counter move: from the first scrape of the
        # client to the last one at which it had grown (the client's metrics outlive its
        # transfer by the result exchange and teardown). The raw samples come from a
        # range-vector query (the series is marked stale once the client is gone).
        time.sleep(1.0)
        q = urllib.parse.urlencode({"query": "mroce_tx_data_bytes_total[60s]", "time": f"{end + 1:.3f}"})
        raw = get(f"{base}/api/v1/query?{q}")["data"]["result"]
        assert raw and len(raw[0]["values"]) >= 4, f"too few samples of mroce_tx_data_bytes_total: {raw}"
        samples = [(float(t), float(v)) for t, v in raw[0]["values"]]
        last = max(t for (t, v), (_, pv) in zip(samples[1:], samples) if v > pv)
        window = last - samples[0][0]
        query = f"rate(mroce_tx_data_bytes_total[{int(window * 1000)}ms])"
        q = urllib.parse.urlencode({"query": query, "time": f"{last:.3f}"})
        ans = get(f"{base}/api/v1/query?{q}")
        assert ans["status"] == "success" and ans["data"]["result"], ans
        best = float(ans["data"]["result"][0]["value"][1])
        ratio = best / perf_bps
        print(f"perf: {perf_bps * 8 / 1e9:.2f} Gbit/s; PromQL {query}: {best * 8 / 1e9:.2f} Gbit/s "
              f"(ratio {ratio:.3f})")
        assert 0.9 <= ratio <= 1.1, f"transmit rate off by more than 10%: ratio {ratio:.3f}"
        print("PASS")
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
