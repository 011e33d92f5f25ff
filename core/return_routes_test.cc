// core/return_routes_test.cc — the bookkeeping of [PATH-12]: echoes owed, echoes awaited,
// the echo delay.
#include "core/return_routes.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <vector>

#include "util/rng.h"

namespace mroce::core {
namespace {

Time at_us(int64_t us) { return time_from_ns(us * 1000); }

TEST(ReturnRoutes, OwesEachArrivedPathOnceInIdOrderFromTheCursor) {
    ReturnRoutes r;
    r.reset(8, 8);
    EXPECT_FALSE(r.echo_owed());
    r.ack_arrived(5);
    r.ack_arrived(2);
    r.ack_arrived(5);  // owed once
    r.ack_arrived(8);  // the peer has no path 8: ignored
    r.ack_arrived(65535);
    ASSERT_TRUE(r.echo_owed());
    EXPECT_EQ(r.take_echo(), 2);
    r.ack_arrived(1);  // below the cursor (now 3): waits for the wrap
    EXPECT_EQ(r.take_echo(), 5);
    EXPECT_EQ(r.take_echo(), 1);
    EXPECT_FALSE(r.echo_owed());
}

// Every owed id leaves within peer_paths echoes, whatever the order of arrivals: the cursor
// never lets a low id starve behind ids that keep arriving above it.
TEST(ReturnRoutes, NoOwedIdWaitsLongerThanOneTurn) {
    const uint64_t seed = 0x5eed0012;
    std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
    Rng rng(seed);
    for (uint16_t peer : {uint16_t{1}, uint16_t{7}, uint16_t{64}, uint16_t{65}, uint16_t{256}}) {
        ReturnRoutes r;
        r.reset(4, peer);
        std::vector<int> waited(peer, -1);  // echoes taken since the id became owed
        for (int step = 0; step < 20000; ++step) {
            const uint16_t id = static_cast<uint16_t>(rng.uniform(peer));
            if (waited[id] < 0) waited[id] = 0;
            r.ack_arrived(id);
            if (rng.uniform(3) == 0) continue;  // fewer DATA than ACKs for a while
            ASSERT_TRUE(r.echo_owed());
            const uint16_t out = r.take_echo();
            ASSERT_LT(out, peer);
            ASSERT_GE(waited[out], 0) << "echoed an id that was not owed";
            waited[out] = -1;
            for (int& w : waited) {
                if (w >= 0) {
                    ASSERT_LT(++w, peer) << "peer " << peer << " step " << step;
                }
            }
        }
        while (r.echo_owed()) r.take_echo();
    }
}

TEST(ReturnRoutes, CountsRoundsSinceTheLastEchoAndTimesTheEchoDelay) {
    ReturnRoutes r;
    r.reset(4, 4);
    const Duration floor = 20us, before = 200us;
    EXPECT_EQ(r.echo_timeout(floor, before), before);
    r.round_sent(1, at_us(10));
    r.round_sent(1, at_us(12));
    EXPECT_EQ(r.unechoed_rounds(1), 2u);
    EXPECT_EQ(r.unechoed_since(1), at_us(10));
    // Two rounds: which was echoed is unknown, so the sample is timed from the oldest
    // (20 us, never shorter than the true delay).
    r.echo_arrived(1, at_us(30));
    EXPECT_EQ(r.unechoed_rounds(1), 0u);
    EXPECT_EQ(r.unechoed_since(1), kNever);
    // First sample: srtt 20, rttvar 10: 2 x (20 + 4 x 10) = 120 us.
    EXPECT_EQ(r.echo_timeout(floor, before), 120us);
    EXPECT_EQ(r.echo_timeout(150us, before), 150us);  // the floor holds
    r.echo_arrived(1, at_us(35));  // nothing awaited: no sample
    EXPECT_EQ(r.echo_timeout(floor, before), 120us);
    r.round_sent(1, at_us(40));
    r.echo_arrived(1, at_us(60));  // one round: a 20 us sample, no error
    // srtt 20, rttvar (3 x 10 + 0) / 4 = 7.5: 2 x (20 + 30) = 100 us.
    EXPECT_EQ(r.echo_timeout(floor, before), 100us);
}

TEST(ReturnRoutes, ExaminesEveryPathInTurn) {
    ReturnRoutes r;
    r.reset(3, 8);
    std::set<uint16_t> seen;
    for (int i = 0; i < 3; ++i) seen.insert(r.next_to_examine());
    EXPECT_EQ(seen, (std::set<uint16_t>{0, 1, 2}));
    EXPECT_EQ(r.next_to_examine(), 0);
}

}  // namespace
}  // namespace mroce::core
