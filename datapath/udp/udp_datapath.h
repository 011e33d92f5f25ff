// datapath/udp/udp_datapath.h — the Linux UDP datapath: kernel sockets, batched with
// recvmmsg/sendmmsg, UDP GSO on send and GRO on receive where the kernel offers them, ECN
// through IP_TOS / IP_RECVTOS (datapath/udp/README.md).
//
// One "endpoint" socket bound to the endpoint port receives everything (peers always
// answer to the endpoint port). A path is a UDP source port (DESIGN.md "Paths and
// planes"), so sending uses one socket per source port, created and bound lazily the first
// time the engine uses that port and kept in a small map. Consecutive equal-size datagrams
// to one destination from one socket leave as one GSO super-packet (UDP_SEGMENT); the
// endpoint socket asks for GRO (UDP_GRO) and splits what arrives by its segment size.
//
// Threading: not thread-safe. One driver thread at a time calls every method (the api/
// driver serialises them with its own lock).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "datapath/datapath.h"
#include "util/address.h"
#include "util/result.h"
#include "util/time.h"

namespace mroce::datapath {

// The default DSCP of traffic class c: 8c, the class selector codepoints CS0..CS7
// (UdpOptions::dscp_by_class).
inline constexpr std::array<uint8_t, 8> kDefaultDscpByClass{0, 8, 16, 24, 32, 40, 48, 56};
inline constexpr uint8_t kMaxDscp = 63;

struct UdpOptions {
    // SO_RCVBUF asked for the endpoint socket, in bytes. SO_RCVBUFFORCE is tried first (it
    // works as root); otherwise the kernel caps the request at net.core.rmem_max.
    int recv_buffer_bytes = 8 << 20;
    // SO_SNDBUF asked for every socket, in bytes (capped at net.core.wmem_max).
    int send_buffer_bytes = 1 << 20;
    // Most per-path sockets kept open; the least recently used one is closed beyond this.
    // open() lowers it to a quarter of the process's soft RLIMIT_NOFILE (at least 8), so
    // that whatever peers make the engine send from, the datapath cannot take the file
    // descriptors the rest of the process needs: with the usual soft limit of 1024, 256
    // (path_socket_limit() reports the value in use; datapath/udp/README.md).
    size_t max_path_sockets = 1024;
    // How often recv_batch drains and discards what arrived on per-path sockets.
    Duration drain_interval = std::chrono::milliseconds(10);
    // After a source port failed to bind, packets for it are dropped without trying again
    // for this long (so a taken port does not cost a socket()+bind() per packet).
    Duration bind_retry_after = std::chrono::milliseconds(100);
    // Use UDP GSO on send / GRO on receive when the kernel offers them. false forces the
    // plain sendmmsg / recvmmsg path (for tests and comparisons).
    bool gso = true;
    bool gro = true;
    // Largest datagram recv_batch accepts without GRO, in bytes; longer ones are dropped
    // and counted (receive_truncated). With GRO a receive slot holds a 64 KiB super-packet.
    size_t max_datagram_bytes = 9216;
    // spec [UDP-10]: one network interface per plane (DESIGN.md "Paths and planes"): a
    // packet whose meta.local_port is j leaves from a socket bound to plane_devices[j]
    // (SO_BINDTODEVICE), so the plane is the engine's choice, not the kernel's multipath
    // hash, and a re-rolled path stays on its plane; a datagram that arrives on
    // plane_devices[j] is received with meta.local_port j (IP_PKTINFO's interface), so the
    // engine can tell a plane that has gone quiet ([PATH-16]). Empty: meta.local_port is
    // ignored on send and 0 on receive, and routing picks the way. open() refuses a name
    // the kernel does not know. Binding a socket to a device needs CAP_NET_RAW on kernels
    // before 5.7.
    std::vector<std::string> plane_devices;
    // DSCP (0..63) of each traffic class (PacketMeta::traffic_class, 0..7; spec
    // [STREAM-14]): every packet leaves with TOS = dscp_by_class[class] << 2 | its ECN bits.
    // Default: class c -> DSCP 8c (CS0..CS7), which the common "trust DSCP" switch maps
    // (priority = DSCP >> 3) turn back into 802.1Q priority c. CS6 and CS7 are network
    // control on many fabrics: remap classes 6 and 7 there. open() refuses values > 63.
    std::array<uint8_t, 8> dscp_by_class = kDefaultDscpByClass;
    // SO_BUSY_POLL on the endpoint socket, in µs: a receive that finds the socket empty
    // polls the NIC's queue for up to this long before it returns (a busy-polling caller,
    // api::DeviceConfig::busy_poll). It helps only on a NIC with NAPI (not loopback) and
    // needs CAP_NET_ADMIN above net.core.busy_read; refused, it is left off
    // (busy_poll_enabled()). 0: off.
    int busy_poll_us = 0;
    // reuseport: the endpoint socket joins a SO_REUSEPORT group on its address: one shard
    // of a sharded device (docs/design.md §12); the group's steering program
    // (datapath/udp/steering.h, attach_steering) picks which member gets each datagram.
    bool reuseport = false;
    // rx_timestamps: ask the kernel to stamp each datagram when it reaches the host
    // (SO_TIMESTAMPNS) and report that time as meta.arrival, on now()'s clock. The engine
    // then measures a one-way delay up to the host, not up to the moment it read the
    // datagram (spec [UDP-11], [CC-14]): the socket buffer's backlog is the receiving
    // process's own queue, not the downlink's. Refused by the kernel, it is left off
    // (rx_timestamps_enabled()).
    bool rx_timestamps = true;
};

// UdpStats: counters of one UdpDatapath. Every dropped packet has a reason counter.
struct UdpStats {
    uint64_t packets_sent = 0;
    uint64_t bytes_sent = 0;
    uint64_t packets_received = 0;
    uint64_t bytes_received = 0;
    uint64_t send_would_block = 0;     // send_batch stopped on back-pressure (EAGAIN/ENOBUFS)
    uint64_t send_errors = 0;          // dropped: the kernel refused the packet (ENETUNREACH...)
    uint64_t bind_failures = 0;        // dropped: the source port could not be bound
    uint64_t no_plane_device = 0;      // dropped: meta.local_port has no plane device
    uint64_t receive_truncated = 0;    // dropped: datagram larger than the caller's buffer
    uint64_t receive_errors = 0;       // recvmmsg failed with something other than EAGAIN
    uint64_t path_sockets_opened = 0;
    uint64_t path_sockets_evicted = 0;
    uint64_t stray_drained = 0;        // datagrams that arrived on a per-path socket: discarded
    uint64_t tos_changes = 0;          // IP_TOS / IPV6_TCLASS setsockopt calls
    uint64_t tos_cmsgs = 0;            // messages whose TOS (class) differs from their
                                       // socket's: sent with an IP_TOS / IPV6_TCLASS cmsg
    uint64_t gso_sends = 0;            // super-packets sent with UDP_SEGMENT (>= 2 datagrams)
    uint64_t gso_fallbacks = 0;        // the kernel refused UDP_SEGMENT: GSO turned off
    uint64_t gro_receives = 0;         // super-packets received and split (>= 2 datagrams)
    uint64_t send_calls = 0;           // sendmmsg system calls
    uint64_t recv_calls = 0;           // recvmmsg system calls that returned data
    uint64_t handshakes_received = 0;  // datagrams read from the handshake socket
    uint64_t rx_stamps_unusable = 0;   // messages whose kernel timestamp was not used: the
                                       // wall clock moved against the monotonic one, or it
                                       // lay in the future or over a second back
};

class UdpDatapath final : public Datapath {
public:
    // kMaxBatch is the most messages one recvmmsg/sendmmsg call moves (a message is one
    // datagram, or one GSO/GRO super-packet of several).
    static constexpr size_t kMaxBatch = 32;
    // kMaxGsoSegments and kMaxGsoBytes bound one super-packet: the kernel's UDP_MAX_SEGMENTS
    // (64) and the 16-bit IP length less the headers.
    static constexpr size_t kMaxGsoSegments = 64;
    static constexpr size_t kMaxGsoBytes = 65000;
    // meta.local_port of a datagram that arrived on an interface that is no plane device.
    static constexpr uint16_t kNotAPlane = 0xffff;

