// tools/perf_options.h — the options of `mroce perf` (tools/perf.cc) and what the two
// sides agree on. perftest's flags keep perftest's letters and meanings (-s -n -D -q -a -p
// -t --report_gbits -F); transport options are long flags only (--paths, --verb, --bw,
// --lat, --raw, --json, --no-offload, --cc, --path-selection, --no-hint, --no-pacing,
// --integrity, --tc, --dscp-map, --line-rate), so no perftest letter means something else
// here, with one exception: -i is iperf3's report interval (issue 18), as users of both
// expect; perftest's -i picks an InfiniBand port, which has no meaning over UDP. perftest's
// --out_json and --out_json_file name the JSON output as --json does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mroce::tools::perf {

// Verb is the RDMA operation measured. READ and atomics (FETCH_ADD, 8 bytes) are
// one-sided: the server only answers, and latency is the whole round trip, as in
// ib_read_lat / ib_atomic_lat.
enum class Verb : uint8_t { kWrite, kSend, kRead, kAtomic };

enum class Mode : uint8_t { kBandwidth, kLatency };

inline constexpr uint16_t kDefaultOobPort = 18515;  // perftest's
inline constexpr uint32_t kMaxSize = 1u << 23;      // -a sweeps 2 .. 2^23, as perftest
// Receive socket buffer of both transports: above the most a connection keeps in flight
// (8 paths x 1 MiB windows), so a receiver that falls behind for a moment does not drop.
// Root gets it (SO_RCVBUFFORCE); otherwise net.core.rmem_max caps it.
inline constexpr int kRecvBufferBytes = 32 << 20;

// Options: one run's parameters. The client sends them to the server over the out-of-band
// connection, so both sides use the client's values.
struct Options {
    std::string host;  // empty: this side is the server
    uint16_t port = kDefaultOobPort;
    Verb verb = Verb::kWrite;
    Mode mode = Mode::kBandwidth;
    bool raw = false;         // plain UDP, same batching and receive copy, no protocol
    bool all_sizes = false;   // -a
    uint32_t size = 0;        // -s; 0: perftest's default (65536 for bw, 2 for lat)
    uint64_t iterations = 0;  // -n per queue pair; 0: default (5000 write bw, else 1000)
    double duration_s = 0;    // -D; > 0 runs for that long instead of -n
    uint32_t qps = 1;         // -q
    uint32_t tx_depth = 128;  // -t: outstanding work requests per queue pair
    uint32_t paths = 8;       // --paths
    uint32_t window_kib = 0;  // --window-kib: bytes in flight per path; 0: the engine's
    std::string cc;           // --cc fixed|aimd; empty: the Device's default
    // --path-selection round_robin|room: new data's path ([PATH-10], [PATH-14]); empty:
    // the engine's default.
    std::string path_selection;
    // --path-run N: consecutive segments a path takes per round-robin turn ([PATH-10],
    // path_run_segments); 0: the Device's default (api/udp_tuning.h).
    uint32_t path_run = 0;
    bool rate_hint = true;    // --no-hint: the receiver computes no rate hint ([CC-11])
    bool pacing = true;       // --no-pacing: ack-clocked only ([CC-17])
    bool integrity = false;   // --integrity: announce INTEGRITY ([INT-7]; off by default)
    // --check: every message carries a pattern of (queue pair, message, offset) and its
    // receiver (for READ, the requester) verifies every byte (tools/perf_check.h).
    bool check = false;
    uint32_t tc = 0;          // --tc: every queue pair's traffic class (service level), 0..7
    // --dscp-map: the DSCP of each of the 8 traffic classes; empty: the datapath's default
    // (class c -> 8c, CS0..CS7; datapath/udp/README.md).
    std::vector<int> dscp_map;
    // --line-rate: the port rate the receiver's inbound capacity derives from ([CC-12]), in
    // Gbit/s; 0: the engine's default (100 Gbit/s).
    double line_rate_gbps = 0;
    // --plane-ifs: one interface per plane, this side only (not sent to the peer).
    std::vector<std::string> plane_ifs;
    bool report_gbits = false;
    bool offload = true;      // GSO/GRO (--no-offload turns them off)
    std::string json_path;    // --json FILE, --out_json_file FILE, --out_json (client only)
    double interval_s = 0;    // -i: a row every this many seconds while running (client)
    // --metrics ADDR:PORT: serve Prometheus /metrics from this side's device (this side
    // only, not sent to the peer; docs/observability.md).
    std::string metrics;
    // --busy-poll: both sides spin on their sockets while they wait for the peer (lower
    // latency, a core each); otherwise a waiting side polls for kSpin and then sleeps on
    // the device's wake fds (issue 19).
    bool busy_poll = false;
    // --stages: both sides stamp each stage of their work (api/stage_trace.h) and the
    // client's JSON carries the stamps of the latency run ("stages", "server_stages") for
    // scripts/latency-stages.py.
    bool stages = false;
    // --threads N: this side's device runs N shards, each with its own progress thread
    // (api::DeviceConfig::threads, docs/design.md §12); this side only, not sent to the
    // peer. 1: one engine driven by the tool's own thread (manual progress), as before.
    uint32_t threads = 1;

    // The sizes to run, in order.
    std::vector<uint32_t> sizes() const;
    uint64_t iterations_or_default() const;
};

const char* to_string(Verb v);
// verb_unavailable returns a one-line reason when the verb cannot run with these options,
// or nullopt.
std::optional<std::string> verb_unavailable(Verb v, bool raw);
// parse_verb reads "write", "send", "read" or "atomic".
std::optional<Verb> parse_verb(const std::string& text);

// test_name is perftest's title: "RDMA_Write BW", "Send Lat", ...
std::string test_name(const Options& o);

// check_cc_options returns a one-line error naming the flag when --tc, --dscp-map or
// --line-rate is out of range (for the server: as the client sent them), or "".
std::string check_cc_options(const Options& o);
// check_check_options returns a one-line error when --check cannot run with these
// options (for the server: as the client sent them), or "".
std::string check_check_options(const Options& o);
// kCheckMaxBytes bounds the buffer --check lays out on each side (per-message slots).
inline constexpr uint64_t kCheckMaxBytes = uint64_t{1} << 30;
// check_target_bytes: with --check, a WRITE bandwidth run gives every message of every
// queue pair its own slot at the server (its target learns of no WRITE: it verifies them
// all after the run), so it needs -q x -n x -s bytes there.
uint64_t check_target_bytes(const Options& o, uint32_t size);

// check_writable returns "" when a file can be written at `path` ("" itself: nothing to
// write), or the reason it cannot (the system's message). It leaves no file behind.
std::string check_writable(const std::string& path);

}  // namespace mroce::tools::perf
