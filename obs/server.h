// obs/server.h — how a running process is observed from outside: a Unix socket for
// `mroce stat` (always, unless MROCE_STAT=0) and an opt-in HTTP listener serving /metrics
// in the Prometheus text format (MROCE_METRICS=ADDR:PORT, or `mroce perf --metrics`).
//
// Both answer from a Source, a function that takes a snapshot (obs/snapshot.h) when asked:
// the owner (api::Device) takes it under its engine lock, which a request holds for the
// copy only; formatting happens outside the lock, on the server's threads, so the engine's
// thread never waits for a client or the network.
//
// The Unix socket is <stat_dir()>/<pid>-<n>.sock (n = 0, 1, ... per endpoint of the
// process). A client connects, writes one request line and reads the answer until the
// server closes:
//   "info"          -> one JSON object: pid, program, endpoint, connections
//   "json [SEQ]"    -> to_json(snapshot), with the events after SEQ (0: all kept)
//   "prometheus"    -> to_prometheus(snapshot)
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "obs/snapshot.h"

namespace mroce::obs {

// Source takes a snapshot with the events after `events_after`.
using Source = std::function<Snapshot(uint64_t events_after)>;

// stat_dir: where stat sockets live: $MROCE_STAT_DIR, else $XDG_RUNTIME_DIR/mroce, else
// /run/mroce for root, else /tmp/mroce-<uid>.
std::string stat_dir();

// ListenAddress: where the HTTP listener binds: a numeric IPv4 or IPv6 host and a port
// (0 = any free port).
struct ListenAddress {
    std::string host;
    uint16_t port = 0;
};
// parse_listen_address: "ADDR:PORT" (a numeric IPv4 address or [IPv6]); nullopt if
// malformed.
std::optional<ListenAddress> parse_listen_address(const std::string& s);

// StatServer: the servers of one endpoint. Its threads call the Source; destroying it
// stops them (the Unix socket file is removed) before it returns.
class StatServer {
public:
    // start opens the Unix socket (when `stat_socket`) and the HTTP listener (when
    // `metrics` is set), each with its thread. Error: nullptr, and *error names what
    // failed (the directory, the bind).
    static std::unique_ptr<StatServer> start(Source source, bool stat_socket,
                                             const std::optional<ListenAddress>& metrics,
                                             std::string* error);
    ~StatServer();
    StatServer(const StatServer&) = delete;
    StatServer& operator=(const StatServer&) = delete;

    // socket_path: the Unix socket's path ("" without one).
    const std::string& socket_path() const { return path_; }
    // metrics_port: the port the HTTP listener bound (0 without one).
    uint16_t metrics_port() const { return http_port_; }

private:
    StatServer() = default;
    void serve_unix();
    std::string answer(const std::string& request);

    Source source_;
    std::string path_;
    int listen_fd_ = -1;
    int stop_fd_ = -1;  // eventfd that ends serve_unix
    std::thread unix_thread_;
    struct Http;
    std::unique_ptr<Http> http_;
    uint16_t http_port_ = 0;
};

// Client side (`mroce stat`).
// list_sockets: the stat sockets in stat_dir() that answer, sorted by name; stale ones
// (nobody listening) are removed.
std::vector<std::string> list_sockets();
// request: connects to a stat socket, sends `line`, returns the whole answer; nullopt if
// it cannot connect or read (timeout_ms for each step).
std::optional<std::string> request(const std::string& socket_path, const std::string& line,
                                   int timeout_ms = 2000);

}  // namespace mroce::obs
