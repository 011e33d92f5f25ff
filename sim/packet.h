// sim/packet.h — a packet in flight in the simulator, its pool, and the sink interface.
//
// A simulated packet is the real datagram (the exact bytes an engine produced, parsed by
// the real wire/ on arrival) plus its PacketMeta. Packets are recycled through a
// PacketPool so that, once warmed up, moving a packet through hosts and links allocates
// nothing: every packet has its own payload slab in the pool's arena for good.
//
// A datagram may travel with one run of a repeated byte value elided (ByteRun): the
// simulator's workloads WRITE from a source buffer filled with one byte value, so a DATA
// datagram is a header, a run of one value and perhaps a trailer, and tens of thousands
// of them in flight need not each hold 4 KB (issue 13: perm1024 held 128 MB of payload
// slabs). The elided packet keeps what is left, the run's place, length and value; its
// size() is the whole datagram's, so links and switches serialise and account exactly as
// before. Where bytes are read they are re-made exactly (PacketBytes::view).
//
// Ownership: a packet is owned by exactly one PacketPtr at a time (a link queue, an event
// callback, a host). Destroying the PacketPtr returns the packet to its pool.
// Threading: one simulation is single-threaded; nothing here is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "sim/sim_time.h"
#include "util/check.h"
#include "util/packet_meta.h"

namespace mroce::sim {

// ByteRun is `length` bytes of the value `value` starting at byte `offset` of a datagram
// (length 0: none).
struct ByteRun {
    uint32_t offset = 0;
    uint32_t length = 0;
    std::byte value{};
};

// middle_run returns the run of one byte value that covers the middle byte of d (index
// d.size() / 2), as long as it extends either way; length 0 if d is empty. Cheap for a
// datagram without a long run: it stops at the first byte that differs. Used to spot a
// datagram whose payload is one repeated value, whatever the header and trailer around it.
ByteRun middle_run(std::span<const std::byte> d);

// PacketBytes holds a packet's datagram. Its storage is the packet's own slab in the
// pool's payload arena (PacketPool::kSlabBytes, enough for a 4 KB payload and its
// headers), so 4 KB payloads sit in arena blocks of their own, not interleaved by malloc
// with packet headers, queues and event slots; a datagram larger than the slab moves to a
// heap buffer that the packet keeps. Like the std::vector it replaces, resize leaves new
// bytes unset: the sender's engine writes a datagram straight into a recycled packet, and
// zeroing 4 KB first would cost as much as the copy it replaces. The bytes are owned by
// the packet; its pool must outlive every use (the Sim destroys its pool last).
//
// Elided datagrams (elided(): one ByteRun not stored, see the file comment; only
// PacketPool makes them): size() and the const operator[] give the whole datagram; there
// is no contiguous copy of it, so data(), begin(), end() (and so a span of the bytes) and
// every mutator but clear() and assign() are for datagrams that are not elided
// (DCHECKed); readers use view(), which works for both.
class PacketBytes {
  public:
    PacketBytes() = default;
    PacketBytes(const PacketBytes&) = delete;
    PacketBytes& operator=(const PacketBytes&) = delete;

    size_t size() const { return size_; }  // the whole datagram, elided run included
    bool empty() const { return size_ == 0; }
    size_t capacity() const { return capacity_; }
    std::byte* data() {
        MROCE_DCHECK(!elided());
        return data_;
    }
    const std::byte* data() const {
        MROCE_DCHECK(!elided());
        return data_;
    }
    std::byte* begin() { return data(); }
    std::byte* end() { return data() + size_; }
    const std::byte* begin() const { return data(); }
    const std::byte* end() const { return data() + size_; }
    std::byte& operator[](size_t i) { return data()[i]; }
    // operator[] const reads byte i of the whole datagram, elided or not.
    const std::byte& operator[](size_t i) const {
        if (i < run_.offset) return data_[i];
        if (i - run_.offset < run_.length) return run_.value;
        return data_[i - run_.length];
    }

    // elided: the datagram's run() is not stored (PacketPool::compact made it).
    bool elided() const { return run_.length != 0; }
    const ByteRun& run() const { return run_; }
    // view returns the whole datagram: the stored bytes if it is not elided, else a copy
    // made in scratch (grown if need be), valid until scratch changes.
    std::span<const std::byte> view(std::vector<std::byte>& scratch) const;