    // open binds the endpoint socket to `local` (IPv4, or IPv6 dual-stack when local is not
    // IPv4-mapped). Port 0 picks an ephemeral port; local_address() reports the real one.
    // Errors: kIo (socket, bind or epoll failed); kInvalidArgument (unusable address, a
    // DSCP above 63, an unknown plane device). When `error` is given it receives a
    // one-line message such as
    // "udp: bind 127.0.0.1:4797: Address already in use".
    static Result<std::unique_ptr<UdpDatapath>> open(const Address& local,
                                                      const UdpOptions& options = {},
                                                      std::string* error = nullptr);
    ~UdpDatapath() override;
    UdpDatapath(const UdpDatapath&) = delete;
    UdpDatapath& operator=(const UdpDatapath&) = delete;

    // send_batch sends packets in order, each from the socket of meta.src.port (0 or the
    // endpoint port: the endpoint socket) on plane meta.local_port (when plane_devices are
    // set), to meta.dst, with the ECN bits of meta.ecn.
    // Returns how many were accepted: all of them unless a socket was full (EAGAIN), in
    // which case the rest should be retried later. A packet the kernel refuses, or whose
    // source port cannot be bound (taken by another socket), is counted (send_errors,
    // bind_failures), dropped and counted as accepted: for the protocol it is a lost packet,
    // and a path that keeps losing is re-rolled by the engine. Errors: kIo only when the
    // socket itself is unusable (EBADF, ENOTSOCK, EFAULT).
    Result<size_t> send_batch(std::span<const TxPacket> packets) override;
    bool sends_in_two_pieces() const override { return true; }
    // recv_batch reads up to packets.size() datagrams from the endpoint socket without
    // blocking; meta.src is the sender, meta.dst the local address, meta.ecn the ECN bits
    // of the TOS / traffic-class byte. A GRO super-packet is split into its datagrams (one
    // TOS byte covers them all: GRO merges only equal TOS); datagrams that did not fit in
    // `packets` are returned by the next call, before the socket is read again. Each
    // packet's data points into this datapath's receive buffer, valid until the next call.
    // Datagrams longer than max_datagram_bytes (without GRO) are dropped and counted.
    // With plane_devices, meta.local_port is the plane whose device the datagram arrived
    // on, or kNotAPlane when that interface is none of them.
    // Every drain_interval it also discards what arrived on per-path sockets.
    // Errors: kIo (recvmmsg failed with something other than EAGAIN/EINTR).
    Result<size_t> recv_batch(std::span<RxPacket> packets) override;
    // now reads CLOCK_MONOTONIC.
    Time now() const override;
    // wake_fd is an epoll fd over the endpoint socket: readable when the socket has data.
    // (Datagrams of a split super-packet left over by a full recv_batch are not signalled:
    // a caller that got a full batch calls again before sleeping.)
    int wake_fd() const override { return epoll_fd_; }
    Address local_address() const override { return local_; }

