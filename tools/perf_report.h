// tools/perf_report.h — results of `mroce perf`: perftest's tables on stdout, perftest's
// JSON keys ({"test_info": {...}, "results": [{...}, ...]}, one row per size) with our
// counters added.
//
// A result is built once, as JSON, by the side that measured it (the client); the server
// receives the same object over the control connection and prints it, so both sides print
// the same numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/device.h"
#include "tools/perf_oob.h"
#include "tools/perf_options.h"

namespace mroce::tools::perf {

// bw_result: perftest's BW keys for `iterations` messages of `size` bytes (per queue pair
// times qps = messages), moved in `seconds`. `completion_ns` are the completion times (ns
// from the start, in order); BW_peak is the best rate over any tenth of the run's time. Bandwidths are
// in the table's unit: MB/sec (2^20 bytes) or, with report_gbits, Gb/sec (10^9 bits).
Json bw_result(const Options& o, uint32_t size, uint64_t messages, uint64_t bytes, double seconds,
               const std::vector<int64_t>& completion_ns);

// lat_result: perftest's latency keys from one-way samples in microseconds (RTT/2), by
// perftest's rules: t_typical is the median after dropping the 2 largest samples, and
// percentile p is the sample of rank ceil(n * p), each exact (ns resolution), as
// perftest's; t_min, t_max, t_avg, t_stdev too.
Json lat_result(uint32_t size, const std::vector<double>& samples_usec);

// counters_json: the engine's counters accumulated between two reports of one connection
// (retransmits, spurious retransmits, ECN marks, per-path packets) as JSON.
Json counters_json(const api::ConnectionReport& before, const api::ConnectionReport& after);

// datapath_json: the UDP datapath's counters between two snapshots (datagrams, system
// calls, GSO/GRO super-packets, drops).
Json datapath_json(const datapath::UdpStats& before, const datapath::UdpStats& after);

// driver_json: the driver loop's counters between two snapshots. Passes that moved nothing
// are the polling of an empty socket (one recvmmsg each), which is what separates the
// protocol's cost from --raw's on loopback.
Json driver_json(const api::DriverStats& before, const api::DriverStats& after);
// endpoint_json: the endpoint's own counters between two snapshots: datagrams dropped
// before any connection took them (garbage, forged tokens, unknown connections, refused
// or malformed handshakes).
Json endpoint_json(const core::EndpointStats& before, const core::EndpointStats& after);

// test_info: the "test_info" object of the JSON output.
Json test_info(const Options& o, const std::string& local, const std::string& remote,
               const std::string& offload);

// print_banner prints perftest's dashed line, title and key/value block, then the address
// lines of both sides.
void print_banner(const Options& o, bool server, const std::string& offload,
                  const std::string& local_line, const std::string& remote_line);
// print_table_head prints the BW or LAT column header.
void print_table_head(const Options& o);
// print_row prints one result row (a bw_result or lat_result object).
void print_row(const Options& o, const Json& result);
// print_counters prints retransmits, ECN marks and the per-path table of one result (its
// "counters" object, if any) after the table.
void print_counters(const Json& result);
// print_sweep_summary prints one line for a sweep over sizes (-a): retransmissions,
// spurious ones and datagrams lost, summed over every size.
void print_sweep_summary(const std::vector<Json>& results);
// print_rule prints perftest's 87-dash line.
void print_rule();

}  // namespace mroce::tools::perf