    // resize keeps the first min(n, size()) bytes; bytes beyond the old size are unset.
    void resize(size_t n) {
        MROCE_DCHECK(!elided());
        if (n > capacity_) grow(n);
        size_ = n;
    }
    void clear() {  // keeps the storage
        size_ = 0;
        run_ = {};
    }
    void assign(const std::byte* first, const std::byte* last) {
        const auto n = static_cast<size_t>(last - first);
        clear();
        resize(n);
        if (n != 0) std::memcpy(data_, first, n);
    }

  private:
    friend class PacketPool;
    // assign_elided stores d without its run r (r.length > 0, within d; what is left
    // fits the capacity).
    void assign_elided(std::span<const std::byte> d, const ByteRun& r);
    // assign_copy makes this a copy of other, elided or not.
    void assign_copy(const PacketBytes& other);
    void grow(size_t n) {
        auto bigger = std::make_unique_for_overwrite<std::byte[]>(n);
        if (size_ != 0) std::memcpy(bigger.get(), data_, size_);
        heap_ = std::move(bigger);
        data_ = heap_.get();
        capacity_ = n;
    }

    std::byte* data_ = nullptr;
    size_t size_ = 0;  // the whole datagram; data_ holds size_ - run_.length bytes
    size_t capacity_ = 0;
    ByteRun run_;      // the elided run (length 0: none); data_ holds what is around it
    std::unique_ptr<std::byte[]> heap_;  // only for a datagram larger than the slab
};

inline constexpr uint32_t kNoRoute = UINT32_MAX;
inline constexpr uint8_t kMaxTrafficClasses = 8;  // switch priorities (PFC classes)

struct Packet {
    PacketBytes bytes;             // the UDP payload, exactly as the sender's engine wrote it
                                   // (perhaps elided: read it with bytes.view)
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

    // clone returns a copy of p (bytes, meta, id, route, sent_at) marked duplicate. The
    // copy of an elided packet is elided too, in a small slab.
    PacketPtr clone(const Packet& p);

    // compact returns a packet with a small slab (kSmallSlabBytes) that holds big's
    // datagram and big's id, or nullptr (big unchanged) if the datagram does not fit one:
    // it fits if it is at most kSmallSlabBytes long (a control datagram, copied as it is)
    // or if what is left without its middle_run does (elided: a DATA datagram whose
    // payload is one repeated byte value). big, which stays with the caller for its next
    // datagram, keeps its bytes and takes the next id, as if it had been acquired after
    // the small one.
    PacketPtr compact(Packet& big);

    // view returns p's whole datagram (PacketBytes::view) in the pool's scratch buffer:
    // valid until the next view call on this pool. One buffer for the Sim, not one per
    // reader: what hosts hand their engines (which keep no pointer into a datagram).
    std::span<const std::byte> view(const Packet& p) { return p.bytes.view(scratch_); }

    size_t outstanding() const { return outstanding_; }  // packets currently owned by users
    size_t allocated() const { return allocated_; }      // packets ever created (pool size)

    // Packets are created kChunkPackets at a time (see chunks_).
    static constexpr size_t kChunkPackets = 256;
    // Every packet owns a payload slab of kSlabBytes in the arena (see payloads_): a 4 KB
    // payload plus up to 128 header bytes, a whole number of cache lines.
    static constexpr size_t kSlabBytes = 4096 + 128;
    // Control datagrams (ACKs, NACKs, PROBEs: a header and a 256-bit SACK) are copied
    // into packets of their own with slabs this small (compact), and so are elided DATA
    // datagrams (a 72-byte header, the run, perhaps a 4-byte trailer). About half the
    // packets in flight are ACKs, and once any DATA had used a 4 KB slab it stayed
    // resident for every later ACK that borrowed it: in perm1024, tens of MB.
    static constexpr size_t kSmallSlabBytes = 256;

  private:
    friend struct PacketReturn;
    PacketPtr take();  // a recycled or new packet with a kSlabBytes slab, id not set
    PacketPtr take_small();  // the same with a kSmallSlabBytes slab
    PacketPtr small_copy(Packet& big, const ByteRun& elide);  // compact, once it fits
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
    std::vector<std::byte> scratch_;  // view's buffer
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
