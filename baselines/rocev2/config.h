// baselines/rocev2/config.h — every tunable of a RoCEv2 engine, with its default and why.
#pragma once

#include <cstdint>
#include <string>

#include "baselines/rocev2/dcqcn.h"
#include "baselines/rocev2/packet.h"
#include "util/time.h"

namespace mroce::rocev2 {

// The PSN space is 2^24 and a receiver tells old from new by serial arithmetic over half
// of it, so no more than this many packets may be unacknowledged.
inline constexpr uint32_t kMaxWindowPackets = 1u << 22;
// Traffic classes are the eight 802.1Q priorities that PFC pauses one by one.
inline constexpr uint8_t kMaxTrafficClass = 7;

// How a QP picks its NIC port (plane), once, when it is bound.
enum class PortChoice : uint8_t {
    // src_port % num_local_ports: independent flows hashed onto the planes, so a pair's
    // k QPs may crowd one plane and leave another idle.
    kSourcePort,
    // The host's QPs in creation order (QP number % num_local_ports), as a library that
    // stripes one pair's QPs over its NICs binds them: QPs created together for a pair,
    // k per port, put k on every plane.
    kRoundRobin,
};

struct RoceConfig {
    uint16_t port = kUdpPort;  // UDP port the engine receives on (peers send to it)
    uint32_t mtu = 4096;       // payload bytes per packet (the path MTU of IB terms)
    uint16_t pkey = kDefaultPkey;
    // NIC ports (planes) of the host. A QP is one flow: all its packets leave through one
    // port, chosen by port_choice: by default its UDP source port (src_port %
    // num_local_ports), so a host's QPs spread over the planes the way independent flows
    // would, each staying on one.
    uint16_t num_local_ports = 1;
    PortChoice port_choice = PortChoice::kSourcePort;
    // The traffic class (switch priority, PFC class; higher = more urgent) a new QP's
    // packets leave in; RoceEngine::set_traffic_class changes it per QP (a QP's service
    // level). A QP's ACKs, NAKs and CNPs serve that QP alone, so they leave in its class,
    // the rule MetaRoCE's [STREAM-14] gives for a connection of one stream.
    uint8_t traffic_class = 0;

    // Requester: at most this many packets unacknowledged per QP (go-back-N window).
    uint32_t window_packets = kMaxWindowPackets;
    // Responder: ACK after this many in-order packets, on the AckReq bit (set on the last
    // packet of every message), or ack_delay after the first unacknowledged packet.
    uint32_t ack_every = 4;
    Duration ack_delay = 2us;

    // Requester: retransmit from the oldest unacknowledged PSN when nothing was
    // acknowledged for this long (the IB "local ACK timeout"), up to retry_count times in
    // a row; then the work request fails with kRetryExceeded and the QP goes to error.
    Duration retransmit_timeout = 1ms;
    uint32_t retry_count = 7;
    // RNR NAK: wait rnr_delay, then resend; rnr_retry = 7 means forever (as in verbs).
    Duration rnr_delay = 100us;
    uint32_t rnr_retry = 7;

    // The first PSN of every QP (both sides must agree; IB exchanges it out of band).
    uint32_t initial_psn = 0;

    // IBTA: after a NAK(PSN sequence error) the responder stays silent until the expected
    // PSN arrives, so a lost retransmission costs a retransmit_timeout. With renak on, a
    // gap that reappears after the requester went back (an out-of-order PSN at or below
    // one already seen since the NAK) gets a new NAK. Off = IBTA behaviour.
    bool renak_after_rewind = false;

    DcqcnConfig dcqcn;

    uint32_t max_qps = 1u << 16;
    uint32_t max_outstanding_wrs = 1u << 16;  // per QP, send and receive each
};

// config_error names the first invalid setting in one line, or returns "" when usable.
inline std::string config_error(const RoceConfig& c) {
    if (c.mtu < 64 || c.mtu > 9000) return "mtu must be 64..9000 bytes";
    if (c.num_local_ports < 1) return "num_local_ports must be at least 1";
    if (c.traffic_class > kMaxTrafficClass) return "traffic_class must be 0..7";
    if (c.window_packets < 1 || c.window_packets > kMaxWindowPackets)
        return "window_packets must be 1.." + std::to_string(kMaxWindowPackets);
    if (c.ack_every < 1) return "ack_every must be at least 1";
    if (c.ack_delay < Duration::zero()) return "ack_delay must not be negative";
    if (c.retransmit_timeout <= Duration::zero()) return "retransmit_timeout must be positive";
    if (c.retry_count > 7) return "retry_count must be 0..7";
    if (c.rnr_delay <= Duration::zero()) return "rnr_delay must be positive";
    if (c.rnr_retry > 7) return "rnr_retry must be 0..7";
    if (c.initial_psn > kPsnMask) return "initial_psn must fit in 24 bits";
    if (c.max_qps < 1 || c.max_qps > (1u << 23)) return "max_qps must be 1..2^23";
    if (c.max_outstanding_wrs < 1) return "max_outstanding_wrs must be at least 1";
    if (const char* e = dcqcn_config_error(c.dcqcn); *e != '\0') return e;
    return "";
}

}  // namespace mroce::rocev2
