#!/usr/bin/python3
"""mutants.py — break the engine or the datapath one line at a time and see whether
`mroce conform` notices (issue 16, item 5). Run it as `scripts/mutation-score`.

Each mutant is a realistic one-line bug a second implementation could make, and names the
spec requirement it breaks. For each mutant: apply its change to the source tree, build
`mroce` (incrementally: one object and the link), start `mroce conform-agent` on 127.0.0.1
(ephemeral ports), run the whole suite against it and record the failing tests; then
restore the file. The file is restored in `finally`, so an interrupted run leaves the tree
as it was (check `git status` anyway). A mutant is killed when at least one test fails,
and fails again when the failing tests are run once more on their own (a test that fails
now and then on a loaded machine kills nothing by chance; such one-off failures are shown
and kept in the JSON as `failed_once`). The unmutated tree is built and run first: if
the suite fails on it, nothing is scored. The build at the end restores the binary.

Do not run it in a tree someone else is building: it edits core/ and datapath/ in place.

Usage: scripts/mutation-score [--build DIR] [--json FILE] [--list] [--check] [NAME ...]
  --list   print every mutant (name, file, spec ids, what it breaks) and exit
  --check  check that every mutant's original text occurs exactly once in its file (so a
           refactor cannot silently disable a mutant); no build, exit 1 if one does not
  --json   write the results (and the score) to FILE
Exit status: 0 if every mutant run was killed (or --list / --check passed), 1 if some
survived (a stale or unbuildable mutant counts as survived), 2 for bad usage.
"""

import argparse
import json
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

