// obs/dashboard.h — the live dashboard the /metrics listener serves at "/" (issue 18,
// item 4): one self-contained HTML page that polls /snapshot.json (obs::to_json) every
// second and draws throughput, per-path smoothed RTT and congestion windows, each
// connection's window rate, pacing rate and rate hint, and the event log, with Chart.js
// served by the same listener from Debian's libjs-chart.js (no network access).
#pragma once

#include <optional>
#include <string>

namespace mroce::obs {

// dashboard_html: the page (static; all data comes from /snapshot.json).
const char* dashboard_html();

// Where the listener reads Chart.js from: $MROCE_CHARTJS, else Debian's libjs-chart.js.
inline constexpr const char* kChartJsPath = "/usr/share/javascript/chart.js/chart.min.js";
std::string chart_js_path();
// chart_js: the library's text, or nullopt when it is not installed (the page then shows
// the numbers without charts and says what to install).
std::optional<std::string> chart_js();

}  // namespace mroce::obs
