#!/usr/bin/python3
"""dashboard_test.py — the live dashboard (issue 18, item 4) in a real headless browser.

A `mroce perf -D 40` client serves --metrics; Debian's chromium (headless, its own
profile in a temporary directory, loopback only) opens http://127.0.0.1:PORT/ through the
DevTools protocol, spoken here with the standard library alone (a minimal WebSocket
client). The test records every console message, uncaught exception and browser log
entry from before the navigation, waits while the transfer runs, then reads the page:

- no console error, exception or failed load (the chart library came from the listener);
- Chart.js drew: each of the four charts has datasets with points, and the throughput
  chart's "sent" series has at least 4 points with a positive value that changed between
  samples (the page polls /snapshot.json every second);
- the page's own record (<pre id="state">) agrees: no script error, samples taken.

Also checks the listener's routes: / is HTML, /chart.js is the library, /snapshot.json
is the snapshot (to_json) and refuses a bad ?after. Exits 77 (ctest: skipped) with a
message where chromium or libjs-chart.js is not installed (scripts/install-deps.sh).

usage: dashboard_test.py PATH/TO/mroce [SCREENSHOT.png]
"""
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

MROCE = sys.argv[1]
SCREENSHOT = sys.argv[2] if len(sys.argv) > 2 else None
SKIP = 77
STATE_JS = "(document.getElementById('state') || {}).textContent"  # null until the page is there
CHART_JS = os.environ.get("MROCE_CHARTJS", "/usr/share/javascript/chart.js/chart.min.js")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames, client masking,
    fragmented and large messages; pings are answered."""

    def __init__(self, url, timeout=10):
        m = re.fullmatch(r"ws://([^:/]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {m.group(3)} HTTP/1.1\r\nHost: {m.group(1)}:{m.group(2)}\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            check(chunk, "DevTools closed the WebSocket handshake")
            head += chunk
        check(head.startswith(b"HTTP/1.1 101"), f"WebSocket handshake: {head[:80]!r}")

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            check(chunk, "DevTools closed the WebSocket")
            buf += chunk
        return buf

    def send(self, text):
        data = text.encode()
        head = bytes([0x81])
        n = len(data)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._recv_exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            payload = self._recv_exact(n)
            opcode = b0 & 0x0F
            if opcode == 0x9:  # ping
                self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + b"\0\0\0\0" + payload)  # zero mask
                continue
            if opcode == 0x8:
                raise AssertionError("DevTools closed the WebSocket")
            message += payload
            if b0 & 0x80:
                return message.decode()


class DevTools:
    """One page target: commands with ids, every event kept in self.events."""

    def __init__(self, ws):
        self.ws, self.next_id, self.events = ws, 0, []

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.next_id:
                check("error" not in m, f"{method}: {m.get('error')}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def pump(self, seconds):
        """Collects events for `seconds` (a no-op command every 200 ms keeps it going)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.call("Runtime.evaluate", expression="0")
            time.sleep(0.2)

    def eval(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        check("exceptionDetails" not in r, f"{expression}: {r.get('exceptionDetails')}")
        return r["result"].get("value")


def problems(events):
    """Console errors, uncaught exceptions and browser log errors (failed loads)."""
    out = []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Runtime.exceptionThrown":
            out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:300])
        elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console." + p["type"] + ": " + json.dumps(p.get("args", []))[:300])
        elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append("log: " + p["entry"].get("text", "") + " " + p["entry"].get("url", ""))
    return out


def check_routes(base):
    with urllib.request.urlopen(base + "/", timeout=5) as r:
        check(r.headers.get_content_type() == "text/html" and b"<canvas id=\"throughput\"" in r.read(),
              "/ is not the dashboard")
    with urllib.request.urlopen(base + "/chart.js", timeout=5) as r:
        check(r.read() == open(CHART_JS, "rb").read(), "/chart.js is not " + CHART_JS)
    with urllib.request.urlopen(base + "/snapshot.json?after=0", timeout=5) as r:
        s = json.loads(r.read())
        check({"endpoint", "time_ns", "counters", "connections", "events"} <= set(s), f"snapshot keys {sorted(s)}")
    try:
        urllib.request.urlopen(base + "/snapshot.json?after=x", timeout=5)
        check(False, "?after=x was accepted")
    except urllib.error.HTTPError as e:
        check(e.code == 400, f"?after=x: HTTP {e.code}")


