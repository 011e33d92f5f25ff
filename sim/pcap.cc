#include "sim/pcap.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mroce::sim {
namespace {

constexpr uint8_t kIpProtoUdp = 17;
constexpr uint8_t kDefaultTtl = 64;
constexpr size_t kUdpHeaderBytes = 8;
constexpr size_t kIpv4HeaderBytes = 20;
constexpr size_t kIpv6HeaderBytes = 40;

void put_be16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}
void put_le16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
}
void put_le32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Internet checksum (RFC 1071): the ones' complement sum of big-endian 16-bit words,
// accumulated unfolded so several spans can be summed before the final fold.
uint64_t sum_words(const uint8_t* p, size_t n, uint64_t acc = 0) {
    for (; n >= 2; p += 2, n -= 2) acc += uint32_t{p[0]} << 8 | p[1];
    if (n) acc += uint32_t{p[0]} << 8;  // an odd last byte is padded with a zero
    return acc;
}
uint16_t fold(uint64_t acc) {
    while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
    return static_cast<uint16_t>(~acc);
}

}  // namespace

std::string check_pcap_snaplen(uint32_t snaplen) {
    if (snaplen < kPcapMinSnaplen || snaplen > kPcapMaxSnaplen)
        return "pcap snap length " + std::to_string(snaplen) + " is outside " +
               std::to_string(kPcapMinSnaplen) + ".." + std::to_string(kPcapMaxSnaplen);
    return {};
}

size_t write_ip_udp_header(const PacketMeta& meta, std::span<const std::byte> payload,
                           uint16_t ip_id, uint8_t* out) {
    const bool v4 = meta.src.is_ipv4() && meta.dst.is_ipv4();
    const size_t ip_bytes = v4 ? kIpv4HeaderBytes : kIpv6HeaderBytes;
    const size_t udp_len = kUdpHeaderBytes + payload.size();
    // A datagram over 65,535 bytes cannot exist; the lengths then wrap, and the dissector
    // reports them, rather than the writer dropping the packet silently.
    const auto udp_len16 = static_cast<uint16_t>(udp_len);
    const uint8_t ecn = meta.ecn & 0b11;
    uint8_t* ip = out;
    uint8_t* udp = out + ip_bytes;
    uint64_t pseudo = 0;  // the UDP pseudo-header's sum
    if (v4) {
        ip[0] = 0x45;  // version 4, 5 words
        ip[1] = ecn;   // DSCP 0
        put_be16(ip + 2, static_cast<uint16_t>(kIpv4HeaderBytes + udp_len));
        put_be16(ip + 4, ip_id);
        put_be16(ip + 6, 0x4000);  // don't fragment, offset 0
        ip[8] = kDefaultTtl;
        ip[9] = kIpProtoUdp;
        put_be16(ip + 10, 0);
        std::memcpy(ip + 12, meta.src.ip.data() + 12, 4);
        std::memcpy(ip + 16, meta.dst.ip.data() + 12, 4);
        put_be16(ip + 10, fold(sum_words(ip, kIpv4HeaderBytes)));
        pseudo = sum_words(ip + 12, 8) + kIpProtoUdp + udp_len16;
    } else {
        ip[0] = 0x60;  // version 6; traffic class high nibble = DSCP high bits (0)
        ip[1] = static_cast<uint8_t>(ecn << 4);  // traffic class low nibble = DSCP low + ECN
        ip[2] = ip[3] = 0;                       // flow label 0
        put_be16(ip + 4, udp_len16);             // payload length
        ip[6] = kIpProtoUdp;
        ip[7] = kDefaultTtl;
        std::memcpy(ip + 8, meta.src.ip.data(), 16);
        std::memcpy(ip + 24, meta.dst.ip.data(), 16);
        pseudo = sum_words(ip + 8, 32) + udp_len16 + kIpProtoUdp;
    }
    put_be16(udp, meta.src.port);
    put_be16(udp + 2, meta.dst.port);
    put_be16(udp + 4, udp_len16);
    put_be16(udp + 6, 0);
    uint64_t acc = sum_words(udp, kUdpHeaderBytes, pseudo);
    acc = sum_words(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), acc);
    const uint16_t csum = fold(acc);
    put_be16(udp + 6, csum == 0 ? 0xffff : csum);  // 0 would mean "no checksum" (RFC 768)
    return ip_bytes + kUdpHeaderBytes;
}

std::unique_ptr<PcapWriter> PcapWriter::open(const std::string& path, std::string* error,
                                             uint32_t snaplen) {
    if (std::string e = check_pcap_snaplen(snaplen); !e.empty()) {
        *error = e;
        return nullptr;
    }
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) {
        *error = "cannot create pcap file '" + path + "': " + std::strerror(errno);
        return nullptr;
    }
    return std::unique_ptr<PcapWriter>(new PcapWriter(f, path, snaplen));
}

PcapWriter::PcapWriter(std::FILE* file, std::string path, uint32_t snaplen)
    : file_(file), path_(std::move(path)), snaplen_(snaplen) {
    uint8_t h[kPcapFileHeaderBytes];
    put_le32(h, kPcapMagicNanos);
    put_le16(h + 4, kPcapVersionMajor);
    put_le16(h + 6, kPcapVersionMinor);
    put_le32(h + 8, 0);   // thiszone: timestamps are UTC (here: simulated time from 0)
    put_le32(h + 12, 0);  // sigfigs
    put_le32(h + 16, snaplen_);
    put_le32(h + 20, kLinkTypeRaw);
    put(h, sizeof h);
}

PcapWriter::~PcapWriter() { close(); }

void PcapWriter::put(const void* data, size_t n) {
    if (n != 0 && std::fwrite(data, 1, n, file_) != n && error_.empty())
        error_ = "cannot write pcap file '" + path_ + "': " + std::strerror(errno);
}

void PcapWriter::write(const PacketMeta& meta, std::span<const std::byte> payload, SimTime at,
                       uint16_t ip_id) {
    if (!file_) return;
    uint8_t rec[kPcapRecordHeaderBytes + 48];
    const size_t hdr = write_ip_udp_header(meta, payload, ip_id, rec + kPcapRecordHeaderBytes);
    const size_t orig = hdr + payload.size();
    const size_t incl = std::min<size_t>(orig, snaplen_);
    const uint64_t ns = static_cast<uint64_t>(std::max<int64_t>(to_ps(at), 0)) / 1000;
    put_le32(rec, static_cast<uint32_t>(ns / 1'000'000'000));
    put_le32(rec + 4, static_cast<uint32_t>(ns % 1'000'000'000));
    put_le32(rec + 8, static_cast<uint32_t>(incl));
    put_le32(rec + 12, static_cast<uint32_t>(orig));
    put(rec, kPcapRecordHeaderBytes + std::min(hdr, incl));
    if (incl > hdr) put(payload.data(), incl - hdr);
    ++packets_;
}

std::string PcapWriter::close() {
    if (file_) {
        if (std::fclose(file_) != 0 && error_.empty())
            error_ = "cannot write pcap file '" + path_ + "': " + std::strerror(errno);
        file_ = nullptr;
    }
    return error_;
}

}  // namespace mroce::sim
