// tools/perf_check_test.cc — the --check pattern: it depends on every part of its key and
// on the offset, so each kind of corruption perf_check.h names is a mismatch, reported at
// its first byte.
#include "tools/perf_check.h"

#include <gtest/gtest.h>

#include <vector>

namespace mroce::tools::perf {
namespace {

std::vector<std::byte> message(const PatternKey& k, size_t n) {
    std::vector<std::byte> v(n);
    fill_pattern(v, k);
    return v;
}

TEST(PerfCheck, AMessageMatchesItsOwnPattern) {
    for (uint32_t size : {1u, 2u, 7u, 8u, 9u, 4096u, 65537u}) {
        const PatternKey k{size, 3, 17, Direction::kFromClient};
        const auto m = message(k, size);
        for (uint64_t o = 0; o < size; o += 1 + size / 64)
            EXPECT_EQ(static_cast<uint8_t>(m[o]), pattern_byte(k, o)) << size << " @" << o;
        CheckTally t;
        EXPECT_TRUE(t.verify(m, k));
        EXPECT_TRUE(t.ok());
        EXPECT_EQ(t.messages(), 1u);
    }
}

// A flipped bit: counted once, reported at its offset with both values.
TEST(PerfCheck, AFlippedBitIsReportedAtItsOffset) {
    const PatternKey k{65536, 0, 5, Direction::kFromClient};
    auto m = message(k, 65536);
    m[40'000] ^= std::byte{0x10};
    CheckTally t;
    EXPECT_FALSE(t.verify(m, k));
    EXPECT_EQ(t.bad_messages(), 1u);
    EXPECT_EQ(t.bad_bytes(), 1u);
    ASSERT_TRUE(t.first().has_value());
    EXPECT_EQ(t.first()->message, 5u);
    EXPECT_EQ(t.first()->offset, 40'000u);
    EXPECT_EQ(t.first()->expected, pattern_byte(k, 40'000));
    EXPECT_EQ(t.first()->got, pattern_byte(k, 40'000) ^ 0x10);
    const std::string line = check_failure(t.to_json(), "server");
    EXPECT_NE(line.find("message 5 offset 40000"), std::string::npos) << line;
}

// A segment of the right message placed at the wrong offset, a segment of another
// message, of another queue pair, of the other direction or of another size, and a slot
// still holding the message before: all mismatches (a constant pattern would miss most).
TEST(PerfCheck, MisplacedAndStaleSegmentsAreMismatches) {
    constexpr size_t kSize = 16384, kSeg = 4096;
    const PatternKey k{kSize, 1, 100, Direction::kFromClient};
    const auto good = message(k, kSize);
    auto with_segment_from = [&](const std::vector<std::byte>& src, size_t from, size_t to) {
        auto m = good;
        std::copy(src.begin() + from, src.begin() + from + kSeg, m.begin() + to);
        return m;
    };
    const std::vector<std::vector<std::byte>> bad = {
        with_segment_from(good, 0, kSeg),  // its own first segment, one segment late
        with_segment_from(message({kSize, 1, 101, Direction::kFromClient}, kSize), kSeg, kSeg),
        with_segment_from(message({kSize, 0, 100, Direction::kFromClient}, kSize), kSeg, kSeg),
        with_segment_from(message({kSize, 1, 100, Direction::kFromServer}, kSize), kSeg, kSeg),
        with_segment_from(message({kSize * 2, 1, 100, Direction::kFromClient}, kSize), kSeg, kSeg),
        message({kSize, 1, 36, Direction::kFromClient}, kSize),  // stale slot
        std::vector<std::byte>(kSize, std::byte{0x5a}),                  // never written
    };
    for (size_t i = 0; i < bad.size(); ++i) {
        CheckTally t;
        EXPECT_FALSE(t.verify(bad[i], k)) << "case " << i;
        ASSERT_TRUE(t.first().has_value());
        EXPECT_GE(t.bad_bytes(), kSeg * 9 / 10 * (i < 5 ? 1 : 4)) << "case " << i;
        EXPECT_EQ(t.first()->offset, i < 5 ? kSeg : 0u) << "case " << i;
    }
}

// An atomic's value: counted as one 8-byte message, reported with both values.
TEST(PerfCheck, AWrongAtomicValueIsReportedWithBothValues) {
    CheckTally t;
    EXPECT_TRUE(t.verify_value(0, 0, true, 0, 0));
    EXPECT_FALSE(t.verify_value(1, 7, false, 7, 1u << 20));
    EXPECT_EQ(t.messages(), 2u);
    EXPECT_EQ(t.bad_messages(), 1u);
    const std::string line = check_failure(t.to_json(), "client");
    EXPECT_NE(line.find("queue pair 1 message 7 offset 0: expected 0x07, got 0x100000"), std::string::npos)
        << line;
}

TEST(PerfCheck, FailureLineReadsAPeersTallyDefensively) {
    EXPECT_EQ(check_failure(CheckTally().to_json(), "client"), "");
    EXPECT_NE(check_failure(nlohmann::json("x"), "server"), "");
    nlohmann::json odd = {{"bad_messages", 2}, {"first_mismatch", {{"offset", "big"}}}};
    EXPECT_NE(check_failure(odd, "server").find("2 of 0 messages"), std::string::npos);
    CheckTally t;
    t.missing(3);
    EXPECT_FALSE(t.ok());
    EXPECT_NE(check_failure(t.to_json(), "server").find("3 messages missing"), std::string::npos);
}

}  // namespace
}  // namespace mroce::tools::perf
