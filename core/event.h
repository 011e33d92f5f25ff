// core/event.h — what an engine reports to its driver: completions and state changes.
#pragma once

#include <cstdint>

#include "util/address.h"

namespace mroce::core {

// Status of a completion (CQE). Typed so an operator can tell causes apart.
enum class Status : uint8_t {
    kSuccess = 0,
    kLocalLength,        // message longer than the posted receive / bad local length
    kLocalProtection,    // lkey, PD or bounds check failed on a local buffer
    kRemoteAccess,       // peer answered NACK(kRemoteAccess)
    kRemoteInvalid,      // peer answered NACK(kInvalidRequest)
    kRnrRetryExceeded,   // peer had no receive posted, retries used up
    kRetryExceeded,      // a packet was retransmitted more than the retry limit
    kPeerDead,           // no path answered for the dead-peer timeout
    kFlushed,            // the stream or connection failed or closed before this ran
    kVersionMismatch,    // the peer speaks another wire version ([VER-1])
};
const char* to_string(Status s);

enum class WorkOpcode : uint8_t {
    kSend,
    kSendImm,
    kWrite,
    kWriteImm,
    kRecv,
    kRecvWriteImm,
    kRead,                // spec §8.1: remote memory into the local buffer
    kAtomicFetchAdd,      // spec §8.1: 8 bytes, the old value into the local buffer
    kAtomicCompareSwap,
};

// Completion mirrors a verbs CQE. Requester completions come from post_send work
// requests, responder completions from posted receives.
struct Completion {
    uint64_t wr_id = 0;
    uint32_t stream = 0;  // local stream id
    Status status = Status::kSuccess;
    WorkOpcode opcode = WorkOpcode::kSend;
    uint32_t byte_len = 0;
    bool has_imm = false;
    uint32_t imm = 0;
};

enum class EventKind : uint8_t {
    kCompletion,
    kConnectionUp,
    kConnectionFailed,
    kConnectionClosed,
    kPathFailed,
    kPathRecovered,
    kSrqLimit,  // [PLACE-24] a shared receive queue fell below its armed limit
};

struct Event {
    EventKind kind = EventKind::kCompletion;
    uint32_t connection = 0;  // local connection id
    uint16_t path = 0;        // for path events
    Status status = Status::kSuccess;  // for kConnectionFailed: why
    Address peer;
    uint32_t srq = 0;         // for kSrqLimit
    Completion completion;    // for kCompletion
};

// flushed_receive is the completion of a posted receive that will never be used: its
// stream failed, was destroyed, or its connection ended ([ERR-1], [ERR-8], [STREAM-10]).
inline Event flushed_receive(uint32_t connection, uint32_t stream, uint64_t wr_id) {
    Event e;
    e.kind = EventKind::kCompletion;
    e.connection = connection;
    e.completion = Completion{wr_id, stream, Status::kFlushed, WorkOpcode::kRecv, 0, false, 0};
    return e;
}

inline const char* to_string(Status s) {
    switch (s) {
        case Status::kSuccess: return "success";
        case Status::kLocalLength: return "local length error";
        case Status::kLocalProtection: return "local protection error";
        case Status::kRemoteAccess: return "remote access error";
        case Status::kRemoteInvalid: return "remote invalid request";
        case Status::kRnrRetryExceeded: return "RNR retry exceeded";
        case Status::kRetryExceeded: return "transport retry exceeded";
        case Status::kPeerDead: return "peer dead";
        case Status::kFlushed: return "flushed";
        case Status::kVersionMismatch: return "peer speaks another wire version";
    }
    return "unknown";
}

}  // namespace mroce::core
