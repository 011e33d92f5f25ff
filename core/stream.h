// core/stream.h — one ordered stream (one QP) on a connection: the messages it sends and
// the receives posted for what it receives (spec §8).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "core/memory.h"
#include "core/segment_map.h"
#include "core/tx_segments.h"
#include "core/work.h"
#include "util/lazy_deque.h"
#include "util/time.h"
#include "wire/data.h"

namespace mroce::core {

// spec §8 [STREAM-3]: messages of one stream in flight, and receive slots per stream. A
// protocol constant, not a setting: both ends must agree, and slots are indexed
// msg_seq % kStreamWindow, which needs a power of two to survive the 2^32 wrap.
inline constexpr uint32_t kStreamWindow = 128;
static_assert((kStreamWindow & (kStreamWindow - 1)) == 0, "kStreamWindow must be a power of two");

// Piece is one resolved piece of a scatter/gather list.
struct Piece {
    std::byte* p = nullptr;
    uint32_t len = 0;
};
// copy_to_pieces writes n bytes at byte offset off of the list [sg, sg + nsg).
inline void copy_to_pieces(const Piece* sg, size_t nsg, uint64_t off, const std::byte* src, size_t n) {
    for (size_t i = 0; i < nsg && n > 0; ++i) {
        if (off >= sg[i].len) {
            off -= sg[i].len;
            continue;
        }
        const size_t k = std::min<size_t>(n, sg[i].len - off);
        std::memcpy(sg[i].p + off, src, k);
        src += k;
        n -= k;
        off = 0;
    }
}
inline void copy_from_pieces(const Piece* sg, size_t nsg, uint64_t off, std::byte* dst, size_t n) {
    for (size_t i = 0; i < nsg && n > 0; ++i) {
        if (off >= sg[i].len) {
            off -= sg[i].len;
            continue;
        }
        const size_t k = std::min<size_t>(n, sg[i].len - off);
        std::memcpy(dst, sg[i].p + off, k);
        dst += k;
        n -= k;
        off = 0;
    }
}

// is_request: READ and atomics, answered by a response message from the responder.
inline bool is_request(wire::Opcode op) {
    return op == wire::Opcode::kReadRequest || op == wire::Opcode::kAtomicFetchAdd ||
           op == wire::Opcode::kAtomicCompareSwap;
}
inline bool is_response(wire::Opcode op) {
    return op == wire::Opcode::kReadResponse || op == wire::Opcode::kAtomicResponse;
}
// The largest body [DATA-8] a message carries inside itself.
inline constexpr uint32_t kMaxBody = wire::kAtomicRequestBodySize;

// TxMessage is a message being transmitted: a posted send work request, or the answer the
// responder owes for a READ or atomic request it executed ([PLACE-30]; opcode
// READ_RESPONSE or ATOMIC_RESPONSE, kept in Stream::answers, never in Stream::tx).
struct TxMessage {
    SendWr wr;
    const std::byte* src = nullptr;  // resolved local buffer (bytes of the message)
    std::byte* dst = nullptr;        // READ/atomic: where the answer goes (checked at post)
    wire::Opcode opcode = wire::Opcode::kSend;
    uint32_t msg_len = 0;            // bytes on the wire: wr.length, or the body's size
    bool resp_done = false;          // READ/atomic: the whole answer has been placed
    uint32_t resp_to = 0;            // answer: msg_seq of the request it answers
    // READ/atomic (requester): the answer's receive state, made when its first segment
    // arrives ([PLACE-30]); fixed in size whatever the length ([PLACE-31]).
    struct AnswerRx {
        SegmentMap segs;
        HeldTail tail;
    };
    std::unique_ptr<AnswerRx> resp_rx;
    std::array<std::byte, kMaxBody> body{};  // request or atomic response body
    // A local buffer of several pieces (src for sends, dst for READ), else empty; and the
    // copy of an inline send of more than kInlineSmall bytes (src points into it).
    std::vector<Piece> sg;
    std::vector<std::byte> inline_bytes;
    // An inline send of up to kInlineSmall bytes keeps them here instead ([PLACE-23]): a
    // small inline send is what latency benchmarks post, and inline_bytes would cost an
    // allocation and a free per message on their path. payload() finds them.
    static constexpr size_t kInlineSmall = 64;
    std::array<std::byte, kInlineSmall> inline_small{};
    bool in_inline_small = false;
    uint32_t msg_seq = 0;         // an answer: its answer_seq, which stays local
    uint32_t recv_seq = 0;
    uint32_t nseg = 0;
    uint32_t next_new_seg = 0;    // first segment never sent
    uint32_t path_acked = 0;      // segments acknowledged at path level
    // [PLACE-31]: every segment below it is acknowledged at path level; no segment at or
    // above send_floor + kSegmentWindow may leave.
    uint32_t send_floor = 0;
    // Per segment: acknowledged at path level, already in the retransmit queue, and the
    // weighted retries of [LOSS-7] (16 x retry_limit <= 16,000 fits); started when the first segment may go.
    TxSegments segs;
    // [PLACE-31] bit per segment: queued for retransmission but beyond the segment window
    // when its turn came; queued again when send_floor rises. Empty until first needed.
    std::vector<uint64_t> deferred;
    bool done = false;            // delivered (stream ack) or failed
    Status status = Status::kSuccess;
    uint32_t stream_probes = 0;   // [STREAM-5] consecutive delivery-timer expiries
    uint8_t answer_wait = 0;      // [PLACE-19] log2 of the next wait for the answer
    uint32_t rnr_retries = 0;
    uint32_t unknown_stream_retries = 0;  // [STREAM-8]
    bool rnr_wait = false;        // a resend after the RNR delay is scheduled
    bool rnr_probing = false;     // [PLACE-6] first segment re-sent after the wait
    Time delivery_deadline = kNever;  // [STREAM-5] the armed delivery timer, if any
    bool started() const { return segs.started(); }
    // payload: the message's bytes; a body lives inside the message itself.
    const std::byte* payload() const {
        if (is_request(opcode) || opcode == wire::Opcode::kAtomicResponse) return body.data();
        return in_inline_small ? inline_small.data() : src;
    }

