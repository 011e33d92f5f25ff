// sim/packet.h — a packet in flight in the simulator, its pool, and the sink interface.
//
// A simulated packet is the real datagram (the exact bytes an engine produced, parsed by
// the real wire/ on arrival) plus its PacketMeta. Packets are recycled through a
// PacketPool so that, once warmed up, moving a packet through hosts and links allocates
// nothing: every packet has its own payload slab in the pool's arena for good.
//
// Ownership: a packet is owned by exactly one PacketPtr at a time (a link queue, an event
// callback, a host). Destroying the PacketPtr returns the packet to its pool.
// Threading: one simulation is single-threaded; nothing here is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "sim/sim_time.h"
#include "util/packet_meta.h"

namespace mroce::sim {

// PacketBytes holds a packet's datagram. Its storage is the packet's own slab in the
// pool's payload arena (PacketPool::kSlabBytes, enough for a 4 KB payload and its
// headers), so 4 KB payloads sit in arena blocks of their own, not interleaved by malloc
// with packet headers, queues and event slots; a datagram larger than the slab moves to a
// heap buffer that the packet keeps. Like the std::vector it replaces, resize leaves new
// bytes unset: the sender's engine writes a datagram straight into a recycled packet, and
// zeroing 4 KB first would cost as much as the copy it replaces. The bytes are owned by
// the packet; its pool must outlive every use (the Sim destroys its pool last).
class PacketBytes {
  public:
    PacketBytes() = default;
    PacketBytes(const PacketBytes&) = delete;
    PacketBytes& operator=(const PacketBytes&) = delete;

    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    size_t capacity() const { return capacity_; }
    std::byte* data() { return data_; }
    const std::byte* data() const { return data_; }
    std::byte* begin() { return data_; }
    std::byte* end() { return data_ + size_; }
    const std::byte* begin() const { return data_; }
    const std::byte* end() const { return data_ + size_; }
    std::byte& operator[](size_t i) { return data_[i]; }
    const std::byte& operator[](size_t i) const { return data_[i]; }

    // resize keeps the first min(n, size()) bytes; bytes beyond the old size are unset.
    void resize(size_t n) {
        if (n > capacity_) grow(n);
        size_ = n;
    }
    void clear() { size_ = 0; }  // keeps the storage
    void assign(const std::byte* first, const std::byte* last) {
        const auto n = static_cast<size_t>(last - first);
        size_ = 0;
        resize(n);
        if (n != 0) std::memcpy(data_, first, n);
    }

  private:
    friend class PacketPool;
    void grow(size_t n) {
        auto bigger = std::make_unique_for_overwrite<std::byte[]>(n);
        if (size_ != 0) std::memcpy(bigger.get(), data_, size_);
        heap_ = std::move(bigger);
        data_ = heap_.get();
        capacity_ = n;
    }

    std::byte* data_ = nullptr;
    size_t size_ = 0;
    size_t capacity_ = 0;
    std::unique_ptr<std::byte[]> heap_;  // only for a datagram larger than the slab
};

inline constexpr uint32_t kNoRoute = UINT32_MAX;
inline constexpr uint8_t kMaxTrafficClasses = 8;  // switch priorities (PFC classes)

struct Packet {
    PacketBytes bytes;             // the UDP payload, exactly as the sender's engine wrote it
    PacketMeta meta;               // src/dst as sent; ecn as marked so far on the way
    uint64_t id = 0;               // unique per pool (per Sim); a duplicate keeps the id
    uint32_t route = kNoRoute;     // ECMP route index chosen by the fabric, for taps/tests
    bool duplicate = false;        // true for copies made by a duplication impairment
    uint8_t traffic_class = 0;     // switch priority (PFC class); set by the sending host
    bool data = false;             // a DATA packet (HostConfig::is_data at the sending NIC)
    bool small = false;            // its slab is PacketPool::kSmallSlabBytes (set once, by the pool)
    SimTime sent_at{};             // when the sender's NIC finished serialising it