def main():
    chromium = shutil.which("chromium")
    if not chromium or not os.path.exists(CHART_JS):
        print("SKIP: needs Debian's chromium and libjs-chart.js (apt-get install chromium "
              "libjs-chart.js; scripts/install-deps.sh)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="mroce-dashboard-test-")
    env = dict(os.environ, MROCE_STAT_DIR=os.path.join(tmp, "stat"))
    procs = []
    try:
        # The browser: its own profile, no first-run or network services of its own.
        browser = subprocess.Popen([chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                                    f"--user-data-dir={tmp}/profile", "--remote-debugging-port=0",
                                    "--no-first-run", "--disable-background-networking",
                                    "--disable-component-update", "--disable-sync", "--window-size=1200,900",
                                    # A headless page counts as in the background: keep its
                                    # one-second poll on time.
                                    "--disable-background-timer-throttling",
                                    "--disable-renderer-backgrounding",
                                    "--disable-backgrounding-occluded-windows",
                                    "about:blank"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(browser)
        ws_url = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not ws_url:
            line = browser.stderr.readline()
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                ws_url = m.group(1)
        check(ws_url, "chromium did not start its DevTools endpoint")
        port = int(re.match(r"ws://[^:]+:(\d+)/", ws_url).group(1))
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5))
        page = next(t for t in targets if t["type"] == "page")
        dt = DevTools(WebSocket(page["webSocketDebuggerUrl"]))
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            dt.call(domain)
        oob, metrics = free_port(), free_port()
        server = subprocess.Popen([MROCE, "perf", "-p", str(oob)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(server)
        time.sleep(0.3)
        client = subprocess.Popen([MROCE, "perf", "127.0.0.1", "-p", str(oob), "-D", "40", "--line-rate", "2",
                                   "--metrics", f"127.0.0.1:{metrics}"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(client)
        base = f"http://127.0.0.1:{metrics}"
        for _ in range(50):
            try:
                urllib.request.urlopen(base + "/snapshot.json", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        check_routes(base)

        dt.call("Page.navigate", url=base + "/")
        # The page polls every second; on a loaded 2-core machine (both perf processes
        # poll busily, and ctest runs other tests beside) a poll can take 3 s: wait for 5
        # samples, at most 30 s of the 40 s transfer (ended once the page is checked).
        start = time.monotonic()
        while time.monotonic() - start < 30:
            dt.pump(0.5)
            if json.loads(dt.eval(STATE_JS) or "{}").get("samples", 0) >= 5:
                break
        print(f"waited {time.monotonic() - start:.1f} s")

        bad = problems(dt.events)
        check(not bad, "the page logged errors:\n  " + "\n  ".join(bad))
        state = json.loads(dt.eval(STATE_JS) or "{}")
        print("page state:", json.dumps(state)[:400])
        check(state.get("charts") is True, "Chart.js did not load: " + str(state))
        check(state.get("errors") == [], f"script errors: {state.get('errors')}")
        check(state.get("samples", 0) >= 4, f"only {state.get('samples')} snapshots in 30 s")
        drawn = dt.eval("""JSON.stringify(Object.fromEntries(['throughput','rtt','rates','cwnd'].map(id => {
            const c = Chart.getChart(id);
            return [id, c ? c.data.datasets.map(d => [d.label, d.data.map(p => p.y)]) : null]; })))""")
        drawn = json.loads(drawn)
        for chart, series in drawn.items():
            check(series and all(len(ys) >= 1 for _, ys in series), f"chart {chart} drew nothing: {series}")
        sent = dict(drawn["throughput"]).get("sent", [])
        print("throughput chart, sent (Gbit/s):", [round(v, 3) for v in sent])
        check(len(sent) >= 4, f"throughput chart has {len(sent)} points")
        check(max(sent) > 0 and len(set(sent)) > 1, f"throughput does not change: {sent}")
        rtt = [y for _, ys in drawn["rtt"] for y in ys]
        check(rtt and all(0 < y < 1e6 for y in rtt), f"rtt points out of range: {rtt[:8]}")
        events = dt.eval("document.querySelectorAll('#events tbody tr').length")
        check(events >= 1, "the event table is empty (connection_up at least)")
        if SCREENSHOT:
            shot = dt.call("Page.captureScreenshot", format="png")
            with open(SCREENSHOT, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        if client.poll() is not None:  # (stderr is read only then: it blocks while perf runs)
            check(False, "the transfer ended before the page was read: " + client.stderr.read())
        print("ok: dashboard")
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
