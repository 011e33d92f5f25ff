// cc/fair_share.h — the receiver's half of congestion control (spec §9.2, [CC-11]..[CC-15]):
// the weighted max-min fair share of this endpoint's inbound capacity for each active
// sender, returned to it as the rate hint of every ACK.
//
// A receiver sees all of its inbound traffic, so it knows what no sender can: how many
// senders share its downlink and whether a queue is building in front of it. Fed with
// arrival events (never packets), it recomputes the shares once per interval:
//
//   arrivals ─► per sender: bytes, classes, min of (OWD − base OWD)  (this interval),
//               each at most the age of the downlink's busy run (no queue in front of
//               it is older than the run of back-to-back arrivals that drains it)
//            ─► queue delay = min over senders, while the downlink is busy
//               (arrivals ≥ 3/4 C); a queue elsewhere is AIMD's;
//               at least the first-RTT bytes that new senders sent as a burst and
//               that have not arrived yet (they are in the queue, unseen)
//            ─► allocation A = C × (1 − (queue − interval/4)/D) (the queue above a
//               target of a quarter interval, drained over D = 2 intervals, or over the
//               time half the active senders' packets take at C if longer; a queue
//               growing by ¾ interval per interval counted as it will be an interval
//               later); CE marks are left
//               to the senders' AIMD (a mark may come from any queue on the route);
//               A falls at once but rises at most to max(4 × its last value, C/4)
//            ─► water-filling of A by class weight, capped by each sender's demand
//            ─► share per sender; the ones now a quarter above what they were last
//               told are reported (pushed)
//
// The one-way delay is the receiver's clock minus the sender's timestamp, modulo 2^32: the
// clocks' offset is unknown and constant, so only a sender's delay above its base is used.
// A queue at this receiver's downlink delays every sender; one sender's own congested
// route delays only it, so the minimum over senders is the shared queue. That minimum is
// only as good as the worst base, and a sender whose first packet met a queue (every
// sender of an incast but the first) would take that queue as its base and hide it for
// as long as the queue stands. So a new sender's base is its first delay less the queue
// the packet just before it showed ([CC-14]): the queue is one FIFO, and packets that
// leave it back to back waited alike.
//
// Integer arithmetic only ([CC-3]). Threading: none. The owner keeps sender ids small (the
// endpoint uses the connection's slot); memory is one record per id ever seen.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "util/time.h"

namespace mroce::cc {

struct FairShareConfig {
    uint64_t capacity_bps = 100'000'000'000;  // [CC-12] inbound capacity C
    Duration interval = std::chrono::microseconds(8);
    std::array<uint8_t, 8> class_weights{1, 1, 1, 1, 1, 1, 1, 1};
    uint32_t mss = 4096;        // bytes of a full DATA payload
    uint32_t header_bytes = 72;  // bytes a DATA packet adds to its payload on the wire
    // [CC-14]: what a new sender may send before its first hint ([CC-15]); the receiver
    // takes its own setting for its peers'.
    uint64_t first_rtt_bytes = 32 * 1024;
    // [CC-21]: a sender that becomes active while another has brought young_bytes or more
    // since it became active (an old one) is favoured: while it has brought fewer than
    // young_bytes (young), its weight counts young_weight times in the shares (1: none).
    uint8_t young_weight = 16;
    uint32_t young_bytes = 128 * 1024;
};

class FairShare {
public:
    // [CC-14]: the allocation never falls below C / kFloorDivisor, so that senders keep
    // sending the odd packet that tells the receiver the queue has drained.
    static constexpr uint64_t kFloorDivisor = 256;
    // [CC-19]: a recomputation raises the allocation to at most max(kRiseFactor × the
    // previous one, C / kRiseBaseDivisor): from the floor to C in two intervals (C/4, C).
    static constexpr uint64_t kRiseFactor = 4;
    static constexpr uint64_t kRiseBaseDivisor = 4;

    explicit FairShare(const FairShareConfig& cfg);

    // on_arrival: a current-generation DATA of `bytes` payload from `sender` in class `tc`;
    // owd = receive time − the packet's timestamp, in ns modulo 2^32; `drained` = the DATA
    // carried DRAINED: its sender had nothing left to send after it ([CC-12]).
    void on_arrival(uint32_t sender, uint8_t tc, uint32_t bytes, uint32_t owd, Time now,
                    bool drained = false);
    // forget: the sender's connection ended; its share goes to the others at the next
    // recomputation.
    void forget(uint32_t sender);

    // next_update: when update() should run next; kNever while no sender is active.
    Time next_update() const {
        if (active_.empty()) return kNever;
        return realloc_ ? std::min(next_update_, realloc_at_) : next_update_;
    }
    // update recomputes the shares if the interval has passed, or only divides the
    // allocation again after a young sender joined old ones ([CC-21]). Returns the senders
    // whose share rose a quarter above the hint they last heard or fell below half of it,
    // which the owner tells at once ([CC-14] push); the vector is valid until the next call.
    const std::vector<uint32_t>& update(Time now);

    // hint_mbps: the sender's share in Mbit/s (at least 1), or 0 if it is not active; for
    // an ACK to it (what it was told decides its pushes and its idle timeout).
    uint32_t hint_mbps(uint32_t sender);

    // grant_bps: [CC-20] the share a new sender answered by a HELLO_ACK would get now,
    // ⌊A × w / (w + the weights of the active senders + w per other pending grant)⌋ with w
    // the weight of class 0, carried in the HELLO_ACK; the sender's own share if it is
    // already active. The sender then counts as granted (weight w in later grants) until
    // it becomes active or for 2 intervals, so that the grants of an N → 1 incast's
    // handshakes fall as A, A/2, …, A/N instead of each being A.
    uint64_t grant_bps(uint32_t sender, Time now);
    size_t pending_grants() const { return granted_.size(); }

