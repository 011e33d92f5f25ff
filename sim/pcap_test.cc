// PcapWriter, the topology's capture points and capture specs: a real two-to-one transfer between
// core::Endpoints is captured at the receiving host and on a sender's cable, then read back
// with a small independent pcap reader (headers, timestamps, checksums, ECN, counts) and,
// as a second opinion, with tcpdump.
#include "sim/pcap.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/endpoint.h"
#include "sim/capture_spec.h"
#include "sim/test_seed.h"
#include "sim/topology.h"

namespace mroce::sim {
namespace {

using namespace std::chrono_literals;
using testing::seed_note;
using testing::test_seed;

// ---- a pcap reader written from the format description, independent of the writer ----

uint32_t le32(const uint8_t* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t* p) {
    return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

// ones_sum is the 16-bit ones' complement sum of data (a valid checksummed span sums to
// 0xffff).
uint16_t ones_sum(const std::vector<uint8_t>& data, uint32_t extra = 0) {
    uint64_t s = extra;
    for (size_t i = 0; i + 1 < data.size(); i += 2) s += be16(&data[i]);
    if (data.size() % 2) s += uint32_t{data.back()} << 8;
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return static_cast<uint16_t>(s);
}

struct Record {
    uint64_t ns = 0;
    uint32_t orig_len = 0;
    std::vector<uint8_t> data;  // incl_len bytes, from the IP header on
};

struct PcapFile {
    uint32_t magic = 0, snaplen = 0, linktype = 0;
    uint16_t major = 0, minor = 0;
    std::vector<Record> records;
    std::string error;  // empty if the file parsed completely
};

PcapFile read_pcap(const std::string& path) {
    PcapFile f;
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
    if (b.size() < 24) {
        f.error = "short file header";
        return f;
    }
    f.magic = le32(&b[0]);
    f.major = le16(&b[4]);
    f.minor = le16(&b[6]);
    f.snaplen = le32(&b[16]);
    f.linktype = le32(&b[20]);
    for (size_t at = 24; at < b.size();) {
        if (b.size() - at < 16) {
            f.error = "short record header";
            return f;
        }
        Record r;
        const uint32_t sec = le32(&b[at]), nsec = le32(&b[at + 4]), incl = le32(&b[at + 8]);
        r.orig_len = le32(&b[at + 12]);
        if (nsec >= 1'000'000'000 || incl > f.snaplen || incl > r.orig_len ||
            b.size() - at - 16 < incl) {
            f.error = "bad record header at byte " + std::to_string(at);
            return f;
        }
        r.ns = uint64_t{sec} * 1'000'000'000 + nsec;
        r.data.assign(b.begin() + static_cast<ptrdiff_t>(at + 16),
                      b.begin() + static_cast<ptrdiff_t>(at + 16 + incl));
        f.records.push_back(std::move(r));
        at += 16 + incl;
    }
    return f;
}

// Ipv4Udp is what the checks need from one captured IPv4/UDP record.
struct Ipv4Udp {
    uint32_t src = 0, dst = 0;
    uint16_t sport = 0, dport = 0, id = 0;
    uint8_t ecn = 0;
};

// parse_ipv4_udp checks the record's headers (version, lengths, protocol, both checksums
// when the datagram is whole) and returns its fields; failures are test failures.
Ipv4Udp parse_ipv4_udp(const Record& r) {
    Ipv4Udp p;
    EXPECT_GE(r.data.size(), 28u);
    if (r.data.size() < 28) return p;
    const std::vector<uint8_t> ip(r.data.begin(), r.data.begin() + 20);
    EXPECT_EQ(ip[0], 0x45) << "IPv4, no options";
    EXPECT_EQ(be16(&ip[2]), r.orig_len) << "IP total length = captured original length";
    EXPECT_EQ(ip[9], 17) << "protocol UDP";
    EXPECT_EQ(ones_sum(ip), 0xffff) << "IPv4 header checksum";
    p.ecn = ip[1] & 3;
    p.id = be16(&ip[4]);
    p.src = be32(&ip[12]);
    p.dst = be32(&ip[16]);
    p.sport = be16(&r.data[20]);
    p.dport = be16(&r.data[22]);
    const uint16_t udp_len = be16(&r.data[24]);
    EXPECT_EQ(udp_len, r.orig_len - 20u) << "UDP length";
    if (r.data.size() == r.orig_len) {
        const std::vector<uint8_t> udp(r.data.begin() + 20, r.data.end());
        const uint32_t pseudo =
            (p.src >> 16) + (p.src & 0xffff) + (p.dst >> 16) + (p.dst & 0xffff) + 17u + udp_len;
        EXPECT_EQ(ones_sum(udp, pseudo), 0xffff) << "UDP checksum";
    }
    return p;
}

// Captures go to the test's temp dir and are removed, or stay in $MROCE_PCAP_KEEP (a
// directory) to be opened in Wireshark.
std::string temp_path(const std::string& name) {
    if (const char* keep = std::getenv("MROCE_PCAP_KEEP"))
        return std::string(keep) + "/" + name + ".pcap";
    return ::testing::TempDir() + "mroce_pcap_test_" + name + ".pcap";
}

void remove_capture(const std::string& path) {
    if (!std::getenv("MROCE_PCAP_KEEP")) std::remove(path.c_str());
}

// ---- a two-to-one transfer between real endpoints on one switch ----

struct IncastRun {
    explicit IncastRun(uint64_t seed, uint32_t planes = 1) : sim(seed), topo(sim, config(planes)) {
        core::EndpointConfig ec;
        ec.num_local_ports = static_cast<uint16_t>(planes);
        ec.max_payload = 2048;
        ec.window_bytes_per_path = 32 * 2048;
        for (uint32_t h = 0; h < topo.host_count(); ++h) {
            endpoints.push_back(
                std::make_unique<core::Endpoint>(ec, topo.host(h).address(), seed * 31 + h));
            pds.push_back(endpoints.back()->alloc_pd());
            topo.host(h).attach(endpoints.back().get());
            topo.host(h).set_event_callback([this](const core::Event& e) {
                if (e.kind == core::EventKind::kCompletion) ++completions;
                if (e.kind == core::EventKind::kConnectionFailed) failed = true;
            });
        }
    }

    static TopologyConfig config(uint32_t planes) {
        TopologyConfig c;
        c.planes = planes;
        c.kind = TopologyKind::kSingleSwitch;
        c.hosts = 3;
        c.cable.rate_bps = 10'000'000'000;
        // Two senders into one port: the queue builds, and a low step threshold marks CE.
        c.switches.ecn = EcnConfig::step(8 * 1024);
        return c;
    }

    // write_to posts one WRITE of `bytes` from host src to host dst.
    void write_to(uint32_t src, uint32_t dst, uint32_t bytes) {
        const Time now = to_core_time(sim.now());
        auto& s = bufs.emplace_back(std::vector<std::byte>(bytes, std::byte{0x5a}),
                                    std::vector<std::byte>(bytes));
        core::Endpoint& a = *endpoints[src];
        core::Endpoint& b = *endpoints[dst];
        const auto ak =
            *a.register_memory(pds[src], s.first.data(), bytes, core::access::kLocalWrite);
        const auto bk = *b.register_memory(pds[dst], s.second.data(), bytes,
                                           core::access::kLocalWrite | core::access::kRemoteWrite);
        const uint32_t as = *a.reserve_stream(pds[src]);
        const uint32_t bs = *b.reserve_stream(pds[dst]);
        ASSERT_EQ(a.bind_stream(as, topo.host(dst).address(), bs, now), Error::kOk);
        ASSERT_EQ(b.bind_stream(bs, topo.host(src).address(), as, now), Error::kOk);
        core::SendWr wr;
        wr.wr_id = 1;
        wr.opcode = core::WorkOpcode::kWrite;
        wr.local_addr = reinterpret_cast<uint64_t>(s.first.data());
        wr.length = bytes;
        wr.lkey = ak.lkey;
        wr.remote_addr = reinterpret_cast<uint64_t>(s.second.data());
        wr.rkey = bk.rkey;
        ASSERT_EQ(a.post_send(as, wr, now), Error::kOk);
        topo.host(src).kick();
    }

    // run until `n` WRITEs completed, then detach the engines and drain the fabric.
    bool run(size_t n) {
        sim.run_until([&] { return completions >= n || failed; }, sim.now() + 20ms, 5'000'000);
        const bool ok = completions == n && !failed;
        for (uint32_t h = 0; h < topo.host_count(); ++h) topo.host(h).attach(nullptr);
        sim.run_until({}, kSimForever, 1'000'000);
        return ok;
    }

    Sim sim;
    Topology topo;
    std::vector<std::unique_ptr<core::Endpoint>> endpoints;
    std::vector<uint32_t> pds;
    std::vector<std::pair<std::vector<std::byte>, std::vector<std::byte>>> bufs;
    size_t completions = 0;
    bool failed = false;
};

struct Seen {
    uint16_t id;
    uint8_t ecn;
    friend bool operator==(const Seen&, const Seen&) = default;
};

TEST(Pcap, CapturesAHostAndACableOfARealTransfer) {
    const uint64_t seed = test_seed(7);
    SCOPED_TRACE(seed_note(seed));
    IncastRun run(seed);
    const std::string host_file = temp_path("host"), cable_file = temp_path("cable");
    std::string err;
    auto at_host = PcapWriter::open(host_file, &err);
    ASSERT_TRUE(at_host) << err;
    auto on_cable = PcapWriter::open(cable_file, &err);
    ASSERT_TRUE(on_cable) << err;
    run.topo.capture_host(2, *at_host);
    run.topo.capture_cable(run.topo.host_cable(0, 0), *on_cable);

    // The host's own tap: what arrived at host 2, in order, with the ECN it arrived with.
    std::vector<Seen> arrived;
    run.topo.set_tap([&](const Packet& p, const Host& h) {
        if (h.index() == 2) arrived.push_back({static_cast<uint16_t>(p.id), p.meta.ecn});
    });
    run.write_to(0, 2, 256 * 1024);
    run.write_to(1, 2, 256 * 1024);
    ASSERT_TRUE(run.run(2));
    ASSERT_EQ(at_host->close(), "");
    ASSERT_EQ(on_cable->close(), "");

    const Host& h2 = run.topo.host(2);
    const PcapFile f = read_pcap(host_file);
    ASSERT_EQ(f.error, "");
    EXPECT_EQ(f.magic, kPcapMagicNanos);
    EXPECT_EQ(f.major, 2);
    EXPECT_EQ(f.minor, 4);
    EXPECT_EQ(f.linktype, 101u);
    EXPECT_EQ(f.snaplen, kPcapDefaultSnaplen);
    ASSERT_EQ(f.records.size(), at_host->packets());
    ASSERT_EQ(f.records.size(), h2.port_tx_packets(0) + h2.port_rx_packets(0));

    std::vector<Seen> captured_rx;
    uint64_t last_ns = 0, tx = 0, ce = 0;
    for (const Record& r : f.records) {
        EXPECT_GE(r.ns, last_ns) << "timestamps never go back";
        last_ns = r.ns;
        ASSERT_EQ(r.data.size(), r.orig_len) << "the default snap length keeps every datagram";
        const Ipv4Udp p = parse_ipv4_udp(r);
        if (p.src == h2.ipv4()) {
            ++tx;
            EXPECT_EQ(p.dport, kDefaultUdpPort) << "ACKs go to the peers' endpoint port";
            EXPECT_EQ(p.ecn, ecn::kEct0) << "the core sends everything ECT(0)";
        } else {
            EXPECT_EQ(p.dst, h2.ipv4());
            EXPECT_EQ(p.dport, kDefaultUdpPort);
            captured_rx.push_back({p.id, p.ecn});
            ce += p.ecn == ecn::kCe;
        }
    }
    EXPECT_EQ(tx, h2.port_tx_packets(0));
    EXPECT_EQ(captured_rx, arrived) << "the capture sees arrivals in order, with their marks";
    EXPECT_GT(ce, 0u) << "the incast queue marked CE, and the capture shows it";
    EXPECT_GT(last_ns, 0u);

    // The cable of host 0 carries its data up and host 2's ACKs down; the wires are
    // lossless here, so it delivers exactly what its two ends sent.
    const PcapFile c = read_pcap(cable_file);
    ASSERT_EQ(c.error, "");
    const Host& h0 = run.topo.host(0);
    EXPECT_EQ(c.records.size(), h0.port_tx_packets(0) + h0.port_rx_packets(0));
    for (const Record& r : c.records) {
        const Ipv4Udp p = parse_ipv4_udp(r);
        EXPECT_TRUE(p.src == h0.ipv4() || p.dst == h0.ipv4());
    }
    remove_capture(host_file);
    remove_capture(cable_file);
}

// run_tcpdump returns tcpdump's output for a file, or fails the test if tcpdump is missing
// (scripts/install-deps.sh installs it: this check must not pass silently).
std::string run_tcpdump(const std::string& args) {
    const std::string cmd = "tcpdump " + args + " 2>/dev/null";
    std::FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) {
        ADD_FAILURE() << "cannot run: " << cmd;
        return {};
    }
    std::string out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
    const int status = pclose(pipe);
    EXPECT_EQ(status, 0) << cmd << " failed (tcpdump missing? run scripts/install-deps.sh)";
    return out;
}

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

TEST(Pcap, TcpdumpParsesTheCaptureAndAgreesOnChecksums) {
    const uint64_t seed = test_seed(11);
    SCOPED_TRACE(seed_note(seed));
    IncastRun run(seed);
    const std::string file = temp_path("tcpdump");
    std::string err;
    auto w = PcapWriter::open(file, &err);
    ASSERT_TRUE(w) << err;
    run.topo.capture_host(2, *w);
    run.write_to(0, 2, 64 * 1024);
    ASSERT_TRUE(run.run(1));
    ASSERT_EQ(w->close(), "");
    ASSERT_GT(w->packets(), 0u);

    // -vv verifies the IPv4 header checksum ("bad cksum" otherwise) and the UDP checksum
    // ("udp sum ok"); -nn keeps addresses and ports numeric.
    const std::string out = run_tcpdump("-nn -vv -r " + file);
    EXPECT_EQ(count(out, "proto UDP (17)"), w->packets()) << out.substr(0, 2000);
    EXPECT_EQ(count(out, "udp sum ok"), w->packets()) << out.substr(0, 2000);
    EXPECT_EQ(count(out, "bad cksum"), 0u);
    // Data from host 0's path source ports to host 2's endpoint port, ACKs the other way.
    EXPECT_GT(count(out, " > 198.18.0.3.4797: [udp sum ok] UDP"), 0u) << out.substr(0, 2000);
    EXPECT_GT(count(out, " > 198.18.0.1.4797: [udp sum ok] UDP"), 0u) << out.substr(0, 2000);
    EXPECT_EQ(count(out, "198.18.0.1."), w->packets()) << "only host 0 talks to host 2";
    remove_capture(file);
}

// capture_host covers every plane of a multi-plane host, and the same seed captures the
// same packets at the same times.
TEST(Pcap, CapturesEveryPlaneAndIsDeterministic) {
    const uint64_t seed = test_seed(23);
    SCOPED_TRACE(seed_note(seed));
    std::vector<std::vector<char>> files;
    for (int attempt = 0; attempt < 2; ++attempt) {
        IncastRun run(seed, /*planes=*/2);
        const std::string file = temp_path("planes" + std::to_string(attempt));
        std::string err;
        auto w = PcapWriter::open(file, &err);
        ASSERT_TRUE(w) << err;
        run.topo.capture_host(0, *w);
        run.write_to(0, 1, 128 * 1024);
        ASSERT_TRUE(run.run(1));
        ASSERT_EQ(w->close(), "");
        const Host& h0 = run.topo.host(0);
        uint64_t expected = 0;
        for (uint16_t p = 0; p < 2; ++p) {
            EXPECT_GT(h0.port_tx_packets(p), 0u) << "the engine sprays over both planes";
            expected += h0.port_tx_packets(p) + h0.port_rx_packets(p);
        }
        const PcapFile f = read_pcap(file);
        ASSERT_EQ(f.error, "");
        EXPECT_EQ(f.records.size(), expected);
        // Everything but the payload (and so the UDP checksum): a WRITE carries the target
        // buffer's virtual address, which differs between the two runs' allocations.
        std::vector<char> headers;
        for (const Record& r : f.records) {
            const std::string line = std::to_string(r.ns) + " " + std::to_string(r.orig_len) + " ";
            headers.insert(headers.end(), line.begin(), line.end());
            headers.insert(headers.end(), r.data.begin(), r.data.begin() + 26);
        }
        files.push_back(std::move(headers));
        remove_capture(file);
    }
    EXPECT_EQ(files[0], files[1]) << "same seed, same capture";
}

struct CountingTap final : PacketTap {
    void on_packet(const Packet&, SimTime) override { ++packets; }
    uint64_t packets = 0;
};

TEST(CaptureSpec, NamesHostsAndCables) {
    const uint64_t seed = test_seed(29);
    SCOPED_TRACE(seed_note(seed));
    IncastRun run(seed);
    CountingTap some, all;
    const size_t cable = run.topo.host_cable(0, 0);
    ASSERT_EQ(apply_capture_spec(run.topo, "host:2, cable:" + std::to_string(cable), some), "");
    ASSERT_EQ(apply_capture_spec(run.topo, "hosts", all), "");
    run.write_to(0, 2, 64 * 1024);
    run.write_to(1, 2, 64 * 1024);
    ASSERT_TRUE(run.run(2));
    auto seen = [&](uint32_t h) {
        return run.topo.host(h).port_tx_packets(0) + run.topo.host(h).port_rx_packets(0);
    };
    // The lossless cable of host 0 delivers exactly what host 0 sent and received.
    EXPECT_GT(seen(0), 0u);
    EXPECT_EQ(some.packets, seen(2) + seen(0));
    EXPECT_EQ(all.packets, seen(0) + seen(1) + seen(2));
}

TEST(CaptureSpec, BadItemsGiveOneLineErrorsAndCaptureNothing) {
    IncastRun run(1);
    CountingTap tap;
    const std::pair<const char*, const char*> cases[] = {
        {"host:9", "capture point 'host:9': no host 9 (the topology has 3)"},
        {"host:0,switch:1", "capture point 'switch:1': expected host:N, cable:N or hosts"},
        {"cable:", "capture point 'cable:': expected a number after 'cable:'"},
        {"host:1x", "capture point 'host:1x': expected a number after 'host:'"},
        {"", "capture point '': expected host:N, cable:N or hosts"},
    };
    for (const auto& [spec, error] : cases)
        EXPECT_EQ(apply_capture_spec(run.topo, spec, tap), error);
    run.write_to(0, 1, 4096);
    ASSERT_TRUE(run.run(1));
    EXPECT_EQ(tap.packets, 0u) << "a bad spec splices in nothing, not even its good items";
}

TEST(Pcap, Ipv6HeadersSnapLengthAndTimestamps) {
    const std::string file = temp_path("v6");
    std::string err;
    auto w = PcapWriter::open(file, &err, 100);
    ASSERT_TRUE(w) << err;
    PacketMeta m;
    m.src.ip = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    m.dst.ip = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    m.src.port = 50000;
    m.dst.port = 4797;
    m.ecn = ecn::kCe;
    std::vector<std::byte> payload(301);  // odd length: the checksum pads the last byte
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 7);
    const SimTime at = SimTime{} + std::chrono::seconds(3) + SimDuration{1'234'567};
    w->write(m, payload, at);
    w->write(m, std::span(payload).first(10), at + 1us);  // fits the snap length whole
    ASSERT_EQ(w->close(), "");

