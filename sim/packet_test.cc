// sim/packet_test.cc — elided datagrams (PacketPool::compact, PacketBytes::view, clone):
// a datagram whose middle is a run of one byte value travels without it, and is re-made
// exactly wherever it is read. Randomised; the seed is printed (MROCE_SEED replays it).
#include "sim/packet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/event_queue.h"
#include "sim/test_seed.h"
#include "util/rng.h"

namespace mroce::sim {
namespace {

using testing::seed_note;
using testing::test_seed;

// naive_middle_run is middle_run byte by byte.
ByteRun naive_middle_run(const std::vector<std::byte>& d) {
    if (d.empty()) return {};
    const size_t mid = d.size() / 2;
    size_t b = mid, e = mid + 1;
    while (b > 0 && d[b - 1] == d[mid]) --b;
    while (e < d.size() && d[e] == d[mid]) ++e;
    return ByteRun{static_cast<uint32_t>(b), static_cast<uint32_t>(e - b), d[mid]};
}

// random_bytes returns n bytes of which no two neighbours are equal.
std::vector<std::byte> random_bytes(Rng& rng, size_t n) {
    std::vector<std::byte> d(n);
    for (size_t k = 0; k < n; ++k) {
        do {
            d[k] = static_cast<std::byte>(rng.uniform(256));
        } while (k > 0 && d[k] == d[k - 1]);
    }
    return d;
}

// datagram returns head random bytes, run bytes of v, tail random bytes; the head's last
// and the tail's first byte may equal v (then the run is longer), as in a real header.
std::vector<std::byte> datagram(Rng& rng, size_t head, size_t run, std::byte v, size_t tail) {
    std::vector<std::byte> d = random_bytes(rng, head);
    d.insert(d.end(), run, v);
    const std::vector<std::byte> t = random_bytes(rng, tail);
    d.insert(d.end(), t.begin(), t.end());
    return d;
}

// a_length returns a length near the scan's block boundaries (multiples of 256) or any.
size_t a_length(Rng& rng, size_t max) {
    if (rng.bernoulli(0.5)) return rng.uniform(max + 1);
    const size_t near = 256 * rng.uniform(max / 256 + 1);
    const size_t l = near + rng.uniform(5);
    return std::min(max, l >= 2 ? l - 2 : l);
}

bool same(std::span<const std::byte> a, const std::vector<std::byte>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

TEST(MiddleRun, AgreesWithAByteByByteScan) {
    const uint64_t seed = test_seed(13);
    SCOPED_TRACE(seed_note(seed));
    Rng rng(seed);
    EXPECT_EQ(middle_run({}).length, 0u);
    for (int i = 0; i < 20'000; ++i) {
        const auto v = static_cast<std::byte>(rng.uniform(256));
        const std::vector<std::byte> d =
            datagram(rng, a_length(rng, 300), a_length(rng, 4300), v, a_length(rng, 300));
        if (d.empty()) continue;
        const ByteRun want = naive_middle_run(d), got = middle_run(d);
        ASSERT_EQ(got.offset, want.offset) << "datagram " << i << " of " << d.size();
        ASSERT_EQ(got.length, want.length) << "datagram " << i << " of " << d.size();
        ASSERT_EQ(got.value, want.value);
    }
}

// compact elides exactly when what is left fits a small slab, and the elided packet gives
// back every byte: view, operator[], size, and a clone of it.
TEST(PacketPool, CompactElidesTheMiddleRunAndRoundTripsExactly) {
    const uint64_t seed = test_seed(14);
    SCOPED_TRACE(seed_note(seed));
    Rng rng(seed);
    Sim sim(1);
    PacketPool& pool = sim.packets();
    PacketPtr big = pool.acquire();
    std::vector<std::byte> scratch;
    size_t elided = 0, kept = 0;
    for (int i = 0; i < 5'000; ++i) {
        SCOPED_TRACE(i);
        const auto v = static_cast<std::byte>(rng.uniform(256));
        const std::vector<std::byte> d = datagram(rng, rng.uniform(300), a_length(rng, 4096), v,
                                                  rng.uniform(300));
        if (d.size() > PacketPool::kSlabBytes) continue;
        big->bytes.assign(d.data(), d.data() + d.size());
        const uint64_t id = big->id;
        const bool fits = d.size() <= PacketPool::kSmallSlabBytes ||
                          d.size() - naive_middle_run(d).length <= PacketPool::kSmallSlabBytes;
        PacketPtr p = pool.compact(*big);
        ASSERT_TRUE(same(big->bytes.view(scratch), d)) << "the caller's packet keeps its bytes";
        ASSERT_FALSE(big->bytes.elided());
        ASSERT_EQ(p != nullptr, fits);
        if (!p) {
            ASSERT_EQ(big->id, id) << "nothing taken, no id used";
            ++kept;
            continue;
        }
        ASSERT_TRUE(p->small);
        ASSERT_EQ(p->id, id);
        ASSERT_EQ(big->id, id + 1);
        ASSERT_EQ(p->bytes.elided(), d.size() > PacketPool::kSmallSlabBytes);
        elided += p->bytes.elided();
        ASSERT_EQ(p->size(), d.size()) << "the whole datagram's size";
        ASSERT_TRUE(same(p->bytes.view(scratch), d));
        ASSERT_TRUE(same(pool.view(*p), d));
        const PacketBytes& read_only = p->bytes;  // operator[] const reads an elided datagram
        for (size_t k = 0; k < d.size(); ++k) ASSERT_EQ(read_only[k], d[k]) << "byte " << k;
        p->meta.ecn = 3;
        PacketPtr copy = pool.clone(*p);
        ASSERT_TRUE(copy->duplicate);
        ASSERT_EQ(copy->id, p->id);
        ASSERT_EQ(copy->meta.ecn, 3);
        ASSERT_EQ(copy->small, p->bytes.elided());  // an elided copy stays small
        ASSERT_EQ(copy->bytes.elided(), p->bytes.elided());
        ASSERT_EQ(copy->size(), d.size());
        ASSERT_TRUE(same(copy->bytes.view(scratch), d));
    }
    // Both outcomes were exercised.
    EXPECT_GT(elided, 1000u);
    EXPECT_GT(kept, 1000u);
    big.reset();
    EXPECT_EQ(pool.outstanding(), 0u);
}

// A datagram without a long run (real data) is not touched: compact declines it, and it
// travels in its 4 KB slab as before.
TEST(PacketPool, CompactLeavesDatagramsWithoutARunAlone) {
    const uint64_t seed = test_seed(15);
    SCOPED_TRACE(seed_note(seed));
    Rng rng(seed);
    Sim sim(1);
    PacketPool& pool = sim.packets();
    PacketPtr big = pool.acquire();
    for (int i = 0; i < 1'000; ++i) {
        const std::vector<std::byte> d =
            random_bytes(rng, PacketPool::kSmallSlabBytes + 2 + rng.uniform(4000));
        big->bytes.assign(d.data(), d.data() + d.size());
        const uint64_t id = big->id;
        ASSERT_EQ(pool.compact(*big), nullptr) << "datagram " << i;
        ASSERT_EQ(big->id, id);
        ASSERT_TRUE(std::equal(big->bytes.begin(), big->bytes.end(), d.begin(), d.end()));
    }
}

// A returned elided packet comes back plain: the next user writes its datagram as usual.
TEST(PacketPool, ElisionEndsWhenThePacketIsReturned) {
    Sim sim(1);
    PacketPool& pool = sim.packets();
    PacketPtr big = pool.acquire();
    big->bytes.resize(4000);
    std::fill(big->bytes.begin(), big->bytes.end(), std::byte{7});
    PacketPtr p = pool.compact(*big);
    ASSERT_TRUE(p && p->bytes.elided());
    Packet* raw = p.get();
    p.reset();
    big->bytes.resize(100);  // a control datagram now: it takes the same small packet
    PacketPtr again = pool.compact(*big);
    ASSERT_EQ(again.get(), raw);
    EXPECT_FALSE(again->bytes.elided());
    EXPECT_EQ(again->size(), 100u);
    EXPECT_EQ(again->bytes.data()[99], std::byte{7});
}

// An elided datagram has no contiguous bytes: reading it as a span is a bug, caught.
TEST(PacketBytesDeathTest, ElidedBytesCannotBeReadAsASpan) {
    Sim sim(1);
    PacketPool& pool = sim.packets();
    PacketPtr big = pool.acquire();
    big->bytes.resize(4000);
    std::fill(big->bytes.begin(), big->bytes.end(), std::byte{1});
    PacketPtr p = pool.compact(*big);
    ASSERT_TRUE(p && p->bytes.elided());
    const Packet& c = *p;
    EXPECT_DEATH((void)std::span<const std::byte>(c.bytes), "elided");
}

}  // namespace
}  // namespace mroce::sim