    const UdpStats& stats() const { return stats_; }
    // gso_enabled / gro_enabled say whether the offloads are in use (asked for in the
    // options and accepted by the kernel; GSO turns itself off if the kernel refuses it).
    bool gso_enabled() const { return gso_; }
    bool gro_enabled() const { return gro_; }
    // busy_poll_enabled: SO_BUSY_POLL was asked for (UdpOptions::busy_poll_us) and granted.
    bool busy_poll_enabled() const { return busy_poll_; }
    // rx_timestamps_enabled: UdpOptions::rx_timestamps was asked for and granted.
    bool rx_timestamps_enabled() const { return rx_timestamps_; }
    // recv_buffer_bytes is the endpoint socket's receive buffer as granted: what SO_RCVBUF
    // reads back, halved (the kernel doubles the request for its bookkeeping).
    size_t recv_buffer_bytes() const { return recv_buffer_bytes_; }
    // path_socket_limit is the most per-path sockets this datapath keeps open
    // (UdpOptions::max_path_sockets as bounded by open()); open_path_sockets how many are.
    size_t path_socket_limit() const { return path_socket_limit_; }
    size_t open_path_sockets() const;
    // attach_steering installs the shard steering program on this datapath's
    // SO_REUSEPORT group (UdpOptions::reuseport) of `shards` members, bound in shard order
    // (datapath/udp/steering.h). Errors: as datapath::attach_steering.
    Error attach_steering(uint32_t shards, bool handshake_sockets, std::string* error = nullptr);
    // open_handshake_socket adds a second member to the SO_REUSEPORT group
    // (UdpOptions::reuseport) for the datagrams the steering program marks as handshakes
    // (HELLO, version 1; steering.h): a flood of them fills that socket's buffer, not the
    // endpoint socket's, so the kernel does not drop established traffic for them.
    // recv_batch reads at most kHandshakeBatch of them per call, after the endpoint socket:
    // when that one had nothing, and every kHandshakeEvery-th call in any case. A sharded
    // device opens one per shard once every shard's endpoint socket is bound (the group
    // numbers members in the order they joined). Errors: kWrongState (no reuseport, or
    // already open), kIo (socket, bind; `error` says why).
    Error open_handshake_socket(std::string* error = nullptr);
    // hold_handshakes: while held, recv_batch leaves the handshake socket unread and the
    // wake fd ignores it (Datapath::hold_handshakes).
    void hold_handshakes(bool held) override;
    static constexpr size_t kHandshakeBatch = 8;
    static constexpr uint32_t kHandshakeEvery = 8;
    // last_error is the message of the most recent counted failure ("" if none).
    const std::string& last_error() const { return last_error_; }

private:
    struct Socket {
        int fd = -1;
        int tos = 0;           // the TOS / traffic class currently set on fd
        uint64_t last_use = 0; // use counter value, for least-recently-used eviction
        Time retry_after{};    // fd == -1: a failed bind, not retried before this
    };