# name -> (file, original text, mutated text, what it breaks)
MUTANTS = {
    "token_unchecked": ("core/endpoint.cc",
                        "    if (common.dst_token != c->token()) {",
                        "    if (common.dst_token != c->token() && false) {",
                        "[CONN-4] a wrong token is accepted"),
    "ecn_not_echoed": ("core/connection_rx.cc",
                       "    a.ecn_ce_count = rp.ce_count;",
                       "    a.ecn_ce_count = 0;",
                       "[ACK-4] CE marks are never echoed"),
    "stale_dup_dropped_as_window": ("core/connection_rx.cc",
                                    "    if (ahead < 0) {\n        // [STREAM-4]",
                                    "    if (ahead < 0 && false) {\n        // [STREAM-4]",
                                    "[STREAM-4] a delivered message's duplicate is not re-reported"),
    "sack_bit_order": ("core/rx_window.h",
                       "out.bytes[w * 8 + k] = reverse_bits(static_cast<uint8_t>(v));",
                       "out.bytes[w * 8 + k] = static_cast<uint8_t>(v);",
                       "[ACK-2] SACK bits in the wrong order within a byte"),
    "read_checks_write_flag": ("core/connection_rx.cc",
                               "        need = access::kRemoteRead;\n",
                               "        need = access::kRemoteWrite;\n",
                               "[PLACE-15] READ checked against REMOTE_WRITE"),
    "write_wrong_nack_reason": ("core/connection_rx.cc",
                                "                ++stats_.access_errors;\n                return refuse(s, h, wire::NackReason::kRemoteAccess);",
                                "                ++stats_.access_errors;\n                return refuse(s, h, wire::NackReason::kInvalidRequest);",
                                "[PLACE-4] WRITE access errors NACKed as INVALID_REQUEST"),
    "atomic_twice": ("core/connection_answer.cc",
                     "            now_value = old + b.swap_add;",
                     "            now_value = old + b.swap_add + (stats_.atomics_executed ? 0 : b.swap_add);",
                     "[PLACE-17] the first FETCH_ADD adds twice"),
    "misaligned_atomic_allowed": ("core/connection_rx.cc",
                                  "    } else if (h.remote_addr % 8 != 0) {",
                                  "    } else if (h.remote_addr % 8 != 0 && false) {",
                                  "[PLACE-17] a misaligned atomic executes"),
    "no_dont_fragment": ("datapath/udp/udp_datapath.cc",
                         "    if (family == AF_INET) return set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);",
                         "    if (family == AF_INET) return set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DONT);",
                         "[UDP-8] IPv4 packets without Don't Fragment"),
    "floor_ignored_on_data": ("core/connection_rx.cc",
                              "        note_skipped(ps, rp.window.advance_to(h.psn_floor - 1));",
                              "        (void)0;",
                              "[PATH-6] a DATA's psn_floor is not applied"),
    "probe_reply_once": ("core/connection_rx.cc",
                         "        if (--rp.probe_copies > 0)",
                         "        if (--rp.probe_copies > 0 && false)",
                         "[PROBE-2] the PROBE reply is sent once"),
    "probe_reply_same_path": ("core/connection_rx.cc",
                              "            out = other_return_path(rp.probe_first_path, now);",
                              "            out = rp.probe_first_path;",
                              "[PROBE-2] both reply copies on one return path"),
    "hello_wrong_port": ("core/connection.cc",
                         "    h.endpoint_port = ep_.local_.port;",
                         "    h.endpoint_port = ep_.local_.port + 1;",
                         "[CONN-2] HELLO announces the wrong endpoint port"),
    "retx_no_report": ("core/connection_rx.cc",
                       "    if (h.flags & wire::data_flag::kRetx) report_delivery(s);",
                       "    (void)0;",
                       "[STREAM-9] no delivery report after a RETX DATA"),
    "stream_access_ignored": ("core/connection_rx.cc",
                              "    if (!(s.limits.remote_access & need)) return nullptr;",
                              "    (void)0;",
                              "[STREAM-12] the queue pair's remote access is not checked"),
    "request_not_rechecked": ("core/connection_rx.cc",
                              "                              read ? access::kRemoteRead : access::kRemoteAtomic) != slot.target) {",
                              "                              read ? access::kRemoteRead : access::kRemoteAtomic) != slot.target && false) {",
                              "[PLACE-26] a waiting READ or atomic is not checked again at its turn"),
    "stale_dup_no_report": ("core/connection_rx.cc",
                            "        ++stats_.stale_duplicates;\n        report_delivery(s);",
                            "        ++stats_.stale_duplicates;",
                            "[STREAM-4] no delivery report after a stale duplicate"),
    # --- endpoint.cc: admission and the handshake's entry points
    "restart_without_proof": ("core/endpoint.cc",
                              "    if (!proven && (c || unproven_ >= cfg_.unproven_connections))",
                              "    if (!proven && unproven_ >= cfg_.unproven_connections)",
                              "[CONN-25] a restart's HELLO replaces the live connection without a RETRY"),
    "zero_id_hello_accepted": ("core/endpoint.cc",
                               "    if (h.src_conn_id != 0 && h.src_token != 0) return true;",
                               "    if (h.src_conn_id != 0 || h.src_token != 0) return true;",
                               "[CONN-23] a HELLO with one zero id (conn id or token) makes a connection"),
    "hello_peer_from_source_port": ("core/endpoint.cc",
                                    "    const Address peer = meta.src.with_port(h->endpoint_port);",
                                    "    const Address peer = meta.src;",
                                    "[CONN-13] the peer endpoint taken from the HELLO's source port, not endpoint_port"),
    "v1_hello_unanswered": ("core/endpoint.cc",
                            "        if (e == Error::kBadVersion && common.version == wire::kLegacyVersion)",
                            "        if (e == Error::kBadVersion && common.version == wire::kLegacyVersion && false)",
                            "[VER-1] a version-1 HELLO is dropped, not refused with a version-1 CLOSE"),
    "v1_hello_ack_token_unchecked": ("core/endpoint.cc",
                                     "        if (!c || c->token() != h->common.dst_token) return;",
                                     "        if (!c) return;",
                                     "[VER-1] a forged version-1 HELLO_ACK (wrong token) fails a Connecting connection"),
    # --- hello_guard.cc: cookies and stateless replies
    "cookie_mac_unchecked": ("core/hello_guard.cc",
                             "    const uint64_t m = wire::load_be64(bytes_of(h.cookie) + 4);",
                             "    const uint64_t m = mac(peer, h, t);",
                             "[CONN-25] the MAC is compared with itself: any cookie with zero bytes 12-15 proves an address"),
    "cookie_not_bound_to_token": ("core/hello_guard.cc",
                                  "    wire::store_be64(msg + 22, h.src_token);",
                                  "    wire::store_be64(msg + 22, 0);",
                                  "[CONN-25] the cookie does not cover src_token: it proves another identity too"),
    "v1_close_wrong_reason": ("core/hello_guard.cc",
                              "            p.reason = static_cast<uint32_t>(wire::CloseReason::kVersionMismatch);",
                              "            p.reason = static_cast<uint32_t>(wire::CloseReason::kProtocolError);",
                              "[VER-1] a version-1 HELLO is refused with reason PROTOCOL_ERROR"),
    "v1_close_in_version_2": ("core/hello_guard.cc",
                              "            p.common.version = wire::kLegacyVersion;",
                              "            (void)0;",
                              "[VER-1] the refusal of a version-1 HELLO is a version-2 CLOSE it cannot read"),
    # --- memory.cc: protection
    "pd_unchecked": ("core/memory.cc",
                     "    if (!mr || mr->pd != pd) return Error::kAccessDenied;",
                     "    if (!mr) return (void)pd, Error::kAccessDenied;",
                     "[PLACE-4] a key of another protection domain is accepted"),
    "bounds_off_by_one": ("core/memory.cc",
                          "len > mr->length - (addr - base))",
                          "len > mr->length - (addr - base) + 1)",
                          "[PLACE-4] an access one byte past the region's end is accepted"),
    "key_tag_unchecked": ("core/memory.cc",
                          "    if (!mr.live || mr.key != key) return nullptr;",
                          "    if (!mr.live) return nullptr;",
                          "[PLACE-29] [PLACE-4] the key's tag is not compared: any tag names the slot's region"),
    "access_flag_any": ("core/memory.cc",
                        "    if (!mr || (mr->access & needed) != needed) return Error::kAccessDenied;",
                        "    if (!mr || mr->access == 0) return (void)needed, Error::kAccessDenied;",
                        "[PLACE-4] any access flag allows every remote operation"),
    "key_tag_not_random": ("core/memory.cc",
                           "    uint32_t tag = rng_.next_u32() & tag_mask;",
                           "    uint32_t tag = 1 & tag_mask;",
                           "[PLACE-29] memory-key tags are a constant, not drawn from the generator"),
    # --- connection.cc: handshake and lifecycle
    "hello_ack_msg_isn_is_isn": ("core/connection.cc",
                                 "    h.msg_isn = msg_isn_;",
                                 "    h.msg_isn = isn_;",
                                 "[STREAM-2] [CONN-2] HELLO(_ACK) announces the path ISN as msg_isn"),
    "segment_size_not_min": ("core/connection.cc",
                             "    segment_size_ = std::min(cfg_.max_payload, h.max_payload);",
                             "    segment_size_ = cfg_.max_payload;",
                             "[DATA-4] segments cut to this side's max_payload, not the smaller of the two"),
    "v1_hello_never_sent": ("core/connection.cc",
                            "!peer_speaks_v2_ && hello_tries_ % 3 == 2) {",
                            "!peer_speaks_v2_ && hello_tries_ % 3 == 3) {",
                            "[VER-1] an initiator never sends the version-1 form of its HELLO"),
    "retry_cookie_not_echoed": ("core/connection.cc",
                                "    cookie_ = r.cookie;",
                                "    (void)r;",
                                "[CONN-25] the initiator does not echo a RETRY's cookie"),
    "no_confirming_hello_ack": ("core/connection.cc",
                                "        if (h.common.type == wire::PacketType::kHelloAck) owe_hello_acks(1);",
                                "        (void)0;",
                                "[CONN-26] [CONN-16] the initiator does not confirm with its own HELLO_ACK"),
    "hello_echo_zero": ("core/connection.cc",
                        "    if (type == wire::PacketType::kHelloAck) h.hello_echo = peer_hello_seq_;",
                        "    if (type == wire::PacketType::kHelloAck) h.hello_echo = 0;",
                        "[CONN-32] a HELLO_ACK echoes 0, not the number of the latest HELLO received"),
    "resend_on_any_hello": ("core/connection.cc",
                            "    if (h.dropped) resend_to_opening_peer(now);",
                            "    resend_to_opening_peer(now);",
                            "[CONN-31] a HELLO without DROPPED also makes the DATA in flight go again"),
    "no_resend_to_opening_peer": ("core/connection.cc",
                                  "    for (TxPath& p : tx_paths_) declare_all_lost(p, LossReason::kTimeout, now);",
                                  "    (void)now;",
                                  "[CONN-31] a HELLO with DROPPED before any ACK leaves the DATA in flight"),
    "dropped_said_forever": ("core/connection.cc",
                             "h.dropped = std::exchange(dropped_opening_, false);",
                             "h.dropped = dropped_opening_;",
                             "[CONN-31] once DATA was dropped, every later HELLO says DROPPED"),
    "confirmation_not_dropped": ("core/connection.cc",
                                 "        h.dropped = std::exchange(dropped_opening_, false);",
                                 "        h.dropped = type == wire::PacketType::kHello && std::exchange(dropped_opening_, false);",
                                 "[CONN-31] the HELLO_ACK confirming an establishment never says DROPPED"),
    "ack_dropped_ignored": ("core/connection.cc",
                            "    if (h.dropped) resend_to_opening_peer(now);",
                            "    if (h.dropped && h.common.type == wire::PacketType::kHello) resend_to_opening_peer(now);",
                            "[CONN-31] a HELLO_ACK with DROPPED before any ACK leaves the DATA in flight"),
    "dropped_never_said": ("core/connection.cc",
                           "dropped_opening_ = true;",
                           "(void)0;",
                           "[CONN-31] a Connecting connection drops DATA without saying DROPPED"),
    "no_drop_prompt": ("core/connection.cc",
                       "    drop_prompted_ = true;\n    ++hellos_pending_;",
                       "    drop_prompted_ = true;",
                       "[CONN-31] the first drop sends no HELLO at once: DROPPED waits for the next scheduled one"),
    "unproven_never_ends": ("core/connection.cc",
                            "        if (streams_.empty()) return fail(Status::kPeerDead, now);",
                            "        (void)0;",
                            "[CONN-26] an unproven connection no stream uses never ends"),
    "peer_close_ignored": ("core/connection.cc",
                           "    // [CONN-8]: the peer closed; everything outstanding is flushed.\n    if (state_ == ConnState::kClosed) return;",
                           "    // [CONN-8]: the peer closed; everything outstanding is flushed.\n    return;",
                           "[CONN-8] a CLOSE from the peer is ignored"),
    # --- connection_rx.cc: receiving
    "floor_above_psn_accepted": ("core/connection_rx.cc",
                                 "        if (seq_gt(h.psn_floor, h.path_psn)) {",
                                 "        if (seq_gt(h.psn_floor, h.path_psn) && false) {",
                                 "[PATH-6] a DATA whose psn_floor lies above its PSN is accepted"),
    "ack_now_ignored": ("core/connection_rx.cc",
                        "        if ((h.flags & wire::data_flag::kAckNow) || mark != RxWindow::Mark::kNew ||",
                        "        if (mark != RxWindow::Mark::kNew ||",
                        "[ACK-11] ACK_NOW does not make an immediate ACK"),
    "stream_window_off_by_one": ("core/connection_rx.cc",
                                 "    if (static_cast<uint32_t>(ahead) >= kStreamWindow) {",
                                 "    if (static_cast<uint32_t>(ahead) > kStreamWindow) {",
                                 "[STREAM-3] a message exactly the stream window ahead is accepted"),
    "misaligned_offset_accepted": ("core/connection_rx.cc",
                                   "    if (h.offset % segment_size_ != 0) {",
                                   "    if (h.offset % segment_size_ != 0 && false) {",
                                   "[PLACE-9] a segment whose offset is not a multiple of the segment size is placed"),
    "claimed_receive_reused": ("core/connection_rx.cc",
                               "                    if (pr->claimed) {",
                               "                    if (pr->claimed && false) {",
                               "[PLACE-2] a receive already claimed by another message is claimed again"),
    "send_longer_than_receive": ("core/connection_rx.cc",
                                 "                if (h.msg_len > pr->wr.length) return refuse(",
                                 "                if (h.msg_len > pr->wr.length + 1) return refuse(",
                                 "[PLACE-2] a SEND one byte longer than its receive is accepted"),
    "segment_msg_len_unchecked": ("core/connection_rx.cc",
                                  "slot.opcode != h.opcode || slot.msg_len != h.msg_len ||",
                                  "slot.opcode != h.opcode ||",
                                  "[PLACE-1] a segment with another msg_len than its message's first is placed"),
    "payload_len_unchecked": ("core/connection_rx.cc",
                              "    if (seg >= slot.segs.nseg() || h.payload_len != expect) {",
                              "    if (seg >= slot.segs.nseg() || h.payload_len > expect) {",
                              "[PLACE-9] a segment shorter than its offset's length is placed"),
    "segment_window_unchecked": ("core/segment_map.h",
                                 "        if (seg - base_ >= kSegmentWindow) return Add::kOutOfWindow;",
                                 "        if (seg - base_ >= 2 * kSegmentWindow) return Add::kOutOfWindow;",
                                 "[PLACE-31] a segment beyond the message's segment window is written"),
    "compare_swap_always_swaps": ("core/connection_answer.cc",
                                  "        else if (old == b.compare)",
                                  "        else",
                                  "[PLACE-17] COMPARE_SWAP swaps whatever the compare value"),
    "stale_generation_current": ("core/connection_rx.cc",
                                 "    return gen == rp.gen ? RxGen::kCurrent : RxGen::kStale;",
                                 "    return RxGen::kCurrent;",
                                 "[PATH-7] a DATA of an older generation is acknowledged as current"),
    "unknown_stream_no_detail": ("core/connection_rx.cc",
                                 "        queue_nack(h, wire::NackReason::kInvalidRequest, wire::kNackDetailUnknownStream);",
                                 "        queue_nack(h, wire::NackReason::kInvalidRequest, 0);",
                                 "[STREAM-8] an unknown stream's NACK lacks its detail code"),
    "refusal_not_sticky": ("core/connection_rx.cc",
                           "    if (!s.rx_failed || seq_lt(h.msg_seq, s.rx_fail_seq)) {\n        s.rx_failed = true;",
                           "    if (false) {\n        s.rx_failed = true;",
                           "[ERR-3] a refused stream goes on placing later messages"),
    "answerless_request_no_nack": ("core/connection_rx.cc",
                                   "            queue_nack(h, wire::NackReason::kInvalidRequest, 0);\n        return;\n    }\n    if (static_cast",
                                   "            (void)0;\n        return;\n    }\n    if (static_cast",
                                   "[PLACE-28] a re-sent request that holds no answer is dropped silently"),
    "nack_wrong_psn": ("core/connection_rx.cc",
                       "    n.path_psn = h.path_psn;",
                       "    n.path_psn = h.psn_floor;",
                       "[NACK-2] a NACK names the floor, not the refused packet's PSN"),
    "probe_floor_ignored": ("core/connection_rx.cc",
                            "    note_skipped(path_stats_[p.path_id], rp.window.advance_to(p.psn_floor - 1));",
                            "    (void)0;",
                            "[PROBE-1] [PATH-6] a PROBE's psn_floor is not applied"),
    "ts_echo_zero": ("core/connection_rx.cc",
                     "    a.ts_echo = rp.last_ts;",
                     "    a.ts_echo = 0;",
                     "[ACK-6] ACKs do not echo the timestamp"),
    # --- connection_tx.cc and connection_ack.cc: sending and the requester
    "retx_flag_missing": ("core/connection_tx.cc",
                          "                                   (retx ? wire::data_flag::kRetx : 0) |",
                          "                                   0 |",
                          "[DATA-3] [STREAM-9] retransmissions are sent without RETX"),
    "last_flag_missing": ("core/connection_tx.cc",
                          "    h.flags = static_cast<uint8_t>((last ? wire::data_flag::kLast : 0) |",
                          "    h.flags = static_cast<uint8_t>(0 |",
                          "[DATA-3] a message's last segment is sent without LAST"),
    "response_names_own_seq": ("core/connection_tx.cc",
                               "        h.remote_addr = m.resp_to;",
                               "        h.remote_addr = m.msg_seq;",
                               "[PLACE-16] a response names its own msg_seq, not the request's"),
    "remote_access_nack_as_invalid": ("core/connection_ack.cc",
                                      "        case wire::NackReason::kRemoteAccess: return fail_stream(*s, Status::kRemoteAccess);",
                                      "        case wire::NackReason::kRemoteAccess: return fail_stream(*s, Status::kRemoteInvalid);",
                                      "[ERR-8] NACK(REMOTE_ACCESS) completes with remote_invalid"),
    "rnr_wait_ignores_detail": ("core/connection_ack.cc",
                                "                std::clamp<uint32_t>(n.detail, cfg_.rnr_delay_us, 1'000'000));",
                                "                std::clamp<uint32_t>(0, cfg_.rnr_delay_us, 1'000'000));",
                                "[PLACE-6] the RNR wait ignores the delay the NACK asks for"),
    # --- coalesced datagrams ([WIRE-10]; conform/tests_coalesce.cc)
    "coalesce_without_negotiation": ("core/endpoint.cc",
                                     "            const size_t ack_len = c->coalesce() ? wire::coalesced_ack_size(datagram, short_ok) : 0;",
                                     "            const size_t ack_len = wire::coalesced_ack_size(datagram, short_ok);",
                                     "[WIRE-10] [ACK-1] a FOLLOWED ACK is read as a pair on a connection without COALESCE"),
    # --- SHORT ACKs ([ACK-21]; conform/tests_coalesce.cc)
    "short_ack_without_negotiation": ("core/endpoint.cc",
                                      "            const bool short_ok = c->short_acks();",
                                      "            const bool short_ok = true;",
                                      "[ACK-21] [VER-2] a SHORT ACK is applied on a connection that did not negotiate SHORT_ACK"),
    "short_ack_with_sack_bits": ("core/connection_rx.cc",
                                 "    if (short_acks_ && wire::sack_empty(a.sack)) a.flags |= wire::ack_flag::kShort;",
                                 "    if (short_acks_) a.flags |= wire::ack_flag::kShort;",
                                 "[ACK-21] an ACK with SACK bits set is sent SHORT (the bits are lost)"),
    # --- COMPACT DATA ([DATA-9]; conform/tests_compact.cc)
    "compact_without_negotiation": ("core/connection.h",
                                    "    bool sends_compact(wire::Opcode op) const { return compact_data_ && wire::may_be_compact(op); }",
                                    "    bool sends_compact(wire::Opcode op) const { return wire::may_be_compact(op); }",
                                    "[DATA-9] [VER-2] WRITEs are sent COMPACT to a peer that did not announce COMPACT_DATA"),
    "compact_read_without_negotiation": ("core/endpoint.cc",
                                         "            if (Error e = wire::parse_data_body(datagram, rx_data_, c->compact_data()); e != Error::kOk)",
                                         "            if (Error e = wire::parse_data_body(datagram, rx_data_, true); e != Error::kOk)",
                                         "[DATA-9] [WIRE-6] a COMPACT DATA is placed on a connection that did not negotiate COMPACT_DATA"),
    "coalesced_ack_applied_first": ("core/endpoint.cc",
                                    "            rx_ack_.common = common;\n            if (followed) {",
                                    "            rx_ack_.common = common;\n            c->on_ack(rx_ack_, now);\n            if (followed) {",
                                    "[WIRE-8] [WIRE-10] the ACK of a pair is applied before its DATA is checked"),
    "coalesced_token_unchecked": ("core/endpoint.cc",
                                  "                    inner.dst_token != common.dst_token)",
                                  "                    false)",
                                  "[WIRE-10] a pair whose DATA carries another token is applied"),
    "coalesced_pair_unbounded": ("core/endpoint.cc",
                                 "                if (ack_len >= datagram.size() || datagram.size() > wire::kDataHeaderSize + cfg_.max_payload)",
                                 "                if (ack_len >= datagram.size())",
                                 "[WIRE-10] a pair longer than 72 + max_payload is applied"),
    # --- datapath
    "not_ect0": ("datapath/udp/udp_datapath.cc",
                 "    return opt_.dscp_by_class[cls] << 2 | (meta.ecn & 0x3);",
                 "    return opt_.dscp_by_class[cls] << 2;",
                 "[UDP-5] packets leave Not-ECT instead of ECT(0)"),
    "rx_ecn_ignored": ("datapath/udp/udp_datapath.cc",
                       "                meta.ecn = tos & 0x3;",
                       "                meta.ecn = 0;",
                       "[ACK-4] the datapath does not read the received ECN field, so CE is never echoed"),
}