    bool seg_acked(uint32_t s) const { return segs.acked(s); }
    // try_queue marks segment s queued for retransmission; false if it already was, so the
    // retransmit queue never holds a segment twice and stays bounded by the segments.
    bool try_queue(uint32_t s) { return segs.try_queue(s); }
    void unqueue(uint32_t s) { segs.unqueue(s); }
    void set_acked(uint32_t s) { segs.set_acked(s); }
    // in_segment_window: [PLACE-31] segment s may be sent now.
    bool in_segment_window(uint32_t s) const { return s < send_floor || s - send_floor < kSegmentWindow; }
};

// RxMessage is the receiver's state of one message of a stream that has not yet been
// delivered in order.
struct RxMessage {
    bool active = false;
    bool complete = false;
    uint32_t msg_seq = 0;
    wire::Opcode opcode = wire::Opcode::kSend;
    uint32_t msg_len = 0;
    uint32_t recv_seq = 0;
    uint32_t imm = 0;
    uint32_t rkey = 0;
    uint64_t remote_addr = 0;
    SegmentMap segs;  // [PLACE-31] which segments are written, in fixed space
    HeldTail tail;    // [PLACE-12] the held end of an early last segment
    // [ACK-11]: the LAST segment arrived with ACK_NOW; the DATA that lets the message
    // deliver after it asks for an ACK at once, as the LAST did.
    bool last_asked_ack = false;
    // Where byte 0 of the message goes. Requests land in `body` and `target` is the
    // checked remote memory they name. (Answers take no slot: [PLACE-30].)
    std::byte* target = nullptr;
    const Piece* sg = nullptr;  // or a scatter list (a multi-piece receive)
    uint32_t nsg = 0;
    uint32_t read_len = 0;  // READ request: bytes asked for
    std::array<std::byte, kMaxBody> body{};
};

// RxRing: a stream's receive slots ([STREAM-3]), one per message not yet delivered, at
// index msg_seq mod size(). Every active slot's msg_seq lies in [delivered_seq,
// delivered_seq + size()), so no two share an index. The ring starts empty and doubles,
// up to kStreamWindow slots, only when a message arrives that far ahead: a slot is about
// 300 bytes, and a stream that never has more than one message in flight (4,032 of them
// in the all-to-all benchmark) then keeps one slot instead of 128 (38 KB).
class RxRing {
  public:
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    // at: the slot for msg_seq; the ring is not empty.
    RxMessage& at(uint32_t msg_seq) { return slots_[msg_seq & (size_ - 1)]; }
    // make_room: the slot for msg_seq, `ahead` (< kStreamWindow) messages past the first
    // undelivered one, growing the ring first if it is too small to hold it.
    RxMessage& make_room(uint32_t msg_seq, uint32_t ahead) {
        if (ahead >= size_) grow(ahead);
        return at(msg_seq);
    }
    auto begin() { return slots_.begin(); }
    auto end() { return slots_.end(); }
    auto begin() const { return slots_.begin(); }
    auto end() const { return slots_.end(); }