    UdpDatapath(const Address& local, const UdpOptions& options);
    // socket_for returns the socket sending from src_port on plane `plane` (ignored without
    // plane_devices), opening and binding it on first use; nullptr when that failed.
    Socket* socket_for(uint16_t src_port, uint16_t plane);
    // tos_of: the TOS byte a packet leaves with (its class's DSCP and its ECN bits).
    int tos_of(const PacketMeta& meta) const;
    bool set_tos(Socket& s, int tos);
    void evict_one();
    void drain_path_sockets();
    void fail(std::string message);
    Result<size_t> send_run(Socket& s, std::span<const TxPacket> run, size_t& accepted);
    size_t emit_pending(std::span<RxPacket> packets);
    // The receive side of plane_devices: a datagram's interface index to its plane, or
    // kNotAPlane for an interface that is not one (0 when there are no plane devices).
    uint16_t plane_of_interface(int ifindex) const;
    // IP_PKTINFO is asked for on a wildcard socket (the local address of each datagram)
    // and with plane devices (the interface it arrived on).
    bool wants_pktinfo() const;

    Address local_;
    UdpOptions opt_;
    int family_ = 0;
    int epoll_fd_ = -1;
    Socket endpoint_;
    std::vector<unsigned> plane_ifindex_;  // interface index of plane_devices[j]
    int handshake_fd_ = -1;         // open_handshake_socket; -1: none
    uint32_t handshake_tick_ = 0;   // recv_batch calls, for kHandshakeEvery
    bool handshakes_held_ = false;  // hold_handshakes
    // Per-path sockets by key(): plane << 16 | source port.
    std::unordered_map<uint32_t, Socket> paths_;
    uint64_t use_counter_ = 0;
    size_t path_socket_limit_ = 0;
    Time next_drain_{};
    UdpStats stats_;
    std::string last_error_;
    bool gso_ = false;
    bool gro_ = false;
    bool busy_poll_ = false;
    bool rx_timestamps_ = false;
    // CLOCK_MONOTONIC − CLOCK_REALTIME in ns at open() and then at each read that returned
    // messages (kernel timestamps are on the wall clock); a change beyond kClockStepNs
    // between two reads means the wall clock was stepped, and that read's stamps are not
    // used.
    int64_t wall_to_mono_ns_ = 0;
    size_t rx_slot_bytes_ = 0;  // size of one receive slot in the bounce buffer
    size_t recv_buffer_bytes_ = 0;

    // Received messages not yet handed out: message `pending_msg_` of `pending_count_`,
    // from byte `pending_offset_` (a super-packet split across recv_batch calls).
    size_t pending_msg_ = 0;
    size_t pending_count_ = 0;
    size_t pending_offset_ = 0;

    // Scratch arrays for the batched system calls, allocated once.
    struct Scratch;
    std::unique_ptr<Scratch> scratch_;
};

}  // namespace mroce::datapath
