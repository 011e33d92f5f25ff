#include "core/memory.h"

namespace mroce::core {

Result<MemoryKeys> MemoryTable::register_region(uint32_t pd, void* base, uint64_t length,
                                                uint32_t access_flags) {
    if (!pd_exists(pd)) return Error::kInvalidArgument;
    if (base == nullptr && length != 0) return Error::kInvalidArgument;
    uint32_t index;
    if (!free_.empty()) {
        index = free_.back();
        free_.pop_back();
    } else {
        if (regions_.size() >= max_regions_) return Error::kExhausted;
        regions_.emplace_back();
        index = static_cast<uint32_t>(regions_.size() - 1);
    }
    MemoryRegion& mr = regions_[index];
    const uint32_t tag_mask = (1u << tag_bits_) - 1;
    uint32_t tag = rng_.next_u32() & tag_mask;
    if (tag == (mr.key & tag_mask)) tag = (tag + 1) & tag_mask;  // a reused slot never keeps its old key
    mr = MemoryRegion{pd, static_cast<std::byte*>(base), length, access_flags,
                      (index + 1) << tag_bits_ | tag, true};
    return MemoryKeys{mr.key, mr.key};
}

Error MemoryTable::deregister(uint32_t key) {
    const MemoryRegion* mr = find(key);
    if (!mr) return Error::kNotFound;
    const uint32_t index = (key >> tag_bits_) - 1;
    regions_[index].live = false;
    free_.push_back(index);
    return Error::kOk;
}

const MemoryRegion* MemoryTable::find(uint32_t key) const {
    const uint32_t slot = key >> tag_bits_;
    if (slot == 0 || slot > regions_.size()) return nullptr;
    const MemoryRegion& mr = regions_[slot - 1];
    if (!mr.live || mr.key != key) return nullptr;
    return &mr;
}

Result<std::byte*> MemoryTable::check(const MemoryRegion* mr, uint32_t pd, uint64_t addr,
                                      uint64_t len) const {
    if (!mr || mr->pd != pd) return Error::kAccessDenied;
    const uint64_t base = reinterpret_cast<uint64_t>(mr->base);
    // Overflow-safe bounds: addr >= base and addr + len <= base + length.
    if (addr < base || addr - base > mr->length || len > mr->length - (addr - base))
        return Error::kAccessDenied;
    return mr->base + (addr - base);
}

Result<std::byte*> MemoryTable::check_remote(uint32_t rkey, uint32_t pd, uint64_t addr,
                                             uint64_t len, uint32_t needed) const {
    const MemoryRegion* mr = find(rkey);
    // spec §8 [PLACE-4]: key, protection domain, access flag and bounds, all checked.
    if (!mr || (mr->access & needed) != needed) return Error::kAccessDenied;
    return check(mr, pd, addr, len);
}

Result<std::byte*> MemoryTable::check_local(uint32_t lkey, uint32_t pd, uint64_t addr,
                                            uint64_t len, bool write) const {
    const MemoryRegion* mr = find(lkey);
    if (!mr || (write && !(mr->access & access::kLocalWrite))) return Error::kAccessDenied;
    return check(mr, pd, addr, len);
}

}  // namespace mroce::core
