// core/work.h — work requests as the engine receives them. Buffers are named by address
// and key and checked against the memory table when posted (docs/ownership.md).
#pragma once

#include <cstdint>

#include "core/event.h"

namespace mroce::core {

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
};

struct RecvWr {
    uint64_t wr_id = 0;
    uint64_t addr = 0;
    uint32_t length = 0;
    uint32_t lkey = 0;
};

}  // namespace mroce::core
