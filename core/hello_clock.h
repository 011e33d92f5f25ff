// core/hello_clock.h — spec [CONN-32], [CC-20]: when this side sent its recent HELLOs, by number.
//
// A grant in a HELLO_ACK covers one bandwidth-delay product of the handshake's round trip.
// The round trip runs from the HELLO that was answered: with [CONN-30]'s copies spread over
// `handshake_timeout`, a later copy may leave just before the answer to an earlier one
// arrives, and timing from the latest copy would then read a round trip of almost nothing.
// So each HELLO carries a number (`hello_seq`, 1..255, wrapping) that the HELLO_ACK echoes
// (`hello_echo`), and this unit remembers the send times of the last kMemory numbers.
#pragma once

#include <array>
#include <cstdint>

#include "util/time.h"

namespace mroce::core {

class HelloClock {
public:
    // stamp: a HELLO leaves now; returns its number (never 0).
    uint8_t stamp(Time now) {
        seq_ = static_cast<uint8_t>(seq_ == 255 ? 1 : seq_ + 1);
        sent_[seq_ % kMemory] = {seq_, now};
        return seq_;
    }
    bool any() const { return seq_ != 0; }
    Time latest() const { return sent_[seq_ % kMemory].at; }
    // answered_at: the send time of the HELLO numbered `echo`, if it is one of the last
    // kMemory; otherwise (0: a peer that does not echo, or a number forgotten) the latest
    // HELLO's, which never makes the round trip longer than it was.
    Time answered_at(uint8_t echo) const {
        const Entry& e = sent_[echo % kMemory];
        return echo != 0 && e.seq == echo ? e.at : latest();
    }

    static constexpr size_t kMemory = 16;  // at least 2 rounds of kMaxHelloCopies (8)

private:
    struct Entry {
        uint8_t seq = 0;
        Time at{};
    };
    std::array<Entry, kMemory> sent_{};
    uint8_t seq_ = 0;  // the latest HELLO's number, 0 before the first
};

}  // namespace mroce::core
