// cc/send_rate_test.cc — the sender's hint, first RTT, in-flight cap and pacer
// ([CC-15]..[CC-18]).
#include "cc/send_rate.h"

#include <gtest/gtest.h>

namespace mroce::cc {
namespace {

using namespace std::chrono_literals;

SendRateConfig config() {
    SendRateConfig c;
    c.first_rtt_bytes = 64 * 1024;
    c.max_inflight_bytes = 1 << 20;
    c.burst_bytes = 16 * 1024;
    c.burst_time = 1ms;  // the byte cap binds (see BurstIsCappedInTime)
    c.mss = 4096;
    return c;
}

// [CC-15] before its first ACK of new data a connection may have first_rtt_bytes in
// flight; after it, max_inflight_bytes, until it has been idle for the TTL.
TEST(SendRate, FirstRttThenTheCapThenFirstRttAgainAfterIdle) {
    SendRate r(config());
    Time now{1ms};
    EXPECT_EQ(r.inflight_cap(now), 64u * 1024);
    r.on_acked(10us, now);
    EXPECT_EQ(r.inflight_cap(now + 39us), 1u << 20);
    EXPECT_EQ(r.inflight_cap(now + 40us), 64u * 1024);  // 4 × srtt without an ACK
}

// [CC-15] a connection that idles after a hint starts its next first round trip with one
// BDP at its last non-zero hint (the grant), halved for every idle_halving_rtts × srtt
// since the hint expired, and never with less than first_rtt_bytes. A hint of 0 (the
// receiver let the sender go) leaves the grant alone; a later non-zero hint replaces it.
TEST(SendRate, IdleBudgetIsTheLastGrantHalvedOverIdleTime) {
    SendRateConfig c = config();
    c.idle_halving_rtts = 16;
    SendRate r(c);
    const Time now{1ms};
    r.on_hint(80'000, 10us, now);  // 80 Gbit/s × 10 µs = 100 000 bytes; TTL 40 µs
    r.on_acked(10us, now);
    EXPECT_EQ(r.inflight_cap(now + 39us), 1u << 20);
    r.on_hint(0, 10us, now + 30us);  // the receiver let this sender go
    EXPECT_EQ(r.hint_bps(now + 40us), 0u);
    EXPECT_EQ(r.inflight_cap(now + 40us), 100'000u);  // idle: the grant, not 64 KiB
    EXPECT_EQ(r.inflight_cap(now + 199us), 100'000u);
    EXPECT_EQ(r.inflight_cap(now + 200us), 64u * 1024);  // halved after 16 × 10 µs: 50 000
    EXPECT_EQ(r.idle_budget(now + 200us), 50'000u);
    EXPECT_EQ(r.idle_budget(now + 360us), 25'000u);
    EXPECT_EQ(r.idle_budget(now + 40us + 64 * 160us), 0u);

    // A later, smaller hint is the receiver's latest word: it replaces the grant.
    const Time later = now + 1ms;
    r.on_hint(8'000, 10us, later);  // 8 Gbit/s: 10 000 bytes
    r.on_acked(10us, later);
    EXPECT_EQ(r.idle_budget(later + 40us), 10'000u);
    EXPECT_EQ(r.inflight_cap(later + 40us), 64u * 1024);  // never below first_rtt_bytes

    // Off (0), or with hints ignored, a returning sender is a new one.
    c.idle_halving_rtts = 0;
    SendRate off(c);
    off.on_hint(80'000, 10us, now);
    off.on_acked(10us, now);
    EXPECT_EQ(off.inflight_cap(now + 40us), 64u * 1024);
    c = config();
    c.use_hint = false;
    SendRate nohint(c);
    nohint.on_hint(80'000, 10us, now);
    nohint.on_acked(10us, now);
    EXPECT_EQ(nohint.inflight_cap(now + 40us), 64u * 1024);
}

// [CC-20] the HELLO_ACK's grant over the handshake's RTT is a new connection's first-RTT
// budget at once; without one, first_rtt_bytes. A grant from the wire is never trusted
// beyond max_inflight_bytes, and it ages as an idle grant does.
// [CC-20] grant_caps_first_rtt: a grant the connection takes with `caps` is its first round
// trip's cap even below first_rtt_bytes (at least one packet), until its first ACK; after
// an idle spell the budget of [CC-15] applies again, first_rtt_bytes at least.
TEST(SendRate, AGrantThatCapsTheFirstRoundTripMayBeBelowTheFirstRttBytes) {
    const Time now{1ms};
    SendRateConfig c = config();
    SendRate capped(c);
    capped.on_grant(8'000, 10us, now, /*caps=*/true);  // 8 Gbit/s × 10 µs = 10 000 bytes
    EXPECT_EQ(capped.inflight_cap(now), 10'000u);
    SendRate tiny(c);
    tiny.on_grant(1, 10us, now, true);  // 1 Mbit/s × 10 µs: 1 byte, one packet at least
    EXPECT_EQ(tiny.inflight_cap(now), c.mss);
    SendRate uncapped(c);
    uncapped.on_grant(8'000, 10us, now);
    EXPECT_EQ(uncapped.inflight_cap(now), 64u * 1024);
    capped.on_acked(10us, now + 10us);
    EXPECT_EQ(capped.inflight_cap(now + 11us), 1u << 20);
    // Long idle: the hint and the grant's budget lapse; first_rtt_bytes again.
    EXPECT_EQ(capped.inflight_cap(now + 1s), 64u * 1024);
}

TEST(SendRate, HandshakeGrantIsTheFirstRoundTripsBudget) {
    const Time now{1ms};
    SendRate plain(config());
    EXPECT_EQ(plain.inflight_cap(now), 64u * 1024);

    SendRateConfig c = config();
    c.idle_halving_rtts = 16;
    SendRate r(c);
    r.on_grant(80'000, 10us, now);  // 80 Gbit/s × 10 µs = 100 000 bytes
    EXPECT_EQ(r.hint_bps(now), 0u);  // a grant is no hint: the pacer goes by the window
    EXPECT_EQ(r.inflight_cap(now), 100'000u);
    EXPECT_EQ(r.inflight_cap(now + 159us), 100'000u);
    EXPECT_EQ(r.idle_budget(now + 160us), 50'000u);  // unused for 16 RTTs: halved
    r.on_acked(10us, now + 10us);                     // the first RTT is over
    EXPECT_EQ(r.inflight_cap(now + 11us), 1u << 20);

    // A long handshake counts as at most 2 hint intervals (2 × 8 µs): 80 Gbit/s × 16 µs.
    SendRate slow(c);
    slow.on_grant(80'000, 1ms, now);
    EXPECT_EQ(slow.inflight_cap(now), 160'000u);

    // A hostile or huge grant: at most max_inflight_bytes.
    SendRate huge(c);
    huge.on_grant(0xFFFFFFFFu, 1ms, now);
    EXPECT_EQ(huge.inflight_cap(now), 1u << 20);

    // A small grant never goes below first_rtt_bytes; a grant of 0, an RTT of 0, hints
    // ignored or a second grant change nothing.
    SendRate small(c);
    small.on_grant(1, 10us, now);
    EXPECT_EQ(small.inflight_cap(now), 64u * 1024);
    small.on_grant(80'000, 10us, now);  // not over the grant it holds
    EXPECT_EQ(small.inflight_cap(now), 64u * 1024);
    SendRate zero(c);
    zero.on_grant(0, 10us, now);
    zero.on_grant(80'000, 0us, now);
    EXPECT_EQ(zero.inflight_cap(now), 64u * 1024);
    c.use_hint = false;
    SendRate nohint(c);
    nohint.on_grant(80'000, 10us, now);
    EXPECT_EQ(nohint.inflight_cap(now), 64u * 1024);
}

// [CC-20] a lower grant from a later HELLO_ACK lowers the first round trip's budget at
// once (over the same round trip); a higher one, a zero, or one before any grant changes
// nothing.
TEST(SendRate, LowerGrantLowersTheBudget) {
    const Time now{1ms};
    SendRateConfig c = config();
    c.idle_halving_rtts = 16;
    SendRate r(c);
    EXPECT_FALSE(r.lower_grant(40'000));  // no grant held
    EXPECT_EQ(r.inflight_cap(now), 64u * 1024);
    r.on_grant(160'000, 10us, now);  // 200 000 bytes
    EXPECT_EQ(r.inflight_cap(now), 200'000u);
    EXPECT_FALSE(r.lower_grant(320'000));
    EXPECT_FALSE(r.lower_grant(0));
    EXPECT_EQ(r.inflight_cap(now), 200'000u);
    EXPECT_TRUE(r.lower_grant(80'000));  // 100 000 bytes
    EXPECT_EQ(r.inflight_cap(now + 1us), 100'000u);
    EXPECT_TRUE(r.lower_grant(8'000));  // below first_rtt_bytes: that floor holds
    EXPECT_EQ(r.inflight_cap(now + 1us), 64u * 1024);
}

// [CC-15] the grant is capped by max_inflight_bytes: a hint × srtt above the connection's
// cap does not let a returning sender send more than any other could.
TEST(SendRate, IdleBudgetNeverAboveTheInflightCap) {
    SendRateConfig c = config();
    c.idle_halving_rtts = 16;
    SendRate r(c);
    const Time now{1ms};
    r.on_hint(400'000, 1ms, now);  // 400 Gbit/s × 1 ms = 50 MB
    r.on_acked(1ms, now);
    EXPECT_EQ(r.idle_budget(now + 4ms), 1u << 20);
    EXPECT_EQ(r.inflight_cap(now + 4ms), 1u << 20);
}

// [CC-16] a hint is in force for max(4 srtt, 4 packets at the hint), then expires; a zero
// hint is no hint and leaves the one in force alone.
TEST(SendRate, HintExpires) {
    SendRate r(config());
    Time now{1ms};
    EXPECT_EQ(r.hint_bps(now), 0u);
    r.on_hint(25'000, 10us, now);  // 25 Gbit/s: 4 packets take 5.2 µs < 40 µs
    EXPECT_EQ(r.hint_bps(now + 39us), 25'000'000'000u);
    r.on_hint(0, 10us, now + 20us);
    EXPECT_EQ(r.hint_bps(now + 39us), 25'000'000'000u);
    EXPECT_EQ(r.hint_bps(now + 40us), 0u);
    r.on_hint(100, 10us, now);  // 100 Mbit/s: 4 packets take 1310.72 µs
    EXPECT_EQ(r.hint_bps(now + 1310us), 100'000'000u);
    EXPECT_EQ(r.hint_bps(now + 1311us), 0u);
}

// [CC-17] the rate is min(window rate, hint); either alone when the other is unknown; 0
// (unpaced) with pacing off or neither known. With use_hint off the hint is ignored.
TEST(SendRate, RateIsTheSmallerOfWindowRateAndHint) {
    SendRate r(config());
    Time now{1ms};
    EXPECT_EQ(r.rate_bps(0, now), 0u);
    EXPECT_EQ(r.rate_bps(7'000'000'000, now), 7'000'000'000u);
    r.on_hint(5'000, 10us, now);
    EXPECT_EQ(r.rate_bps(7'000'000'000, now), 5'000'000'000u);
    EXPECT_EQ(r.rate_bps(3'000'000'000, now), 3'000'000'000u);
    EXPECT_EQ(r.rate_bps(0, now), 5'000'000'000u);
    SendRateConfig c = config();
    c.pacing = false;
    SendRate off(c);
    off.on_hint(5'000, 10us, now);
    EXPECT_EQ(off.rate_bps(7'000'000'000, now), 0u);
    c = config();
    c.use_hint = false;
    SendRate nohint(c);
    nohint.on_hint(5'000, 10us, now);
    EXPECT_EQ(nohint.hint_bps(now), 0u);
    EXPECT_EQ(nohint.rate_bps(7'000'000'000, now), 7'000'000'000u);
}

// [CC-17] the pacer lets a burst of burst_bytes go at once, then one packet per
// bytes / rate; over a long run it never sends more than rate × time + burst.
TEST(SendRate, PacerHoldsTheRateAfterOneBurst) {
    SendRate r(config());
    const uint64_t rate = 10'000'000'000;  // 4096 B every 3276.8 ns
    Time now{1ms};
    int at_once = 0;
    while (r.send_time(rate, now) <= now) {
        r.on_sent(4096, rate, now);
        ++at_once;
    }
    EXPECT_EQ(at_once, 4);  // 16 KiB of credit
    uint64_t sent = 0;
    const Time start = now;
    for (int i = 0; i < 10000; ++i) {
        now = std::max(now, r.send_time(rate, now));
        r.on_sent(4096, rate, now);
        sent += 4096;
        const uint64_t allowed = static_cast<uint64_t>(to_ns(now - start)) * rate / 8'000'000'000 + 16 * 1024 + 4096;
        ASSERT_LE(sent, allowed) << i;
    }
    // And it keeps up: 10 000 packets in about 10 000 × 3.28 µs.
    EXPECT_NEAR(static_cast<double>(to_ns(now - start)), 9999 * 3276.8, 4000);
    EXPECT_EQ(r.send_time(0, now), now);  // unpaced: always now
}

// [CC-17] a slow sender banks at most burst_time of its rate, and always one packet.
TEST(SendRate, BurstIsCappedInTime) {
    SendRateConfig c = config();
    c.burst_time = 8us;
    SendRate r(c);
    Time now{1ms};
    int at_once = 0;
    const uint64_t rate = 10'000'000'000;  // 8 µs = 10 000 bytes: 2 packets of credit
    while (r.send_time(rate, now) <= now) {
        r.on_sent(4096, rate, now);
        ++at_once;
    }
    EXPECT_EQ(at_once, 3);  // the credit (2.4 packets), then the one that overdraws it
    SendRate slow(c);
    at_once = 0;
    while (slow.send_time(1'000'000, now) <= now) {
        slow.on_sent(4096, 1'000'000, now);
        ++at_once;
    }
    EXPECT_EQ(at_once, 1);
}

// [CC-17] a packet paced at a trickle does not hold back the next one once the rate rises:
// its gap is re-timed at the new rate.
TEST(SendRate, RaisedRateTakesEffectAtOnce) {
    SendRate r(config());
    Time now{1ms};
    const uint64_t slow = 6'000'000;  // 4096 B every 5.46 ms
    while (r.send_time(slow, now) <= now) r.on_sent(4096, slow, now);
    EXPECT_GT(r.send_time(slow, now), now + 4ms);
    const uint64_t fast = 10'000'000'000;
    EXPECT_LE(r.send_time(fast, now), now + 3277ns);
    now += 3277ns;
    EXPECT_EQ(r.send_time(fast, now), now);
    r.on_sent(4096, fast, now);
    EXPECT_EQ(r.send_time(fast, now), now + 3277ns);
}

// [CC-17] senders held at a trickle and raised by one push do not all send at once: each
// re-timed packet falls at its connection's phase of the new gap after the rise, even
// when its last packet is long past.
TEST(SendRate, SendersRaisedTogetherKeepTheirPhase) {
    const uint64_t slow = 6'000'000;         // 4096 B every 5.46 ms
    const uint64_t fast = 1'000'000'000;     // 4096 B every 32.768 µs
    Duration when[2];
    for (uint16_t i = 0; i < 2; ++i) {
        SendRateConfig c = config();
        c.phase = i == 0 ? 0 : 32768;  // none, and half a gap
        SendRate r(c);
        Time now{1ms};
        while (r.send_time(slow, now) <= now) r.on_sent(4096, slow, now);
        now += 1ms;  // the last packet is well behind: the old gap at the new rate is over
        r.on_hint(static_cast<uint32_t>(fast / 1'000'000), 10us, now);
        when[i] = r.send_time(fast, now) - now;
    }
    EXPECT_EQ(when[0], 0ns);
    EXPECT_EQ(when[1], 16384ns);  // half of the new gap after the rise, not at once
}

// [CC-17] hints a sender ignores (rate_hint off) never count as a rise: a window rate that
// rises re-times the held packet from the last packet alone.
TEST(SendRate, IgnoredHintsDoNotDelayTheWindowRate) {
    SendRateConfig c = config();
    c.use_hint = false;
    c.phase = 32768;
    SendRate r(c);
    Time now{1ms};
    const uint64_t slow = 6'000'000;
    while (r.send_time(slow, now) <= now) r.on_sent(4096, slow, now);
    now += 1ms;
    r.on_hint(1000, 10us, now);  // a receiver's hint, ignored here
    EXPECT_EQ(r.send_time(1'000'000'000, now), now);
}

// [CC-17] a small rise (a share's wobble) is not a rise: the held packet is re-timed from
// the last packet, as if the hint had not moved the start.
TEST(SendRate, SmallHintRiseDoesNotRestartTheGap) {
    SendRateConfig c = config();
    c.phase = 32768;
    SendRate r(c);
    Time now{1ms};
    r.on_hint(1000, 10us, now);
    const uint64_t rate = 1'000'000'000;
    while (r.send_time(rate, now) <= now) r.on_sent(4096, rate, now);
    const Time last = now;
    now += 20us;
    r.on_hint(1500, 10us, now);  // +50 %: below twice
    const uint64_t faster = 1'500'000'000;
    const Duration g{(4096ll * 8 * 1'000'000'000 + faster - 1) / faster};
    // (within 1 ns: the pacer rounds its gaps up)
    EXPECT_NEAR(to_ns(r.send_time(faster, now)), to_ns(std::max(now, last + g + g / 2)), 1);
    r.on_hint(3000, 10us, now);  // twice: now it is a rise
    const uint64_t fastest = 3'000'000'000;
    const Duration g3{(4096ll * 8 * 1'000'000'000 + fastest - 1) / fastest};
    EXPECT_NEAR(to_ns(r.send_time(fastest, now)), to_ns(now + g3 / 2), 1);
}

}  // namespace
}  // namespace mroce::cc
