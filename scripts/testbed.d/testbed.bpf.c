// testbed.bpf.c — the testbed's one tc (cls_bpf, direct-action) program: random loss, a
// blackhole switch, an ECN-marking virtual queue, payload corruption and counters. This kernel has no netem, RED
// or fq_codel and cannot load modules, so these impairments have to be done here.
//
// One load of this object = one "element" with its own maps: scripts/testbed loads it once
// per plane (attached at ingress of every interface of the plane's router) and once per
// receiving host (attached at egress of its leaf's downlink, in front of a TBF qdisc of the
// same rate). The maps are pinned under /sys/fs/bpf/<prefix>/<element>/ and driven with
// bpftool; the field layout below is what scripts/testbed encodes and decodes, so change
// both together. Only IPv4 is impaired or counted: ARP passes untouched, so a blackholed
// plane keeps its neighbour entries and the kernel never notices (no rehash).
//
// Randomness comes from bpf_get_prandom_u32: the testbed is not a deterministic test tool.
// docs/testbed.md describes the topology and the commands.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// Configuration, all u64 so that the shell side encodes one field type. Zero disables.
struct tb_config {
    __u64 loss_ppm;   // random loss, parts per million of IPv4 packets
    __u64 blackhole;  // non-zero: drop every IPv4 packet
    __u64 rate_Bps;   // virtual queue drain rate in bytes/s; 0 = no marker, no tail drop
    __u64 kmin;       // bytes of virtual backlog where marking starts
    __u64 kmax;       // bytes where the probability reaches pmax; above it every packet is CE
    __u64 pmax_ppm;   // marking probability at kmax, parts per million
    __u64 limit;      // tail-drop limit of the virtual queue, bytes
    __u64 corrupt_ppm;  // flip one payload bit of this many per million large UDP datagrams
};

// Counter indices (a per-CPU array; the shell side sums the CPUs).
enum {
    TB_PKTS = 0,      // IPv4 packets seen
    TB_BYTES,         // their bytes (skb->len, L2 included)
    TB_LOSS_DROPS,    // dropped by random loss
    TB_BH_DROPS,      // dropped by the blackhole
    TB_QUEUE_DROPS,   // tail-dropped by the virtual queue
    TB_CE_MARKS,      // ECT packets this element set to CE
    TB_NOTECT_DROPS,  // Not-ECT packets dropped where an ECT one would have been marked
    TB_CORRUPTED,     // UDP datagrams with one payload bit flipped
    TB_NCOUNTERS,
};

// The virtual queue: backlog drained at rate_Bps since last_ns.
struct tb_vq {
    struct bpf_spin_lock lock;
    __u64 backlog;  // bytes
    __u64 last_ns;
    __u64 peak;     // largest backlog seen, bytes
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct tb_config);
} config SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, TB_NCOUNTERS);
    __type(key, __u32);
    __type(value, __u64);
} counters SEC(".maps");

// One virtual queue per receiving host (the low byte of the destination address, less one,
// as in scripts/testbed's 198.18.0.(i+1)): a plane element sees traffic towards every host
// in both directions, and a switch queues each egress port apart, so the data towards one
// host never delays (or drops) the ACKs going back. A host's bottleneck element sees one
// destination and so uses one entry.
#define TB_MAX_HOSTS 64

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, TB_MAX_HOSTS);
    __type(key, __u32);
    __type(value, struct tb_vq);
} vqueue SEC(".maps");

static __always_inline void count(__u32 index, __u64 amount) {
    __u64 *value = bpf_map_lookup_elem(&counters, &index);
    if (value) *value += amount;
}

// Longer gaps than this do not drain more (the queue is empty anyway); keeps the product
// elapsed * rate inside 64 bits for any rate up to ~18 GB/s.
#define TB_MAX_ELAPSED_NS 1000000000ULL

enum tb_verdict { TB_PASS, TB_MARK, TB_DROP_TAIL, TB_DROP_NOTECT };

// Adds len bytes to the virtual queue and decides: pass, mark (RED ramp / above kmax), or
// drop (tail, or a Not-ECT packet that would have been marked, as RED with `ecn` does). A
// dropped packet does not enter the queue.
static __always_inline enum tb_verdict vq_enqueue(const struct tb_config *cfg, __u32 len,
                                                  int ect, __u32 host) {
    struct tb_vq *vq = bpf_map_lookup_elem(&vqueue, &host);
    if (!vq) return TB_PASS;
    __u64 now = bpf_ktime_get_ns();
    __u64 random = bpf_get_prandom_u32() % 1000000;
    enum tb_verdict verdict = TB_PASS;

    bpf_spin_lock(&vq->lock);
    __u64 elapsed = now > vq->last_ns ? now - vq->last_ns : 0;
    if (elapsed > TB_MAX_ELAPSED_NS) elapsed = TB_MAX_ELAPSED_NS;
    __u64 drained = elapsed * cfg->rate_Bps / 1000000000ULL;
    __u64 backlog = vq->backlog > drained ? vq->backlog - drained : 0;
    // Keep the remainder of a partial byte: only advance the clock when something drained.
    if (drained > 0 || vq->backlog == 0) vq->last_ns = now;

    if (cfg->limit && backlog + len > cfg->limit) {
        verdict = TB_DROP_TAIL;
    } else {
        // Mark on the backlog the packet finds (including itself), as a RED queue would.
        __u64 q = backlog + len;
        if (q > cfg->kmax) {
            verdict = TB_MARK;
        } else if (q > cfg->kmin && cfg->kmax > cfg->kmin) {
            __u64 p = cfg->pmax_ppm * (q - cfg->kmin) / (cfg->kmax - cfg->kmin);
            if (random < p) verdict = TB_MARK;
        }
        if (verdict == TB_MARK && !ect)
            verdict = TB_DROP_NOTECT;
        else
            backlog += len;
    }
    vq->backlog = backlog;
    if (backlog > vq->peak) vq->peak = backlog;
    bpf_spin_unlock(&vq->lock);
    return verdict;
}

