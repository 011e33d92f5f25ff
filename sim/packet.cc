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

PacketPtr PacketPool::take() {
    if (free_.empty()) {
        chunks_.push_back(std::make_unique<Packet[]>(kChunkPackets));
        // for_overwrite: the slabs are not zeroed (nor touched) until a packet is written.
        payloads_.push_back(std::make_unique_for_overwrite<Slab[]>(kChunkPackets));
        Packet* chunk = chunks_.back().get();
        Slab* slabs = payloads_.back().get();
        for (size_t i = 0; i < kChunkPackets; ++i) {
            chunk[i].bytes.data_ = slabs[i].bytes;
            chunk[i].bytes.capacity_ = kSlabBytes;
        }
        // Pushed in reverse so packets are handed out in address order.
        for (size_t i = kChunkPackets; i-- > 0;) free_.push_back(&chunk[i]);
        allocated_ += kChunkPackets;
    }
    Packet* p = free_.back();
    free_.pop_back();
    ++outstanding_;
    return PacketPtr(p, PacketReturn{this});
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
    free_.push_back(p);
}

}  // namespace mroce::sim
