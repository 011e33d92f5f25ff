// baselines/rocev2/queue_pair.h — the state of one reliable-connected QP: requester
// (go-back-N sender with DCQCN pacing) and responder (PSN-ordered receiver). Internal to
// the engine; applications use RoceEngine.
//
// PSNs are kept as 64-bit counters that start at 2^32 + initial_psn, so they never wrap
// and never go below zero; the wire carries their low 24 bits (psn_unwrap maps back).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "baselines/rocev2/dcqcn.h"
#include "baselines/rocev2/packet.h"
#include "core/work.h"
#include "util/address.h"
#include "util/time.h"

namespace mroce::rocev2 {

inline constexpr uint64_t kPsnBase = uint64_t{1} << 32;

struct QpStats {
    // requester
    uint64_t data_packets_sent = 0;
    uint64_t data_bytes_sent = 0;       // payload bytes
    uint64_t retransmitted_packets = 0;  // data packets sent again after a go-back
    uint64_t go_back_nak = 0;            // rewinds caused by NAK(PSN sequence error)
    uint64_t timeouts = 0;               // rewinds caused by the retransmit timeout
    uint64_t rnr_naks_received = 0;
    uint64_t acks_received = 0;
    uint64_t naks_received = 0;
    uint64_t cnps_received = 0;
    uint64_t stale_acks = 0;             // ACK/NAK for a PSN outside what is in flight
    // responder
    uint64_t data_packets_received = 0;  // in-sequence and placed
    uint64_t duplicates = 0;             // PSN below the expected one: dropped, re-ACKed
    uint64_t out_of_sequence = 0;        // PSN above the expected one: dropped
    uint64_t naks_sent = 0;              // PSN sequence error NAKs
    uint64_t rnr_naks_sent = 0;
    uint64_t fatal_naks_sent = 0;        // invalid request / remote access
    uint64_t acks_sent = 0;
    uint64_t ecn_marked = 0;             // CE-marked packets received
    uint64_t cnps_sent = 0;
    uint64_t malformed = 0;              // wrong payload size for the opcode: dropped
    uint64_t bytes_placed = 0;           // payload bytes of in-sequence packets, placed once
};

// A posted send work request and where its packets sit in the PSN space.
struct TxWr {
    core::SendWr wr;
    const std::byte* src = nullptr;  // resolved local buffer
    uint64_t first_psn = 0;
    uint32_t packets = 0;  // >= 1 (a zero-length message is one empty packet)
    uint64_t end_psn() const { return first_psn + packets; }
};

struct RxPost {
    core::RecvWr wr;
    std::byte* dst = nullptr;
};

// What the responder owes the requester: nothing, an ACK, or a NAK of some kind, in
// rising precedence (RoceEngine::respond keeps the highest pending one).
enum class Response : uint8_t { kNone, kAck, kNakSequence, kRnrNak, kNakInvalid, kNakAccess };

struct QueuePair {
    explicit QueuePair(const DcqcnConfig& dc) : dcqcn(dc), cnp_limiter(dc.cnp_interval) {}

    uint32_t qpn = 0;
    uint32_t pd = 0;
    bool bound = false;
    bool failed = false;  // error state: every work request is flushed
    Address peer;         // the remote engine's IP and UDP port
    uint32_t remote_qpn = 0;
    uint16_t src_port = 0;  // fixed per QP: one ECMP route for its whole life
    uint16_t local_port = 0;  // NIC port (plane), fixed when bound (RoceConfig::port_choice)
    uint8_t traffic_class = 0;  // every packet of the QP, data and control (config.h)

    // ---- requester ----
    std::deque<TxWr> sq;    // posted and not yet completed, in PSN order
    size_t cursor = 0;      // index in sq of the WR holding next_psn
    uint64_t next_psn = 0;  // next PSN to (re)send
    uint64_t una = 0;       // oldest unacknowledged PSN
    uint64_t sent_high = 0; // one past the highest PSN ever sent
    uint64_t end_psn = 0;   // one past the last PSN assigned to a posted WR
    Time rto_deadline = kNever;
    uint32_t retries = 0;   // timeouts in a row without progress
    Time rnr_until = kNever;
    uint32_t rnr_retries = 0;
    int64_t next_send_ps = 0;  // pacing: earliest time of the next data packet (ps)
    DcqcnSender dcqcn;

    // ---- responder ----
    std::deque<RxPost> rq;
    uint64_t epsn = 0;     // expected PSN
    uint32_t msn = 0;      // messages completed (24 bits on the wire)
    // The message being received (packets arrive in PSN order, so at most one).
    bool in_message = false;
    bool message_is_write = false;
    std::byte* message_dst = nullptr;  // where the next payload byte goes
    uint64_t message_capacity = 0;     // bytes the destination can take
    uint64_t message_offset = 0;       // bytes placed so far
    bool nak_outstanding = false;      // one NAK per gap
    uint64_t highest_ooo_since_nak = 0;
    uint32_t unacked = 0;
    Time ack_deadline = kNever;
    Response response = Response::kNone;
    uint64_t response_psn = 0;
    bool cnp_pending = false;
    CnpLimiter cnp_limiter;

    bool in_ready = false;
    bool deadline_dirty = false;  // in RoceEngine::dirty_
    Time armed_deadline = kNever; // its entry in RoceEngine::timers_ (a lower bound)
    QpStats stats;
};

}  // namespace mroce::rocev2
