// core/path_selector_test.cc — the path policies on hand-built path states: [PATH-10]
// round-robin, [PATH-13] its loss skips, [PATH-14] round-robin over the roomy paths,
// [LOSS-6] the retransmission's path.
#include "core/path_selector.h"

#include <gtest/gtest.h>

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
    PathView view(uint64_t ready_ports = kAllPorts, uint32_t loss_prior = 0) const {
        return PathView{tx, cc, ready_ports, loss_prior};
    }
    // in_flight: `segs` full segments outstanding on path i.
    void in_flight(uint16_t i, uint32_t segs) {
        tx[i].in_flight_pkts = segs;
        tx[i].in_flight_bytes = uint64_t{segs} * kSeg;
    }
};

// [PATH-13] item 4: a lossy path's window counts as W / (1 - L), at most 2 W, wherever its
// bytes in flight meet it: the lost DATA not yet declared lost must not hold it back.
TEST(PathSelector, LossStretchesTheWindowAtMostTwofold) {
    Paths ps(2, 1);
    ps.in_flight(0, 16);  // a full window on a clean path
    EXPECT_FALSE(ps.view().can_send(0, kSeg));
    // A score of 65536/3 estimates L = 1/4 (16383/65536 in the spec's units): the window
    // counts as about 4/3 W, 21.3 segments.
    ps.tx[0].loss_score = 65536 / 3;
    const uint64_t l = path_health::loss_q16(ps.tx[0].loss_score);
    EXPECT_EQ(l, 16383u);
    const uint64_t stretched = kWindow * 65536 / (65536 - l);
    EXPECT_EQ(ps.view().window_bytes(0), stretched);
    EXPECT_NEAR(static_cast<double>(stretched), kWindow * 4.0 / 3, 3.0);
    EXPECT_TRUE(ps.view().can_send(0, kSeg));
    ps.in_flight(0, 20);
    EXPECT_EQ(ps.view().send_room(0, kSeg), stretched - 20 * kSeg);
    ps.in_flight(0, 21);
    EXPECT_FALSE(ps.view().can_send(0, kSeg));
    // L = 0.9: at most twice the window.
    ps.tx[0].loss_score = 9 * 65536;
    EXPECT_EQ(ps.view().window_bytes(0), 2 * kWindow);
    ps.in_flight(0, 31);
    EXPECT_TRUE(ps.view().can_send(0, kSeg));
    ps.in_flight(0, 32);
    EXPECT_FALSE(ps.view().can_send(0, kSeg));
    EXPECT_EQ(ps.view().window_bytes(1), kWindow);  // the clean path is unchanged
}

// [PATH-13] item 5: the stretch uses the path's score started from the connection's
// estimate, weighted by the path's prior weight: a path that has carried nothing yet is
// stretched for the connection's loss, one that has carried many packets for its own.
TEST(PathSelector, APathsWindowStartsFromTheConnectionsLoss) {
    Paths ps(2, 1);
    const uint32_t conn = 65536 / 3;  // L = 1/4
    const uint64_t quarter = kWindow * 65536 / (65536 - path_health::loss_q16(conn));
    EXPECT_EQ(ps.view(kAllPorts, conn).window_bytes(0), quarter);  // no sample yet: the prior
    ps.in_flight(0, 17);
    EXPECT_FALSE(ps.view().can_send(0, kSeg));  // without a prior: W
    EXPECT_TRUE(ps.view(kAllPorts, conn).can_send(0, kSeg));
    // Half the prior's weight left: score + prior / 2.
    ps.tx[0].prior_weight = 32768;
    ps.tx[0].loss_score = 1024;
    const uint32_t mixed = 1024 + conn / 2;
    EXPECT_EQ(ps.view(kAllPorts, conn).window_bytes(0),
              kWindow * 65536 / (65536 - path_health::loss_q16(mixed)));
    // A path with many samples: its own score only, however lossy the connection.
    ps.tx[1].prior_weight = 0;
    EXPECT_EQ(ps.view(kAllPorts, 9 * 65536).window_bytes(1), kWindow);
    // A lossy prior still stretches at most twofold.
    EXPECT_EQ(ps.view(kAllPorts, 9 * 65536).window_bytes(0), 2 * kWindow);
}

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
    EXPECT_EQ(ps.view().send_room(0, kSeg), kSeg);  // one segment's room left
    EXPECT_EQ(ps.view().send_room(1, kSeg), kWindow);
    ps.in_flight(0, 16);
    EXPECT_EQ(ps.view().send_room(0, kSeg), PathView::kCannotSend);
    ps.in_flight(0, 15);
    ps.tx[1].state = PathState::kSuspect;
    EXPECT_EQ(ps.view().send_room(1, kSeg), PathView::kCannotSend);
    EXPECT_FALSE(ps.view().can_send(1, kSeg));
    ps.tx[1].state = PathState::kFailed;
    EXPECT_FALSE(ps.view().can_send(1, kSeg));
    // [PATH-5]: kSackBits PSNs above an unresolved base leave no room, whatever the window.
    ps.cc.w_[0] = 1u << 30;
    ps.tx[0].ring.resize(256);
    ps.tx[0].next_psn = wire::kSackBits;
    ps.tx[0].rec(0).state = TxRecord::State::kInFlight;
    EXPECT_FALSE(ps.view().can_send(0, kSeg));
    EXPECT_EQ(ps.view().send_room(0, kSeg), PathView::kCannotSend);
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

