// obs/dashboard.cc — see dashboard.h. The page keeps at most kKeep points per series and
// kMaxSeries series per chart (the first connections and paths), so a long watch of a
// busy endpoint stays light. It publishes what it drew in <pre id="state"> (JSON: samples
// taken, points per chart, last throughput, script errors) for tests/obs/dashboard_test.py.
#include "obs/dashboard.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace mroce::obs {

namespace {

constexpr const char* kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mroce dashboard</title>
<style>
body { font: 13px sans-serif; margin: 1em; color: #222; }
h1 { font-size: 18px; margin: 0 0 .3em 0; }
h2 { font-size: 14px; margin: .6em 0 .2em 0; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
.panel { height: 260px; position: relative; }
#status { color: #555; }
table { border-collapse: collapse; font: 12px monospace; }
td, th { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: left; }
</style>
<script src="/chart.js"></script>
</head>
<body>
<h1>mroce <span id="endpoint"></span></h1>
<p id="status">waiting for the first snapshot</p>
<div class="grid">
  <div><h2>Throughput (Gbit/s, DATA payload)</h2><div class="panel"><canvas id="throughput"></canvas></div></div>
  <div><h2>Path RTT, smoothed (&micro;s)</h2><div class="panel"><canvas id="rtt"></canvas></div></div>
  <div><h2>Window rate, pacing rate, rate hint (Gbit/s)</h2><div class="panel"><canvas id="rates"></canvas></div></div>
  <div><h2>Congestion window per path (KiB)</h2><div class="panel"><canvas id="cwnd"></canvas></div></div>
</div>
<h2>Events (newest first)</h2>
<table id="events"><thead><tr><th>time</th><th>event</th><th>connection</th><th>details</th></tr></thead><tbody></tbody></table>
<pre id="state" hidden></pre>
<script>
"use strict";
const POLL_MS = 1000, KEEP = 300, MAX_SERIES = 16, MAX_EVENTS = 50;
const state = { samples: 0, errors: [], points: {}, tx_gbps: [], rx_gbps: [], charts: false };
window.addEventListener("error", (e) => { state.errors.push(String(e.message)); publish(); });

const charts = {};
function makeChart(id, unit) {
  if (typeof Chart === "undefined") return;
  charts[id] = new Chart(document.getElementById(id), {
    type: "line",
    data: { datasets: [] },
    options: {
      animation: false, parsing: false, normalized: true, maintainAspectRatio: false,
      elements: { point: { radius: 0 } },
      scales: { x: { type: "linear", title: { display: true, text: "s" } },
                y: { beginAtZero: true, title: { display: true, text: unit } } },
      plugins: { legend: { labels: { boxWidth: 10 } } },
    },
  });
}
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                "#bcbd22", "#17becf"];
function point(id, label, x, y) {
  state.points[id] = (state.points[id] || 0) + 1;
  const c = charts[id];
  if (!c) return;
  let d = c.data.datasets.find((s) => s.label === label);
  if (!d) {
    if (c.data.datasets.length >= MAX_SERIES) return;
    const color = COLORS[c.data.datasets.length % COLORS.length];
    d = { label, data: [], borderColor: color, backgroundColor: color, borderWidth: 1.5 };
    c.data.datasets.push(d);
  }
  d.data.push({ x, y });
  if (d.data.length > KEEP) d.data.shift();
}
function publish() {
  document.getElementById("state").textContent = JSON.stringify(state);
}

let prev = null, t0 = null, lastSeq = 0;
function take(s) {
  const t = s.time_ns / 1e9;
  if (t0 === null) t0 = t;
  const x = +(t - t0).toFixed(3);
  document.getElementById("endpoint").textContent = s.endpoint;
  if (prev && t > prev.t) {
    const dt = t - prev.t;
    const tx = (s.counters.tx_data_bytes - prev.c.tx_data_bytes) * 8 / dt / 1e9;
    const rx = (s.counters.rx_data_bytes - prev.c.rx_data_bytes) * 8 / dt / 1e9;
    point("throughput", "sent", x, tx);
    point("throughput", "received", x, rx);
    state.tx_gbps.push(+tx.toFixed(6));
    state.rx_gbps.push(+rx.toFixed(6));
    if (state.tx_gbps.length > 20) { state.tx_gbps.shift(); state.rx_gbps.shift(); }
  }
  prev = { t, c: s.counters };
  for (const c of s.connections.slice(0, 4)) {
    const name = c.connection + " " + c.peer;
    point("rates", name + " window", x, c.window_rate_bps / 1e9);
    point("rates", name + " pacing", x, c.pacing_rate_bps / 1e9);
    point("rates", name + " hint", x, c.rate_hint_mbps / 1e3);
    for (const p of c.paths) {
      const label = c.connection + "/" + p.path;
      if (p.srtt_ns > 0) point("rtt", label, x, p.srtt_ns / 1e3);
      point("cwnd", label, x, p.cwnd_bytes / 1024);
    }
  }
  const body = document.querySelector("#events tbody");
  for (const e of s.events) {
    lastSeq = Math.max(lastSeq, e.seq);
    const details = Object.entries(e).filter(([k]) => !["seq", "time_ns", "event", "endpoint", "connection"].includes(k))
      .map(([k, v]) => k + "=" + v).join(" ");
    const row = body.insertRow(0);
    for (const v of [new Date(e.time_ns / 1e6).toISOString().slice(11, 23), e.event, e.connection, details])
      row.insertCell().textContent = v;
    while (body.rows.length > MAX_EVENTS) body.deleteRow(body.rows.length - 1);
  }
  for (const c of Object.values(charts)) c.update("none");
  state.samples++;
  document.getElementById("status").textContent = (state.charts ? "" :
    "Chart.js is not installed on the host (Debian: apt install libjs-chart.js); numbers only. ") +
    s.connections.length + " connection(s), " + (s.counters.retransmits || 0) + " retransmits, updated " +
    new Date().toLocaleTimeString();
  publish();
}
async function poll() {
  try {
    const r = await fetch("/snapshot.json?after=" + lastSeq, { cache: "no-store" });
    if (r.ok) take(await r.json());
    else document.getElementById("status").textContent = "snapshot: HTTP " + r.status;
  } catch (e) {
    document.getElementById("status").textContent = "the process is gone (" + e.message + ")";
  }
  setTimeout(poll, POLL_MS);
}
state.charts = typeof Chart !== "undefined";
makeChart("throughput", "Gbit/s");
makeChart("rtt", "\u00b5s");
makeChart("rates", "Gbit/s");
makeChart("cwnd", "KiB");
poll();
</script>
</body>
</html>
)HTML";

}  // namespace

const char* dashboard_html() { return kPage; }

std::string chart_js_path() {
    const char* env = std::getenv("MROCE_CHARTJS");
    return env && *env ? env : kChartJsPath;
}

std::optional<std::string> chart_js() {
    std::ifstream f(chart_js_path(), std::ios::binary);
    if (!f) return std::nullopt;
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

}  // namespace mroce::obs
