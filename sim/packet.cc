#include "sim/packet.h"

#include "util/check.h"

namespace mroce::sim {

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

PacketPtr PacketPool::small_copy(Packet& big) {
    MROCE_DCHECK(big.bytes.size() <= kSmallSlabBytes);
    PacketPtr p = take_small();
    p->bytes.assign(big.bytes.data(), big.bytes.data() + big.bytes.size());
    p->id = big.id;
    big.id = next_id_++;
    return p;
}

PacketPtr PacketPool::clone(const Packet& original) {
    PacketPtr copy = take();  // a copy consumes no id: ids count original packets
    copy->bytes.assign(original.bytes.data(), original.bytes.data() + original.bytes.size());
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