    // For counters and tests.
    size_t active_senders() const { return active_.size(); }
    uint64_t allocation_bps() const { return allocation_; }
    Duration queue_delay() const { return Duration{queue_ns_}; }
    uint64_t share_bps(uint32_t sender) const {
        return sender < senders_.size() ? senders_[sender].share : 0;
    }

private:
    struct Sender {
        bool active = false;
        bool has_base = false;
        bool owd_sampled = false;  // excess_min holds a sample of this interval
        bool favoured = false;     // [CC-21]: became active beside a sender that is old
        uint8_t classes = 0;       // bit per class seen this interval
        uint16_t weight = 1;       // sum of the weights of the classes last seen
        uint32_t owd_base = 0;     // smallest one-way delay seen (sender's clock offset)
        uint32_t excess_min = 0;   // smallest delay above the base this interval, ns, at
                                   // most the downlink's busy run when it arrived
        bool measured = false;     // rate holds a whole measurement window
        // [CC-21]: payload bytes that arrived since it became active (saturating): while
        // below young_bytes the sender is young.
        uint32_t attained = 0;
        uint64_t bytes = 0;        // this interval
        uint64_t window_bytes = 0; // the rate's window so far
        Time window_start{};
        uint64_t rate = 0;         // bit/s over the last whole window
        uint64_t share = 0;        // bit/s, the current hint
        uint64_t told = 0;         // bit/s, the hint the last ACK to it carried
        Time last_arrival{};
        // [CC-12]: the last recomputation that raised its share a quarter above the hint it
        // was last told (a push); its silence counts from here if that is later.
        Time raised_at{};
        Duration gap{};            // between its last two packets
        // [CC-12]: the newest DATA (by the sender's timestamp) carried DRAINED; drained_ts is
        // that timestamp, so an older packet that arrives later on another path neither
        // undoes it nor makes the sender active again; a newer one does both (the newer one
        // may itself carry DRAINED: then it is active until the next recomputation).
        bool drained = false;
        uint32_t drained_ts = 0;
        // [CC-14] first-RTT backlog: of the first_rtt_bytes it may send before its first
        // hint, how many have not arrived yet; the send time (its timestamp) of the arrival
        // that made it active, how far the later ones' send times reach beyond it, and their
        // bytes: together, whether it sent its first round trip as a burst.
        uint32_t backlog = 0;
        uint32_t first_sent = 0;
        uint32_t sent_span = 0;
        uint32_t bytes_after_first = 0;
        // [CC-20]: a HELLO_ACK granted it a share; it counts in later grants until then
        // (or until it becomes active).
        Time granted_until{};
    };

public:
    // Bytes of one sender's (connection's) state at the receiver (spec §9.3 "State per
    // path and per connection"; measured by cc/state_size_test.cc).
    static constexpr size_t kSenderStateBytes = sizeof(Sender);

private:
    void recompute(Time now);
    bool bursting(const Sender& s, Time now) const;
    void allocate(Time now);
    uint64_t demand(const Sender& s, uint64_t equal) const;
    // effective_weight: [CC-21] its weight, young_weight times while it is favoured and young.
    uint64_t effective_weight(const Sender& s) const {
        return s.favoured && s.attained < cfg_.young_bytes ? uint64_t{s.weight} * cfg_.young_weight
                                                           : s.weight;
    }
    // any_old: [CC-21] an active sender has brought young_bytes or more since it became active.
    bool any_old() const;
    // pending_grant_weight: [CC-20] the weight of the senders other than `sender` granted a
    // share by a HELLO_ACK within its lifetime and not active yet (class 0's weight each).
    uint64_t pending_grant_weight(uint32_t sender, Time now) const;
    Duration idle_timeout(const Sender& s) const;
    // extend_run: [CC-14] the downlink's busy run after an arrival of `bytes` at `now`.
    void extend_run(Time now, uint64_t bytes);

    FairShareConfig cfg_;
    uint64_t capacity_;  // C in payload bit/s
    std::vector<Sender> senders_;
    std::vector<uint32_t> active_;
    std::vector<uint32_t> raised_;
    std::vector<uint32_t> granted_;  // [CC-20] pending grants (some may have lapsed)
    std::vector<std::pair<uint64_t, uint32_t>> order_;  // scratch: (demand per weight, id)
    Time last_update_{};
    Time next_update_ = kNever;
    // [CC-21]: a young sender spent its first-RTT budget beside one that is not young: the
    // shares are divided again (and the lowered ones pushed) at the next update, not an
    // interval later.
    Time realloc_at_{};
    uint64_t allocation_ = 0;
    int64_t queue_ns_ = 0;           // the queue delay measured at the last recomputation
    int64_t previous_queue_ns_ = 0;  // ... and at the one before
    uint32_t last_excess_ = 0;  // the queue the latest arrival showed, ns
    bool realloc_ = false;      // [CC-21], above
    Time last_arrival_{};       // of any sender
    uint64_t bytes_ = 0;       // this interval, all senders
    // [CC-14] the downlink's busy run: since when payload has arrived at about C with no
    // gap of more than a quarter interval's bytes, and the bytes since then plus that
    // quarter interval's (the slack, credited when the run begins). A packet that waited q
    // in front of this downlink left it at the end of q of back-to-back sending, so no
    // queue there is longer than the run.
    Time run_start_{};
    uint64_t run_bytes_ = 0;
};

}  // namespace mroce::cc
