#include "sim/packet.h"

#include "util/check.h"

namespace mroce::sim {

namespace {

// run_end returns the first index at or after `from` (<= n) whose byte is not v, given
// that p[from - 1] is v. In blocks: memcmp of a block against itself shifted by one byte
// says whether every byte equals its predecessor, which glibc answers many bytes per
// cycle. 256-byte blocks while they match, then halving blocks down to 8 bytes (each
// matches at most once: what is left of the run is shorter than the block before), then
// byte by byte: the scan of a 4 KB payload must stay a small part of the cost of making it.
constexpr size_t kBlock = 256;
constexpr size_t kLastBlock = 8;

size_t run_end(const std::byte* p, size_t from, size_t n, std::byte v) {
    size_t i = from;
    while (n - i >= kBlock && std::memcmp(p + i - 1, p + i, kBlock) == 0) i += kBlock;
    for (size_t b = kBlock / 2; b >= kLastBlock; b /= 2)
        if (n - i >= b && std::memcmp(p + i - 1, p + i, b) == 0) i += b;
    while (i < n && p[i] == v) ++i;
    return i;
}

// run_begin is run_end mirrored: the lowest index at or before `to` such that every byte
// from it up to `to` is v, given that p[to] is v.
size_t run_begin(const std::byte* p, size_t to, std::byte v) {
    size_t i = to;
    while (i >= kBlock && std::memcmp(p + i - kBlock, p + i - kBlock + 1, kBlock) == 0) i -= kBlock;
    for (size_t b = kBlock / 2; b >= kLastBlock; b /= 2)
        if (i >= b && std::memcmp(p + i - b, p + i - b + 1, b) == 0) i -= b;
    while (i > 0 && p[i - 1] == v) --i;
    return i;
}

}  // namespace

ByteRun middle_run(std::span<const std::byte> d) {
    if (d.empty()) return {};
    const size_t mid = d.size() / 2;
    const std::byte v = d[mid];
    const size_t begin = run_begin(d.data(), mid, v);
    const size_t end = run_end(d.data(), mid + 1, d.size(), v);
    return ByteRun{static_cast<uint32_t>(begin), static_cast<uint32_t>(end - begin), v};
}

std::span<const std::byte> PacketBytes::view(std::vector<std::byte>& scratch) const {
    if (!elided()) return {data_, size_};
    if (scratch.size() < size_) scratch.resize(size_);
    std::byte* out = scratch.data();
    const size_t after = size_ - run_.offset - run_.length;
    std::memcpy(out, data_, run_.offset);
    std::memset(out + run_.offset, static_cast<int>(run_.value), run_.length);
    std::memcpy(out + run_.offset + run_.length, data_ + run_.offset, after);
    return {out, size_};
}

void PacketBytes::assign_elided(std::span<const std::byte> d, const ByteRun& r) {
    MROCE_DCHECK(r.length > 0 && r.offset + size_t{r.length} <= d.size());
    clear();
    resize(d.size() - r.length);  // what is left; within the slab (compact checked)
    std::memcpy(data_, d.data(), r.offset);
    std::memcpy(data_ + r.offset, d.data() + r.offset + r.length, d.size() - r.offset - r.length);
    size_ = d.size();
    run_ = r;
}

void PacketBytes::assign_copy(const PacketBytes& other) {
    const size_t stored = other.size_ - other.run_.length;
    clear();
    resize(stored);
    if (stored != 0) std::memcpy(data_, other.data_, stored);
    size_ = other.size_;
    run_ = other.run_;
}

PacketPool::~PacketPool() {
    // A packet still owned elsewhere would return into freed memory: the owner outlived
    // the Sim. That is a bug in the test or component, not a runtime condition.
    MROCE_DCHECK(outstanding_ == 0);
}

PacketPtr PacketPool::acquire() {
    PacketPtr p = take();
    p->id = next_id_++;
    return p;
}

template <class SlabT>
void PacketPool::add_chunk(std::vector<std::unique_ptr<SlabT[]>>& arena,
                           std::vector<Packet*>& free, bool small) {
    chunks_.push_back(std::make_unique<Packet[]>(kChunkPackets));
    // for_overwrite: the slabs are not zeroed (nor touched) until a packet is written.
    arena.push_back(std::make_unique_for_overwrite<SlabT[]>(kChunkPackets));
    Packet* chunk = chunks_.back().get();
    SlabT* slabs = arena.back().get();
    for (size_t i = 0; i < kChunkPackets; ++i) {
        chunk[i].bytes.data_ = slabs[i].bytes;
        chunk[i].bytes.capacity_ = sizeof(slabs[i].bytes);
        chunk[i].small = small;
    }
    // Pushed in reverse so packets are handed out in address order.
    for (size_t i = kChunkPackets; i-- > 0;) free.push_back(&chunk[i]);
    allocated_ += kChunkPackets;
}

PacketPtr PacketPool::take() {
    if (free_.empty()) add_chunk(payloads_, free_, false);
    Packet* p = free_.back();
    free_.pop_back();
    ++outstanding_;
    return PacketPtr(p, PacketReturn{this});
}

PacketPtr PacketPool::take_small() {
    if (small_free_.empty()) add_chunk(small_payloads_, small_free_, true);
    Packet* p = small_free_.back();
    small_free_.pop_back();
    ++outstanding_;
    return PacketPtr(p, PacketReturn{this});
}

PacketPtr PacketPool::compact(Packet& big) {
    const std::span<const std::byte> d(big.bytes.data(), big.bytes.size());
    if (d.size() <= kSmallSlabBytes) return small_copy(big, ByteRun{});
    const ByteRun run = middle_run(d);
    if (d.size() - run.length > kSmallSlabBytes) return PacketPtr(nullptr, {});
    return small_copy(big, run);
}

PacketPtr PacketPool::small_copy(Packet& big, const ByteRun& elide) {
    PacketPtr p = take_small();
    if (elide.length == 0) {
        p->bytes.assign(big.bytes.data(), big.bytes.data() + big.bytes.size());
    } else {
        const std::span<const std::byte> d(big.bytes.data(), big.bytes.size());
        p->bytes.assign_elided(d, elide);
    }
    p->id = big.id;
    big.id = next_id_++;
    return p;
}

PacketPtr PacketPool::clone(const Packet& original) {
    // A copy consumes no id: ids count original packets. An elided copy stays small.
    PacketPtr copy = original.bytes.elided() ? take_small() : take();
    copy->bytes.assign_copy(original.bytes);
    copy->meta = original.meta;
    copy->id = original.id;
    copy->route = original.route;
    copy->sent_at = original.sent_at;
    copy->duplicate = true;
    copy->traffic_class = original.traffic_class;
    copy->data = original.data;
    return copy;
}

void PacketPool::release(Packet* p) {
    p->bytes.clear();  // keeps capacity: the next user of this packet does not allocate
    p->meta = PacketMeta{};
    p->route = kNoRoute;
    p->duplicate = false;
    p->traffic_class = 0;
    p->data = false;
    p->sent_at = SimTime{};
    --outstanding_;
    (p->small ? small_free_ : free_).push_back(p);
}

}  // namespace mroce::sim
