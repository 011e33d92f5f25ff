// core/memory.h — protection domains, memory regions and the key checks every placement
// goes through. Ownership of registered memory is described in docs/ownership.md: the
// application owns the bytes and must keep them alive until deregister_memory (for a
// peer's access, [PLACE-25], [PLACE-26]) and until its own work requests that name them
// have completed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "util/result.h"
#include "util/crypto.h"
#include "util/rng.h"

namespace mroce::core {

// Access flags, bit-compatible with ibv_access_flags for the values we share.
namespace access {
inline constexpr uint32_t kLocalWrite = 1u << 0;
inline constexpr uint32_t kRemoteWrite = 1u << 1;
inline constexpr uint32_t kRemoteRead = 1u << 2;
inline constexpr uint32_t kRemoteAtomic = 1u << 3;
}  // namespace access

struct MemoryKeys {
    uint32_t lkey = 0;
    uint32_t rkey = 0;
};

struct MemoryRegion {
    uint32_t pd = 0;
    std::byte* base = nullptr;
    uint64_t length = 0;
    uint32_t access = 0;
    uint32_t key = 0;  // lkey == rkey == key: (index + 1) above, a random tag in the low bits
    bool live = false;
};

// MemoryTable holds every MR of one endpoint. Keys are ((index + 1) << tag_bits | tag),
// the tag drawn from a cryptographic generator, so a stale or guessed key fails the tag
// check instead of hitting another region: a peer guessing a live key within one PD needs
// 2^tag_bits / 2 tries on average ([PLACE-29]). The rest of the 32 bits (verbs keys are
// 32 bits) index the regions, so more tag bits mean fewer regions.
class MemoryTable {
public:
    MemoryTable(CryptoRng rng, uint32_t tag_bits)
        : rng_(rng), tag_bits_(tag_bits), max_regions_((size_t{1} << (32 - tag_bits)) - 1) {}

    uint32_t alloc_pd() { return ++next_pd_; }
    bool pd_exists(uint32_t pd) const { return pd != 0 && pd <= next_pd_; }

    // register_region: base/length must be non-null/non-zero unless length == 0.
    // Errors: kInvalidArgument (unknown pd, null base), kExhausted (over max_regions).
    Result<MemoryKeys> register_region(uint32_t pd, void* base, uint64_t length, uint32_t access);
    // deregister: Errors: kNotFound.
    Error deregister(uint32_t key);

    // check_remote: the memory at [addr, addr+len) under rkey, in pd, with `needed` access.
    // Returns a pointer to addr. Errors: kAccessDenied (unknown key, wrong pd, missing
    // flag, out of bounds — spec [PLACE-4]).
    Result<std::byte*> check_remote(uint32_t rkey, uint32_t pd, uint64_t addr, uint64_t len,
                                    uint32_t needed) const;
    // check_local: the same for an lkey used in a local work request; local access needs
    // kLocalWrite only when the engine writes into the buffer (receives).
    Result<std::byte*> check_local(uint32_t lkey, uint32_t pd, uint64_t addr, uint64_t len,
                                   bool write) const;

    // max_regions: how many regions may be registered at once.
    size_t max_regions() const { return max_regions_; }

private:
    const MemoryRegion* find(uint32_t key) const;
    Result<std::byte*> check(const MemoryRegion* mr, uint32_t pd, uint64_t addr,
                             uint64_t len) const;

    CryptoRng rng_;
    uint32_t tag_bits_;
    size_t max_regions_;
    uint32_t next_pd_ = 0;
    std::vector<MemoryRegion> regions_;
    std::vector<uint32_t> free_;
};

}  // namespace mroce::core
