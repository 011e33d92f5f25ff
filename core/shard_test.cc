// core/shard_test.cc — what a sharded device (api/, docs/design.md §12) asks of the
// engine: connection ids that carry the shard, memory keys mirrored between shards built
// from one secret while tokens are not, and streams adopted under an id given elsewhere.
#include <gtest/gtest.h>

#include <vector>

#include "core/endpoint.h"

namespace mroce::core {
namespace {

const Address kLocal = Address::ipv4(0x0a000001, 4797);
Address peer(uint16_t i) { return Address::ipv4(0x0a000100 + i, 4797); }

EndpointConfig shard_config(uint32_t bits, uint32_t shard) {
    EndpointConfig cfg;
    cfg.conn_id_shard_bits = bits;
    cfg.conn_id_shard = shard;
    return cfg;
}

TEST(Shard, ConnectionIdsCarryTheShardInTheirTopBits) {
    for (uint32_t shard = 0; shard < 4; ++shard) {
        Endpoint ep(shard_config(2, shard), kLocal, 11 + shard);
        const uint32_t pd = ep.alloc_pd();
        for (uint16_t i = 1; i <= 200; ++i) {
            ASSERT_TRUE(ep.create_stream(pd, peer(i), 1, Time{}).ok());
            const uint32_t id = ep.connection_to(peer(i));
            ASSERT_NE(id, 0u);
            EXPECT_EQ(id >> 30, shard) << std::hex << id;
            EXPECT_NE(id >> 16, 0u);  // [CONN-11]: the random half stays non-zero
        }
    }
}

TEST(Shard, ConfigRejectsAShardThatDoesNotFit) {
    EXPECT_TRUE(config_error(shard_config(0, 0)).empty());
    EXPECT_TRUE(config_error(shard_config(4, 15)).empty());
    EXPECT_FALSE(config_error(shard_config(1, 2)).empty());
    EXPECT_FALSE(config_error(shard_config(5, 0)).empty());
}

TEST(Shard, OneSecretMirrorsMemoryKeysButNotTokens) {
    const CryptoSeed secret = crypto_seed_from(42);
    Endpoint a(shard_config(1, 0), kLocal, 1, secret);
    Endpoint b(shard_config(1, 1), kLocal, 2, secret);
    std::vector<std::byte> mem(4096);
    const uint32_t pa = a.alloc_pd(), pb = b.alloc_pd();
    ASSERT_EQ(pa, pb);
    for (int i = 0; i < 8; ++i) {
        auto ka = a.register_memory(pa, mem.data(), mem.size(), access::kRemoteWrite);
        auto kb = b.register_memory(pb, mem.data(), mem.size(), access::kRemoteWrite);
        ASSERT_TRUE(ka.ok() && kb.ok());
        EXPECT_EQ(ka->rkey, kb->rkey);
        if (i % 3 == 0) {
            ASSERT_EQ(a.deregister_memory(ka->lkey), Error::kOk);
            ASSERT_EQ(b.deregister_memory(kb->lkey), Error::kOk);
        }
    }
    ASSERT_TRUE(a.create_stream(pa, peer(1), 1, Time{}).ok());
    ASSERT_TRUE(b.create_stream(pb, peer(1), 1, Time{}).ok());
    EXPECT_NE(a.connection(a.connection_to(peer(1)))->token(),
              b.connection(b.connection_to(peer(1)))->token());
}

TEST(Shard, AdoptStreamTakesTheIdGivenElsewhere) {
    Endpoint numbering(EndpointConfig{}, kLocal, 3);
    Endpoint adopting(EndpointConfig{}, kLocal, 4);
    const uint32_t pd = numbering.alloc_pd();
    ASSERT_EQ(adopting.alloc_pd(), pd);
    std::vector<uint32_t> ids;
    for (int i = 0; i < 5; ++i) ids.push_back(*numbering.reserve_stream(pd));
    // Out of order, with gaps: the slots between stay empty.
    ASSERT_EQ(adopting.adopt_stream(pd, ids[3]), Error::kOk);
    ASSERT_EQ(adopting.adopt_stream(pd, ids[1]), Error::kOk);
    ASSERT_NE(adopting.stream(ids[3]), nullptr);
    EXPECT_EQ(adopting.stream(ids[3])->id, ids[3]);
    EXPECT_EQ(adopting.stream(ids[2]), nullptr);
    EXPECT_EQ(adopting.adopt_stream(pd, ids[3]), Error::kWrongState);  // live
    EXPECT_EQ(adopting.adopt_stream(pd, 0), Error::kInvalidArgument);
    EXPECT_EQ(adopting.adopt_stream(pd + 1, ids[4]), Error::kInvalidArgument);
    // An adopted stream is bound, and destroyed, as any other; its slot then takes the
    // numbering endpoint's next generation of that id.
    ASSERT_EQ(adopting.bind_stream(ids[3], peer(2), 9, Time{}), Error::kOk);
    ASSERT_EQ(adopting.destroy_stream(ids[3], Time{}), Error::kOk);
    const uint32_t next_generation = ids[3] + (1u << Endpoint::kStreamSlotBits);
    EXPECT_EQ(adopting.adopt_stream(pd, next_generation), Error::kOk);
    EXPECT_EQ(adopting.stream(ids[3]), nullptr);
}

}  // namespace
}  // namespace mroce::core
