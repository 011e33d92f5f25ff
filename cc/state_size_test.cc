// cc/state_size_test.cc — how many bytes the congestion-control state takes per path and
// per connection (spec §9.3 "State per path and per connection", issue 13: "per-path and
// per-connection state documented in bytes"). The figures are sizeof, measured here, not
// estimated; the test prints them and fails when they move away from the spec's table, so
// the table is updated with the structs. They hold for LP64 (x86-64, aarch64).
#include <gtest/gtest.h>

#include <cstdio>

#include "cc/aimd.h"
#include "cc/congestion.h"
#include "cc/fair_share.h"
#include "cc/send_rate.h"

namespace mroce::cc {
namespace {

TEST(StateSize, CongestionControlBytesPerPathAndPerConnection) {
    std::printf("Aimd, per path (PathCc):                %zu bytes\n", Aimd::kPathStateBytes);
    std::printf("Aimd, per connection (the object):      %zu bytes\n", sizeof(Aimd));
    std::printf("FixedWindow, per connection:            %zu bytes\n", sizeof(FixedWindow));
    std::printf("SendRate, per connection (sender):      %zu bytes\n", sizeof(SendRate));
    std::printf("FairShare::Sender, per connection (rx): %zu bytes\n", FairShare::kSenderStateBytes);
    std::printf("FairShare, per endpoint (rx):           %zu bytes\n", sizeof(FairShare));
    if constexpr (sizeof(void*) != 8) GTEST_SKIP() << "the spec's table is for LP64";
    // The spec's table (docs/spec.md §9.3): update it with the structs.
    EXPECT_EQ(Aimd::kPathStateBytes, 88u);
    EXPECT_EQ(sizeof(Aimd), 80u);
    EXPECT_EQ(sizeof(FixedWindow), 16u);
    EXPECT_EQ(sizeof(SendRate), 144u);
    EXPECT_EQ(FairShare::kSenderStateBytes, 128u);
    EXPECT_EQ(sizeof(FairShare), 264u);
}

}  // namespace
}  // namespace mroce::cc
