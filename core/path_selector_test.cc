// core/path_selector_test.cc — the path policies on hand-built path states: [PATH-10]
// round-robin, [PATH-13] its loss skips, [LOSS-6] the retransmission's path.
#include "core/path_selector.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace mroce::core {
namespace {

using namespace std::chrono_literals;

// Windows: a congestion controller whose per-path windows a test sets.
class Windows final : public cc::CongestionControl {
public:
    explicit Windows(uint16_t n, uint64_t each) : w_(n, each) {}
    void on_sent(uint16_t, uint32_t, Time) override {}
    void on_ack(uint16_t, uint32_t, Duration, Time) override {}
    void on_ecn(uint16_t, uint32_t, Time) override {}
    void on_loss(uint16_t, uint32_t, Time) override {}
    uint64_t window_bytes(uint16_t p) const override { return w_[p]; }
    uint64_t window_rate_bps() const override { return 0; }
    std::vector<uint64_t> w_;
};

constexpr uint32_t kSeg = 4096;
constexpr uint64_t kWindow = 16 * kSeg;

struct Paths {
    std::vector<TxPath> tx;
    Windows cc;
    Paths(uint16_t n, uint16_t planes) : tx(n), cc(n, kWindow) {
        for (uint16_t i = 0; i < n; ++i) {
            tx[i].id = i;
            tx[i].local_port = static_cast<uint16_t>(i % planes);
            tx[i].ring.resize(16);
        }
    }
    PathView view() const { return PathView{tx, cc}; }
    // in_flight: `segs` full segments outstanding on path i.
    void in_flight(uint16_t i, uint32_t segs) {
        tx[i].in_flight_pkts = segs;
        tx[i].in_flight_bytes = uint64_t{segs} * kSeg;
    }
};

// counts: how often each path is chosen in `turns` choices.
std::vector<int> counts(PathSelector& s, const Paths& ps, int turns) {
    std::vector<int> c(ps.tx.size(), 0);
    for (int i = 0; i < turns; ++i) {
        const uint16_t p = s.next_path(ps.view(), kSeg);
        if (p == kNoPathChoice) break;
        ++c.at(p);
    }
    return c;
}

TEST(PathSelector, CanSendNeedsActiveStateAndWindowRoom) {
    Paths ps(2, 1);
    EXPECT_TRUE(ps.view().can_send(0, kSeg));
    ps.in_flight(0, 16);  // the window is full
    EXPECT_FALSE(ps.view().can_send(0, kSeg));
    ps.in_flight(0, 15);
    EXPECT_TRUE(ps.view().can_send(0, kSeg));
    ps.tx[1].state = PathState::kSuspect;
    EXPECT_FALSE(ps.view().can_send(1, kSeg));
    ps.tx[1].state = PathState::kFailed;
    EXPECT_FALSE(ps.view().can_send(1, kSeg));
    // [PATH-5]: kSackBits PSNs above an unresolved base leave no room, whatever the window.
    ps.cc.w_[0] = 1u << 30;
    ps.tx[0].ring.resize(256);
    ps.tx[0].next_psn = wire::kSackBits;
    ps.tx[0].rec(0).state = TxRecord::State::kInFlight;
    EXPECT_FALSE(ps.view().can_send(0, kSeg));
}

// [PATH-10]: with every path able to send, round-robin takes them in order, each once per
// round, so every path carries exactly its share.
TEST(PathSelector, RoundRobinSpreadsEvenly) {
    Paths ps(8, 2);
    RoundRobinSelector rr(8);
    for (int i = 0; i < 800; ++i) ASSERT_EQ(rr.next_path(ps.view(), kSeg), i % 8) << "turn " << i;
    const std::vector<int> c = counts(rr, ps, 8000);
    for (uint16_t p = 0; p < 8; ++p) EXPECT_EQ(c[p], 1000) << "path " << p;
}

TEST(PathSelector, RoundRobinPassesOverPathsThatCannotSend) {
    Paths ps(4, 1);
    ps.in_flight(1, 16);                   // full window
    ps.tx[2].state = PathState::kFailed;   // failed
    RoundRobinSelector rr(4);
    const std::vector<int> c = counts(rr, ps, 100);
    EXPECT_EQ(c, (std::vector<int>{50, 0, 0, 50}));
    ps.in_flight(0, 16);
    ps.tx[3].state = PathState::kSuspect;
    EXPECT_EQ(rr.next_path(ps.view(), kSeg), kNoPathChoice);
}

// [PATH-13]: a path with loss L gives up a share L of its turns, so it carries 1 − L of a
// clean path's share; alone it still takes every turn.
TEST(PathSelector, RoundRobinLossyPathGivesUpTurnsInProportion) {
    Paths ps(4, 1);
    ps.tx[1].loss_score = 65536;  // L = 1/2
    RoundRobinSelector rr(4);
    const std::vector<int> c = counts(rr, ps, 7000);
    EXPECT_EQ(c[0], 2000);
    EXPECT_EQ(c[1], 1000);
    EXPECT_EQ(c[2], 2000);
    EXPECT_EQ(c[3], 2000);
    Paths alone(2, 1);
    alone.tx[1].state = PathState::kFailed;
    alone.tx[0].loss_score = 65536 * 3;  // L = 3/4
    RoundRobinSelector rr2(2);
    EXPECT_EQ(counts(rr2, alone, 100)[0], 100);
}

// [LOSS-6]: the lowest loss score, then the lowest srtt, then the lowest id; only paths
// that can send.
TEST(PathSelector, RetransmissionGoesToTheCleanestFastestPath) {
    Paths ps(4, 1);
    EXPECT_EQ(PathSelector::retransmit_path(ps.view(), kSeg), 0);
    ps.tx[0].loss_score = 1024;
    ps.tx[1].rtt.on_sample(30us);
    ps.tx[2].rtt.on_sample(20us);
    ps.tx[3].rtt.on_sample(20us);
    EXPECT_EQ(PathSelector::retransmit_path(ps.view(), kSeg), 2);
    ps.in_flight(2, 16);
    EXPECT_EQ(PathSelector::retransmit_path(ps.view(), kSeg), 3);
    ps.tx[3].state = PathState::kFailed;
    ps.tx[1].state = PathState::kSuspect;
    EXPECT_EQ(PathSelector::retransmit_path(ps.view(), kSeg), 0);  // lossy, but the only one
    ps.in_flight(0, 16);
    EXPECT_EQ(PathSelector::retransmit_path(ps.view(), kSeg), kNoPathChoice);
}

}  // namespace
}  // namespace mroce::core
