// obs/export_test.cc — the exporters on a hand-made snapshot: the Prometheus text is well
// formed (one HELP/TYPE per family, counters end in _total, every sample parses), JSON
// carries the catalog's keys with the snapshot's values, and docs/observability.md
// describes every name the catalog has.
#include "obs/export.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "obs/catalog.h"

namespace mroce::obs {
namespace {

Snapshot sample_snapshot() {
    Snapshot s;
    s.endpoint = "127.0.0.1:4797";
    s.engine_now_ns = 1'000'000;
    s.wall_now_ns = 1'700'000'000'000'000'000;
    s.endpoint_stats.truncated = 5;
    s.endpoint_stats.bad_token = 100000;
    s.driver_counters.push_back({"rx_udp_datagrams", "mroce_udp_rx_datagrams_total", "help", 42});
    for (uint32_t c = 0; c < 2; ++c) {
        ConnectionSnapshot cs;
        cs.id = 0x10001 + c;
        cs.peer = "127.0.0.1:5000";
        cs.state = core::ConnState::kEstablished;
        cs.rate_hint_mbps = 8000;
        cs.stats.retransmits = 3 + c;
        for (uint16_t p = 0; p < 2; ++p) {
            PathSnapshot ps;
            ps.id = p;
            ps.srtt_ns = 20'000;
            ps.cwnd_bytes = 65536;
            ps.stats.bytes_sent = 1000 * (p + 1);
            ps.rtt = {10, 200'000, 15'000, 20'000, 30'000, 31'000, 40'000};
            cs.paths.push_back(ps);
            s.rtt.record(20'000, 10);
        }
        s.connections.push_back(cs);
    }
    core::TraceEvent e;
    e.kind = core::TraceKind::kPathFailed;
    e.at = Time{} + std::chrono::nanoseconds(400'000);
    e.connection = 0x10001;
    e.path = 1;
    s.events.push_back({1, e});
    return s;
}

// expect_well_formed: one HELP/TYPE per family, counters end in _total, every sample
// parses and follows its TYPE; returns the number of samples.
size_t expect_well_formed(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    std::map<std::string, std::string> type_of;
    std::set<std::string> helped;
    const std::regex sample(R"(^([a-z_][a-z0-9_]*)(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? (-?[0-9.e+-]+)$)");
    size_t samples = 0;
    while (std::getline(in, line)) {
        if (line.rfind("# HELP ", 0) == 0) {
            const std::string name = line.substr(7, line.find(' ', 7) - 7);
            EXPECT_TRUE(helped.insert(name).second) << "HELP twice: " << name;
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) {
            std::istringstream t(line.substr(7));
            std::string name, type;
            t >> name >> type;
            EXPECT_TRUE(type_of.emplace(name, type).second) << "TYPE twice: " << name;
            if (type == "counter") {
                EXPECT_TRUE(name.ends_with("_total")) << name;
            }
            EXPECT_TRUE(name.rfind("mroce_", 0) == 0) << name;
            continue;
        }
        std::smatch m;
        EXPECT_TRUE(std::regex_match(line, m, sample)) << "not a sample: " << line;
        if (m.empty()) continue;
        std::string family = m[1];
        for (const char* suffix : {"_bucket", "_sum", "_count"})
            if (!type_of.count(family) && family.ends_with(suffix))
                family = family.substr(0, family.size() - std::string(suffix).size());
        EXPECT_TRUE(type_of.count(family)) << "sample before its TYPE: " << line;
        ++samples;
    }
    return samples;
}

TEST(Prometheus, EveryFamilyOnceAndEverySampleParses) {
    const std::string text = to_prometheus(sample_snapshot());
    EXPECT_GT(expect_well_formed(text), 100u);
    // The endpoint's own drops are visible (issue 18), and the sums add up.
    EXPECT_NE(text.find("mroce_endpoint_bad_token_total{endpoint=\"127.0.0.1:4797\"} 100000\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_endpoint_truncated_total{endpoint=\"127.0.0.1:4797\"} 5\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_retransmits_total{endpoint=\"127.0.0.1:4797\"} 7\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_tx_data_bytes_total{endpoint=\"127.0.0.1:4797\"} 6000\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_udp_rx_datagrams_total{endpoint=\"127.0.0.1:4797\"} 42\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_path_rtt_seconds{endpoint=\"127.0.0.1:4797\",conn=\"0x00010001\",path=\"1\",quantile=\"0.99\"} 3e-05\n"),
              std::string::npos);
    EXPECT_NE(text.find("mroce_connection_rate_hint_bytes_per_second{endpoint=\"127.0.0.1:4797\",conn=\"0x00010002\",peer=\"127.0.0.1:5000\"} 1000000000\n"),
              std::string::npos);
    // 40 samples of 20 µs: all below the 2^15 ns (32.768 µs) bucket, none below 2^14.
    EXPECT_NE(text.find("mroce_rtt_seconds_bucket{endpoint=\"127.0.0.1:4797\",le=\"1.6384e-05\"} 0\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_rtt_seconds_bucket{endpoint=\"127.0.0.1:4797\",le=\"3.2768e-05\"} 40\n"), std::string::npos);
}

TEST(Prometheus, PerConnectionSeriesAreCappedSumsAreNot) {
    Snapshot s = sample_snapshot();
    ConnectionSnapshot c = s.connections[0];
    s.connections.assign(kMaxLabelledConnections + 10, c);
    const std::string text = to_prometheus(s);
    size_t n = 0;
    for (size_t at = 0; (at = text.find("mroce_connection_retransmits_total{", at)) != std::string::npos; ++at) ++n;
    EXPECT_EQ(n, kMaxLabelledConnections);
    EXPECT_NE(text.find("mroce_retransmits_total{endpoint=\"127.0.0.1:4797\"} " +
                        std::to_string(3 * (kMaxLabelledConnections + 10)) + "\n"),
              std::string::npos);
}

TEST(Json, CarriesTheCatalogKeysAndValues) {
    const nlohmann::json j = to_json(sample_snapshot());
    EXPECT_EQ(j["counters"]["bad_token"], 100000u);
    EXPECT_EQ(j["counters"]["retransmits"], 7u);
    EXPECT_EQ(j["driver"]["rx_udp_datagrams"], 42u);
    for (const auto& f : endpoint_counters()) EXPECT_TRUE(j["counters"].contains(f.key)) << f.key;
    ASSERT_EQ(j["connections"].size(), 2u);
    const auto& c = j["connections"][1];
    EXPECT_EQ(c["connection"], "0x00010002");
    EXPECT_EQ(c["state"], "established");
    EXPECT_EQ(c["rate_hint_mbps"], 8000);
    EXPECT_EQ(c["counters"]["retransmits"], 4u);
    ASSERT_EQ(c["paths"].size(), 2u);
    EXPECT_EQ(c["paths"][1]["counters"]["tx_data_bytes"], 2000u);
    EXPECT_EQ(c["paths"][1]["rtt"]["p99_ns"], 30000u);
    EXPECT_EQ(c["paths"][1]["cwnd_bytes"], 65536);
    ASSERT_EQ(j["events"].size(), 1u);
    EXPECT_EQ(j["events"][0]["event"], "path_failed");
    EXPECT_EQ(j["events"][0]["path"], 1);
    // Engine time 400 µs, snapshot at engine 1 ms = wall W: the event was at W - 600 µs.
    EXPECT_EQ(j["events"][0]["time_ns"], 1'700'000'000'000'000'000 - 600'000);
}

// A sharded device's snapshot (api::DeviceConfig::threads): merge_shards sums the shards'
// counters, lists every shard's connections with its shard, keeps the events numbered
// before the snapshot began in sequence order, and the exporters label by shard.
TEST(Shards, MergedSnapshotSumsListsAndLabels) {
    Snapshot a = sample_snapshot();
    Snapshot b = sample_snapshot();
    for (auto& c : b.connections) c.id += 0x100;
    b.endpoint_stats.retries_sent = 7;
    core::TraceEvent e = a.events[0].event;
    a.events = {{1, e}, {4, e}};
    b.events = {{2, e}, {3, e}, {5, e}};  // 5: numbered after the snapshot began
    const Snapshot s = merge_shards({a, b}, 4);
    ASSERT_EQ(s.shards.size(), 2u);
    EXPECT_EQ(s.endpoint, "127.0.0.1:4797");
    EXPECT_EQ(s.endpoint_stats.truncated, 10u);
    EXPECT_EQ(s.endpoint_stats.retries_sent, 7u);
    EXPECT_EQ(s.shards[1].endpoint_stats.retries_sent, 7u);
    EXPECT_EQ(s.shards[0].endpoint_stats.retries_sent, 0u);
    ASSERT_EQ(s.driver_counters.size(), 1u);
    EXPECT_EQ(s.driver_counters[0].value, 84u);
    ASSERT_EQ(s.connections.size(), 4u);
    EXPECT_EQ(s.connections[1].shard, 0u);
    EXPECT_EQ(s.connections[2].shard, 1u);
    EXPECT_EQ(s.connections[2].id, 0x10101u);
    EXPECT_EQ(s.rtt.count(), 80u);
    std::vector<uint64_t> seqs;
    for (const auto& le : s.events) seqs.push_back(le.seq);
    EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3, 4}));

    const std::string text = to_prometheus(s);
    EXPECT_GT(expect_well_formed(text), 100u);
    const std::string ep = "endpoint=\"127.0.0.1:4797\"";
    EXPECT_NE(text.find("mroce_endpoint_truncated_total{" + ep + "} 10\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_retransmits_total{" + ep + "} 14\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_endpoint_shards{" + ep + "} 2\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_shard_retries_sent_total{" + ep + ",shard=\"1\"} 7\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_shard_retries_sent_total{" + ep + ",shard=\"0\"} 0\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_shard_udp_rx_datagrams_total{" + ep + ",shard=\"1\"} 42\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_shard_connections{" + ep + ",shard=\"1\"} 2\n"), std::string::npos);
    EXPECT_NE(text.find("mroce_connection_retransmits_total{" + ep +
                        ",conn=\"0x00010102\",peer=\"127.0.0.1:5000\",shard=\"1\"} 4\n"),
              std::string::npos);
    EXPECT_NE(text.find("mroce_path_tx_data_bytes_total{" + ep + ",conn=\"0x00010001\",path=\"1\",shard=\"0\"} 2000\n"),
              std::string::npos);

    const nlohmann::json j = to_json(s);
    EXPECT_EQ(j["counters"]["truncated"], 10u);
    EXPECT_EQ(j["counters"]["connections"], 4u);
    ASSERT_EQ(j["shards"].size(), 2u);
    EXPECT_EQ(j["shards"][1]["counters"]["retries_sent"], 7u);
    EXPECT_EQ(j["shards"][1]["counters"]["connections"], 2u);
    EXPECT_EQ(j["shards"][0]["driver"]["rx_udp_datagrams"], 42u);
    EXPECT_EQ(j["connections"][3]["shard"], 1u);
    EXPECT_EQ(j["events"].size(), 4u);
    // One engine's JSON has no shard keys.
    EXPECT_FALSE(to_json(a).contains("shards"));
    EXPECT_FALSE(to_json(a)["connections"][0].contains("shard"));
}

// docs/observability.md lists every metric: each catalog key (JSON) and Prometheus name.
TEST(Catalog, DocsDescribeEveryName) {
    std::ifstream f(MROCE_SOURCE_DIR "/docs/observability.md");
    ASSERT_TRUE(f) << "docs/observability.md missing";
    const std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto has = [&](const std::string& name) { return doc.find("`" + name + "`") != std::string::npos; };
    for (const auto& c : endpoint_counters()) EXPECT_TRUE(has(c.key)) << c.key;
    for (const auto& c : connection_counters()) EXPECT_TRUE(has(c.key)) << c.key;
    for (const auto& c : path_counters()) EXPECT_TRUE(has(c.key)) << c.key;
    for (const auto& g : connection_gauges()) EXPECT_TRUE(has(g.prometheus)) << g.prometheus;
    for (const auto& g : path_gauges()) EXPECT_TRUE(has(g.prometheus)) << g.prometheus;
    for (const char* ev : {"connection_up", "connection_failed", "connection_closed", "path_failed",
                           "path_recovered", "path_rerolled", "window_cut", "rate_hint_changed"})
        EXPECT_TRUE(has(ev)) << ev;
}

}  // namespace
}  // namespace mroce::obs
