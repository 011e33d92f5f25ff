// datapath/datapath.h — what carries bytes (DESIGN.md "Datapath").
//
// Implemented by datapath/udp (Linux sockets) and by the simulator's host NIC ports.
// Depends on util only; never on core.
#pragma once

#include <cstddef>
#include <span>

#include "util/packet_meta.h"
#include "util/result.h"
#include "util/time.h"

namespace mroce::datapath {

// TxPacket is one datagram to send: `data`, then `payload` when it is not empty. A payload
// lies where its owner keeps it (the application's registered memory: core::Engine's
// zero-copy poll_transmit) and the kernel copies it from there; it must stay valid until
// send_batch has returned (api/driver.h, "Payloads sent from where they lie").
struct TxPacket {
    std::span<const std::byte> data;
    std::span<const std::byte> payload;
    PacketMeta meta;  // meta.src.port is the UDP source port (the path)
    size_t size() const { return data.size() + payload.size(); }
};

// RxPacket is one received datagram, filled by recv_batch. `data` points into the
// datapath's own receive (bounce) buffer and stays valid until the next recv_batch call:
// the engine copies each payload once, from there into its final memory.
struct RxPacket {
    std::span<const std::byte> data;
    PacketMeta meta;
};

class Datapath {
public:
    virtual ~Datapath() = default;
    // send_batch sends packets in order; returns how many were accepted (the rest may be
    // retried). Errors: kIo for a failure that is not back-pressure.
    virtual Result<size_t> send_batch(std::span<const TxPacket> packets) = 0;
    // sends_in_two_pieces: send_batch sends a TxPacket's payload from where it lies. One
    // that says false sends `data` only, and its callers leave payloads empty.
    virtual bool sends_in_two_pieces() const { return false; }
    // recv_batch fills up to packets.size() entries without blocking; returns the count.
    // The datagrams' bytes stay valid until the next recv_batch call.
    virtual Result<size_t> recv_batch(std::span<RxPacket> packets) = 0;
    // now reads this datapath's monotonic clock.
    virtual Time now() const = 0;
    // wake_fd is readable when recv_batch has work (-1 if the datapath cannot sleep).
    virtual int wake_fd() const = 0;
    // local_address is where peers reach this endpoint (IP and endpoint UDP port).
    virtual Address local_address() const = 0;
    // hold_handshakes(true): a datapath that queues handshakes apart (the UDP datapath's
    // handshake socket of a sharded device) leaves that queue unread, and does not wake
    // for it, until hold_handshakes(false): the driver's handshake budget is spent, and a
    // flood waits, and overflows, in the kernel (api/driver.h). Others ignore it.
    virtual void hold_handshakes(bool held) { (void)held; }
};

}  // namespace mroce::datapath