  private:
    [[gnu::noinline]] void grow(uint32_t ahead) {
        const uint32_t n = std::min(kStreamWindow, std::max(std::bit_ceil(ahead + 1), size_ * 2));
        std::vector<RxMessage> bigger(n);
        // Only active slots carry state: an inactive one is fully reset when it is taken.
        for (RxMessage& m : slots_)
            if (m.active) bigger[m.msg_seq & (n - 1)] = std::move(m);
        slots_.swap(bigger);
        size_ = n;
    }
    std::vector<RxMessage> slots_;
    uint32_t size_ = 0;  // slots_.size(), kept apart: the per-packet mask needs no division
};

struct PostedRecv {
    RecvWr wr;                // wr.length is the total of every piece
    std::byte* buf = nullptr;
    std::vector<Piece> sg;    // several pieces, else empty and buf is the buffer
    bool claimed = false;  // [PLACE-14] a message slot targets this receive
};

// Srq is a shared receive queue ([PLACE-24]): receives that any of its streams' messages
// take, in the order the messages arrive.
struct Srq {
    uint32_t id = 0;
    uint32_t pd = 0;
    LazyDeque<PostedRecv> posted;
    uint32_t limit = 0;   // armed when > 0: an event when posted.size() drops below it
    uint32_t users = 0;   // streams using it
};

// StreamLimits: the settings a queue pair may set for itself (spec [STREAM-12]); a new
// stream takes the endpoint's (Endpoint::default_stream_limits). Path-level settings
// (PTO, [LOSS-7] segment retries, path failure) stay connection-wide: paths are shared by
// every stream of the connection.
struct StreamLimits {
    uint32_t retry_limit = 16;            // [STREAM-5] delivery probes without progress
    uint32_t rnr_retry = 7;               // [PLACE-6] RNR NACKs per message; 7 = forever
    uint32_t rnr_delay_us = 100;          // [PLACE-6] the wait our RNR NACKs ask for
    Duration min_delivery_timeout{0};     // [STREAM-5] floor of the delivery timer
    uint32_t max_rd_atomic = 16;          // [PLACE-20] requester side
    uint32_t max_dest_rd_atomic = 64;     // [PLACE-20] responder side
    uint32_t remote_access = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
    // [STREAM-14] the priority (0..kMaxTrafficClass, higher = more urgent) every DATA of
    // this stream leaves in; a queue pair's service level / traffic class.
    uint8_t traffic_class = 0;
};
// [STREAM-14] traffic classes are the eight 802.1Q priorities that PFC pauses one by one.
inline constexpr uint8_t kMaxTrafficClass = 7;

struct Stream {
    uint32_t id = 0;         // local id; the peer addresses it as DATA.stream_id
    uint32_t remote_id = 0;  // the peer's id, used as DATA.stream_id when sending
    uint32_t conn = 0;       // local connection id
    uint32_t pd = 0;
    bool seq_ready = false;  // sequence spaces known (after the handshake)
    bool failed = false;     // requester side hit an error: flushes, sends nothing more
    StreamLimits limits;

    // requester (send) side
    std::deque<TxMessage> tx;   // posted, not yet completed; front is the oldest
    size_t send_cursor = 0;     // index in tx of the first message with unsent segments
    uint32_t next_msg_seq = 0;
    uint32_t next_recv_seq = 0;
    uint32_t acked_seq = 0;      // every msg_seq before this is delivered (peer's report)
    uint32_t rd_outstanding = 0; // READs/atomics sent and not yet completed [PLACE-20]
    uint32_t stalled_probes = 0; // [STREAM-5] delivery probes since delivery last moved
    bool in_ready_list = false;

    // responder (receive) side
    LazyDeque<PostedRecv> posted;   // empty on a stream that only sends (util/lazy_deque.h)
    uint32_t posted_front_seq = 0;  // recv_seq of posted.front()
    uint32_t delivered_seq = 0;     // every msg_seq before this is delivered
    RxRing ring;                    // slots of messages not yet delivered; empty until
                                    // the stream first receives
    bool rx_failed = false;         // [ERR-3] a message failed; later ones are refused
    uint32_t rx_fail_seq = 0;
    uint8_t rx_fail_reason = 0;
    bool stream_ack_pending = false;
    // [PLACE-30] answers to the peer's READs and atomics, executed and not yet acknowledged,
    // oldest first: their own credit (at most limits.max_dest_rd_atomic), outside the
    // stream window and the stream's sequence. answer_seq numbers them locally.
    LazyDeque<TxMessage> answers;
    size_t answer_cursor = 0;       // index in answers of the first with unsent segments
    uint32_t next_answer_seq = 0;
    bool answer_turn = false;       // [STREAM-11] the next new segment is an answer's
    uint32_t srq = 0;               // [PLACE-24] receives come from this SRQ, not `posted`
    // [PLACE-24] Receives taken from the SRQ for messages not yet delivered, by the
    // message's recv_seq, taken in that order: a message takes one for each earlier
    // receive-consuming message of the stream that has none yet, so one that overtook them
    // cannot leave them without. `bound`: the message's first DATA was accepted. On an SRQ
    // stream posted_front_seq is the recv_seq of the first message without a receive.
    struct SrqClaim {
        uint32_t recv_seq = 0;
        bool bound = false;
        PostedRecv pr;
    };
    std::vector<SrqClaim> srq_claimed;
    uint64_t bytes_placed = 0;      // payload bytes accepted the first time (no duplicates)
};

}  // namespace mroce::core
