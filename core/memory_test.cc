// core/memory_test.cc — protection checks of the memory table (spec [PLACE-4]).
#include "core/memory.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace mroce::core {
namespace {

struct Fixture {
    MemoryTable table{CryptoRng(crypto_seed_from(5)), 16};
    std::vector<std::byte> buf = std::vector<std::byte>(4096);
    uint32_t pd = table.alloc_pd();
    uint64_t base() const { return reinterpret_cast<uint64_t>(buf.data()); }
};

TEST(Memory, RemoteWriteInsideTheRegionIsAllowed) {
    Fixture f;
    auto k = f.table.register_region(f.pd, f.buf.data(), 4096,
                                     access::kLocalWrite | access::kRemoteWrite);
    ASSERT_TRUE(k.ok());
    auto p = f.table.check_remote(k->rkey, f.pd, f.base() + 100, 200, access::kRemoteWrite);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, f.buf.data() + 100);
    EXPECT_TRUE(f.table.check_remote(k->rkey, f.pd, f.base(), 4096, access::kRemoteWrite).ok());
    EXPECT_TRUE(f.table.check_remote(k->rkey, f.pd, f.base() + 4096, 0, access::kRemoteWrite).ok());
}

// [PLACE-4] every way out of the region, a wrong key, pd or flag is refused.
TEST(Memory, EveryViolationIsRefused) {
    Fixture f;
    auto k = *f.table.register_region(f.pd, f.buf.data(), 4096, access::kRemoteWrite);
    const uint32_t other_pd = f.table.alloc_pd();
    auto denied = [&](uint32_t key, uint32_t pd, uint64_t addr, uint64_t len, uint32_t need) {
        return f.table.check_remote(key, pd, addr, len, need).error() == Error::kAccessDenied;
    };
    EXPECT_TRUE(denied(k.rkey, f.pd, f.base() + 4000, 97, access::kRemoteWrite));  // past end
    EXPECT_TRUE(denied(k.rkey, f.pd, f.base() - 1, 10, access::kRemoteWrite));     // before
    EXPECT_TRUE(denied(k.rkey, f.pd, f.base() + 4097, 0, access::kRemoteWrite));
    EXPECT_TRUE(denied(k.rkey, f.pd, f.base() + 8, UINT64_MAX, access::kRemoteWrite));  // wrap
    EXPECT_TRUE(denied(k.rkey, f.pd, UINT64_MAX - 2, 8, access::kRemoteWrite));
    EXPECT_TRUE(denied(k.rkey, other_pd, f.base(), 8, access::kRemoteWrite));  // wrong pd
    EXPECT_TRUE(denied(k.rkey, f.pd, f.base(), 8, access::kRemoteRead));       // missing flag
    EXPECT_TRUE(denied(k.rkey ^ 1, f.pd, f.base(), 8, access::kRemoteWrite));  // wrong tag
    EXPECT_TRUE(denied(k.rkey + 256, f.pd, f.base(), 8, access::kRemoteWrite));  // other slot
    EXPECT_TRUE(denied(0, f.pd, f.base(), 8, access::kRemoteWrite));
    // Local writes need LOCAL_WRITE.
    EXPECT_EQ(f.table.check_local(k.lkey, f.pd, f.base(), 8, true).error(), Error::kAccessDenied);
    EXPECT_TRUE(f.table.check_local(k.lkey, f.pd, f.base(), 8, false).ok());
}

// A deregistered key, and a key of a reused slot, never reach the new region.
TEST(Memory, StaleKeysMiss) {
    Fixture f;
    auto k1 = *f.table.register_region(f.pd, f.buf.data(), 4096, access::kRemoteWrite);
    EXPECT_EQ(f.table.deregister(k1.rkey), Error::kOk);
    EXPECT_EQ(f.table.deregister(k1.rkey), Error::kNotFound);
    EXPECT_FALSE(f.table.check_remote(k1.rkey, f.pd, f.base(), 8, access::kRemoteWrite).ok());
    auto k2 = *f.table.register_region(f.pd, f.buf.data(), 4096, access::kRemoteWrite);
    EXPECT_EQ(k2.rkey >> 16, k1.rkey >> 16);  // same slot reused...
    EXPECT_NE(k2.rkey, k1.rkey);            // ...under a different key
    EXPECT_FALSE(f.table.check_remote(k1.rkey, f.pd, f.base(), 8, access::kRemoteWrite).ok());
    EXPECT_TRUE(f.table.check_remote(k2.rkey, f.pd, f.base(), 8, access::kRemoteWrite).ok());
}

// [PLACE-29]: with t tag bits a key's low t bits are random and the rest number the
// regions: 2^(32 - t) - 1 regions fit, the next is refused; the tags of many keys take
// many values (not 8 bits' worth).
TEST(Memory, TagBitsSplitTheKey) {
    for (uint32_t bits : {8u, 16u, 24u}) {
        MemoryTable t{CryptoRng(crypto_seed_from(bits)), bits};
        EXPECT_EQ(t.max_regions(), (size_t{1} << (32 - bits)) - 1);
        const uint32_t pd = t.alloc_pd();
        std::vector<uint32_t> tags;
        for (int i = 0; i < 200; ++i) {
            const auto k = *t.register_region(pd, nullptr, 0, 0);
            EXPECT_EQ(k.rkey >> bits, static_cast<uint32_t>(i + 1));
            tags.push_back(k.rkey & ((1u << bits) - 1));
        }
        std::sort(tags.begin(), tags.end());
        const size_t distinct = static_cast<size_t>(std::unique(tags.begin(), tags.end()) - tags.begin());
        EXPECT_GT(distinct, bits == 8 ? 100u : 195u) << bits << " bits";
    }
    MemoryTable small{CryptoRng(crypto_seed_from(1)), 24};  // 255 regions
    const uint32_t pd = small.alloc_pd();
    for (int i = 0; i < 255; ++i) ASSERT_TRUE(small.register_region(pd, nullptr, 0, 0).ok());
    EXPECT_EQ(small.register_region(pd, nullptr, 0, 0).error(), Error::kExhausted);
}

TEST(Memory, RegistrationArgumentsAreChecked) {
    Fixture f;
    EXPECT_EQ(f.table.register_region(99, f.buf.data(), 8, 0).error(), Error::kInvalidArgument);
    EXPECT_EQ(f.table.register_region(f.pd, nullptr, 8, 0).error(), Error::kInvalidArgument);
    EXPECT_TRUE(f.table.register_region(f.pd, nullptr, 0, 0).ok());
}

}  // namespace
}  // namespace mroce::core