    size_t size() const { return bytes.size(); }
};

class PacketPool;

struct PacketReturn {
    PacketPool* pool = nullptr;
    void operator()(Packet* p) const;
};

// PacketPtr owns one pooled packet; its destructor returns the packet to the pool.
using PacketPtr = std::unique_ptr<Packet, PacketReturn>;

// PacketPool hands out packets and takes them back. It must outlive every PacketPtr it
// issued (Sim owns one and destroys it after its pending events; see event_queue.h).
class PacketPool {
  public:
    PacketPool() = default;
    PacketPool(const PacketPool&) = delete;
    PacketPool& operator=(const PacketPool&) = delete;
    ~PacketPool();

    // acquire returns an empty packet (no bytes, default meta) with a fresh id.
    PacketPtr acquire();

    // clone returns a copy of p (bytes, meta, id, route, sent_at) marked duplicate.
    PacketPtr clone(const Packet& p);

    // small_copy returns a packet with a small slab that holds big's bytes (at most
    // kSmallSlabBytes) and big's id; big, which stays with the caller for its next
    // datagram, takes the next id, as if it had been acquired after the small one.
    PacketPtr small_copy(Packet& big);

    size_t outstanding() const { return outstanding_; }  // packets currently owned by users
    size_t allocated() const { return allocated_; }      // packets ever created (pool size)

    // Packets are created kChunkPackets at a time (see chunks_).
    static constexpr size_t kChunkPackets = 256;
    // Every packet owns a payload slab of kSlabBytes in the arena (see payloads_): a 4 KB
    // payload plus up to 128 header bytes, a whole number of cache lines.
    static constexpr size_t kSlabBytes = 4096 + 128;
    // Control datagrams (ACKs, NACKs, PROBEs: a header and a 256-bit SACK) are copied
    // into packets of their own with slabs this small (small_copy). About half the packets
    // in flight are ACKs, and once any DATA had used a 4 KB slab it stayed resident for
    // every later ACK that borrowed it: in perm1024, tens of MB.
    static constexpr size_t kSmallSlabBytes = 256;

  private:
    friend struct PacketReturn;
    PacketPtr take();  // a recycled or new packet with a kSlabBytes slab, id not set
    PacketPtr take_small();  // the same with a kSmallSlabBytes slab
    void release(Packet* p);
    template <class SlabT>
    void add_chunk(std::vector<std::unique_ptr<SlabT[]>>& arena, std::vector<Packet*>& free,
                   bool small);

    // Packets are created in chunks so their headers sit together: switches and links
    // touch only the header (meta, size), and one header per page (next to its payload)
    // would cost a TLB miss per hop once many packets are in flight.
    std::vector<std::unique_ptr<Packet[]>> chunks_;
    // Payloads live apart from the headers, one arena block per chunk (packet i of a chunk
    // owns slab i of its block for good), so the hot headers stay dense and a payload is
    // never allocated or freed per packet. Owned by the pool, like the packets: freed only
    // when the Sim that owns the pool is destroyed, after every packet came back.
    struct alignas(64) Slab {
        std::byte bytes[kSlabBytes];
    };
    std::vector<std::unique_ptr<Slab[]>> payloads_;
    std::vector<Packet*> free_;
    struct alignas(64) SmallSlab {
        std::byte bytes[kSmallSlabBytes];
    };
    std::vector<std::unique_ptr<SmallSlab[]>> small_payloads_;
    std::vector<Packet*> small_free_;
    uint64_t next_id_ = 1;
    size_t outstanding_ = 0;
    size_t allocated_ = 0;
};

inline void PacketReturn::operator()(Packet* p) const { pool->release(p); }

// PacketSink is anything a packet can be handed to: a link, a host, the fabric (later a
// switch port). receive takes ownership. It may be called from inside an event callback
// and must not run the simulation recursively.
class PacketSink {
  public:
    virtual ~PacketSink() = default;
    virtual void receive(PacketPtr packet) = 0;
};

// PauseTarget is the upstream egress a PFC ingress pauses: a switch port or a host NIC
// port (see switch.h).
class PauseTarget {
  public:
    virtual ~PauseTarget() = default;
    // set_paused stops (true) or restarts (false) sending traffic class cls after the
    // packet in service. Called when the pause frame arrives.
    virtual void set_paused(uint8_t cls, bool paused) = 0;
};

}  // namespace mroce::sim
