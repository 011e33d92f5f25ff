// tools/perf_side.h — one side (client or server) of a `mroce perf` run over one
// transport: MetaRoCE through api::Device (perf_rdma.cc) or plain UDP through the same
// datapath (perf_raw.cc). tools/perf.cc drives the control exchange and calls these.
//
// Per message size: the client sends "run", the server answers "go" and serves until the
// client's "end"; the server answers "done" with what it measured, and the client builds
// the result (finish) and sends it back so that both print the same row.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tools/perf_oob.h"
#include "tools/perf_options.h"

namespace mroce::tools::perf {

class Side {
public:
    virtual ~Side() = default;
    // setup describes this side to the peer (UDP address, queue pair numbers, rkey, buffer
    // address); connect takes the peer's description. Errors: false with `error` set.
    virtual Json setup() = 0;
    virtual bool connect(const Json& peer, std::string& error) = 0;
    // Lines for the banner: this side's and the peer's address, QPN, rkey, buffer.
    virtual std::string local_line() const = 0;
    virtual std::string remote_line() const = 0;
    // offload names the datapath's offloads in use ("GSO+GRO", "none", ...).
    virtual std::string offload() const = 0;
    // idle moves the engine along while the control connection is quiet.
    virtual void idle() = 0;

    // Client: run one size; returns the client's measurements. finish builds the result
    // row (perf_report.h) from them and the server's "done" measurements.
    virtual std::optional<Json> run(uint32_t size, std::string& error) = 0;
    virtual Json finish(uint32_t size, const Json& mine, const Json& server) = 0;
    // Server: serve one size until the client's "end" arrives on `oob`; returns the
    // server's measurements.
    virtual std::optional<Json> serve(uint32_t size, std::string& error) = 0;
    // Server: make ready for one size before the client is told to go (--check fills the
    // data a READ fetches).
    virtual void prepare(uint32_t /*size*/) {}
};

// offload_name: "GSO+GRO", "GSO", "GRO", "none" or "none (--no-offload)".
std::string offload_name(bool gso, bool gro, bool asked);

// make_rdma_side / make_raw_side open the transport on `oob`'s local IP. Errors: nullptr
// with `error` set to one line.
std::unique_ptr<Side> make_rdma_side(const Options& o, Oob& oob, bool server, std::string& error);
std::unique_ptr<Side> make_raw_side(const Options& o, Oob& oob, bool server, std::string& error);

}  // namespace mroce::tools::perf
