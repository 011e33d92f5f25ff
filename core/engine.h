// core/engine.h — the sans-IO protocol engine contract (DESIGN.md "Protocol engine").
//
// Implemented by core::Endpoint and by the RoCEv2 baseline. A driver (api/ driver loop,
// the simulator's host, the conformance harness) owns one engine and moves data between
// it and a datapath. Nothing else crosses: the engine never does I/O, never reads a
// clock and never draws randomness it was not handed.
//
// Threading: an engine is single-threaded; its driver calls every method from one thread.
#pragma once

#include <cstddef>
#include <optional>
#include <span>

#include "core/event.h"
#include "util/packet_meta.h"
#include "util/time.h"

namespace mroce::core {

class Engine {
public:
    virtual ~Engine() = default;

    // on_datagram feeds one received UDP payload. meta.src is the remote address, meta.dst
    // the local one, meta.ecn the IP ECN bits as received, meta.arrival when it reached the
    // host where the datapath can tell (spec [UDP-11]; kNever: `now` stands for it).
    // Malformed or unauthenticated datagrams are counted and dropped; nothing is returned.
    virtual void on_datagram(std::span<const std::byte> datagram, const PacketMeta& meta,
                             Time now) = 0;

    // is_handshake says whether `datagram` asks for a handshake: a packet that concerns no
    // connection yet and so carries no token anyone had to learn (HELLO, or any packet of
    // an older wire version). A driver feeds at most a few of these per pass (api/driver.h,
    // DriverConfig::max_handshakes_per_pass) so that a flood of them, which anyone can
    // send, cannot crowd out the established connections' packets. A peek at the header,
    // no decoding; an engine without a handshake answers false.
    virtual bool is_handshake(std::span<const std::byte> datagram) const {
        (void)datagram;
        return false;
    }

    // on_timeout runs every timer due at or before now. Cheap to call early.
    virtual void on_timeout(Time now) = 0;

    // poll_transmit writes the next datagram to send into buf and fills meta (src with
    // the UDP source port that selects the path, dst, ECN codepoint, local NIC port).
    // Returns its length, or 0 when nothing may be sent now. buf must hold at least
    // max_datagram_size() bytes.
    virtual size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time now) = 0;

    // kInPlaceMinBytes: poll_transmit_in_place copies a shorter payload all the same (for
    // a few hundred bytes the copy costs less than the kernel's second iovec).
    static constexpr uint32_t kInPlaceMinBytes = 512;
    // poll_transmit_in_place is poll_transmit for a datapath that can send a datagram in
    // two pieces (datapath::TxPacket): a DATA payload in the application's memory may be
    // left there, saving a copy of every byte sent. Then `payload` names it, buf[0, n)
    // holds what goes before it (n is returned) and the datagram is the two together;
    // otherwise `payload` is empty and this is poll_transmit. A payload left in place is
    // the application's buffer of a work request that has not completed; the caller must
    // send it before the engine can complete or flush that request (api/driver.h,
    // "Payloads sent from where they lie"). An engine that always copies keeps the default.
    virtual size_t poll_transmit_in_place(std::span<std::byte> buf, PacketMeta& meta, Time now,
                                          std::span<const std::byte>& payload) {
        payload = {};
        return poll_transmit(buf, meta, now);
    }

    // set_ready_ports tells the engine which local NIC ports can start a datagram now (bit
    // p: PacketMeta::local_port p; ports from 64 on count as ready). A datapath whose ports
    // have queues of their own (a multi-port NIC) says this before it polls, and the engine
    // then gives new data to paths on those ports, as a NIC's per-port scheduler pulls
    // work for the port that went idle; control packets may still name any port. A
    // datapath that never calls it leaves every port ready (the default).
    virtual void set_ready_ports(uint64_t mask) { (void)mask; }

    // set_data_only: while on, poll_transmit and poll_transmit_in_place return DATA only
    // (new or resent); the acknowledgements, probes and handshake packets due stay queued
    // for the first poll after it is off. A driver that lets an application's answer leave
    // before the ACK of the request it answers (api/driver.h, DriverConfig::answer_first)
    // polls for the answer this way: the ACK is then neither sent nor even built before
    // the answer is out. An engine that ignores it returns what it has, in its own order.
    virtual void set_data_only(bool on) { (void)on; }

    // next_deadline is the earliest time on_timeout must be called (kNever if none).
    virtual Time next_deadline() const = 0;

    // poll_event returns the next completion or state change, oldest first.
    virtual std::optional<Event> poll_event() = 0;

    // max_datagram_size is the largest datagram poll_transmit may produce.
    virtual size_t max_datagram_size() const = 0;

    // awaits_completions says whether some work request posted to the engine has yet to
    // complete (a send or request in progress, a receive posted): whether an application
    // that polls for completions has a reason to poll again. A driver that leaves the
    // datapath to a polling application (api/driver.h, DriverConfig::stand_by) checks on
    // it rarely only while it does. An engine that cannot tell answers true.
    virtual bool awaits_completions() const { return true; }

    // receiving says whether a message has begun to arrive and is not yet whole: more of
    // it is on its way, and only a driver pass will place it. An application that awaits
    // no completion may be waiting for that message by watching its memory (a WRITE
    // ping-pong), so a driver that leaves the datapath to a polling application takes it
    // back (api/driver.h, DriverConfig::stand_by). An engine that cannot tell answers false.
    virtual bool receiving() const { return false; }

    // messages_delivered counts the messages this engine has delivered whole (in order on
    // their stream; a WRITE without a completion and a READ or atomic request count too)
    // and the answers to its READs and atomics placed whole. A driver compares it across
    // a pass to tell whether the pass brought a message: a pass that completed a send with
    // an ACK alone may leave the answer the application watches its memory for still on
    // its way (api/driver.h, DriverConfig::stand_by). An engine that cannot tell answers 0
    // (never a message: the driver then always takes the datapath back).
    virtual uint64_t messages_delivered() const { return 0; }
};

}  // namespace mroce::core
