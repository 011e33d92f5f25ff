// sim/pcap.h — writes simulated datagrams to a pcap file that tcpdump and Wireshark read.
//
// Format: classic pcap with nanosecond timestamps (magic 0xa1b23c4d, version 2.4), always
// little-endian so the same packets give the same file on every machine (readers take the
// byte order from the magic). Link type LINKTYPE_RAW (101): each record starts at the IP header,
// and readers tell IPv4 from IPv6 by its version nibble. We chose raw IP over Ethernet
// because the simulator has no MAC addresses or EtherType to report: a synthetic Ethernet
// header would be 14 bytes of invented data per packet, and raw IP is dissected the same.
//
// A simulated packet is a UDP payload plus its PacketMeta, so each record synthesises the
// headers a real NIC would have sent around it:
//   IPv4 (both addresses IPv4): 20 bytes, DSCP 0, ECN = meta.ecn (as marked so far),
//        identification = low 16 bits of the packet id (the same packet has the same id at
//        every capture point; duplicates keep it), DF, TTL 64, a valid header checksum.
//   IPv6 (otherwise): 40 bytes, traffic class = meta.ecn, hop limit 64.
//   UDP: 8 bytes, ports from meta, length, and a valid checksum over the pseudo-header.
// The timestamp is the simulated time the tap saw the packet, floored to nanoseconds.
// A snap length shorter than the datagram stores only its first bytes (orig_len keeps the
// full length, as tcpdump -s does).
//
// Threading: single-threaded; one writer per file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim/capture.h"
#include "sim/packet.h"
#include "util/packet_meta.h"

namespace mroce::sim {

inline constexpr uint32_t kPcapMagicNanos = 0xa1b23c4d;
inline constexpr uint16_t kPcapVersionMajor = 2;
inline constexpr uint16_t kPcapVersionMinor = 4;
inline constexpr uint32_t kLinkTypeRaw = 101;
inline constexpr uint32_t kPcapDefaultSnaplen = 65535;
// The smallest snap length we accept keeps the IPv6 and UDP headers whole.
inline constexpr uint32_t kPcapMinSnaplen = 48;
inline constexpr uint32_t kPcapMaxSnaplen = 262144;  // libpcap's MAXIMUM_SNAPLEN
inline constexpr size_t kPcapFileHeaderBytes = 24;
inline constexpr size_t kPcapRecordHeaderBytes = 16;

// check_pcap_snaplen returns an empty string if snaplen is usable, else a one-line reason.
std::string check_pcap_snaplen(uint32_t snaplen);

// write_ip_udp_header writes the IPv4 or IPv6 + UDP header for a datagram with this meta
// and payload into out (room for 48 bytes) and returns its length (28 or 48).
size_t write_ip_udp_header(const PacketMeta& meta, std::span<const std::byte> payload,
                           uint16_t ip_id, uint8_t* out);

class PcapWriter final : public PacketTap {
  public:
    // open creates (or truncates) path and writes the file header. On failure it returns
    // nullptr and sets *error to a one-line reason naming the file.
    static std::unique_ptr<PcapWriter> open(const std::string& path, std::string* error,
                                            uint32_t snaplen = kPcapDefaultSnaplen);
    ~PcapWriter() override;  // closes the file (errors then go unreported: call close())
    PcapWriter(const PcapWriter&) = delete;
    PcapWriter& operator=(const PcapWriter&) = delete;

    // on_packet writes one record for a packet seen at `at` (PacketTap).
    void on_packet(const Packet& packet, SimTime at) override {
        write(packet.meta, packet.bytes.view(scratch_), at, static_cast<uint16_t>(packet.id));
    }
    // write writes one record: synthesised headers + payload, cut at the snap length.
    void write(const PacketMeta& meta, std::span<const std::byte> payload, SimTime at,
               uint16_t ip_id = 0);

    // close flushes and closes the file; returns an empty string or the first I/O error
    // as one line. Records written after close are ignored.
    std::string close();

    uint64_t packets() const { return packets_; }  // records written
    uint32_t snaplen() const { return snaplen_; }
    const std::string& path() const { return path_; }

  private:
    PcapWriter(std::FILE* file, std::string path, uint32_t snaplen);
    void put(const void* data, size_t n);

    std::FILE* file_;
    std::string path_;
    uint32_t snaplen_;
    uint64_t packets_ = 0;
    std::string error_;  // first I/O error
    std::vector<std::byte> scratch_;  // an elided datagram, re-made (PacketBytes::view)
};

}  // namespace mroce::sim
