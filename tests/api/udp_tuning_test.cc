// tests/api/udp_tuning_test.cc — the defaults, window and ACK rate a Device over UDP picks
// (api/udp_tuning.h).
#include <gtest/gtest.h>

#include "api/udp_tuning.h"

namespace mroce::api {
namespace {

// A Device's starting point: AIMD, a hint interval of about one UDP RTT, a pacing bucket
// of one driver pass (one GSO super-packet per path), the rest the engine's, and valid.
TEST(UdpDefaults, AimdWithUdpHintIntervalAndPacingBurst) {
    const core::EndpointConfig c = udp_endpoint_defaults();
    const core::EndpointConfig engine;
    EXPECT_EQ(c.congestion_control, core::EndpointConfig::Cc::kAimd);
    EXPECT_EQ(c.hint_interval, std::chrono::microseconds(100));
    EXPECT_EQ(c.pacing_burst_bytes, 120u * c.max_payload);
    EXPECT_EQ(c.rate_hint, engine.rate_hint);
    EXPECT_EQ(c.pacing, engine.pacing);
    EXPECT_EQ(c.port_rate_bps, engine.port_rate_bps);
    EXPECT_EQ(core::config_error(c), "");
}

TEST(WindowRule, SharesTheReceiveBufferAmongPathsUpToThePsnWindow) {
    core::EndpointConfig c;  // 8 paths, 4096-byte payloads, 256 KiB configured
    // 4 MiB granted: 512 KiB per path, above the configured 256 KiB.
    EXPECT_EQ(udp_window_per_path(c, 4u << 20), 512u << 10);
    // 32 MiB granted: 4 MiB per path, capped at 256 full packets (the SACK span).
    EXPECT_EQ(udp_window_per_path(c, 32u << 20), 256u * c.max_payload);
    c.num_paths = 2;  // fewer paths: each gets a larger share, still capped
    EXPECT_EQ(udp_window_per_path(c, 1u << 20), 512u << 10);
}

TEST(WindowRule, NeverLowersTheConfiguredWindow) {
    core::EndpointConfig c;
    // An unprivileged process gets net.core.rmem_max (often 208 KiB): keep the default.
    EXPECT_EQ(udp_window_per_path(c, 208u << 10), c.window_bytes_per_path);
    c.window_bytes_per_path = 900u << 10;
    EXPECT_EQ(udp_window_per_path(c, 4u << 20), 900u << 10);
}

TEST(AckRule, OneAckPerEighthOfTheWindowWithinTheDelayBound) {
    core::EndpointConfig c;
    c.window_bytes_per_path = 256u * c.max_payload;  // what udp_window_per_path gives perf
    fit_udp_acks(c);
    EXPECT_EQ(c.ack_every, 32u);
    EXPECT_EQ(c.max_ack_delay, kUdpMaxAckDelay);
    EXPECT_FALSE(c.ack_now_every_message);
    EXPECT_TRUE(c.gather_acks);
}

TEST(AckRule, NeverLowersTheConfiguredRate) {
    core::EndpointConfig c;  // 64-packet window: an eighth is 8
    c.ack_every = 12;
    c.max_ack_delay = std::chrono::microseconds(300);
    fit_udp_acks(c);
    EXPECT_EQ(c.ack_every, 12u);
    EXPECT_EQ(c.max_ack_delay, std::chrono::microseconds(300));
    core::EndpointConfig small;
    small.window_bytes_per_path = 4u * small.max_payload;  // an eighth rounds to 0
    fit_udp_acks(small);
    EXPECT_EQ(small.ack_every, core::EndpointConfig{}.ack_every);
}

}  // namespace
}  // namespace mroce::api