// Sets the ECN field to CE and patches the header checksum incrementally (RFC 1624).
static __always_inline void set_ce(struct iphdr *ip) {
    __u16 *word = (__u16 *)ip;  // version/ihl + tos: the first 16-bit word
    __u16 old_word = *word;
    ip->tos |= 0x3;
    __u16 new_word = *word;
    __u32 sum = (__u16)~bpf_ntohs(ip->check) + (__u16)~bpf_ntohs(old_word) + bpf_ntohs(new_word);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    ip->check = bpf_htons((__u16)~sum);
}

// Only datagrams at least this long are corrupted: data, not the small control packets,
// whose damage a receiver drops as malformed (the point is data that arrives wrong).
#define TB_CORRUPT_MIN_LEN 1024

// corrupt flips the lowest bit of the UDP payload's last whole 16-bit word (as a bad link
// or a buggy switch would, after the sender's checksum) and patches the UDP checksum to
// match, so the receiving kernel accepts the datagram: only an end-to-end check of the data
// can notice. Returns 1 if it changed the packet.
static __always_inline int corrupt(struct __sk_buff *skb, __u8 protocol, __u8 ihl) {
    if (protocol != 17 || skb->len < TB_CORRUPT_MIN_LEN) return 0;  // UDP only
    const __u32 udp = ETH_HLEN + ihl * 4;
    if (skb->len < udp + 8 + 2) return 0;
    const __u32 word = udp + ((skb->len - udp - 2) & ~1u);
    __u16 old_word, new_word, check;
    if (bpf_skb_load_bytes(skb, word, &old_word, 2) < 0) return 0;
    if (bpf_skb_load_bytes(skb, udp + 6, &check, 2) < 0) return 0;
    new_word = old_word ^ bpf_htons(1);
    if (bpf_skb_store_bytes(skb, word, &new_word, 2, 0) < 0) return 0;
    // A zero UDP checksum means none (IPv4); otherwise keep it right for the new word.
    if (check) bpf_l4_csum_replace(skb, udp + 6, old_word, new_word, BPF_F_MARK_MANGLED_0 | 2);
    return 1;
}

SEC("tc")
int testbed(struct __sk_buff *skb) {
    void *data = (void *)(long)skb->data;
    void *data_end = (void *)(long)skb->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > data_end) return TC_ACT_OK;
    if (eth->h_proto != bpf_htons(ETH_P_IP)) return TC_ACT_OK;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > data_end) return TC_ACT_OK;

    __u32 zero = 0;
    struct tb_config *cfg = bpf_map_lookup_elem(&config, &zero);
    if (!cfg) return TC_ACT_OK;

    count(TB_PKTS, 1);
    count(TB_BYTES, skb->len);

    if (cfg->blackhole) {
        count(TB_BH_DROPS, 1);
        return TC_ACT_SHOT;
    }
    if (cfg->loss_ppm && bpf_get_prandom_u32() % 1000000 < cfg->loss_ppm) {
        count(TB_LOSS_DROPS, 1);
        return TC_ACT_SHOT;
    }
    if (cfg->corrupt_ppm && bpf_get_prandom_u32() % 1000000 < cfg->corrupt_ppm) {
        if (corrupt(skb, ip->protocol, ip->ihl)) count(TB_CORRUPTED, 1);
        // A store invalidates every packet pointer: reload the header before using it again.
        data = (void *)(long)skb->data;
        data_end = (void *)(long)skb->data_end;
        ip = data + sizeof(struct ethhdr);
        if ((void *)(ip + 1) > data_end) return TC_ACT_OK;
    }
    if (!cfg->rate_Bps) return TC_ACT_OK;

    __u8 ecn = ip->tos & 0x3;
    const __u32 host = ((bpf_ntohl(ip->daddr) & 0xff) - 1) & (TB_MAX_HOSTS - 1);
    switch (vq_enqueue(cfg, skb->len, ecn != 0, host)) {
    case TB_PASS:
        return TC_ACT_OK;
    case TB_DROP_TAIL:
        count(TB_QUEUE_DROPS, 1);
        return TC_ACT_SHOT;
    case TB_DROP_NOTECT:
        count(TB_NOTECT_DROPS, 1);
        return TC_ACT_SHOT;
    case TB_MARK:
        break;
    }
    if (ecn != 0x3) {  // already CE: leave it, count nothing
        set_ce(ip);
        count(TB_CE_MARKS, 1);
    }
    return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
