// core/work.h — work requests as the engine receives them. Buffers are named by address
// and key and checked against the memory table when posted (docs/ownership.md).
#pragma once

#include <cstdint>

#include "core/event.h"

namespace mroce::core {

// Sge is one piece of a scatter/gather list, as in verbs: address, length, lkey.
struct Sge {
    uint64_t addr = 0;
    uint32_t length = 0;
    uint32_t lkey = 0;
};
// spec [PLACE-22]: the most pieces one work request may name (verbs max_send_sge /
// max_recv_sge).
inline constexpr uint32_t kMaxSge = 16;

// A work request names its local buffer either by local_addr/length/lkey (one piece) or,
// when num_sge > 0, by sg_list (read when posted; the pieces are copied, the bytes are
// not), in which case local_addr/length/lkey are ignored.
struct SendWr {
    uint64_t wr_id = 0;
    WorkOpcode opcode = WorkOpcode::kSend;  // any but kRecv / kRecvWriteImm
    uint64_t local_addr = 0;   // source; for kRead and atomics the destination
    uint32_t length = 0;       // atomics: 8
    uint32_t lkey = 0;
    uint64_t remote_addr = 0;  // kWrite, kWriteImm, kRead, atomics (8-byte aligned)
    uint32_t rkey = 0;         // kWrite, kWriteImm, kRead, atomics
    uint32_t imm = 0;          // kSendImm, kWriteImm
    bool signaled = true;      // false: no completion on success
    uint64_t compare_add = 0;  // kAtomicFetchAdd: the addend; kAtomicCompareSwap: compare
    uint64_t swap = 0;         // kAtomicCompareSwap: the new value
    bool fence = false;        // [PLACE-21] start only after earlier READs/atomics complete
    const Sge* sg_list = nullptr;
    uint32_t num_sge = 0;
    // [PLACE-23] SEND/SEND_IMM/WRITE/WRITE_IMM of at most max_inline_data bytes: the bytes
    // are copied when posted, so the buffer is free at once and needs no lkey.
    bool inline_data = false;
};

struct RecvWr {
    uint64_t wr_id = 0;
    uint64_t addr = 0;
    uint32_t length = 0;
    uint32_t lkey = 0;
    const Sge* sg_list = nullptr;  // as SendWr: when num_sge > 0 the buffer is these pieces
    uint32_t num_sge = 0;
};

}  // namespace mroce::core