SPEC_ID_RE = re.compile(r"\[([A-Z]+-[0-9]+)\]")


def spec_ids(what):
    return " ".join(SPEC_ID_RE.findall(what))


def run_suite(build, tests=()):
    """Starts an agent, runs the suite (or the tests named), stops the agent (by pid).
    Returns the failing tests."""
    mroce = str(build / "mroce")
    agent = subprocess.Popen([mroce, "conform-agent", "--listen", "127.0.0.1:0", "--udp", "127.0.0.1:0"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = agent.stdout.readline()
        m = re.match(r"conform-agent: control (\S+) ", line)
        if not m:
            return ["(agent did not start)"]
        try:
            cmd = [mroce, "conform", m.group(1)]
            for t in tests:
                cmd += ["--test", t]
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return ["(suite timed out)"]
        fails = [l.split()[0] for l in run.stdout.splitlines() if re.search(r"\sFAIL\s", l)]
        if run.returncode != 0 and not fails:
            fails = [f"(suite exited {run.returncode})"]
        return fails
    finally:
        agent.terminate()
        agent.wait()


def build_mroce(build):
    b = subprocess.run(["cmake", "--build", str(build), "-j2", "--target", "mroce"], cwd=ROOT,
                       capture_output=True, text=True)
    return b.returncode == 0, b.stdout[-3000:] + b.stderr[-3000:]


def confirmed_failures(build):
    """Runs the suite; the tests that failed run again, alone. A test counts as failing
    only if it failed both times, so a test that fails now and then on a loaded machine
    does not kill a mutant by chance. Returns (failing twice, failing once)."""
    first = run_suite(build)
    named = [t for t in first if not t.startswith("(")]
    if not named:
        return first, []
    again = set(run_suite(build, named))
    if any(t.startswith("(") for t in again):
        again = set(named)  # the agent or suite broke outright on the re-run
    return [t for t in first if t in again or t.startswith("(")], [t for t in named if t not in again]


def check_texts(names):
    """Names of the mutants whose original text is not in their file exactly once."""
    stale = []
    for name in names:
        rel, old, _, _ = MUTANTS[name]
        path = ROOT / rel
        count = path.read_text().count(old) if path.is_file() else 0
        if count != 1:
            print(f"{name}: its original text occurs {count} times in {rel} (must be once): "
                  f"the mutant is stale; update it with the code")
            stale.append(name)
    return stale


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--check", action="store_true",
                        help="check every mutant's original text occurs once; no build")
    parser.add_argument("--json", type=pathlib.Path, help="write the results to this file")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in MUTANTS]
    if unknown:
        print(f"mutation-score: no mutant named {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    names = args.names or list(MUTANTS)
    if args.list:
        for name in names:
            f, _, _, what = MUTANTS[name]
            print(f"{name:<30} {f:<30} {spec_ids(what):<22} {what}")
        print(f"{len(names)} mutants")
        return 0
    if args.check:
        stale = check_texts(names)
        print(f"mutation-score --check: {len(names) - len(stale)} of {len(names)} mutants apply")
        return 1 if stale else 0
    ok, log = build_mroce(args.build)
    if not ok:
        print(f"mutation-score: the unmutated tree does not build\n{log}")
        return 1
    baseline, baseline_flaky = confirmed_failures(args.build)
    if baseline:
        print(f"mutation-score: the suite fails on the unmutated tree: {' '.join(baseline)}")
        return 1
    if baseline_flaky:
        print(f"mutation-score: note: on the unmutated tree {' '.join(baseline_flaky)} failed once")
    results = []
    print(f"{'mutant':<30} {'spec':<22} {'result':<9} {'time':>5}  killed by")
    sys.stdout.flush()
    for name in names:
        rel, old, new, what = MUTANTS[name]
        path = ROOT / rel
        original = path.read_text()
        t0 = time.monotonic()
        fails, flaky, status = [], [], "SURVIVED"
        if original.count(old) != 1:
            status = "STALE"
        else:
            try:
                path.write_text(original.replace(old, new, 1))
                ok, log = build_mroce(args.build)
                if not ok:
                    print(f"{name}: build failed\n{log}")
                    status = "NOBUILD"
                else:
                    fails, flaky = confirmed_failures(args.build)
                    status = "KILLED" if fails else "SURVIVED"
            finally:
                path.write_text(original)
        seconds = time.monotonic() - t0
        results.append({"mutant": name, "file": rel, "spec": spec_ids(what), "what": what,
                        "result": status, "killed_by": fails, "failed_once": flaky,
                        "seconds": round(seconds, 1)})
        shown = " ".join(fails) if fails else f"({what})"
        if flaky:
            shown += f" [failed once only: {' '.join(flaky)}]"
        print(f"{name:<30} {spec_ids(what):<22} {status:<9} {seconds:>4.0f}s  {shown}")
        sys.stdout.flush()
    build_mroce(args.build)  # the unmutated binary again
    killed = sum(r["result"] == "KILLED" for r in results)
    survivors = [r["mutant"] for r in results if r["result"] != "KILLED"]
    total = len(results)
    score = killed / total if total else 1.0
    print(f"mutation score: {killed} of {total} killed ({100 * score:.1f}%)"
          + (f"; not killed: {' '.join(survivors)}" if survivors else ""))
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
        args.json.write_text(json.dumps({"commit": commit, "killed": killed, "total": total,
                                         "score": score, "mutants": results}, indent=1) + "\n")
    return 0 if not survivors else 1


if __name__ == "__main__":
    sys.exit(main())
