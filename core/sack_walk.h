// core/sack_walk.h — which of a path's PSNs one ACK acknowledges (spec §6, [ACK-2]): the
// cumulative PSN and the 256-bit SACK after it, clipped to the PSNs the sender still
// tracks. The walk knows nothing of what an acknowledgement does to the connection (the
// records, the windows, the messages): the caller's callback does that, so the bit
// arithmetic is tested on its own and the connection keeps only the consequences.
#pragma once

#include <cstdint>
#include <cstring>

#include "util/seq.h"
#include "wire/ack.h"

namespace mroce::core {

struct SackWalk {
    uint32_t highest = 0;  // the highest PSN acknowledged (cum_psn when no SACK bit counted)
    bool any = false;      // some acknowledged PSN lies in [base, next_psn)
};

// walk_acks calls on_acked(psn, by_sack) for every PSN in [base, next_psn) that the ACK
// acknowledges: first each PSN up to cum_psn in order (by_sack false), then each PSN whose
// SACK bit is set, cum_psn + 1 + i for bit i in wire order (by_sack true). PSNs outside
// the window (already released, or never sent) are skipped: an ACK is never trusted to
// name PSNs the sender does not track. The callback must not move base or next_psn.
template <class OnAcked>
SackWalk walk_acks(uint32_t base, uint32_t next_psn, uint32_t cum_psn, const wire::Sack& sack,
                   OnAcked&& on_acked) {
    for (uint32_t psn = base; psn != next_psn && seq_le(psn, cum_psn); ++psn) on_acked(psn, false);
    SackWalk w{cum_psn, seq_ge(cum_psn, base) && seq_lt(cum_psn, next_psn)};
    uint64_t words[4];
    static_assert(sizeof words == sizeof sack.bytes);
    std::memcpy(words, sack.bytes.data(), sizeof words);
    if ((words[0] | words[1] | words[2] | words[3]) == 0) return w;  // the common case
    for (uint32_t byte = 0; byte < sack.bytes.size(); ++byte) {
        if (byte % 8 == 0 && words[byte / 8] == 0) {  // skip empty 64-bit groups at once
            byte += 7;
            continue;
        }
        const uint8_t v = sack.bytes[byte];
        if (!v) continue;
        for (uint32_t b = 0; b < 8; ++b) {
            if (!(v & (0x80u >> b))) continue;
            const uint32_t psn = cum_psn + 1 + byte * 8 + b;  // [ACK-2]
            if (seq_lt(psn, base) || seq_ge(psn, next_psn)) continue;
            on_acked(psn, true);
            w.highest = psn;
            w.any = true;
        }
    }
    return w;
}

}  // namespace mroce::core
