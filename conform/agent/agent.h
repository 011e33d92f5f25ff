// conform/agent/agent.h — the conformance agent: serves the control protocol of
// docs/conformance.md on top of the native API (api::Device over real UDP), so that
// `mroce conform` can make this implementation register memory, post work and report
// completions and counters while the suite speaks the wire protocol to it.
//
// Another implementation is put under test by implementing the same protocol; nothing here
// is needed by the suite itself (conform/ may not include conform/agent/).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/device.h"
#include "util/address.h"

namespace mroce::conform {

// Agent holds one Device and every object the controller created on it. Not thread-safe:
// the server calls it from one thread, one request at a time.
class Agent {
public:
    // udp is the address the Device binds (port 0: ephemeral; reset keeps the port bound).
    // ack_with_reverse_data: the engine's [ACK-12] option of that name (off: the spec's
    // default), under which it coalesces an ACK with its DATA ([WIRE-10]). short_acks: the
    // engine announces SHORT_ACK ([ACK-21]; on by default). compact_data: the engine
    // announces COMPACT_DATA ([DATA-9]; off by default).
    explicit Agent(Address udp, bool ack_with_reverse_data = false, bool short_acks = true,
                   bool compact_data = false);
    ~Agent();
    Agent(const Agent&) = delete;
    Agent& operator=(const Agent&) = delete;

    // open creates the Device. Returns false with a one-line reason in *why on failure.
    bool open(std::string* why);
    // handle answers one request (a JSON object with "cmd"); the answer always has "ok",
    // and "error" (one line) when ok is false. Never throws.
    nlohmann::json handle(const nlohmann::json& request);
    Address udp_address() const;

private:
    struct Buffer;  // registered memory: the bytes and their region
    struct Queue;   // a queue pair and its completion queue

    nlohmann::json dispatch(const std::string& cmd, const nlohmann::json& r);
    nlohmann::json hello();
    nlohmann::json reset();
    nlohmann::json alloc_pd();
    nlohmann::json reg_mr(const nlohmann::json& r);
    nlohmann::json write_mr(const nlohmann::json& r);
    nlohmann::json read_mr(const nlohmann::json& r);
    nlohmann::json dereg_mr(const nlohmann::json& r);
    nlohmann::json create_qp(const nlohmann::json& r);
    nlohmann::json connect_qp(const nlohmann::json& r);
    nlohmann::json reset_qp(const nlohmann::json& r);
    nlohmann::json destroy_qp(const nlohmann::json& r);
    nlohmann::json post_recv(const nlohmann::json& r);
    nlohmann::json post_send(const nlohmann::json& r);
    nlohmann::json poll_cq(const nlohmann::json& r);
    nlohmann::json events();
    nlohmann::json stats(const nlohmann::json& r);
    void close_all();

    Buffer& buffer(const nlohmann::json& r);
    Queue& queue(const nlohmann::json& r);
    api::ProtectionDomain& pd(const nlohmann::json& r);

    Address udp_;
    bool ack_with_reverse_data_ = false;
    bool short_acks_ = true;
    bool compact_data_ = false;
    std::unique_ptr<api::Device> dev_;
    std::map<uint32_t, std::unique_ptr<api::ProtectionDomain>> pds_;
    uint32_t default_pd_ = 0;
    std::map<uint32_t, std::unique_ptr<Buffer>> buffers_;
    uint32_t next_buffer_ = 1;
    std::map<uint32_t, std::unique_ptr<Queue>> queues_;  // by queue pair number at creation
};

struct AgentOptions {
    std::string listen = "127.0.0.1:0";  // control protocol (TCP)
    std::string udp = "127.0.0.1:0";     // the Device's endpoint (UDP)
    bool ack_with_reverse_data = false;  // --ack-with-reverse-data ([ACK-12], [WIRE-10])
    bool short_acks = true;              // off with --no-short-acks ([ACK-21])
    bool compact_data = false;           // on with --compact-data ([DATA-9])
};

// run_agent binds both addresses, prints one line
// "conform-agent: control HOST:PORT udp HOST:PORT" on stdout, and serves controllers one
// after another until killed. Returns 2 for bad options, 1 if a socket cannot be set up.
int run_agent(const AgentOptions& opts);

}  // namespace mroce::conform