// [PATH-10] with runs (path_run_segments, a UDP datapath's 15): a path keeps up to `run`
// consecutive segments while it can send them, then the cursor moves on; a path whose
// window fills ends its run early, and the shares stay even; a lossy path gives up whole
// runs in proportion to its loss.
TEST(PathSelector, RoundRobinRunsKeepAPathForSeveralSegments) {
    Paths ps(4, 1);
    RoundRobinSelector rr(4, 3);
    for (int i = 0; i < 120; ++i) ASSERT_EQ(rr.next_path(ps.view(), kSeg), (i / 3) % 4) << "turn " << i;
    ps.in_flight(1, 15);  // room for one segment only: path 1's run is cut to 1
    std::vector<uint16_t> order;
    for (int i = 0; i < 7; ++i) {
        const uint16_t p = rr.next_path(ps.view(), kSeg);
        order.push_back(p);
        if (p == 1) ps.in_flight(1, 16);  // the segment sent fills its window
    }
    EXPECT_EQ(order, (std::vector<uint16_t>{0, 0, 0, 1, 2, 2, 2}));
    Paths even(4, 2);
    RoundRobinSelector rr2(4, 5);
    const std::vector<int> c = counts(rr2, even, 4000);
    for (uint16_t p = 0; p < 4; ++p) EXPECT_EQ(c[p], 1000) << "path " << p;
    Paths lossy(4, 1);
    lossy.tx[1].loss_score = 65536;  // L = 1/2: half of its runs
    RoundRobinSelector rr3(4, 4);
    const std::vector<int> l = counts(rr3, lossy, 7000);
    EXPECT_EQ(l[1] * 2, l[0]);
    EXPECT_EQ(l[0], l[2]);
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

// [PATH-14]: equal paths take turns exactly as round-robin's do, so the planes the paths
// interleave on ([PATH-1]) share evenly.
TEST(PathSelector, RoomTakesTurnsAmongEqualPaths) {
    Paths ps(8, 2);
    RoomSelector r(8);
    for (int i = 0; i < 80; ++i) ASSERT_EQ(r.next_path(ps.view(), kSeg), i % 8) << "turn " << i;
    for (uint16_t p = 0; p < 8; ++p) ps.in_flight(p, 3);  // less room, but equal
    const std::vector<int> c = counts(r, ps, 800);
    for (uint16_t p = 0; p < 8; ++p) EXPECT_EQ(c[p], 100) << "path " << p;
}

TEST(PathSelector, RoomPassesOverPathsWithLessThanHalfTheMostRoom) {
    Paths ps(4, 1);
    ps.in_flight(1, 9);  // room 7 segments: below half of 16
    ps.in_flight(2, 8);  // room 8: exactly half, still taken
    RoomSelector r(4);
    EXPECT_EQ(counts(r, ps, 300), (std::vector<int>{100, 0, 100, 100}));
    // When every path is as full, the threshold follows the best: all take turns again.
    for (uint16_t p = 0; p < 4; ++p) ps.in_flight(p, 9);
    EXPECT_EQ(counts(r, ps, 400), (std::vector<int>{100, 100, 100, 100}));
}

// [PATH-14]: planes alternate, each taking half the turns, and the paths of one plane
// share its half.
TEST(PathSelector, RoomAlternatesPlanesAndSharesWithinOne) {
    Paths ps(4, 2);      // paths 0, 2 on plane 0; 1, 3 on plane 1
    ps.in_flight(1, 9);  // below half the best: plane 1 has path 3 alone
    RoomSelector r(4);
    uint16_t last = kNoPathChoice;
    for (int i = 0; i < 40; ++i) {
        const uint16_t p = r.next_path(ps.view(), kSeg);
        ASSERT_NE(p, kNoPathChoice);
        if (last != kNoPathChoice) {
            ASSERT_NE(ps.tx[p].local_port, ps.tx[last].local_port) << "turn " << i;
        }
        last = p;
    }
    EXPECT_EQ(counts(r, ps, 400), (std::vector<int>{100, 0, 100, 200}));
    // With one plane unable to send, the other takes every turn.
    ps.in_flight(3, 16);
    EXPECT_EQ(counts(r, ps, 10), (std::vector<int>{5, 0, 5, 0}));
}

TEST(PathSelector, RoomSkipsFailedSuspectAndFullPaths) {
    Paths ps(4, 1);
    ps.in_flight(3, 10);
    ps.tx[0].state = PathState::kFailed;   // empty, but failed
    ps.tx[1].state = PathState::kSuspect;  // empty, but suspect
    ps.in_flight(2, 16);                   // full
    RoomSelector r(4);
    EXPECT_EQ(counts(r, ps, 10), (std::vector<int>{0, 0, 0, 10}));
    ps.in_flight(3, 16);
    EXPECT_EQ(r.next_path(ps.view(), kSeg), kNoPathChoice);
}

// [PATH-14]: the room of a lossy path counts in proportion to 1 − L ([PATH-13]).
TEST(PathSelector, RoomWeighsLoss) {
    Paths ps(3, 1);
    // The room counts the window as stretched for loss ([PATH-13] item 4: 2 W at L >= 1/2).
    ps.tx[0].loss_score = 65536 * 7;  // L = 7/8: weight 32 x 1/8 = 4 segments against 16
    RoomSelector r(3);
    EXPECT_EQ(counts(r, ps, 100), (std::vector<int>{0, 50, 50}));
    ps.tx[0].loss_score = 65536 * 3;  // L = 3/4: weight 32 x 1/4 = 8, half the best: taken
    EXPECT_EQ(counts(r, ps, 99), (std::vector<int>{33, 33, 33}));
    ps.tx[0].loss_score = 65536 * 7;
    ps.in_flight(1, 16);
    ps.in_flight(2, 16);
    EXPECT_EQ(counts(r, ps, 10), (std::vector<int>{10, 0, 0}));  // lossy, but the only one
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

// [PATH-15]: every policy, and the retransmission's choice, take only paths on the ports
// the datapath says can send; with none of those able to send there is no choice.
TEST(PathSelector, ReadyPortsLimitEveryChoice) {
    Paths ps(8, 4);  // path i on port i % 4
    const uint64_t ports_1_and_3 = 0b1010;
    RoundRobinSelector rr(8);
    RoomSelector room(8);
    for (PathSelector* s : {static_cast<PathSelector*>(&rr), static_cast<PathSelector*>(&room)}) {
        for (int turn = 0; turn < 16; ++turn) {
            const uint16_t p = s->next_path(ps.view(ports_1_and_3), kSeg);
            ASSERT_NE(p, kNoPathChoice) << "turn " << turn;
            EXPECT_TRUE(ps.tx[p].local_port == 1 || ps.tx[p].local_port == 3) << "turn " << turn;
        }
        EXPECT_EQ(s->next_path(ps.view(0), kSeg), kNoPathChoice);
    }
    EXPECT_EQ(PathSelector::retransmit_path(ps.view(), kSeg), 0);
    EXPECT_EQ(PathSelector::retransmit_path(ps.view(ports_1_and_3), kSeg), 1);
    EXPECT_FALSE(ps.view(0b1110).can_send(0, kSeg));
    EXPECT_EQ(ps.view(0b1110).send_room(4, kSeg), PathView::kCannotSend);
    // Ports from 64 on are always ready.
    ps.tx[0].local_port = 64;
    EXPECT_TRUE(ps.view(0).can_send(0, kSeg));
}

TEST(PathSelector, ConfigChoosesThePolicy) {
    EndpointConfig cfg;
    EXPECT_NE(dynamic_cast<RoundRobinSelector*>(make_path_selector(cfg, 4).get()), nullptr);
    cfg.path_selection = EndpointConfig::PathSelection::kRoom;
    EXPECT_NE(dynamic_cast<RoomSelector*>(make_path_selector(cfg, 4).get()), nullptr);
}

}  // namespace
}  // namespace mroce::core