    const PcapFile f = read_pcap(file);
    ASSERT_EQ(f.error, "");
    ASSERT_EQ(f.records.size(), 2u);
    const Record& big = f.records[0];
    EXPECT_EQ(big.ns, 3'000'001'234u) << "picoseconds floor to nanoseconds";
    EXPECT_EQ(big.orig_len, 40u + 8u + 301u);
    EXPECT_EQ(big.data.size(), 100u) << "cut at the snap length";
    EXPECT_EQ(big.data[0] >> 4, 6);
    EXPECT_EQ(((big.data[0] & 0xf) << 4 | big.data[1] >> 4) & 3, ecn::kCe) << "traffic class";
    EXPECT_EQ(be16(&big.data[4]), 8u + 301u);
    EXPECT_EQ(big.data[6], 17);

    const Record& small = f.records[1];
    EXPECT_EQ(small.ns, 3'000'002'234u);
    ASSERT_EQ(small.data.size(), small.orig_len);
    // The UDP checksum over the IPv6 pseudo-header (addresses, length, next header).
    const std::vector<uint8_t> udp(small.data.begin() + 40, small.data.end());
    const std::vector<uint8_t> addrs(small.data.begin() + 8, small.data.begin() + 40);
    EXPECT_EQ(ones_sum(udp, ones_sum(addrs) + 17u + udp.size()), 0xffff);
    remove_capture(file);
}

// A packet that travels elided (its middle run of one byte value not stored, packet.h)
// is captured with its whole datagram: the record holds the bytes the sender wrote.
TEST(Pcap, AnElidedPacketIsCapturedWhole) {
    const std::string file = temp_path("elided");
    std::string err;
    auto w = PcapWriter::open(file, &err);
    ASSERT_TRUE(w) << err;
    Sim sim(1);
    PacketPtr big = sim.packets().acquire();
    std::vector<std::byte> d(72 + 4096 + 4, std::byte{0x5a});  // header, payload, trailer
    for (size_t i = 0; i < 72; ++i) d[i] = static_cast<std::byte>(i * 7 + 1);
    for (size_t i = 0; i < 4; ++i) d[72 + 4096 + i] = static_cast<std::byte>(0xf0 + i);
    big->bytes.assign(d.data(), d.data() + d.size());
    PacketPtr p = sim.packets().compact(*big);
    ASSERT_TRUE(p && p->bytes.elided());
    p->meta.src = Address::ipv4(0xC6120001, 50000);
    p->meta.dst = Address::ipv4(0xC6120002, 4797);
    w->on_packet(*p, SimTime{});
    ASSERT_EQ(w->close(), "");

    const PcapFile f = read_pcap(file);
    ASSERT_EQ(f.error, "");
    ASSERT_EQ(f.records.size(), 1u);
    const Record& r = f.records[0];
    ASSERT_EQ(r.orig_len, 28u + d.size());
    ASSERT_EQ(r.data.size(), r.orig_len);
    parse_ipv4_udp(r);  // lengths and checksums
    const auto* sent = reinterpret_cast<const uint8_t*>(d.data());
    EXPECT_TRUE(std::equal(r.data.begin() + 28, r.data.end(), sent, sent + d.size()));
    p.reset();
    big.reset();
    remove_capture(file);
}

TEST(Pcap, BadPathAndSnapLengthGiveOneLineErrors) {
    std::string err;
    EXPECT_EQ(PcapWriter::open("/nonexistent-dir/x.pcap", &err), nullptr);
    EXPECT_NE(err.find("/nonexistent-dir/x.pcap"), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos);
    err.clear();
    EXPECT_EQ(PcapWriter::open(temp_path("snap"), &err, 10), nullptr);
    EXPECT_NE(err.find("snap length 10"), std::string::npos) << err;
    EXPECT_EQ(check_pcap_snaplen(kPcapDefaultSnaplen), "");
}

}  // namespace
}  // namespace mroce::sim
